//! Any index file bytes (header and slots included) and any entries: inserts stay inside the file,
//! the entry count never passes the maximum, never a panic.
#![no_main]
use _native::dispatch::IndexEntry;
use _native::index;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let slots = 1 + data[0] as usize % 17;
    let max_entries = 2 + data[1] as usize % 40;
    let size = index::HEADER + slots * 4 + max_entries * 20;
    let mut file = vec![0u8; size];
    let header = &data[2..];
    let n = header.len().min(size);
    file[..n].copy_from_slice(&header[..n]);
    let entries: Vec<IndexEntry> = header
        .chunks_exact(12)
        .map(|c| IndexEntry {
            hash: i32::from_be_bytes(c[0..4].try_into().unwrap()),
            phys: i64::from_be_bytes(c[4..12].try_into().unwrap()),
            store_ts: i64::from_be_bytes(c[4..12].try_into().unwrap()) >> 3,
        })
        .collect();
    let done = index::put(&mut file, slots, max_entries, &entries);
    assert!(done <= entries.len());
    assert_eq!(file.len(), size);
});
