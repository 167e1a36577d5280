//! Any bytes as a SEND_MESSAGE header's properties string: the broker's fast path takes it as it
//! is only when it is whole `name\x01value\x02` pairs (the last separator may be missing) with
//! distinct, non-empty names none of which asks for policy; then the pairs are the ones the
//! general path's split finds, and its UNIQ_KEY and sharding key are theirs. Never a panic.
#![no_main]
use _native::props;
use _native::send::plain_properties;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(plain) = plain_properties(data) else {
        return;
    };
    let terminated = data.is_empty() || data.ends_with(b"\x02");
    assert_eq!(plain.terminated, terminated);
    let mut whole = data.to_vec();
    if !terminated {
        whole.push(b'\x02');
    }
    assert!(props::well_formed(&whole));
    let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
    props::for_each(data, |name, value| pairs.push((name, value)));
    assert_eq!(pairs.len(), whole.iter().filter(|&&b| b == b'\x02').count());
    for (i, (name, _)) in pairs.iter().enumerate() {
        assert!(!pairs[..i].iter().any(|(other, _)| other == name));
        assert!(
            !matches!(*name, b"DELAY" | b"TRAN_MSG" | b"CLUSTER") && !name.starts_with(b"TIMER_")
        );
    }
    let value_of = |wanted: &[u8]| pairs.iter().find(|(n, _)| *n == wanted).map(|&(_, v)| v);
    assert_eq!(plain.uniq_key, value_of(b"UNIQ_KEY"));
    assert_eq!(plain.sharding_key, value_of(b"__SHARDINGKEY").is_some());
});
