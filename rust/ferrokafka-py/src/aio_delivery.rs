//! `ferrokafka.aio`'s `Delivery`: the future `AIOProducer.send_nowait`
//! returns, with asyncio's future protocol, over a record's `FutureCell`.
//!
//! Why in Rust: in a per-record `send_nowait` flood the event loop's thread
//! is the bottleneck, and the Python class this replaces cost a Python
//! `__init__`, a `DeliveryFuture` object beside it, and a generator per
//! `await` (about a fifth of the loop's time per record under py-spy).
//! Here one object is made per record, by `_Producer.send_nowait`, and
//! awaiting a record that is already delivered (the common case in a flood:
//! records are awaited well after they went out) runs no Python code and
//! no loop machinery: `__await__` returns the object itself as the
//! iterator, whose first `__next__` ends with the record's metadata.
//!
//! Everything that has to wait on the loop goes through a real
//! `asyncio.Future`, made on first need by the owner's `_track` (the
//! producer's completion path, `ferrokafka/aio/_producer.py`): an `await`
//! of a pending record, a done callback, `cancel`, and any other asyncio
//! future attribute (`__getattr__`). `asyncio.isfuture()` is true (the
//! class attribute `_asyncio_future_blocking`), so `await`, `gather`,
//! `wait`, `wait_for`, `shield` and `as_completed` take it; it is not an
//! instance of `asyncio.Future`.
//!
//! A failed record whose `Delivery` is dropped unread is reported to the
//! loop's exception handler (`FutureCell::report_if_unread`), as an
//! `asyncio.Future` whose exception nobody retrieved; once a real future is
//! made, that future reports for itself.

use std::sync::Arc;

use pyo3::exceptions::{PyAttributeError, PyRuntimeError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

use crate::future::{DeliveryFuture, FutureCell};

/// What Python has done with the outcome so far.
enum Seen {
    /// Nobody read it: a failure is reported when the object goes.
    Unread,
    /// Read (awaited, `result()`, `exception()`).
    Read,
    /// A real `asyncio.Future` stands for the record from now on.
    Tracked(Py<PyAny>),
}

#[pyclass(module = "ferrokafka._core", name = "Delivery", weakref)]
pub struct Delivery {
    cell: Arc<FutureCell>,
    /// The `AIOProducer`: its loop (`_waker`) and `_track`.
    owner: Option<Py<PyAny>>,
    seen: Seen,
    /// The metadata `__await__` found, handed out by the next `__next__`.
    ready: Option<Py<PyAny>>,
}

impl Delivery {
    pub(crate) fn new(cell: Arc<FutureCell>, owner: Py<PyAny>) -> Self {
        Delivery {
            cell,
            owner: Some(owner),
            seen: Seen::Unread,
            ready: None,
        }
    }

    fn owner<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.owner
            .as_ref()
            .map(|o| o.bind(py).clone())
            .ok_or_else(|| PyRuntimeError::new_err("Delivery was cleared"))
    }

    /// The real asyncio future, made and tracked on first need.
    fn future<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if let Seen::Tracked(af) = &self.seen {
            return Ok(af.bind(py).clone());
        }
        let owner = self.owner(py)?;
        let dfut = Py::new(py, DeliveryFuture::from_cell(self.cell.clone()))?;
        let af = owner.call_method1("_track", (owner.getattr("_waker")?, dfut))?;
        // The asyncio future reports an unread failure from now on.
        self.cell.mark_retrieved();
        self.seen = Seen::Tracked(af.clone().unbind());
        Ok(af)
    }

    fn tracked<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        match &self.seen {
            Seen::Tracked(af) => Some(af.bind(py).clone()),
            _ => None,
        }
    }

    fn invalid_state(py: Python<'_>, msg: &str) -> PyErr {
        match py
            .import("asyncio")
            .and_then(|m| m.getattr("InvalidStateError"))
            .and_then(|t| t.call1((msg,)))
        {
            Ok(e) => PyErr::from_value(e),
            Err(e) => e,
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if matches!(self.seen, Seen::Unread) {
            self.cell.report_if_unread();
        }
    }
}

#[pymethods]
impl Delivery {
    /// asyncio.isfuture() looks for this class attribute; a task only ever
    /// sets it on the real future it awaits (`__await__` hands that over).
    #[classattr]
    #[allow(non_upper_case_globals)]
    const _asyncio_future_blocking: bool = false;

    /// `Delivery(owner, dfut)`: over a core `DeliveryFuture` (the
    /// partitioner and worker paths of `AIOProducer`).
    #[new]
    fn py_new(owner: Py<PyAny>, dfut: PyRef<'_, DeliveryFuture>) -> Self {
        Delivery::new(dfut.cell().clone(), owner)
    }

