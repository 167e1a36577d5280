//! Python buffers as Rust slices, for kernels that run with the GIL released.
//!
//! A kernel takes what it reads or writes as a Python buffer (an `mmap`, `bytes`, `bytearray`),
//! holds the buffer export for the whole call, and hands the raw parts to code that runs with the
//! GIL released.  Segments stay `mmap` objects owned by Python; while an export is held, `mmap`
//! refuses to close or resize, so the memory cannot go away under the kernel.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;

/// A contiguous byte buffer export.
pub struct Bytes {
    buf: PyBuffer<u8>,
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
    pub fn readable(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        let buf = PyBuffer::<u8>::get(obj)?;
        if !buf.is_c_contiguous() {
            return Err(PyBufferError::new_err("a contiguous buffer is needed"));
        }
        Ok(Bytes { buf })
    }

    pub fn writable(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
        let b = Self::readable(obj)?;
        if b.buf.readonly() {
            return Err(PyBufferError::new_err("the buffer is read-only"));
        }
        Ok(b)
    }

    pub fn len(&self) -> usize {
        self.buf.len_bytes()
    }

    pub fn raw(&self) -> RawParts {
        RawParts { ptr: self.buf.buf_ptr() as *mut u8, len: self.buf.len_bytes() }
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
                "{what}: range {start}..{end} is outside the buffer of {} bytes", self.len()
            )));
        }
        let r = self.raw();
        Ok(RawParts { ptr: unsafe { r.ptr.add(start) }, len: end - start })
    }
}
