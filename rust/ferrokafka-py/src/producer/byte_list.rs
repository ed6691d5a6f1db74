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
//!
//! Each item is then read where CPython keeps it (`Layout`): the tuple's
//! item pointer and the `bytes` object's length and data, each one load,
//! where `PyTuple_GetItem` and `PyBytes_AsStringAndSize`, calls into the
//! interpreter with checks of their own, were about a tenth of the calling
//! thread's instructions in the ceiling run (issue 17).

use std::ptr;
use std::sync::OnceLock;

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

    pub(crate) fn spans(&self) -> Spans<'_> {
        Spans(&self.spans)
    }
}

/// A `ByteList`'s spans as the append loop reads them.
///
/// Why: the loop writes the batch through raw pointers, which may alias
/// anything as far as the compiler knows, so it reloaded the list's span
/// vector (behind two references) for every record; a `Copy` slice held
/// by value stays in registers. With a call without keys read by a
/// closure that does not ask for them per record: `benches/instructions.py`
/// 281.6 -> 259.9 instructions a record, `ab_builds.py` (8 rounds) the
/// calling thread's median 20.6 -> 18.9 ns (session 33; `arrow::DenseBinary`
/// is the same for Arrow columns).
#[derive(Clone, Copy)]
pub(crate) struct Spans<'l>(&'l [(*const u8, usize)]);

// SAFETY: as `ByteList`'s.
unsafe impl Send for Spans<'_> {}
unsafe impl Sync for Spans<'_> {}

impl<'l> Spans<'l> {
    /// Item `i`'s bytes (None for a None item).
    #[inline(always)]
    pub(crate) fn get(self, i: usize) -> Option<&'l [u8]> {
        let (p, len) = self.0[i];
        // SAFETY: a non-null span points at `len` bytes that live as long
        // as the `ByteList` (see its `Send` impl).
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

/// Byte offsets into CPython's objects: a `bytes` object's size and data,
/// a tuple's first item pointer.
///
/// The stable ABI keeps these structs opaque, but their layout has not
/// changed from 3.10 (the oldest Python this module loads in) to 3.14: the
/// variable-size object header (reference count, type, size), then for
/// `bytes` the cached hash and the data, for a tuple the item pointers. A
/// free-threaded interpreter, whose header differs, does not load abi3
/// modules. Still, the offsets are used only on an interpreter of those
/// versions and after they read back what the API answers for a probe
/// object (`probe`); anything else goes through the API.
#[derive(Clone, Copy)]
struct Layout {
    bytes_size: usize,
    bytes_data: usize,
    tuple_items: usize,
}

/// The layout, probed once per process (None: use the API).
static LAYOUT: OnceLock<Option<Layout>> = OnceLock::new();

impl Layout {
    const KNOWN: Layout = Layout {
        bytes_size: 2 * size_of::<usize>(),
        bytes_data: 4 * size_of::<usize>(),
        tuple_items: 3 * size_of::<usize>(),
    };

    fn get(py: Python<'_>) -> Option<Layout> {
        *LAYOUT.get_or_init(|| Self::probe(py))
    }

    fn probe(py: Python<'_>) -> Option<Layout> {
        let v = py.version_info();
        if v.major != 3 || !(10..=14).contains(&v.minor) {
            return None;
        }
        let l = Self::KNOWN;
        let item = pyo3::types::PyBytes::new(py, b"ferrokafka layout probe");
        let tuple = PyTuple::new(py, [&item]).ok()?;
        let (mut p, mut len) = (ptr::null_mut(), 0);
        // SAFETY: live objects of the types read; the offsets are within
        // them on any CPython whose header is three words (checked by the
        // comparisons themselves: a wrong guess reads inside the object
        // and compares unequal).
        unsafe {
            if ffi::PyBytes_AsStringAndSize(item.as_ptr(), &mut p, &mut len) != 0 {
                ffi::PyErr_Clear();
                return None;
            }
            let o = item.as_ptr().cast::<u8>();
            let ok = o.add(l.bytes_size).cast::<ffi::Py_ssize_t>().read() == len
                && o.add(l.bytes_data) == p.cast::<u8>()
                && tuple
                    .as_ptr()
                    .cast::<u8>()
                    .add(l.tuple_items)
                    .cast::<*mut ffi::PyObject>()
                    .read()
                    == item.as_ptr();
            ok.then_some(l)
        }
    }

    /// Item `i` of `tuple`, borrowed.
    ///
    /// # Safety
    /// `tuple` is a live tuple of more than `i` items.
    #[inline]
    unsafe fn item(self, tuple: *mut ffi::PyObject, i: usize) -> *mut ffi::PyObject {
        tuple
            .cast::<u8>()
            .add(self.tuple_items)
            .cast::<*mut ffi::PyObject>()
            .add(i)
            .read()
    }

    /// The data and length of `bytes`.
    ///
    /// # Safety
    /// `bytes` is a live object of exactly the `bytes` type.
    #[inline]
    unsafe fn bytes(self, bytes: *mut ffi::PyObject) -> (*const u8, usize) {
        let o = bytes.cast::<u8>();
        let len = o.add(self.bytes_size).cast::<ffi::Py_ssize_t>().read();
        (o.add(self.bytes_data), len as usize)
    }
}

/// Whether `send_batch` reads lists where CPython keeps their items
/// (`Layout`) in this interpreter: the tests assert it, so that a probe
/// that stopped matching shows as a failure, not only as a slower path.
#[pyfunction]
pub(crate) fn _test_byte_list_layout(py: Python<'_>) -> bool {
    Layout::get(py).is_some()
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
        let mut spans: Vec<(*const u8, usize)> = Vec::with_capacity(n);
        let mut others = Vec::new();
        // SAFETY: the interpreter's singletons and type objects live forever.
        let (none, bytes_type) = unsafe { (ffi::Py_None(), ptr::addr_of_mut!(ffi::PyBytes_Type)) };
        let layout = Layout::get(py);
        // Items that are exact `bytes` or None, read where CPython keeps
        // them, in a loop of their own: the general loop below checks the
        // layout and the vector's capacity per item, 27 instructions an
        // item; with this loop the calling thread's pass went from 250.2 to
        // 238.2 instructions a record (`benches/instructions.py`, session
        // 33). It stops at the first item of another kind, which the
        // general loop takes from there.
        let mut first_other = 0;
        if let Some(l) = layout {
            // SAFETY: `n` items of a live tuple, each borrowed from it; the
            // writes stay within the `n` spans reserved above, and the
            // length covers only the spans written.
            unsafe {
                let out = spans.as_mut_ptr();
                while first_other < n {
                    let item = l.item(items.as_ptr(), first_other);
                    let span = if item == none {
                        (ptr::null(), 0)
                    } else if ffi::Py_TYPE(item) == bytes_type {
                        l.bytes(item)
                    } else {
                        break;
                    };
                    out.add(first_other).write(span);
                    first_other += 1;
                }
                spans.set_len(first_other);
            }
        }
        for i in first_other..n {
            // SAFETY: `i` is in range of a live tuple; the item is borrowed
            // from it, which holds it as long as `items` does.
            let item = unsafe {
                match layout {
                    Some(l) => l.item(items.as_ptr(), i),
                    None => ffi::PyTuple_GetItem(items.as_ptr(), i as ffi::Py_ssize_t),
                }
            };
            if item == none {
                spans.push((ptr::null(), 0));
            } else if unsafe { ffi::Py_TYPE(item) } == bytes_type {
                // SAFETY: an exact `bytes`.
                if let Some(l) = layout {
                    spans.push(unsafe { l.bytes(item) });
                    continue;
                }
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
