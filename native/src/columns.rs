//! Records into Arrow-layout column buffers (the Spark sources), one call per chunk of records.
//!
//! The crate has no Arrow dependency: it fills the buffers Arrow's format defines and Python wraps
//! them with `pyarrow.Array.from_buffers`:
//! * fixed-width columns: little-endian values back to back (`int32`, `int64`, timestamps in us);
//! * `string` / `binary`: an optional validity bitmap (LSB first, 1 = valid), `int32` offsets (n + 1),
//!   the value bytes;
//! * `map<string,string>` (properties): `int32` offsets of each record's entries, then the keys and
//!   the values as two string columns.
//!
//! Each buffer is handed to Python as a [`ColumnBuffer`]: the vector the loop filled, exported
//! read-only through the buffer protocol, so `pyarrow.py_buffer` wraps it without a copy (a chunk
//! of 64 Ki records is ~20 MB of buffers: copying them into `bytes` cost as much as filling them).
//!
//! Records come from a segment (or a pull's body) at the given positions; they were walked and
//! checked before, but every length is checked again here and a record that does not parse ends the
//! chunk with an error naming its position.  Property values are looked up the last-wins way.
//! `msg_id` is the UNIQ_KEY when the producer set one, else the offset message id (store host + port
//! + physical offset, upper-case hex).  Bodies with the COMPRESSED sysflag are returned as stored and
//!   listed, for Python to inflate.
//!
//! The store source's row filter (topics, a store-time window) is applied here, before a dropped
//! record costs any column work; the caller gets how many positions were `consumed` beside the
//! `rows` kept.
//!
//! [`walk::walk_columns`] fuses the segment walk ([`crate::scan::step`]: every check of `scan_segment`)
//! with the decoding: one pass over the bytes, a chunk of records at a time, so the first batch of
//! a range is ready after one chunk's work instead of after a walk of the whole range, and no
//! position arrays are built between the two.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::buffers::Bytes;
use crate::props;
use crate::record::{self, Parsed};

const COMPRESSED: i32 = 0x1;

mod buffer;
pub mod layout;
mod pool;
pub mod walk;
pub use buffer::ColumnBuffer;
use buffer::{column, Owned};
use pool::Slot;

// Pool slots (see `pool`): a string column's three buffers from its first slot on, then the
// fixed-width columns.
const SLOT_TOPIC: Slot = 0;
const SLOT_KEYS: Slot = 3;
const SLOT_TAGS: Slot = 6;
const SLOT_BODY: Slot = 9;
const SLOT_PROP_KEYS: Slot = 12;
const SLOT_PROP_VALUES: Slot = 15;
const SLOT_MSG_ID: Slot = 18;
const SLOT_QUEUE_ID: Slot = 21;
const SLOT_QUEUE_OFFSET: Slot = 22;
const SLOT_MAP_OFFSETS: Slot = 23;
const SLOT_BORN: Slot = 24;
const SLOT_STORE: Slot = 25;
const SLOT_RECONSUME: Slot = 26;
const SLOT_PHYSICAL: Slot = 27;
const SLOT_SYSFLAG: Slot = 28;

/// A `string` / `binary` column being filled.  The validity bitmap is only kept from the first null
/// on (the bits before it are all set then): most columns never hold a null and skip the bit work.
struct Strings {
    validity: Vec<u8>,
    offsets: Vec<i32>,
    data: Vec<u8>,
    nulls: usize,
    /// The pool slot of `validity`; `offsets` and `data` have the two after it.
    slot: Slot,
}

/// A string column as pyarrow takes it: (validity bitmap or None when no value is null, offsets, data).
type ArrowStrings<'py> = (
    Option<Bound<'py, ColumnBuffer>>,
    Bound<'py, ColumnBuffer>,
    Bound<'py, ColumnBuffer>,
);

