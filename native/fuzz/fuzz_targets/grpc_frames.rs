//! Any bytes, cut into DATA chunks anywhere, as a gRPC request stream: whole messages or an error,
//! never a panic; the messages are exactly what a reference parse of the whole input gives, none is
//! longer than the limit, and the decoder never holds more than one limit's worth of bytes beyond
//! the chunk just pushed.
#![no_main]
use _native::grpc_frame::{Decoder, PREFIX_BYTES};
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 1 << 12;

/// The messages of `data` parsed in one piece, and whether it ended cleanly.
fn reference(data: &[u8]) -> (Vec<Vec<u8>>, bool) {
    let (mut out, mut pos) = (Vec::new(), 0);
    while data.len() - pos >= PREFIX_BYTES {
        let len = u32::from_be_bytes(data[pos + 1..pos + 5].try_into().unwrap()) as usize;
        if data[pos] != 0 || len > LIMIT {
            return (out, false);
        }
        if data.len() - pos - PREFIX_BYTES < len {
            return (out, false);
        }
        out.push(data[pos + PREFIX_BYTES..pos + PREFIX_BYTES + len].to_vec());
        pos += PREFIX_BYTES + len;
    }
    (out, pos == data.len())
}

fuzz_target!(|input: &[u8]| {
    // the first byte chooses the chunk size, the rest is the stream
    let Some((&cut, data)) = input.split_first() else {
        return;
    };
    let chunk = usize::from(cut) + 1;
    let mut d = Decoder::new(LIMIT);
    let (mut got, mut failed) = (Vec::new(), false);
    'outer: for part in data.chunks(chunk) {
        d.push(part);
        loop {
            match d.next_message() {
                Ok(Some(m)) => {
                    assert!(m.len() <= LIMIT);
                    got.push(m.to_vec());
                }
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break 'outer;
                }
            }
        }
        assert!(d.buffered() <= LIMIT + PREFIX_BYTES + chunk);
    }
    let clean = !failed && d.finish().is_ok();
    let (want, want_clean) = reference(data);
    assert_eq!(clean, want_clean);
    if !failed {
        assert_eq!(got, want);
    } else {
        assert!(want.starts_with(&got));
    }
});
