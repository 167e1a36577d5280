//! Walking a CommitLog segment: record boundaries and validation, for recovery, `store verify`,
//! rebuilds and the Spark store reader.
//!
//! From `start`, each record is checked (magic, size, lengths adding up to TOTALSIZE,
//! PHYSICALOFFSET equal to its position, and the body CRC when asked) and the walk follows
//! TOTALSIZE to the next.  It stops at:
//! * fewer than 8 bytes before `limit`, or 8 zero bytes: the end of the data, no error;
//! * a blank record reaching exactly to `limit`: the segment was closed (`blank`);
//! * anything else: `error = (commitlog offset, reason)`; the caller decides whether that is a
//!   torn tail or damage.
//!
//! With `torn_from`, a record at or after that commitlog offset whose last tail byte (the
//! properties' last byte, or the topic's when there are none) is zero also stops the walk: such a
//! record was torn by a crash after its header and body were written.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::Bytes;
use crate::record::{self, be_i32, be_u32, Parsed, BLANK_MAGIC};

pub struct Walk {
    pub positions: Vec<i64>,
    pub sizes: Vec<i64>,
    pub end: usize,
    pub blank: bool,
    pub error: Option<(i64, String)>,
}

/// What the walk finds at one position (see the module doc for the checks).
pub enum Step<'a> {
    /// A record that passed every check; the next is at its position plus `size`.
    Record(record::View<'a>),
    /// The end of the data: fewer than 8 bytes before `limit`, or 8 zero bytes.
    End,
    /// A blank record reaching exactly to `limit`: the segment was closed.
    Blank,
    /// Bytes that are no valid record: (commitlog offset, reason).
    Error(i64, String),
}

/// The walk's checks of the record at `pos` (`base` as in [`walk`]).
pub fn step(
    data: &[u8],
    base: Option<i64>,
    pos: usize,
    limit: usize,
    check_crc: bool,
    torn_from: Option<i64>,
) -> Step<'_> {
    if limit < pos + 8 {
        return Step::End;
    }
    let size = be_i32(data, pos);
    let magic = be_u32(data, pos + 4);
    if size == 0 && magic == 0 {
        return Step::End;
    }
    let offset = base.unwrap_or(0) + pos as i64;
    if magic == BLANK_MAGIC && size >= 8 && size as usize == limit - pos {
        return Step::Blank;
    }
    let v = match record::parse(data, pos, limit) {
        Parsed::Record(v) => v,
        Parsed::Blank(n) => {
            let reason = format!("blank record of size {n} does not reach the segment end");
            return Step::Error(offset, reason);
        }
        Parsed::Bad(reason) => return Step::Error(offset, reason),
    };
    if base.is_some() && v.physical_offset != offset {
        let reason = format!("record claims physical offset {}", v.physical_offset);
        return Step::Error(offset, reason);
    }
    if check_crc {
        let crc = record::body_crc(v.body);
        if crc != v.body_crc {
            let reason = format!(
                "body CRC 0x{crc:08X} does not match the stored 0x{:08X}",
                v.body_crc
            );
            return Step::Error(offset, reason);
        }
    }
    if torn_from.is_some_and(|t| offset >= t) {
        let tail_zero = match v.props.last() {
            Some(&b) => b == 0,
            None => v.topic.last().is_none_or(|&b| b == 0),
        };
        if tail_zero || v.topic.is_empty() {
            let reason = "the last byte of its topic/properties tail is zero: never written".into();
            return Step::Error(offset, reason);
        }
    }
    Step::Record(v)
}

/// `base` is the commitlog offset of `data[0]`; None for records that are not at their log
/// position (a pull's body), whose PHYSICALOFFSET is then not checked.
pub fn walk(
    data: &[u8],
    base: Option<i64>,
    start: usize,
    limit: usize,
    check_crc: bool,
    torn_from: Option<i64>,
) -> Walk {
    let mut w = Walk {
        positions: Vec::new(),
        sizes: Vec::new(),
        end: start,
        blank: false,
        error: None,
    };
    let mut pos = start;
    loop {
        match step(data, base, pos, limit, check_crc, torn_from) {
            Step::Record(v) => {
                w.positions.push(pos as i64);
                w.sizes.push(v.size as i64);
                pos += v.size;
            }
            Step::End => break,
            Step::Blank => {
                w.blank = true;
                break;
            }
            Step::Error(offset, reason) => {
                w.error = Some((offset, reason));
                break;
            }
        }
    }
    w.end = pos;
    w
}

fn ne_bytes<'py>(py: Python<'py>, values: &[i64]) -> Bound<'py, PyBytes> {
    PyBytes::new_with(py, values.len() * 8, |out| {
        for (chunk, v) in out.chunks_exact_mut(8).zip(values) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        Ok(())
    })
    .expect("allocating the result")
}

/// Walks `segment[start:limit]`; returns `(positions, sizes, end, blank, error)` where positions
/// and sizes are native-endian int64 arrays as bytes (segment-relative) and error is None or
/// `(commitlog offset, reason)`.  With `base_offset` None the records' PHYSICALOFFSET is not checked.
#[pyfunction]
#[pyo3(signature = (segment, base_offset, start, limit, *, check_crc, torn_from=None))]
#[allow(clippy::type_complexity)]
pub fn scan_segment<'py>(
    py: Python<'py>,
    segment: &Bound<'py, PyAny>,
    base_offset: Option<i64>,
    start: usize,
    limit: usize,
    check_crc: bool,
    torn_from: Option<i64>,
) -> PyResult<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    usize,
    bool,
    Option<(i64, String)>,
)> {
    let buf = Bytes::readable(segment)?;
    let whole = buf.range(0, limit, "scan_segment")?;
    if start > limit {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "scan_segment: start {start} is past limit {limit}"
        )));
    }
    // SAFETY: the export is held for the whole call.
    let run = || {
        walk(
            unsafe { whole.slice() },
            base_offset,
            start,
            limit,
            check_crc,
            torn_from,
        )
    };
    let w = if limit - start >= crate::batch::DETACH_FROM_BYTES {
        py.detach(run)
    } else {
        run()
    };
    Ok((
        ne_bytes(py, &w.positions),
        ne_bytes(py, &w.sizes),
        w.end,
        w.blank,
        w.error,
    ))
}

/// The first position `p` in `[lo, hi)` where a record could start: the V1 magic at `p + 4` and
/// PHYSICALOFFSET equal to `base_offset + p` (resynchronising after damage); None when there is none.
#[pyfunction]
pub fn find_record_start(
    py: Python<'_>,
    segment: &Bound<'_, PyAny>,
    base_offset: i64,
    lo: usize,
    hi: usize,
) -> PyResult<Option<usize>> {
    let buf = Bytes::readable(segment)?;
    let raw = buf.raw();
    let magic = record::MAGIC_V1.to_be_bytes();
    let search = || {
        // SAFETY: the export is held for the call.
        let data = unsafe { raw.slice() };
        let hi = hi.min(data.len());
        let mut p = lo;
        while p < hi && p + record::PHYSICAL_OFFSET_POS + 8 <= data.len() {
            if data[p + 4..p + 8] == magic
                && record::be_i64(data, p + record::PHYSICAL_OFFSET_POS) == base_offset + p as i64
            {
                return Some(p);
            }
            p += 1;
        }
        None
    };
    Ok(
        if hi.saturating_sub(lo) >= crate::batch::DETACH_FROM_BYTES {
            py.detach(search)
        } else {
            search()
        },
    )
}
