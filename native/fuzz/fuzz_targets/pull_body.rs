//! Any bytes as a pull answer's body: the client's decoder either reads records that tile the body
//! exactly, each with its parts inside it, or names a byte inside the body where a bad one starts;
//! never a panic or a read out of bounds.
#![no_main]
use _native::pulled;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match pulled::read_body(data) {
        Ok(records) => {
            let mut at = 0usize;
            for f in &records {
                assert_eq!(f.pos, at);
                let end = f.pos + f.size;
                for (start, stop) in [f.body, f.topic, f.props] {
                    assert!(f.pos <= start && start <= stop && stop <= end);
                }
                at = end;
            }
            assert_eq!(at, data.len());
        }
        Err((pos, _reason)) => assert!(pos < data.len()),
    }
});
