//! Reading the fields of a `__slots__` class (rocketq's `Message` dataclass) straight from the object.
//!
//! For a slot, `getattr` looks the name up along the type's MRO, finds a member descriptor and reads
//! a pointer at a fixed offset inside the object (`PyMember_GetOne`).  A batch of 64 messages with 13
//! fields makes that lookup 832 times; here it is done once per type: each name must resolve to a
//! member descriptor of kind `T_OBJECT_EX`, and its offset is kept.  An object of another type, or
//! an unset slot, falls back to `getattr`.

use std::sync::Mutex;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

pub struct Layout {
    ty: Py<PyType>, // held, so the type (and the address compared against) cannot go away
    offsets: Vec<isize>,
}

static CACHE: Mutex<Option<Layout>> = Mutex::new(None);

fn resolve(ty: &Bound<'_, PyType>, names: &[&str]) -> Option<Vec<isize>> {
    let mut offsets = Vec::with_capacity(names.len());
    for name in names {
        let d = ty.getattr(*name).ok()?;
        // SAFETY: the descriptor type is checked before its struct is read.
        unsafe {
            if ffi::Py_TYPE(d.as_ptr()) != std::ptr::addr_of_mut!(ffi::PyMemberDescr_Type) {
                return None;
            }
            let member = (*(d.as_ptr() as *mut ffi::PyMemberDescrObject)).d_member;
            if member.is_null() || (*member).type_code != ffi::Py_T_OBJECT_EX {
                return None;
            }
            offsets.push((*member).offset);
        }
    }
    Some(offsets)
}

/// A reader of `names` for objects of one type, valid for the call it was made in (the type is
/// kept alive by the cache).
pub struct Reader {
    ty: *mut ffi::PyTypeObject,
    offsets: Vec<isize>,
}

/// The cached layout of `ty`'s fields `names`, resolved now when the cache holds another type's;
/// None when they are not all plain object slots.
fn layout<'c>(
    cache: &'c mut Option<Layout>,
    ty: &Bound<'_, PyType>,
    names: &[&str],
) -> Option<&'c Layout> {
    let fresh = match cache.as_ref() {
        Some(l) => !l.ty.bind(ty.py()).is(ty) || l.offsets.len() != names.len(),
        None => true,
    };
    if fresh {
        *cache = Some(Layout {
            ty: ty.clone().unbind(),
            offsets: resolve(ty, names)?,
        });
    }
    cache.as_ref()
}

/// A reader for `sample`'s type, or None when its fields `names` are not all plain object slots.
pub fn reader(sample: &Bound<'_, PyAny>, names: &[&str]) -> Option<Reader> {
    let ty = sample.get_type();
    let mut cache = CACHE.lock().ok()?;
    let layout = layout(&mut cache, &ty, names)?;
    Some(Reader {
        ty: ty.as_ptr() as *mut ffi::PyTypeObject,
        offsets: layout.offsets.clone(),
    })
}

/// `names` of one object read straight into `out` (as [`Reader::read`] does, through the same
/// cache, without copying the offsets): for a single object, where a [`Reader`] would be made and
/// dropped for one read.  False when the fields are not all plain slots or one is unset.
pub fn read_one(obj: &Bound<'_, PyAny>, names: &[&str], out: &mut [*mut ffi::PyObject]) -> bool {
    let ty = obj.get_type();
    let Ok(mut cache) = CACHE.lock() else {
        return false;
    };
    let Some(layout) = layout(&mut cache, &ty, names) else {
        return false;
    };
    if out.len() != layout.offsets.len() {
        return false;
    }
    let base = obj.as_ptr() as *const u8;
    for (slot, &off) in out.iter_mut().zip(&layout.offsets) {
        // SAFETY: `obj` is exactly the type whose member descriptors gave these offsets (the cached
        // layout is `obj`'s type's), so each offset holds a PyObject* (NULL when unset).
        let p = unsafe { *(base.offset(off) as *const *mut ffi::PyObject) };
        if p.is_null() {
            return false;
        }
        *slot = p;
    }
    true
}

impl Reader {
    /// Fills `out` with the fields of `obj` as borrowed pointers (valid while `obj` is alive and
    /// unchanged, i.e. for the caller's use under the GIL); false when `obj` is of another type or
    /// a slot is unset, and the caller should use `getattr`.
    pub fn read(&self, obj: &Bound<'_, PyAny>, out: &mut Vec<*mut ffi::PyObject>) -> bool {
        out.clear();
        // SAFETY: reading the type pointer of a live object.
        if unsafe { ffi::Py_TYPE(obj.as_ptr()) } != self.ty {
            return false;
        }
        let base = obj.as_ptr() as *const u8;
        for &off in &self.offsets {
            // SAFETY: `obj` is exactly the type whose member descriptors gave these offsets, so each
            // offset holds a PyObject* (NULL when the slot was never set).
            let p = unsafe { *(base.offset(off) as *const *mut ffi::PyObject) };
            if p.is_null() {
                return false;
            }
            out.push(p);
        }
        true
    }
}
