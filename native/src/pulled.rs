//! The client's pull-result decoder: the records of a PULL_MESSAGE (or POP / QUERY) answer body as
//! message objects, one call per body.
//!
//! A body is records in store format, back to back.  [`pulled_messages`] walks them with the same
//! checks as the segment scan (`record::parse`: magic, every length inside TOTALSIZE) and makes one
//! [`RecordView`] per record: the fixed header read into Rust fields, the body, topic and properties
//! kept as ranges of the one shared body.  Python objects for the parts are made only when asked
//! for: `body` copies its bytes out, `topic` and `properties` are decoded once and kept.  So a pull
//! of 256 records costs one walk and 256 small allocations, not 256 header parses in Python.
//!
//! `RecordView` answers every attribute `rocketq.store.record.StoredMessage` (the pure-Python reader,
//! kept as the reference) answers, with the same values but one: the `body` of a COMPRESSED record
//! is inflated, as RocketMQ's clients give it to the application (`stored_body` is as stored);
//! `to_message` and `to_dict` are that module's functions.  Unlike the reference it refuses a record
//! whose lengths do not add up when it is made, instead of slicing short later.

use pyo3::exceptions::{PyUnicodeDecodeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use crate::record::{be_i32, be_i64, be_u32, parse, Parsed, BORNHOST_V6, CRC_MASK, STOREHOST_V6};

/// `MessageSysFlag.COMPRESSED_FLAG`: the body is deflated (see `RecordView::body`).
const COMPRESSED: i32 = 0x1;

const BORN_HOST_POS: usize = 48;
const PROPERTY_TAGS: &str = "TAGS";
const PROPERTY_KEYS: &str = "KEYS";
const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";

/// An address as records hold it: 4 or 16 bytes and a port.
#[derive(Clone, Copy)]
struct Addr {
    ip: [u8; 16],
    v6: bool,
    port: i32,
}

impl Addr {
    /// The address at `rec[pos..]` and the position after it.
    fn read(rec: &[u8], pos: usize, v6: bool) -> (Addr, usize) {
        let n = if v6 { 16 } else { 4 };
        let mut ip = [0u8; 16];
        ip[..n].copy_from_slice(&rec[pos..pos + n]);
        let port = be_i32(rec, pos + n);
        (Addr { ip, v6, port }, pos + n + 4)
    }
    fn ip(&self) -> &[u8] {
        &self.ip[..if self.v6 { 16 } else { 4 }]
    }
}

/// The fields of one record that lies whole in a buffer: the fixed header, and where its body,
/// topic and properties are (`(start, end)` in the buffer).  Pure Rust, so the fuzzer drives it.
#[derive(Clone, Copy)]
pub struct Fields {
    pub pos: usize,
    pub size: usize,
    pub magic: u32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    born: Addr,
    pub store_timestamp: i64,
    store: Addr,
    pub reconsume_times: i32,
    pub prepared: i64,
    pub body: (usize, usize),
    pub topic: (usize, usize),
    pub props: (usize, usize),
}

/// `(start, end)` of `part` inside `whole` (a sub-slice of it).
fn span(whole: &[u8], part: &[u8]) -> (usize, usize) {
    let start = part.as_ptr() as usize - whole.as_ptr() as usize;
    (start, start + part.len())
}

/// The record at `data[pos..limit]`, every length checked (`record::parse`), or why it is no record.
pub fn read_record(data: &[u8], pos: usize, limit: usize) -> Result<Fields, String> {
    let v = match parse(data, pos, limit) {
        Parsed::Record(v) => v,
        Parsed::Blank(_) => return Err("a blank (end-of-segment) record".to_string()),
        Parsed::Bad(reason) => return Err(reason),
    };
    let rec = &data[pos..pos + v.size];
    let (born, p) = Addr::read(rec, BORN_HOST_POS, v.sys_flag & BORNHOST_V6 != 0);
    let (store, p) = Addr::read(rec, p + 8, v.sys_flag & STOREHOST_V6 != 0); // past STORETIMESTAMP
    Ok(Fields {
        pos,
        size: v.size,
        magic: be_u32(rec, 4),
        body_crc: v.body_crc as i32,
        queue_id: v.queue_id,
        flag: be_i32(rec, 16),
        queue_offset: v.queue_offset,
        physical_offset: v.physical_offset,
        sys_flag: v.sys_flag,
        born_timestamp: be_i64(rec, 40),
        born,
        store_timestamp: v.store_timestamp,
        store,
        reconsume_times: be_i32(rec, p),
        prepared: be_i64(rec, p + 4),
        body: span(data, v.body),
        topic: span(data, v.topic),
        props: span(data, v.props),
    })
}

/// The records of a whole body, or (byte where the bad one starts, why).
pub fn read_body(data: &[u8]) -> Result<Vec<Fields>, (usize, String)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let f = read_record(data, pos, data.len()).map_err(|reason| (pos, reason))?;
        pos += f.size;
        out.push(f);
    }
    Ok(out)
}

