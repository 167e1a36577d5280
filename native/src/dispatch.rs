//! Dispatch (RocketMQ `ReputMessageService`): records read back from the CommitLog become
//! consume-queue units and index entries.  One call walks a run of records in one segment and
//! returns everything the consume queues and the index need, built in Rust:
//!
//! * per queue, runs of 20-byte units with consecutive queue offsets
//!   (`i64 commitlog offset | i32 size | i64 tags code`, big-endian); the tags code is
//!   `String.hashCode` of TAGS (0 without), or in `SCHEDULE_TOPIC_XXXX` the delivery time
//!   (store time + the DELAY level's delay);
//! * index entries `(abs(hashCode("topic#key")), commitlog offset, store time)` for every KEYS word
//!   and the UNIQ_KEY, in log order; rolled-back transaction records are not indexed.
//!
//! Prepared and rolled-back transaction records never reach a consume queue.  The walk stops at
//! the end of the range, at the segment's blank record, or at bytes that are no record (which the
//! caller reports: the append path never writes such bytes, so it means damage).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::buffers::Bytes;
use crate::javahash;
use crate::props;
use crate::record::{self, Parsed, NOT_CONSUMABLE, ROLLBACK};

pub const SCHEDULE_TOPIC: &[u8] = b"SCHEDULE_TOPIC_XXXX";
pub const CQ_UNIT: usize = 20;

#[derive(Clone, Copy)]
pub struct IndexEntry {
    pub hash: i32,
    pub phys: i64,
    pub store_ts: i64,
}

struct Group {
    topic: u32,
    queue_id: i32,
    first: i64,
    units: Vec<u8>,
    phy_end: i64,
}

/// `(topic, queue id, first queue offset, 20-byte units, commitlog end of the last record)`.
type QueueRun<'py> = (Bound<'py, PyString>, i32, i64, Bound<'py, PyBytes>, i64);

#[pyclass(frozen, module = "rocketq._native")]
pub struct DispatchRun {
    /// Segment-relative position the walk reached.
    #[pyo3(get)]
    end: usize,
    /// The walk stopped at the segment's blank record (the rest of the segment holds nothing).
    #[pyo3(get)]
    blank: bool,
    /// Records walked.
    #[pyo3(get)]
    records: usize,
    /// Why the walk stopped before the end of the range, if it did at bytes that are no record.
    #[pyo3(get)]
    error: Option<String>,
    /// Commitlog offset of the segment's first byte.
    #[pyo3(get)]
    base_offset: i64,
    /// Largest store time of the records walked (0 when none).
    #[pyo3(get)]
    max_store_timestamp: i64,
    topics: Vec<Vec<u8>>,
    groups: Vec<Group>,
    pub(crate) index: Vec<IndexEntry>,
}

#[pymethods]
impl DispatchRun {
    /// `(topic, queue_id, first queue offset, units, end of the last unit's record)` per run of
    /// consecutive units, in log order within each queue.
    fn queue_runs<'py>(&self, py: Python<'py>) -> Vec<QueueRun<'py>> {
        self.groups
            .iter()
            .map(|g| {
                let topic =
                    PyString::new(py, &String::from_utf8_lossy(&self.topics[g.topic as usize]));
                (
                    topic,
                    g.queue_id,
                    g.first,
                    PyBytes::new(py, &g.units),
                    g.phy_end,
                )
            })
            .collect()
    }

    /// Index entries.
    #[getter]
    fn index_entries(&self) -> usize {
        self.index.len()
    }

    /// The first index entry whose commitlog offset is above `phys`.
    fn index_first_after(&self, phys: i64) -> usize {
        self.index.partition_point(|e| e.phys <= phys)
    }

    /// The first index entry whose commitlog offset is `phys` or above.
    fn index_first_at(&self, phys: i64) -> usize {
        self.index.partition_point(|e| e.phys < phys)
    }

    /// `(hash, commitlog offset, store time)` of every index entry (for tests and tools).
    fn index_list(&self) -> Vec<(i32, i64, i64)> {
        self.index
            .iter()
            .map(|e| (e.hash, e.phys, e.store_ts))
            .collect()
    }

    /// Commitlog offset where the walk stopped.
    #[getter]
    fn end_offset(&self) -> i64 {
        self.base_offset + self.end as i64
    }

    /// Runs cross process boundaries (Spark tasks parse segments, the driver writes the files).
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyBytes>,))> {
        let restore = py.get_type::<DispatchRun>().getattr("_restore")?;
        Ok((restore, (PyBytes::new(py, &self.to_state()),)))
    }

    #[staticmethod]
    fn _restore(state: &[u8]) -> PyResult<DispatchRun> {
        DispatchRun::from_state(state)
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("not a pickled DispatchRun"))
    }
}

