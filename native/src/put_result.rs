//! A `rocketq.store.results.PutMessageResult` made without running its Python `__init__`.
//!
//! The result is a `slots=True` dataclass: its fields are object pointers at fixed offsets inside
//! the object, named by member descriptors (see `slots.rs`, which reads them the same way).  Its
//! generated `__init__` only stores the eight arguments, and for a single put it cost about as much
//! as the native put itself (BENCHMARKS.md, issue 15).  Here the offsets are resolved once, when the
//! `SinglePut` is made; each result is then allocated by the type's own allocator (which also tracks
//! it for the garbage collector) and its eight slots filled with new references before anyone can
//! see it.  A type whose fields are not all plain object slots (a subclass with a `__dict__`, a
//! changed dataclass) is called the ordinary way instead.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// `PutMessageResult`'s fields in its constructor's order.
pub const RESULT_FIELDS: [&str; 8] = [
    "status",
    "msg_id",
    "physical_offset",
    "queue_offset",
    "queue_id",
    "wrote_bytes",
    "store_timestamp",
    "error",
];

pub struct ResultMaker {
    ty: Py<PyType>,
    offsets: Option<Vec<isize>>, // None: build by calling the type
}

/// The offsets of `names` when each is a plain object slot and instances have no `__dict__`.
fn slot_offsets(ty: &Bound<'_, PyType>, names: &[&str]) -> Option<Vec<isize>> {
    // SAFETY: reading fields of a live type object, and of member descriptors once their type is checked.
    unsafe {
        let t = ty.as_ptr() as *mut ffi::PyTypeObject;
        if (*t).tp_dictoffset != 0 || (*t).tp_alloc.is_none() {
            return None;
        }
        let mut offsets = Vec::with_capacity(names.len());
        for name in names {
            let d = ty.getattr(*name).ok()?;
            if ffi::Py_TYPE(d.as_ptr()) != std::ptr::addr_of_mut!(ffi::PyMemberDescr_Type) {
                return None;
            }
            let member = (*(d.as_ptr() as *mut ffi::PyMemberDescrObject)).d_member;
            if member.is_null() || (*member).type_code != ffi::Py_T_OBJECT_EX {
                return None;
            }
            let off = (*member).offset;
            if off < std::mem::size_of::<ffi::PyObject>() as isize || off >= (*t).tp_basicsize {
                return None;
            }
            offsets.push(off);
        }
        Some(offsets)
    }
}

impl ResultMaker {
    pub fn new(ty: &Bound<'_, PyType>) -> ResultMaker {
        ResultMaker {
            ty: ty.clone().unbind(),
            offsets: slot_offsets(ty, &RESULT_FIELDS),
        }
    }

    /// `PutMessageResult(*fields)`.
    pub fn make<'py>(
        &self,
        py: Python<'py>,
        fields: [Bound<'py, PyAny>; 8],
    ) -> PyResult<Bound<'py, PyAny>> {
        let ty = self.ty.bind(py);
        let Some(offsets) = &self.offsets else {
            return ty.call1(pyo3::types::PyTuple::new(py, fields)?);
        };
        // SAFETY: `ty` is held; its allocator returns a zeroed instance (NULL slots) or NULL with an
        // exception set.  Each offset was checked to be an object slot inside the instance, and each
        // slot gets a new reference (into_ptr) before the object is returned.
        unsafe {
            let t = ty.as_ptr() as *mut ffi::PyTypeObject;
            let Some(alloc) = (*t).tp_alloc else {
                return ty.call1(pyo3::types::PyTuple::new(py, fields)?);
            };
            let obj = alloc(t, 0);
            if obj.is_null() {
                return Err(PyErr::fetch(py));
            }
            let base = obj as *mut u8;
            for (off, value) in offsets.iter().zip(fields) {
                *(base.offset(*off) as *mut *mut ffi::PyObject) = value.into_ptr();
            }
            Ok(Bound::from_owned_ptr(py, obj))
        }
    }
}