/// One record of a pull answer, read in place (see the module notes).
#[pyclass(module = "rocketq._native", name = "RecordView")]
pub struct RecordView {
    buf: Py<PyBytes>,
    f: Fields,
    topic_text: Option<Py<PyString>>,
    props_dict: Option<Py<PyDict>>,
}

impl RecordView {
    fn of(buf: &Bound<'_, PyBytes>, f: Fields) -> RecordView {
        RecordView {
            buf: buf.clone().unbind(),
            f,
            topic_text: None,
            props_dict: None,
        }
    }

    fn part<'a>(&self, data: &'a [u8], range: (usize, usize)) -> &'a [u8] {
        &data[range.0..range.1]
    }

    fn text<'py>(&self, py: Python<'py>, range: (usize, usize)) -> PyResult<Bound<'py, PyString>> {
        let data = self.buf.bind(py).as_bytes();
        let raw = self.part(data, range);
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(PyString::new(py, s)),
            Err(e) => Err(PyErr::from_value(
                PyUnicodeDecodeError::new_utf8(py, raw, e)?.into_any(),
            )),
        }
    }

    fn host<'py>(py: Python<'py>, a: &Addr) -> PyResult<Bound<'py, PyAny>> {
        static HOST: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        let cls = python_attr(py, &HOST, "rocketq.common.msgid", "HostAddress")?;
        cls.call1((PyBytes::new(py, a.ip()), a.port))
    }

    fn property<'py>(slf: &Bound<'py, Self>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
        let props = Self::properties(slf)?;
        props.get_item(name)
    }
}

/// `<module>.<name>`, looked up once (kept in `cell`).
fn python_attr<'py>(
    py: Python<'py>,
    cell: &'static PyOnceLock<Py<PyAny>>,
    module: &str,
    name: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let f = cell.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import(module)?.getattr(name)?.unbind())
    })?;
    Ok(f.bind(py).clone())
}

#[pymethods]
impl RecordView {
    /// The record at `buf[pos:]` (ValueError when none lies whole there).
    #[new]
    #[pyo3(signature = (buf, pos = 0))]
    fn new(buf: &Bound<'_, PyBytes>, pos: usize) -> PyResult<RecordView> {
        let data = buf.as_bytes();
        read_record(data, pos, data.len())
            .map(|f| RecordView::of(buf, f))
            .map_err(|reason| PyValueError::new_err(format!("no record at byte {pos}: {reason}")))
    }

