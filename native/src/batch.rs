//! A batch of records staged for one append: validated, sizes known, everything checked that does
//! not depend on where the batch lands (RocketMQ 5 encodes before taking the put lock too).
//! `append_to` then writes the records into the segment with the GIL released (once per batch),
//! filling in the position-dependent fields (queue offsets, physical offsets, store time) and each
//! body's CRC as it copies it: the CRC reads the body just before the copy does, so a body is
//! brought into the cache once (for 4 KiB bodies the CRC was a second pass, and a second GIL
//! release, when the batch computed it while staging).
//!
//! Three ways in, all ending in the same [`RecordBatch`]:
//! * [`RecordBatch::from_wire`] - a SEND_BATCH_MESSAGE body as it came off the wire
//!   (`MessageDecoder.encodeMessages`), big-endian, one entry per message:
//!   `i32 totalSize | i32 magic | i32 bodyCRC | i32 flag | i32 bodyLen | body | i16 propsLen | props`;
//!   bodies and properties are not copied until they are written into the segment.
//! * [`RecordBatch::from_messages`] - `rocketq.common.message.Message` objects; plain ones (no user
//!   properties, no delay level) get their TAGS/KEYS properties built here, the rest go through a
//!   Python callable (the store's policy: delay levels to the schedule topic and so on) that
//!   returns a row `(topic, queue_id, flag, sys_flag, born_timestamp, born_ip, born_port,
//!   reconsume_times, prepared_offset, body, properties)`, the properties as UTF-8 `bytes`.
//!
//! Bodies and properties stay where they are (inside the Python objects the batch keeps alive) or
//! in the batch's own arena; the Python objects are immutable `bytes`, so reading them without
//! the GIL is sound.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use pyo3::Borrowed;

use crate::buffers::Bytes;
use crate::record::{self, Host, NOT_CONSUMABLE};
use crate::{message, msgid, slots, wire};

/// The `Message` fields a plain message is read from, in the order `from_messages` unpacks them.
pub(crate) const MESSAGE_FIELDS: [&str; 13] = [
    "topic",
    "body",
    "queue_id",
    "tags",
    "keys",
    "properties",
    "flag",
    "sys_flag",
    "born_timestamp",
    "born_host",
    "reconsume_times",
    "prepared_transaction_offset",
    "delay_level",
];

create_exception!(
    _native,
    BatchError,
    PyValueError,
    "A message the store refuses: args are (status name, reason)."
);
create_exception!(
    _native,
    BatchFormatError,
    PyValueError,
    "A SEND_BATCH_MESSAGE body that does not parse."
);

pub const MAX_QUEUE_ID: i64 = i32::MAX as i64;
const NO_GROUP: u32 = u32::MAX;

#[derive(Clone, Copy)]
pub(crate) struct Span {
    ptr: *const u8,
    len: usize,
}

impl Span {
    /// `len` bytes of the batch's arena, pointed at when the builder finishes (`arena_props`).
    pub(crate) fn unset(len: usize) -> Span {
        Span {
            ptr: std::ptr::null(),
            len,
        }
    }
    fn of(b: &[u8]) -> Span {
        Span {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }
    /// # Safety
    /// The memory must be kept alive by the batch (`keep` or `arena`).
    unsafe fn get<'a>(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(self.ptr, self.len)
    }
}

#[derive(Clone, Copy)]
struct Rec {
    body: Span,
    props: Span,
    topic: u32,
    group: u32,
    queue_id: i32,
    flag: i32,
    sys_flag: i32,
    born_ts: i64,
    born: Host,
    reconsume: i32,
    prepared: i64,
    size: u32,
}

// SAFETY: Spans point into immutable memory the batch owns or keeps alive.
unsafe impl Send for Rec {}
unsafe impl Sync for Rec {}

#[pyclass(frozen, module = "rocketq._native")]
pub struct RecordBatch {
    recs: Vec<Rec>,
    topics: Vec<Vec<u8>>,
    topic_names: Vec<Py<PyString>>,
    queue_offsets: std::sync::OnceLock<Vec<i64>>, // set once, by the append
    groups: Vec<(u32, i32, u32)>, // (topic, queue id, consumable records) in first-seen order
    total: usize,
    _keep: Vec<Py<PyAny>>,
    _arena: Vec<u8>,
}

