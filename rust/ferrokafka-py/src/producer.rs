//! Bindings of the producer. `ferrokafka.Producer` (python/ferrokafka/producer.py)
//! validates options and wraps `_Producer`; everything on the record path is
//! here and in the net crate, with the GIL released while `send` may block.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokafka_net::events::EventQueue;
use ferrokafka_net::options::Client;
use ferrokafka_net::producer::batch::ProducerRecordBatch;
use ferrokafka_net::producer::client::{
    Completion, DeliveredRecord, Finished, Outgoing, Producer, RecordHandle, TrySend,
};
use ferrokafka_net::producer::partitioner::Partitioner;
use ferrokafka_net::Error;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyDict, PyMapping, PyString};

use crate::aio_delivery::Delivery;
use crate::errors::FkError;
use crate::future::{
    run_callbacks, CallbackQueue, DeliveryFuture, FutureCell, FutureOwner, KeepAlive, KeepToken,
    RecordMetadata,
};
use crate::gil::{detached, wait_detached, SignalCheck};

mod batch_ref;
mod byte_list;
mod completion;
mod deferral;
mod txn;
use byte_list::ByteList;
pub(crate) use completion::ItemSizes;
use completion::{call_sizes, BatchState, PyBatchResult, PyCompletion};
use deferral::{flush_step, DeferState, Deferral, Deferred};

/// `poll` applies waiting network answers itself while at most this many
/// records are pending (`PyProducer::poll`): about what is in flight at
/// tens of thousands of records a second with sub-millisecond round trips.
const POLL_APPLIES_UP_TO: usize = 256;

/// A record's key or value: `bytes` or `bytearray`. A `str` is refused
/// with a message saying what to do (pyo3's own would only name the types).
struct Payload(PyBackedBytes);

impl<'a, 'py> FromPyObject<'a, 'py> for Payload {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        // `bytes`, the common case, first: one type check and a reference.
        if let Ok(b) = obj.cast::<PyBytes>() {
            return Ok(Payload(PyBackedBytes::from(b.to_owned())));
        }
        if obj.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "value and key must be bytes (encode str first), not str",
            ));
        }
        Ok(Payload(obj.extract::<PyBackedBytes>()?))
    }
}

/// Record headers: a mapping of name to value, or a sequence of
/// `(name, value)` pairs (values `bytes` or None).
struct Headers(Vec<(PyBackedStr, Option<PyBackedBytes>)>);

impl<'a, 'py> FromPyObject<'a, 'py> for Headers {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        // Any `collections.abc.Mapping` (the `isinstance` check pyo3's
        // `PyMapping` makes), as producer.py accepted.
        if let Ok(m) = obj.cast::<PyMapping>() {
            return Ok(Headers(m.items()?.extract()?));
        }
        Ok(Headers(obj.extract()?))
    }
}

type CoreProducer = Producer<ProducerRecordBatch, PyCompletion>;

#[pyclass(module = "ferrokafka._core", name = "_Producer", weakref)]
pub struct PyProducer {
    inner: Mutex<Option<Arc<CoreProducer>>>,
    callbacks: CallbackQueue,
    /// Holds this object while any of its records is pending.
    keep: Arc<KeepAlive>,
    buffer_memory: usize,
    /// Started on the first `block=False` call that has to wait.
    deferral: Mutex<Option<Deferral>>,
    defer_state: Arc<DeferState>,
    /// This client's id in its log records (`logbridge.rs`).
    #[pyo3(get, name = "_log_id")]
    log_id: u64,
    /// The network client's event queue: `poll` looks at it on every call
    /// (one atomic load) before it takes the producer to apply answers.
    answers: Arc<EventQueue>,
}

impl PyProducer {
    fn core(&self) -> PyResult<Arc<CoreProducer>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| FkError(Error::Closed { what: "producer" }).into())
    }
}

/// A record `send` could not enqueue and will not retry: a configuration
/// error (a partition out of range) is raised to the caller, anything else
/// fails the record's own future.
fn finish_refused(e: Error, completion: PyCompletion) -> PyResult<()> {
    match e {
        // A send outside a transaction (or after the transaction failed) is
        // the caller's mistake: raised, as Java's send throws.
        e @ (Error::Config { .. } | Error::State { .. }) => Err(FkError(e).into()),
        e => {
            completion.complete(Err(e));
            Ok(())
        }
    }
}

