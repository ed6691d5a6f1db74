//! How a record's outcome reaches Python: one `DeliveryFuture` per `send`,
//! or one slot per record of a `send_batch` call, completed on the sender
//! thread without the GIL.

use std::collections::HashMap;
use std::sync::atomic::AtomicI64;

use super::batch_ref::BatchRef;
use super::*;
use crate::future::{pack_sizes, unpack_sizes};
use ferrokafka_net::producer::handles::RecordHandles;

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

impl RecordHandles for PyCompletion {
    #[inline(always)]
    fn records(&self) -> usize {
        match self {
            PyCompletion::One { .. } => 1,
            PyCompletion::Batch(r) => r.count(),
        }
    }

    /// A `send_batch` record right after the records of the same call this
    /// completion stands for joins them (`BatchRef::absorb_next`): per
    /// record then, the batch keeps no completion of its own.
    #[inline(always)]
    fn absorb(&mut self, next: Self) -> Result<(), Self> {
        match (self, next) {
            (PyCompletion::Batch(a), PyCompletion::Batch(b)) => {
                a.absorb_next(b).map_err(PyCompletion::Batch)
            }
            (_, next) => Err(next),
        }
    }

    fn split_off(&mut self, k: usize) -> Self {
        match self {
            PyCompletion::Batch(r) => PyCompletion::Batch(r.split_off(k)),
            PyCompletion::One { .. } => unreachable!("split_off({k}) of a send() completion"),
        }
    }
}

