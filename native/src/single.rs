//! The store's single put in one call: one `rocketq.common.message.Message` read, checked, encoded
//! straight into the segment at the write position, its queue offset taken from (and advanced in)
//! the CommitLog's `(topic, queue id) -> next offset` table, and its offset message id made.
//!
//! `RecordBatch.from_messages([msg])` followed by `append_to` does the same in two calls with a
//! batch object in between; for one message that object, its vectors and the second call cost more
//! than the record itself (BENCHMARKS.md, issue 15).  What is policy stays in Python: a message with
//! a delay level never comes here (`rocketq/store/commitlog.py` sends it down the batch path, whose
//! `general` callable re-addresses it), and the topic's name is checked by the store's Python
//! `check_topic` (once per distinct topic in a row: the last name that passed is remembered).
//!
//! The checks and their texts are the batch path's (`batch::check_record`, "message 0" as a list of
//! one names it), so a refused message reads the same whichever path it took; the records are the
//! same bytes (tests/native/test_single_put.py holds the two paths against each other).
//!
//! The caller holds the put lock.  A body of `DETACH_FROM_BYTES` or more is checksummed and copied
//! with the GIL released, as `append_to` does; the segment stays exported (so mapped) meanwhile.

use std::sync::Mutex;

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::Borrowed;

use crate::batch::{
    as_bytes, check_record, host_arg, illegal, int_field, Which, DETACH_FROM_BYTES, MESSAGE_FIELDS,
};
use crate::buffers::Bytes;
use crate::put_result::ResultMaker;
use crate::record::{self, Host, NOT_CONSUMABLE};
use crate::{message, msgid, slots};

/// Bytes a segment keeps free for the blank record that closes it (`END_FILE_MIN_BLANK_LENGTH`).
pub const END_FILE_MIN_BLANK: usize = 8;

create_exception!(
    _native,
    SegmentFull,
    pyo3::exceptions::PyException,
    "The record does not fit in what is left of the segment (nothing written): args are (record bytes,)."
);

/// Field positions in `MESSAGE_FIELDS`.
const TOPIC: usize = 0;
const BODY: usize = 1;
const QUEUE_ID: usize = 2;
const TAGS: usize = 3;
const KEYS: usize = 4;
const PROPERTIES: usize = 5;
const FLAG: usize = 6;
const SYS_FLAG: usize = 7;
const BORN_TIMESTAMP: usize = 8;
const BORN_HOST: usize = 9;
const RECONSUME_TIMES: usize = 10;
const PREPARED_OFFSET: usize = 11;
const DELAY_LEVEL: usize = 12;

#[pyclass(frozen, module = "rocketq._native")]
pub struct SinglePut {
    max_body: usize,
    store: Host,
    segment_bytes: usize,
    table: Py<PyDict>,
    check_topic: Py<PyAny>,
    id_prefix: Vec<u8>, // hex of the packed store address + port: how the message ids start
    checked_topic: Mutex<Vec<u8>>, // the last topic name check_topic passed
    last_key: Mutex<Option<Py<PyTuple>>>, // the last `(topic, queue id)` key, reused while it matches
    wall_clock: Py<PyAny>, // time.time: a clock read natively when `append` is given it
    results: Option<ResultMaker>, // makes append's PutMessageResult (None: append unavailable)
    put_ok: Option<Py<PyAny>>, // PutStatus.PUT_OK
}

/// What one put wrote.
struct Put {
    msg_id: String,
    queue_offset: i64,
    queue_id: i64,
    size: usize,
}

/// A `Message`'s fields as borrowed pointers: read from its slots, or looked up (then held here).
struct Fields<'py> {
    raw: [*mut pyo3::ffi::PyObject; MESSAGE_FIELDS.len()],
    _held: Vec<Bound<'py, PyAny>>,
}

impl<'py> Fields<'py> {
    fn of(msg: &Bound<'py, PyAny>) -> PyResult<Fields<'py>> {
        let mut raw = [std::ptr::null_mut(); MESSAGE_FIELDS.len()];
        let mut held = Vec::new();
        if !slots::read_one(msg, &MESSAGE_FIELDS, &mut raw) {
            for name in MESSAGE_FIELDS {
                held.push(msg.getattr(name)?);
            }
            for (r, f) in raw.iter_mut().zip(&held) {
                *r = f.as_ptr();
            }
        }
        Ok(Fields { raw, _held: held })
    }

    fn get<'a>(&'a self, py: Python<'py>, k: usize) -> Borrowed<'a, 'py, PyAny> {
        // SAFETY: each pointer is a field of the message (alive for the call) or held in `_held`.
        unsafe { Borrowed::from_ptr(py, self.raw[k]) }
    }
}