pub(crate) fn refuse(status: &str, reason: String) -> PyErr {
    BatchError::new_err((status.to_string(), reason))
}

pub(crate) fn illegal(reason: String) -> PyErr {
    refuse("MESSAGE_ILLEGAL", reason)
}

fn topic_text(t: &[u8]) -> String {
    String::from_utf8_lossy(t).into_owned()
}

/// Names a message in errors: "message 3".
#[derive(Clone, Copy)]
pub(crate) struct Which(pub(crate) usize);

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "message {}", self.0)
    }
}

/// What the builder needs to know about the store.
pub(crate) struct Limits {
    pub(crate) max_body: usize,
    pub(crate) store_v6: bool,
}

/// The checks every way in shares, in this order: queue id range, the 32-bit fields (`flag`,
/// `sys_flag`, `reconsume_times`), body size, properties size, topic length.  `which` names the
/// message in errors.
pub(crate) fn check_record(
    which: Which,
    topic: &[u8],
    queue_id: i64,
    ints: [i64; 3],
    body_len: usize,
    props_len: usize,
    max_body: usize,
) -> PyResult<()> {
    if !(0..=MAX_QUEUE_ID).contains(&queue_id) {
        return Err(illegal(format!(
            "{which}: queue id {queue_id} of topic {:?} is out of range",
            topic_text(topic)
        )));
    }
    for (name, v) in ["flag", "sys_flag", "reconsume_times"]
        .into_iter()
        .zip(ints)
    {
        if i32::try_from(v).is_err() {
            return Err(illegal(format!(
                "{which}: {name} {v} does not fit in 32 bits"
            )));
        }
    }
    if body_len > max_body {
        return Err(illegal(format!(
            "{which} (topic {:?}): body of {} bytes exceeds maxMessageSize {}",
            topic_text(topic),
            body_len,
            max_body
        )));
    }
    if props_len > record::MAX_PROPERTIES_BYTES {
        return Err(refuse(
            "PROPERTIES_SIZE_EXCEEDED",
            format!(
                "{which} (topic {:?}): properties are {} bytes, at most {}",
                topic_text(topic),
                props_len,
                record::MAX_PROPERTIES_BYTES
            ),
        ));
    }
    if topic.is_empty() || topic.len() > record::MAX_TOPIC_BYTES {
        return Err(illegal(format!(
            "{which}: the topic is empty or longer than {} bytes",
            record::MAX_TOPIC_BYTES
        )));
    }
    Ok(())
}

/// Collects records, interning topics and grouping consumable records by (topic, queue).
pub(crate) struct Builder {
    recs: Vec<Rec>,
    topics: Vec<Vec<u8>>,
    groups: Vec<(u32, i32, u32)>,
    pub(crate) arena: Vec<u8>,
    pub(crate) arena_props: Vec<(usize, usize, usize)>, // (record, start, len) to point into the arena at the end
    pub(crate) keep: Vec<Py<PyAny>>,
    total: usize,
    limits: Limits,
}

impl Builder {
    pub(crate) fn new(limits: Limits, capacity: usize) -> Builder {
        Builder {
            recs: Vec::with_capacity(capacity),
            topics: Vec::new(),
            groups: Vec::new(),
            arena: Vec::new(),
            arena_props: Vec::new(),
            keep: Vec::new(),
            total: 0,
            limits,
        }
    }

    fn topic_index(&mut self, topic: &[u8]) -> u32 {
        if let Some(i) = self.topics.iter().rposition(|t| t.as_slice() == topic) {
            return i as u32;
        }
        self.topics.push(topic.to_vec());
        (self.topics.len() - 1) as u32
    }

    fn group_index(&mut self, topic: u32, queue_id: i32) -> u32 {
        if let Some(i) = self
            .groups
            .iter()
            .rposition(|g| g.0 == topic && g.1 == queue_id)
        {
            self.groups[i].2 += 1;
            return i as u32;
        }
        self.groups.push((topic, queue_id, 1));
        (self.groups.len() - 1) as u32
    }