impl Strings {
    fn new(slot: Slot, capacity: usize) -> Strings {
        let mut s = Strings {
            validity: pool::u8s(slot, 0),
            offsets: pool::i32s(slot + 1, capacity + 1),
            data: pool::u8s(slot + 2, 0),
            nulls: 0,
            slot,
        };
        s.offsets.push(0);
        s
    }
    /// Appends one value: `Some(fill)` writes its bytes into the data, `None` is a null.
    #[inline]
    fn push_with(&mut self, fill: Option<impl FnOnce(&mut Vec<u8>)>) {
        let i = self.offsets.len() - 1;
        match fill {
            Some(fill) => {
                fill(&mut self.data);
                if self.nulls > 0 {
                    self.mark(i, true);
                }
            }
            None => {
                if self.nulls == 0 {
                    // the first null: the bitmap so far, every value valid
                    self.validity.clear();
                    self.validity.resize(i / 8, 0xFF);
                    if !i.is_multiple_of(8) {
                        self.validity.push((1u8 << (i % 8)) - 1);
                    }
                }
                self.nulls += 1;
                self.mark(i, false);
            }
        }
        self.offsets.push(self.data.len() as i32);
    }
    /// Value `i`'s bit (the bitmap covers the values before it).
    fn mark(&mut self, i: usize, valid: bool) {
        if i.is_multiple_of(8) {
            self.validity.push(0);
        }
        if valid {
            self.validity[i / 8] |= 1 << (i % 8);
        }
    }
    #[inline]
    fn push(&mut self, value: Option<&[u8]>) {
        self.push_with(value.map(|v| move |data: &mut Vec<u8>| data.extend_from_slice(v)));
    }
    fn fits(&self, more: usize) -> bool {
        self.data.len() + more <= i32::MAX as usize
    }
    fn into_py<'py>(self, py: Python<'py>) -> PyResult<ArrowStrings<'py>> {
        let slot = self.slot;
        let validity = if self.nulls > 0 {
            Some(column(py, slot, Owned::U8(self.validity))?)
        } else {
            pool::give(slot, Owned::U8(self.validity)); // unused: kept for the next chunk
            None
        };
        Ok((
            validity,
            column(py, slot + 1, Owned::i32s(self.offsets))?,
            column(py, slot + 2, Owned::U8(self.data))?,
        ))
    }
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
}

/// Which records to keep (the store source's `topics` and store-time window, in ms: [min, max)).
#[derive(Default)]
struct Keep {
    topics: Option<Vec<Vec<u8>>>,
    min_store_ms: Option<i64>,
    max_store_ms: Option<i64>,
}

impl Keep {
    fn new(
        topics: Option<Vec<String>>,
        min_store_ms: Option<i64>,
        max_store_ms: Option<i64>,
    ) -> Keep {
        Keep {
            topics: topics.map(|t| t.into_iter().map(String::into_bytes).collect()),
            min_store_ms,
            max_store_ms,
        }
    }
    fn keeps(&self, v: &record::View) -> bool {
        self.topics
            .as_ref()
            .is_none_or(|t| t.iter().any(|name| name.as_slice() == v.topic))
            && self.min_store_ms.is_none_or(|lo| v.store_timestamp >= lo)
            && self.max_store_ms.is_none_or(|hi| v.store_timestamp < hi)
    }
}

/// Kept rows after which the string columns reserve room for the rest of the chunk.
const SAMPLE_ROWS: usize = 64;

