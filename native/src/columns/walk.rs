//! The segment walk and the decoding in one pass ([`walk_columns`]; see the `columns` module doc),
//! and the same over several pulled bodies into one set of columns ([`walk_bodies_columns`]: the
//! topic source gathers a chunk's pulls, ~20 MB, without first copying them into one `bytes`).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{columns_dict, Columns, Keep, Pairs, SAMPLE_ROWS};
use crate::buffers::{Bytes, RawParts};
use crate::record;
use crate::scan::{self, Step};

/// Why [`fill_walk`] returned.
pub(super) enum WalkStop {
    /// `max_rows` records were walked, or a column would pass 2 GiB: walk on from `end`.
    More,
    /// `hi` was reached, or the end of the data (zeros, a closing blank record).
    Done,
    /// The record at this commitlog offset fails a check: (offset, reason).
    Error(i64, String),
}

/// The walk (`scan::step`'s checks) from `start`, adding to `c` the records starting before `hi`
/// that `keep` keeps, at most `max_rows` records walked (`later_bytes`: bytes still to walk after
/// `hi`, in further calls, for the columns' reservation); returns where the walk stopped (the
/// position of the next record, or of the damage), how many records it walked, and why.
#[allow(clippy::too_many_arguments)]
pub(super) fn fill_walk(
    c: &mut Columns,
    bytes: &[u8],
    base: Option<i64>,
    start: usize,
    hi: usize,
    limit: usize,
    max_rows: usize,
    check_crc: bool,
    keep: &Keep,
    later_bytes: usize,
) -> (usize, usize, WalkStop) {
    let mut pairs: Pairs = Vec::new();
    let (mut pos, mut walked) = (start, 0);
    let stop = loop {
        if pos >= hi {
            break WalkStop::Done;
        }
        if walked == max_rows {
            break WalkStop::More;
        }
        match scan::step(bytes, base, pos, limit, check_crc, None) {
            Step::Record(v) => {
                if keep.keeps(&v) {
                    if !c.fits(v.size) {
                        break WalkStop::More; // the caller asks again from `pos`
                    }
                    c.add(&bytes[pos..pos + v.size], &v, &mut pairs);
                    if c.queue_id.len() == SAMPLE_ROWS {
                        let per_record = (pos + v.size - start) / (walked + 1);
                        let left = (hi - pos + later_bytes) / per_record.max(1) + 1;
                        c.reserve_like_sample(left.min(max_rows - walked));
                    }
                }
                pos += v.size;
                walked += 1;
            }
            Step::End | Step::Blank => break WalkStop::Done,
            Step::Error(offset, reason) => break WalkStop::Error(offset, reason),
        }
    };
    (pos, walked, stop)
}

/// Walks `buf[start:limit]` as `scan_segment` does (`base_offset` the commitlog offset of `buf[0]`,
/// or None for a pull's body, whose PHYSICALOFFSETs are then not checked) and returns the columns
/// of the records that start before `hi`, at most `max_rows` of them walked, keeping only those
/// of `topics` stored in `[min_store_ms, max_store_ms)` as [`super::record_columns`] does.  The dict holds
/// the columns as `record_columns` gives them, plus `end` (where the walk stopped: the next
/// record, or the damaged one), `more` (True when it stopped only at `max_rows` or a column's
/// 2 GiB before `hi`: call again from `end`) and `error` (None, or `(commitlog offset, reason)` of
/// the record at `end` that fails a check).
#[pyfunction]
#[pyo3(signature = (buf, base_offset, start, hi, limit, max_rows, *, check_crc, topics=None,
                    min_store_ms=None, max_store_ms=None))]
#[allow(clippy::too_many_arguments)]
pub fn walk_columns<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    base_offset: Option<i64>,
    start: usize,
    hi: usize,
    limit: usize,
    max_rows: usize,
    check_crc: bool,
    topics: Option<Vec<String>>,
    min_store_ms: Option<i64>,
    max_store_ms: Option<i64>,
) -> PyResult<Bound<'py, PyDict>> {
    let data = Bytes::readable(buf)?;
    let whole = data.range(0, limit, "walk_columns")?;
    if start > limit || max_rows == 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "walk_columns: start {start} is past limit {limit}, or max_rows {max_rows} is not positive"
        )));
    }
    let hi = hi.min(limit);
    let keep = Keep::new(topics, min_store_ms, max_store_ms);
    // SAFETY: the export is held for the call.
    let build = || {
        let bytes = unsafe { whole.slice() };
        walk_range(bytes, base_offset, start, hi, max_rows, check_crc, &keep)
    };
    let (c, end, stop) = if hi.saturating_sub(start) >= crate::batch::DETACH_FROM_BYTES {
        py.detach(build)
    } else {
        build()
    };
    let out = columns_dict(py, c)?;
    out.set_item("end", end)?;
    out.set_item("more", matches!(stop, WalkStop::More))?;
    out.set_item(
        "error",
        match stop {
            WalkStop::Error(offset, reason) => Some((offset, reason)),
            _ => None,
        },
    )?;
    Ok(out)
}