impl DispatchRun {
    /// Where the walk stopped, relative to the segment.
    pub fn end(&self) -> usize {
        self.end
    }

    /// Why the walk stopped early, if it did at bytes that are no record.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    fn to_state(&self) -> Vec<u8> {
        let mut o = Vec::new();
        let put = |o: &mut Vec<u8>, b: &[u8]| {
            o.extend_from_slice(&(b.len() as u64).to_le_bytes());
            o.extend_from_slice(b);
        };
        for v in [
            self.end as i64,
            self.blank as i64,
            self.records as i64,
            self.base_offset,
            self.max_store_timestamp,
        ] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        put(&mut o, self.error.as_deref().unwrap_or("\u{0}").as_bytes());
        o.extend_from_slice(&(self.topics.len() as u64).to_le_bytes());
        for t in &self.topics {
            put(&mut o, t);
        }
        o.extend_from_slice(&(self.groups.len() as u64).to_le_bytes());
        for g in &self.groups {
            for v in [g.topic as i64, g.queue_id as i64, g.first, g.phy_end] {
                o.extend_from_slice(&v.to_le_bytes());
            }
            put(&mut o, &g.units);
        }
        o.extend_from_slice(&(self.index.len() as u64).to_le_bytes());
        for e in &self.index {
            for v in [e.hash as i64, e.phys, e.store_ts] {
                o.extend_from_slice(&v.to_le_bytes());
            }
        }
        o
    }

    fn from_state(b: &[u8]) -> Option<DispatchRun> {
        let mut p = 0usize;
        let mut int = || -> Option<i64> {
            let v = i64::from_le_bytes(b.get(p..p + 8)?.try_into().ok()?);
            p += 8;
            Some(v)
        };
        let (end, blank, records, base_offset, max_store_timestamp) =
            (int()?, int()?, int()?, int()?, int()?);
        let read = |p: &mut usize, n: usize| -> Option<&[u8]> {
            let s = b.get(*p..p.checked_add(n)?)?;
            *p += n;
            Some(s)
        };
        let int_at = |p: &mut usize| -> Option<i64> {
            Some(i64::from_le_bytes(read(p, 8)?.try_into().ok()?))
        };
        let n = int_at(&mut p)? as usize;
        let error = read(&mut p, n)?;
        let error = if error == b"\0" {
            None
        } else {
            Some(String::from_utf8_lossy(error).into_owned())
        };
        let mut topics = Vec::new();
        for _ in 0..int_at(&mut p)? {
            let n = int_at(&mut p)? as usize;
            topics.push(read(&mut p, n)?.to_vec());
        }
        let mut groups = Vec::new();
        for _ in 0..int_at(&mut p)? {
            let (topic, queue_id, first, phy_end) = (
                int_at(&mut p)?,
                int_at(&mut p)?,
                int_at(&mut p)?,
                int_at(&mut p)?,
            );
            let n = int_at(&mut p)? as usize;
            if topic < 0 || topic as usize >= topics.len() || !n.is_multiple_of(CQ_UNIT) {
                return None;
            }
            groups.push(Group {
                topic: topic as u32,
                queue_id: queue_id as i32,
                first,
                units: read(&mut p, n)?.to_vec(),
                phy_end,
            });
        }
        let mut index = Vec::new();
        for _ in 0..int_at(&mut p)? {
            index.push(IndexEntry {
                hash: int_at(&mut p)? as i32,
                phys: int_at(&mut p)?,
                store_ts: int_at(&mut p)?,
            });
        }
        Some(DispatchRun {
            end: end as usize,
            blank: blank != 0,
            records: records as usize,
            error,
            base_offset,
            max_store_timestamp,
            topics,
            groups,
            index,
        })
    }
}

