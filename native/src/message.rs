//! A message's properties string, built as `rocketq.common.message.Message.properties_string` builds
//! it: the user properties in order (leaving out TAGS when tags are set, KEYS when keys are given,
//! DELAY when a delay level is), then `TAGS`, `KEYS` (the keys joined by one space, left out when
//! they join to ""), `DELAY`.  Names and values must not hold the separators `\x01` / `\x02`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::Borrowed;

use crate::props;

fn push_pair(arena: &mut Vec<u8>, name: &[u8], value: &[u8]) -> bool {
    arena.extend_from_slice(name);
    arena.push(props::NAME_VALUE);
    arena.extend_from_slice(value);
    arena.push(props::PROPERTY);
    props::clean(name) && props::clean(value)
}

/// Text of a property value: a `str` as it is, anything else as `str(value)` (Python's f-string does the same).
fn text_of<'py>(v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    match v.cast::<PyString>() {
        Ok(s) => Ok(s.clone()),
        Err(_) => v.str(),
    }
}

/// Appends the properties string of a message to `arena`; false when a separator is inside a name
/// or value (the caller refuses the message).  `user` is the properties dict, `keys` None, a str,
/// or an iterable of str.
pub fn properties_into(
    arena: &mut Vec<u8>,
    user: &Borrowed<'_, '_, PyAny>,
    tags: Option<&[u8]>,
    keys: &Borrowed<'_, '_, PyAny>,
    delay: i64,
) -> PyResult<bool> {
    let mut clean = true;
    if let Ok(d) = user.cast::<PyDict>() {
        for (k, v) in d.iter() {
            let (k, v) = (text_of(&k)?, text_of(&v)?);
            let name = k.to_str()?.as_bytes();
            let skip = (name == b"TAGS" && tags.is_some())
                || (name == b"KEYS" && !keys.is_none())
                || (name == b"DELAY" && delay != 0);
            if !skip {
                clean &= push_pair(arena, name, v.to_str()?.as_bytes());
            }
        }
    }
    if let Some(t) = tags {
        clean &= push_pair(arena, b"TAGS", t);
    }
    if !keys.is_none() {
        clean &= keys_into(arena, keys)?;
    }
    if delay != 0 {
        clean &= push_pair(arena, b"DELAY", delay.to_string().as_bytes());
    }
    Ok(clean)
}

fn keys_into(arena: &mut Vec<u8>, keys: &Borrowed<'_, '_, PyAny>) -> PyResult<bool> {
    let mut clean = true;
    let mark = arena.len();
    arena.extend_from_slice(b"KEYS\x01");
    let body = arena.len();
    let mut add = |arena: &mut Vec<u8>, first: bool, k: &Bound<'_, PyAny>| -> PyResult<()> {
        let k = k.cast::<PyString>()?.to_str()?.as_bytes();
        clean &= props::clean(k);
        if !first {
            arena.push(b' ');
        }
        arena.extend_from_slice(k);
        Ok(())
    };
    if keys.cast::<PyString>().is_ok() {
        add(arena, true, keys)?;
    } else if let Ok(list) = keys.cast::<PyList>() {
        for (j, k) in list.iter().enumerate() {
            add(arena, j == 0, &k)?;
        }
    } else {
        for (j, k) in keys.try_iter()?.enumerate() {
            add(arena, j == 0, &k?)?;
        }
    }
    if arena.len() == body {
        arena.truncate(mark); // the keys join to "": no KEYS property
    } else {
        arena.push(props::PROPERTY);
    }
    Ok(clean)
}

/// A SEND_BATCH_MESSAGE body of `Message` objects (the client side of `RecordBatch.from_wire`):
/// per message `i32 total | i32 magic 0 | i32 crc 0 | i32 flag | i32 bodyLen | body | i16 propsLen |
/// properties`, the properties built as `Message.properties_string` builds them.  Raises ValueError
/// naming the message for a separator inside a property or properties over 32767 bytes.
#[pyfunction]
pub fn encode_send_batch<'py>(
    py: Python<'py>,
    msgs: &Bound<'py, pyo3::types::PyList>,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    use pyo3::exceptions::PyValueError;
    let mut out: Vec<u8> = Vec::new();
    let mut props_buf: Vec<u8> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let body_obj = m.getattr(pyo3::intern!(py, "body"))?;
        let body = crate::buffers::Bytes::readable(&body_obj)?;
        let tags_str = tags_str(&m.getattr(pyo3::intern!(py, "tags"))?)?;
        let tags = tag_bytes(&tags_str)?;
        let delay: i64 = m.getattr(pyo3::intern!(py, "delay_level"))?.extract()?;
        let flag: i32 = m.getattr(pyo3::intern!(py, "flag"))?.extract()?;
        let user = m.getattr(pyo3::intern!(py, "properties"))?;
        let keys = m.getattr(pyo3::intern!(py, "keys"))?;
        props_buf.clear();
        if !properties_into(
            &mut props_buf,
            &user.as_borrowed(),
            tags,
            &keys.as_borrowed(),
            delay,
        )? {
            return Err(PyValueError::new_err(format!(
                "message {i}: property names and values must not contain \\x01 or \\x02"
            )));
        }
        if props_buf.len() > crate::record::MAX_PROPERTIES_BYTES {
            return Err(PyValueError::new_err(format!(
                "message {i}: properties are {} bytes, at most {}",
                props_buf.len(),
                crate::record::MAX_PROPERTIES_BYTES
            )));
        }
        let body = body.as_slice();
        let total = 20 + body.len() + 2 + props_buf.len();
        for v in [total as i32, 0, 0, flag, body.len() as i32] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(body);
        out.extend_from_slice(&(props_buf.len() as u16).to_be_bytes());
        out.extend_from_slice(&props_buf);
    }
    Ok(pyo3::types::PyBytes::new(py, &out))
}

/// A message's `tags` field: None, or its str (another type is refused).
pub(crate) fn tags_str<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyString>>> {
    if obj.is_none() {
        Ok(None)
    } else {
        Ok(Some(obj.cast::<PyString>()?.clone()))
    }
}

/// The bytes of tags that are set and not empty.
pub(crate) fn tag_bytes<'a>(tags: &'a Option<Bound<'_, PyString>>) -> PyResult<Option<&'a [u8]>> {
    match tags {
        Some(t) => Ok(Some(t.to_str()?.as_bytes()).filter(|t| !t.is_empty())),
        None => Ok(None),
    }
}