/// Property pairs of one record, reused from record to record (no allocation per record).
type Pairs<'a> = Vec<(&'a [u8], &'a [u8])>;

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
    /// Empty columns with room for `capacity` rows, their vectors from the pool when it has them.
    fn new(capacity: usize) -> Columns {
        let mut c = Columns {
            topic: Strings::new(SLOT_TOPIC, capacity),
            queue_id: pool::i32s(SLOT_QUEUE_ID, capacity),
            queue_offset: pool::i64s(SLOT_QUEUE_OFFSET, capacity),
            keys: Strings::new(SLOT_KEYS, capacity),
            tags: Strings::new(SLOT_TAGS, capacity),
            body: Strings::new(SLOT_BODY, capacity),
            map_offsets: pool::i32s(SLOT_MAP_OFFSETS, capacity + 1),
            prop_keys: Strings::new(SLOT_PROP_KEYS, capacity),
            prop_values: Strings::new(SLOT_PROP_VALUES, capacity),
            msg_id: Strings::new(SLOT_MSG_ID, capacity),
            born_us: pool::i64s(SLOT_BORN, capacity),
            store_us: pool::i64s(SLOT_STORE, capacity),
            reconsume: pool::i32s(SLOT_RECONSUME, capacity),
            physical_offset: pool::i64s(SLOT_PHYSICAL, capacity),
            sysflag: pool::i32s(SLOT_SYSFLAG, capacity),
            compressed: Vec::new(),
            uniform_topic: true,
        };
        c.map_offsets.push(0);
        c
    }

    /// Room in every string column for `more` rows like the ones so far (plus an eighth): filling a
    /// vector by doubling copied and page-faulted each column about twice (a tenth of a task's CPU).
    fn reserve_like_sample(&mut self, more: usize) {
        let rows = self.queue_id.len().max(1);
        for s in [
            &mut self.topic,
            &mut self.keys,
            &mut self.tags,
            &mut self.body,
            &mut self.prop_keys,
            &mut self.prop_values,
            &mut self.msg_id,
        ] {
            let per_row = s.data.len().div_ceil(rows);
            let values_per_row = (s.offsets.len() - 1).div_ceil(rows);
            s.data.reserve(per_row * more / 8 * 9);
            s.offsets.reserve(values_per_row * more);
            s.validity.reserve(values_per_row * more / 8 + 1);
        }
    }

    /// Whether one more record of `size` bytes keeps every string column's offsets within `i32`
    /// (each value is a part of the record, or a 56-character id no larger than a record's header).
    fn fits(&self, size: usize) -> bool {
        [
            &self.topic,
            &self.keys,
            &self.tags,
            &self.body,
            &self.prop_keys,
            &self.prop_values,
            &self.msg_id,
        ]
        .iter()
        .all(|s| s.fits(size))
    }

    /// While every row has the same topic (the usual chunk), the topic column holds it once and
    /// Python repeats it; at the first row with another topic, the column is filled out.
    fn add_topic(&mut self, rows_before: usize, topic: &[u8]) {
        if rows_before > 0 && self.uniform_topic {
            let first = &self.topic.data[..self.topic.offsets[1] as usize];
            if first == topic {
                return;
            }
            self.uniform_topic = false;
            let first = first.to_vec();
            for _ in 1..rows_before {
                self.topic.push(Some(&first));
            }
        }
        self.topic.push(Some(topic));
    }

    fn add<'a>(&mut self, rec: &'a [u8], v: &record::View<'a>, pairs: &mut Pairs<'a>) {
        let n = self.queue_id.len();
        self.add_topic(n, v.topic);
        self.queue_id.push(v.queue_id);
        self.queue_offset.push(v.queue_offset);
        // a name given twice keeps its first place and its last value, as a Java or Python map does
        pairs.clear();
        for_each_property(v.props, |name, value| {
            match pairs.iter_mut().find(|(n, _)| *n == name) {
                Some(pair) => pair.1 = value,
                None => pairs.push((name, value)),
            }
        });
        let mut known = props::Known::default();
        for &(name, value) in pairs.iter() {
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
            None => self.msg_id.push_with(Some(|id: &mut Vec<u8>| {
                push_hex(id, store_host(rec, v.sys_flag));
                push_hex(id, &v.physical_offset.to_be_bytes());
            })),
        }
        self.born_us.push(born_ts(rec).saturating_mul(1000));
        self.store_us.push(v.store_timestamp.saturating_mul(1000));
        self.reconsume.push(reconsume(rec, v.sys_flag));
        self.physical_offset.push(v.physical_offset);
        self.sysflag.push(v.sys_flag);
    }
}

/// Properties strings shorter than this are split byte by byte ([`props::for_each`]): below it the
/// SIMD search's setup per separator costs more than the compares it saves.
const SIMD_PROPS_FROM: usize = 96;

/// [`props::for_each`], with the separators found by SIMD (`memchr2`) in long strings: the
/// properties are the longest part of a record the decoder searches.
#[inline]
fn for_each_property<'a>(props: &'a [u8], f: impl FnMut(&'a [u8], &'a [u8])) {
    if props.len() < SIMD_PROPS_FROM {
        props::for_each(props, f)
    } else {
        for_each_property_simd(props, f)
    }
}

