//! `DeliveryFuture`: the result of `Producer.send`, completed from Rust.
//!
//! Cheap to create (one Arc, one small mutex), completed by the sender task
//! without the GIL. The completing side holds only the `FutureCell`, never
//! the Python object: completion touches no Python reference count (no
//! per-record decref deferred through pyo3's pool). A cell whose Python
//! future was already dropped (fire and forget) is handed back to the
//! owner's thread to be freed there (`FutureOwner::bury`, below).
//! Python-facing effects of completion are kept off the sender's thread
//! where possible:
//! * `result(timeout)` waits with the GIL released: on the producer's
//!   network events when it has a producer (`FutureOwner::set_network`),
//!   applying the acknowledgement on its own thread (docs/semantics.md
//!   §12.5), else on a Condvar;
//! * callbacks added with `add_done_callback` are queued on the producer's
//!   callback queue and run by `poll`/`flush` in the caller's thread (or at
//!   once when added to a future that is already done, as concurrent.futures
//!   does);
//! * `await fut` registers an asyncio future; completion hands the result to
//!   its loop with `call_soon_threadsafe` (taking the GIL only for that call,
//!   with no Rust lock held), so asyncio code waits without an executor thread.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::Duration;

use ferrokafka_net::producer::client::DeliveredRecord;
use ferrokafka_net::{BlockingClient, Error};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::FkError;
use crate::gil::wait_detached;

/// What a delivered record reports (`fk.RecordMetadata`).
#[pyclass(module = "ferrokafka._core", name = "RecordMetadata", frozen)]
#[derive(Debug, Clone)]
pub struct RecordMetadata {
    /// Shared with the producer's partition state: one made per awaited or
    /// read record, so a reference count rather than a copy of the name.
    pub topic: Arc<str>,
    #[pyo3(get)]
    pub partition: i32,
    #[pyo3(get)]
    pub offset: i64,
    /// CreateTime the producer set, or the broker's LogAppendTime.
    #[pyo3(get)]
    pub timestamp_ms: i64,
    #[pyo3(get)]
    pub serialized_key_size: i32,
    #[pyo3(get)]
    pub serialized_value_size: i32,
}

#[pymethods]
impl RecordMetadata {
    #[new]
    #[pyo3(signature = (topic, partition, offset, timestamp_ms=-1, serialized_key_size=-1, serialized_value_size=-1))]
    fn py_new(
        topic: String,
        partition: i32,
        offset: i64,
        timestamp_ms: i64,
        serialized_key_size: i32,
        serialized_value_size: i32,
    ) -> Self {
        RecordMetadata {
            topic: topic.into(),
            partition,
            offset,
            timestamp_ms,
            serialized_key_size,
            serialized_value_size,
        }
    }

    #[getter]
    fn topic(&self) -> &str {
        &self.topic
    }

    fn __repr__(&self) -> String {
        format!(
            "RecordMetadata(topic={:?}, partition={}, offset={}, timestamp_ms={})",
            self.topic, self.partition, self.offset, self.timestamp_ms
        )
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.topic == other.topic
            && self.partition == other.partition
            && self.offset == other.offset
            && self.timestamp_ms == other.timestamp_ms
    }
}

impl From<&DeliveredRecord> for RecordMetadata {
    fn from(d: &DeliveredRecord) -> Self {
        RecordMetadata {
            topic: d.topic.clone(),
            partition: d.partition,
            offset: d.offset,
            timestamp_ms: d.timestamp_ms,
            serialized_key_size: d.key_size,
            serialized_value_size: d.value_size,
        }
    }
}

/// The delivery result as the completing thread left it: a `RecordMetadata`
/// is built only when Python asks (`result()`, an awaiter), so a future
/// nobody looks at costs no string copy of the topic.
enum Outcome {
    Pending,
    Done(DeliveredRecord),
    Failed(Error),
}

