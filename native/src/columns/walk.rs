//! The segment walk and the decoding in one pass ([`walk_columns`]; see the `columns` module doc).

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{columns_dict, Columns, Keep, Pairs, SAMPLE_ROWS};
use crate::buffers::Bytes;
use crate::record;
use crate::scan::{self, Step};

/// Why [`fill_walk`] returned.
enum WalkStop {
    /// `max_rows` records were walked, or a column would pass 2 GiB: walk on from `end`.
    More,
    /// `hi` was reached, or the end of the data (zeros, a closing blank record).
    Done,
    /// The record at this commitlog offset fails a check: (offset, reason).
    Error(i64, String),
}

/// The walk (`scan::step`'s checks) from `start`, decoding the records starting before `hi` that
/// `keep` keeps, at most `max_rows` records walked; returns the columns, where the walk stopped
/// (the position of the next record, or of the damage) and why.
#[allow(clippy::too_many_arguments)]
fn fill_walk(
    bytes: &[u8],
    base: Option<i64>,
    start: usize,
    hi: usize,
    limit: usize,
    max_rows: usize,
    check_crc: bool,
    keep: &Keep,
) -> (Columns, usize, WalkStop) {
    let expected = max_rows.min((hi.saturating_sub(start)) / record::MIN_RECORD + 1);
    let mut c = Columns::new(expected);
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
                        let left = (hi - pos) / per_record.max(1) + 1;
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
    (c, pos, stop)
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
        fill_walk(
            bytes,
            base_offset,
            start,
            hi,
            limit,
            max_rows,
            check_crc,
            &keep,
        )
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