impl Drop for PyProducer {
    fn drop(&mut self) {
        // Garbage-collected without close(). Pending futures keep us alive,
        // so nothing is in flight here that a user waits for.
        self.stop_deferral(false);
        let core = self
            .inner
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(core) = core {
            // The last reference may be let go on one of the producer's own
            // threads (a future completed there released it): closing joins
            // those threads, so do it from a thread of its own.
            let own = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with("ferrokafka-"));
            if own {
                let _ = std::thread::Builder::new()
                    .name("ferrokafka-close".into())
                    .spawn(move || drop(core));
            } else {
                drop(core);
            }
        }
    }
}

impl PyProducer {
    /// Append one record whose outcome goes to `cell` (`send`, `send_nowait`).
    #[allow(clippy::too_many_arguments)]
    fn append_one(
        slf: &Bound<'_, Self>,
        cell: Arc<FutureCell>,
        topic: PyBackedStr,
        value: Option<Payload>,
        key: Option<Payload>,
        partition: Option<i32>,
        timestamp_ms: Option<i64>,
        headers: Option<Headers>,
        block: bool,
    ) -> PyResult<()> {
        let py = slf.py();
        let (value, key) = (value.map(|v| v.0), key.map(|k| k.0));
        let headers = headers.map(|h| h.0);
        let this = slf.borrow();
        let core = this.core()?;
        let completion = PyCompletion::One {
            cell,
            keep: this.keep.acquire(slf.as_any()),
        };
        let headers = headers.unwrap_or_default();
        let hs: Vec<(&str, Option<&[u8]>)> =
            headers.iter().map(|(k, v)| (&**k, v.as_deref())).collect();
        // Keep the order of block=False records: while some wait in the
        // deferral thread, later ones queue behind them.
        let behind = !block && this.defer_state.queued() > 0;
        // Borrowed from the call's arguments; `Copy`, so the attempt with the
        // GIL and the detached retry below take the same record.
        let record = Outgoing {
            topic: &topic,
            partition,
            key: key.as_deref(),
            value: value.as_deref(),
            headers: &hs,
            timestamp_ms,
        };
        // The common case first, with the GIL held: releasing and re-taking
        // it costs more than the append itself (and wakes any thread that
        // waits for it). This cannot deadlock and never stalls other Python
        // threads: `try_send` blocks on nothing. It takes the metadata lock
        // (held by others only for a few field updates, never while they
        // wait for the GIL or anything else) and only *tries* the producer's
        // state lock: its holders (the runner's `step`, answers on the
        // polling thread) never take the GIL, and completions, which may
        // (an awaited future), run with no producer lock held (runner.rs).
        // Anything that would wait (metadata unknown, buffer full, the lock
        // busy) comes back as `WouldBlock` and goes the detached way below.
        let first = if behind {
            TrySend::WouldBlock(completion)
        } else {
            core.try_send(record, completion)
        };
        let completion = match first {
            TrySend::Sent => return Ok(()),
            TrySend::Failed(e, completion) => {
                return finish_refused(e, completion);
            }
            TrySend::WouldBlock(completion) => completion,
        };
        let start = core.block_deadline();
        let signals = SignalCheck::new();
        let result = if behind {
            Err((
                Error::Timeout {
                    what: String::new(),
                    timeout_ms: 0,
                },
                completion,
            ))
        } else {
            // May wait: without the GIL (Ctrl-C is still seen through
            // `signals` within `SIGNAL_CHECK`).
            py.detach(|| {
                let deadline = if block { start } else { Instant::now() };
                core.send_until(record, completion, deadline, &|| {
                    block && signals.interrupted()
                })
            })
        };
        match result {
            Ok(()) => {}
            Err((Error::Interrupted, _)) => {
                return Err(signals
                    .take()
                    .unwrap_or_else(|| FkError(Error::Interrupted).into()))
            }
            Err((e @ Error::Config { .. }, _)) => return Err(FkError(e).into()),
            Err((Error::Timeout { .. }, completion)) if !block => {
                let bytes = key.as_ref().map_or(0, |k| k.len())
                    + value.as_ref().map_or(0, |v| v.len())
                    + headers
                        .iter()
                        .map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len()))
                        .sum::<usize>();
                let item = Deferred::One {
                    topic: topic.to_string(),
                    partition,
                    key: key.as_deref().map(<[u8]>::to_vec),
                    value: value.as_deref().map(<[u8]>::to_vec),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.as_deref().map(<[u8]>::to_vec)))
                        .collect(),
                    // The record's time is the call's, not the later append's.
                    timestamp_ms: Some(
                        timestamp_ms.unwrap_or_else(ferrokafka_net::blocking::now_ms),
                    ),
                    completion,
                    deadline: start,
                    bytes,
                };
                this.defer(&core, item);
            }
            Err((e, completion)) => finish_refused(e, completion)?,
        }
        Ok(())
    }
}