struct State {
    outcome: Outcome,
    callbacks: Vec<Py<PyAny>>,
    /// The future's own Python object while `callbacks` wait (they are
    /// called with it), taken with them at completion. Futures without
    /// callbacks never hold themselves, so one the caller dropped is freed
    /// at once; the cycle this makes lasts only until completion.
    this: Option<Py<DeliveryFuture>>,
    /// (event loop, asyncio future) pairs of `await`ers.
    awaiters: Vec<(Py<PyAny>, Py<PyAny>)>,
    /// Threads in `result()` waiting on the producer's network events
    /// (`BlockingClient::wait_for_answer`): completion wakes them through
    /// the network client when there are some, as for `waiters`.
    net_waiters: usize,
    /// Threads in `result()` waiting on `done`. Completion notifies only
    /// when there are some: `notify_all` is a futex syscall even with no
    /// waiter, once per record on the completing thread otherwise. Read and
    /// written under the state lock, as the outcome is, so a waiter either
    /// sees the outcome before it waits or is counted before it is set.
    waiters: usize,
    /// Python read the outcome (`result`, `exception`, an aio `Delivery`
    /// awaited, or an asyncio future settled with it).
    retrieved: bool,
}

/// A record's key and value sizes (-1: none) in one word.
#[inline]
pub fn pack_sizes(key_size: i32, value_size: i32) -> u64 {
    ((key_size as u32 as u64) << 32) | value_size as u32 as u64
}

#[inline]
pub fn unpack_sizes(w: u64) -> (i32, i32) {
    ((w >> 32) as u32 as i32, w as u32 as i32)
}

/// Shared between the Python object and the Rust side that completes it.
pub struct FutureCell {
    state: Mutex<State>,
    done: Condvar,
    /// Where callbacks go when the future completes, and where the cell is
    /// freed (the producer's `FutureOwner`). Weak: the owner's graves hold
    /// cells, so a strong reference would be a cycle.
    queue: Option<Weak<FutureOwner>>,
    /// The owner reports this future if it fails and is dropped unread
    /// (`FutureOwner::report`); fixed at creation, so a future of an owner
    /// that does not report costs nothing when dropped.
    report: bool,
    /// A `send` record's (create timestamp, key and value sizes), stamped
    /// as its handle is made (`Completion::stamped`) and read when its batch
    /// is answered. Relaxed: the handle itself passes between those threads
    /// through the producer's lock, which orders them.
    meta_ts: AtomicI64,
    meta_sizes: AtomicU64,
}

/// Keeps a producer's Python object alive while any of its records is
/// pending, so `Producer(bs).send(...).result()` works with no other
/// reference to the producer. One reference for all pending records
/// (taken by the first, let go by the last completion) rather than one per
/// record: a reference let go without the GIL is a deferred decref in
/// pyo3's pool, a mutex and a push per record on the completing thread.
///
/// The count is an atomic, so a `send` and a completion running at the
/// same time do not contend on a lock; `owner` is locked only when the
/// count leaves or reaches zero. The rule that keeps the two consistent:
/// whoever takes the count to zero takes `owner` only if, under its lock,
/// the count is still zero. A `send` that raised it from zero meanwhile
/// then either finds `owner` still set (and the completer, seeing a
/// non-zero count, leaves it) or finds it taken and sets it again; either
/// way `owner` is set whenever a record is pending, and the last
/// completion of any busy period finds the count at zero and lets go.
#[derive(Default)]
pub struct KeepAlive {
    pending: AtomicUsize,
    owner: Mutex<Option<Py<PyAny>>>,
}

impl KeepAlive {
    /// Count one more pending record of `owner` (called with the GIL held,
    /// before the record's completion is handed to the producer).
    pub fn acquire(self: &Arc<Self>, owner: &Bound<'_, PyAny>) -> KeepToken {
        if self.pending.fetch_add(1, Ordering::AcqRel) == 0 {
            let mut o = self.owner.lock().unwrap_or_else(|p| p.into_inner());
            if o.is_none() {
                *o = Some(owner.clone().unbind());
            }
        }
        KeepToken(Some(self.clone()))
    }

    fn release(&self) {
        if self.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let gone = {
            let mut o = self.owner.lock().unwrap_or_else(|p| p.into_inner());
            if self.pending.load(Ordering::Acquire) == 0 {
                o.take()
            } else {
                None
            }
        };
        // After the lock: without the GIL this is a deferred decref, and
        // when it is the producer's last reference its Drop moves the
        // shutdown off the producer's own threads (PyProducer's Drop).
        drop(gone);
    }
}

