//! How a record's outcome reaches Python: one `DeliveryFuture` per `send`,
//! or one slot per record of a `send_batch` call, completed on the sender
//! thread without the GIL.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;

use super::batch_ref::BatchRef;
use super::*;
use crate::future::{pack_sizes, unpack_sizes};

/// Completes a Python `DeliveryFuture` from the sender thread, or one
/// record's slot of a `send_batch` call. Holds no Python object: the
/// future's cell and the record's share of the producer's keep-alive.
pub(crate) enum PyCompletion {
    One {
        cell: Arc<FutureCell>,
        keep: KeepToken,
    },
    /// A record of a `send_batch` call (`batch_ref.rs`: no reference count
    /// per record).
    Batch(BatchRef),
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
    #[inline(always)]
    fn stamped(self, timestamp_ms: i64, key_size: i32, value_size: i32) -> Self {
        match self {
            PyCompletion::One { cell, keep } => {
                cell.stamp(timestamp_ms, key_size, value_size);
                PyCompletion::One { cell, keep }
            }
            PyCompletion::Batch(r) => {
                PyCompletion::Batch(r.stamped(timestamp_ms, key_size, value_size))
            }
        }
    }

    fn meta(&self) -> (i64, i32, i32) {
        match self {
            PyCompletion::One { cell, .. } => cell.meta(),
            PyCompletion::Batch(r) => r.meta(),
        }
    }

