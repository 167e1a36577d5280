//! Any bytes as a remoting stream: frames split and headers decoded or an error, never a panic;
//! a frame never claims more bytes than are there.
#![no_main]
use _native::frame::{self, Next};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut pos = 0;
    while pos < data.len() {
        match frame::next_frame(&data[pos..], 1 << 16) {
            Next::Frame { len, body, .. } => {
                assert!(len >= 8 && pos + len <= data.len() && body.len() <= len);
                pos += len;
            }
            Next::NeedMore | Next::Error(_) => break,
        }
    }
});