/// One pending record's share of a `KeepAlive`: let go by `release` (at
/// completion, before the outcome is visible) or, for a record never handed
/// to the producer, when dropped.
pub struct KeepToken(Option<Arc<KeepAlive>>);

#[cfg(test)]
impl KeepToken {
    /// A token that keeps nothing alive (unit tests, no Python).
    pub fn none() -> Self {
        KeepToken(None)
    }
}

impl KeepToken {
    pub fn release(mut self) {
        if let Some(k) = self.0.take() {
            k.release();
        }
    }
}

impl Drop for KeepToken {
    fn drop(&mut self) {
        if let Some(k) = self.0.take() {
            k.release();
        }
    }
}

/// Callbacks that became runnable, with the future they are called with, to
/// be run by the owner's poll/flush. Entries are moved in without the GIL
/// (no Python reference count is touched on the completing thread).
type Runnable = Vec<(Vec<Py<PyAny>>, Py<DeliveryFuture>)>;

/// What a producer's futures hand back to the producer's own thread: the
/// callbacks to run, and the cells of completed futures nobody holds any
/// more, to free.
///
/// Why cells are freed here rather than where they complete: glibc's malloc
/// gives each thread an arena; a block freed by another thread goes back
/// to its own arena under that arena's lock. A fire-and-forget `send` loop
/// allocates a cell per record on the caller's thread while the sender
/// thread freed the cells of completed batches, so the two fought over the
/// caller's arena lock on every record (~15 % of a `send()` loop's samples
/// under perf; `send()` keeping its futures, freed by the caller, took
/// 0.58 us of CPU per record against 0.78 dropping them, docs/benchmarks.md).
/// The sender now hands a batch's unreferenced cells over in one push, and
/// the caller frees them in bulk between sends, from its own arena.
pub struct FutureOwner {
    callbacks: Mutex<Runnable>,
    /// Called with the error of a failed future dropped unread, when set
    /// (`ferrokafka.aio`: the loop's exception handler, as an
    /// `asyncio.Future` whose exception nobody retrieved). Checked once per
    /// future, at its creation, through `reporting`.
    report: Mutex<Option<Py<PyAny>>>,
    reporting: AtomicBool,
    graves: Mutex<Vec<Arc<FutureCell>>>,
    /// `graves.len()`, readable without the lock (checked on every send).
    buried: AtomicUsize,
    /// The producer's network client, for `result()` to wait on its events
    /// and apply the answer itself (`set_network`). Weak: a future kept
    /// after its producer is gone waits on its condvar instead.
    network: std::sync::OnceLock<Weak<BlockingClient>>,
    /// Threads in the producer's `poll(timeout)` waiting on those events for
    /// a callback to be queued (`wait_for_callbacks`): a completion that
    /// queues callbacks wakes them when there are some.
    polling: AtomicUsize,
}

pub type CallbackQueue = Arc<FutureOwner>;

/// Cells the caller's thread frees at once (`reap`): few enough to stay
/// small in memory and latency, many enough that the lock is rare.
const REAP_AT: usize = 4096;
/// Past this many waiting cells (the owner's thread is not sending: it
/// waits in `flush`, or went away) the completing thread frees them itself.
const GRAVES_MAX: usize = 65_536;

impl FutureOwner {
    pub fn new() -> Arc<Self> {
        Arc::new(FutureOwner {
            callbacks: Mutex::new(Vec::new()),
            report: Mutex::new(None),
            reporting: AtomicBool::new(false),
            graves: Mutex::new(Vec::new()),
            buried: AtomicUsize::new(0),
            network: std::sync::OnceLock::new(),
            polling: AtomicUsize::new(0),
        })
    }

    /// The network client whose answers complete these futures: a thread
    /// in `result()` then sleeps on its events and applies the record's
    /// acknowledgement itself, instead of waiting for the driver thread to
    /// apply it and wake this one (two thread hops; `events.rs` in the net
    /// crate). Set once.
    pub fn set_network(&self, net: &Arc<BlockingClient>) {
        let _ = self.network.set(Arc::downgrade(net));
    }