#[pymethods]
impl PyProducer {
    /// `cfg`: the validated options (snake_case keys) from producer.py.
    #[new]
    fn new(cfg: &Bound<'_, PyDict>) -> PyResult<Self> {
        crate::logbridge::refresh_level(cfg.py());
        let e = crate::config::effective(Client::Producer, cfg)?;
        let (Some(pcfg), Some((compression, level))) = (e.producer.clone(), e.compression) else {
            return Err(PyValueError::new_err("not a producer configuration"));
        };
        let pcfg_buffer_memory = pcfg.buffer_memory;
        // A transactional producer's batches carry the transactional bit.
        let transactional = pcfg.transactional_id.is_some();
        let (md, net) = crate::config::metadata_and_network(&e)?;
        let log_id = crate::logbridge::client_log_id(&net);
        let callbacks = FutureOwner::new();
        callbacks.set_network(&net);
        let answers = net.event_queue();
        let producer = Producer::new(
            pcfg,
            md,
            net,
            Box::new(move |cap| {
                ProducerRecordBatch::new(compression, level, cap).with_transactional(transactional)
            }),
        )
        .map_err(FkError)?;
        Ok(PyProducer {
            inner: Mutex::new(Some(Arc::new(producer))),
            callbacks,
            keep: Arc::new(KeepAlive::default()),
            buffer_memory: pcfg_buffer_memory,
            deferral: Mutex::new(None),
            defer_state: Arc::new(DeferState::default()),
            log_id,
            answers,
        })
    }

    /// Append one record; returns its DeliveryFuture. Blocks (without the
    /// GIL, Ctrl-C still interrupts) up to max_block_ms for metadata or
    /// buffer memory; with `block=False` it never waits: a record that
    /// cannot be enqueued at once is enqueued by a helper thread and its
    /// future completes (or fails at the max_block_ms deadline) later.
    ///
    /// The argument checks of `Producer.send` are made here, where the
    /// arguments are converted anyway (`Payload`, `Headers`), so that
    /// producer.py can bind this method as `send` itself.
    #[pyo3(signature = (topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None, block=true))]
    #[allow(clippy::too_many_arguments)]
    fn send(
        slf: &Bound<'_, Self>,
        topic: PyBackedStr,
        value: Option<Payload>,
        key: Option<Payload>,
        partition: Option<i32>,
        timestamp_ms: Option<i64>,
        headers: Option<Headers>,
        block: bool,
    ) -> PyResult<Py<DeliveryFuture>> {
        let py = slf.py();
        let this = slf.borrow();
        // Free the cells of completed, dropped futures here, on the
        // caller's thread (why: `FutureOwner`).
        this.callbacks.reap();
        let (fut, cell) = DeliveryFuture::new(Some(&this.callbacks));
        drop(this);
        let fut = Py::new(py, fut)?;
        // pyo3 makes every pyclass a GC type, but a DeliveryFuture's
        // traverse visits nothing (its references live in the Rust cell), so
        // the collector can never free a cycle through it. Tracking it only
        // costs: every collection walks the futures an application keeps
        // (`send` creates one per record). Untracked, they are freed by
        // reference counting exactly as before.
        // SAFETY: a live object of a GC type; untracking an object twice
        // (its dealloc does it again) is allowed.
        unsafe { pyo3::ffi::PyObject_GC_UnTrack(fut.as_ptr().cast()) };
        Self::append_one(
            slf,
            cell,
            topic,
            value,
            key,
            partition,
            timestamp_ms,
            headers,
            block,
        )?;
        Ok(fut)
    }