    /// Checks the parts every path shares and adds the record.  `which` names the message in errors.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn push(
        &mut self,
        which: Which,
        topic: &[u8],
        queue_id: i64,
        flag: i64,
        sys_flag: i64,
        born_ts: i64,
        born: Host,
        reconsume: i64,
        prepared: i64,
        body: &[u8],
        props: Span,
    ) -> PyResult<()> {
        check_record(
            which,
            topic,
            queue_id,
            [flag, sys_flag, reconsume],
            body.len(),
            props.len,
            self.limits.max_body,
        )?;
        let sys_flag = sys_flag as i32;
        let size = record::record_len(
            born.is_v6(),
            self.limits.store_v6,
            body.len(),
            topic.len(),
            props.len,
        );
        let t = self.topic_index(topic);
        let group = if sys_flag & NOT_CONSUMABLE != 0 {
            NO_GROUP
        } else {
            self.group_index(t, queue_id as i32)
        };
        self.recs.push(Rec {
            body: Span::of(body),
            props,
            topic: t,
            group,
            queue_id: queue_id as i32,
            flag: flag as i32,
            sys_flag,
            born_ts,
            born,
            reconsume: reconsume as i32,
            prepared,
            size: size as u32,
        });
        self.total += size;
        Ok(())
    }

    pub(crate) fn finish(
        mut self,
        py: Python<'_>,
        check_topic: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<RecordBatch> {
        let mut topic_names = Vec::with_capacity(self.topics.len());
        for t in &self.topics {
            let name = PyString::new(py, &topic_text(t));
            if let Some(check) = check_topic {
                let problem = check.call1((&name,))?;
                if !problem.is_none() {
                    return Err(illegal(problem.extract::<String>()?));
                }
            }
            topic_names.push(name.unbind());
        }
        let base = self.arena.as_ptr();
        for &(i, start, len) in &self.arena_props {
            self.recs[i].props = Span {
                ptr: unsafe { base.add(start) },
                len,
            };
        }
        let recs = self.recs;
        Ok(RecordBatch {
            recs,
            topics: self.topics,
            topic_names,
            queue_offsets: std::sync::OnceLock::new(),
            groups: self.groups,
            total: self.total,
            _keep: self.keep,
            _arena: self.arena,
        })
    }
}

/// What `from_messages` reserves per message for its properties (`TAGS` and one `KEYS` are ~30 bytes).
const PROPS_GUESS_BYTES: usize = 48;

/// Below this many bytes a kernel keeps the GIL: releasing and taking it back costs more.
pub const DETACH_FROM_BYTES: usize = 64 * 1024;

/// An integer field as i64; a value outside int64 is the caller's error, named like the int32 checks.
pub(crate) fn int_field(v: &Bound<'_, PyAny>, which: Which, name: &str) -> PyResult<i64> {
    v.extract::<i64>().map_err(|e| {
        if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(v.py()) {
            illegal(format!("{which}: {name} {v} does not fit in 64 bits"))
        } else {
            e
        }
    })
}

pub(crate) fn host_arg(ip: &[u8], port: i64, what: &str) -> PyResult<Host> {
    let port = i32::try_from(port)
        .map_err(|_| PyValueError::new_err(format!("{what} port {port} is out of range")))?;
    Host::new(ip, port).ok_or_else(|| {
        PyValueError::new_err(format!(
            "{what} address has {} bytes, not 4 or 16",
            ip.len()
        ))
    })
}

/// The `bytes` of `obj`: itself when it is `bytes`, else a copy (kept alive by the batch).
pub(crate) fn as_bytes<'py>(
    obj: &Bound<'py, PyAny>,
    keep: &mut Vec<Py<PyAny>>,
) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.clone());
    }
    let b = PyBytes::new(obj.py(), Bytes::readable(obj)?.as_slice());
    keep.push(b.clone().into_any().unbind());
    Ok(b)
}

