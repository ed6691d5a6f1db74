//! The record accumulator (Java `RecordAccumulator`): per-partition queues of
//! open batches that `send` appends to and the sender drains.
//!
//! Pure state with injected time (`now_ms`): no locks, no I/O, no clock. The
//! producer wraps one accumulator in a mutex; the sender task calls `ready`
//! and `drain` under that mutex, and appenders block on memory outside it.
//!
//! The batch encoding is abstracted behind `BatchBuilder` so the hot encoder
//! (the protocol crate's RecordBatch v2 writer) plugs in, and tests can use a
//! counting fake.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use crate::cluster::TopicPartition;

/// Appends records into one wire batch.
pub trait BatchBuilder {
    /// Append one record if it fits in `capacity` (the first record of a batch
    /// always fits: a record larger than `batch_size` gets a batch of its own).
    /// Returns the bytes it added, or `None` when the batch is full.
    fn try_append(&mut self, record: &RecordRef<'_>) -> Option<usize>;
    /// Bytes the finished batch will take (before compression).
    fn size_bytes(&self) -> usize;
    fn record_count(&self) -> usize;
    /// Room for `total` bytes in all, allocated now: a batch that will
    /// fill is not regrown (and copied) record by record. A hint.
    fn reserve_total(&mut self, total: usize) {
        let _ = total;
    }
}

/// What the producer needs of a record handle: how many records it stands
/// for. A handle may stand for a run of consecutive records (records of one
/// `send_batch` call, appended one after the other into one batch): the
/// batch then keeps one handle for the run, where one per record cost a
/// cache-missing write per record on the calling thread and a read on the
/// completing one (perf of the ceiling run, issue 17).
pub trait RecordHandles: Sized {
    /// Records this handle stands for.
    fn records(&self) -> usize {
        1
    }
    /// Take `next`, a handle for the record appended right after this
    /// handle's last, into this handle; or give it back.
    fn absorb(&mut self, next: Self) -> Result<(), Self> {
        Err(next)
    }
    /// Keep this handle's first `k` records (`0 < k < records()`) and
    /// return a handle for the rest (a batch split in two).
    fn split_off(&mut self, k: usize) -> Self {
        unreachable!("split_off({k}) of a one-record handle")
    }
}

/// Test and plain handles: one record each.
impl RecordHandles for u32 {}

/// Records `.0 .. .0 + .1` by index: the simplest handle that stands for
/// runs, for tests and the accumulator's bench (the real one is
/// ferrokafka-py's `send_batch` completion).
#[doc(hidden)]
#[derive(Debug, PartialEq, Eq)]
pub struct IndexRun(pub u32, pub u32);

impl RecordHandles for IndexRun {
    fn records(&self) -> usize {
        self.1 as usize
    }
    fn absorb(&mut self, next: Self) -> Result<(), Self> {
        if next.0 == self.0 + self.1 {
            self.1 += next.1;
            Ok(())
        } else {
            Err(next)
        }
    }
    fn split_off(&mut self, k: usize) -> Self {
        let rest = IndexRun(self.0 + k as u32, self.1 - k as u32);
        self.1 = k as u32;
        rest
    }
}

/// Records the handles stand for.
pub fn count_records<T: RecordHandles>(handles: &[T]) -> usize {
    handles.iter().map(RecordHandles::records).sum()
}

/// Append `h` to a batch's handles: into the last one if that takes it.
#[inline(always)]
fn push_handle<T: RecordHandles>(handles: &mut Vec<T>, h: T) {
    let h = match handles.last_mut() {
        Some(last) => match last.absorb(h) {
            Ok(()) => return,
            Err(h) => h,
        },
        None => h,
    };
    handles.push(h);
}

/// The handles of a batch's first `n` records, taken off the front of
/// `handles` (a handle straddling the cut is split).
pub fn take_records<T: RecordHandles>(
    handles: &mut std::collections::VecDeque<T>,
    n: usize,
) -> Vec<T> {
    let mut out = Vec::new();
    let mut left = n;
    while left > 0 {
        let Some(mut h) = handles.pop_front() else {
            break;
        };
        let r = h.records();
        if r > left {
            let rest = h.split_off(left);
            handles.push_front(rest);
            out.push(h);
            break;
        }
        left -= r;
        out.push(h);
    }
    out
}

/// One record as `send` hands it over.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a str, Option<&'a [u8]>)],
}

#[derive(Debug, Clone)]
pub struct AccumulatorConfig {
    pub batch_size: usize,
    pub linger_ms: i64,
    pub retry_backoff_ms: i64,
    pub retry_backoff_max_ms: i64,
    pub delivery_timeout_ms: i64,
    pub buffer_memory: usize,
}

