//! A column's bytes owned by Rust and exported read-only through the buffer protocol, so that
//! `pyarrow.py_buffer` wraps them without a copy (see the `columns` module doc).

use std::ffi::{c_char, c_int, c_void};

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;

use super::pool::{self, Slot};

/// The bytes of one column, owned by Rust and exported read-only to Python (see the module doc).
/// Dropped, it hands its vector to the column pool for the next chunk's same column (`slot`).
#[pyclass(frozen, module = "rocketq._native")]
pub struct ColumnBuffer {
    data: Owned,
    slot: Slot,
}

impl Drop for ColumnBuffer {
    fn drop(&mut self) {
        let data = std::mem::replace(&mut self.data, Owned::U8(Vec::new()));
        pool::give(self.slot, data);
    }
}

/// A column's values as they were filled; fixed-width vectors are already little-endian in memory.
pub(super) enum Owned {
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Owned {
    pub(super) fn i32s(mut v: Vec<i32>) -> Owned {
        v.iter_mut().for_each(|x| *x = x.to_le()); // a no-op on little-endian machines
        Owned::I32(v)
    }
    pub(super) fn i64s(mut v: Vec<i64>) -> Owned {
        v.iter_mut().for_each(|x| *x = x.to_le());
        Owned::I64(v)
    }
    /// The bytes the vector has allocated (what keeping it holds).
    pub(super) fn capacity_bytes(&self) -> usize {
        match self {
            Owned::U8(v) => v.capacity(),
            Owned::I32(v) => v.capacity() * 4,
            Owned::I64(v) => v.capacity() * 8,
        }
    }
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: plain integers viewed as their bytes: u8 has no alignment and every byte is initialised.
        unsafe {
            match self {
                Owned::U8(v) => v,
                Owned::I32(v) => std::slice::from_raw_parts(v.as_ptr() as *const u8, v.len() * 4),
                Owned::I64(v) => std::slice::from_raw_parts(v.as_ptr() as *const u8, v.len() * 8),
            }
        }
    }
}

/// The buffer protocol's format string for unsigned bytes (never written through).
static FORMAT_BYTES: &[u8; 2] = b"B\0";

#[pymethods]
impl ColumnBuffer {
    fn __len__(&self) -> usize {
        self.data.as_bytes().len()
    }

    /// # Safety
    /// Called by Python with a view to fill; the vector never changes (the class is frozen and has
    /// no mutating method), so the exported pointer stays valid while the view holds its reference.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("a column buffer is read-only"));
        }
        let bytes = slf.get().data.as_bytes();
        let (ptr, len) = (bytes.as_ptr(), bytes.len());
        // SAFETY: `view` is a valid, writable Py_buffer given by the interpreter.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = ptr as *mut c_void;
            (*view).len = len as isize;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
                FORMAT_BYTES.as_ptr() as *mut c_char
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND {
                &mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }
}

pub(super) fn column<'py>(
    py: Python<'py>,
    slot: Slot,
    data: Owned,
) -> PyResult<Bound<'py, ColumnBuffer>> {
    Bound::new(py, ColumnBuffer { data, slot })
}
