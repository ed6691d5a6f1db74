//! `poll_arrow`'s batches as one Arrow C stream a consumer
//! (`ArrowArrayStream`, the PyCapsule interface's `__arrow_c_stream__`).
//!
//! Why: through `__arrow_c_array__` every batch came with its own schema,
//! which pyarrow imported every time (each field's type and name): pyarrow's
//! import of a ~9,000-row batch in the ceiling run took 66 µs of the calling
//! thread, 30-34 through the stream (issue 17). A stream's schema is
//! imported once, when the reader is made; each batch is then only its
//! arrays, against that schema.
//!
//! The stream itself never polls: `PyConsumer::poll_arrow_next` polls as
//! `poll_arrow` does (Ctrl-C, errors, rebalance events and commit outcomes
//! to Python) and leaves the batch in the consumer's [`ArrowSlot`]; the
//! reader's next `read_next_batch` (pyarrow calls `get_next` with the GIL
//! released) moves it out, or an empty batch if there is none. So the
//! stream never ends and never fails: a poll's errors are raised by the
//! poll, before the reader is asked.

use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::arrow::{ExportedBatch, FfiArray, FfiSchema};

/// The batch the last `poll_arrow_next` built, until the stream hands it out.
#[derive(Default)]
pub struct ArrowSlot(Mutex<Option<ExportedBatch>>);

impl ArrowSlot {
    /// Leaves `batch` for the stream's next batch. A batch left by an
    /// earlier poll and never read is dropped, as a returned batch nobody
    /// imported was: `Consumer.poll_arrow` reads right after its poll, so
    /// only a rebalance or commit callback raising in between leaves one.
    pub fn put(&self, batch: Option<ExportedBatch>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = batch;
    }

    fn take(&self) -> Option<ExportedBatch> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// The C stream interface's struct (Arrow's `ArrowArrayStream`).
#[repr(C)]
struct FfiStream {
    get_schema: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiSchema) -> c_int>,
    get_next: Option<unsafe extern "C" fn(*mut FfiStream, *mut FfiArray) -> c_int>,
    get_last_error: Option<unsafe extern "C" fn(*mut FfiStream) -> *const c_char>,
    release: Option<unsafe extern "C" fn(*mut FfiStream)>,
    /// `Arc::into_raw` of the consumer's slot.
    private_data: *mut c_void,
}

#[repr(transparent)]
struct SendStream(FfiStream);
// SAFETY: the private data is an `Arc` of a `Mutex`-guarded slot, shared
// with the consumer by design; the callbacks are plain functions.
unsafe impl Send for SendStream {}

/// EIO, the errno the C stream interface returns for "failed": only if
/// building a batch's structs panicked, which allocation failure aside
/// it cannot.
const FAILED: c_int = 5;

unsafe extern "C" fn get_schema(_: *mut FfiStream, out: *mut FfiSchema) -> c_int {
    match std::panic::catch_unwind(ExportedBatch::schema_ffi) {
        Ok(schema) => {
            // SAFETY: the caller passes a struct to fill (and release).
            unsafe { out.write(schema) };
            0
        }
        Err(_) => FAILED,
    }
}

unsafe extern "C" fn get_next(s: *mut FfiStream, out: *mut FfiArray) -> c_int {
    // SAFETY: a live stream (the caller holds it until `release`); its
    // private data is the slot's `Arc`, alive until then.
    let slot = unsafe { &*((*s).private_data as *const ArrowSlot) };
    let array = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        slot.take()
            .unwrap_or_else(ExportedBatch::empty)
            .into_array()
    }));
    match array {
        Ok(array) => {
            // SAFETY: the caller passes a struct to fill (and release).
            unsafe { out.write(array) };
            0
        }
        Err(_) => FAILED,
    }
}

unsafe extern "C" fn get_last_error(_: *mut FfiStream) -> *const c_char {
    std::ptr::null()
}

unsafe extern "C" fn release(s: *mut FfiStream) {
    // SAFETY: the caller's stream; released once (`release` is then None).
    unsafe {
        if s.is_null() || (*s).release.is_none() {
            return;
        }
        drop(Arc::from_raw((*s).private_data as *const ArrowSlot));
        (*s).release = None;
    }
}

fn new_stream(slot: Arc<ArrowSlot>) -> FfiStream {
    FfiStream {
        get_schema: Some(get_schema),
        get_next: Some(get_next),
        get_last_error: Some(get_last_error),
        release: Some(release),
        private_data: Arc::into_raw(slot) as *mut c_void,
    }
}

/// An `arrow_array_stream` capsule over `slot` (released by its destructor
/// unless an importer moved the stream out).
pub fn stream_capsule(py: Python<'_>, slot: Arc<ArrowSlot>) -> PyResult<Bound<'_, PyCapsule>> {
    let stream = SendStream(new_stream(slot));
    PyCapsule::new_with_value_and_destructor(py, stream, c"arrow_array_stream", |mut s, _| {
        if let Some(r) = s.0.release {
            // SAFETY: not moved out by an importer (which would have
            // cleared `release`): ours to release.
            unsafe { r(&mut s.0) };
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokafka_net::consumer::fetch::AbortedTransactionFilter;
    use ferrokafka_net::consumer::records::decode_fetched;
    use ferrokafka_protocol::compression::Compression;
    use ferrokafka_protocol::record::{DecodeOptions, RecordBatchBuilder};

    fn batch(rows: usize) -> ExportedBatch {
        let mut b = RecordBatchBuilder::new(Compression::None);
        for i in 0..rows {
            b.append(i as i64, None, Some(&b"v"[..]), &[]).unwrap();
        }
        let blob = b.finish().unwrap();
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        let cols = decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, None)
            .unwrap()
            .records;
        ExportedBatch::new(cols, &[(Arc::from("t"), 0, rows)])
    }

    /// The stream hands out what the slot holds, once, then empty batches;
    /// its schema is the batches' (a struct of Spark's eight columns); and
    /// releasing it lets go of the slot.
    #[test]
    fn the_stream_hands_out_the_slots_batch_once_then_empty_ones() {
        let slot = Arc::new(ArrowSlot::default());
        let mut s = new_stream(slot.clone());
        assert_eq!(Arc::strong_count(&slot), 2);
        unsafe {
            let mut schema = std::mem::MaybeUninit::<FfiSchema>::uninit();
            assert_eq!(get_schema(&mut s, schema.as_mut_ptr()), 0);
            let mut schema = schema.assume_init();
            assert_eq!(schema.n_children, 8);
            (schema.release.unwrap())(&mut schema);
            assert!(get_last_error(&mut s).is_null());

            slot.put(Some(batch(3)));
            for rows in [3, 0, 0] {
                let mut a = std::mem::MaybeUninit::<FfiArray>::uninit();
                assert_eq!(get_next(&mut s, a.as_mut_ptr()), 0);
                let mut a = a.assume_init();
                assert_eq!((a.length, a.n_children), (rows, 8));
                (a.release.unwrap())(&mut a);
                assert!(a.release.is_none());
            }
            // A batch left and replaced before it was read is dropped.
            slot.put(Some(batch(5)));
            slot.put(Some(batch(2)));
            let mut a = std::mem::MaybeUninit::<FfiArray>::uninit();
            assert_eq!(get_next(&mut s, a.as_mut_ptr()), 0);
            let mut a = a.assume_init();
            assert_eq!(a.length, 2);
            (a.release.unwrap())(&mut a);

            release(&mut s);
            assert!(s.release.is_none());
            release(&mut s); // a second release is a no-op
        }
        assert_eq!(Arc::strong_count(&slot), 1);
    }
}