/// An open or sealed batch with the completion handles of its records.
#[derive(Debug)]
pub struct ProducerBatch<B, T> {
    pub tp: TopicPartition,
    pub builder: B,
    /// One handle per record, in append order (the record's offset is
    /// base_offset + index).
    pub handles: Vec<T>,
    pub created_ms: i64,
    pub last_attempt_ms: i64,
    pub attempts: u32,
    /// Set once it was drained at least once: the batch may no longer take
    /// records (its bytes were handed to a request).
    pub sealed: bool,
    /// Idempotence: the base sequence assigned at first drain, kept on retry so
    /// the broker can de-duplicate.
    pub base_sequence: Option<i32>,
    /// Bytes charged against `buffer_memory`.
    pub reserved_bytes: usize,
}

impl<B: BatchBuilder, T: RecordHandles> ProducerBatch<B, T> {
    fn is_full(&self, batch_size: usize) -> bool {
        self.builder.size_bytes() >= batch_size
    }

    fn in_retry(&self) -> bool {
        self.attempts > 0
    }

    /// KIP-580: retry backoff grows exponentially with the attempt count.
    pub fn retry_backoff_ms(&self, cfg: &AccumulatorConfig) -> i64 {
        if self.attempts == 0 {
            return 0;
        }
        let exp = (self.attempts - 1).min(20);
        cfg.retry_backoff_ms
            .saturating_mul(1i64 << exp)
            .min(cfg.retry_backoff_max_ms.max(cfg.retry_backoff_ms))
    }

    pub fn has_reached_delivery_timeout(&self, cfg: &AccumulatorConfig, now_ms: i64) -> bool {
        now_ms - self.created_ms >= cfg.delivery_timeout_ms
    }
}

/// A successful append.
#[derive(Debug, PartialEq, Eq)]
pub struct Appended {
    /// The record opened a new batch.
    pub new_batch: bool,
    /// The partition has a batch ready to send (full, or more than one
    /// queued): Java's `batchIsFull`.
    pub batch_is_full: bool,
    /// This append made a batch sendable before its linger: it filled the
    /// open batch, or it sealed the previous one by opening a new batch.
    /// Unlike `batch_is_full` this is true once per batch, not for every
    /// record appended behind a full batch.
    pub became_sendable: bool,
    /// Bytes the record added.
    pub bytes: usize,
}

/// What `extend_open` appended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Extended {
    pub appended: usize,
    pub bytes: usize,
    /// The last record filled the batch: it is sendable before its linger.
    pub became_sendable: bool,
}

/// A refused append; the record's handle comes back so the caller keeps it.
#[derive(Debug, PartialEq, Eq)]
pub enum AppendError<T> {
    /// Not enough free `buffer_memory` for a new batch: the caller waits (up
    /// to max_block_ms) for memory to be freed, then tries again.
    NeedMemory { bytes: usize, handle: T },
    /// A fresh batch refused its first record (a builder sizing bug).
    DoesNotFit(T),
}

/// What `ready` found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ReadyCheck {
    /// Leaders with at least one sendable batch.
    pub ready_nodes: HashSet<i32>,
    /// When the next batch becomes sendable (linger or backoff), for the
    /// sender's poll timeout. `i64::MAX` when nothing is pending.
    pub next_ready_check_delay_ms: i64,
    /// Topics with queued batches whose leader is unknown: the sender asks
    /// metadata for them.
    pub unknown_leader_topics: HashSet<String>,
}

/// What a new batch reserves of `buffer_memory` (capped by `batch_size`).
/// The reservation then doubles as the batch grows (`growth`), as its
/// buffer does, so the charge follows the memory the batch really holds.
pub const FIRST_CHUNK: usize = 16 * 1024;

/// Bytes to add to `batch`'s reservation before appending a record of at most
/// `record_size` bytes: 0 while it fits, else double (up to `batch_size`).
fn growth<B: BatchBuilder, T>(
    batch: &ProducerBatch<B, T>,
    record_size: usize,
    batch_size: usize,
) -> usize {
    let needed = batch.builder.size_bytes() + record_size;
    if needed <= batch.reserved_bytes {
        return 0;
    }
    let target = needed
        .max(batch.reserved_bytes * 2)
        .min(batch_size.max(batch.reserved_bytes));
    target.saturating_sub(batch.reserved_bytes)
}

pub struct RecordAccumulator<B, T> {
    cfg: AccumulatorConfig,
    queues: BTreeMap<TopicPartition, VecDeque<ProducerBatch<B, T>>>,
    /// Bytes of batches not yet deallocated.
    used_memory: usize,
    /// Partitions with a request in flight when ordering must be kept by
    /// muting (max in flight 1 without idempotence).
    muted: HashSet<TopicPartition>,
    /// Per-node position for round-robin draining, so one busy partition
    /// cannot starve the others of the same leader.
    drain_index: HashMap<i32, usize>,
    /// `flush()` in progress: every batch is sendable now.
    flushes_in_progress: usize,
    /// Appenders are waiting for memory: every batch is sendable now, so
    /// memory comes back sooner.
    memory_waiters: usize,
    closed: bool,
}

