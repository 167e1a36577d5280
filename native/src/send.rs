//! The broker's SEND_MESSAGE / SEND_MESSAGE_V2 request in two native calls: the header fields
//! ([`send_fields`]) and the one-record batch ([`stage_send`]).
//!
//! A send request carries one message in its header (`SendMessageRequestHeader`; V2 names the same
//! fields `a`..`n`) and its body.  The Python path turned the properties string into a dict, built a
//! `Message`, and the store turned the dict back into a string; for a message that needs no policy
//! (no delay level, no timer, no transaction half, no duplicate or malformed property) that string
//! is the one the client sent with the broker's `CLUSTER` property appended, so it is copied here
//! as it is.  Everything else returns None and takes the Python path, which stays the reference:
//! what both store is byte-for-byte the same (tests/native/test_send_fast_path.py).
//!
//! Integers are taken in the form clients send them (`-?[0-9]+` in a string, at most 18 digits); any
//! other form returns None too, so the Python path's lenient parse and its errors stay the only ones.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use pyo3::IntoPyObjectExt;

use crate::batch::{as_bytes, host_arg, Builder, Limits, RecordBatch, Span, Which};
use crate::props::{NAME_VALUE, PROPERTY};

/// More properties than this on one message: the Python path (the duplicate check here is quadratic).
const MAX_PLAIN_PROPERTIES: usize = 64;

/// The header fields [`send_fields`] reads, (V2 name, V1 name): the topic, the two strings, then
/// the integers with their defaults in [`INT_DEFAULTS`].
const FIELDS: [(&str, &str); 9] = [
    ("b", "topic"),
    ("c", "defaultTopic"),
    ("i", "properties"),
    ("d", "defaultTopicQueueNums"),
    ("e", "queueId"),
    ("f", "sysFlag"),
    ("g", "bornTimestamp"),
    ("h", "flag"),
    ("j", "reconsumeTimes"),
];
const INT_DEFAULTS: [i64; 6] = [4, -1, 0, 0, 0, 0];

/// The field names as Python strings, made once: `[v2 names, v1 names]`.
static NAMES: PyOnceLock<[Vec<Py<PyString>>; 2]> = PyOnceLock::new();

fn names(py: Python<'_>) -> &[Vec<Py<PyString>>; 2] {
    NAMES.get_or_init(py, || {
        let (mut v2, mut v1) = (Vec::new(), Vec::new());
        for (short, long) in FIELDS {
            v2.push(PyString::intern(py, short).unbind());
            v1.push(PyString::intern(py, long).unbind());
        }
        [v2, v1]
    })
}

/// An integer header value as clients write it, or None (absent or empty: the caller's default).
/// `Err(())` for any other form.
fn plain_int(v: Option<Bound<'_, PyAny>>) -> Result<Option<i64>, ()> {
    let Some(v) = v else { return Ok(None) };
    let s = v.cast::<PyString>().map_err(|_| ())?;
    let text = s.to_str().map_err(|_| ())?.as_bytes();
    if text.is_empty() {
        return Ok(None);
    }
    let (neg, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(());
    }
    let n = digits
        .iter()
        .fold(0i64, |acc, &d| acc * 10 + (d - b'0') as i64);
    Ok(Some(if neg { -n } else { n }))
}

/// The fields of a SEND_MESSAGE(_V2) header, V1 or V2 names, as
/// `(topic, defaultTopic, defaultTopicQueueNums, queueId, sysFlag, bornTimestamp, flag,
/// reconsumeTimes, properties)` with RocketMQ's defaults; None when a field is missing or written
/// in a form only the Python path reads (it then raises the error that names the field).
#[pyfunction]
pub fn send_fields<'py>(ext: &Bound<'py, PyDict>) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let py = ext.py();
    let [short, long] = names(py);
    // V2 exactly as `send_header` tells it: a "b" and no "topic"; a V2 header that also carries a
    // V1 name is left to the Python path (its renaming decides which one wins)
    let v2 = ext.contains(short[0].bind(py))? && !ext.contains(long[0].bind(py))?;
    if v2 {
        for name in &long[1..] {
            if ext.contains(name.bind(py))? {
                return Ok(None);
            }
        }
    }
    let keys = if v2 { short } else { long };
    let mut values = Vec::with_capacity(FIELDS.len());
    for key in keys {
        values.push(ext.get_item(key.bind(py))?);
    }
    let text = |v: &Option<Bound<'py, PyAny>>, default: &str| match v {
        None => Some(PyString::intern(py, default)),
        Some(v) => v.cast::<PyString>().ok().cloned(),
    };
    let (Some(topic), Some(default_topic), Some(props)) = (
        values[0]
            .as_ref()
            .and_then(|t| t.cast::<PyString>().ok().cloned()),
        text(&values[1], "TBW102"),
        text(&values[2], ""),
    ) else {
        return Ok(None);
    };
    let mut items = vec![topic.into_any(), default_topic.into_any()];
    for (v, default) in values.drain(3..).zip(INT_DEFAULTS) {
        match plain_int(v) {
            Ok(n) => items.push(n.unwrap_or(default).into_bound_py_any(py)?),
            Err(()) => return Ok(None),
        }
    }
    items.push(props.into_any());
    Ok(Some(PyTuple::new(py, items)?))
}

/// What [`plain_properties`] found in a properties string that needs no policy.
#[derive(Debug, PartialEq)]
pub struct Plain<'a> {
    pub terminated: bool, // ends with the separator (RocketMQ 4.x clients leave the last one out)
    pub uniq_key: Option<&'a [u8]>,
    pub sharding_key: bool,
}