impl Completion for PyCompletion {
    #[inline(always)]
    fn stamped(self, timestamp_ms: i64, key_size: i32, value_size: i32) -> Self {
        match self {
            PyCompletion::One { cell, keep } => {
                cell.stamp(timestamp_ms, key_size, value_size);
                PyCompletion::One { cell, keep }
            }
            // Its sizes are the call's, taken from its input.
            PyCompletion::Batch(r) => PyCompletion::Batch(r.stamped(timestamp_ms)),
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
        let mut it = handles.into_iter().peekable();
        // The offset delta (position in the wire batch) of the first record
        // of the handle `it` yields next.
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
            // The run: this handle's records and those of the call's
            // handles right after it (records of a keyed call spread over
            // partitions: consecutive in the batch, not in the call). Each
            // handle stands for its records already (`absorb`), so this is
            // per handle, not per record.
            let mut indices = Indices::range(first.index() as u32, first.count() as u32);
            let mut n = first.count();
            while let Some(PyCompletion::Batch(r)) = it.peek().map(|h| &h.completion) {
                if !r.same_call(&first) {
                    break;
                }
                indices.push_range(r.index() as u32, r.count() as u32);
                n += r.count();
                if let Some(RecordHandle {
                    completion: PyCompletion::Batch(r),
                }) = it.next()
                {
                    // Its outcome is now the run's: it gives up its own
                    // share (its drop would fail its records).
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
    /// `start..start + count`.
    pub(crate) fn range(start: u32, count: u32) -> Self {
        Indices::Range(start, start + count)
    }

    /// Append call indices `start..start + count`.
    fn push_range(&mut self, start: u32, count: u32) {
        match self {
            Indices::Range(_, b) if start == *b => *b += count,
            Indices::Range(a, b) => {
                let mut v: Vec<u32> = (*a..*b).collect();
                v.extend(start..start + count);
                *self = Indices::List(v);
            }
            Indices::List(v) => v.extend(start..start + count),
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
}

impl Run {
    /// One record's outcome as a run of its own.
    pub(crate) fn single(indices: Indices, result: Result<DeliveredRecord, Error>) -> Run {
        match result {
            // Its timestamp is the one the record reports (create or log
            // append time).
            // (Its sizes are the call's, `BatchState::sizes`.)
            Ok(d) => Run {
                indices,
                topic: d.topic,
                partition: d.partition,
                outcome: Ok((d.offset, d.timestamp_ms)),
            },
            Err(e) => Run {
                indices,
                topic: Arc::from(""),
                partition: -1,
                outcome: Err(e),
            },
        }
    }

    /// The run's k-th record's outcome; `meta` its (create timestamp, key
    /// size, value size) from the call's `BatchState`.
    fn record(&self, k: usize, meta: (i64, i32, i32)) -> Result<DeliveredRecord, Error> {
        DeliveredRecord::nth(&self.topic, self.partition, &self.outcome, k, meta)
    }
}

/// A `send_batch` column (a list's `ByteList`, an Arrow `BinaryColumn`):
/// the size of its item `i`, -1 for None.
pub(crate) trait ItemSizes {
    fn size_of(&self, i: usize) -> i32;
}

/// The key and value sizes (`pack_sizes`) of a call's `n` records, read
/// off its columns' lengths: `BatchState::new`'s `sizes`. Read from the
/// columns, not through the call's per-record accessor, this pass is a
/// few instructions a record (callgrind of the calling thread, issue 17).
pub(crate) fn call_sizes<C: ItemSizes>(n: usize, keys: Option<&C>, values: &C) -> Box<[u64]> {
    match keys {
        None => (0..n).map(|i| pack_sizes(-1, values.size_of(i))).collect(),
        Some(k) => (0..n)
            .map(|i| pack_sizes(k.size_of(i), values.size_of(i)))
            .collect(),
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
    /// thread, `block=False`). Relaxed: a record's is read only after its
    /// completion, which the producer's lock and the runs' lock order after
    /// its stamp.
    ///
    /// One timestamp for the call (`i64::MIN` until stamped): a call's
    /// records are stamped with its one clock read.
    ts: AtomicI64,
    /// Records stamped with another timestamp (appended later by the
    /// deferral thread).
    other_ts: Mutex<HashMap<u32, i64>>,
    /// Per record, in call order: its key and value sizes (`pack_sizes`),
    /// taken from the call's input before any record is appended
    /// (`call_sizes`) and never changed. Here, not in the record's handle,
    /// so that the handles of consecutive records can be one
    /// (`BatchRef::absorb_next`); taken in one pass over the input, not
    /// written per record as it is appended, where it was a store per
    /// record in the append loop (issue 17).
    sizes: Box<[u64]>,
}

impl BatchState {
    /// `sizes`: one per record of the call (`call_sizes`).
    pub(crate) fn new(done: (Arc<FutureCell>, KeepToken), sizes: Box<[u64]>) -> Self {
        let len = sizes.len();
        BatchState {
            len,
            runs: Mutex::new(Vec::new()),
            remaining: AtomicUsize::new(len),
            done: Mutex::new(Some(done)),
            ts: AtomicI64::new(i64::MIN),
            other_ts: Mutex::new(HashMap::new()),
            sizes,
        }
    }

    /// Record `index`'s key and value sizes (-1 for none).
    pub(super) fn sizes_of(&self, index: usize) -> (i32, i32) {
        self.sizes.get(index).map_or((-1, -1), |&s| unpack_sizes(s))
    }

    /// Keep the create timestamp of records `index..index + count`.
    #[inline(always)]
    pub(super) fn stamp(&self, index: u32, count: u32, timestamp_ms: i64) {
        // Per record (or run) on the calling thread: the usual case (the
        // call's one timestamp, already kept) is a load and a compare,
        // inlined.
        if self.ts.load(Ordering::Relaxed) != timestamp_ms {
            self.stamp_first_or_other(index, count, timestamp_ms);
        }
    }

    #[cold]
    #[inline(never)]
    fn stamp_first_or_other(&self, index: u32, count: u32, timestamp_ms: i64) {
        if self
            .ts
            .compare_exchange(i64::MIN, timestamp_ms, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        let mut other = self.other_ts.lock().unwrap_or_else(|p| p.into_inner());
        for i in index..index + count {
            other.insert(i, timestamp_ms);
        }
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
                let (key_size, value_size) = self.sizes_of(i);
                out[i] = Some(run.record(k, (ts, key_size, value_size)));
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
    use crate::future::pack_sizes;
    use crate::future::{FutureCell, KeepToken};

    #[test]
    fn a_calls_records_keep_its_timestamp_and_a_later_one_their_own() {
        let state = BatchState::new(
            (FutureCell::new(None), KeepToken::none()),
            vec![pack_sizes(-1, -1); 7].into(),
        );
        assert_eq!(state.timestamp(0), -1, "never stamped");
        state.stamp(0, 1, 100);
        state.stamp(1, 1, 100);
        // Appended later (the deferral thread), then stamped again later.
        state.stamp(2, 1, 150);
        state.stamp(3, 1, 150);
        state.stamp(3, 1, 170);
        // A run of records stamped at once: every one of them keeps it.
        state.stamp(4, 3, 180);
        assert_eq!(
            (0..7).map(|i| state.timestamp(i)).collect::<Vec<_>>(),
            vec![100, 100, 150, 170, 180, 180, 180]
        );
    }

    fn all(ix: &Indices) -> Vec<usize> {
        (0..ix.len()).map(|k| ix.get(k)).collect()
    }

    #[test]
    fn indices_stay_a_range_while_consecutive_and_keep_order_after() {
        let mut ix = Indices::range(4, 1);
        ix.push_range(5, 1);
        ix.push_range(6, 1);
        assert!(matches!(ix, Indices::Range(4, 7)));
        assert_eq!(all(&ix), vec![4, 5, 6]);
        // A gap (keyed records of a call spread over partitions) turns it
        // into a list, in run order.
        ix.push_range(9, 1);
        ix.push_range(2, 1);
        assert!(matches!(ix, Indices::List(_)));
        assert_eq!(all(&ix), vec![4, 5, 6, 9, 2]);
        assert_eq!((ix.min(), ix.max()), (Some(2), Some(9)));
        let mut one = Indices::range(3, 1);
        one.push_range(1, 1);
        assert_eq!(all(&one), vec![3, 1]);
        assert_eq!(
            (Indices::range(7, 1).min(), Indices::range(7, 1).max()),
            (Some(7), Some(7))
        );
    }

    #[test]
    fn a_calls_consecutive_records_share_one_handle_and_complete_as_before() {
        use super::super::batch_ref::RecordRefs;
        use super::{Completion, PyCompletion};
        use ferrokafka_net::cluster::TopicPartition;
        use ferrokafka_net::producer::handles::{take_records, RecordHandles};
        use ferrokafka_net::producer::runner::{Finished, RecordHandle};
        use std::sync::Arc;

        // Record i: a 1-byte key and a (10 + i)-byte value.
        let sizes = (0..6).map(|i| pack_sizes(1, 10 + i)).collect();
        let state = Arc::new(BatchState::new(
            (FutureCell::new(None), KeepToken::none()),
            sizes,
        ));
        let refs = RecordRefs::new(&state);
        // Stamped without sizes: a call's records report the sizes its
        // state took from the input.
        let handle = |i: usize| RecordHandle {
            completion: PyCompletion::Batch(refs.make(i)).stamped(500, -1, -1),
        };
        // Records 0..5 appended one after the other: one handle.
        let mut first = handle(0);
        for i in 1..5 {
            assert!(first.absorb(handle(i)).is_ok(), "record {i} joins");
        }
        assert_eq!(first.records(), 5);
        // Records that do not come right after: refused, given back whole.
        let mut five = handle(5);
        let first = match five.absorb(first) {
            Ok(()) => panic!("records 0..5 do not follow record 5"),
            Err(h) => h,
        };
        assert_eq!((first.records(), five.records()), (5, 1));
        // A batch split after three records splits the handle.
        let mut queue: std::collections::VecDeque<_> = vec![first].into();
        let front = take_records(&mut queue, 3);
        assert_eq!((front.len(), front[0].records()), (1, 3));
        assert_eq!(queue[0].records(), 2);
        let tp = TopicPartition::new(Arc::from("t"), 0);
        PyCompletion::complete_all(
            front,
            &Finished {
                tp: &tp,
                result: &Ok((100, -1)),
            },
        );
        let back: Vec<_> = queue.into_iter().collect();
        PyCompletion::complete_all(
            back,
            &Finished {
                tp: &tp,
                result: &Ok((200, -1)),
            },
        );
        drop(five);
        let out = state.outcomes();
        let got: Vec<_> = out
            .iter()
            .map(|o| match o {
                Some(Ok(d)) => (d.offset, d.timestamp_ms, d.key_size, d.value_size),
                Some(Err(_)) => (-2, 0, 0, 0),
                None => (-3, 0, 0, 0),
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (100, 500, 1, 10),
                (101, 500, 1, 11),
                (102, 500, 1, 12),
                (200, 500, 1, 13),
                (201, 500, 1, 14),
                // Dropped without an outcome: failed, not pending.
                (-2, 0, 0, 0),
            ]
        );
    }
}