    fn complete(self, result: Result<DeliveredRecord, Error>) {
        match self {
            PyCompletion::One { cell, keep } => complete_one(&cell, keep, result),
            PyCompletion::Batch(r) => r.complete(result),
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
    fn complete_all(handles: Vec<RecordHandle<Self>>, finished: &Finished<'_>) {
        let mut unclaimed = Vec::new();
        let mut it = handles.into_iter();
        // The offset delta (position in the wire batch) of the handle `it`
        // yields next.
        let mut i = 0;
        while let Some(h) = it.next() {
            let first = match h.completion {
                PyCompletion::Batch(r) => r,
                PyCompletion::One { cell, keep } => {
                    complete_one(&cell, keep, finished.record(i, cell.meta()));
                    if FutureCell::unclaimed(&cell) {
                        unclaimed.push(cell);
                    }
                    i += 1;
                    continue;
                }
            };
            // The run: this record and the call's records right after it.
            // Their handles are read in place (call, index, sizes): moved
            // out one by one, each went through the stack and its fields
            // were read back from there, this thread's main stall (perf
            // annotate). Their timestamp is the call's (`BatchState`).
            let n = 1 + it
                .as_slice()
                .iter()
                .take_while(
                    |h| matches!(&h.completion, PyCompletion::Batch(r) if r.same_call(&first)),
                )
                .count();
            let mut indices = Indices::one(first.index() as u32);
            // Sized once: the runs live as long as the call's future.
            let mut sizes = Vec::with_capacity(n);
            sizes.push(first.sizes());
            for h in &it.as_slice()[..n - 1] {
                if let PyCompletion::Batch(r) = &h.completion {
                    indices.push(r.index() as u32);
                    sizes.push(r.sizes());
                }
            }
            // Their outcome is now the run's: each gives up its own share
            // (its drop would fail the record).
            for h in it.by_ref().take(n - 1) {
                if let PyCompletion::Batch(r) = h.completion {
                    r.absorb();
                }
            }
            let outcome = match finished.result {
                Ok((base, append_time)) => {
                    Ok((if *base >= 0 { base + i as i64 } else { -1 }, *append_time))
                }
                Err(e) => Err(e.clone()),
            };
            i += n;
            first.store(Run {
                indices,
                topic: finished.tp.topic.clone(),
                partition: finished.tp.partition,
                outcome,
                sizes,
            });
        }
        FutureCell::bury(unclaimed);
    }
}

/// Which records of the call a run holds, in run order: consecutive call
/// indices (the usual case: a call's records fill wire batches in order)
/// are kept as a range, without a list entry per record.
pub(crate) enum Indices {
    /// `start..end` (a single record is `i..i + 1`).
    Range(u32, u32),
    List(Vec<u32>),
}

impl Indices {
    pub(crate) fn one(i: u32) -> Self {
        Indices::Range(i, i + 1)
    }

    fn push(&mut self, i: u32) {
        match self {
            Indices::Range(_, b) if i == *b => *b += 1,
            Indices::Range(a, b) => {
                let mut v: Vec<u32> = (*a..*b).collect();
                v.push(i);
                *self = Indices::List(v);
            }
            Indices::List(v) => v.push(i),
        }
    }

    fn len(&self) -> usize {
        match self {
            Indices::Range(a, b) => (b - a) as usize,
            Indices::List(v) => v.len(),
        }
    }

    /// The call index of the run's k-th record.
    fn get(&self, k: usize) -> usize {
        match self {
            Indices::Range(a, _) => *a as usize + k,
            Indices::List(v) => v[k] as usize,
        }
    }

    fn max(&self) -> Option<usize> {
        match self {
            Indices::Range(a, b) => (b > a).then(|| *b as usize - 1),
            Indices::List(v) => v.iter().max().map(|&i| i as usize),
        }
    }

    fn min(&self) -> Option<usize> {
        match self {
            Indices::Range(a, b) => (b > a).then_some(*a as usize),
            Indices::List(v) => v.iter().min().map(|&i| i as usize),
        }
    }
}

/// The outcome of records of one `send_batch` call that follow each other
/// in one wire batch: the k-th of them is record `indices.get(k)` of the call.
pub(crate) struct Run {
    indices: Indices,
    topic: Arc<str>,
    partition: i32,
    /// Ok((offset of the run's first record or -1, the timestamp every
    /// record of the run reports, the log append time, or -1: each its
    /// own create timestamp, kept in the call's `BatchState`)).
    outcome: Result<(i64, i64), Error>,
    /// Per record: its key and value sizes (`pack_sizes`).
    sizes: Vec<u64>,
}

impl Run {
    /// One record's outcome as a run of its own.
    pub(crate) fn single(indices: Indices, result: Result<DeliveredRecord, Error>) -> Run {
        match result {
            // Its timestamp is the one the record reports (create or log
            // append time).
            Ok(d) => Run {
                indices,
                topic: d.topic,
                partition: d.partition,
                outcome: Ok((d.offset, d.timestamp_ms)),
                sizes: vec![pack_sizes(d.key_size, d.value_size)],
            },
            Err(e) => Run {
                indices,
                topic: Arc::from(""),
                partition: -1,
                outcome: Err(e),
                sizes: vec![pack_sizes(-1, -1)],
            },
        }
    }

    /// The run's k-th record's outcome; `timestamp_ms` its create
    /// timestamp (`BatchState::timestamp`).
    fn record(&self, k: usize, timestamp_ms: i64) -> Result<DeliveredRecord, Error> {
        let (key_size, value_size) = self.sizes.get(k).map_or((-1, -1), |s| unpack_sizes(*s));
        let meta = (timestamp_ms, key_size, value_size);
        DeliveredRecord::nth(&self.topic, self.partition, &self.outcome, k, meta)
    }
}

/// The shared state of one `send_batch` call: the runs completed so far, a
/// countdown, and the call's future, resolved when the last record is done.
pub struct BatchState {
    pub(super) len: usize,
    pub(super) runs: Mutex<Vec<Run>>,
    pub(super) remaining: AtomicUsize,
    pub(super) done: Mutex<Option<(Arc<FutureCell>, KeepToken)>>,
    /// The records' create timestamp, stamped as each record's handle is
    /// made (`Completion::stamped`), on the calling thread (or the deferral
    /// thread, `block=False`); their key and value sizes go in their
    /// handles. Relaxed: a record's is read only after its completion,
    /// which the producer's lock and the runs' lock order after its stamp.
    ///
    /// One timestamp for the call (`i64::MIN` until stamped): a call's
    /// records are stamped with its one clock read.
    ts: AtomicI64,
    /// Records stamped with another timestamp (appended later by the
    /// deferral thread).
    other_ts: Mutex<HashMap<u32, i64>>,
}

impl BatchState {
    pub(crate) fn new(len: usize, done: (Arc<FutureCell>, KeepToken)) -> Self {
        BatchState {
            len,
            runs: Mutex::new(Vec::new()),
            remaining: AtomicUsize::new(len),
            done: Mutex::new(Some(done)),
            ts: AtomicI64::new(i64::MIN),
            other_ts: Mutex::new(HashMap::new()),
        }
    }

    /// Keep record `index`'s create timestamp.
    #[inline(always)]
    pub(super) fn stamp(&self, index: u32, timestamp_ms: i64) {
        // Per record on the calling thread: the usual case (the call's
        // one timestamp, already kept) is a load and a compare, inlined.
        if self.ts.load(Ordering::Relaxed) != timestamp_ms {
            self.stamp_first_or_other(index, timestamp_ms);
        }
    }

    #[cold]
    #[inline(never)]
    fn stamp_first_or_other(&self, index: u32, timestamp_ms: i64) {
        if self
            .ts
            .compare_exchange(i64::MIN, timestamp_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        self.other_ts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(index, timestamp_ms);
    }

    /// Record `index`'s create timestamp (-1 if never stamped).
    pub(super) fn timestamp(&self, index: usize) -> i64 {
        let other = self.other_ts.lock().unwrap_or_else(|p| p.into_inner());
        self.timestamp_with(other.get(&(index as u32)).copied())
    }

    fn timestamp_with(&self, other_ts: Option<i64>) -> i64 {
        other_ts.unwrap_or_else(|| match self.ts.load(Ordering::Relaxed) {
            i64::MIN => -1,
            ts => ts,
        })
    }

    /// Each record completes exactly once (its completion is consumed), so
    /// the countdown reaches zero exactly when every record has a result.
    /// True when this was the last (`batch_ref.rs` then lets the state go).
    pub(super) fn store(&self, run: Run) -> bool {
        let n = run.indices.len();
        if n == 0 || run.indices.max().is_some_and(|i| i >= self.len) {
            return false;
        }
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(run);
        self.count_down(n)
    }

    /// Count `n` records done; true when that was the last of them.
    pub(super) fn count_down(&self, n: usize) -> bool {
        let last = self.remaining.fetch_sub(n, Ordering::AcqRel) == n;
        if last {
            self.resolve_done();
        }
        last
    }

    /// Per record, in input order: its outcome, `None` while pending.
    fn outcomes(&self) -> Vec<Option<Result<DeliveredRecord, Error>>> {
        let mut out = vec![None; self.len];
        let other = self.other_ts.lock().unwrap_or_else(|p| p.into_inner());
        for run in self.runs.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            for k in 0..run.indices.len() {
                let i = run.indices.get(k);
                let ts = self.timestamp_with(other.get(&(i as u32)).copied());
                out[i] = Some(run.record(k, ts));
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
                let first = r.indices.min()?;
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

#[cfg(test)]
mod tests {
    use super::{BatchState, Indices};
    use crate::future::{FutureCell, KeepToken};

    #[test]
    fn a_calls_records_keep_its_timestamp_and_a_later_one_their_own() {
        let state = BatchState::new(4, (FutureCell::new(None), KeepToken::none()));
        assert_eq!(state.timestamp(0), -1, "never stamped");
        state.stamp(0, 100);
        state.stamp(1, 100);
        // Appended later (the deferral thread), then stamped again later.
        state.stamp(2, 150);
        state.stamp(3, 150);
        state.stamp(3, 170);
        assert_eq!(
            (0..4).map(|i| state.timestamp(i)).collect::<Vec<_>>(),
            vec![100, 100, 150, 170]
        );
    }

    fn all(ix: &Indices) -> Vec<usize> {
        (0..ix.len()).map(|k| ix.get(k)).collect()
    }

    #[test]
    fn indices_stay_a_range_while_consecutive_and_keep_order_after() {
        let mut ix = Indices::one(4);
        ix.push(5);
        ix.push(6);
        assert!(matches!(ix, Indices::Range(4, 7)));
        assert_eq!(all(&ix), vec![4, 5, 6]);
        // A gap (keyed records of a call spread over partitions) turns it
        // into a list, in run order.
        ix.push(9);
        ix.push(2);
        assert!(matches!(ix, Indices::List(_)));
        assert_eq!(all(&ix), vec![4, 5, 6, 9, 2]);
        assert_eq!((ix.min(), ix.max()), (Some(2), Some(9)));
        let mut one = Indices::one(3);
        one.push(1);
        assert_eq!(all(&one), vec![3, 1]);
        assert_eq!(
            (Indices::one(7).min(), Indices::one(7).max()),
            (Some(7), Some(7))
        );
    }
}
