//! The Arrow layout the columns promise (see the `columns` module doc), checked; and the two walks
//! without Python, for the fuzz target `columns_walk` (`native/fuzz`), which decodes arbitrary
//! bytes as a segment and as pull bodies and asserts that every chunk's columns hold this layout.
//!
//! String values are not checked as UTF-8: the decoder hands a record's bytes on as they are (see
//! `rocketq.spark.decode._repeated`), so the layout is what Arrow's binary type asks for.

use super::walk::{fill_bodies, walk_range, BodiesStop, WalkStop};
use super::{Columns, Keep, Strings};
use crate::buffers::RawParts;

impl Strings {
    /// Why these buffers are no `string` / `binary` column of `values` values, or None.
    fn layout_error(&self, name: &str, values: usize) -> Option<String> {
        let offsets = &self.offsets;
        if offsets.len() != values + 1 {
            return Some(format!(
                "{name}: {} offsets for {values} values",
                offsets.len()
            ));
        }
        if !rising_to(offsets, self.data.len()) {
            let why = "offsets do not rise from 0 to the data's length";
            return Some(format!("{name}: {why} ({} bytes)", self.data.len()));
        }
        if self.nulls > 0 {
            if self.validity.len() != values.div_ceil(8) {
                let bytes = self.validity.len();
                return Some(format!(
                    "{name}: a validity bitmap of {bytes} bytes for {values} values"
                ));
            }
            let valid = (0..values)
                .filter(|&i| self.validity[i / 8] >> (i % 8) & 1 == 1)
                .count();
            if values - valid != self.nulls {
                let nulls = self.nulls;
                return Some(format!(
                    "{name}: {} null bits, {nulls} nulls counted",
                    values - valid
                ));
            }
        }
        None
    }
}

/// Whether `offsets` start at 0, never fall, and end at `end`.
fn rising_to(offsets: &[i32], end: usize) -> bool {
    offsets.first() == Some(&0)
        && offsets.windows(2).all(|w| w[0] <= w[1])
        && offsets.last().is_some_and(|&last| last as usize == end)
}

impl Columns {
    /// Why these columns are no Arrow batch of `queue_id.len()` rows, or None.
    fn layout_error(&self) -> Option<String> {
        let rows = self.queue_id.len();
        let fixed = [
            ("queue_offset", self.queue_offset.len()),
            ("born_timestamp", self.born_us.len()),
            ("store_timestamp", self.store_us.len()),
            ("reconsume_times", self.reconsume.len()),
            ("physical_offset", self.physical_offset.len()),
            ("sysflag", self.sysflag.len()),
            ("map_offsets", self.map_offsets.len().wrapping_sub(1)),
        ];
        if let Some((name, len)) = fixed.iter().find(|&&(_, len)| len != rows) {
            return Some(format!("{name}: {len} values for {rows} rows"));
        }
        let topics = if self.uniform_topic {
            rows.min(1)
        } else {
            rows
        };
        let entries = self.prop_keys.offsets.len().wrapping_sub(1);
        let strings = [
            ("topic", &self.topic, topics),
            ("keys", &self.keys, rows),
            ("tags", &self.tags, rows),
            ("body", &self.body, rows),
            ("msg_id", &self.msg_id, rows),
            ("prop_keys", &self.prop_keys, entries),
            ("prop_values", &self.prop_values, entries),
        ];
        if let Some(why) = strings
            .iter()
            .find_map(|(name, s, values)| s.layout_error(name, *values))
        {
            return Some(why);
        }
        if !rising_to(&self.map_offsets, entries) {
            return Some(format!(
                "map_offsets do not rise from 0 to the {entries} entries"
            ));
        }
        let compressed = &self.compressed;
        if compressed.windows(2).any(|w| w[0] >= w[1])
            || compressed.iter().any(|&r| r < 0 || r as usize >= rows)
        {
            return Some(format!("compressed rows {compressed:?} of {rows}"));
        }
        None
    }
}

/// How one decode call without Python ended: what the Python entry points return beside the
/// columns, and what is wrong with the columns' layout (None: nothing).
pub struct Checked {
    pub rows: usize,
    /// Where the walk stopped: a position in the bytes, or (body, byte) for bodies.
    pub end: (usize, usize),
    pub more: bool,
    pub damaged: bool,
    pub layout_error: Option<String>,
}

impl Checked {
    fn of(c: &Columns, end: (usize, usize), more: bool, damaged: bool) -> Checked {
        Checked {
            rows: c.queue_id.len(),
            end,
            more,
            damaged,
            layout_error: c.layout_error(),
        }
    }
}

/// `walk_columns(bytes, base_offset, start, hi, len(bytes), max_rows, check_crc=, topics=)`,
/// without Python.
pub fn walk_checked(
    bytes: &[u8],
    base_offset: Option<i64>,
    start: usize,
    hi: usize,
    max_rows: usize,
    check_crc: bool,
    topics: Option<Vec<String>>,
) -> Checked {
    let keep = Keep::new(topics, None, None);
    let (c, end, stop) = walk_range(
        bytes,
        base_offset,
        start,
        hi.min(bytes.len()),
        max_rows,
        check_crc,
        &keep,
    );
    let (more, damaged) = (
        matches!(stop, WalkStop::More),
        matches!(stop, WalkStop::Error(..)),
    );
    Checked::of(&c, (0, end), more, damaged)
}

/// `walk_bodies_columns(bodies, start_body, start_pos, max_rows)`, without Python.
pub fn bodies_checked(
    bodies: &[&[u8]],
    start_body: usize,
    start_pos: usize,
    max_rows: usize,
) -> Checked {
    // read only (the walk never writes through these parts); the slices outlive the call
    let raws: Vec<RawParts> = bodies
        .iter()
        .map(|b| RawParts {
            ptr: b.as_ptr() as *mut u8,
            len: b.len(),
        })
        .collect();
    let (c, body, pos, stop) = fill_bodies(&raws, start_body, start_pos, max_rows);
    let (more, damaged) = (
        matches!(stop, BodiesStop::More),
        matches!(stop, BodiesStop::Error(..)),
    );
    Checked::of(&c, (body, pos), more, damaged)
}
