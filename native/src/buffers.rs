//! Python buffers as Rust slices, for kernels that run with the GIL released.
//!
//! A kernel takes what it reads or writes as a Python buffer (an `mmap`, `bytes`, `bytearray`),
//! holds the buffer export for the whole call, and hands the raw parts to code that runs with the
//! GIL released.  Segments stay `mmap` objects owned by Python; while an export is held, `mmap`
//! refuses to close or resize, so the memory cannot go away under the kernel.

use std::mem::MaybeUninit;

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;

/// A contiguous buffer export taken as plain bytes (`PyBUF_SIMPLE`: any element type, e.g. an
/// int64 numpy array of positions); released when dropped.  Created and dropped with the GIL held.
pub struct Bytes {
    view: Box<ffi::Py_buffer>,
}

/// Raw parts of a buffer that may cross into GIL-released code (the export outlives the use).
#[derive(Clone, Copy)]
pub struct RawParts {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the pointer is only dereferenced while the export that backs it is held by the caller.
unsafe impl Send for RawParts {}
unsafe impl Sync for RawParts {}

impl RawParts {
    /// # Safety
    /// The buffer export must outlive the slice, and nothing else may write it meanwhile.
    pub unsafe fn slice<'a>(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        std::slice::from_raw_parts(self.ptr, self.len)
    }
    /// # Safety
    /// As [`RawParts::slice`], and the buffer must be writable with no one else reading the range.
    pub unsafe fn slice_mut<'a>(&self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        std::slice::from_raw_parts_mut(self.ptr, self.len)
    }
}

impl Bytes {
    fn get(obj: &Bound<'_, PyAny>, flags: std::os::raw::c_int) -> PyResult<Bytes> {
        let mut view: Box<MaybeUninit<ffi::Py_buffer>> = Box::new(MaybeUninit::uninit());
        // SAFETY: PyObject_GetBuffer fills the view or sets an exception and returns -1.
        if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), flags) } == -1 {
            return Err(PyErr::fetch(obj.py()));
        }
        // SAFETY: initialised by the successful call above.
        Ok(Bytes {
            view: unsafe { Box::from_raw(Box::into_raw(view) as *mut ffi::Py_buffer) },
        })
    }

    pub fn readable(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        Self::get(obj, ffi::PyBUF_SIMPLE)
    }

    pub fn writable(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        Self::get(obj, ffi::PyBUF_WRITABLE)
    }

    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.view.len as usize
    }

    pub fn raw(&self) -> RawParts {
        RawParts {
            ptr: self.view.buf as *mut u8,
            len: self.len(),
        }
    }

    /// The bytes, borrowed for as long as this export (the GIL held by the caller).
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the export is alive for the borrow of self.
        unsafe { self.raw().slice() }
    }

    /// `[start, end)` checked against the buffer's length.
    pub fn range(&self, start: usize, end: usize, what: &str) -> PyResult<RawParts> {
        if start > end || end > self.len() {
            return Err(PyValueError::new_err(format!(
                "{what}: range {start}..{end} is outside the buffer of {} bytes",
                self.len()
            )));
        }
        let r = self.raw();
        Ok(RawParts {
            ptr: unsafe { r.ptr.add(start) },
            len: end - start,
        })
    }
}

impl Drop for Bytes {
    fn drop(&mut self) {
        // SAFETY: the view came from a successful PyObject_GetBuffer; Bytes never leaves GIL-held code.
        unsafe { ffi::PyBuffer_Release(&mut *self.view) };
    }
}
