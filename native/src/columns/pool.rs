//! Column vectors kept between chunks: a chunk's buffers, once Python drops them, fill the next
//! chunk's columns instead of fresh allocations.
//!
//! Why: a chunk of 64 Ki records is ~20 MB of column buffers.  Freed, glibc gives most of it back to
//! the kernel (`brk` trims the heap top, large blocks are `munmap`ed), and the next chunk faults
//! every page in again and has it zeroed: ~69,000 minor faults per 2M rows, page faults and
//! zeroing ~13 % of a store-source task's CPU in a profile.  A vector kept here keeps its pages.
//!
//! Each vector has a slot (which column and which of its buffers it was): the next chunk's same
//! column takes it, so it comes back already about the right size.  A [`super::ColumnBuffer`]
//! hands its vector back when Python drops it (pyarrow released every view by then: a view holds
//! a reference to the buffer object).  At most [`POOL_BYTES_MAX`] of idle capacity is kept per
//! process, and at most [`SPARES_PER_SLOT`] vectors per slot; what does not fit is freed as
//! before.  The lock is held only to push or pop a vector, never while Python or the GIL is
//! waited on.

use std::sync::Mutex;

use super::buffer::Owned;

/// Idle capacity kept for reuse, per process (bytes): two chunks' worth of columns of records of a
/// few hundred bytes, so a Spark worker that holds one batch while it decodes the next reuses the
/// one before.
pub const POOL_BYTES_MAX: usize = 96 << 20;
/// Vectors kept per slot: the batch Spark still holds and the one before it.
pub const SPARES_PER_SLOT: usize = 2;

/// Which column buffer a vector is (its index in [`Slot`]'s numbering).
pub type Slot = u8;
/// Slots in use: `Columns` numbers its vectors from 0 below this.
pub const SLOTS: usize = 32;

struct Pool {
    spares: Vec<Vec<Owned>>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    spares: Vec::new(),
    bytes: 0,
});

fn with_pool<R>(f: impl FnOnce(&mut Pool) -> R) -> R {
    // a panic while the lock was held cannot leave the pool inconsistent (push / pop only)
    let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if pool.spares.is_empty() {
        pool.spares.resize_with(SLOTS, Vec::new);
    }
    f(&mut pool)
}

/// A spare vector of `slot`, emptied, if one is kept.
fn take(slot: Slot) -> Option<Owned> {
    with_pool(|pool| {
        let owned = pool.spares.get_mut(slot as usize)?.pop()?;
        pool.bytes -= owned.capacity_bytes();
        Some(owned)
    })
}

/// Keeps `owned` for the next chunk's `slot`, or frees it when the pool is full.
pub(super) fn give(slot: Slot, owned: Owned) {
    let size = owned.capacity_bytes();
    if size == 0 {
        return;
    }
    let refused = with_pool(|pool| {
        let fits = pool.bytes + size <= POOL_BYTES_MAX;
        match pool.spares.get_mut(slot as usize) {
            Some(spares) if fits && spares.len() < SPARES_PER_SLOT => {
                spares.push(owned);
                pool.bytes += size;
                None
            }
            _ => Some(owned),
        }
    });
    drop(refused); // freed outside the lock
}

pub(super) fn u8s(slot: Slot, capacity: usize) -> Vec<u8> {
    match take(slot) {
        Some(Owned::U8(mut v)) => {
            v.clear();
            v.reserve(capacity);
            v
        }
        _ => Vec::with_capacity(capacity),
    }
}

pub(super) fn i32s(slot: Slot, capacity: usize) -> Vec<i32> {
    match take(slot) {
        Some(Owned::I32(mut v)) => {
            v.clear();
            v.reserve(capacity);
            v
        }
        _ => Vec::with_capacity(capacity),
    }
}

pub(super) fn i64s(slot: Slot, capacity: usize) -> Vec<i64> {
    match take(slot) {
        Some(Owned::I64(mut v)) => {
            v.clear();
            v.reserve(capacity);
            v
        }
        _ => Vec::with_capacity(capacity),
    }
}
