//! Records into Arrow-layout column buffers (the Spark sources), one call per chunk of records.
//!
//! The crate has no Arrow dependency: it fills the buffers Arrow's format defines and Python wraps
//! them with `pyarrow.Array.from_buffers`:
//! * fixed-width columns: little-endian values back to back (`int32`, `int64`, timestamps in us);
//! * `string` / `binary`: an optional validity bitmap (LSB first, 1 = valid), `int32` offsets (n + 1),
//!   the value bytes;
//! * `map<string,string>` (properties): `int32` offsets of each record's entries, then the keys and
//!   the values as two string columns.
//! Records come from a segment (or a pull's body) at the given positions; they were walked and
//! checked before, but every length is checked again here and a record that does not parse ends the
//! chunk with an error naming its position.  Property values are looked up the last-wins way.
//! `msg_id` is the UNIQ_KEY when the producer set one, else the offset message id (store host + port
//! + physical offset, upper-case hex).  Bodies with the COMPRESSED sysflag are returned as stored and
//! listed, for Python to inflate.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::buffers::Bytes;
use crate::props;
use crate::record::{self, Parsed};

const COMPRESSED: i32 = 0x1;

#[derive(Default)]
struct Strings {
    validity: Vec<u8>,
    offsets: Vec<i32>,
    data: Vec<u8>,
    nulls: usize,
}

impl Strings {
    fn new(capacity: usize) -> Strings {
        let mut s = Strings {
            offsets: Vec::with_capacity(capacity + 1),
            ..Default::default()
        };
        s.offsets.push(0);
        s
    }
    fn push(&mut self, value: Option<&[u8]>) {
        let i = self.offsets.len() - 1;
        if i % 8 == 0 {
            self.validity.push(0);
        }
        match value {
            Some(v) => {
                self.data.extend_from_slice(v);
                self.validity[i / 8] |= 1 << (i % 8);
            }
            None => self.nulls += 1,
        }
        self.offsets.push(self.data.len() as i32);
    }
    fn fits(&self, more: usize) -> bool {
        self.data.len() + more <= i32::MAX as usize
    }
    fn into_py<'py>(
        self,
        py: Python<'py>,
    ) -> (
        Option<Bound<'py, PyBytes>>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    ) {
        let validity = if self.nulls > 0 {
            Some(PyBytes::new(py, &self.validity))
        } else {
            None
        };
        (
            validity,
            le_bytes(py, &self.offsets),
            PyBytes::new(py, &self.data),
        )
    }
}

fn le_bytes<'py, T: Copy + ToLe>(py: Python<'py>, values: &[T]) -> Bound<'py, PyBytes> {
    PyBytes::new_with(py, values.len() * T::WIDTH, |out| {
        for (chunk, v) in out.chunks_exact_mut(T::WIDTH).zip(values) {
            v.write_le(chunk);
        }
        Ok(())
    })
    .expect("allocating a column buffer")
}

