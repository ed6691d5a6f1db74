//! The producer facade: `send` and `send_many` on the caller's thread,
//! `flush`, `metrics` and `close`. Records enter the state machine
//! (`ProducerCore`, core.rs) through its one append path; the runner thread
//! (runner.rs) drives it and the network client's driver thread does the I/O.
//!
//! `send` blocks (up to `max_block_ms`) in two places only: waiting for the
//! topic's metadata (`Metadata::await_update`, its own condvar) and waiting
//! for buffer memory (`memory_freed`, paired with the core's lock). See
//! runner.rs for the threads and the lock order.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::blocking::{now_ms, BlockingClient};
use crate::driver::AsyncClient;
use crate::error::Error;
use crate::metadata::Metadata;
use crate::producer::accumulator::RecordRef;
use crate::producer::core::{ProducerCore, Refused, TopicInfo};
use crate::producer::runner::{self, Core, Shared, Stats};
use crate::producer::sender::EncodableBatch;
use crate::producer::stats::Gauges;
use crate::selector::short_direct_writes;
use crate::telemetry::agent::Agent;
use crate::telemetry::Kind as TelemetryKind;

pub use crate::producer::config::ProducerConfig;
pub use crate::producer::runner::{Completion, DeliveredRecord, Finished, RecordHandle};

mod many;
mod txn;

/// Records and record bytes `send_many` appends per hold of the core's
/// lock, whichever comes first, so a large batch call cannot stall answers
/// and the runner for long: about 0.4 ms of appends of 100-byte records.
///
/// Not shorter, because each release costs the other threads more than the
/// caller: whoever waits for the lock (the runner woken to drain a full
/// batch, the network driver with an answer) is woken by the release, but
/// the caller takes the lock back before that thread has run, so it sleeps
/// again, a context switch each time. With a throwaway knob for the bound
/// (session 17, issue 17), the ceiling run's `send_batch` took 0.090 µs of
/// CPU a record at 1024 records a hold and 0.080 at 8192 (best of 6
/// alternating runs); builds before and after, with the memory wake-up of
/// `on_answer` too: docs/benchmarks-components.md (`ab_builds.py`).
const SEND_MANY_CHUNK: usize = 8192;
const SEND_MANY_CHUNK_BYTES: usize = 1 << 20;

/// Records `send_many` appends between two looks at what other threads
/// left to it (`producer/handover.rs`): about 20 µs of 100-byte records,
/// the longest an answer or a sealed batch waits for it.
const SEND_MANY_SLICE: usize = 1024;

/// Longest a blocked `send` waits before asking its interrupt check again
/// (the Python binding answers it with `check_signals`: Ctrl-C within this).
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// `append_waiting`'s answer: the lock (held again after any wait) and
/// whether to wake the runner, or the record's error and completion.
type Appending<'g, B, C> = (MutexGuard<'g, Core<B, C>>, Result<bool, (Error, C)>);

/// The answer of `Producer::try_send`.
#[derive(Debug)]
pub enum TrySend<C> {
    /// Appended; the completion will be called.
    Sent,
    /// Appending now would have meant waiting: for the topic's metadata,
    /// for buffer memory, or for the state lock another thread holds.
    /// Nothing was enqueued; the caller retries with `send_until`.
    WouldBlock(C),
    /// The record can never be appended (too large, bad partition, closed).
    Failed(Error, C),
}

pub struct Producer<B: EncodableBatch + Send + 'static, C: Completion> {
    shared: Arc<Shared<B, C>>,
    async_client: Option<AsyncClient>,
    sender_thread: Option<JoinHandle<()>>,
    /// KIP-714 metrics push (`enable_metrics_push`), stopped before the
    /// network client closes so its terminating push can go out.
    telemetry: Option<Agent>,
}

/// The producer's Java-named figures (docs/metrics.md), for `metrics()` and
/// for telemetry: its counters and its network client's per-node figures.
fn metrics_of<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Shared<B, C>,
) -> Vec<(String, f64)> {
    let (free, in_flight) = {
        let st = shared.lock();
        (st.free_memory(), st.in_flight_batches())
    };
    let mut out = shared.stats.metrics(Gauges {
        records_pending: shared.pending.load(Ordering::Acquire) as f64,
        buffer_available: free as f64,
        buffer_total: shared.cfg.buffer_memory as f64,
        batches_in_flight: in_flight as f64,
    });
    out.extend(shared.net.node_metrics());
    out
}

