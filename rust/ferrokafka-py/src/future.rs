//! `DeliveryFuture`: the result of `Producer.send`, completed from Rust.
//!
//! Cheap to create (one Arc, one small mutex), completed by the sender task
//! without the GIL. Python-facing effects of completion are kept off the
//! sender's thread where possible:
//! * `result(timeout)` waits on a Condvar with the GIL released;
//! * callbacks added with `add_done_callback` are queued on the producer's
//!   callback queue and run by `poll`/`flush` in the caller's thread (or at
//!   once when added to a future that is already done, as concurrent.futures
//!   does);
//! * `await fut` registers an asyncio future; completion hands the result to
//!   its loop with `call_soon_threadsafe` (taking the GIL only for that call,
//!   with no Rust lock held), so asyncio code waits without an executor thread.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use ferrokafka_net::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::FkError;
use crate::gil::wait_detached;

/// What a delivered record reports (`fk.RecordMetadata`).
#[pyclass(module = "ferrokafka._core", name = "RecordMetadata", frozen, get_all)]
#[derive(Debug, Clone)]
pub struct RecordMetadata {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// CreateTime the producer set, or the broker's LogAppendTime.
    pub timestamp_ms: i64,
    pub serialized_key_size: i32,
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
            topic,
            partition,
            offset,
            timestamp_ms,
            serialized_key_size,
            serialized_value_size,
        }
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

enum Outcome {
    Pending,
    Done(RecordMetadata),
    Failed(Error),
}

struct State {
    outcome: Outcome,
    callbacks: Vec<Py<PyAny>>,
    /// (event loop, asyncio future) pairs of `await`ers.
    awaiters: Vec<(Py<PyAny>, Py<PyAny>)>,
}

/// asyncio futures awaiting a DeliveryFuture: (event loop, asyncio future).
type Awaiters = Vec<(Py<PyAny>, Py<PyAny>)>;

/// Shared between the Python object and the Rust side that completes it.
pub struct FutureCell {
    state: Mutex<State>,
    done: Condvar,
    /// Where callbacks go when the future completes (the producer's queue).
    queue: Option<CallbackQueue>,
    /// The producer that will complete this future, held while it is
    /// pending so `Producer(bs).send(...).result()` works with no other
    /// reference to the producer; let go at completion, so no cycle outlives
    /// the record.
    keepalive: Mutex<Option<Py<PyAny>>>,
}

/// Callbacks that became runnable, with the future they are called with, to
/// be run by the owner's poll/flush. Entries are moved in without the GIL
/// (no Python reference count is touched on the completing thread).
pub type CallbackQueue = Arc<Mutex<Vec<(Vec<Py<PyAny>>, Arc<Py<DeliveryFuture>>)>>>;

impl FutureCell {
    pub fn new(queue: Option<CallbackQueue>) -> Arc<Self> {
        Arc::new(FutureCell {
            state: Mutex::new(State {
                outcome: Outcome::Pending,
                callbacks: Vec::new(),
                awaiters: Vec::new(),
            }),
            done: Condvar::new(),
            queue,
            keepalive: Mutex::new(None),
        })
    }

    /// Keep `owner` alive until this future completes (see `keepalive`).
    pub fn keep_alive(&self, owner: Py<PyAny>) {
        // Call before the future can be completed (before its completion is
        // handed to the producer): `resolve` takes the owner once, just
        // before it sets the outcome, and would miss one set later.
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(st.outcome, Outcome::Pending) {
            *self.keepalive.lock().unwrap_or_else(|p| p.into_inner()) = Some(owner);
        }
        // Done already: `owner` is dropped when we return, after the lock.
    }

    fn queue_callbacks(&self, this: &Arc<Py<DeliveryFuture>>, cbs: Vec<Py<PyAny>>) {
        if cbs.is_empty() {
            return;
        }
        if let Some(q) = &self.queue {
            q.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((cbs, this.clone()));
        }
    }

    fn outcome_to_py(&self, py: Python<'_>) -> Option<PyResult<Py<PyAny>>> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &st.outcome {
            Outcome::Pending => None,
            Outcome::Done(m) => Some(Py::new(py, m.clone()).map(|o| o.into_any())),
            Outcome::Failed(e) => Some(Err(FkError(e.clone()).into())),
        }
    }

    /// Complete once; later calls are ignored (a batch may be failed by
    /// expiry and answered by the broker in the same instant). Returns the
    /// callbacks and awaiters to notify; the caller runs them without holding
    /// any lock of its own.
    fn complete(&self, outcome: Outcome) -> Option<(Vec<Py<PyAny>>, Awaiters)> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !matches!(st.outcome, Outcome::Pending) {
            return None;
        }
        st.outcome = outcome;
        let cbs = std::mem::take(&mut st.callbacks);
        let aws = std::mem::take(&mut st.awaiters);
        drop(st);
        self.done.notify_all();
        Some((cbs, aws))
    }
}