impl<B: BatchBuilder, T: RecordHandles> RecordAccumulator<B, T> {
    pub fn new(cfg: AccumulatorConfig) -> Self {
        RecordAccumulator {
            cfg,
            queues: BTreeMap::new(),
            used_memory: 0,
            muted: HashSet::new(),
            drain_index: HashMap::new(),
            flushes_in_progress: 0,
            memory_waiters: 0,
            closed: false,
        }
    }

    pub fn config(&self) -> &AccumulatorConfig {
        &self.cfg
    }

    pub fn free_memory(&self) -> usize {
        self.cfg.buffer_memory.saturating_sub(self.used_memory)
    }

    /// Append `record` to `tp`'s open batch, or open a new one with
    /// `new_builder(capacity)` (capacity: the most bytes the batch may hold).
    /// `record_size` is the caller's upper estimate of the record's encoded
    /// size, used to size the reservations.
    pub fn append(
        &mut self,
        tp: &TopicPartition,
        record: &RecordRef<'_>,
        record_size: usize,
        handle: T,
        now_ms: i64,
        new_builder: impl FnOnce(usize) -> B,
    ) -> Result<Appended, AppendError<T>> {
        let batch_size = self.cfg.batch_size;
        let free = self.free_memory();
        // The partition's last batch filled up: this one will likely fill
        // too, so it takes its whole size now (memory and allocation), as
        // every batch does in Java; a partition that trickles keeps growing
        // by chunks.
        let mut hot = false;
        if let Some(q) = self.queues.get_mut(tp) {
            let queued = q.len();
            if let Some(last) = q.back_mut() {
                if !last.sealed {
                    let was_full = last.is_full(batch_size);
                    // Charge the growth before the batch outgrows what it
                    // holds (docs/semantics.md §5: `buffer_memory` bounds the
                    // bytes of every batch not yet released).
                    let grow = growth(last, record_size, batch_size);
                    if grow <= free {
                        if let Some(bytes) = last.builder.try_append(record) {
                            last.reserved_bytes += grow;
                            self.used_memory += grow;
                            push_handle(&mut last.handles, handle);
                            let full = last.is_full(batch_size);
                            return Ok(Appended {
                                new_batch: false,
                                batch_is_full: full || queued > 1,
                                became_sendable: full && !was_full,
                                bytes,
                            });
                        }
                    }
                    // The open batch is full, or may not grow with the memory
                    // left: seal it so the sender takes it (and its memory
                    // comes back).
                    hot = last.is_full(batch_size) || grow == 0;
                    last.sealed = true;
                }
            }
        }
        // A new batch holds a first chunk, not `batch_size`: with a large
        // batch size (1 MiB by default) many partitions' lingering batches
        // would otherwise reserve the whole buffer while holding little.
        let mut reserve = batch_size.min(FIRST_CHUNK).max(record_size);
        if hot && batch_size.max(record_size) <= free / 2 {
            // Only while memory is plentiful: a full-size batch per hot
            // partition must not starve the others.
            reserve = batch_size.max(record_size);
        }
        if reserve > self.free_memory() {
            return Err(AppendError::NeedMemory {
                bytes: reserve,
                handle,
            });
        }
        let mut builder = new_builder(batch_size.max(record_size));
        if reserve > FIRST_CHUNK {
            builder.reserve_total(reserve);
        }
        let Some(bytes) = builder.try_append(record) else {
            // A fresh builder must take its first record; refusing is a bug in
            // the builder's sizing, reported to that record only.
            return Err(AppendError::DoesNotFit(handle));
        };
        self.used_memory += reserve;
        let batch = ProducerBatch {
            tp: tp.clone(),
            builder,
            handles: {
                // Room for as many records like this one (its encoded size,
                // not the upper bound) as the reservation holds, so the list
                // is not regrown (and copied) as it fills: capped at 1024 it
                // was regrown four times per 1 MB batch of 100 B records.
                // The cap bounds what a batch of tiny records takes up front.
                let mut h = Vec::with_capacity((reserve / bytes.max(1)).clamp(1, 16 * 1024));
                h.push(handle);
                h
            },
            created_ms: now_ms,
            last_attempt_ms: now_ms,
            attempts: 0,
            sealed: false,
            base_sequence: None,
            reserved_bytes: reserve,
        };
        let full = batch.is_full(batch_size);
        let q = self.queues.entry(tp.clone()).or_default();
        q.push_back(batch);
        Ok(Appended {
            new_batch: true,
            batch_is_full: full || q.len() > 1,
            became_sendable: full || q.len() > 1,
            bytes,
        })
    }