    fn network(&self) -> Option<Arc<BlockingClient>> {
        self.network.get().and_then(Weak::upgrade)
    }

    /// Wait up to `slice` for a callback to be queued, applying the network
    /// answers that come meanwhile on this thread (the producer's
    /// `poll(timeout)`; docs/semantics.md §12.5); true if one is queued.
    /// Without a network client (the producer is gone) a short sleep.
    /// Call without the GIL.
    pub fn wait_for_callbacks(&self, slice: Duration) -> bool {
        let queued = || !self.lock().is_empty();
        if queued() {
            return true;
        }
        let Some(net) = self.network() else {
            std::thread::sleep(slice.min(Duration::from_millis(5)));
            return queued();
        };
        // Counted before the check under the event queue's lock: a
        // completion that queues callbacks after it reads this count
        // (`resolve`) and wakes the thread.
        self.polling.fetch_add(1, Ordering::SeqCst);
        net.wait_for_answer(slice, &queued);
        self.polling.fetch_sub(1, Ordering::SeqCst);
        queued()
    }

    /// Report failed futures dropped unread to `f` (None: stop); applies to
    /// futures made from now on.
    pub fn report_unretrieved(&self, f: Option<Py<PyAny>>) {
        self.reporting.store(f.is_some(), Ordering::Relaxed);
        *self.report.lock().unwrap_or_else(|p| p.into_inner()) = f;
    }

    /// The runnable callbacks.
    pub fn lock(&self) -> MutexGuard<'_, Runnable> {
        self.callbacks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Completed cells that only the completing side still held (on the
    /// completing thread; one call per finished batch).
    pub fn bury(&self, cells: Vec<Arc<FutureCell>>) {
        if cells.is_empty() || self.buried.load(Ordering::Relaxed) >= GRAVES_MAX {
            return; // dropped here
        }
        let mut g = self.graves.lock().unwrap_or_else(|p| p.into_inner());
        g.extend(cells);
        self.buried.store(g.len(), Ordering::Relaxed);
    }

    /// Free the buried cells on this (the owner's) thread once there are
    /// enough of them; one relaxed load when there are not.
    pub fn reap(&self) {
        if self.buried.load(Ordering::Relaxed) >= REAP_AT {
            self.reap_all();
        }
    }

    /// Free every buried cell (flush, poll, close).
    pub fn reap_all(&self) {
        let cells = {
            let mut g = self.graves.lock().unwrap_or_else(|p| p.into_inner());
            self.buried.store(0, Ordering::Relaxed);
            std::mem::take(&mut *g)
        };
        drop(cells);
    }
}

impl FutureCell {
    pub fn new(queue: Option<&CallbackQueue>) -> Arc<Self> {
        let report = queue.is_some_and(|q| q.reporting.load(Ordering::Relaxed));
        let queue = queue.map(Arc::downgrade);
        Arc::new(FutureCell {
            state: Mutex::new(State {
                outcome: Outcome::Pending,
                callbacks: Vec::new(),
                this: None,
                awaiters: Vec::new(),
                net_waiters: 0,
                waiters: 0,
                retrieved: false,
            }),
            done: Condvar::new(),
            queue,
            report,
            meta_ts: AtomicI64::new(-1),
            meta_sizes: AtomicU64::new(pack_sizes(-1, -1)),
        })
    }

    /// Keep a record's (create timestamp, key size, value size).
    pub fn stamp(&self, timestamp_ms: i64, key_size: i32, value_size: i32) {
        self.meta_ts.store(timestamp_ms, Ordering::Relaxed);
        self.meta_sizes
            .store(pack_sizes(key_size, value_size), Ordering::Relaxed);
    }

    /// What `stamp` kept ((-1, -1, -1) before it).
    pub fn meta(&self) -> (i64, i32, i32) {
        let (k, v) = unpack_sizes(self.meta_sizes.load(Ordering::Relaxed));
        (self.meta_ts.load(Ordering::Relaxed), k, v)
    }