#[pyclass(module = "ferrokafka._core", name = "DeliveryFuture")]
pub struct DeliveryFuture {
    cell: Arc<FutureCell>,
}

impl DeliveryFuture {
    pub fn new(queue: Option<CallbackQueue>) -> (Self, Arc<FutureCell>) {
        let cell = FutureCell::new(queue);
        (DeliveryFuture { cell: cell.clone() }, cell)
    }

    /// Complete `this` from Rust, on the completing (sender) thread. The GIL
    /// is taken only when an asyncio task awaits the future; callbacks are
    /// moved into the owner's queue without it, so a Python thread busy
    /// holding the GIL can never stall the sender.
    ///
    /// Callbacks are queued *before* the outcome becomes visible, so a thread
    /// that sees `result()` return and then calls the producer's `poll` always
    /// finds them queued.
    pub fn resolve(
        this: Py<DeliveryFuture>,
        cell: &FutureCell,
        result: Result<RecordMetadata, Error>,
    ) {
        let this = Arc::new(this);
        let early = {
            let mut st = cell.state.lock().unwrap_or_else(|p| p.into_inner());
            if !matches!(st.outcome, Outcome::Pending) {
                return;
            }
            std::mem::take(&mut st.callbacks)
        };
        cell.queue_callbacks(&this, early);
        let outcome = match result {
            Ok(m) => Outcome::Done(m),
            Err(e) => Outcome::Failed(e),
        };
        // Let the producer go, before the outcome is visible: without the
        // GIL pyo3 defers the decref to the next thread that enters it, and
        // a `result()` waiter re-enters when it sees the outcome, so the
        // producer is gone by the time `result()` returns if nothing else
        // holds it. If this was its last reference, `PyProducer`'s Drop moves
        // the shutdown off the producer's own threads. Only this future's
        // record is done; the rest of a producer being dropped fail as closed.
        drop(
            cell.keepalive
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        let Some((late, aws)) = cell.complete(outcome) else {
            return;
        };
        // Callbacks added while the first ones were being queued.
        cell.queue_callbacks(&this, late);
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
        let finished = wait_detached(py, dur, move |slice| {
            let st = cell.state.lock().unwrap_or_else(|p| p.into_inner());
            if !matches!(st.outcome, Outcome::Pending) {
                return Some(());
            }
            let (st, _) = cell
                .done
                .wait_timeout(st, slice)
                .unwrap_or_else(|p| p.into_inner());
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
            Outcome::Done(m) => format!(
                "<DeliveryFuture done {}-{}@{}>",
                m.topic, m.partition, m.offset
            ),
            Outcome::Failed(e) => format!("<DeliveryFuture failed: {e}>"),
        }
    }
}

/// Run queued callbacks (from poll/flush). An exception in one is logged on
/// the `ferrokafka` logger and the others still run.
pub fn run_callbacks(py: Python<'_>, queue: &CallbackQueue) -> usize {
    let items: Vec<_> = std::mem::take(&mut *queue.lock().unwrap_or_else(|p| p.into_inner()));
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
    TEST_QUEUE.get_or_init(|| Arc::new(Mutex::new(Vec::new())))
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
    let (fut, cell) = DeliveryFuture::new(Some(test_queue().clone()));
    let obj = Py::new(py, fut)?;
    let handle = obj.clone_ref(py);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(delay_ms));
        let result = match error_code {
            None => Ok(RecordMetadata {
                topic: "t".into(),
                partition: 0,
                offset: 42,
                timestamp_ms: 1,
                serialized_key_size: -1,
                serialized_value_size: 1,
            }),
            Some(code) => Err(Error::broker(code, Some("test".into()))),
        };
        DeliveryFuture::resolve(handle, &cell, result);
        // `handle` is a Py<...>: dropping it without the GIL is deferred by pyo3.
    });
    Ok(obj)
}

/// Test hook: run callbacks queued by `_test_future` completions.
#[pyfunction]
pub fn _test_run_callbacks(py: Python<'_>) -> usize {
    run_callbacks(py, test_queue())
}
