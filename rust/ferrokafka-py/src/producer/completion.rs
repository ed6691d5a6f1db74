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

/// Complete one `send` future: the `One` arm of both completion paths.
fn complete_one(cell: &FutureCell, keep: KeepToken, result: Result<DeliveredRecord, Error>) {
    // Let the producer go before the outcome is visible: a `result()`
    // waiter re-enters Python when it sees the outcome, which runs pyo3's
    // deferred decrefs, so a producer only this record held is gone by the
    // time `result()` returns.
    keep.release();
    DeliveryFuture::resolve(cell, result)
}

impl Completion for PyCompletion {
    fn complete(self, result: Result<DeliveredRecord, Error>) {
        match self {
            PyCompletion::One { cell, keep } => complete_one(&cell, keep, result),
            PyCompletion::Batch { batch, index } => batch.complete(index, result),
        }
    }

    /// A `send_batch` call's records usually fill whole wire batches: the
    /// records of one call that follow each other in a wire batch (all of
    /// it, typically; keyed records of a call spread over partitions are
    /// not consecutive in the call but are in each batch) are stored as one
    /// entry under one lock and counted down once, instead of a
    /// record-sized result, a lock and an atomic per record.
    ///
    /// A `send` future already dropped by its caller leaves its cell to us:
    /// those go back to the producer's thread in one push, to be freed
    /// there (`FutureOwner`, future.rs, says why).
    fn complete_all(completions: Vec<Self>, finished: &Finished<'_>) {
        let mut unclaimed = Vec::new();
        let mut it = completions.into_iter().enumerate().peekable();
        while let Some((i, c)) = it.next() {
            let (batch, first) = match c {
                PyCompletion::Batch { batch, index } => (batch, index),
                PyCompletion::One { cell, keep } => {
                    complete_one(&cell, keep, finished.record(i));
                    if FutureCell::unclaimed(&cell) {
                        unclaimed.push(cell);
                    }
                    continue;
                }
            };
            let mut indices = vec![first as u32];
            while let Some((_, PyCompletion::Batch { batch: next, .. })) = it.peek() {
                if !Arc::ptr_eq(next, &batch) {
                    break;
                }
                if let Some((_, PyCompletion::Batch { index, .. })) = it.next() {
                    indices.push(index as u32);
                }
            }
            let outcome = match finished.result {
                Ok((base, append_time)) => {
                    Ok((if *base >= 0 { base + i as i64 } else { -1 }, *append_time))
                }
                Err(e) => Err(e.clone()),
            };
            let records = finished.records[i..i + indices.len()].to_vec();
            batch.store(Run {
                indices,
                topic: finished.tp.topic.clone(),
                partition: finished.tp.partition,
                outcome,
                records,
            });
        }
        FutureCell::bury(unclaimed);
    }
}

/// The outcome of records of one `send_batch` call that follow each other
/// in one wire batch: the k-th of them is record `indices[k]` of the call.
pub(crate) struct Run {
    indices: Vec<u32>,
    topic: Arc<str>,
    partition: i32,
    /// Ok((offset of the run's first record or -1, log append time or -1)).
    outcome: Result<(i64, i64), Error>,
    /// Per record: (create timestamp, key size, value size).
    records: Vec<(i64, i32, i32)>,
}

impl Run {
    fn record(&self, k: usize) -> Result<DeliveredRecord, Error> {
        DeliveredRecord::nth(
            &self.topic,
            self.partition,
            &self.outcome,
            k,
            self.records[k],
        )
    }
}

/// The shared state of one `send_batch` call: the runs completed so far, a
/// countdown, and the call's future, resolved when the last record is done.
pub struct BatchState {
    pub(super) len: usize,
    pub(super) runs: Mutex<Vec<Run>>,
    pub(super) remaining: AtomicUsize,
    pub(super) done: Mutex<Option<(Arc<FutureCell>, KeepToken)>>,
}

impl BatchState {
    pub(crate) fn new(len: usize, done: (Arc<FutureCell>, KeepToken)) -> Self {
        BatchState {
            len,
            runs: Mutex::new(Vec::new()),
            remaining: AtomicUsize::new(len),
            done: Mutex::new(Some(done)),
        }
    }

    /// One record, completed on its own (a record that failed before it
    /// was appended, or the single-record path).
    pub(crate) fn complete(&self, index: usize, result: Result<DeliveredRecord, Error>) {
        let run = match result {
            Ok(d) => Run {
                indices: vec![index as u32],
                topic: d.topic,
                partition: d.partition,
                outcome: Ok((d.offset, -1)),
                records: vec![(d.timestamp_ms, d.key_size, d.value_size)],
            },
            Err(e) => Run {
                indices: vec![index as u32],
                topic: Arc::from(""),
                partition: -1,
                outcome: Err(e),
                records: vec![(-1, -1, -1)],
            },
        };
        self.store(run);
    }

    /// Each record completes exactly once (its completion is consumed), so
    /// the countdown reaches zero exactly when every record has a result.
    fn store(&self, run: Run) {
        let n = run.indices.len();
        if n == 0 || run.indices.iter().any(|&i| i as usize >= self.len) {
            return;
        }
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(run);
        if self.remaining.fetch_sub(n, Ordering::AcqRel) == n {
            self.resolve_done();
        }
    }

    /// Per record, in input order: its outcome, `None` while pending.
    fn outcomes(&self) -> Vec<Option<Result<DeliveredRecord, Error>>> {
        let mut out = vec![None; self.len];
        for run in self.runs.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            for (k, &i) in run.indices.iter().enumerate() {
                out[i as usize] = Some(run.record(k));
            }
        }
        out
    }

    pub(crate) fn resolve_done(&self) {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((cell, keep)) = done {
            keep.release();
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

#[pyclass(module = "ferrokafka._core", name = "_BatchResult", frozen)]
pub struct PyBatchResult {
    pub(super) state: Arc<BatchState>,
}

#[pymethods]
impl PyBatchResult {
    /// One entry per record, in input order: RecordMetadata, the KafkaError
    /// instance it failed with, or None while still pending.
    pub(crate) fn outcomes(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.state
            .outcomes()
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

    pub(crate) fn first_error(&self, py: Python<'_>) -> Option<(usize, Py<PyAny>)> {
        let runs = self.state.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.iter()
            .filter_map(|r| {
                let first = *r.indices.iter().min()? as usize;
                r.outcome.as_ref().err().map(|e| (first, e))
            })
            .min_by_key(|(first, _)| *first)
            .map(|(first, e)| {
                let err: PyErr = FkError(e.clone()).into();
                (first, err.into_value(py).into_any())
            })
    }

    pub(crate) fn __len__(&self) -> usize {
        self.state.len
    }
}