    /// Called by `resolve` with the state lock held (lock order: state,
    /// then queue). Hands back what it could not queue (the owner is gone),
    /// for the caller to free once the lock is released.
    fn queue_callbacks(
        owner: Option<&Arc<FutureOwner>>,
        this: Py<DeliveryFuture>,
        cbs: Vec<Py<PyAny>>,
    ) -> Option<(Vec<Py<PyAny>>, Py<DeliveryFuture>)> {
        match owner {
            Some(q) if !cbs.is_empty() => {
                q.lock().push((cbs, this));
                None
            }
            _ => Some((cbs, this)),
        }
    }

    /// Hand completed cells that nothing else holds to their owner, to be
    /// freed on its thread (`FutureOwner`); the rest are dropped here.
    pub fn bury(cells: Vec<Arc<FutureCell>>) {
        let owner = cells
            .first()
            .and_then(|c| c.queue.as_ref())
            .and_then(Weak::upgrade);
        if let Some(owner) = owner {
            owner.bury(cells);
        }
    }

    /// Whether the completing side holds the only reference (the Python
    /// future was dropped): such a cell is worth burying.
    pub fn unclaimed(cell: &Arc<FutureCell>) -> bool {
        Arc::strong_count(cell) == 1
    }

    /// The producer's `FutureOwner`, while it lives.
    fn owner(&self) -> Option<Arc<FutureOwner>> {
        self.queue.as_ref().and_then(Weak::upgrade)
    }

    /// Whether the outcome is still unknown.
    pub(crate) fn is_pending(&self) -> bool {
        matches!(
            self.state.lock().unwrap_or_else(|p| p.into_inner()).outcome,
            Outcome::Pending
        )
    }

    /// Count the outcome as read: another object (an asyncio future) now
    /// answers for reporting it.
    pub(crate) fn mark_retrieved(&self) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retrieved = true;
    }

    /// A failed outcome nobody read goes to the owner's report, when the
    /// owner asked for one (`FutureOwner::report`). Called when the last
    /// Python object over the cell is freed, with the GIL held; like a
    /// `__del__`, it keeps any exception being raised meanwhile and reports
    /// its own failures as unraisable.
    pub(crate) fn report_if_unread(&self) {
        if !self.report {
            return;
        }
        {
            let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            if st.retrieved || !matches!(st.outcome, Outcome::Failed(_)) {
                return;
            }
        }
        let Some(owner) = self.queue.as_ref().and_then(Weak::upgrade) else {
            return;
        };
        Python::attach(|py| {
            let Some(f) = owner
                .report
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(|f| f.clone_ref(py))
            else {
                return;
            };
            let Some(Err(e)) = self.outcome_to_py(py) else {
                return;
            };
            let raised = PyErr::take(py);
            if let Err(err) = f.call1(py, (e.into_value(py),)) {
                err.write_unraisable(py, None);
            }
            if let Some(r) = raised {
                r.restore(py);
            }
        });
    }

    /// The outcome for Python (None while pending); counts it as read.
    pub(crate) fn outcome_to_py(&self, py: Python<'_>) -> Option<PyResult<Py<PyAny>>> {
        self.to_py(py, true)
    }

    /// The outcome for Python without counting it as read (a repr).
    pub(crate) fn peek_to_py(&self, py: Python<'_>) -> Option<PyResult<Py<PyAny>>> {
        self.to_py(py, false)
    }

    fn to_py(&self, py: Python<'_>, read: bool) -> Option<PyResult<Py<PyAny>>> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.retrieved |= read;
        match &st.outcome {
            Outcome::Pending => None,
            Outcome::Done(d) => Some(Py::new(py, RecordMetadata::from(d)).map(|o| o.into_any())),
            Outcome::Failed(e) => Some(Err(FkError(e.clone()).into())),
        }
    }
}

#[pyclass(module = "ferrokafka._core", name = "DeliveryFuture")]
pub struct DeliveryFuture {
    cell: Arc<FutureCell>,
}

impl Drop for DeliveryFuture {
    /// A failed record whose future is dropped unread goes to the owner's
    /// report (see `FutureOwner::report`). Runs in the object's dealloc,
    /// with the GIL held.
    fn drop(&mut self) {
        self.cell.report_if_unread();
    }
}