    /// Append records to `tp`'s open batch without opening a new one (the
    /// run path, `ProducerCore::extend_run`): `record(i)` for `i` in
    /// `range`, each with its size estimate, until one is `None` (not for
    /// this batch), does not fit the batch or the memory left, fills the
    /// batch, or brings the bytes appended to `stop_after_bytes`. The same
    /// accounting as `append` per record (reservation growth, handles);
    /// `handle(i, record)` makes a record's handle once it is in.
    ///
    /// Generic, not `dyn`: this loop runs once per record of a batch call,
    /// and with the closures inlined into it a record is one pass of
    /// straight-line code instead of several indirect calls (issue 17).
    #[inline]
    pub fn extend_open<'a>(
        &mut self,
        tp: &TopicPartition,
        range: std::ops::Range<usize>,
        mut record: impl FnMut(usize) -> Option<(RecordRef<'a>, usize)>,
        mut handle: impl FnMut(usize, &RecordRef<'a>) -> T,
        stop_after_bytes: usize,
    ) -> Extended {
        let mut out = Extended::default();
        let batch_size = self.cfg.batch_size;
        let limit = self.cfg.buffer_memory;
        let used = &mut self.used_memory;
        let Some(last) = self.queues.get_mut(tp).and_then(VecDeque::back_mut) else {
            return out;
        };
        if last.sealed || last.is_full(batch_size) {
            return out;
        }
        for i in range {
            let Some((r, size)) = record(i) else { break };
            let grow = growth(last, size, batch_size);
            if grow > limit.saturating_sub(*used) {
                break;
            }
            let Some(bytes) = last.builder.try_append(&r) else {
                break;
            };
            last.reserved_bytes += grow;
            *used += grow;
            push_handle(&mut last.handles, handle(i, &r));
            out.appended += 1;
            out.bytes += bytes;
            if last.is_full(batch_size) {
                out.became_sendable = true;
                break;
            }
            if out.bytes >= stop_after_bytes {
                break;
            }
        }
        out
    }

    pub fn begin_flush(&mut self) {
        self.flushes_in_progress += 1;
    }

    pub fn end_flush(&mut self) {
        self.flushes_in_progress = self.flushes_in_progress.saturating_sub(1);
    }

    pub fn set_memory_waiters(&mut self, n: usize) {
        self.memory_waiters = n;
    }

    pub fn close(&mut self) {
        self.closed = true;
    }

    pub fn mute(&mut self, tp: &TopicPartition) {
        self.muted.insert(tp.clone());
    }

    pub fn unmute(&mut self, tp: &TopicPartition) {
        self.muted.remove(tp);
    }

    pub fn has_undrained(&self) -> bool {
        self.queues.values().any(|q| !q.is_empty())
    }

    /// The base sequence of the partition's next batch (`Some(None)`: a batch
    /// never sent; `None`: nothing queued).
    pub fn front_sequence(&self, tp: &TopicPartition) -> Option<Option<i32>> {
        self.queues
            .get(tp)
            .and_then(|q| q.front())
            .map(|b| b.base_sequence)
    }

    /// Partitions with queued batches.
    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(tp, _)| tp)
    }

    /// After an epoch bump: visit each partition's queued batches in order
    /// (to give them new sequences).
    pub fn for_each_queue_mut(
        &mut self,
        mut f: impl FnMut(&TopicPartition, &mut VecDeque<ProducerBatch<B, T>>),
    ) {
        for (tp, q) in self.queues.iter_mut() {
            f(tp, q);
        }
    }

    /// Batches queued per partition (for KIP-794 load stats and metrics).
    pub fn queue_sizes(&self) -> impl Iterator<Item = (&TopicPartition, usize)> {
        self.queues.iter().map(|(tp, q)| (tp, q.len()))
    }

    /// Which leaders have something to send now (Java `ready`). `leader_of`
    /// gives a partition's leader id, `None` if unknown.
    pub fn ready(
        &self,
        now_ms: i64,
        leader_of: impl Fn(&TopicPartition) -> Option<i32>,
    ) -> ReadyCheck {
        let mut out = ReadyCheck {
            next_ready_check_delay_ms: i64::MAX,
            ..Default::default()
        };
        let force = self.closed || self.flushes_in_progress > 0 || self.memory_waiters > 0;
        for (tp, q) in &self.queues {
            let Some(first) = q.front() else { continue };
            let Some(leader) = leader_of(tp) else {
                out.unknown_leader_topics.insert(tp.topic.to_string());
                continue;
            };
            if out.ready_nodes.contains(&leader) || self.muted.contains(tp) {
                continue;
            }
            let waited = now_ms - first.last_attempt_ms;
            let backing_off = first.in_retry() && waited < first.retry_backoff_ms(&self.cfg);
            let time_to_wait = if first.in_retry() {
                first.retry_backoff_ms(&self.cfg)
            } else {
                self.cfg.linger_ms
            };
            let full = q.len() > 1 || first.sealed || first.is_full(self.cfg.batch_size);
            let expired = waited >= time_to_wait;
            let sendable = full || expired || force;
            if sendable && !backing_off {
                out.ready_nodes.insert(leader);
            } else {
                let left = (time_to_wait - waited).max(0);
                out.next_ready_check_delay_ms = out.next_ready_check_delay_ms.min(left);
            }
        }
        out
    }

    /// Take the sendable batches of `node_id`'s partitions, at most one per
    /// partition, up to `max_request_size` bytes (the first always goes, so a
    /// large batch cannot block its partition forever). Round-robin start so
    /// every partition of the node gets its turn.
    pub fn drain_node(
        &mut self,
        node_id: i32,
        partitions: &[TopicPartition],
        max_request_size: usize,
        now_ms: i64,
    ) -> Vec<ProducerBatch<B, T>> {
        let mut out = Vec::new();
        if partitions.is_empty() {
            return out;
        }
        let mut size = 0usize;
        let start = *self.drain_index.get(&node_id).unwrap_or(&0) % partitions.len();
        for i in 0..partitions.len() {
            let idx = (start + i) % partitions.len();
            let tp = &partitions[idx];
            if self.muted.contains(tp) {
                continue;
            }
            let Some(q) = self.queues.get_mut(tp) else {
                continue;
            };
            let Some(first) = q.front() else { continue };
            if first.in_retry()
                && now_ms - first.last_attempt_ms < first.retry_backoff_ms(&self.cfg)
            {
                continue;
            }
            let bytes = first.builder.size_bytes();
            if !out.is_empty() && size + bytes > max_request_size {
                // Next drain starts at the partition that did not fit.
                self.drain_index.insert(node_id, idx);
                return out;
            }
            let mut batch = q.pop_front().expect("front checked above");
            batch.sealed = true;
            batch.last_attempt_ms = now_ms;
            size += bytes;
            out.push(batch);
        }
        self.drain_index
            .insert(node_id, (start + 1) % partitions.len());
        out
    }

    /// Put a failed batch back for retry at the front of its queue (Java
    /// `reenqueue`): it goes before newer batches so order holds. With
    /// idempotence, batches with sequences are kept in sequence order.
    pub fn reenqueue(&mut self, mut batch: ProducerBatch<B, T>, now_ms: i64) {
        batch.attempts += 1;
        batch.last_attempt_ms = now_ms;
        batch.sealed = true;
        let q = self.queues.entry(batch.tp.clone()).or_default();
        match batch.base_sequence {
            Some(seq) => {
                let pos = q
                    .iter()
                    .position(|b| b.base_sequence.is_none_or(|s| s > seq))
                    .unwrap_or(q.len());
                q.insert(pos, batch);
            }
            None => q.push_front(batch),
        }
    }

    /// Put the pieces of a split batch (in record order) at the front of
    /// their partition's queue. Unlike `reenqueue` this is not a new attempt:
    /// the pieces keep the original's attempt count and are sendable at once.
    /// Pieces with sequences go in sequence order among queued batches, so a
    /// retried batch with a lower sequence still goes first.
    pub fn reenqueue_split(&mut self, pieces: Vec<ProducerBatch<B, T>>, _now_ms: i64) {
        let Some(first) = pieces.first() else { return };
        let q = self.queues.entry(first.tp.clone()).or_default();
        match first.base_sequence {
            Some(seq) => {
                let pos = q
                    .iter()
                    .position(|b| b.base_sequence.is_none_or(|s| s > seq))
                    .unwrap_or(q.len());
                for (i, p) in pieces.into_iter().enumerate() {
                    q.insert(pos + i, p);
                }
            }
            None => {
                for p in pieces.into_iter().rev() {
                    q.push_front(p);
                }
            }
        }
    }

    /// Release a finished batch's memory (it was acknowledged or failed).
    pub fn deallocate(&mut self, batch: &ProducerBatch<B, T>) {
        self.used_memory = self.used_memory.saturating_sub(batch.reserved_bytes);
    }

    /// Remove and return queued batches past `delivery_timeout_ms` (their
    /// records fail with a timeout). Batches in flight are expired by the
    /// sender when their request completes, as in the Java client.
    pub fn expire(&mut self, now_ms: i64) -> Vec<ProducerBatch<B, T>> {
        let mut out = Vec::new();
        for q in self.queues.values_mut() {
            while let Some(first) = q.front() {
                if first.has_reached_delivery_timeout(&self.cfg, now_ms) {
                    out.push(q.pop_front().expect("front checked above"));
                } else {
                    break;
                }
            }
        }
        for b in &out {
            self.used_memory = self.used_memory.saturating_sub(b.reserved_bytes);
        }
        out
    }

    /// Remove everything (close without flushing, or a fatal error).
    pub fn abort_all(&mut self) -> Vec<ProducerBatch<B, T>> {
        let mut out = Vec::new();
        for (_, mut q) in std::mem::take(&mut self.queues) {
            out.extend(q.drain(..));
        }
        self.used_memory = 0;
        out
    }

    /// Remove every queued batch, giving back the memory each reserved
    /// (batches in flight keep theirs): a transaction being aborted.
    pub fn abort_queued(&mut self) -> Vec<ProducerBatch<B, T>> {
        let mut out = Vec::new();
        for (_, mut q) in std::mem::take(&mut self.queues) {
            out.extend(q.drain(..));
        }
        for b in &out {
            self.used_memory = self.used_memory.saturating_sub(b.reserved_bytes);
        }
        out
    }

    /// Remove the queued batches of one topic (its metadata failed fatally:
    /// unauthorized or invalid), so only that topic's records fail.
    pub fn abort_topic(&mut self, topic: &str) -> Vec<ProducerBatch<B, T>> {
        let keys: Vec<TopicPartition> = self
            .queues
            .keys()
            .filter(|tp| &*tp.topic == topic)
            .cloned()
            .collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(mut q) = self.queues.remove(&k) {
                out.extend(q.drain(..));
            }
        }
        for b in &out {
            self.used_memory = self.used_memory.saturating_sub(b.reserved_bytes);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts bytes like a record batch would: 61-byte header + payloads.
    struct FakeBuilder {
        cap: usize,
        size: usize,
        n: usize,
    }

    impl BatchBuilder for FakeBuilder {
        fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
            let bytes = 8 + r.key.map_or(0, |k| k.len()) + r.value.map_or(0, |v| v.len());
            if self.n > 0 && self.size + bytes > self.cap {
                return None;
            }
            self.size += bytes;
            self.n += 1;
            Some(bytes)
        }
        fn size_bytes(&self) -> usize {
            self.size
        }
        fn record_count(&self) -> usize {
            self.n
        }
    }

    fn cfg() -> AccumulatorConfig {
        AccumulatorConfig {
            batch_size: 100,
            linger_ms: 10,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1000,
            delivery_timeout_ms: 5000,
            buffer_memory: 1000,
        }
    }

    fn rec(v: &[u8]) -> RecordRef<'_> {
        RecordRef {
            timestamp_ms: 0,
            key: None,
            value: Some(v),
            headers: &[],
        }
    }

    fn append(
        acc: &mut RecordAccumulator<FakeBuilder, u32>,
        tp: &TopicPartition,
        v: &[u8],
        h: u32,
        now: i64,
    ) -> Result<Appended, AppendError<u32>> {
        acc.append(tp, &rec(v), v.len() + 8, h, now, |cap| FakeBuilder {
            cap,
            size: 0,
            n: 0,
        })
    }

    #[test]
    fn consecutive_records_share_a_handle_that_splits_where_the_batch_does() {
        let mut acc: RecordAccumulator<FakeBuilder, IndexRun> = RecordAccumulator::new(cfg());
        let tp = TopicPartition::new("t", 0);
        let new = |cap| FakeBuilder { cap, size: 0, n: 0 };
        acc.append(&tp, &rec(b"a"), 9, IndexRun(0, 1), 0, new)
            .unwrap();
        // The run path: records 1..5 of the same call.
        let ext = acc.extend_open(
            &tp,
            1..5,
            |_| Some((rec(b"a"), 9)),
            |i, _| IndexRun(i as u32, 1),
            usize::MAX,
        );
        assert_eq!(ext.appended, 4);
        // A record of another call (not next): a handle of its own.
        acc.append(&tp, &rec(b"a"), 9, IndexRun(40, 1), 0, new)
            .unwrap();
        let q = &acc.queues[&tp];
        assert_eq!(q[0].handles, vec![IndexRun(0, 5), IndexRun(40, 1)]);
        assert_eq!(count_records(&q[0].handles), 6);
        let mut handles: std::collections::VecDeque<IndexRun> =
            vec![IndexRun(0, 5), IndexRun(40, 1)].into();
        assert_eq!(take_records(&mut handles, 2), vec![IndexRun(0, 2)]);
        assert_eq!(
            take_records(&mut handles, 4),
            vec![IndexRun(2, 3), IndexRun(40, 1)]
        );
        assert!(handles.is_empty());
    }

    /// A batch reserves a first chunk and doubles its reservation as it
    /// grows, so a large batch_size does not reserve memory up front.
    #[test]
    fn reservation_grows_with_the_batch() {
        let mut c = cfg();
        c.batch_size = 100_000;
        c.buffer_memory = 200_000;
        let mut acc = RecordAccumulator::new(c);
        let tp = TopicPartition::new("t", 0);
        let v = vec![0u8; 992]; // 1000 bytes a record in the fake builder
        append(&mut acc, &tp, &v, 0, 0).unwrap();
        assert_eq!(acc.free_memory(), 200_000 - FIRST_CHUNK);
        for i in 1..16 {
            append(&mut acc, &tp, &v, i, 0).unwrap();
        }
        assert_eq!(
            acc.free_memory(),
            200_000 - FIRST_CHUNK,
            "16 records fit the first chunk"
        );
        append(&mut acc, &tp, &v, 16, 0).unwrap();
        assert_eq!(acc.free_memory(), 200_000 - 2 * FIRST_CHUNK, "doubled");
        for i in 17..100 {
            append(&mut acc, &tp, &v, i, 0).unwrap();
        }
        // 100 records of 1000 bytes: the batch is full at batch_size, and its
        // reservation never exceeds batch_size.
        let q = &acc.queues[&tp];
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].reserved_bytes, 100_000);
        assert_eq!(acc.free_memory(), 100_000);
        let b = acc.queues.get_mut(&tp).unwrap().pop_front().unwrap();
        acc.deallocate(&b);
        assert_eq!(acc.free_memory(), 200_000);
    }

    /// After a batch of the partition filled up, the next one takes its
    /// whole size at once (while memory is plentiful).
    #[test]
    fn a_hot_partition_reserves_whole_batches() {
        let mut c = cfg();
        c.batch_size = 100_000;
        c.buffer_memory = 1_000_000;
        let mut acc = RecordAccumulator::new(c);
        let tp = TopicPartition::new("t", 0);
        let v = vec![0u8; 992];
        for i in 0..101 {
            append(&mut acc, &tp, &v, i, 0).unwrap();
        }
        let q = &acc.queues[&tp];
        assert_eq!(q.len(), 2);
        assert!(q[0].sealed);
        assert_eq!(q[1].reserved_bytes, 100_000);
        assert_eq!(acc.free_memory(), 800_000);
    }

    /// Growth that the memory left cannot cover seals the batch (it becomes
    /// sendable, so memory comes back); the next record needs memory.
    #[test]
    fn a_batch_that_cannot_grow_is_sealed() {
        let mut c = cfg();
        c.batch_size = 100_000;
        c.buffer_memory = FIRST_CHUNK + 1000;
        let mut acc = RecordAccumulator::new(c);
        let tp = TopicPartition::new("t", 0);
        let v = vec![0u8; 992];
        for i in 0..16 {
            append(&mut acc, &tp, &v, i, 0).unwrap();
        }
        match append(&mut acc, &tp, &v, 16, 0) {
            Err(AppendError::NeedMemory { handle: 16, .. }) => {}
            other => panic!("{other:?}"),
        }
        let q = &acc.queues[&tp];
        assert_eq!(q.len(), 1);
        assert!(q[0].sealed);
        assert_eq!(q[0].handles.len(), 16);
        assert!(acc.used_memory <= FIRST_CHUNK + 1000);
    }

    #[test]
    fn linger_then_ready() {
        let mut acc = RecordAccumulator::new(cfg());
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, &tp, &[0; 10], 1, 0).unwrap();
        let r = acc.ready(5, |_| Some(1));
        assert!(r.ready_nodes.is_empty());
        assert_eq!(r.next_ready_check_delay_ms, 5);
        let r = acc.ready(10, |_| Some(1));
        assert!(r.ready_nodes.contains(&1));
    }

    #[test]
    fn full_batch_is_ready_before_linger() {
        let mut acc = RecordAccumulator::new(cfg());
        let tp = TopicPartition::new("t", 0);
        for i in 0..6 {
            append(&mut acc, &tp, &[0; 10], i, 0).unwrap(); // 18 bytes each; 6th opens batch 2
        }
        assert!(acc.ready(0, |_| Some(1)).ready_nodes.contains(&1));
        let batches = acc.drain_node(1, std::slice::from_ref(&tp), 1 << 20, 0);
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0].handles, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn batch_size_zero_gives_each_record_its_own_ready_batch() {
        // Java: "a batch size of zero will disable batching entirely".
        let mut acc = RecordAccumulator::new(AccumulatorConfig {
            batch_size: 0,
            ..cfg()
        });
        let tp = TopicPartition::new("t", 0);
        for i in 0..3 {
            let a = append(&mut acc, &tp, &[0; 10], i, 0).unwrap();
            assert!(a.new_batch && a.batch_is_full, "record {i}: {a:?}");
        }
        // Full batches do not wait for linger.
        assert!(acc.ready(0, |_| Some(1)).ready_nodes.contains(&1));
        let mut handles = Vec::new();
        loop {
            let b = acc.drain_node(1, std::slice::from_ref(&tp), 1 << 20, 0);
            if b.is_empty() {
                break;
            }
            handles.extend(b.into_iter().map(|b| b.handles));
        }
        assert_eq!(handles, vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn unknown_leader_reported() {
        let mut acc = RecordAccumulator::new(cfg());
        append(&mut acc, &TopicPartition::new("x", 0), b"v", 1, 0).unwrap();
        let r = acc.ready(100, |_| None);
        assert!(r.unknown_leader_topics.contains("x"));
    }

    #[test]
    fn memory_bound_asks_caller_to_wait_and_is_returned() {
        let mut acc = RecordAccumulator::new(cfg());
        for p in 0..10 {
            let o = append(&mut acc, &TopicPartition::new("t", p), b"v", 0, 0);
            assert!(matches!(
                o,
                Ok(Appended {
                    new_batch: true,
                    ..
                })
            ));
        }
        assert_eq!(acc.free_memory(), 0);
        let o = append(&mut acc, &TopicPartition::new("t", 10), b"v", 0, 0);
        assert_eq!(
            o,
            Err(AppendError::NeedMemory {
                bytes: 100,
                handle: 0
            })
        );
        let b = acc.drain_node(1, &[TopicPartition::new("t", 0)], 1 << 20, 20);
        acc.deallocate(&b[0]);
        assert_eq!(acc.free_memory(), 100);
    }

    #[test]
    fn drain_respects_max_request_size_and_round_robins() {
        let mut acc = RecordAccumulator::new(cfg());
        let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("t", p)).collect();
        for tp in &tps {
            append(&mut acc, tp, &[0; 50], 0, 0).unwrap();
        }
        // 58 bytes each: two do not fit in 100, the first always goes.
        let a = acc.drain_node(1, &tps, 100, 10);
        assert_eq!(a.len(), 1);
        let b = acc.drain_node(1, &tps, 100, 10);
        assert_eq!(b.len(), 1);
        assert_ne!(a[0].tp, b[0].tp);
    }

    #[test]
    fn retry_backoff_grows_and_reenqueue_keeps_order() {
        let mut acc = RecordAccumulator::new(cfg());
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, &tp, b"a", 1, 0).unwrap();
        let mut b = acc
            .drain_node(1, std::slice::from_ref(&tp), 1 << 20, 10)
            .pop()
            .unwrap();
        b.base_sequence = Some(0);
        append(&mut acc, &tp, b"b", 2, 11).unwrap();
        acc.reenqueue(b, 20);
        // The retried batch is first and waits its backoff (100 ms).
        assert!(acc.ready(50, |_| Some(1)).ready_nodes.is_empty());
        assert!(acc.ready(120, |_| Some(1)).ready_nodes.contains(&1));
        let again = acc
            .drain_node(1, std::slice::from_ref(&tp), 1 << 20, 120)
            .pop()
            .unwrap();
        assert_eq!(again.handles, vec![1]);
        assert_eq!(again.retry_backoff_ms(acc.config()), 100);
        let mut again = again;
        again.attempts = 4;
        assert_eq!(again.retry_backoff_ms(acc.config()), 800);
        again.attempts = 9;
        assert_eq!(again.retry_backoff_ms(acc.config()), 1000);
    }

    #[test]
    fn delivery_timeout_expires_queued_batches() {
        let mut acc = RecordAccumulator::new(cfg());
        let tp = TopicPartition::new("t", 0);
        append(&mut acc, &tp, b"a", 1, 0).unwrap();
        assert!(acc.expire(4999).is_empty());
        let gone = acc.expire(5000);
        assert_eq!(gone.len(), 1);
        assert_eq!(acc.free_memory(), 1000);
    }

    #[test]
    fn abort_topic_only_touches_that_topic() {
        let mut acc = RecordAccumulator::new(cfg());
        append(&mut acc, &TopicPartition::new("bad", 0), b"a", 1, 0).unwrap();
        append(&mut acc, &TopicPartition::new("good", 0), b"b", 2, 0).unwrap();
        let gone = acc.abort_topic("bad");
        assert_eq!(gone.len(), 1);
        assert!(acc.has_undrained());
    }

    #[test]
    fn flush_makes_everything_ready() {
        let mut acc = RecordAccumulator::new(cfg());
        append(&mut acc, &TopicPartition::new("t", 0), b"a", 1, 0).unwrap();
        acc.begin_flush();
        assert!(acc.ready(0, |_| Some(3)).ready_nodes.contains(&3));
        acc.end_flush();
        assert!(acc.ready(0, |_| Some(3)).ready_nodes.is_empty());
    }
}
