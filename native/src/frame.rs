//! Remoting frames (RocketMQ's `NettyDecoder` / `RemotingCommand`): split a byte stream into frames
//! and decode their headers, and encode headers, in Rust; `rocketq/remoting/codec.py` is the Python
//! face and holds the layout table.  All integers big-endian.
//!
//! ```text
//! | i32 L | u8 serializeType | u24 H | header (H bytes) | body (L - 4 - H bytes) |
//! JSON header:   {"code":..,"language":..,"version":..,"opaque":..,"flag":..,"remark":..,"extFields":{..}}
//! binary header: i16 code | u8 language | i16 version | i32 opaque | i32 flag | i32 remarkLen | remark |
//!                i32 extLen | { u16 keyLen | key | i32 valLen | value }*
//! ```
//!
//! Decoding is lenient where Java's and other clients' output varies (integers as JSON strings or
//! integral floats, the language as a name or a number, extFields values of any JSON type, which
//! become their JSON text; nulls dropped) and strict about everything else; every error names what
//! is wrong, and the caller adds where in the stream.  Lengths are checked before every read.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};
use serde_json::Value;

use crate::buffers::Bytes;

pub const MIN_FRAME_LENGTH: i64 = 4;
pub const MAX_HEADER_BYTES: usize = 0xFF_FFFF;
pub const BINARY_FIXED: usize = 21;
pub const JSON: u8 = 0;
pub const ROCKETMQ: u8 = 1;

pub const LANGUAGES: [&str; 14] = [
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
    "OMS", "RUST", "NODE_JS",
];
const OTHER: u8 = 7;

pub struct Header {
    pub code: i32,
    pub language: u8,
    pub version: i32,
    pub opaque: i32,
    pub flag: i32,
    pub remark: Option<String>,
    pub ext: Vec<(String, String)>,
}

fn python_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `parse_int_value` on a JSON value: ints, integral floats, decimal strings.
fn int_value(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                return Some(i);
            }
            let f = n.as_f64()?;
            (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
        }
        Value::String(s) => {
            let t = s.trim();
            let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                return t.parse::<i64>().ok();
            }
            let f: f64 = t.parse().ok()?;
            (f.is_finite() && f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
        }
        _ => None,
    }
}

fn json_int(obj: &serde_json::Map<String, Value>, key: &str) -> Result<i32, String> {
    let raw = match obj.get(key) {
        None | Some(Value::Null) => return Ok(0),
        Some(v) => v,
    };
    let value = match raw {
        Value::Bool(_) | Value::Array(_) | Value::Object(_) => None,
        v => int_value(v),
    };
    let Some(value) = value else {
        let text: String = match raw {
            Value::String(s) => s.chars().take(40).collect(),
            other => other.to_string().chars().take(40).collect(),
        };
        return Err(format!("{key} is not an integer: {text:?}"));
    };
    i32::try_from(value).map_err(|_| format!("{key} {value} is outside int32"))
}

fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

pub fn decode_json(header: &[u8]) -> Result<Header, String> {
    let value: Value = serde_json::from_slice(header).map_err(|e| {
        format!(
            "header is not valid UTF-8 JSON: {}",
            e.to_string().chars().take(200).collect::<String>()
        )
    })?;
    let Value::Object(obj) = value else {
        return Err(format!(
            "header is a JSON {}, not an object",
            python_type_name(&value)
        ));
    };
    if matches!(obj.get("code"), None | Some(Value::Null)) {
        return Err("header has no code".into());
    }
    let language = match obj.get("language") {
        None | Some(Value::Null) => 0,
        Some(Value::String(name)) => LANGUAGES
            .iter()
            .position(|l| l == name)
            .map_or(OTHER, |i| i as u8),
        Some(Value::Number(n)) => n
            .as_u64()
            .filter(|&c| c < LANGUAGES.len() as u64)
            .map_or(OTHER, |c| c as u8),
        Some(_) => OTHER,
    };
    let ext = match obj.get("extFields") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(fields)) => fields
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), json_text(v)))
            .collect(),
        Some(other) => {
            return Err(format!(
                "extFields is a JSON {}, not an object",
                python_type_name(other)
            ))
        }
    };
    Ok(Header {
        code: json_int(&obj, "code")?,
        language,
        version: json_int(&obj, "version")?,
        opaque: json_int(&obj, "opaque")?,
        flag: json_int(&obj, "flag")?,
        remark: match obj.get("remark") {
            None | Some(Value::Null) => None,
            Some(v) => Some(json_text(v)),
        },
        ext,
    })
}