impl DeliveryFuture {
    /// Another Python object over an existing cell (`ferrokafka.aio`'s
    /// `Delivery` hands its cell to the producer's completion path this way).
    pub(crate) fn from_cell(cell: Arc<FutureCell>) -> Self {
        DeliveryFuture { cell }
    }

    pub(crate) fn cell(&self) -> &Arc<FutureCell> {
        &self.cell
    }

    pub fn new(queue: Option<&CallbackQueue>) -> (Self, Arc<FutureCell>) {
        let cell = FutureCell::new(queue);
        (DeliveryFuture { cell: cell.clone() }, cell)
    }

    /// Complete the future of `cell` from Rust, on the completing (sender)
    /// thread. Complete once; later calls are ignored (a batch may be
    /// failed by expiry and answered by the broker in the same instant).
    /// The GIL is taken only when an asyncio task awaits the future;
    /// callbacks are moved into the owner's queue without it, so a Python
    /// thread busy holding the GIL can never stall the sender.
    ///
    /// The outcome is set and the callbacks are queued under one hold of
    /// the state lock (docs/semantics.md §12.3; the queue's lock nests
    /// inside it, nothing takes them in the other order): a thread that
    /// sees `result()` return and then calls the producer's `poll` always
    /// finds the callbacks queued, and a callback run by `poll` always
    /// finds its future done. (Queuing first and setting the outcome after,
    /// under a second hold, let a `poll` in between run a callback whose
    /// `f.exception(0)` raised a timeout.)
    pub fn resolve(cell: &FutureCell, result: Result<DeliveredRecord, Error>) {
        let outcome = match result {
            Ok(d) => Outcome::Done(d),
            Err(e) => Outcome::Failed(e),
        };
        let mut st = cell.state.lock().unwrap_or_else(|p| p.into_inner());
        if !matches!(st.outcome, Outcome::Pending) {
            return;
        }
        st.outcome = outcome;
        let callbacks = std::mem::take(&mut st.callbacks);
        let notify_net = st.net_waiters > 0;
        // The owner once, for both of its uses below: upgrading the weak
        // handle is a read-modify-write on the count every `send`'s
        // `downgrade` writes too (twice per record cost a `send(cb)` +
        // `poll(0)` loop ~7% of its throughput).
        let owner = if callbacks.is_empty() && !notify_net {
            None
        } else {
            cell.owner()
        };
        let queued = !callbacks.is_empty() && owner.is_some() && st.this.is_some();
        let unqueued = st
            .this
            .take()
            .and_then(|this| FutureCell::queue_callbacks(owner.as_ref(), this, callbacks));
        let aws = std::mem::take(&mut st.awaiters);
        let notify = st.waiters > 0;
        drop(st);
        // Only now: freeing the future's object may run Python code that
        // takes the state lock (`report_if_unread`).
        drop(unqueued);
        if notify {
            cell.done.notify_all();
        }
        // After the state lock (a waiter checks the outcome, or the queued
        // callbacks, under the event queue's lock, then sleeps:
        // `EventQueue::wait_for`). A waiter that applied the answer itself
        // is awake already.
        if let Some(owner) = owner {
            if notify_net || (queued && owner.polling.load(Ordering::SeqCst) > 0) {
                if let Some(net) = owner.network() {
                    net.wake_answer_waiters();
                }
            }
        }
        if !aws.is_empty() {
            Python::attach(|py| {
                for (lp, afut) in aws {
                    wake_awaiter(py, cell, &lp, &afut);
                }
            });
        }
    }

    fn outcome_to_py(&self, py: Python<'_>) -> Option<PyResult<Py<PyAny>>> {
        self.cell.outcome_to_py(py)
    }
}