    /// `ferrokafka.aio`'s `send_nowait`: `send(block=False)` returning the
    /// asyncio-facing `Delivery` (aio_delivery.rs) over the record's cell,
    /// with no `DeliveryFuture` object in between: one object per record,
    /// made in Rust (why: aio_delivery.rs). `owner`: the `AIOProducer`.
    #[pyo3(signature = (owner, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn send_nowait(
        slf: &Bound<'_, Self>,
        owner: Py<PyAny>,
        topic: PyBackedStr,
        value: Option<Payload>,
        key: Option<Payload>,
        partition: Option<i32>,
        timestamp_ms: Option<i64>,
        headers: Option<Headers>,
    ) -> PyResult<Py<Delivery>> {
        let py = slf.py();
        let this = slf.borrow();
        this.callbacks.reap();
        let cell = FutureCell::new(Some(&this.callbacks));
        drop(this);
        let d = Py::new(py, Delivery::new(cell.clone(), owner))?;
        Self::append_one(
            slf,
            cell,
            topic,
            value,
            key,
            partition,
            timestamp_ms,
            headers,
            false,
        )?;
        Ok(d)
    }

    /// Append many records with one GIL release (the batch path of
    /// `send_batch`). `keys` is None or as long as `values`. Returns a future
    /// resolved when every record is done, and the per-record outcomes.
    #[pyo3(signature = (topic, values, keys=None, partition=None, block=true))]
    fn send_many(
        slf: &Bound<'_, Self>,
        topic: PyBackedStr,
        values: ByteList,
        keys: Option<ByteList>,
        partition: Option<i32>,
        block: bool,
    ) -> PyResult<(Py<DeliveryFuture>, PyBatchResult)> {
        check_key_count(keys.as_ref().map(ByteList::len), values.len())?;
        let sizes = call_sizes(values.len(), keys.as_ref(), &values);
        // Read through `Copy` views held by the closures (`move`: captured
        // by reference, a view was reloaded for every record), and without
        // a key check per record when there are no keys: `byte_list::Spans`.
        let v = values.spans();
        match keys.as_ref().map(ByteList::spans) {
            None => Self::send_each(slf, &topic, partition, sizes, block, move |i| {
                (None, v.get(i))
            }),
            Some(k) => Self::send_each(slf, &topic, partition, sizes, block, move |i| {
                (k.get(i), v.get(i))
            }),
        }
    }

    /// `send_many` for Arrow columns (PyCapsule interface): keys and values
    /// are read from the Arrow buffers in place, no Python object per record.
    #[pyo3(signature = (topic, values, keys=None, partition=None, block=true))]
    fn send_many_arrow(
        slf: &Bound<'_, Self>,
        topic: PyBackedStr,
        values: &Bound<'_, PyAny>,
        keys: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        block: bool,
    ) -> PyResult<(Py<DeliveryFuture>, PyBatchResult)> {
        let values = crate::arrow::BinaryColumn::from_pycapsule(values, "values")?;
        let keys = keys
            .map(|k| crate::arrow::BinaryColumn::from_pycapsule(k, "keys"))
            .transpose()?;
        check_key_count(keys.as_ref().map(|k| k.len()), values.len())?;
        let n = values.len();
        // Columns without nulls (what pyarrow makes of a list without None)
        // are read without a per-item null or width check (`DenseBinary`),
        // their sizes too.
        match (keys.as_ref().map(|k| k.dense()), values.dense()) {
            (None, Some(v)) => {
                let sizes = call_sizes(n, None, &v);
                Self::send_each(slf, &topic, partition, sizes, block, move |i| {
                    (None, Some(v.get(i)))
                })
            }
            (Some(Some(k)), Some(v)) => {
                let sizes = call_sizes(n, Some(&k), &v);
                Self::send_each(slf, &topic, partition, sizes, block, move |i| {
                    (Some(k.get(i)), Some(v.get(i)))
                })
            }
            _ => {
                let sizes = call_sizes(n, keys.as_ref(), &values);
                Self::send_each(slf, &topic, partition, sizes, block, |i| {
                    (keys.as_ref().and_then(|k| k.get(i)), values.get(i))
                })
            }
        }
    }

    /// Run delivery callbacks that are due; waits up to `timeout` seconds for
    /// at least one when none is. Returns how many ran.
    #[pyo3(signature = (timeout=0.0))]
    fn poll(&self, py: Python<'_>, timeout: f64) -> PyResult<usize> {
        // Answers the driver thread has not taken yet are applied here: a
        // caller polling for delivery reports gets them without waiting
        // for that thread to be woken (`events.rs` in the net crate). Only
        // while few records are pending: then that hop is what a record
        // waits for; with many, the caller is busy sending (a `send` +
        // `poll(0)` loop), and applying answers here made it 6-8% slower
        // (`send(cb)` + `poll(0)`, 300k records) where the driver applies
        // them alongside it. A closed producer has none to apply.
        if self.answers.has_events() {
            if let Ok(core) = self.core() {
                if core.pending() <= POLL_APPLIES_UP_TO {
                    detached(py, || core.poll_answers());
                }
            }
        }
        let n = run_callbacks(py, &self.callbacks);
        if n > 0 || timeout <= 0.0 {
            return Ok(n);
        }
        // Waits on the network events, applying the answers here, until a
        // callback is queued (a 5 ms sleep loop before: a report could wait
        // that long, and an idle `poll(1)` loop woke 200 times a second).
        let q = self.callbacks.clone();
        wait_detached(py, Some(Duration::from_secs_f64(timeout)), move |slice| {
            q.wait_for_callbacks(slice).then_some(())
        })?;
        Ok(run_callbacks(py, &self.callbacks))
    }

    /// Report a failed record whose future is dropped unread to `report`
    /// (called with the error; None: stop), for futures made from now on.
    /// `ferrokafka.aio` passes the loop's exception handler, as an
    /// `asyncio.Future` whose exception nobody retrieved reports itself.
    #[pyo3(signature = (report))]
    fn report_unretrieved(&self, report: Option<Py<PyAny>>) {
        self.callbacks.report_unretrieved(report);
    }

    /// librdkafka's `purge`: the records not yet sent (`in_queue`,
    /// including `block=False` sends still waiting to be appended) fail
    /// with `_PURGE_QUEUE`, those whose request is in flight (`in_flight`)
    /// with `_PURGE_INFLIGHT` (they may or may not be written). Their
    /// callbacks run at the next poll or flush. `blocking`: return once the
    /// waiting `block=False` sends are failed too (at most a second).
    #[pyo3(signature = (in_queue=true, in_flight=true, blocking=true))]
    fn purge(
        &self,
        py: Python<'_>,
        in_queue: bool,
        in_flight: bool,
        blocking: bool,
    ) -> PyResult<()> {
        let core = self.core()?;
        let deferred = self.defer_state.clone();
        py.detach(move || {
            if in_queue {
                deferred.purge(blocking, Duration::from_secs(1));
            }
            core.purge(in_queue, in_flight);
        });
        Ok(())
    }

    /// Send everything now and wait for it (up to `timeout` seconds); runs
    /// delivery callbacks. Returns the number of records still not delivered.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<usize> {
        let core = self.core()?;
        // Without the GIL: the step may copy full batches into a socket.
        detached(py, || core.begin_flush());
        let c2 = core.clone();
        let deferred = self.defer_state.clone();
        let waited = wait_detached(py, timeout.map(Duration::from_secs_f64), move |slice| {
            flush_step(&c2, &deferred, slice).then_some(())
        });
        core.end_flush();
        waited?;
        run_callbacks(py, &self.callbacks);
        Ok(core.pending() + self.defer_state.queued() as usize)
    }

    /// The topic's partition ids; waits up to max_block_ms for metadata
    /// (Ctrl-C interrupts), then raises KafkaTimeoutError naming the last
    /// connection error.
    fn partitions_for(&self, py: Python<'_>, topic: PyBackedStr) -> PyResult<Vec<i32>> {
        let core = self.core()?;
        let signals = SignalCheck::new();
        let deadline = core.block_deadline();
        match py.detach(|| core.partitions_for_until(&topic, deadline, &|| signals.interrupted())) {
            Ok(v) => Ok(v),
            Err(Error::Interrupted) => Err(signals
                .take()
                .unwrap_or_else(|| FkError(Error::Interrupted).into())),
            Err(e) => Err(FkError(e).into()),
        }
    }

    /// The producer's live `ProducerMetadata` (shared with its sender).
    fn metadata(&self, py: Python<'_>) -> PyResult<Py<crate::metadata::PyProducerMetadata>> {
        crate::metadata::PyProducerMetadata::wrap(py, self.core()?.metadata().clone())
    }

    /// Error events for `error_cb` since the last call, oldest first:
    /// (librdkafka local code, message). Also hands queued log records to
    /// Python logging (this runs in the application's poll).
    fn take_errors(&self, py: Python<'_>) -> Vec<(i16, String)> {
        crate::logbridge::drain(py);
        match self.core() {
            Ok(c) => c.metadata().take_client_errors(),
            Err(_) => Vec::new(),
        }
    }

    fn metrics(&self) -> PyResult<Vec<(String, f64)>> {
        Ok(self.core()?.metrics())
    }

    /// Transactions (docs/semantics.md §7); timeouts in seconds, None:
    /// max_block_ms. A timed-out call keeps running: call it again to wait.
    #[pyo3(signature = (timeout=None))]
    fn init_transactions(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        txn::run(py, &*self.core()?, timeout, |c, t, i| {
            c.init_transactions(t, i)
        })
    }

    fn begin_transaction(&self) -> PyResult<()> {
        Ok(self.core()?.begin_transaction().map_err(FkError)?)
    }

    #[pyo3(signature = (offsets, group, timeout=None))]
    fn send_offsets_to_transaction(
        &self,
        py: Python<'_>,
        offsets: Vec<txn::OffsetTuple>,
        group: txn::GroupTuple,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let (offsets, group) = (txn::offsets(offsets), txn::group(group));
        txn::run(py, &*self.core()?, timeout, move |c, t, i| {
            c.send_offsets_to_transaction(offsets, group, t, i)
        })
    }

    #[pyo3(signature = (timeout=None))]
    fn commit_transaction(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let r = txn::run(py, &*self.core()?, timeout, |c, t, i| {
            c.commit_transaction(t, i)
        });
        run_callbacks(py, &self.callbacks);
        r
    }

    #[pyo3(signature = (timeout=None))]
    fn abort_transaction(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let r = txn::run(py, &*self.core()?, timeout, |c, t, i| {
            c.abort_transaction(t, i)
        });
        run_callbacks(py, &self.callbacks);
        r
    }

    /// The transaction state's name, e.g. "IN_TRANSACTION"; None when not
    /// transactional.
    fn transaction_state(&self) -> PyResult<Option<String>> {
        Ok(self.core()?.transaction_state().map(|s| s.to_string()))
    }

    /// Flush up to `timeout` seconds, then fail what is left and stop.
    #[pyo3(signature = (timeout=None))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let core = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(core) = core else { return Ok(()) };
        if timeout != Some(0.0) {
            let started = Instant::now();
            detached(py, || core.begin_flush());
            let c2 = core.clone();
            let deferred = self.defer_state.clone();
            let _ = wait_detached(py, timeout.map(Duration::from_secs_f64), move |slice| {
                flush_step(&c2, &deferred, slice).then_some(())
            });
            // Then the writers hand what they hold to the kernel before the
            // drop below closes the connections (acks=0 records completed
            // once counted as sent; `Producer::wait_written`), within what
            // is left of the timeout.
            let bound = core.write_wait(timeout.map(Duration::from_secs_f64), started);
            let c3 = core.clone();
            let _ = wait_detached(py, Some(bound), move |slice| {
                c3.wait_written(slice).then_some(())
            });
        }
        // Records still waiting for metadata fail now ("closed"); the thread
        // lets go of its reference to the core before we drop ours.
        py.detach(|| self.stop_deferral(true));
        // Last reference: dropping closes (fails the rest, joins threads).
        py.detach(move || drop(core));
        run_callbacks(py, &self.callbacks);
        Ok(())
    }
}