fn utf8(data: &[u8], what: &str) -> Result<String, String> {
    String::from_utf8(data.to_vec()).map_err(|e| format!("{what} is not valid UTF-8: {e}"))
}

fn need(end: usize, size: usize, what: &str) -> Result<(), String> {
    if end > size {
        return Err(format!(
            "binary header truncated in {what}: needs {end} bytes, has {size}"
        ));
    }
    Ok(())
}

pub fn decode_binary(h: &[u8]) -> Result<Header, String> {
    let size = h.len();
    if size < BINARY_FIXED {
        return Err(format!(
            "binary header of {size} bytes is shorter than its fixed {BINARY_FIXED}"
        ));
    }
    let i16_at = |p: usize| i16::from_be_bytes([h[p], h[p + 1]]);
    let i32_at = |p: usize| i32::from_be_bytes(h[p..p + 4].try_into().unwrap());
    let (code, lang, version, opaque, flag, remark_len) =
        (i16_at(0), h[2], i16_at(3), i32_at(5), i32_at(9), i32_at(13));
    let mut pos = 17;
    let mut remark = None;
    if remark_len > 0 {
        let n = remark_len as usize;
        need(pos + n + 4, size, "remark")?;
        remark = Some(utf8(&h[pos..pos + n], "remark")?);
        pos += n;
    }
    let ext_len = i32_at(pos);
    pos += 4;
    let mut ext = Vec::new();
    if ext_len > 0 {
        let n = ext_len as usize;
        need(pos + n, size, "extFields")?;
        let data = &h[pos..pos + n];
        let mut p = 0;
        while p < n {
            need(p + 2, n, "extFields key length")?;
            let klen = u16::from_be_bytes([data[p], data[p + 1]]) as usize;
            need(p + 2 + klen + 4, n, "extFields key")?;
            let key = utf8(&data[p + 2..p + 2 + klen], "extFields key")?;
            p += 2 + klen;
            let vlen = i32::from_be_bytes(data[p..p + 4].try_into().unwrap());
            if vlen < 0 {
                return Err(format!("extFields[{key:?}] has negative length {vlen}"));
            }
            let vlen = vlen as usize;
            let what = format!("extFields[{key:?}]");
            need(p + 4 + vlen, n, &what)?;
            let value = utf8(&data[p + 4..p + 4 + vlen], &what)?;
            p += 4 + vlen;
            ext.push((key, value));
        }
    }
    let language = if (lang as usize) < LANGUAGES.len() {
        lang
    } else {
        OTHER
    };
    Ok(Header {
        code: code as i32,
        language,
        version: version as i32,
        opaque,
        flag,
        remark,
        ext,
    })
}

/// One frame's parts, or why the stream cannot go on.
pub enum Next<'a> {
    Frame {
        header: Result<Header, String>,
        serialize: u8,
        body: &'a [u8],
        len: usize,
    },
    NeedMore,
    Error(String),
}

/// The frame at the start of `data` (checks the length prefix as soon as 4 bytes are in and the
/// header-length field as soon as 8 are, so a bogus length is refused before it is buffered).
pub fn next_frame(data: &[u8], max_frame_bytes: usize) -> Next<'_> {
    if data.len() < 4 {
        return Next::NeedMore;
    }
    let length = i32::from_be_bytes(data[0..4].try_into().unwrap()) as i64;
    if length < MIN_FRAME_LENGTH {
        return Next::Error(format!(
            "frame length {length} is below the minimum of {MIN_FRAME_LENGTH}"
        ));
    }
    if length + 4 > max_frame_bytes as i64 {
        return Next::Error(format!(
            "frame of {} bytes exceeds the limit of {max_frame_bytes} bytes",
            length + 4
        ));
    }
    if data.len() < 8 {
        return Next::NeedMore;
    }
    let field = u32::from_be_bytes(data[4..8].try_into().unwrap());
    let (serialize, header_len) = (
        (field >> 24) as u8,
        (field & MAX_HEADER_BYTES as u32) as usize,
    );
    if serialize != JSON && serialize != ROCKETMQ {
        return Next::Error(format!("unknown serialize type {serialize}"));
    }
    if header_len as i64 > length - 4 {
        return Next::Error(format!(
            "header length {header_len} is larger than the frame's {} bytes after the \
                                    header-length field",
            length - 4
        ));
    }
    let total = 4 + length as usize;
    if data.len() < total {
        return Next::NeedMore;
    }
    let header = &data[8..8 + header_len];
    let header = if serialize == JSON {
        // the usual header in one pass; anything else (and every error) through serde_json's Value
        crate::json_header::decode(header).map_or_else(|| decode_json(header), Ok)
    } else {
        decode_binary(header)
    };
    Next::Frame {
        header,
        serialize,
        body: &data[8 + header_len..total],
        len: total,
    }
}