fn wake_awaiter(py: Python<'_>, cell: &FutureCell, lp: &Py<PyAny>, afut: &Py<PyAny>) {
    // set_result/set_exception must run on the loop's thread.
    let r = (|| -> PyResult<()> {
        let setter = match cell.outcome_to_py(py) {
            Some(Ok(v)) => (afut.getattr(py, "set_result")?, v),
            Some(Err(e)) => (
                afut.getattr(py, "set_exception")?,
                e.into_value(py).into_any(),
            ),
            None => return Ok(()),
        };
        let helper = py.import("ferrokafka._future_helpers")?.getattr("settle")?;
        lp.call_method1(
            py,
            "call_soon_threadsafe",
            (helper, afut.clone_ref(py), setter.0, setter.1),
        )?;
        Ok(())
    })();
    if let Err(e) = r {
        // The loop may be closed; nothing else can be told.
        e.write_unraisable(py, None);
    }
}

#[pymethods]
impl DeliveryFuture {
    /// The RecordMetadata, or raise the delivery error. Waits up to `timeout`
    /// seconds (None: forever) with the GIL released; KafkaTimeoutError then.
    #[pyo3(signature = (timeout=None))]
    fn result(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Py<PyAny>> {
        if let Some(r) = self.outcome_to_py(py) {
            return r;
        }
        let dur = match timeout {
            Some(t) if t.is_nan() || t < 0.0 => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "timeout must be >= 0",
                ))
            }
            Some(t) => Some(Duration::from_secs_f64(t)),
            None => None,
        };
        let cell = self.cell.clone();
        let net = cell.owner().and_then(|o| o.network());
        let finished = wait_detached(py, dur, move |slice| {
            let mut st = cell.state.lock().unwrap_or_else(|p| p.into_inner());
            if !matches!(st.outcome, Outcome::Pending) {
                return Some(());
            }
            // Counted under the lock the completer sets the outcome under:
            // it notifies iff a waiter is counted (see `State::waiters`).
            let Some(net) = &net else {
                st.waiters += 1;
                let (mut st, _) = cell
                    .done
                    .wait_timeout(st, slice)
                    .unwrap_or_else(|p| p.into_inner());
                st.waiters -= 1;
                return (!matches!(st.outcome, Outcome::Pending)).then_some(());
            };
            st.net_waiters += 1;
            drop(st);
            net.wait_for_answer(slice, &|| !cell.is_pending());
            let mut st = cell.state.lock().unwrap_or_else(|p| p.into_inner());
            st.net_waiters -= 1;
            (!matches!(st.outcome, Outcome::Pending)).then_some(())
        })?;
        match (finished, self.outcome_to_py(py)) {
            (_, Some(r)) => r,
            _ => Err(FkError(Error::Timeout {
                what: "waiting for delivery".into(),
                timeout_ms: dur.map_or(0, |d| d.as_millis() as u64),
            })
            .into()),
        }
    }

    fn done(&self) -> bool {
        !matches!(
            self.cell
                .state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .outcome,
            Outcome::Pending
        )
    }

    /// Delivery cannot be cancelled once handed to the producer.
    fn cancel(&self) -> bool {
        false
    }

    fn cancelled(&self) -> bool {
        false
    }

    /// The delivery error, or None if delivered. Waits like `result`.
    #[pyo3(signature = (timeout=None))]
    fn exception(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        match self.result(py, timeout) {
            Ok(_) => Ok(None),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyTimeoutError>(py) && !self.done() => {
                Err(e)
            }
            Err(e) => Ok(Some(e.into_value(py).into_any())),
        }
    }

    /// `fn(future)` runs when delivered or failed: in the thread that calls
    /// the producer's `poll`/`flush`, or now if already done.
    fn add_done_callback(slf: &Bound<'_, Self>, fn_: Py<PyAny>) -> PyResult<()> {
        {
            let this = slf.borrow();
            let mut st = this.cell.state.lock().unwrap_or_else(|p| p.into_inner());
            if matches!(st.outcome, Outcome::Pending) {
                st.callbacks.push(fn_);
                if st.this.is_none() {
                    // The callbacks are called with this object: keep it
                    // until they are queued (see `State::this`).
                    st.this = Some(slf.clone().unbind());
                }
                return Ok(());
            }
        }
        fn_.call1(slf.py(), (slf.clone(),))?;
        Ok(())
    }

    fn __await__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let asyncio = py.import("asyncio")?;
        let lp = asyncio.call_method0("get_running_loop")?;
        let afut = lp.call_method0("create_future")?;
        let pending = {
            let this = slf.borrow();
            let mut st = this.cell.state.lock().unwrap_or_else(|p| p.into_inner());
            if matches!(st.outcome, Outcome::Pending) {
                st.awaiters
                    .push((lp.clone().unbind(), afut.clone().unbind()));
                true
            } else {
                false
            }
        };
        if !pending {
            match slf.borrow().outcome_to_py(py) {
                Some(Ok(v)) => {
                    afut.call_method1("set_result", (v,))?;
                }
                Some(Err(e)) => {
                    afut.call_method1("set_exception", (e.into_value(py),))?;
                }
                None => {
                    return Err(PyRuntimeError::new_err(
                        "future state changed while awaiting",
                    ))
                }
            }
        }
        Ok(afut.call_method0("__await__")?.unbind())
    }

    fn __repr__(&self) -> String {
        let st = self.cell.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.outcome {
            Outcome::Pending => "<DeliveryFuture pending>".into(),
            Outcome::Done(d) => format!(
                "<DeliveryFuture done {}-{}@{}>",
                d.topic, d.partition, d.offset
            ),
            Outcome::Failed(e) => format!("<DeliveryFuture failed: {e}>"),
        }
    }
}