impl PyProducer {
    /// Send the records whose key and value come from `record(i)` (one per
    /// entry of `sizes`, their sizes, `call_sizes`), with one
    /// GIL release, one metadata lookup and a few lock holds for all of them
    /// (`Producer::send_many`), and one completion future for the call.
    /// `block=False`: records that cannot be enqueued at once (and all after
    /// them, to keep their order) go to the deferral thread.
    fn send_each<'a>(
        slf: &Bound<'_, Self>,
        topic: &str,
        partition: Option<i32>,
        sizes: Box<[u64]>,
        block: bool,
        record: impl Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>) + Sync,
    ) -> PyResult<(Py<DeliveryFuture>, PyBatchResult)> {
        let n = sizes.len();
        let py = slf.py();
        let this = slf.borrow();
        let core = this.core()?;
        let (fut, cell) = DeliveryFuture::new(Some(&this.callbacks));
        let fut = Py::new(py, fut)?;
        let state = Arc::new(BatchState::new(
            (cell, this.keep.acquire(slf.as_any())),
            sizes,
        ));
        if n == 0 {
            state.resolve_done();
        }
        let start = core.block_deadline();
        let behind = !block && this.defer_state.queued() > 0;
        let signals = SignalCheck::new();
        let refs = batch_ref::RecordRefs::new(&state);
        let completion = |index| PyCompletion::Batch(refs.make(index));
        // Records of the call that go into a batch one after another get
        // one completion, made once (`send_many_until`).
        let mut completion_run = |index, count| PyCompletion::Batch(refs.make_run(index, count));
        let failed = if behind {
            (0..n)
                .map(|i| {
                    (
                        Error::Timeout {
                            what: String::new(),
                            timeout_ms: 0,
                        },
                        completion(i),
                    )
                })
                .collect()
        } else {
            py.detach(|| {
                let deadline = if block { start } else { Instant::now() };
                core.send_many_until(
                    topic,
                    partition,
                    n,
                    &record,
                    completion,
                    Some(&mut completion_run),
                    deadline,
                    &|| block && signals.interrupted(),
                )
            })
        };
        if let Some((Error::Config { .. }, _)) = failed.first() {
            let (e, _) = failed.into_iter().next().expect("checked non-empty");
            return Err(FkError(e).into());
        }
        if failed.iter().any(|(e, _)| matches!(e, Error::Interrupted)) {
            // Records enqueued before the interrupt still go out; the rest
            // fail, and the caller gets the KeyboardInterrupt.
            for (_, c) in failed {
                c.complete(Err(Error::Interrupted));
            }
            return Err(signals
                .take()
                .unwrap_or_else(|| FkError(Error::Interrupted).into()));
        }
        let mut later = Vec::new();
        let mut records = Vec::new();
        let mut bytes = 0;
        for (e, c) in failed {
            match (e, &c) {
                (Error::Timeout { .. }, PyCompletion::Batch(r)) if !block => {
                    let (k, v) = record(r.index());
                    bytes += k.map_or(0, |k| k.len()) + v.map_or(0, |v| v.len());
                    records.push((k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec)));
                    later.push(c);
                }
                (e, _) => c.complete(Err(e)),
            }
        }
        if !later.is_empty() {
            this.defer(
                &core,
                Deferred::Many {
                    topic: topic.to_string(),
                    partition,
                    records,
                    completions: later,
                    deadline: start,
                    bytes,
                },
            );
        }
        Ok((fut, PyBatchResult { state }))
    }
}

/// One slice of a flush: true once nothing is pending, in the core or in
/// the deferral thread.
fn check_key_count(keys: Option<usize>, values: usize) -> PyResult<()> {
    match keys {
        Some(k) if k != values => Err(PyValueError::new_err(format!(
            "invalid value for keys: {k} keys for {values} values"
        ))),
        _ => Ok(()),
    }
}

/// The accepted `partitioner` names (the Rust enum is the one list of them).
#[pyfunction]
pub fn partitioner_names() -> Vec<&'static str> {
    Partitioner::NAMES.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(partitioner_names, m)?)?;
    m.add_function(wrap_pyfunction!(byte_list::_test_byte_list_layout, m)?)?;
    m.add_class::<PyProducer>()?;
    m.add_class::<PyBatchResult>()
}
