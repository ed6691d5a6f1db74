//! The record accumulator (Java `RecordAccumulator`): per-partition queues of
//! open batches that `send` appends to and the sender drains.
//!
//! Pure state with injected time (`now_ms`): no I/O, no clock, no lock but
//! the buffer pool's (`buffer_pool.rs`, which batches give their buffers
//! back to from whatever thread drops them). The producer wraps one
//! accumulator in a mutex; the sender task calls `ready` and `drain` under
//! that mutex, and appenders block on memory outside it.
//!
//! The batch encoding is abstracted behind `BatchBuilder` so the hot encoder
//! (the protocol crate's RecordBatch v2 writer) plugs in, and tests can use a
//! counting fake.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use crate::cluster::TopicPartition;
use crate::producer::buffer_pool::BufferPool;
use crate::producer::handles::{push_handle, RecordHandles};

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
    /// fill is not regrown (and copied) record by record. A hint. Called
    /// on an empty batch that will fill (`total` is the batch size): the
    /// builder may take a kept buffer from `pool`, and give its own back
    /// when it is dropped.
    fn reserve_total(&mut self, total: usize, pool: &Arc<BufferPool>) {
        let _ = (total, pool);
    }
    /// Append the records `record(i)` for `i` in `range`, in order, in one
    /// pass while each fits in `room` more bytes; stop at the first that
    /// does not, or is `None`. Returns the records appended and their
    /// bytes. What it leaves, `try_append` takes record by record; this
    /// default leaves them all.
    fn append_run<'a, R>(
        &mut self,
        range: Range<usize>,
        room: usize,
        record: &mut R,
    ) -> (usize, usize)
    where
        R: FnMut(usize) -> Option<(RecordRef<'a>, usize)>,
    {
        let _ = (range, room, record);
        (0, 0)
    }
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
    /// Purged while in flight (`Sender::purge_in_flight`): its records have
    /// failed already; its answer completes nothing and it is not retried.
    pub purged: bool,
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
    /// Buffers of finished full-size batches, for the next ones. What it
    /// keeps is held against `buffer_memory` by `append` and `extend_open`
    /// (let go when a batch needs the room), not by `free_memory`, the
    /// metric, which counts it as available as Java does.
    pool: Arc<BufferPool>,
}