    fn __await__(mut slf: PyRefMut<'_, Self>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        if let Some(af) = slf.tracked(py) {
            return Ok(af.call_method0("__await__")?.unbind());
        }
        slf.seen = Seen::Read;
        match slf.cell.outcome_to_py(py) {
            Some(Ok(md)) => {
                // Delivered: this object is the iterator; its first
                // `__next__` returns the metadata (no loop machinery).
                slf.ready = Some(md);
                Ok(slf.into_pyobject(py)?.into_any().unbind())
            }
            Some(Err(e)) => Err(e),
            None => Ok(slf.future(py)?.call_method0("__await__")?.unbind()),
        }
    }

    /// As `asyncio.Future`: iterating is awaiting.
    fn __iter__(slf: PyRefMut<'_, Self>) -> PyResult<Py<PyAny>> {
        Self::__await__(slf)
    }

    fn __next__(&mut self) -> PyResult<Py<PyAny>> {
        match self.ready.take() {
            // StopIteration carrying the value: how an awaitable's iterator
            // returns its result.
            Some(md) => Err(PyStopIteration::new_err(md)),
            None => Err(PyRuntimeError::new_err(
                "Delivery iterated outside of await",
            )),
        }
    }

    fn done(&self, py: Python<'_>) -> PyResult<bool> {
        match self.tracked(py) {
            Some(af) => af.call_method0("done")?.extract(),
            None => Ok(!self.cell.is_pending()),
        }
    }

    fn cancelled(&self, py: Python<'_>) -> PyResult<bool> {
        match self.tracked(py) {
            Some(af) => af.call_method0("cancelled")?.extract(),
            None => Ok(false),
        }
    }

    fn result(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(af) = self.tracked(py) {
            return Ok(af.call_method0("result")?.unbind());
        }
        match self.cell.outcome_to_py(py) {
            None => Err(Self::invalid_state(py, "Result is not set.")),
            Some(r) => {
                self.seen = Seen::Read;
                r
            }
        }
    }

    fn exception(&mut self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        if let Some(af) = self.tracked(py) {
            let e = af.call_method0("exception")?;
            return Ok((!e.is_none()).then(|| e.unbind()));
        }
        match self.cell.outcome_to_py(py) {
            None => Err(Self::invalid_state(py, "Exception is not set.")),
            Some(r) => {
                self.seen = Seen::Read;
                Ok(r.err().map(|e| e.into_value(py).into_any()))
            }
        }
    }

    /// Callbacks get this object (as asyncio passes the future they were
    /// added to), through `_Relay` of `ferrokafka/aio/_delivery.py`.
    #[pyo3(signature = (func, *, context=None))]
    fn add_done_callback(
        mut slf: PyRefMut<'_, Self>,
        func: Py<PyAny>,
        context: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let py = slf.py();
        let af = slf.future(py)?;
        let me = slf.into_pyobject(py)?;
        let relay = py
            .import("ferrokafka.aio._delivery")?
            .getattr("_Relay")?
            .call1((func, me))?;
        let kw = pyo3::types::PyDict::new(py);
        kw.set_item("context", context)?;
        af.call_method("add_done_callback", (relay,), Some(&kw))?;
        Ok(())
    }

    fn remove_done_callback(&self, py: Python<'_>, func: Py<PyAny>) -> PyResult<usize> {
        match self.tracked(py) {
            Some(af) => af.call_method1("remove_done_callback", (func,))?.extract(),
            None => Ok(0),
        }
    }

    /// Drops the outcome, not the record: it is delivered or fails anyway
    /// (docs/asyncio.md). A record already done cannot be cancelled, as an
    /// `asyncio.Future` that is done.
    #[pyo3(signature = (msg=None))]
    fn cancel(&mut self, py: Python<'_>, msg: Option<Py<PyAny>>) -> PyResult<bool> {
        if self.tracked(py).is_none() && !self.cell.is_pending() {
            return Ok(false);
        }
        self.future(py)?.call_method1("cancel", (msg,))?.extract()
    }

    fn get_loop(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(self.owner(py)?.getattr("_waker")?.getattr("loop")?.unbind())
    }

    /// asyncio's helpers read a few private attributes of a cancelled child
    /// (gather: `_make_cancelled_error`, `_cancel_message`): those of the
    /// real future, which a cancelled delivery always has.
    fn __getattr__(&mut self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        if name.starts_with("__") {
            return Err(PyAttributeError::new_err(name.to_string()));
        }
        Ok(self.future(py)?.getattr(name)?.unbind())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        if let Some(af) = self.tracked(py) {
            return Ok(format!("<Delivery {}>", af.repr()?));
        }
        // A peek: a repr does not count as reading the outcome.
        Ok(match self.cell.peek_to_py(py) {
            None => "<Delivery pending>".to_string(),
            Some(Ok(md)) => format!("<Delivery result={}>", md.bind(py).repr()?),
            Some(Err(e)) => format!("<Delivery exception={}>", e.value(py).repr()?),
        })
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some(o) = &self.owner {
            visit.call(o)?;
        }
        if let Seen::Tracked(af) = &self.seen {
            visit.call(af)?;
        }
        if let Some(r) = &self.ready {
            visit.call(r)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.owner = None;
        self.ready = None;
        if matches!(self.seen, Seen::Tracked(_)) {
            self.seen = Seen::Read;
        }
    }
}