/// Whether `name` asks for the broker's policy: a delay level, a timer, a transaction half, or the
/// property the broker sets itself.
fn needs_policy(name: &[u8]) -> bool {
    matches!(name, b"DELAY" | b"TRAN_MSG" | b"CLUSTER") || name.starts_with(b"TIMER_")
}

/// `props` when it is whole `name\x01value\x02` pairs (the last separator may be missing), with
/// non-empty names that occur once and that [`needs_policy`] passes; else None.  Such a string is
/// what `decode_properties` and `Message.properties_string` would give back unchanged.
pub fn plain_properties(props: &[u8]) -> Option<Plain<'_>> {
    let mut names: Vec<&[u8]> = Vec::with_capacity(8);
    let mut plain = Plain {
        terminated: true,
        uniq_key: None,
        sharding_key: false,
    };
    let mut rest = props;
    while !rest.is_empty() {
        let (item, next) = match rest.iter().position(|&b| b == PROPERTY) {
            Some(end) => (&rest[..end], &rest[end + 1..]),
            None => {
                plain.terminated = false;
                (rest, &rest[rest.len()..])
            }
        };
        let cut = item.iter().position(|&b| b == NAME_VALUE)?;
        let (name, value) = (&item[..cut], &item[cut + 1..]);
        if name.is_empty()
            || value.contains(&NAME_VALUE)
            || needs_policy(name)
            || names.len() >= MAX_PLAIN_PROPERTIES
            || names.contains(&name)
        {
            return None;
        }
        names.push(name);
        match name {
            b"UNIQ_KEY" => plain.uniq_key = Some(value),
            b"__SHARDINGKEY" => plain.sharding_key = true,
            _ => {}
        }
        rest = next;
    }
    Some(plain)
}

/// The one-record batch of a sent message whose properties need no policy, with what the broker
/// answers and counts: `(batch, UNIQ_KEY or None, has a sharding key)`.  The record's properties
/// are `properties` (terminated) followed by `CLUSTER\x01<cluster>\x02`.  None when the properties
/// need the Python path (see [`plain_properties`]); BatchError for a message the store refuses,
/// with the text the Python path gives.
#[pyfunction]
#[pyo3(signature = (topic, queue_id, flag, sys_flag, born_timestamp, born_ip, born_port, reconsume_times,
                    body, properties, cluster, *, max_body_bytes, store_v6, check_topic=None))]
#[allow(clippy::too_many_arguments)]
pub fn stage_send<'py>(
    py: Python<'py>,
    topic: &str,
    queue_id: i64,
    flag: i64,
    sys_flag: i64,
    born_timestamp: i64,
    born_ip: &[u8],
    born_port: i64,
    reconsume_times: i64,
    body: &Bound<'py, PyAny>,
    properties: &str,
    cluster: &str,
    max_body_bytes: usize,
    store_v6: bool,
    check_topic: Option<&Bound<'py, PyAny>>,
) -> PyResult<Option<(RecordBatch, Option<String>, bool)>> {
    let text = properties.as_bytes();
    let Some(plain) = plain_properties(text) else {
        return Ok(None);
    };
    if !crate::props::clean(cluster.as_bytes()) {
        return Ok(None); // the Python path names the bad property
    }
    let uniq = plain
        .uniq_key
        .map(|u| String::from_utf8_lossy(u).into_owned());
    let born = host_arg(born_ip, born_port, "born host")?;
    let mut b = Builder::new(
        Limits {
            max_body: max_body_bytes,
            store_v6,
        },
        1,
    );
    b.arena.reserve(text.len() + cluster.len() + 10);
    b.arena.extend_from_slice(text);
    if !plain.terminated {
        b.arena.push(PROPERTY);
    }
    b.arena.extend_from_slice(b"CLUSTER\x01");
    b.arena.extend_from_slice(cluster.as_bytes());
    b.arena.push(PROPERTY);
    let len = b.arena.len();
    let body: Bound<'py, PyBytes> = as_bytes(body, &mut b.keep)?;
    b.push(
        Which(0),
        topic.as_bytes(),
        queue_id,
        flag,
        sys_flag,
        born_timestamp,
        born,
        reconsume_times,
        0,
        body.as_bytes(),
        Span::unset(len),
    )?;
    b.arena_props.push((0, 0, len));
    b.keep.push(body.into_any().unbind());
    Ok(Some((b.finish(py, check_topic)?, uniq, plain.sharding_key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_properties_pass_as_they_are() {
        let p = plain_properties(b"UNIQ_KEY\x01u1\x02WAIT\x01true\x02").unwrap();
        assert_eq!(p.uniq_key, Some(&b"u1"[..]));
        assert!(p.terminated && !p.sharding_key);
        let p = plain_properties(b"a\x01\x02__SHARDINGKEY\x01g").unwrap();
        assert!(!p.terminated && p.sharding_key);
        assert!(plain_properties(b"").unwrap().terminated);
    }

    #[test]
    fn anything_else_takes_the_python_path() {
        for bad in [
            &b"DELAY\x013\x02"[..],
            &b"TIMER_DELAY_SEC\x015\x02"[..],
            &b"TRAN_MSG\x01true\x02"[..],
            &b"CLUSTER\x01c\x02"[..],
            &b"a\x011\x02a\x012\x02"[..],
            &b"\x01v\x02"[..],
            &b"novalue\x02"[..],
            &b"a\x01b\x01c\x02"[..],
            &b"a\x01b\x02\x02"[..],
        ] {
            assert_eq!(plain_properties(bad), None, "{bad:?}");
        }
    }
}