struct Walker<'a> {
    delay_ms: &'a [i64],
    with_index: bool,
    topics: Vec<Vec<u8>>,
    groups: Vec<Group>,
    open: Vec<usize>, // groups still open for appending, most recent last
    index: Vec<IndexEntry>,
    max_store_ts: i64,
}

impl<'a> Walker<'a> {
    fn topic_index(&mut self, topic: &[u8]) -> u32 {
        if let Some(i) = self.topics.iter().rposition(|t| t.as_slice() == topic) {
            return i as u32;
        }
        self.topics.push(topic.to_vec());
        (self.topics.len() - 1) as u32
    }

    fn add(&mut self, v: &record::View) {
        self.max_store_ts = self.max_store_ts.max(v.store_timestamp);
        let known = props::known(v.props);
        if v.sys_flag & NOT_CONSUMABLE == 0 {
            let code = if v.topic == SCHEDULE_TOPIC {
                let n = self.delay_ms.len() as i64;
                let level = known
                    .delay
                    .map(props::parse_level)
                    .unwrap_or(0)
                    .clamp(1, n.max(1));
                // a long's arithmetic, as RocketMQ's computeDeliverTimestamp: a store time near
                // i64::MAX (only a damaged or forged record has one) wraps instead of panicking
                v.store_timestamp.wrapping_add(
                    self.delay_ms
                        .get((level - 1) as usize)
                        .copied()
                        .unwrap_or(0),
                )
            } else {
                javahash::tag_code(known.tags)
            };
            self.unit(v, code);
        }
        if self.with_index && v.sys_flag & ROLLBACK != ROLLBACK {
            if let Some(keys) = known.keys {
                for w in props::key_words(keys) {
                    self.index.push(IndexEntry {
                        hash: javahash::index_hash_parts(&[v.topic, b"#", w]),
                        phys: v.physical_offset,
                        store_ts: v.store_timestamp,
                    });
                }
            }
            if let Some(u) = known.uniq_key.filter(|u| !u.is_empty()) {
                self.index.push(IndexEntry {
                    hash: javahash::index_hash_parts(&[v.topic, b"#", u]),
                    phys: v.physical_offset,
                    store_ts: v.store_timestamp,
                });
            }
        }
    }

    fn unit(&mut self, v: &record::View, code: i64) {
        let t = self.topic_index(v.topic);
        let pos = self
            .open
            .iter()
            .rposition(|&g| self.groups[g].topic == t && self.groups[g].queue_id == v.queue_id);
        let g = match pos {
            Some(p) => {
                let g = self.open[p];
                let grp = &self.groups[g];
                if grp.first + (grp.units.len() / CQ_UNIT) as i64 == v.queue_offset {
                    g
                } else {
                    self.open.remove(p);
                    self.new_group(t, v)
                }
            }
            None => self.new_group(t, v),
        };
        let grp = &mut self.groups[g];
        grp.units
            .extend_from_slice(&v.physical_offset.to_be_bytes());
        grp.units.extend_from_slice(&(v.size as i32).to_be_bytes());
        grp.units.extend_from_slice(&code.to_be_bytes());
        grp.phy_end = v.physical_offset + v.size as i64;
    }

    fn new_group(&mut self, topic: u32, v: &record::View) -> usize {
        self.groups.push(Group {
            topic,
            queue_id: v.queue_id,
            first: v.queue_offset,
            units: Vec::new(),
            phy_end: 0,
        });
        let g = self.groups.len() - 1;
        self.open.push(g);
        g
    }
}

/// Walks the records of `segment[start:end]` (the segment begins at commitlog offset
/// `base_offset`) and builds their units and index entries.  `delay_levels_ms` are the delay
/// levels' delays, for units of the schedule topic.  With `max_bytes`, the walk stops at the first
/// record boundary at least that far from `start`.
#[pyfunction]
#[pyo3(signature = (segment, start, end, *, base_offset, delay_levels_ms, with_index=true, max_bytes=None))]
#[allow(clippy::too_many_arguments)]
pub fn dispatch_scan(
    py: Python<'_>,
    segment: &Bound<'_, PyAny>,
    start: usize,
    end: usize,
    base_offset: i64,
    delay_levels_ms: Vec<i64>,
    with_index: bool,
    max_bytes: Option<usize>,
) -> PyResult<DispatchRun> {
    let buf = Bytes::readable(segment)?;
    let whole = buf.range(0, end, "dispatch_scan")?;
    if start > end {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "dispatch_scan: start {start} is past end {end}"
        )));
    }
    // SAFETY: `buf` holds the export for the whole call; only bytes below the writer's position are
    // read, and nobody rewrites those.
    let run = || {
        walk(
            unsafe { whole.slice() },
            start,
            end,
            base_offset,
            &delay_levels_ms,
            with_index,
            max_bytes,
        )
    };
    Ok(if end - start >= crate::batch::DETACH_FROM_BYTES {
        py.detach(run)
    } else {
        run()
    })
}