impl<B: BatchBuilder, T: RecordHandles> RecordAccumulator<B, T> {
    pub fn new(cfg: AccumulatorConfig) -> Self {
        RecordAccumulator {
            pool: Arc::new(BufferPool::new(cfg.batch_size, cfg.buffer_memory)),
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

    /// `buffer_memory` less the batches' reservations. The pool's kept
    /// buffers count as free here, as in Java's `availableMemory`: they are
    /// given up as soon as a batch needs their room (`append`).
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
        // What a batch may take now: the pool's kept buffers are held too,
        // until a batch needs their room (`all_free` once they are let go;
        // nothing below changes `used_memory` before it is read).
        let all_free = self.free_memory();
        let mut free = all_free.saturating_sub(self.pool.kept_bytes());
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
                    if grow > free {
                        // Read again, not added up: a buffer a request
                        // let go of meanwhile is held too.
                        self.pool.release(grow - free);
                        free = all_free.saturating_sub(self.pool.kept_bytes());
                    }
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
        // A kept buffer is room the producer holds already: a new batch
        // takes one whole (`reserve_total`), its bytes moving from the pool
        // to the batch, what is held unchanged, as Java's
        // `BufferPool.allocate` hands out a pooled buffer before anything
        // else. Without this, a producer held at `buffer_memory` (the
        // ceiling run: it appends faster than batches are sent) opened its
        // batches at a first chunk, and growing one let the pool go: the
        // kept buffers were freed and the batch's room allocated and
        // faulted in anew (`thread_cpu.py send_batch_arrow`, three runs
        // each, calling thread: 1.2 / 3.1 / 2.1 -> 1.5 / 1.4 / 1.8 page
        // faults a 1,000 records; issue 17). Any new batch, not only a hot
        // partition's: the first batch after the buffer ran full is not
        // hot (its predecessor was sealed for want of room, not full), and
        // opened at a first chunk it let the pool go as it grew (session
        // 32).
        let reuse = record_size <= batch_size && self.pool.kept_bytes() >= batch_size;
        if reuse || (hot && batch_size.max(record_size) <= all_free / 2) {
            // Else only while memory is plentiful: a full-size batch per
            // hot partition must not starve the others.
            reserve = batch_size.max(record_size);
        }
        // The buffer taken leaves the pool: at least `batch_size` of the
        // kept bytes become the batch's.
        let taken = if reuse { batch_size } else { 0 };
        free += taken;
        if reserve > free {
            self.pool.release(reserve - free);
            free = all_free.saturating_sub(self.pool.kept_bytes()) + taken;
        }
        if reserve > free {
            return Err(AppendError::NeedMemory {
                bytes: reserve,
                handle,
            });
        }
        let mut builder = new_builder(batch_size.max(record_size));
        if reserve > FIRST_CHUNK {
            let kept = self.pool.kept_bytes();
            builder.reserve_total(reserve, &self.pool);
            if reuse && self.pool.kept_bytes() >= kept {
                // The builder took no kept buffer (a builder without one's
                // use for them): the room counted above must be let go.
                self.pool.release(batch_size);
            }
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
            purged: false,
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
    /// `handle(i, record)` makes a record's handle once it is in, unless
    /// `run` is given: then `run(range)` makes one handle for all the
    /// records appended, once the loop is done.
    ///
    /// Why `run`: a `send_batch` call's consecutive records share one
    /// handle anyway (`RecordHandles::absorb`); made and absorbed record by
    /// record, that was a maker's count, a timestamp check and the last
    /// handle's read-modify-write per record, about a tenth of the calling
    /// thread's instructions (callgrind, issue 17).
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
        run: Option<&mut (dyn FnMut(std::ops::Range<usize>) -> T + '_)>,
        stop_after_bytes: usize,
    ) -> Extended {
        let mut out = Extended::default();
        let batch_size = self.cfg.batch_size;
        let limit = self
            .cfg
            .buffer_memory
            .saturating_sub(self.pool.kept_bytes());
        let used = &mut self.used_memory;
        let Some(last) = self.queues.get_mut(tp).and_then(VecDeque::back_mut) else {
            return out;
        };
        if last.sealed || last.is_full(batch_size) {
            return out;
        }
        let first = range.start;
        let per_record = run.is_none();
        let mut i = range.start;
        while i < range.end {
            if !per_record {
                // A run's records share one handle: as many as the
                // batch's reservation holds without growing go in one
                // pass (`append_run`); the loop below takes the record
                // that stopped it, growing the reservation if need be.
                let room = last
                    .reserved_bytes
                    .saturating_sub(last.builder.size_bytes())
                    .min(stop_after_bytes.saturating_sub(out.bytes));
                let (n, bytes) = last.builder.append_run(i..range.end, room, &mut record);
                out.appended += n;
                out.bytes += bytes;
                i += n;
                if n > 0 {
                    if last.is_full(batch_size) {
                        out.became_sendable = true;
                        break;
                    }
                    if out.bytes >= stop_after_bytes || i == range.end {
                        break;
                    }
                }
            }
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
            if per_record {
                push_handle(&mut last.handles, handle(i, &r));
            }
            i += 1;
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
        // The loop stops at the first record not appended: the ones in
        // are exactly `first..first + appended`.
        if let (Some(run), true) = (run, out.appended > 0) {
            push_handle(&mut last.handles, run(first..first + out.appended));
        }
        out
    }

    pub fn begin_flush(&mut self) {
        self.flushes_in_progress += 1;
    }

    pub fn end_flush(&mut self) {
        self.flushes_in_progress = self.flushes_in_progress.saturating_sub(1);
    }

    /// An appender starts or stops waiting for memory (`ProducerCore::memory_waiter`).
    pub fn memory_waiter(&mut self, waiting: bool) {
        if waiting {
            self.memory_waiters += 1;
        } else {
            self.memory_waiters = self.memory_waiters.saturating_sub(1);
        }
    }

    pub fn memory_waiters(&self) -> usize {
        self.memory_waiters
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
}

#[cfg(test)]
mod tests;