/// Run queued callbacks (from poll/flush). An exception in one is logged on
/// the `ferrokafka` logger and the others still run.
pub fn run_callbacks(py: Python<'_>, queue: &CallbackQueue) -> usize {
    queue.reap_all();
    let items: Vec<_> = std::mem::take(&mut *queue.lock());
    let mut n = 0;
    for (cbs, fut) in items {
        for cb in cbs {
            n += 1;
            let arg = PyTuple::new(py, [fut.clone_ref(py)]).expect("1-tuple");
            if let Err(e) = cb.call1(py, arg) {
                log_callback_error(py, &cb, e);
            }
        }
    }
    n
}

pub fn log_callback_error(py: Python<'_>, cb: &Py<PyAny>, err: PyErr) {
    let logged = py
        .import("ferrokafka._future_helpers")
        .and_then(|m| m.getattr("log_callback_error"))
        .and_then(|f| f.call1((cb.clone_ref(py), err.clone_ref(py).into_value(py))));
    if logged.is_err() {
        err.write_unraisable(py, Some(cb.bind(py)));
    }
}

static TEST_QUEUE: std::sync::OnceLock<CallbackQueue> = std::sync::OnceLock::new();

fn test_queue() -> &'static CallbackQueue {
    TEST_QUEUE.get_or_init(FutureOwner::new)
}

/// Test hook: a future completed by a Rust thread after `delay_ms`, with
/// `error_code` (a Kafka code) or success. Exercises the same completion path
/// as the producer's sender.
///
/// The thread is the point of the hook, not a way to wait: real futures are
/// completed from the producer's sender thread, off the GIL and off the
/// caller's thread, and `result()`, callbacks and `await` must work when
/// that happens while Python waits. Only tests call this (one thread per
/// test future); no production call starts a thread here.
#[pyfunction]
#[pyo3(signature = (delay_ms, error_code=None))]
pub fn _test_future(
    py: Python<'_>,
    delay_ms: u64,
    error_code: Option<i16>,
) -> PyResult<Py<DeliveryFuture>> {
    let (fut, cell) = DeliveryFuture::new(Some(test_queue()));
    let obj = Py::new(py, fut)?;
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(delay_ms));
        let result = match error_code {
            None => Ok(DeliveredRecord {
                topic: "t".into(),
                partition: 0,
                offset: 42,
                timestamp_ms: 1,
                key_size: -1,
                value_size: 1,
            }),
            Some(code) => Err(Error::broker(code, Some("test".into()))),
        };
        // Like the producer's completions: the cell only, no Python object.
        DeliveryFuture::resolve(&cell, result);
    });
    Ok(obj)
}

/// Test hook: run callbacks queued by `_test_future` completions.
#[pyfunction]
pub fn _test_run_callbacks(py: Python<'_>) -> usize {
    run_callbacks(py, test_queue())
}