/// Decodes every whole frame of `buf[start:]` (a stream whose byte `start` is at stream offset
/// `base`).  Returns `(frames, position after the last whole frame, error)`: each frame a tuple
/// `(code, language, version, opaque, flag, remark, ext_fields dict, serialize_type, body)`; error
/// None or `(stream offset of the bad frame, reason, part)` where part is "JSON header", "ROCKETMQ
/// header" or "" (the framing).  A bad frame ends the list: the stream cannot go on after it.
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn decode_frames<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: usize,
    base: i64,
    max_frame_bytes: usize,
) -> PyResult<(
    Vec<Bound<'py, PyTuple>>,
    usize,
    Option<(i64, String, &'static str)>,
)> {
    let data = Bytes::readable(buf)?;
    let bytes = data.as_slice();
    let mut pos = start.min(bytes.len());
    let mut out = Vec::new();
    loop {
        match next_frame(&bytes[pos..], max_frame_bytes) {
            Next::NeedMore => return Ok((out, pos, None)),
            Next::Error(reason) => {
                return Ok((out, pos, Some((base + (pos - start) as i64, reason, ""))))
            }
            Next::Frame {
                header,
                serialize,
                body,
                len,
            } => {
                let h = match header {
                    Ok(h) => h,
                    Err(reason) => {
                        let part = if serialize == JSON {
                            "JSON header"
                        } else {
                            "ROCKETMQ header"
                        };
                        return Ok((out, pos, Some((base + (pos - start) as i64, reason, part))));
                    }
                };
                let ext = PyDict::new(py);
                for (k, v) in &h.ext {
                    ext.set_item(PyString::new(py, k), PyString::new(py, v))?;
                }
                let remark = h
                    .remark
                    .as_deref()
                    .map(|r| PyString::new(py, r).into_any())
                    .unwrap_or_else(|| py.None().into_bound(py));
                out.push(PyTuple::new(
                    py,
                    [
                        h.code.into_pyobject(py)?.into_any(),
                        h.language.into_pyobject(py)?.into_any(),
                        h.version.into_pyobject(py)?.into_any(),
                        h.opaque.into_pyobject(py)?.into_any(),
                        h.flag.into_pyobject(py)?.into_any(),
                        remark,
                        ext.into_any(),
                        serialize.into_pyobject(py)?.into_any(),
                        PyBytes::new(py, body).into_any(),
                    ],
                )?);
                pos += len;
            }
        }
    }
}

fn json_string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("a str serialises");
}