#[pymethods]
impl RecordBatch {
    /// A SEND_BATCH_MESSAGE body of one topic and queue; None when a message carries a DELAY
    /// property (the store's Python path parks those in the schedule topic).
    #[staticmethod]
    #[pyo3(signature = (body, topic, queue_id, *, sys_flag, born_timestamp, born_ip, born_port, reconsume_times,
                        max_body_bytes, store_v6, check_topic=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_wire(
        py: Python<'_>,
        body: &Bound<'_, PyBytes>,
        topic: &str,
        queue_id: i64,
        sys_flag: i64,
        born_timestamp: i64,
        born_ip: &[u8],
        born_port: i64,
        reconsume_times: i64,
        max_body_bytes: usize,
        store_v6: bool,
        check_topic: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<RecordBatch>> {
        let born = host_arg(born_ip, born_port, "born host")?;
        let data = body.as_bytes();
        let msgs = match wire::parse(data) {
            Ok(wire::Parsed::Messages(msgs)) => msgs,
            Ok(wire::Parsed::HasDelay) => return Ok(None),
            Err(wire::Error::Format(reason)) => return Err(BatchFormatError::new_err(reason)),
            Err(wire::Error::Illegal(reason)) => return Err(illegal(reason)),
        };
        let mut b = Builder::new(
            Limits {
                max_body: max_body_bytes,
                store_v6,
            },
            msgs.len(),
        );
        b.keep.push(body.clone().into_any().unbind());
        for (i, m) in msgs.iter().enumerate() {
            b.push(
                Which(i),
                topic.as_bytes(),
                queue_id,
                m.flag as i64,
                sys_flag,
                born_timestamp,
                born,
                reconsume_times,
                0,
                m.body,
                Span::of(m.props),
            )?;
        }
        b.finish(py, check_topic).map(Some)
    }

    /// `Message` objects.  Each is read here, its properties string built as
    /// `Message.properties_string` builds it; one with a delay level is handed to `general(msg)`
    /// (the store's policy re-addresses it), which returns a row (its fields in the module's docs).
    #[staticmethod]
    #[pyo3(signature = (msgs, *, max_body_bytes, store_v6, general, check_topic=None))]
    fn from_messages(
        py: Python<'_>,
        msgs: &Bound<'_, PyList>,
        max_body_bytes: usize,
        store_v6: bool,
        general: &Bound<'_, PyAny>,
        check_topic: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<RecordBatch> {
        let mut b = Builder::new(
            Limits {
                max_body: max_body_bytes,
                store_v6,
            },
            msgs.len(),
        );
        // every plain message adds its properties to the arena, a span and its body to keep: sized
        // once here instead of grown (realloc) a few times per batch
        b.arena.reserve(msgs.len() * PROPS_GUESS_BYTES);
        b.arena_props.reserve(msgs.len());
        b.keep.reserve(msgs.len());
        let reader = msgs
            .iter()
            .next()
            .and_then(|m| slots::reader(&m, &MESSAGE_FIELDS));
        let mut raw: Vec<*mut pyo3::ffi::PyObject> = Vec::with_capacity(MESSAGE_FIELDS.len());
        let mut looked_up: Vec<Bound<'_, PyAny>> = Vec::with_capacity(MESSAGE_FIELDS.len());
        for (i, m) in msgs.iter().enumerate() {
            let which = Which(i);
            if !reader.as_ref().is_some_and(|r| r.read(&m, &mut raw)) {
                looked_up.clear();
                for name in MESSAGE_FIELDS {
                    looked_up.push(m.getattr(name)?);
                }
                raw.clear();
                raw.extend(looked_up.iter().map(|f| f.as_ptr()));
            }
            // SAFETY: each pointer is a field of `m` (alive for this iteration) or held in `looked_up`.
            let field = |k: usize| unsafe { Borrowed::from_ptr(py, raw[k]) };
            let born = field(9).cast::<PyTuple>()?;
            let born_ip_obj = born.get_borrowed_item(0)?.cast::<PyBytes>()?;
            let born_ip = born_ip_obj.as_bytes();
            if int_field(&field(12), which, "delay_level")? != 0 {
                let row = general.call1((&m,))?;
                push_row(&mut b, which, row.cast::<PyTuple>()?)?;
                continue;
            }
            let topic_str = field(0).cast::<PyString>()?;
            let body = as_bytes(&field(1), &mut b.keep)?;
            let tags_str = message::tags_str(&field(3))?;
            let tags = message::tag_bytes(&tags_str)?;
            let start = b.arena.len();
            if !message::properties_into(&mut b.arena, &field(5), tags, &field(4), 0)? {
                return Err(illegal(format!("{which} (topic {:?}): property names and values must not contain \\x01 or \\x02",
                                           topic_str.to_str()?)));
            }
            let len = b.arena.len() - start;
            let port = born.get_borrowed_item(1)?.extract::<i64>()?;
            let born = host_arg(born_ip, port, "born host")?;
            b.push(
                which,
                topic_str.to_str()?.as_bytes(),
                int_field(&field(2), which, "queue_id")?,
                int_field(&field(6), which, "flag")?,
                int_field(&field(7), which, "sys_flag")?,
                int_field(&field(8), which, "born_timestamp")?,
                born,
                int_field(&field(10), which, "reconsume_times")?,
                int_field(&field(11), which, "prepared_transaction_offset")?,
                body.as_bytes(),
                Span {
                    ptr: std::ptr::null(),
                    len,
                },
            )?;
            let rec = b.recs.len() - 1;
            b.arena_props.push((rec, start, len));
            b.keep.push(body.into_any().unbind());
        }
        b.finish(py, check_topic)
    }

    fn __len__(&self) -> usize {
        self.recs.len()
    }

    /// Bytes the records take in the log.
    #[getter]
    fn total_bytes(&self) -> usize {
        self.total
    }

    /// Each record's size, in order.
    #[getter]
    fn sizes(&self) -> Vec<u32> {
        self.recs.iter().map(|r| r.size).collect()
    }

    /// Each record's queue id, in order.
    #[getter]
    fn queue_ids(&self) -> Vec<i32> {
        self.recs.iter().map(|r| r.queue_id).collect()
    }

    /// `(topic, queue id, count)` of the consumable records, one per queue, in first-seen order.
    fn groups(&self, py: Python<'_>) -> Vec<(Py<PyString>, i32, u32)> {
        self.groups
            .iter()
            .map(|&(t, q, n)| (self.topic_names[t as usize].clone_ref(py), q, n))
            .collect()
    }

    /// Each record's queue offset once appended (0 for prepared and rolled-back records).
    #[getter]
    fn queue_offsets(&self) -> PyResult<Vec<i64>> {
        self.appended_offsets().map(<[i64]>::to_vec)
    }

    /// Record `i`'s queue offset once appended.
    fn queue_offset(&self, i: usize) -> PyResult<i64> {
        self.appended_offsets()?
            .get(i)
            .copied()
            .ok_or_else(|| pyo3::exceptions::PyIndexError::new_err(i))
    }

    /// Appends the records at `dest[pos:]` (a writable buffer: the segment's mapping or transient
    /// buffer) as the log's bytes from `physical_offset` on.  Queue offsets come from `table`
    /// (`(topic, queue id) -> next offset`), which is advanced; prepared and rolled-back records
    /// get 0 and do not advance it.  A born timestamp of 0 becomes the store timestamp.  The caller
    /// holds the put lock.  A batch is appended once.
    #[pyo3(signature = (dest, pos, table, *, physical_offset, store_timestamp, store_ip, store_port))]
    #[allow(clippy::too_many_arguments)]
    fn append_to(
        &self,
        py: Python<'_>,
        dest: &Bound<'_, PyAny>,
        pos: usize,
        table: &Bound<'_, PyDict>,
        physical_offset: i64,
        store_timestamp: i64,
        store_ip: &[u8],
        store_port: i64,
    ) -> PyResult<()> {
        if self.queue_offsets.get().is_some() {
            return Err(PyValueError::new_err("this batch was appended already"));
        }
        let store = host_arg(store_ip, store_port, "store host")?;
        let out = Bytes::writable(dest)?;
        let target = out.range(pos, pos + self.total, "append_to")?;
        let mut keys = Vec::with_capacity(self.groups.len());
        let mut next = Vec::with_capacity(self.groups.len());
        for &(t, q, _) in &self.groups {
            let key = PyTuple::new(
                py,
                [
                    self.topic_names[t as usize].bind(py).as_any(),
                    &q.into_pyobject(py)?.into_any(),
                ],
            )?;
            next.push(match table.get_item(&key)? {
                Some(v) => v.extract::<i64>()?,
                None => 0,
            });
            keys.push(key);
        }
        let mut qoffs = Vec::with_capacity(self.recs.len());
        for r in &self.recs {
            if r.group == NO_GROUP {
                qoffs.push(0);
            } else {
                let g = r.group as usize;
                qoffs.push(next[g]);
                next[g] += 1;
            }
        }
        let work = || {
            // SAFETY: `out` holds the export; the caller (under the put lock) is the only writer of this range.
            let dst = unsafe { target.slice_mut() };
            self.encode_all(dst, physical_offset, store_timestamp, store, &qoffs);
        };
        if self.total >= DETACH_FROM_BYTES {
            py.detach(work)
        } else {
            work()
        }
        for (key, n) in keys.iter().zip(next) {
            table.set_item(key, n)?;
        }
        let _ = self.queue_offsets.set(qoffs);
        Ok(())
    }

    /// The offset message ids of the records once written at `physical_offset`, joined with ','
    /// (a batch send's response); `store_host` is the packed address and port.
    fn joined_msg_ids(&self, store_host: &[u8], physical_offset: i64) -> String {
        let mut offsets = Vec::with_capacity(self.recs.len());
        let mut p = physical_offset;
        for r in &self.recs {
            offsets.push(p);
            p += r.size as i64;
        }
        msgid::joined(store_host, &offsets)
    }
}

impl RecordBatch {
    fn appended_offsets(&self) -> PyResult<&[i64]> {
        self.queue_offsets
            .get()
            .map(Vec::as_slice)
            .ok_or_else(|| PyValueError::new_err("this batch is not appended yet"))
    }

    fn encode_all(
        &self,
        dst: &mut [u8],
        physical_offset: i64,
        store_ts: i64,
        store: Host,
        qoffs: &[i64],
    ) {
        let mut at = 0usize;
        let mut phys = physical_offset;
        for (r, &qoff) in self.recs.iter().zip(qoffs) {
            let size = r.size as usize;
            // SAFETY: spans point into memory this batch keeps alive.
            let (body, props) = unsafe { (r.body.get(), r.props.get()) };
            record::encode(
                &mut dst[at..at + size],
                &record::Fields {
                    queue_id: r.queue_id,
                    flag: r.flag,
                    queue_offset: qoff,
                    physical_offset: phys,
                    sys_flag: r.sys_flag,
                    born_timestamp: if r.born_ts == 0 { store_ts } else { r.born_ts },
                    born: r.born,
                    store_timestamp: store_ts,
                    store,
                    reconsume_times: r.reconsume,
                    prepared_offset: r.prepared,
                    crc: record::body_crc(body), // here, not when staged: one pass over the body
                    body,
                    topic: &self.topics[r.topic as usize],
                    props,
                },
            );
            at += size;
            phys += size as i64;
        }
    }
}

fn push_row(b: &mut Builder, which: Which, row: &Bound<'_, PyTuple>) -> PyResult<()> {
    if row.len() != 11 {
        return Err(PyValueError::new_err(format!(
            "{which}: a row has 11 fields, got {}",
            row.len()
        )));
    }
    let topic_obj = row.get_item(0)?;
    let topic = topic_obj.cast::<PyString>()?.to_str()?.as_bytes().to_vec();
    let born_ip_obj = row.get_item(5)?;
    let born = host_arg(
        born_ip_obj.cast::<PyBytes>()?.as_bytes(),
        row.get_item(6)?.extract()?,
        "born host",
    )?;
    let body = as_bytes(&row.get_item(9)?, &mut b.keep)?;
    let props_obj = as_bytes(&row.get_item(10)?, &mut b.keep)?;
    let prop_bytes = props_obj.as_bytes();
    let int = |i: usize, name: &str| int_field(&row.get_item(i)?, which, name);
    b.push(
        which,
        &topic,
        int(1, "queue_id")?,
        int(2, "flag")?,
        int(3, "sys_flag")?,
        int(4, "born_timestamp")?,
        born,
        int(7, "reconsume_times")?,
        int(8, "prepared_transaction_offset")?,
        body.as_bytes(),
        Span::of(prop_bytes),
    )?;
    b.keep.push(body.into_any().unbind());
    b.keep.push(props_obj.into_any().unbind());
    Ok(())
}
