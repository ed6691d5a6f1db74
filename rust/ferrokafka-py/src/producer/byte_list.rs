//! `send_batch`'s values or keys given as a Python sequence, read by the
//! GIL-free append without a reference count per item.
//!
//! Why: extracted as `Vec<Option<PyBackedBytes>>`, every item cost an
//! iterator step, a type check, an increment of its reference count and,
//! when the call ended, a decrement: each a call into the interpreter under
//! the stable ABI, together about a fifth of the calling thread's time in
//! the ceiling run (perf, issue 17). Here `PySequence_Tuple` takes a
//! reference to every item in the interpreter's own loop (for a list, the
//! one `send_batch` passes, a copy of its item pointers), and the tuple
//! gives them all back when it goes. A tuple cannot change and a `bytes`
//! cannot either, so while the tuple is held every item's bytes stay where
//! they are: the append reads them by pointer with the GIL released, even
//! if another thread changes the caller's list meanwhile (docs/semantics.md
//! §5.8).

use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyString, PyTuple};

/// One `send_batch` column from a Python sequence of `bytes`, `bytearray`
/// or None.
pub(crate) struct ByteList {
    /// A reference to every item, until the call returns (with the GIL).
    _items: Py<PyTuple>,
    /// Items that are not exactly `bytes` (a `bytearray`, which may change,
    /// or a subclass), copied or referenced by pyo3.
    _others: Vec<PyBackedBytes>,
    /// Item `i`'s bytes as (pointer, length); a null pointer for None.
    spans: Vec<(*const u8, usize)>,
}

// SAFETY: the pointers are into immutable `bytes` objects the tuple keeps
// alive, or into `_others`' storage, which moving a `PyBackedBytes` does not
// move; nothing writes through them. Reading them from another thread is
// reading shared immutable memory.
unsafe impl Send for ByteList {}
unsafe impl Sync for ByteList {}

impl ByteList {
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Item `i`'s bytes (None for a None item).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Option<&[u8]> {
        let (p, len) = self.spans[i];
        // SAFETY: a non-null span points at `len` bytes that live as long
        // as `self` (see the `Send` impl above).
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts(p, len) })
    }
}

impl super::ItemSizes for ByteList {
    #[inline]
    fn size_of(&self, i: usize) -> i32 {
        let (p, len) = self.spans[i];
        if p.is_null() {
            -1
        } else {
            len as i32
        }
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for ByteList {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        if obj.is_instance_of::<PyString>() {
            // A sequence too, of one-character strings: never what was meant.
            return Err(PyTypeError::new_err(
                "values and keys must be a list of bytes or None, not str",
            ));
        }
        // SAFETY: a live object; returns a new reference or sets an error.
        let items =
            unsafe { Bound::from_owned_ptr_or_err(py, ffi::PySequence_Tuple(obj.as_ptr()))? }
                .cast_into::<PyTuple>()?;
        // A tuple made here is not for the cycle collector: a collection
        // that ran while the call held it (any allocation of the call may
        // start one) walked every item (perf: a twentieth of the calling
        // thread). Untracked, the items it holds only look referenced from
        // outside, so nothing is freed early; the tuple is freed by its
        // reference count. A tuple the caller passed in (returned as it is)
        // stays tracked: it may be part of a cycle only the collector frees.
        if items.as_ptr() != obj.as_ptr() {
            // SAFETY: a live tuple; untracking twice (its dealloc does it
            // again) is allowed.
            unsafe { ffi::PyObject_GC_UnTrack(items.as_ptr().cast()) };
        }
        let n = items.len();
        let mut spans = Vec::with_capacity(n);
        let mut others = Vec::new();
        // SAFETY: the interpreter's singletons and type objects live forever.
        let (none, bytes_type) = unsafe { (ffi::Py_None(), ptr::addr_of_mut!(ffi::PyBytes_Type)) };
        for i in 0..n {
            // SAFETY: `i` is in range of a live tuple; the item is borrowed
            // from it, which holds it as long as `items` does.
            let item = unsafe { ffi::PyTuple_GetItem(items.as_ptr(), i as ffi::Py_ssize_t) };
            if item == none {
                spans.push((ptr::null(), 0));
            } else if unsafe { ffi::Py_TYPE(item) } == bytes_type {
                let (mut p, mut len) = (ptr::null_mut(), 0);
                // SAFETY: an exact `bytes`: this cannot fail, and with a
                // length to fill it does not scan for NUL bytes.
                if unsafe { ffi::PyBytes_AsStringAndSize(item, &mut p, &mut len) } != 0 {
                    return Err(PyErr::fetch(py));
                }
                spans.push((p as *const u8, len as usize));
            } else {
                // SAFETY: a borrowed reference the tuple holds.
                let b = unsafe { Borrowed::from_ptr(py, item) }.extract::<PyBackedBytes>()?;
                spans.push((b.as_ptr(), b.len()));
                others.push(b);
            }
        }
        Ok(ByteList {
            _items: items.unbind(),
            _others: others,
            spans,
        })
    }
}