    #[getter]
    fn total_size(&self) -> usize {
        self.f.size
    }
    #[getter]
    fn magic(&self) -> u32 {
        self.f.magic
    }
    #[getter]
    fn body_crc(&self) -> i32 {
        self.f.body_crc
    }
    #[getter]
    fn queue_id(&self) -> i32 {
        self.f.queue_id
    }
    #[getter]
    fn flag(&self) -> i32 {
        self.f.flag
    }
    #[getter]
    fn queue_offset(&self) -> i64 {
        self.f.queue_offset
    }
    #[getter]
    fn physical_offset(&self) -> i64 {
        self.f.physical_offset
    }
    #[getter]
    fn sys_flag(&self) -> i32 {
        self.f.sys_flag
    }
    #[getter]
    fn born_timestamp(&self) -> i64 {
        self.f.born_timestamp
    }
    #[getter]
    fn store_timestamp(&self) -> i64 {
        self.f.store_timestamp
    }
    #[getter]
    fn reconsume_times(&self) -> i32 {
        self.f.reconsume_times
    }
    #[getter]
    fn prepared_transaction_offset(&self) -> i64 {
        self.f.prepared
    }
    #[getter]
    fn born_host<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Self::host(py, &self.f.born)
    }
    #[getter]
    fn store_host<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Self::host(py, &self.f.store)
    }

    /// This record's bytes.
    #[getter]
    fn raw<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let data = self.buf.bind(py).as_bytes();
        PyBytes::new(py, &data[self.f.pos..self.f.pos + self.f.size])
    }

    /// The body a consumer sees: as stored, or inflated when the record is COMPRESSED
    /// (`rocketq.common.sysflag.plain_body`: zlib, LZ4 or ZSTD as the sysflag says, bounded), as
    /// RocketMQ's clients hand it on.
    #[getter]
    fn body<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stored = self.stored_body(py);
        if self.f.sys_flag & COMPRESSED == 0 {
            return Ok(stored.into_any());
        }
        static PLAIN: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        python_attr(py, &PLAIN, "rocketq.common.sysflag", "plain_body")?
            .call1((stored, self.f.sys_flag))
    }

    /// The body's bytes as stored (compressed when the record is COMPRESSED: see `body`).
    #[getter]
    fn stored_body<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.part(self.buf.bind(py).as_bytes(), self.f.body))
    }

    /// The record's topic, or what it was set to (a retry topic shown as the original one).
    #[getter]
    fn topic<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        if let Some(t) = &self.topic_text {
            return Ok(t.bind(py).clone());
        }
        let t = self.text(py, self.f.topic)?;
        self.topic_text = Some(t.clone().unbind());
        Ok(t)
    }
    #[setter]
    fn set_topic(&mut self, topic: Bound<'_, PyString>) {
        self.topic_text = Some(topic.unbind());
    }

    #[getter]
    fn properties_string<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyString>> {
        self.text(py, self.f.props)
    }

    /// The properties as a dict, decoded once (`decode_properties`: items without a name or a
    /// separator are left out, a repeated name keeps its last value).
    #[getter]
    fn properties<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        if let Some(d) = &slf.borrow().props_dict {
            return Ok(d.bind(py).clone());
        }
        let text = slf.borrow().properties_string(py)?;
        let dict = PyDict::new(py);
        for item in text.to_str()?.split('\x02') {
            if let Some((name, value)) = item.split_once('\x01') {
                if !name.is_empty() {
                    dict.set_item(name, value)?;
                }
            }
        }
        slf.borrow_mut().props_dict = Some(dict.clone().unbind());
        Ok(dict)
    }

    #[getter]
    fn tags<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        Self::property(slf, PROPERTY_TAGS)
    }

    /// The KEYS words: split on single spaces, empty words dropped.
    #[getter]
    fn keys<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let words = PyList::empty(py);
        if let Some(text) = Self::property(slf, PROPERTY_KEYS)? {
            for w in text.cast::<PyString>()?.to_str()?.split(' ') {
                if !w.is_empty() {
                    words.append(w)?;
                }
            }
        }
        Ok(words)
    }

    #[getter]
    fn uniq_key<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        Self::property(slf, PROPERTY_UNIQ_KEY)
    }

    /// The offset message id: store host (address, port) and physical offset, upper-case hex.
    #[getter]
    fn msg_id(&self) -> String {
        let mut raw = Vec::with_capacity(28);
        raw.extend_from_slice(self.f.store.ip());
        raw.extend_from_slice(&self.f.store.port.to_be_bytes());
        raw.extend_from_slice(&self.f.physical_offset.to_be_bytes());
        raw.iter().map(|b| format!("{b:02X}")).collect()
    }

    fn crc_ok(&self, py: Python<'_>) -> bool {
        let body = self.part(self.buf.bind(py).as_bytes(), self.f.body);
        (crc32fast::hash(body) & CRC_MASK) as i64 == self.f.body_crc as i64
    }

    /// `rocketq.store.record.record_to_message(self, **kwargs)`.
    #[pyo3(signature = (**kwargs))]
    fn to_message<'py>(
        slf: &Bound<'py, Self>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        static F: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        python_attr(slf.py(), &F, "rocketq.store.record", "record_to_message")?.call((slf,), kwargs)
    }

    /// `rocketq.store.record.record_to_dict(self)`.
    fn to_dict<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        static F: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
        python_attr(slf.py(), &F, "rocketq.store.record", "record_to_dict")?.call1((slf,))
    }

    fn __repr__(&mut self, py: Python<'_>) -> PyResult<String> {
        let topic = self.topic(py)?.repr()?;
        Ok(format!(
            "RecordView(topic={topic}, queue_id={}, queue_offset={}, physical_offset={}, size={})",
            self.f.queue_id, self.f.queue_offset, self.f.physical_offset, self.f.size
        ))
    }
}

/// The records of `body` as [`RecordView`]s.  A body that is not records back to back raises
/// ValueError naming the byte where the bad one starts and why.
#[pyfunction]
pub fn pulled_messages<'py>(body: &Bound<'py, PyBytes>) -> PyResult<Bound<'py, PyList>> {
    let py = body.py();
    let data = body.as_bytes();
    let fields = read_body(data).map_err(|(pos, reason)| {
        PyValueError::new_err(format!(
            "malformed message record at byte {pos} of a {}-byte body: {reason}",
            data.len()
        ))
    })?;
    let views = fields
        .into_iter()
        .map(|f| Bound::new(py, RecordView::of(body, f)))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, views)
}
