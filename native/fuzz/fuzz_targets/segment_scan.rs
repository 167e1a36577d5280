//! Any bytes as a CommitLog segment: the walk stops inside the buffer with records that each parse
//! whole and tile the walked range, never a panic or a read out of bounds.
#![no_main]
use _native::record::{self, Parsed};
use _native::scan;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let (flags, seg) = data.split_at(1);
    let base = if flags[0] & 1 == 1 { Some(0) } else { None };
    let torn = if flags[0] & 2 == 2 { Some(0) } else { None };
    let w = scan::walk(seg, base, 0, seg.len(), flags[0] & 4 == 4, torn);
    assert!(w.end <= seg.len());
    let mut at = 0i64;
    for (&p, &n) in w.positions.iter().zip(&w.sizes) {
        assert_eq!(p, at);
        assert!(
            matches!(record::parse(seg, p as usize, seg.len()), Parsed::Record(v) if v.size as i64 == n)
        );
        at += n;
    }
    assert_eq!(at as usize, w.end);
});
