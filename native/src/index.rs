//! Index file inserts (RocketMQ `IndexFile.putKey`), a run of entries per call.
//!
//! Layout (big-endian; see `rocketq/store/index_file.py` for the whole table): a 40-byte header
//! `beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64 |
//! hashSlotCount i32 | indexCount i32`, then `slot_count` i32 slots (newest entry number of the
//! slot, 0 = empty), then 20-byte entries `keyHash i32 | phyOffset i64 | timeDiff i32 | prevIndex i32`.
//! Entry numbers start at 1.  Each entry is linked exactly as one `putKey` call would link it;
//! the header is written once, after the entries and slots.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::buffers::Bytes;
use crate::dispatch::{DispatchRun, IndexEntry};
use crate::record::{be_i32, be_i64};

pub const HEADER: usize = 40;
const SLOT: usize = 4;
const ENTRY: usize = 20;
const MAX_TIME_DIFF_S: i64 = i32::MAX as i64;
/// Entries ahead whose slot is prefetched: the slot table (20 MB by default) is read at random, one
/// cache miss per entry unless the load starts early; 8 entries of work covers a miss.
const PREFETCH_AHEAD: usize = 8;
/// From this many entries a put runs with the GIL released (the writer appends meanwhile); fewer
/// take less time than handing the GIL over and back.
const DETACH_FROM_ENTRIES: usize = 2048;

#[inline]
fn slot_pos(hash: i32, slot_count: usize) -> usize {
    HEADER + (hash as i64).rem_euclid(slot_count as i64) as usize * SLOT
}

/// Starts loading the cache line of `mm[pos]` (a hint: no fault, no effect on the result).
#[inline]
fn prefetch(mm: &[u8], pos: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = mm.get(pos) {
        // SAFETY: a prefetch of a valid address only warms the cache.
        unsafe {
            core::arch::x86_64::_mm_prefetch(
                b as *const u8 as *const i8,
                core::arch::x86_64::_MM_HINT_T0,
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (mm, pos);
}

/// Puts as many of `entries` as fit; returns how many.
pub fn put(mm: &mut [u8], slot_count: usize, max_entries: usize, entries: &[IndexEntry]) -> usize {
    let mut begin_ts = be_i64(mm, 0);
    let mut end_ts = be_i64(mm, 8);
    let mut begin_phy = be_i64(mm, 16);
    let mut end_phy = be_i64(mm, 24);
    let mut used_slots = be_i32(mm, 32);
    let mut count = be_i32(mm, 36).max(1) as usize;
    let entries_pos = HEADER + slot_count * SLOT;
    let mut done = 0;
    for (i, e) in entries.iter().enumerate() {
        if count >= max_entries {
            break;
        }
        if let Some(ahead) = entries.get(i + PREFETCH_AHEAD) {
            prefetch(mm, slot_pos(ahead.hash, slot_count));
        }
        if count == 1 {
            begin_ts = e.store_ts;
            begin_phy = e.phys;
        }
        let slot_pos = slot_pos(e.hash, slot_count);
        let mut old = be_i32(mm, slot_pos);
        if old <= 0 || old as usize > count {
            old = 0; // outside the written entries: RocketMQ treats it as empty
        }
        let tdiff = if begin_ts <= 0 {
            0
        } else {
            (e.store_ts.saturating_sub(begin_ts).div_euclid(1000)).clamp(0, MAX_TIME_DIFF_S)
        };
        let at = entries_pos + count * ENTRY;
        mm[at..at + 4].copy_from_slice(&e.hash.to_be_bytes());
        mm[at + 4..at + 12].copy_from_slice(&e.phys.to_be_bytes());
        mm[at + 12..at + 16].copy_from_slice(&(tdiff as i32).to_be_bytes());
        mm[at + 16..at + 20].copy_from_slice(&old.to_be_bytes());
        mm[slot_pos..slot_pos + 4].copy_from_slice(&(count as i32).to_be_bytes());
        if old == 0 {
            used_slots = used_slots.saturating_add(1);
        }
        end_ts = e.store_ts;
        end_phy = e.phys;
        count += 1;
        done += 1;
    }
    if done > 0 {
        mm[0..8].copy_from_slice(&begin_ts.to_be_bytes());
        mm[8..16].copy_from_slice(&end_ts.to_be_bytes());
        mm[16..24].copy_from_slice(&begin_phy.to_be_bytes());
        mm[24..32].copy_from_slice(&end_phy.to_be_bytes());
        mm[32..36].copy_from_slice(&used_slots.to_be_bytes());
        mm[36..40].copy_from_slice(&(count as i32).to_be_bytes());
    }
    done
}

fn checked(file: &mut Bytes, slot_count: usize, max_entries: usize) -> PyResult<&mut [u8]> {
    let size = HEADER + slot_count * SLOT + max_entries * ENTRY;
    if slot_count == 0 || max_entries < 2 || file.len() != size {
        return Err(PyValueError::new_err(format!(
            "an index file of {slot_count} slots and {max_entries} entries has {size} bytes, the buffer {}", file.len())));
    }
    // SAFETY: the export is held by the caller for the borrow; the index service's lock makes
    // this the only writer.
    Ok(unsafe { file.raw().slice_mut() })
}

/// Puts the run's index entries from `start` into the file mapped by `file`; returns how many fit.
/// A long run is put with the GIL released (the caller's lock keeps other writers out; the export
/// keeps the mapping alive).
#[pyfunction]
pub fn index_put_run(
    py: Python<'_>,
    file: &Bound<'_, PyAny>,
    slot_count: usize,
    max_entries: usize,
    run: &DispatchRun,
    start: usize,
) -> PyResult<usize> {
    let mut buf = Bytes::writable(file)?;
    let mm = checked(&mut buf, slot_count, max_entries)?;
    let entries = run.index.get(start..).unwrap_or(&[]);
    Ok(if entries.len() >= DETACH_FROM_ENTRIES {
        py.detach(|| put(mm, slot_count, max_entries, entries))
    } else {
        put(mm, slot_count, max_entries, entries)
    })
}

/// Puts `(hash, commitlog offset, store time)` entries; returns how many fit.
#[pyfunction]
pub fn index_put(
    file: &Bound<'_, PyAny>,
    slot_count: usize,
    max_entries: usize,
    entries: Vec<(i32, i64, i64)>,
) -> PyResult<usize> {
    let mut buf = Bytes::writable(file)?;
    let mm = checked(&mut buf, slot_count, max_entries)?;
    let entries: Vec<IndexEntry> = entries
        .into_iter()
        .map(|(hash, phys, store_ts)| IndexEntry {
            hash,
            phys,
            store_ts,
        })
        .collect();
    Ok(put(mm, slot_count, max_entries, &entries))
}
