//! Any bytes as a JSON remoting header: the one-pass scanner (json_header.rs) either defers or gives
//! exactly what serde_json's `Value` path gives for the same bytes - never a header that path would
//! refuse or read differently, never a panic.
#![no_main]
use _native::frame::{self, Header};
use _native::json_header;
use libfuzzer_sys::fuzz_target;

type Fields<'a> = (
    i32,
    u8,
    i32,
    i32,
    i32,
    &'a Option<String>,
    &'a [(String, String)],
);

fn fields(h: &Header) -> Fields<'_> {
    (
        h.code, h.language, h.version, h.opaque, h.flag, &h.remark, &h.ext,
    )
}

fuzz_target!(|data: &[u8]| {
    if let Some(fast) = json_header::decode(data) {
        match frame::decode_json(data) {
            Ok(slow) => assert_eq!(fields(&fast), fields(&slow)),
            Err(e) => panic!("the scanner accepted a header serde's path refuses: {e}"),
        }
    }
});
