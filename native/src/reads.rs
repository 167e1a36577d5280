//! Reading a queue: consume-queue units to the CommitLog records they point at, with a tag filter
//! and a byte budget (RocketMQ `DefaultMessageStore.getMessage`), one call per pull.
//!
//! Units are `i64 commitlog offset | i32 size | i64 tags code`, big-endian.  Walking them in order:
//! a blank unit (size 0x7FFFFFFF) is skipped; a unit pointing below the log's first offset is
//! skipped and reported (its record expired); a unit whose tags code is not wanted is skipped; a
//! record outside the given segment ends the call (the caller continues in the right segment); a
//! record that would take the answer past the byte budget ends it too, unless the answer is still
//! empty (`answered`: the bytes earlier calls for the same answer took, in other segments).
//! The records taken are copied once, back to back, into the answer.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::Bytes;
use crate::record::{be_i32, be_i64};

pub const BLANK_SIZE: i32 = 0x7FFF_FFFF;
const UNIT: usize = 20;

/// Why a read stopped before the end of the units.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    End,
    Budget,
    OtherSegment,
}

/// Reads the records of `units` from `segment` (commitlog offsets `[seg_base, seg_base + readable)`
/// are there).  Returns `(records, count, units consumed, offset of the last record taken or -1,
/// expired records seen, stop)` where stop is "end", "budget" or "segment" (the next unit's record is
/// in another segment: call again there with the rest of the units, the records taken so far as
/// `answered`; `max_bytes` is the whole answer's budget).
#[pyfunction]
#[pyo3(signature = (units, segment, seg_base, readable, *, log_min, max_bytes, tag_codes=None, answered=0))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn read_units<'py>(
    py: Python<'py>,
    units: &[u8],
    segment: &Bound<'py, PyAny>,
    seg_base: i64,
    readable: usize,
    log_min: i64,
    max_bytes: usize,
    tag_codes: Option<Vec<i64>>,
    answered: usize,
) -> PyResult<(Bound<'py, PyBytes>, usize, usize, i64, bool, &'static str)> {
    let buf = Bytes::readable(segment)?;
    let seg = buf.range(0, readable, "read_units")?;
    // SAFETY: the export is held for the call; bytes below `readable` are written and never change.
    let data = unsafe { seg.slice() };
    let wanted = |code: i64| tag_codes.as_ref().is_none_or(|codes| codes.contains(&code));
    let mut taken: Vec<(usize, usize)> = Vec::new();
    let (mut total, mut consumed, mut last, mut removed, mut stop) =
        (0usize, 0usize, -1i64, false, Stop::End);
    for unit in units.chunks_exact(UNIT) {
        let (phys, size, code) = (be_i64(unit, 0), be_i32(unit, 8), be_i64(unit, 12));
        if size == BLANK_SIZE || size <= 0 {
            consumed += 1;
            continue;
        }
        if phys < log_min {
            removed = true;
            consumed += 1;
            continue;
        }
        if !wanted(code) {
            consumed += 1;
            continue;
        }
        let size = size as usize;
        let rel = phys - seg_base;
        if rel < 0 || rel as usize + size > data.len() {
            stop = Stop::OtherSegment;
            break;
        }
        let held = answered.saturating_add(total);
        if held > 0 && held.saturating_add(size) > max_bytes {
            stop = Stop::Budget;
            break;
        }
        taken.push((rel as usize, size));
        total += size;
        last = phys;
        consumed += 1;
    }
    let blob = records_blob(py, data, &taken, total)?;
    let stop = match stop {
        Stop::End => "end",
        Stop::Budget => "budget",
        Stop::OtherSegment => "segment",
    };
    Ok((blob, taken.len(), consumed, last, removed, stop))
}

/// The `taken` `(position, size)` records of `data`, back to back in a new `bytes` of `total` bytes,
/// written once: `PyBytes::new_with` would zero the ~256 KiB of a pull's answer first.
fn records_blob<'py>(
    py: Python<'py>,
    data: &[u8],
    taken: &[(usize, usize)],
    total: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    assert_eq!(taken.iter().map(|&(_, size)| size).sum::<usize>(), total);
    assert!(taken.iter().all(|&(rel, size)| rel + size <= data.len()));
    // SAFETY: a NULL source makes CPython allocate `total` uninitialised bytes, owned by the new
    // object (or NULL and an exception on failure); the copies below write each of them exactly
    // once, from within `data` (checked above), before anything can read the object.
    unsafe {
        let blob = Bound::from_owned_ptr_or_err(
            py,
            ffi::PyBytes_FromStringAndSize(std::ptr::null(), total as ffi::Py_ssize_t),
        )?
        .cast_into_unchecked::<PyBytes>();
        let out = ffi::PyBytes_AsString(blob.as_ptr()).cast::<u8>();
        let mut at = 0;
        for &(rel, size) in taken {
            std::ptr::copy_nonoverlapping(data.as_ptr().add(rel), out.add(at), size);
            at += size;
        }
        Ok(blob)
    }
}
