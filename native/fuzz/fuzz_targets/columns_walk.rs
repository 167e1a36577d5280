//! Any bytes decoded into the Spark sources' columns, as a segment (the store source: chunk after
//! chunk, with or without log offsets, CRCs and a topic filter) and cut into pull bodies (the topic
//! source): every chunk's columns hold Arrow's layout for the rows it reports, the walk moves
//! forward and stops inside the bytes, and the bodies' walk keeps exactly the rows of the same
//! bytes walked as one body; never a panic or a read out of bounds.
#![no_main]
use _native::columns::layout::{bodies_checked, walk_checked, Checked};
use libfuzzer_sys::fuzz_target;

fn holds(c: &Checked, max_rows: usize) {
    assert_eq!(c.layout_error, None);
    assert!(c.rows <= max_rows);
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (head, seg) = data.split_at(2);
    let (flags, max_rows) = (head[0], 1 + head[1] as usize % 8);
    let base = (flags & 1 == 1).then_some(0);
    let topics = (flags & 2 == 2).then(|| vec!["T".to_string()]);
    let mut pos = 0;
    loop {
        let c = walk_checked(
            seg,
            base,
            pos,
            seg.len(),
            max_rows,
            flags & 4 == 4,
            topics.clone(),
        );
        holds(&c, max_rows);
        assert!(pos <= c.end.1 && c.end.1 <= seg.len());
        if !c.more {
            break;
        }
        assert!(c.end.1 > pos);
        pos = c.end.1;
    }
    // the same bytes as one pull body and as two (cut where the flags say), chunk after chunk
    let cut = seg.len() * (flags >> 4) as usize / 16;
    let one_rows = rows_of(&[seg], max_rows);
    let two_rows = rows_of(&[&seg[..cut], &seg[cut..]], max_rows);
    if let (Ok(one), Ok(two)) = (one_rows, two_rows) {
        assert_eq!(one, two); // both ended cleanly: the cut fell between two records
    }
});

/// Rows kept from `bodies` over every chunk, or Err(rows) when the walk met bytes that are no record.
fn rows_of(bodies: &[&[u8]], max_rows: usize) -> Result<usize, usize> {
    let (mut at, mut rows) = ((0, 0), 0);
    loop {
        let c = bodies_checked(bodies, at.0, at.1, max_rows);
        holds(&c, max_rows);
        assert!(c.end >= at && c.end.0 <= bodies.len());
        rows += c.rows;
        if c.damaged {
            return Err(rows);
        }
        if !c.more {
            return Ok(rows);
        }
        assert!(c.end > at);
        at = c.end;
    }
}