/// Copies consume-queue `units` into `dest` (a queue segment's mapping) at `pos`.  A long run is
/// copied with the GIL released: the pages of a fresh queue segment fault in as they are first
/// written (the kernel zero-fills them, and reads ahead around each fault), which is most of the
/// copy's time, and the writer appends meanwhile.  The caller (the dispatcher, the only writer of
/// a queue) advances the segment's write position afterwards, so readers never see a partial unit.
#[pyfunction]
pub fn cq_write(
    py: Python<'_>,
    dest: &Bound<'_, PyAny>,
    pos: usize,
    units: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let src = Bytes::readable(units)?;
    let out = Bytes::writable(dest)?;
    let target = out.range(pos, pos.saturating_add(src.len()), "cq_write")?;
    let from = src.raw();
    // SAFETY: both exports are held for the call; the range was checked against the destination, and
    // the dispatcher is the only writer of a queue's bytes past its write position.
    let copy = || unsafe { target.slice_mut().copy_from_slice(from.slice()) };
    if src.len() >= crate::batch::DETACH_FROM_BYTES {
        py.detach(copy)
    } else {
        copy()
    }
    Ok(())
}

/// Asks for the lines the walk reads next while it handles the record before them: the header
/// of the record at `next`, and its tail (topic and properties) where it ends if it is as long as
/// the record just read (`size`): large bodies put each header on a page of its own and the tail
/// a body away from it, which the hardware prefetcher does not follow.  A wrong guess costs a
/// useless load; nothing is read past `data`.
#[inline]
fn prefetch_next(data: &[u8], next: usize, size: usize) {
    #[cfg(target_arch = "x86_64")]
    for at in [next, next + 64, next + size - 64, next + size - 1] {
        if at < data.len() {
            // SAFETY: `at` is inside `data`; a prefetch reads nothing into the program.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().add(at) as *const i8);
            }
        }
    }
}

/// The walk of [`dispatch_scan`] over `data[start..end]` (pure Rust: the fuzz targets call it).
pub fn walk(
    data: &[u8],
    start: usize,
    end: usize,
    base_offset: i64,
    delay_levels_ms: &[i64],
    with_index: bool,
    max_bytes: Option<usize>,
) -> DispatchRun {
    let end = end.min(data.len());
    let mut w = Walker {
        delay_ms: delay_levels_ms,
        with_index,
        topics: Vec::new(),
        groups: Vec::new(),
        open: Vec::new(),
        index: Vec::new(),
        max_store_ts: 0,
    };
    let (mut pos, mut records, mut blank, mut error) = (start, 0usize, false, None);
    let soft_end = max_bytes.map_or(end, |m| start.saturating_add(m).min(end));
    while pos < soft_end {
        match record::parse(data, pos, end) {
            Parsed::Record(v) => {
                if v.physical_offset != base_offset + pos as i64 {
                    error = Some(format!(
                        "commitlog offset {}: record claims physical offset {}",
                        base_offset + pos as i64,
                        v.physical_offset
                    ));
                    break;
                }
                prefetch_next(data, pos + v.size, v.size);
                w.add(&v);
                pos += v.size;
                records += 1;
            }
            Parsed::Blank(_) => {
                blank = true;
                break;
            }
            Parsed::Bad(reason) => {
                error = Some(format!(
                    "commitlog offset {}: {reason}",
                    base_offset + pos as i64
                ));
                break;
            }
        }
    }
    DispatchRun {
        end: pos,
        blank,
        records,
        error,
        base_offset,
        max_store_timestamp: w.max_store_ts,
        topics: w.topics,
        groups: w.groups,
        index: w.index,
    }
}
