//! Rows of an Arrow batch into SEND_BATCH_MESSAGE entries (the Spark sink), one call per batch.
//!
//! Columns arrive as Arrow buffers (validity bitmap or None, int32 offsets, bytes; plus the array's
//! offset for sliced arrays), as `pyarrow` holds them.  Per row the entry is
//! `i32 total | i32 0 | i32 0 | i32 0 (flag) | i32 bodyLen | body | i16 propsLen | properties` with
//! the properties `UNIQ_KEY` (a fresh id: the 10-byte process prefix and the 48-bit counter
//! `first + row`, upper-case hex), then `TAGS` and `KEYS` when set, then the row's `properties`
//! map (null values left out).  A row that cannot be a message is refused naming the row.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffers::Bytes;
use crate::props;
use crate::record::MAX_PROPERTIES_BYTES;

/// One variable-width Arrow column (binary or string).
struct Column {
    validity: Option<Bytes>,
    offsets: Bytes,
    data: Bytes,
    offset: usize,
    len: usize,
}

impl Column {
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Option<Column>> {
        if obj.is_none() {
            return Ok(None);
        }
        let (validity, offsets, data, offset, len): (
            Bound<'_, PyAny>,
            Bound<'_, PyAny>,
            Bound<'_, PyAny>,
            usize,
            usize,
        ) = obj.extract()?;
        let col = Column {
            validity: if validity.is_none() {
                None
            } else {
                Some(Bytes::readable(&validity)?)
            },
            offsets: Bytes::readable(&offsets)?,
            data: Bytes::readable(&data)?,
            offset,
            len,
        };
        if col.offsets.len() < (offset + len + 1) * 4 {
            return Err(PyValueError::new_err(
                "an Arrow column's offsets buffer is shorter than the array",
            ));
        }
        Ok(Some(col))
    }

