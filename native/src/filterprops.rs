//! The property values SQL92 filters read, for the records a run of consume-queue units points at,
//! dictionary-encoded: one call per dispatched queue run (the bit-map prefilter,
//! `rocketq.store.filter_bitmap`).
//!
//! For each requested name the answer is the distinct values seen (as Python strings) and, per
//! unit, an `i32` code: the value's index, `ABSENT` when the record has no such property, `UNKNOWN`
//! when the value is not UTF-8 or the record cannot be read here (outside the segment, not a
//! record).  Python evaluates each filter once per distinct combination of codes, so a batch of a
//! million messages with a handful of distinct `region` values costs a handful of evaluations.
//! Values are looked up the last-wins way, as the pull-time evaluator reads them.

use std::collections::HashMap;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::Bytes;
use crate::props;
use crate::record::{self, be_i32, be_i64, Parsed};

pub const ABSENT: i32 = -1;
pub const UNKNOWN: i32 = -2;
const UNIT: usize = 20;
const BLANK_SIZE: i32 = 0x7FFF_FFFF;

/// For the records `units` point at in `segment` (log offsets `[seg_base, seg_base + readable)`):
/// `(store timestamps as i64 little-endian per unit (0 when unreadable), [(distinct values, codes as
/// i32 little-endian per unit) per name])`.
#[pyfunction]
#[pyo3(signature = (units, segment, seg_base, readable, names))]
#[allow(clippy::type_complexity)]
pub fn property_codes<'py>(
    py: Python<'py>,
    units: &[u8],
    segment: &Bound<'py, PyAny>,
    seg_base: i64,
    readable: usize,
    names: Vec<String>,
) -> PyResult<(Bound<'py, PyBytes>, Vec<(Vec<String>, Bound<'py, PyBytes>)>)> {
    let buf = Bytes::readable(segment)?;
    let seg = buf.range(0, readable, "property_codes")?;
    // SAFETY: the export is held for the call; bytes below `readable` are written and never change.
    let data = unsafe { seg.slice() };
    let n = units.len() / UNIT;
    let mut times: Vec<i64> = Vec::with_capacity(n);
    let mut cols: Vec<Column> = names.iter().map(|_| Column::with_capacity(n)).collect();
    let mut found: Vec<Option<&[u8]>> = vec![None; names.len()];
    for unit in units.chunks_exact(UNIT) {
        let (phys, size) = (be_i64(unit, 0), be_i32(unit, 8));
        let rel = phys - seg_base;
        let view = if size == BLANK_SIZE
            || size <= 0
            || rel < 0
            || rel as usize + size as usize > data.len()
        {
            None
        } else {
            match record::parse(data, rel as usize, rel as usize + size as usize) {
                Parsed::Record(v) => Some(v),
                _ => None,
            }
        };
        let Some(v) = view else {
            times.push(0);
            cols.iter_mut().for_each(|c| c.codes.push(UNKNOWN));
            continue;
        };
        times.push(v.store_timestamp);
        found.iter_mut().for_each(|f| *f = None);
        props::for_each(v.props, |name, value| {
            if let Some(i) = names.iter().position(|n| n.as_bytes() == name) {
                found[i] = Some(value); // last wins
            }
        });
        for (col, value) in cols.iter_mut().zip(&found) {
            col.push(*value);
        }
    }
    let times = PyBytes::new_with(py, n * 8, |out| {
        for (i, t) in times.iter().enumerate() {
            out[i * 8..i * 8 + 8].copy_from_slice(&t.to_le_bytes());
        }
        Ok(())
    })?;
    let mut result = Vec::with_capacity(cols.len());
    for col in cols {
        let codes = PyBytes::new_with(py, col.codes.len() * 4, |out| {
            for (i, c) in col.codes.iter().enumerate() {
                out[i * 4..i * 4 + 4].copy_from_slice(&c.to_le_bytes());
            }
            Ok(())
        })?;
        result.push((col.values, codes));
    }
    Ok((times, result))
}

struct Column {
    values: Vec<String>,
    index: HashMap<Vec<u8>, i32>,
    codes: Vec<i32>,
}

impl Column {
    fn with_capacity(n: usize) -> Column {
        Column {
            values: Vec::new(),
            index: HashMap::new(),
            codes: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, value: Option<&[u8]>) {
        let code = match value {
            None => ABSENT,
            Some(v) => match self.index.get(v) {
                Some(&c) => c,
                None => match std::str::from_utf8(v) {
                    Ok(s) => {
                        let c = self.values.len() as i32;
                        self.values.push(s.to_owned());
                        self.index.insert(v.to_vec(), c);
                        c
                    }
                    Err(_) => UNKNOWN,
                },
            },
        };
        self.codes.push(code);
    }
}
