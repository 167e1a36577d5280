//! Any bytes as records to dispatch: units and index entries only for records that parse, offsets
//! inside the buffer, never a panic.
#![no_main]
use _native::dispatch;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let run = dispatch::walk(data, 0, data.len(), 0, &[1000, 5000], true, None);
    assert!(run.end() <= data.len());
    let cut = dispatch::walk(data, 0, data.len(), 0, &[1000], true, Some(data.len() / 2));
    assert!(cut.end() <= run.end() || run.error().is_some());
});
