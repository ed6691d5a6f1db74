//! How a record's outcome reaches Python: one `DeliveryFuture` per `send`,
//! or one slot per record of a `send_batch` call, completed on the sender
//! thread without the GIL.

use super::*;

/// Completes a Python `DeliveryFuture` from the sender thread, or one
/// record's slot of a `send_batch` call. Holds no Python object: the
/// future's cell and the record's share of the producer's keep-alive.
pub(crate) enum PyCompletion {
    One {
        cell: Arc<FutureCell>,
        keep: KeepToken,
    },
    Batch {
        batch: Arc<BatchState>,
        index: usize,
    },
}

impl Completion for PyCompletion {
    fn complete(self, result: Result<DeliveredRecord, Error>) {
        match self {
            PyCompletion::One { cell, keep } => {
                // Let the producer go before the outcome is visible: a
                // `result()` waiter re-enters Python when it sees the
                // outcome, which runs pyo3's deferred decrefs, so a
                // producer only this record held is gone by the time
                // `result()` returns.
                keep.release();
                DeliveryFuture::resolve(&cell, result)
            }
            PyCompletion::Batch { batch, index } => batch.complete(index, result),
        }
    }

    /// A `send_batch` call's records usually fill whole wire batches: each
    /// run of records of one call is stored under one lock of its slots and
    /// counted down once, instead of a lock and an atomic per record.
    fn complete_all(
        completions: Vec<Self>,
        result: &dyn Fn(usize) -> Result<DeliveredRecord, Error>,
    ) {
        let mut it = completions.into_iter().enumerate().peekable();
        while let Some((i, c)) = it.next() {
            let (batch, index) = match c {
                PyCompletion::Batch { batch, index } => (batch, index),
                one => {
                    one.complete(result(i));
                    continue;
                }
            };
            let mut run = vec![(index, result(i))];
            while let Some((j, PyCompletion::Batch { batch: next, .. })) = it.peek() {
                if !Arc::ptr_eq(next, &batch) {
                    break;
                }
                let j = *j;
                if let Some((_, PyCompletion::Batch { index, .. })) = it.next() {
                    run.push((index, result(j)));
                }
            }
            batch.complete_run(run);
        }
    }
}

/// The outcomes of one `send_batch` call: one slot per record and one
/// future (`done`) resolved when the last slot is filled, instead of a
/// Python future per record. Slots are filled on the sender thread without
/// the GIL; Python objects are made only when the caller asks for results.
pub struct BatchState {
    pub(super) slots: Mutex<Vec<Option<Result<DeliveredRecord, Error>>>>,
    pub(super) remaining: AtomicUsize,
    /// Taken by whoever fills the last slot.
    pub(super) done: Mutex<Option<(Arc<FutureCell>, KeepToken)>>,
}

impl BatchState {
    pub(crate) fn complete(&self, index: usize, result: Result<DeliveredRecord, Error>) {
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            match slots.get_mut(index) {
                // Complete once: a record may be expired and answered in the
                // same instant; the first outcome stands.
                Some(slot @ None) => *slot = Some(result),
                _ => return,
            }
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.resolve_done();
        }
    }

    /// `complete` for several records of this call at once.
    pub(crate) fn complete_run(&self, run: Vec<(usize, Result<DeliveredRecord, Error>)>) {
        let mut stored = 0;
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            for (index, result) in run {
                if let Some(slot @ None) = slots.get_mut(index) {
                    *slot = Some(result);
                    stored += 1;
                }
            }
        }
        if stored > 0 && self.remaining.fetch_sub(stored, Ordering::AcqRel) == stored {
            self.resolve_done();
        }
    }

    pub(crate) fn resolve_done(&self) {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((cell, keep)) = done {
            // As `PyCompletion::One`: the producer first, then the outcome.
            keep.release();
            // The batch future's own value is a placeholder; results come
            // from the slots (`_BatchResult.outcomes`).
            let d = DeliveredRecord {
                topic: Arc::from(""),
                partition: -1,
                offset: -1,
                timestamp_ms: -1,
                key_size: -1,
                value_size: -1,
            };
            DeliveryFuture::resolve(&cell, Ok(d));
        }
    }
}

/// Per-record outcomes of a `send_batch` call (python/ferrokafka/producer.py
/// `BatchFuture` reads them once its `done` future has resolved).
#[pyclass(module = "ferrokafka._core", name = "_BatchResult", frozen)]
pub struct PyBatchResult {
    pub(super) state: Arc<BatchState>,
}

#[pymethods]
impl PyBatchResult {
    /// One entry per record, in input order: RecordMetadata, the KafkaError
    /// instance it failed with, or None while still pending.
    pub(crate) fn outcomes(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let slots = self
            .state
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        slots
            .into_iter()
            .map(|s| match s {
                None => Ok(py.None()),
                Some(Ok(d)) => Ok(Py::new(py, RecordMetadata::from(&d))?.into_any()),
                Some(Err(e)) => {
                    let err: PyErr = FkError(e).into();
                    Ok(err.into_value(py).into_any())
                }
            })
            .collect()
    }

    /// (index, error) of the first failed record, None when none failed:
    /// a check of a big batch without an object per record (Spark sink).
    pub(crate) fn first_error(&self, py: Python<'_>) -> Option<(usize, Py<PyAny>)> {
        let slots = self.state.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.iter().enumerate().find_map(|(i, s)| match s {
            Some(Err(e)) => {
                let err: PyErr = FkError(e.clone()).into();
                Some((i, err.into_value(py).into_any()))
            }
            _ => None,
        })
    }

    pub(crate) fn __len__(&self) -> usize {
        self.state
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}