/// The header of a frame (length prefix, header-length field, header), the body's length counted:
/// everything but the body.  `ext` is a dict of str (other values as given by their `str()`;
/// None dropped).  Raises ValueError saying what does not fit; the caller makes it a local
/// protocol error.
#[pyfunction]
#[pyo3(signature = (code, language, version, opaque, flag, remark, ext, serialize_type, body_len))]
#[allow(clippy::too_many_arguments)]
pub fn encode_frame_header<'py>(
    py: Python<'py>,
    code: i64,
    language: usize,
    version: i64,
    opaque: i64,
    flag: i64,
    remark: Option<&Bound<'py, PyString>>,
    ext: &Bound<'py, PyDict>,
    serialize_type: u8,
    body_len: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    use pyo3::exceptions::PyValueError;
    let range = |name: &str, v: i64, lo: i64, hi: i64| -> PyResult<()> {
        if v < lo || v > hi {
            return Err(PyValueError::new_err(format!(
                "{name} {v} is outside [{lo}, {hi}] of the header form"
            )));
        }
        Ok(())
    };
    let text = |s: &Bound<'py, PyString>, what: &str| -> PyResult<String> {
        s.to_str()
            .map(str::to_owned)
            .map_err(|e| PyValueError::new_err(format!("{what} is not encodable as UTF-8: {e}")))
    };
    // The fields as Python strings first (a str key or value is only borrowed), then read in place:
    // no String copy per field, and an error's wording is made only when there is an error.
    let mut strings: Vec<(Bound<'py, PyString>, Bound<'py, PyString>)> =
        Vec::with_capacity(ext.len());
    for (k, v) in ext.iter() {
        if v.is_none() {
            continue;
        }
        let key = match k.cast::<PyString>() {
            Ok(s) => s.clone(),
            Err(_) => k.str()?,
        };
        let value = match v.cast::<PyString>() {
            Ok(s) => s.clone(),
            Err(_) if v.is_instance_of::<pyo3::types::PyBool>() => {
                PyString::new(py, if v.is_truthy()? { "true" } else { "false" })
            }
            Err(_) => v.str()?,
        };
        strings.push((key, value));
    }
    let mut fields: Vec<(&str, &str)> = Vec::with_capacity(strings.len());
    for (k, v) in &strings {
        let key = k.to_str().map_err(|e| {
            PyValueError::new_err(format!("extFields key is not encodable as UTF-8: {e}"))
        })?;
        let value = v.to_str().map_err(|e| {
            PyValueError::new_err(format!("extFields[{key:?}] is not encodable as UTF-8: {e}"))
        })?;
        fields.push((key, value));
    }
    let remark = remark.map(|r| text(r, "remark")).transpose()?;
    let mut header = Vec::with_capacity(
        128 + fields
            .iter()
            .map(|(k, v)| k.len() + v.len() + 8)
            .sum::<usize>(),
    );
    if serialize_type == JSON {
        for (name, v) in [
            ("code", code),
            ("version", version),
            ("opaque", opaque),
            ("flag", flag),
        ] {
            range(name, v, i32::MIN as i64, i32::MAX as i64)?;
        }
        let lang = LANGUAGES.get(language).copied().unwrap_or("OTHER");
        header.extend_from_slice(format!("{{\"code\":{code},\"language\":\"{lang}\",\"version\":{version},\"opaque\":{opaque},\"flag\":{flag}").as_bytes());
        if let Some(r) = &remark {
            header.extend_from_slice(b",\"remark\":");
            json_string(&mut header, r);
        }
        header.extend_from_slice(b",\"extFields\":{");
        for (i, (k, v)) in fields.iter().enumerate() {
            if i > 0 {
                header.push(b',');
            }
            json_string(&mut header, k);
            header.push(b':');
            json_string(&mut header, v);
        }
        header.extend_from_slice(b"},\"serializeTypeCurrentRPC\":\"JSON\"}");
    } else {
        range("code", code, i16::MIN as i64, i16::MAX as i64)?;
        range("version", version, i16::MIN as i64, i16::MAX as i64)?;
        range("opaque", opaque, i32::MIN as i64, i32::MAX as i64)?;
        range("flag", flag, i32::MIN as i64, i32::MAX as i64)?;
        header.extend_from_slice(&(code as i16).to_be_bytes());
        header.push(language as u8);
        header.extend_from_slice(&(version as i16).to_be_bytes());
        header.extend_from_slice(&(opaque as i32).to_be_bytes());
        header.extend_from_slice(&(flag as i32).to_be_bytes());
        let r = remark.unwrap_or_default();
        header.extend_from_slice(&(r.len() as i32).to_be_bytes());
        header.extend_from_slice(r.as_bytes());
        let mut map = Vec::new();
        for &(k, v) in &fields {
            if k.len() > i16::MAX as usize {
                return Err(PyValueError::new_err(format!(
                    "extFields key of {} bytes does not fit the int16 length field",
                    k.len()
                )));
            }
            map.extend_from_slice(&(k.len() as u16).to_be_bytes());
            map.extend_from_slice(k.as_bytes());
            map.extend_from_slice(&(v.len() as i32).to_be_bytes());
            map.extend_from_slice(v.as_bytes());
        }
        header.extend_from_slice(&(map.len() as i32).to_be_bytes());
        header.extend_from_slice(&map);
    }
    if header.len() > MAX_HEADER_BYTES {
        return Err(PyValueError::new_err(format!(
            "header of {} bytes does not fit the 24-bit length field",
            header.len()
        )));
    }
    let length = 4 + header.len() + body_len;
    if length > i32::MAX as usize {
        return Err(PyValueError::new_err(format!(
            "frame of {length} bytes does not fit the int32 length field"
        )));
    }
    let field = ((serialize_type as u32) << 24) | header.len() as u32;
    PyBytes::new_with(py, 8 + header.len(), |out| {
        out[0..4].copy_from_slice(&(length as i32).to_be_bytes());
        out[4..8].copy_from_slice(&field.to_be_bytes());
        out[8..].copy_from_slice(&header);
        Ok(())
    })
}