/// One record as `send`, `try_send` and `send_until` take it: borrowed from
/// the caller, copied into a batch by the append.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: &'a [(&'a str, Option<&'a [u8]>)],
    /// None: the append's time (CreateTime).
    pub timestamp_ms: Option<i64>,
}

impl<B: EncodableBatch + Send + 'static, C: Completion> Producer<B, C> {
    /// `net` must be built with an updater over `metadata` (a ProducerMetadata),
    /// so the network client's polls keep the metadata fresh.
    pub fn new(
        cfg: ProducerConfig,
        metadata: Arc<Metadata>,
        net: Arc<BlockingClient>,
        new_builder: Box<dyn Fn(usize) -> B + Send + Sync>,
    ) -> Result<Self, Error> {
        let core = ProducerCore::new(cfg.clone(), StdRng::from_entropy(), new_builder);
        let (tx, rx) = channel();
        let shared = Arc::new(Shared {
            cfg,
            core: Mutex::new(core),
            memory_freed: Condvar::new(),
            txn_changed: Condvar::new(),
            metadata,
            net: net.clone(),
            wake: tx,
            pending: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            stats: Stats::default(),
            stepping: Mutex::new(()),
            // Before the runner's first step: any step elsewhere wakes it.
            runner_wake_at: AtomicI64::new(i64::MAX),
            handover: Default::default(),
        });
        // The driver thread polls the network client (I/O, metadata refresh,
        // callbacks); the runner thread steps the producer's state machine.
        let telemetry = if net.metrics_push() {
            // A weak handle: the agent must not keep a dropped producer alive.
            let weak = Arc::downgrade(&shared);
            Agent::start(
                TelemetryKind::Producer,
                net.clone(),
                Box::new(move || weak.upgrade().map(|s| metrics_of(&s)).unwrap_or_default()),
            )
        } else {
            None
        };
        // A connection that can take requests again after a full send
        // buffer steps the core on the polling thread, as an answer does
        // (`step_here_or_wake`), or wakes the runner if a step is under
        // way: on the ceiling run each full batch is queued behind the one
        // the writer is copying, and waking the runner for it was a third
        // thread hop per batch (io, driver, runner; session 33). A weak
        // handle: the network client must not keep the producer alive.
        let weak = Arc::downgrade(&shared);
        net.on_send_done(Box::new(move || {
            if let Some(s) = weak.upgrade() {
                runner::step_here_or_wake(&s);
            }
        }));
        let log = net.log_context();
        let async_client = AsyncClient::start(net);
        let worker = shared.clone();
        let sender_thread = std::thread::Builder::new()
            .name("ferrokafka-producer".into())
            .spawn(move || {
                crate::log_context::set_thread(log);
                runner::run(worker, rx)
            })
            .map_err(|e| Error::State {
                detail: format!("cannot start the producer thread: {e}"),
            })?;
        Ok(Producer {
            shared,
            async_client: Some(async_client),
            sender_thread: Some(sender_thread),
            telemetry,
        })
    }

    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.shared.metadata
    }

    fn lock(&self) -> MutexGuard<'_, Core<B, C>> {
        self.shared.lock()
    }

    fn wake(&self) {
        self.shared.wake();
    }

    /// A `send_batch` call lets go of the lock to carry out what was left
    /// to it (`handed`, from `runner::end_hold`: queued answers applied,
    /// a step wanted), then takes it back as the appender again
    /// (`producer/handover.rs`). `appended` is counted as pending first,
    /// under the lock, so no completion can count one of its records down
    /// before it is counted.
    fn carry_out_and_relock<'g>(
        &'g self,
        st: MutexGuard<'g, Core<B, C>>,
        handed: runner::Handed<C>,
        appended: &mut usize,
    ) -> MutexGuard<'g, Core<B, C>> {
        self.shared
            .pending
            .fetch_add(std::mem::take(appended), Ordering::AcqRel);
        drop(st);
        runner::carry_out(&self.shared, handed, now_ms());
        let st = self.lock();
        self.shared.handover.begin();
        st
    }

    fn metadata_timeout(&self, topic: &str) -> Error {
        Error::Timeout {
            what: format!(
                "topic {topic} not present in metadata (max_block_ms){}",
                self.shared.metadata.connection_error_hint()
            ),
            timeout_ms: self.shared.cfg.max_block_ms as u64,
        }
    }

    /// Wait until the topic's partitions are known (Java `waitOnMetadata`).
    /// Returns the partition count and the available partitions.
    ///
    /// Waits in slices of at most `WAIT_SLICE` and asks `interrupted` between
    /// them, so a caller whose user pressed Ctrl-C gets control back at once
    /// (`Error::Interrupted`) instead of after `max_block_ms`.
    fn wait_on_metadata(
        &self,
        topic: &str,
        now_ms: i64,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(usize, Vec<i32>), Error> {
        let md = &self.shared.metadata;
        md.add(topic, now_ms)?;
        loop {
            let cluster = md.fetch();
            if let Some(n) = cluster.partition_count_for_topic(topic).filter(|&n| n > 0) {
                return Ok((n, cluster.available_partition_ids(topic)));
            }
            if let Some(e) = md.error_for_topic(topic) {
                return Err(e);
            }
            let version = md.request_update_for_topic(topic);
            self.shared.net.wakeup();
            let now = Instant::now();
            if now >= deadline {
                return Err(self.metadata_timeout(topic));
            }
            if interrupted() {
                return Err(Error::Interrupted);
            }
            match md.await_update(version, Some(topic), Some((deadline - now).min(WAIT_SLICE))) {
                Ok(()) => {}
                // One slice ran out: look at the deadline and the interrupt
                // flag again (the loop does both).
                Err(Error::Timeout { .. }) if Instant::now() < deadline => {}
                Err(Error::Timeout { .. }) => return Err(self.metadata_timeout(topic)),
                Err(e) => return Err(e),
            }
        }
    }

    /// Enqueue one record. The completion is called once with the result
    /// (on the producer's sender thread). On immediate failure the
    /// completion is handed back with the error.
    pub fn send(&self, record: Outgoing<'_>, completion: C) -> Result<(), (Error, C)> {
        self.send_until(record, completion, self.block_deadline(), &|| false)
    }

    /// `now + max_block_ms`: how long `send` may wait by default.
    pub fn block_deadline(&self) -> Instant {
        Instant::now() + Duration::from_millis(self.shared.cfg.max_block_ms.max(0) as u64)
    }

    /// Append one record only if that needs no waiting at all: the topic's
    /// partitions are known, buffer memory is free and the state lock is
    /// free (`try_lock`). Never waits for any of them, so a caller may hold
    /// a lock of its own that the producer's threads never wait for while
    /// holding theirs: the Python binding calls it with the GIL held, and
    /// saves releasing and re-taking the GIL on every `send` (see
    /// ferrokafka-py/src/producer.rs). A record that makes a batch
    /// sendable may step the core here (`runner::step_here_or_wake`),
    /// which takes only such locks.
    ///
    /// Whatever it cannot decide without waiting (metadata unknown or in
    /// error, memory used up) it leaves to `send_until`, which applies the
    /// same rules with waits, so the two paths cannot disagree on a record.
    pub fn try_send(&self, record: Outgoing<'_>, completion: C) -> TrySend<C> {
        let Outgoing {
            topic,
            partition,
            key,
            value,
            headers,
            timestamp_ms,
        } = record;
        if self.shared.closing.load(Ordering::Acquire) {
            // Rare; `send_until` fails it as closed and counts it.
            return TrySend::WouldBlock(completion);
        }
        // One clock read: the topic's expiry, the record's timestamp and
        // its batch's creation time (as `send_record`).
        let now = now_ms();
        let Ok(cluster) = self.shared.metadata.add_and_fetch(topic, now) else {
            return TrySend::WouldBlock(completion);
        };
        let Some(num_partitions) = cluster.partition_count_for_topic(topic).filter(|&n| n > 0)
        else {
            return TrySend::WouldBlock(completion);
        };
        // Keyed records and explicit partitions never look at the list.
        let available = if self.shared.cfg.partitioner.uses_available(partition, key) {
            cluster.available_partition_ids(topic)
        } else {
            Vec::new()
        };
        let record = RecordRef {
            timestamp_ms: timestamp_ms.unwrap_or(now),
            key,
            value,
            headers,
        };
        let Some(mut st) = self.shared.try_lock() else {
            return TrySend::WouldBlock(completion);
        };
        let handle = RecordHandle::new(completion, record.timestamp_ms, key, value);
        let info = TopicInfo {
            num_partitions,
            available: &available,
        };
        match st.append(topic, partition, info, &record, handle, now) {
            Ok(wake) => {
                // Raised under the lock: a completion (which follows the
                // lock) can never count the record down first.
                self.shared.pending.fetch_add(1, Ordering::AcqRel);
                drop(st);
                if wake {
                    // With the GIL held: a full batch goes to the io thread
                    // rather than being copied into the socket here.
                    short_direct_writes(|| runner::step_here_or_wake(&self.shared));
                }
                TrySend::Sent
            }
            Err(Refused::NeedMemory(h)) => TrySend::WouldBlock(h.completion),
            Err(Refused::Failed(e, h)) => {
                drop(st);
                self.shared
                    .stats
                    .records_errored
                    .fetch_add(1, Ordering::Relaxed);
                TrySend::Failed(e, h.completion)
            }
        }
    }

    /// `send` with an explicit deadline for its waits (metadata, buffer
    /// memory) and an interrupt check asked at least every `WAIT_SLICE`
    /// while waiting; `Error::Interrupted` when it said yes. A deadline in
    /// the past makes a non-blocking attempt: `Error::Timeout` then means
    /// "would have had to wait" and nothing was enqueued.
    pub fn send_until(
        &self,
        record: Outgoing<'_>,
        completion: C,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), (Error, C)> {
        let Outgoing {
            topic,
            partition,
            key,
            value,
            headers,
            timestamp_ms,
        } = record;
        let r = self.send_record(
            topic,
            partition,
            RecordRef {
                timestamp_ms: timestamp_ms.unwrap_or(-1),
                key,
                value,
                headers,
            },
            timestamp_ms.is_none(),
            completion,
            deadline,
            interrupted,
        );
        // A non-blocking attempt that would have waited is not a failed
        // record: the caller retries it elsewhere.
        if let Err((e, _)) = &r {
            let nonblocking = deadline <= Instant::now();
            if !(nonblocking && matches!(e, Error::Timeout { .. })) {
                self.shared
                    .stats
                    .records_errored
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        r
    }

    /// One record: closed check, metadata wait, then the core's append path
    /// (waiting for memory if need be). `stamp_now`: the record takes the
    /// append time as its timestamp.
    #[allow(clippy::too_many_arguments)]
    fn send_record(
        &self,
        topic: &str,
        partition: Option<i32>,
        mut record: RecordRef<'_>,
        stamp_now: bool,
        completion: C,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), (Error, C)> {
        if self.shared.closing.load(Ordering::Acquire) {
            return Err((Error::Closed { what: "producer" }, completion));
        }
        // One clock read serves the metadata's topic expiry, the record's
        // timestamp and its batch's creation time.
        let now = now_ms();
        let (num_partitions, available) =
            match self.wait_on_metadata(topic, now, deadline, interrupted) {
                Ok(v) => v,
                Err(e) => return Err((e, completion)),
            };
        if stamp_now {
            record.timestamp_ms = now;
        }
        let handle = RecordHandle::new(completion, record.timestamp_ms, record.key, record.value);
        let info = TopicInfo {
            num_partitions,
            available: &available,
        };
        let mut appended = 0;
        let (st, r) = self.append_waiting(
            self.lock(),
            topic,
            partition,
            info,
            &record,
            handle,
            now,
            &mut appended,
            deadline,
            interrupted,
        );
        self.shared.pending.fetch_add(appended, Ordering::AcqRel);
        drop(st);
        if r? {
            runner::step_here_or_wake(&self.shared);
        }
        Ok(())
    }

    /// The core's append, waiting for buffer memory (up to `deadline`, in
    /// `WAIT_SLICE`s that ask `interrupted`) while it is used up. Shared by
    /// `send` and `send_many`. `appended` counts records appended under the
    /// caller's lock hold and not yet added to `pending`; they are added
    /// before the lock is given up to wait, so a completion can never count
    /// them down first. `Ok(true)`: wake the runner.
    #[allow(clippy::too_many_arguments)]
    fn append_waiting<'g>(
        &'g self,
        mut st: MutexGuard<'g, Core<B, C>>,
        topic: &str,
        partition: Option<i32>,
        info: TopicInfo<'_>,
        record: &RecordRef<'_>,
        mut handle: RecordHandle<C>,
        mut now: i64,
        appended: &mut usize,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Appending<'g, B, C> {
        loop {
            match st.append(topic, partition, info, record, handle, now) {
                Ok(wake) => {
                    *appended += 1;
                    return (st, Ok(wake));
                }
                Err(Refused::Failed(e, h)) => return (st, Err((e, h.completion))),
                Err(Refused::NeedMemory(h)) => handle = h,
            }
            // A `send_batch` call applies what was left to it first (those
            // answers may be what frees memory) and tries again; it waits
            // as no appender, so that answers arriving meanwhile are
            // applied by the driver (handover.rs).
            let appender = self.shared.handover.is_appending();
            if appender {
                let handed = runner::end_hold(&self.shared, &mut st);
                if !handed.is_empty() {
                    st = self.carry_out_and_relock(st, handed, appended);
                    continue;
                }
            }
            // Full buffer: make everything sendable now and wait for a batch
            // to be freed (the runner needs the lock to drain).
            st.memory_waiter(true);
            self.wake();
            let give_up = if interrupted() {
                Some(Error::Interrupted)
            } else if Instant::now() >= deadline {
                Some(Error::Timeout {
                    what: format!(
                        "buffer memory full ({} bytes) (max_block_ms)",
                        self.shared.cfg.buffer_memory
                    ),
                    timeout_ms: self.shared.cfg.max_block_ms.max(0) as u64,
                })
            } else {
                None
            };
            if let Some(e) = give_up {
                st.memory_waiter(false);
                if appender {
                    self.shared.handover.begin();
                }
                return (st, Err((e, handle.completion)));
            }
            self.shared
                .pending
                .fetch_add(std::mem::take(appended), Ordering::AcqRel);
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .min(WAIT_SLICE);
            st = self
                .shared
                .memory_freed
                .wait_timeout(st, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            st.memory_waiter(false);
            if appender {
                self.shared.handover.begin();
            }
            // As Java: the batch's creation time is after the wait.
            now = now_ms();
        }
    }

    /// Fail the records not yet sent (`in_queue`) and those whose request
    /// is in flight (`in_flight`, its answer then ignored: they may or may
    /// not be written), as librdkafka's `rd_kafka_purge`; see
    /// `ProducerCore::purge`. Done when it returns.
    pub fn purge(&self, in_queue: bool, in_flight: bool) {
        runner::purge(&self.shared, in_queue, in_flight);
        // An epoch bump it asked for, and the memory it freed, are the
        // runner's to act on.
        self.wake();
    }

    /// Apply the network answers waiting now on this thread, unless none
    /// waits or the driver thread is applying them already; true if this
    /// thread did. For the application's thread polling for delivery
    /// reports: an acknowledgement completes its records here instead of
    /// waiting for the driver to be woken (`events.rs`). A callback may
    /// take the GIL: call without it.
    pub fn poll_answers(&self) -> bool {
        self.shared.net.poll_pending(&now_ms)
    }

    /// Wait until every record sent before this call is completed, or the
    /// timeout passes. Returns how many records were still pending.
    pub fn flush(&self, timeout: Option<Duration>) -> usize {
        self.begin_flush();
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let slice = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    (d - now).min(Duration::from_millis(100))
                }
                None => Duration::from_millis(100),
            };
            if self.flush_step(slice) == 0 {
                break;
            }
        }
        self.end_flush();
        self.shared.pending.load(Ordering::Acquire)
    }

    /// Wait up to `timeout` until every request handed to the connections
    /// is written to its socket (`BlockingClient::wait_written`): what
    /// `close` does after its flush. True once all is written.
    pub fn wait_written(&self, timeout: Duration) -> bool {
        self.shared.net.wait_written(Instant::now() + timeout)
    }

    /// How long a close that began at `started` with `timeout` may still
    /// wait for the writers after its flush: what is left of the timeout,
    /// or without one the request timeout, as for a request's answer.
    pub fn write_wait(&self, timeout: Option<Duration>, started: Instant) -> Duration {
        timeout.map_or(
            Duration::from_millis(self.shared.net.request_timeout_ms().max(0) as u64),
            |t| t.saturating_sub(started.elapsed()),
        )
    }

    /// One flush step of at most `slice`, for callers that must come back to
    /// check signals (the Python binding). Returns the pending count.
    ///
    /// The flushing thread waits on the network client's events and applies
    /// the answers itself (`BlockingClient::wait_for_answer`, as a thread in
    /// `DeliveryFuture.result()` does; docs/semantics.md §12.5): a
    /// `send`-then-`flush` per record gets its acknowledgement without a hop
    /// through the driver thread. Call without the GIL.
    pub fn flush_step(&self, slice: Duration) -> usize {
        let pending = || self.shared.pending.load(Ordering::Acquire);
        // A completion that takes `pending` to zero wakes this thread
        // (`complete_deliveries`); `wait_for_answer` reads it again before
        // it sleeps.
        if pending() > 0 {
            self.shared.net.wait_for_answer(slice, &|| pending() == 0);
        }
        pending()
    }

    /// Make every batch sendable now (`flush`'s first step), and step the
    /// core on this thread to send them unless a step is under way
    /// (`step_here_or_wake`): woken for it, the runner thread was one more
    /// hop in each `send`-then-`flush`, usually with nothing to send.
    pub fn begin_flush(&self) {
        self.lock().begin_flush();
        runner::step_here_or_wake(&self.shared);
    }

    pub fn end_flush(&self) {
        self.lock().end_flush();
    }

    pub fn pending(&self) -> usize {
        self.shared.pending.load(Ordering::Acquire)
    }

    pub fn partitions_for(&self, topic: &str) -> Result<Vec<i32>, Error> {
        self.partitions_for_until(topic, self.block_deadline(), &|| false)
    }

    /// `partitions_for` with the deadline and interrupt check of `send_until`.
    pub fn partitions_for_until(
        &self,
        topic: &str,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<i32>, Error> {
        let (n, _) = self.wait_on_metadata(topic, now_ms(), deadline, interrupted)?;
        Ok((0..n as i32).collect())
    }

    /// Java-named figures (docs/metrics.md): the producer's counters and
    /// its network client's per-node figures.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        metrics_of(&self.shared)
    }

    /// Flush (up to `timeout`), then fail what is left and stop the threads.
    pub fn close(&mut self, timeout: Option<Duration>) {
        if self.sender_thread.is_none() {
            return;
        }
        let started = Instant::now();
        self.flush(timeout);
        if let Some(mut t) = self.telemetry.take() {
            t.close();
        }
        self.shared.closing.store(true, Ordering::Release);
        self.wake();
        if let Some(t) = self.sender_thread.take() {
            let _ = t.join();
        }
        // Let the writers hand what they hold to the kernel before the
        // connections are closed: acks=0 records completed once their
        // request counted as sent, which may be before it was written.
        // Bounded by the close's timeout (the request timeout without one):
        // a broker that stops reading must not hang the close
        // (docs/semantics.md §4.8).
        if !self.wait_written(self.write_wait(timeout, started)) {
            log::warn!(
                target: "ferrokafka::producer",
                "closing with requests not yet written to the broker (timeout)"
            );
        }
        self.async_client.take();
        self.shared.net.close();
        self.shared.metadata.close();
    }
}

impl<B: EncodableBatch + Send + 'static, C: Completion> Drop for Producer<B, C> {
    fn drop(&mut self) {
        self.close(Some(Duration::ZERO));
    }
}