#[pymethods]
impl SinglePut {
    /// `table` is the CommitLog's queue-offset dict (kept, and advanced by every put); records are
    /// stamped with the store host; `segment_bytes` is the CommitLog's segment size.
    /// `result_type` and `put_ok` (`PutMessageResult`, `PutStatus.PUT_OK`) are what `append`
    /// returns; without them only `put` is available.
    #[new]
    #[pyo3(signature = (table, *, max_body_bytes, store_ip, store_port, segment_bytes, check_topic,
                        result_type=None, put_ok=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        table: Bound<'_, PyDict>,
        max_body_bytes: usize,
        store_ip: &[u8],
        store_port: i64,
        segment_bytes: usize,
        check_topic: Bound<'_, PyAny>,
        result_type: Option<Bound<'_, PyType>>,
        put_ok: Option<Bound<'_, PyAny>>,
    ) -> PyResult<SinglePut> {
        let py = table.py();
        let store = host_arg(store_ip, store_port, "store host")?;
        let mut host = store_ip.to_vec();
        host.extend_from_slice(&store.port.to_be_bytes());
        Ok(SinglePut {
            max_body: max_body_bytes,
            store,
            segment_bytes,
            table: table.unbind(),
            check_topic: check_topic.unbind(),
            id_prefix: msgid::host_hex(&host),
            checked_topic: Mutex::new(Vec::new()),
            last_key: Mutex::new(None),
            wall_clock: py.import("time")?.getattr("time")?.unbind(),
            results: result_type.map(|t| ResultMaker::new(&t)),
            put_ok: put_ok.map(Bound::unbind),
        })
    }

    /// Encodes `msg` at `dest[pos:]` (the segment's mapping or transient buffer, `pos` its write
    /// position) as the log's bytes at `physical_offset`, stamped `store_timestamp` (also its born
    /// timestamp when that is 0); returns `(offset message id, queue offset, record bytes)`.
    /// Raises `BatchError` for a message the store refuses and `SegmentFull(record bytes)` when it
    /// does not fit before the segment's end (nothing written, the table unchanged).
    fn put<'py>(
        &self,
        py: Python<'py>,
        msg: &Bound<'py, PyAny>,
        dest: &Bound<'py, PyAny>,
        pos: usize,
        physical_offset: i64,
        store_timestamp: i64,
    ) -> PyResult<(String, i64, usize)> {
        let put = self.encode(py, msg, dest, pos, physical_offset, store_timestamp)?;
        Ok((put.msg_id, put.queue_offset, put.size))
    }

    /// `put` at the write position of `segment` (a `MappedFile`, the caller holding the put lock;
    /// what its `write_target()` returns is read here as that method reads it: `write_buffer`, else
    /// the mapping `_mm`),
    /// stamped with `clock()` in milliseconds (read natively when `clock` is `time.time`), then the
    /// segment advanced past it as `MappedFile.advance` does (`wrote`, and `committed` when it has no
    /// transient buffer) and its `store_timestamp` set; returns the
    /// `PutMessageResult` (PUT_OK).  Raises as `put` does, with the segment unchanged.
    fn append<'py>(
        &self,
        py: Python<'py>,
        msg: &Bound<'py, PyAny>,
        segment: &Bound<'py, PyAny>,
        clock: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (Some(results), Some(put_ok)) = (&self.results, &self.put_ok) else {
            return Err(PyValueError::new_err(
                "SinglePut.append needs result_type and put_ok",
            ));
        };
        let store_ts = self.now_ms(clock)?;
        let pos: usize = segment.getattr(intern!(py, "wrote"))?.extract()?;
        let base: i64 = segment
            .getattr(intern!(py, "file_from_offset"))?
            .extract()?;
        // `segment.write_target()` without a Python frame: the transient buffer, else the mapping
        let write_buffer = segment.getattr(intern!(py, "write_buffer"))?;
        let pooled = !write_buffer.is_none();
        let dest = if pooled {
            write_buffer
        } else {
            segment.getattr(intern!(py, "_mm"))?
        };
        let phys = base + pos as i64;
        let put = self.encode(py, msg, &dest, pos, phys, store_ts)?;
        // `segment.advance(size)` without a Python frame: the fit was checked against
        // `segment_bytes` (the segment's size) before writing, so only the positions move.
        let end = (pos + put.size).into_pyobject(py)?;
        segment.setattr(intern!(py, "wrote"), &end)?;
        if !pooled {
            segment.setattr(intern!(py, "committed"), &end)?;
        }
        let ts = store_ts.into_pyobject(py)?.into_any();
        segment.setattr(intern!(py, "store_timestamp"), &ts)?;
        results.make(
            py,
            [
                put_ok.bind(py).clone(),
                PyString::new(py, &put.msg_id).into_any(),
                phys.into_pyobject(py)?.into_any(),
                put.queue_offset.into_pyobject(py)?.into_any(),
                put.queue_id.into_pyobject(py)?.into_any(),
                put.size.into_pyobject(py)?.into_any(),
                ts,
                py.None().into_bound(py),
            ],
        )
    }
}