    /// Value `i` (None when null), checked against the buffers.
    fn get(&self, i: usize) -> PyResult<Option<&[u8]>> {
        let j = self.offset + i;
        if let Some(v) = &self.validity {
            let bits = v.as_slice();
            if j / 8 >= bits.len() || bits[j / 8] & (1 << (j % 8)) == 0 {
                return Ok(None);
            }
        }
        let offs = self.offsets.as_slice();
        let at = |k: usize| i32::from_le_bytes(offs[4 * k..4 * k + 4].try_into().unwrap());
        let (a, b) = (at(j), at(j + 1));
        let data = self.data.as_slice();
        if a < 0 || b < a || b as usize > data.len() {
            return Err(PyValueError::new_err(format!(
                "an Arrow column's offsets are out of range at row {i}"
            )));
        }
        Ok(Some(&data[a as usize..b as usize]))
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.push(props::NAME_VALUE);
    out.extend_from_slice(value);
    out.push(props::PROPERTY);
}

/// Encodes `rows` rows; returns `(entries, int64 entry offsets (rows + 1), int64 body lengths)`.
/// `props` is `(map offsets (int32 buffer), map offset, keys column, values column)` or None.
#[pyfunction]
#[pyo3(signature = (rows, body, tags, keys, props, *, uniq_prefix, first_counter, max_body_bytes))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn encode_sink_rows<'py>(
    py: Python<'py>,
    rows: usize,
    body: &Bound<'py, PyAny>,
    tags: &Bound<'py, PyAny>,
    keys: &Bound<'py, PyAny>,
    props: &Bound<'py, PyAny>,
    uniq_prefix: &[u8],
    first_counter: i64,
    max_body_bytes: usize,
) -> PyResult<(
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
)> {
    let body =
        Column::from_py(body)?.ok_or_else(|| PyValueError::new_err("the body column is needed"))?;
    let (tags, keys) = (Column::from_py(tags)?, Column::from_py(keys)?);
    let map = if props.is_none() {
        None
    } else {
        let (offs, offset, k, v): (
            Bound<'py, PyAny>,
            usize,
            Bound<'py, PyAny>,
            Bound<'py, PyAny>,
        ) = props.extract()?;
        let k = Column::from_py(&k)?.ok_or_else(|| PyValueError::new_err("map keys missing"))?;
        let v = Column::from_py(&v)?.ok_or_else(|| PyValueError::new_err("map values missing"))?;
        Some((Bytes::readable(&offs)?, offset, k, v))
    };
    for col in [Some(&body), tags.as_ref(), keys.as_ref()]
        .into_iter()
        .flatten()
    {
        if col.len < rows {
            return Err(PyValueError::new_err("a column is shorter than the batch"));
        }
    }
    let mut out = Vec::with_capacity(body.data.len() + rows * 96);
    let mut offsets: Vec<i64> = Vec::with_capacity(rows + 1);
    let mut body_lens: Vec<i64> = Vec::with_capacity(rows);
    let mut prop = Vec::with_capacity(256);
    offsets.push(0);
    for i in 0..rows {
        let b = match body.get(i)? {
            Some(b) if !b.is_empty() => b,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "row {i}: the body is null or empty"
                )))
            }
        };
        if b.len() > max_body_bytes {
            return Err(PyValueError::new_err(format!(
                "row {i}: body of {} bytes exceeds {max_body_bytes}",
                b.len()
            )));
        }
        prop.clear();
        prop.extend_from_slice(b"UNIQ_KEY\x01");
        for &c in uniq_prefix {
            prop.push(HEX[(c >> 4) as usize]);
            prop.push(HEX[(c & 15) as usize]);
        }
        let counter = ((first_counter + i as i64) & 0xFFFF_FFFF_FFFF).to_be_bytes();
        for &c in &counter[2..] {
            prop.push(HEX[(c >> 4) as usize]);
            prop.push(HEX[(c & 15) as usize]);
        }
        prop.push(props::PROPERTY);
        for (name, col) in [(&b"TAGS"[..], &tags), (&b"KEYS"[..], &keys)] {
            if let Some(v) = col.as_ref().map(|c| c.get(i)).transpose()?.flatten() {
                if !props::clean(v) {
                    return Err(PyValueError::new_err(format!(
                        "row {i}: {} contains a \\x01 or \\x02 separator",
                        String::from_utf8_lossy(name).to_lowercase()
                    )));
                }
                push_pair(&mut prop, name, v);
            }
        }
        if let Some((offs, moff, k, v)) = &map {
            let o = offs.as_slice();
            let j = moff + i;
            if o.len() < 4 * (j + 2) {
                return Err(PyValueError::new_err(
                    "the properties map's offsets are shorter than the batch",
                ));
            }
            let at =
                |k: usize| i32::from_le_bytes(o[4 * k..4 * k + 4].try_into().unwrap()) as usize;
            for e in at(j)..at(j + 1) {
                let (Some(name), value) = (k.get(e)?, v.get(e)?) else {
                    continue;
                };
                let Some(value) = value else { continue };
                if !props::clean(name) || !props::clean(value) {
                    return Err(PyValueError::new_err(format!(
                        "row {i}: property {:?} contains a \\x01 or \\x02 separator",
                        String::from_utf8_lossy(name)
                    )));
                }
                push_pair(&mut prop, name, value);
            }
        }
        if prop.len() > MAX_PROPERTIES_BYTES {
            return Err(PyValueError::new_err(format!(
                "row {i}: properties of {} bytes exceed {MAX_PROPERTIES_BYTES}",
                prop.len()
            )));
        }
        let total = 20 + b.len() + 2 + prop.len();
        out.extend_from_slice(&(total as i32).to_be_bytes());
        out.extend_from_slice(&[0u8; 12]);
        out.extend_from_slice(&(b.len() as i32).to_be_bytes());
        out.extend_from_slice(b);
        out.extend_from_slice(&(prop.len() as u16).to_be_bytes());
        out.extend_from_slice(&prop);
        offsets.push(out.len() as i64);
        body_lens.push(b.len() as i64);
    }
    let le = |v: &[i64]| {
        PyBytes::new(
            py,
            &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(),
        )
    };
    Ok((PyBytes::new(py, &out), le(&offsets), le(&body_lens)))
}