fn for_each_property_simd<'a>(props: &'a [u8], mut f: impl FnMut(&'a [u8], &'a [u8])) {
    let mut emit = |start: usize, cut: Option<usize>, end: usize| match cut {
        Some(cut) if cut > start => f(&props[start..cut], &props[cut + 1..end]),
        _ => {} // an item without a name/value separator, or with an empty name
    };
    let (mut start, mut cut) = (0, None);
    for i in memchr::memchr2_iter(props::NAME_VALUE, props::PROPERTY, props) {
        if props[i] == props::PROPERTY {
            emit(start, cut, i);
            (start, cut) = (i + 1, None);
        } else if cut.is_none() {
            cut = Some(i);
        }
    }
    emit(start, cut, props.len());
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

/// The loop: columns of the records at `pos` (native-endian int64s) in `bytes` that `keep` keeps;
/// returns them, the positions consumed and the error that ended the chunk early, if any.
fn fill(bytes: &[u8], pos: &[u8], keep: &Keep) -> (Columns, usize, Option<String>) {
    let mut c = Columns::new(pos.len() / 8);
    let mut pairs: Pairs = Vec::new();
    let mut consumed = 0;
    for chunk in pos.chunks_exact(8) {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(chunk);
        let p = i64::from_ne_bytes(raw);
        if p < 0 || p as usize >= bytes.len() {
            let error = format!(
                "record position {p} is outside the buffer of {} bytes",
                bytes.len()
            );
            return (c, consumed, Some(error));
        }
        let p = p as usize;
        match record::parse(bytes, p, bytes.len()) {
            Parsed::Record(v) => {
                if keep.keeps(&v) {
                    if !c.fits(v.size) {
                        break; // a column reached 2 GiB: the caller asks again from `consumed`
                    }
                    c.add(&bytes[p..p + v.size], &v, &mut pairs);
                    if c.queue_id.len() == SAMPLE_ROWS {
                        c.reserve_like_sample(pos.len() / 8 - consumed - 1);
                    }
                }
            }
            Parsed::Blank(_) => {
                let error = format!("position {p} holds a blank record, not a message");
                return (c, consumed, Some(error));
            }
            Parsed::Bad(reason) => return (c, consumed, Some(format!("position {p}: {reason}"))),
        }
        consumed += 1;
    }
    (c, consumed, None)
}

/// The columns of the records at `positions` (native-endian int64s in a buffer) in `buf`, keeping
/// only records of `topics` (None: all) stored in `[min_store_ms, max_store_ms)` (None: unbounded).
/// Returns a dict: per column its buffers (see the module doc), plus `rows` (records kept),
/// `consumed` (positions read: fewer than given when a column would pass 2 GiB, or at an error),
/// `uniform_topic` (then the `topic` column holds one value, every row's), `compressed` (row
/// numbers) and `error` (None, or why the record at position
/// number `consumed` does not parse).
#[pyfunction]
#[pyo3(signature = (buf, positions, topics=None, min_store_ms=None, max_store_ms=None))]
pub fn record_columns<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    positions: &Bound<'py, PyAny>,
    topics: Option<Vec<String>>,
    min_store_ms: Option<i64>,
    max_store_ms: Option<i64>,
) -> PyResult<Bound<'py, PyDict>> {
    let data = Bytes::readable(buf)?;
    let pos_buf = Bytes::readable(positions)?;
    let raw = data.raw();
    let pos_raw = pos_buf.raw();
    let keep = Keep::new(topics, min_store_ms, max_store_ms);
    // SAFETY: both exports are held for the call.
    let build = || fill(unsafe { raw.slice() }, unsafe { pos_raw.slice() }, &keep);
    let (c, consumed, error) = if data.len() >= crate::batch::DETACH_FROM_BYTES {
        py.detach(build)
    } else {
        build()
    };
    let out = columns_dict(py, c)?;
    out.set_item("consumed", consumed)?;
    out.set_item("error", error)?;
    Ok(out)
}

/// The dict both entry points return: per column its buffers, `rows`, `uniform_topic`, `compressed`.
fn columns_dict(py: Python<'_>, c: Columns) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("rows", c.queue_id.len())?;
    out.set_item("uniform_topic", c.uniform_topic)?;
    out.set_item("compressed", c.compressed)?;
    let fixed = [
        ("queue_id", SLOT_QUEUE_ID, Owned::i32s(c.queue_id)),
        (
            "queue_offset",
            SLOT_QUEUE_OFFSET,
            Owned::i64s(c.queue_offset),
        ),
        ("born_timestamp", SLOT_BORN, Owned::i64s(c.born_us)),
        ("store_timestamp", SLOT_STORE, Owned::i64s(c.store_us)),
        ("reconsume_times", SLOT_RECONSUME, Owned::i32s(c.reconsume)),
        (
            "physical_offset",
            SLOT_PHYSICAL,
            Owned::i64s(c.physical_offset),
        ),
        ("sysflag", SLOT_SYSFLAG, Owned::i32s(c.sysflag)),
        ("map_offsets", SLOT_MAP_OFFSETS, Owned::i32s(c.map_offsets)),
    ];
    for (name, slot, data) in fixed {
        out.set_item(name, column(py, slot, data)?)?;
    }
    out.set_item("topic", c.topic.into_py(py)?)?;
    out.set_item("keys", c.keys.into_py(py)?)?;
    out.set_item("tags", c.tags.into_py(py)?)?;
    out.set_item("body", c.body.into_py(py)?)?;
    out.set_item("msg_id", c.msg_id.into_py(py)?)?;
    out.set_item("prop_keys", c.prop_keys.into_py(py)?)?;
    out.set_item("prop_values", c.prop_values.into_py(py)?)?;
    Ok(out)
}