trait ToLe {
    const WIDTH: usize;
    fn write_le(&self, out: &mut [u8]);
}
impl ToLe for i32 {
    const WIDTH: usize = 4;
    fn write_le(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}
impl ToLe for i64 {
    const WIDTH: usize = 8;
    fn write_le(&self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
}

#[derive(Default)]
struct Columns {
    topic: Strings,
    queue_id: Vec<i32>,
    queue_offset: Vec<i64>,
    keys: Strings,
    tags: Strings,
    body: Strings,
    map_offsets: Vec<i32>,
    prop_keys: Strings,
    prop_values: Strings,
    msg_id: Strings,
    born_us: Vec<i64>,
    store_us: Vec<i64>,
    reconsume: Vec<i32>,
    physical_offset: Vec<i64>,
    sysflag: Vec<i32>,
    compressed: Vec<i64>,
    uniform_topic: bool,
}

impl Columns {
    fn add(&mut self, rec: &[u8], v: &record::View) {
        let n = self.queue_id.len();
        if n > 0 && self.uniform_topic {
            let first = &self.topic.data[..self.topic.offsets[1] as usize];
            self.uniform_topic = first == v.topic;
        }
        self.topic.push(Some(v.topic));
        self.queue_id.push(v.queue_id);
        self.queue_offset.push(v.queue_offset);
        // a name given twice keeps its first place and its last value, as a Java or Python map does
        let mut pairs: Vec<(&[u8], &[u8])> = Vec::new();
        props::for_each(v.props, |name, value| {
            match pairs.iter_mut().find(|(n, _)| *n == name) {
                Some(pair) => pair.1 = value,
                None => pairs.push((name, value)),
            }
        });
        let mut known = props::Known::default();
        for &(name, value) in &pairs {
            self.prop_keys.push(Some(name));
            self.prop_values.push(Some(value));
            match name {
                b"TAGS" => known.tags = Some(value),
                b"KEYS" => known.keys = Some(value),
                b"UNIQ_KEY" => known.uniq_key = Some(value),
                _ => {}
            }
        }
        self.map_offsets
            .push((self.prop_keys.offsets.len() - 1) as i32);
        self.keys.push(known.keys);
        self.tags.push(known.tags);
        self.body.push(Some(v.body));
        if v.sys_flag & COMPRESSED != 0 {
            self.compressed.push(n as i64);
        }
        match known.uniq_key.filter(|u| !u.is_empty()) {
            Some(u) => self.msg_id.push(Some(u)),
            None => {
                let store = store_host(rec, v.sys_flag);
                let mut id = Vec::with_capacity(2 * (store.len() + 8));
                push_hex(&mut id, store);
                push_hex(&mut id, &v.physical_offset.to_be_bytes());
                self.msg_id.push(Some(&id));
            }
        }
        self.born_us.push(born_ts(rec).saturating_mul(1000));
        self.store_us.push(v.store_timestamp.saturating_mul(1000));
        self.reconsume.push(reconsume(rec, v.sys_flag));
        self.physical_offset.push(v.physical_offset);
        self.sysflag.push(v.sys_flag);
    }
}

fn store_host(rec: &[u8], sys_flag: i32) -> &[u8] {
    let at = if sys_flag & record::BORNHOST_V6 != 0 {
        76
    } else {
        64
    };
    let len = if sys_flag & record::STOREHOST_V6 != 0 {
        20
    } else {
        8
    };
    &rec[at..at + len]
}

fn born_ts(rec: &[u8]) -> i64 {
    record::be_i64(rec, 40)
}

fn reconsume(rec: &[u8], sys_flag: i32) -> i32 {
    let at = record::header_len(
        sys_flag & record::BORNHOST_V6 != 0,
        sys_flag & record::STOREHOST_V6 != 0,
    ) - 16;
    record::be_i32(rec, at)
}

/// The columns of the records at `positions` (native-endian int64s in a buffer) in `buf`.
/// Returns a dict: per column its buffers (see the module doc), plus `rows` (records decoded: fewer
/// than asked when a column would pass 2 GiB), `uniform_topic`, `compressed` (row numbers) and
/// `error` (None, or why the record at row `rows` does not parse).
#[pyfunction]
pub fn record_columns<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    positions: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let data = Bytes::readable(buf)?;
    let pos_buf = Bytes::readable(positions)?;
    let raw = data.raw();
    let pos_raw = pos_buf.raw();
    let build = || {
        // SAFETY: both exports are held for the call.
        let (bytes, pos) = unsafe { (raw.slice(), pos_raw.slice()) };
        let n = pos.len() / 8;
        let mut c = Columns {
            uniform_topic: true,
            ..Default::default()
        };
        for s in [
            &mut c.topic,
            &mut c.keys,
            &mut c.tags,
            &mut c.body,
            &mut c.prop_keys,
            &mut c.prop_values,
            &mut c.msg_id,
        ] {
            *s = Strings::new(n);
        }
        c.map_offsets.push(0);
        let mut error = None;
        for chunk in pos.chunks_exact(8) {
            let p = i64::from_ne_bytes(chunk.try_into().unwrap());
            if p < 0 || p as usize >= bytes.len() {
                error = Some(format!(
                    "record position {p} is outside the buffer of {} bytes",
                    bytes.len()
                ));
                break;
            }
            let p = p as usize;
            match record::parse(bytes, p, bytes.len()) {
                Parsed::Record(v) => {
                    if !c.body.fits(v.body.len()) || !c.prop_values.fits(v.props.len()) {
                        break;
                    }
                    c.add(&bytes[p..p + v.size], &v);
                }
                Parsed::Blank(_) => {
                    error = Some(format!("position {p} holds a blank record, not a message"));
                    break;
                }
                Parsed::Bad(reason) => {
                    error = Some(format!("position {p}: {reason}"));
                    break;
                }
            }
        }
        (c, error)
    };
    let (c, error) = if data.len() >= crate::batch::DETACH_FROM_BYTES {
        py.detach(build)
    } else {
        build()
    };
    let out = PyDict::new(py);
    out.set_item("rows", c.queue_id.len())?;
    out.set_item("uniform_topic", c.uniform_topic)?;
    out.set_item("compressed", c.compressed.clone())?;
    out.set_item("error", error)?;
    out.set_item("queue_id", le_bytes(py, &c.queue_id))?;
    out.set_item("queue_offset", le_bytes(py, &c.queue_offset))?;
    out.set_item("born_timestamp", le_bytes(py, &c.born_us))?;
    out.set_item("store_timestamp", le_bytes(py, &c.store_us))?;
    out.set_item("reconsume_times", le_bytes(py, &c.reconsume))?;
    out.set_item("physical_offset", le_bytes(py, &c.physical_offset))?;
    out.set_item("sysflag", le_bytes(py, &c.sysflag))?;
    out.set_item("map_offsets", le_bytes(py, &c.map_offsets))?;
    out.set_item("topic", c.topic.into_py(py))?;
    out.set_item("keys", c.keys.into_py(py))?;
    out.set_item("tags", c.tags.into_py(py))?;
    out.set_item("body", c.body.into_py(py))?;
    out.set_item("msg_id", c.msg_id.into_py(py))?;
    out.set_item("prop_keys", c.prop_keys.into_py(py))?;
    out.set_item("prop_values", c.prop_values.into_py(py))?;
    Ok(out)
}