impl SinglePut {
    /// The store time in milliseconds: `int(clock() * 1000)`, the wall clock read here when `clock`
    /// is `time.time` (a Python call and a float less per put).
    fn now_ms(&self, clock: &Bound<'_, PyAny>) -> PyResult<i64> {
        if clock.is(self.wall_clock.bind(clock.py())) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|_| PyValueError::new_err("the system clock is before 1970"))?;
            return i64::try_from(now.as_millis())
                .map_err(|_| PyValueError::new_err("the system clock is out of range"));
        }
        let seconds: f64 = clock.call0()?.extract()?;
        Ok((seconds * 1000.0) as i64)
    }

    fn encode<'py>(
        &self,
        py: Python<'py>,
        msg: &Bound<'py, PyAny>,
        dest: &Bound<'py, PyAny>,
        pos: usize,
        physical_offset: i64,
        store_timestamp: i64,
    ) -> PyResult<Put> {
        let which = Which(0);
        let f = Fields::of(msg)?;
        if int_field(&f.get(py, DELAY_LEVEL), which, "delay_level")? != 0 {
            return Err(PyValueError::new_err(
                "a message with a delay level goes through the batch path (the schedule topic)",
            ));
        }
        let topic_obj = f.get(py, TOPIC);
        let topic_str = topic_obj.cast::<PyString>()?;
        let topic = topic_str.to_str()?.as_bytes();
        let mut keep = Vec::new();
        let body_obj = as_bytes(&f.get(py, BODY), &mut keep)?;
        let body = body_obj.as_bytes();
        let tags_str = message::tags_str(&f.get(py, TAGS))?;
        let tags = message::tag_bytes(&tags_str)?;
        let mut props = Vec::with_capacity(64);
        if !message::properties_into(
            &mut props,
            &f.get(py, PROPERTIES),
            tags,
            &f.get(py, KEYS),
            0,
        )? {
            return Err(illegal(format!(
                "{which} (topic {:?}): property names and values must not contain \\x01 or \\x02",
                topic_str.to_str()?
            )));
        }
        let born_host = f.get(py, BORN_HOST);
        let born_tuple = born_host.cast::<PyTuple>()?;
        let born_ip_obj = born_tuple.get_borrowed_item(0)?;
        let born = host_arg(
            born_ip_obj.cast::<PyBytes>()?.as_bytes(),
            born_tuple.get_borrowed_item(1)?.extract::<i64>()?,
            "born host",
        )?;
        let queue_id = int_field(&f.get(py, QUEUE_ID), which, "queue_id")?;
        let flag = int_field(&f.get(py, FLAG), which, "flag")?;
        let sys_flag = int_field(&f.get(py, SYS_FLAG), which, "sys_flag")?;
        let born_ts = int_field(&f.get(py, BORN_TIMESTAMP), which, "born_timestamp")?;
        let reconsume = int_field(&f.get(py, RECONSUME_TIMES), which, "reconsume_times")?;
        let prepared = int_field(
            &f.get(py, PREPARED_OFFSET),
            which,
            "prepared_transaction_offset",
        )?;
        check_record(
            which,
            topic,
            queue_id,
            [flag, sys_flag, reconsume],
            body.len(),
            props.len(),
            self.max_body,
        )?;
        self.check_topic(&topic_str)?;
        let size = record::record_len(
            born.is_v6(),
            self.store.is_v6(),
            body.len(),
            topic.len(),
            props.len(),
        );
        if size + END_FILE_MIN_BLANK > self.segment_bytes {
            return Err(illegal(format!(
                "a batch of {size} bytes does not fit in a {}-byte commitlog segment",
                self.segment_bytes
            )));
        }
        if pos + size + END_FILE_MIN_BLANK > self.segment_bytes {
            return Err(SegmentFull::new_err(size));
        }
        let out = Bytes::writable(dest)?;
        let target = out.range(pos, pos + size, "SinglePut.put")?;
        let sys_flag = sys_flag as i32;
        let table = self.table.bind(py);
        let key = if sys_flag & NOT_CONSUMABLE != 0 {
            None // prepared and rolled-back records get queue offset 0 and do not advance the table
        } else {
            Some(self.key(&topic_str, queue_id)?)
        };
        let queue_offset = match &key {
            Some(k) => match table.get_item(k)? {
                Some(v) => v.extract::<i64>()?,
                None => 0,
            },
            None => 0,
        };
        let mut fields = record::Fields {
            queue_id: queue_id as i32,
            flag: flag as i32,
            queue_offset,
            physical_offset,
            sys_flag,
            born_timestamp: if born_ts == 0 {
                store_timestamp
            } else {
                born_ts
            },
            born,
            store_timestamp,
            store: self.store,
            reconsume_times: reconsume as i32,
            prepared_offset: prepared,
            crc: 0,
            body,
            topic,
            props: &props,
        };
        let mut write = move || {
            fields.crc = record::body_crc(fields.body);
            // SAFETY: `out` holds the export; the caller (under the put lock) is the only writer of
            // this range, and `body` is an immutable `bytes` kept alive by `body_obj`.
            record::encode(unsafe { target.slice_mut() }, &fields);
        };
        if body.len() >= DETACH_FROM_BYTES {
            py.detach(write)
        } else {
            write()
        }
        if let Some(k) = key {
            table.set_item(k, queue_offset + 1)?;
        }
        Ok(Put {
            msg_id: msgid::one(&self.id_prefix, physical_offset),
            queue_offset,
            queue_id,
            size,
        })
    }

    /// The table's key `(topic, queue_id)`: the last one made when it matches (a row of puts to one
    /// queue makes no tuple; the dict finds a key it stored from here by identity), else a new one.
    fn key<'py>(
        &self,
        topic: &Bound<'py, PyString>,
        queue_id: i64,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let py = topic.py();
        let mut last = self
            .last_key
            .lock()
            .map_err(|_| PyValueError::new_err("SinglePut: a put panicked while making a key"))?;
        if let Some(k) = last.as_ref().map(|k| k.bind(py)) {
            let (t, q) = (k.get_borrowed_item(0)?, k.get_borrowed_item(1)?);
            let same_topic = t.is(topic)
                || match t.cast::<PyString>() {
                    Ok(t) => t.to_str()? == topic.to_str()?,
                    Err(_) => false,
                };
            if same_topic && q.extract::<i64>().is_ok_and(|q| q == queue_id) {
                return Ok(k.clone());
            }
        }
        let key = PyTuple::new(
            py,
            [topic.as_any(), &queue_id.into_pyobject(py)?.into_any()],
        )?;
        *last = Some(key.clone().unbind());
        Ok(key)
    }

    /// `check_topic(topic)` unless `topic` is the last name it passed.
    fn check_topic(&self, topic: &Bound<'_, PyString>) -> PyResult<()> {
        let name = topic.to_str()?.as_bytes();
        if self.last_checked()?.as_slice() == name {
            return Ok(());
        }
        // the lock is not held while Python runs: the checker may let another thread take the GIL
        let problem = self.check_topic.bind(topic.py()).call1((topic,))?;
        if !problem.is_none() {
            return Err(illegal(problem.extract::<String>()?));
        }
        let mut last = self.last_checked()?;
        last.clear();
        last.extend_from_slice(name);
        Ok(())
    }

    fn last_checked(&self) -> PyResult<std::sync::MutexGuard<'_, Vec<u8>>> {
        self.checked_topic
            .lock()
            .map_err(|_| PyValueError::new_err("SinglePut: a put panicked while checking a topic"))
    }
}