/// [`fill_walk`] of `bytes[start..]` (up to `bytes.len()`) into new columns sized for the range:
/// the columns, where the walk stopped and why.
pub(super) fn walk_range(
    bytes: &[u8],
    base_offset: Option<i64>,
    start: usize,
    hi: usize,
    max_rows: usize,
    check_crc: bool,
    keep: &Keep,
) -> (Columns, usize, WalkStop) {
    let mut c = Columns::new(max_rows.min((hi - start.min(hi)) / record::MIN_RECORD + 1));
    let (end, _, stop) = fill_walk(
        &mut c,
        bytes,
        base_offset,
        start,
        hi,
        bytes.len(),
        max_rows,
        check_crc,
        keep,
        0,
    );
    (c, end, stop)
}

/// Why [`fill_bodies`] returned.
pub(super) enum BodiesStop {
    /// `max_rows` records were walked, or a column would pass 2 GiB: walk on from `end`.
    More,
    /// Every body was walked to its end.
    Done,
    /// Bytes of body number `.0` at byte `.1` are no record: (body, byte, reason).
    Error(usize, usize, String),
}

/// [`fill_walk`] over `bodies` in order from `bodies[body][pos..]`, as over one pull body each
/// (no log offsets, no CRC), into one set of columns; returns them, where the walk stopped
/// (body, byte) and why.  A body must hold whole records to its end.
pub(super) fn fill_bodies(
    bodies: &[RawParts],
    mut body: usize,
    mut pos: usize,
    max_rows: usize,
) -> (Columns, usize, usize, BodiesStop) {
    let total: usize = bodies[body.min(bodies.len())..]
        .iter()
        .map(|b| b.len)
        .sum::<usize>()
        - pos;
    let mut c = Columns::new(max_rows.min(total / record::MIN_RECORD + 1));
    let (keep, mut left, mut later) = (Keep::default(), max_rows, total);
    let stop = loop {
        let Some(raw) = bodies.get(body) else {
            break BodiesStop::Done;
        };
        // SAFETY: the caller holds every body's export for the call.
        let bytes = unsafe { raw.slice() };
        later -= bytes.len() - pos;
        let (end, walked, stop) = fill_walk(
            &mut c,
            bytes,
            None,
            pos,
            bytes.len(),
            bytes.len(),
            left,
            false,
            &keep,
            later,
        );
        (left, pos) = (left - walked, end);
        match stop {
            WalkStop::More => break BodiesStop::More,
            WalkStop::Error(at, reason) => break BodiesStop::Error(body, at as usize, reason),
            WalkStop::Done if end < bytes.len() => {
                let reason = format!("the last {} bytes are no record", bytes.len() - end);
                break BodiesStop::Error(body, end, reason);
            }
            WalkStop::Done => (body, pos) = (body + 1, 0),
        }
    };
    (c, body, pos, stop)
}

/// The records of `bodies` (PULL_MESSAGE bodies: records back to back, each body whole), from
/// `bodies[start_body][start_pos:]` on, walked and decoded as [`walk_columns`] does one body
/// (`base_offset=None`, no CRC check) into one set of columns, at most `max_rows` records.  The
/// dict holds the columns as `walk_columns` gives them, plus `end` (`(body, byte)` where the walk
/// stopped), `more` (True when it stopped at `max_rows` or a column's 2 GiB: call again from
/// `end`) and `error` (None, or `(body, byte, reason)` of bytes that are no record).
#[pyfunction]
#[pyo3(signature = (bodies, start_body, start_pos, max_rows))]
pub fn walk_bodies_columns<'py>(
    py: Python<'py>,
    bodies: Vec<Bound<'py, PyAny>>,
    start_body: usize,
    start_pos: usize,
    max_rows: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let exports = bodies
        .iter()
        .map(Bytes::readable)
        .collect::<PyResult<Vec<Bytes>>>()?;
    let first_len = exports.get(start_body).map_or(0, Bytes::len);
    if start_body > exports.len() || start_pos > first_len || max_rows == 0 {
        return Err(PyValueError::new_err(format!(
            "walk_bodies_columns: start {start_body}:{start_pos} is outside {} bodies, or max_rows \
             {max_rows} is not positive",
            exports.len()
        )));
    }
    let raws: Vec<RawParts> = exports.iter().map(Bytes::raw).collect();
    let total: usize = raws.iter().map(|r| r.len).sum();
    let build = || fill_bodies(&raws, start_body, start_pos, max_rows);
    let (c, body, pos, stop) = if total >= crate::batch::DETACH_FROM_BYTES {
        py.detach(build)
    } else {
        build()
    };
    drop(exports);
    let out = columns_dict(py, c)?;
    out.set_item("end", (body, pos))?;
    out.set_item("more", matches!(stop, BodiesStop::More))?;
    out.set_item(
        "error",
        match stop {
            BodiesStop::Error(body, at, reason) => Some((body, at, reason)),
            _ => None,
        },
    )?;
    Ok(out)
}
