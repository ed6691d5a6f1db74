//! The producer: `send` on the caller's thread, a sender thread that drains
//! batches into Produce requests, and the network client's driver thread that
//! does the I/O.
//!
//! Threads and locks (the reasoning the rest of this file relies on):
//! * `state` (one mutex) guards the `Sender` (accumulator + idempotence) and
//!   the per-topic sticky partitioners. `send` holds it only to append; the
//!   sender thread holds it only to decide and to apply answers. Neither ever
//!   waits for I/O or calls user code under it.
//! * Record completions (`Completion::complete`, which may take the GIL to
//!   hand results to Python) run on the sender or driver thread *after* the
//!   state lock is released, so a slow Python callback can never block `send`.
//! * `send` blocks (up to `max_block_ms`) in two places only: waiting for the
//!   topic's metadata (`Metadata::await_update`, its own condvar) and waiting
//!   for buffer memory (`memory_freed`, paired with `state`).
//! * Network callbacks run on the driver thread with no network lock held.
//!   A Produce answer is applied right there (`apply_produce_answer`: takes
//!   `state`, then completes futures after releasing it) rather than queued
//!   for the sender thread, which saves a thread hop on every acknowledgement;
//!   the sender is then woken through its channel for what the answer
//!   unblocked. Lock order everywhere: `state` before the network core's
//!   lock (the sender asks `ready` under `state`), never the reverse, and no
//!   code waits for I/O while holding either. Cost: completing a future that
//!   an asyncio task awaits takes the GIL, now on the driver thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender as ChanSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokafka_protocol::kafka_protocol::messages::{RequestKind, ResponseKind};
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::blocking::{now_ms, BlockingClient};
use crate::cluster::{Node, TopicPartition};
use crate::driver::AsyncClient;
use crate::error::Error;
use crate::metadata::Metadata;
use crate::network_client::ClientResponse;
use crate::producer::accumulator::{
    AccumulatorConfig, AppendError, Appended, RecordAccumulator, RecordRef,
};
use crate::producer::partitioner::{Partitioner, TopicPartitioner};
use crate::producer::request::{init_producer_id, parse_produce_response};
use crate::producer::sender::{Delivery, EncodableBatch, Sender, SenderConfig};

/// What a delivered record reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveredRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key_size: i32,
    pub value_size: i32,
}

/// Completes one record's future. Called on the sender thread, with no
/// producer lock held.
pub trait Completion: Send + 'static {
    fn complete(self, result: Result<DeliveredRecord, Error>);
}

/// Per-record data kept until its batch is answered.
pub struct RecordHandle<C> {
    completion: C,
    timestamp_ms: i64,
    key_size: i32,
    value_size: i32,
}

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub acks: i16,
    pub linger_ms: i64,
    pub batch_size: usize,
    pub buffer_memory: usize,
    pub max_block_ms: i64,
    pub enable_idempotence: bool,
    pub retries: u32,
    pub retry_backoff_ms: i64,
    pub retry_backoff_max_ms: i64,
    pub request_timeout_ms: i64,
    pub delivery_timeout_ms: i64,
    pub max_request_size: usize,
    /// Where records without an explicit partition go.
    pub partitioner: Partitioner,
    /// Uniform sticky (KIP-794 off) when false.
    pub partitioner_adaptive: bool,
    /// Idempotence: batches of one partition in flight at once. 1 keeps
    /// order on brokers that do not check sequences (docs/semantics.md
    /// §5.2); Kafka itself checks, so more is safe there.
    pub max_in_flight_per_partition: usize,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: -1,
            linger_ms: 5,
            batch_size: 16_384,
            buffer_memory: 33_554_432,
            max_block_ms: 60_000,
            enable_idempotence: true,
            retries: i32::MAX as u32,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1000,
            request_timeout_ms: 30_000,
            delivery_timeout_ms: 120_000,
            max_request_size: 1_048_576,
            partitioner: Partitioner::default(),
            partitioner_adaptive: true,
            max_in_flight_per_partition: 1,
        }
    }
}

impl ProducerConfig {
    /// Java's checks: idempotence needs acks=all, retries > 0 and at most 5
    /// in flight; delivery timeout must cover linger + request timeout.
    /// (Which of these are errors and which quietly change a default is
    /// decided before, in `_config.py`, where it is known what the user set.)
    /// `batch_size` 0 is allowed as in Java: every record gets a batch of its
    /// own (the accumulator reserves `max(batch_size, record size)`).
    pub fn validate(&self, max_in_flight: usize) -> Result<(), Error> {
        let bad = |key: &str, detail: String| {
            Err(Error::Config {
                key: key.into(),
                detail,
            })
        };
        if ![0, 1, -1].contains(&self.acks) {
            return bad(
                "acks",
                format!("must be 0, 1 or all (-1), got {}", self.acks),
            );
        }
        if self.enable_idempotence {
            if self.acks != -1 {
                return bad(
                    "acks",
                    "must be 'all' when enable_idempotence is true".into(),
                );
            }
            if max_in_flight > 5 {
                return bad(
                    "max_in_flight_requests_per_connection",
                    format!(
                        "must be at most 5 when enable_idempotence is true, got {max_in_flight}"
                    ),
                );
            }
            if self.retries == 0 {
                return bad(
                    "retries",
                    "must be greater than 0 when enable_idempotence is true".into(),
                );
            }
        }
        if self.buffer_memory < self.batch_size {
            return bad(
                "buffer_memory",
                format!("must be at least batch_size ({})", self.batch_size),
            );
        }
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms {
            return bad(
                "delivery_timeout_ms",
                format!(
                    "must be >= linger_ms + request_timeout_ms ({})",
                    self.linger_ms + self.request_timeout_ms
                ),
            );
        }
        Ok(())
    }
}

/// Counters behind `metrics()`. Written by the sender thread only (relaxed
/// atomics: readers want a recent value, not a consistent snapshot).
#[derive(Default)]
struct Stats {
    records_sent: AtomicU64,
    records_errored: AtomicU64,
    requests: AtomicU64,
    batches: AtomicU64,
    bytes_out: AtomicU64,
    /// Produce round trips in µs, the last `LATENCY_WINDOW` of them.
    latencies_us: Mutex<std::collections::VecDeque<u64>>,
}

const LATENCY_WINDOW: usize = 4096;

/// Records `send_many` appends per hold of the state lock (~100 µs of
/// appends), so a large batch call cannot stall the sender thread.
const SEND_MANY_CHUNK: usize = 1024;

/// Longest a blocked `send` waits before asking its interrupt check again
/// (the Python binding answers it with `check_signals`: Ctrl-C within this).
const WAIT_SLICE: Duration = Duration::from_millis(50);

impl Stats {
    fn record_latency(&self, us: u64) {
        let mut l = self.latencies_us.lock().unwrap_or_else(|p| p.into_inner());
        if l.len() == LATENCY_WINDOW {
            l.pop_front();
        }
        l.push_back(us);
    }

    /// (avg, p99) in ms over the window; (0, 0) before the first answer.
    fn latency_ms(&self) -> (f64, f64) {
        let l = self.latencies_us.lock().unwrap_or_else(|p| p.into_inner());
        if l.is_empty() {
            return (0.0, 0.0);
        }
        let mut v: Vec<u64> = l.iter().copied().collect();
        v.sort_unstable();
        let avg = v.iter().sum::<u64>() as f64 / v.len() as f64;
        let p99 = v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1];
        (avg / 1000.0, p99 as f64 / 1000.0)
    }
}

/// The sender thread's wake-ups: answers are applied by the thread that
/// reads them (`apply_produce_answer`, `apply_producer_id`), in arrival order.
enum Msg {
    Wake,
}

struct State<B, C> {
    sender: Sender<B, RecordHandle<C>>,
    sticky: HashMap<String, TopicPartitioner>,
    rng: StdRng,
    init_in_flight: bool,
}

struct Inner<B, C> {
    cfg: ProducerConfig,
    state: Mutex<State<B, C>>,
    memory_freed: Condvar,
    metadata: Arc<Metadata>,
    net: Arc<BlockingClient>,
    wake: Mutex<ChanSender<Msg>>,
    /// Records handed to `send` and not yet completed (for flush).
    pending: AtomicUsize,
    pending_lock: Mutex<()>,
    pending_zero: Condvar,
    closing: AtomicBool,
    new_builder: Box<dyn Fn(usize) -> B + Send + Sync>,
    stats: Stats,
}

pub struct Producer<B: EncodableBatch + Send + 'static, C: Completion> {
    inner: Arc<Inner<B, C>>,
    async_client: Option<AsyncClient>,
    sender_thread: Option<JoinHandle<()>>,
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
        let acc = RecordAccumulator::new(AccumulatorConfig {
            batch_size: cfg.batch_size,
            linger_ms: cfg.linger_ms,
            retry_backoff_ms: cfg.retry_backoff_ms,
            retry_backoff_max_ms: cfg.retry_backoff_max_ms,
            delivery_timeout_ms: cfg.delivery_timeout_ms,
            buffer_memory: cfg.buffer_memory,
        });
        let sender = Sender::new(
            acc,
            cfg.enable_idempotence,
            SenderConfig {
                acks: cfg.acks,
                request_timeout_ms: cfg.request_timeout_ms.clamp(0, i32::MAX as i64) as i32,
                max_request_size: cfg.max_request_size,
                retries: cfg.retries,
                max_in_flight_per_partition: cfg.max_in_flight_per_partition,
            },
        );
        let (tx, rx) = channel();
        let inner = Arc::new(Inner {
            cfg,
            state: Mutex::new(State {
                sender,
                sticky: HashMap::new(),
                rng: StdRng::from_entropy(),
                init_in_flight: false,
            }),
            memory_freed: Condvar::new(),
            metadata,
            net: net.clone(),
            wake: Mutex::new(tx),
            pending: AtomicUsize::new(0),
            pending_lock: Mutex::new(()),
            pending_zero: Condvar::new(),
            closing: AtomicBool::new(false),
            new_builder,
            stats: Stats::default(),
        });
        // The driver thread polls the network client (I/O, metadata refresh,
        // callbacks); the sender thread decides what to send.
        let async_client = AsyncClient::start(net);
        let worker = inner.clone();
        let sender_thread = std::thread::Builder::new()
            .name("ferrokafka-producer".into())
            .spawn(move || run_sender(worker, rx))
            .map_err(|e| Error::State {
                detail: format!("cannot start the producer thread: {e}"),
            })?;
        Ok(Producer {
            inner,
            async_client: Some(async_client),
            sender_thread: Some(sender_thread),
        })
    }

    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.inner.metadata
    }

    fn lock(&self) -> MutexGuard<'_, State<B, C>> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) {
        let _ = self
            .inner
            .wake
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .send(Msg::Wake);
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
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(usize, Vec<i32>), Error> {
        let md = &self.inner.metadata;
        md.add(topic, now_ms())?;
        loop {
            let cluster = md.fetch();
            if let Some(n) = cluster.partition_count_for_topic(topic).filter(|&n| n > 0) {
                return Ok((n, cluster.available_partition_ids(topic)));
            }
            if let Some(e) = md.error_for_topic(topic) {
                return Err(e);
            }
            let version = md.request_update_for_topic(topic);
            self.inner.net.wakeup();
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "topic {topic} not present in metadata (max_block_ms){}",
                        md.connection_error_hint()
                    ),
                    timeout_ms: self.inner.cfg.max_block_ms as u64,
                });
            }
            if interrupted() {
                return Err(Error::Interrupted);
            }
            match md.await_update(version, Some(topic), Some((deadline - now).min(WAIT_SLICE))) {
                Ok(()) => {}
                // One slice ran out: look at the deadline and the interrupt
                // flag again (the loop does both).
                Err(Error::Timeout { .. }) if Instant::now() < deadline => {}
                Err(Error::Timeout { .. }) => {
                    return Err(Error::Timeout {
                        what: format!(
                            "topic {topic} not present in metadata (max_block_ms){}",
                            md.connection_error_hint()
                        ),
                        timeout_ms: self.inner.cfg.max_block_ms as u64,
                    })
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Append one record. Blocks up to `max_block_ms` for metadata or buffer
    /// memory; errors are returned (the record is not enqueued, and counts in
    /// `records_errored`) and the completion is handed back so the caller can
    /// fail its own future.
    #[allow(clippy::too_many_arguments)]
    pub fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
        timestamp_ms: Option<i64>,
        completion: C,
    ) -> Result<(), (Error, C)> {
        self.send_until(
            topic,
            partition,
            key,
            value,
            headers,
            timestamp_ms,
            completion,
            self.block_deadline(),
            &|| false,
        )
    }

    /// `now + max_block_ms`: how long `send` may wait by default.
    pub fn block_deadline(&self) -> Instant {
        Instant::now() + Duration::from_millis(self.inner.cfg.max_block_ms.max(0) as u64)
    }

    /// `send` with an explicit deadline for its waits (metadata, buffer
    /// memory) and an interrupt check asked at least every `WAIT_SLICE`
    /// while waiting; `Error::Interrupted` when it said yes. A deadline in
    /// the past makes a non-blocking attempt: `Error::Timeout` then means
    /// "would have had to wait" and nothing was enqueued.
    #[allow(clippy::too_many_arguments)]
    pub fn send_until(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
        timestamp_ms: Option<i64>,
        completion: C,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), (Error, C)> {
        let nonblocking = deadline <= Instant::now();
        let r = self.send_record(
            topic,
            partition,
            key,
            value,
            headers,
            timestamp_ms,
            completion,
            deadline,
            interrupted,
        );
        // A non-blocking attempt that would have waited is not a failed
        // record: the caller retries it elsewhere.
        if matches!(&r, Err((e, _)) if !(nonblocking && matches!(e, Error::Timeout { .. }))) {
            self.inner
                .stats
                .records_errored
                .fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn send_record(
        &self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(&str, Option<&[u8]>)],
        timestamp_ms: Option<i64>,
        completion: C,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), (Error, C)> {
        if self.inner.closing.load(Ordering::Acquire) {
            return Err((Error::Closed { what: "producer" }, completion));
        }
        let (num_partitions, available) = match self.wait_on_metadata(topic, deadline, interrupted)
        {
            Ok(v) => v,
            Err(e) => return Err((e, completion)),
        };
        let ts = timestamp_ms.unwrap_or_else(now_ms);
        let record = RecordRef {
            timestamp_ms: ts,
            key,
            value,
            headers,
        };
        // Upper bound of the record's encoded size (varints at most 5 bytes
        // each, plus the batch header for a record that opens a batch).
        let size = 61
            + 21
            + key.map_or(0, |k| k.len())
            + value.map_or(0, |v| v.len())
            + headers
                .iter()
                .map(|(k, v)| 10 + k.len() + v.map_or(0, |v| v.len()))
                .sum::<usize>();
        if size > self.inner.cfg.max_request_size || size > self.inner.cfg.buffer_memory {
            return Err((
                Error::broker(
                    10,
                    Some(format!(
                        "the record is {size} bytes, more than max_request_size ({}) or buffer_memory ({})",
                        self.inner.cfg.max_request_size, self.inner.cfg.buffer_memory
                    )),
                ),
                completion,
            ));
        }
        let mut handle = RecordHandle {
            completion,
            timestamp_ms: ts,
            key_size: key.map_or(-1, |k| k.len() as i32),
            value_size: value.map_or(-1, |v| v.len() as i32),
        };
        let mut st = self.lock();
        loop {
            let st_ref = &mut *st;
            let p = match partition {
                Some(p) if p < 0 || p as usize >= num_partitions => {
                    return Err((
                        Error::Config {
                            key: "partition".into(),
                            detail: format!(
                                "{p} is not in the range [0...{}] of topic {topic}",
                                num_partitions - 1
                            ),
                        },
                        handle.completion,
                    ));
                }
                Some(p) => p,
                None => {
                    let kind = self.inner.cfg.partitioner;
                    match kind.partition_by_key(key, &available, num_partitions, &mut st_ref.rng) {
                        Some(p) => p,
                        None => st_ref
                            .sticky
                            .entry(topic.to_string())
                            .or_insert_with(|| TopicPartitioner::new(self.inner.cfg.batch_size))
                            .partition(kind, &available, num_partitions, &mut st_ref.rng),
                    }
                }
            };
            let tp = TopicPartition::new(topic, p);
            let new_builder = &self.inner.new_builder;
            match st_ref.sender.accumulator.append(
                &tp,
                &record,
                size,
                handle,
                now_ms(),
                new_builder,
            ) {
                Ok(Appended {
                    new_batch,
                    batch_is_full,
                    bytes,
                }) => {
                    if partition.is_none() && self.inner.cfg.partitioner.is_sticky(key) {
                        if let Some(sp) = st_ref.sticky.get_mut(topic) {
                            sp.on_append(p, bytes, false);
                        }
                    }
                    self.inner.pending.fetch_add(1, Ordering::AcqRel);
                    drop(st);
                    if new_batch || batch_is_full {
                        self.wake();
                    }
                    return Ok(());
                }
                Err(AppendError::NeedMemory { handle: h, .. }) => {
                    handle = h;
                    // Full buffer: make everything sendable now (Java's
                    // "exhausted" readiness) and wait for a batch to be freed.
                    st_ref.sender.accumulator.set_memory_waiters(1);
                    self.wake();
                    let now = Instant::now();
                    if interrupted() {
                        st.sender.accumulator.set_memory_waiters(0);
                        return Err((Error::Interrupted, handle.completion));
                    }
                    if now >= deadline {
                        st.sender.accumulator.set_memory_waiters(0);
                        return Err((
                            Error::Timeout {
                                what: format!(
                                    "buffer memory full ({} bytes) (max_block_ms)",
                                    self.inner.cfg.buffer_memory
                                ),
                                timeout_ms: self.inner.cfg.max_block_ms as u64,
                            },
                            handle.completion,
                        ));
                    }
                    let wait = (deadline - now).min(WAIT_SLICE);
                    st = self
                        .inner
                        .memory_freed
                        .wait_timeout(st, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                    st.sender.accumulator.set_memory_waiters(0);
                }
                Err(AppendError::DoesNotFit(h)) => {
                    return Err((
                        Error::State {
                            detail: "record does not fit an empty batch".into(),
                        },
                        h.completion,
                    ));
                }
            }
        }
    }

    /// Append `n` records of one topic (key and value of record `i` from
    /// `record(i)`, completion from `completion(i)`), the batch path of
    /// `send_batch`. One closed check, one metadata wait and one timestamp
    /// for the call; the state lock is taken once per `SEND_MANY_CHUNK`
    /// records instead of once per record. Returns the records that could
    /// not be enqueued with their error and completion (an invalid
    /// `partition` fails them all with `Error::Config`).
    pub fn send_many<'a>(
        &self,
        topic: &str,
        partition: Option<i32>,
        n: usize,
        record: impl Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
        completion: impl FnMut(usize) -> C,
    ) -> Vec<(Error, C)> {
        self.send_many_until(
            topic,
            partition,
            n,
            record,
            completion,
            self.block_deadline(),
            &|| false,
        )
    }

    /// `send_many` with the deadline and interrupt check of `send_until`.
    /// On `Error::Interrupted` or a non-blocking `Error::Timeout` from the
    /// metadata wait, every record is handed back and none was enqueued.
    #[allow(clippy::too_many_arguments)]
    pub fn send_many_until<'a>(
        &self,
        topic: &str,
        partition: Option<i32>,
        n: usize,
        record: impl Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
        mut completion: impl FnMut(usize) -> C,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Vec<(Error, C)> {
        let nonblocking = deadline <= Instant::now();
        let mut failed = Vec::new();
        let fail_all =
            |e: Error, completion: &mut dyn FnMut(usize) -> C, failed: &mut Vec<(Error, C)>| {
                for i in 0..n {
                    failed.push((e.clone(), completion(i)));
                }
            };
        if self.inner.closing.load(Ordering::Acquire) {
            fail_all(
                Error::Closed { what: "producer" },
                &mut completion,
                &mut failed,
            );
        } else {
            match self.wait_on_metadata(topic, deadline, interrupted) {
                Err(e) => fail_all(e, &mut completion, &mut failed),
                Ok((num_partitions, _))
                    if partition.is_some_and(|p| p < 0 || p as usize >= num_partitions) =>
                {
                    let p = partition.unwrap_or(-1);
                    let e = Error::Config {
                        key: "partition".into(),
                        detail: format!(
                            "{p} is not in the range [0...{}] of topic {topic}",
                            num_partitions - 1
                        ),
                    };
                    fail_all(e, &mut completion, &mut failed);
                }
                Ok((num_partitions, available)) => self.append_many(
                    topic,
                    partition,
                    num_partitions,
                    &available,
                    n,
                    &record,
                    &mut completion,
                    &mut failed,
                    deadline,
                    interrupted,
                ),
            }
        }
        // Records a non-blocking call hands back for a later attempt (or an
        // interrupted call gives back) are not failed records.
        let errored = failed
            .iter()
            .filter(|(e, _)| {
                !matches!(e, Error::Timeout { .. } | Error::Interrupted) || !nonblocking
            })
            .count();
        if errored > 0 {
            self.inner
                .stats
                .records_errored
                .fetch_add(errored as u64, Ordering::Relaxed);
        }
        failed
    }

    #[allow(clippy::too_many_arguments)]
    fn append_many<'a>(
        &self,
        topic: &str,
        partition: Option<i32>,
        num_partitions: usize,
        available: &[i32],
        n: usize,
        record: &dyn Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>),
        completion: &mut dyn FnMut(usize) -> C,
        failed: &mut Vec<(Error, C)>,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) {
        let cfg = &self.inner.cfg;
        let ts = now_ms();
        let new_builder = &self.inner.new_builder;
        let mut st = self.lock();
        // Records appended under the current lock hold; added to `pending`
        // before the lock is released, so the sender (which completes only
        // under and after this lock) can never count them down first.
        let mut appended = 0usize;
        let mut wake = false;
        let mut i = 0;
        while i < n {
            let (key, value) = record(i);
            let size = 61 + 21 + key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len());
            if size > cfg.max_request_size || size > cfg.buffer_memory {
                let e = Error::broker(
                    10,
                    Some(format!(
                        "the record is {size} bytes, more than max_request_size ({}) or buffer_memory ({})",
                        cfg.max_request_size, cfg.buffer_memory
                    )),
                );
                failed.push((e, completion(i)));
                i += 1;
                continue;
            }
            let handle = RecordHandle {
                completion: completion(i),
                timestamp_ms: ts,
                key_size: key.map_or(-1, |k| k.len() as i32),
                value_size: value.map_or(-1, |v| v.len() as i32),
            };
            let st_ref = &mut *st;
            let p = match (partition, key) {
                (Some(p), _) => p,
                (None, key) => {
                    match cfg.partitioner.partition_by_key(
                        key,
                        available,
                        num_partitions,
                        &mut st_ref.rng,
                    ) {
                        Some(p) => p,
                        None => st_ref
                            .sticky
                            .entry(topic.to_string())
                            .or_insert_with(|| TopicPartitioner::new(cfg.batch_size))
                            .partition(cfg.partitioner, available, num_partitions, &mut st_ref.rng),
                    }
                }
            };
            let tp = TopicPartition::new(topic, p);
            let r = RecordRef {
                timestamp_ms: ts,
                key,
                value,
                headers: &[],
            };
            match st_ref
                .sender
                .accumulator
                .append(&tp, &r, size, handle, ts, new_builder)
            {
                Ok(Appended {
                    new_batch,
                    batch_is_full,
                    bytes,
                }) => {
                    if partition.is_none() && cfg.partitioner.is_sticky(key) {
                        if let Some(sp) = st_ref.sticky.get_mut(topic) {
                            sp.on_append(p, bytes, false);
                        }
                    }
                    appended += 1;
                    wake |= new_batch || batch_is_full;
                }
                Err(AppendError::NeedMemory { handle, .. }) if Instant::now() >= deadline => {
                    // Non-blocking call (or out of time) and the buffer is
                    // full: hand back this record and all after it, in order,
                    // so a caller that retries them later keeps their order.
                    let e = Error::Timeout {
                        what: format!(
                            "buffer memory full ({} bytes) (max_block_ms)",
                            cfg.buffer_memory
                        ),
                        timeout_ms: cfg.max_block_ms.max(0) as u64,
                    };
                    failed.push((e.clone(), handle.completion));
                    for j in i + 1..n {
                        failed.push((e.clone(), completion(j)));
                    }
                    break;
                }
                Err(AppendError::NeedMemory { handle, .. }) => {
                    // Buffer full: give the lock back (the sender needs it to
                    // drain and free memory) and let the one-record path wait
                    // up to max_block_ms for this record.
                    self.inner.pending.fetch_add(appended, Ordering::AcqRel);
                    appended = 0;
                    drop(st);
                    self.wake();
                    wake = false;
                    if let Err(f) = self.send_record(
                        topic,
                        partition,
                        key,
                        value,
                        &[],
                        Some(ts),
                        handle.completion,
                        deadline,
                        interrupted,
                    ) {
                        failed.push(f);
                    }
                    st = self.lock();
                }
                Err(AppendError::DoesNotFit(h)) => {
                    failed.push((
                        Error::State {
                            detail: "record does not fit an empty batch".into(),
                        },
                        h.completion,
                    ));
                }
            }
            i += 1;
            if i % SEND_MANY_CHUNK == 0 {
                // Bound the lock hold: answers and draining wait on it.
                self.inner.pending.fetch_add(appended, Ordering::AcqRel);
                appended = 0;
                drop(st);
                if std::mem::take(&mut wake) {
                    self.wake();
                }
                st = self.lock();
            }
        }
        self.inner.pending.fetch_add(appended, Ordering::AcqRel);
        drop(st);
        if wake {
            self.wake();
        }
    }

    /// Wait until every record sent before this call is completed, or the
    /// timeout passes. Returns how many records were still pending.
    pub fn flush(&self, timeout: Option<Duration>) -> usize {
        self.lock().sender.accumulator.begin_flush();
        self.wake();
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut g = self
            .inner
            .pending_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        loop {
            let n = self.inner.pending.load(Ordering::Acquire);
            if n == 0 {
                break;
            }
            let wait = match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    (d - now).min(Duration::from_millis(100))
                }
                None => Duration::from_millis(100),
            };
            g = self
                .inner
                .pending_zero
                .wait_timeout(g, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(g);
        self.lock().sender.accumulator.end_flush();
        self.inner.pending.load(Ordering::Acquire)
    }

    /// One flush step of at most `slice`, for callers that must come back to
    /// check signals (the Python binding). Returns the pending count.
    pub fn flush_step(&self, slice: Duration) -> usize {
        let g = self
            .inner
            .pending_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if self.inner.pending.load(Ordering::Acquire) > 0 {
            let _ = self.inner.pending_zero.wait_timeout(g, slice);
        }
        self.inner.pending.load(Ordering::Acquire)
    }

    pub fn begin_flush(&self) {
        self.lock().sender.accumulator.begin_flush();
        self.wake();
    }

    pub fn end_flush(&self) {
        self.lock().sender.accumulator.end_flush();
    }

    pub fn pending(&self) -> usize {
        self.inner.pending.load(Ordering::Acquire)
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
        let (n, _) = self.wait_on_metadata(topic, deadline, interrupted)?;
        Ok((0..n as i32).collect())
    }

    /// Counters for `metrics()`.
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        let st = self.lock();
        let s = &self.inner.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        let (lat_avg, lat_p99) = s.latency_ms();
        let batches = get(&s.batches);
        vec![
            (
                "records_pending",
                self.inner.pending.load(Ordering::Acquire) as f64,
            ),
            ("records_sent", get(&s.records_sent)),
            ("records_errored", get(&s.records_errored)),
            ("requests_sent", get(&s.requests)),
            ("batches_sent", batches),
            ("bytes_out", get(&s.bytes_out)),
            (
                "batch_size_avg",
                if batches > 0.0 {
                    get(&s.bytes_out) / batches
                } else {
                    0.0
                },
            ),
            ("request_latency_avg_ms", lat_avg),
            ("request_latency_p99_ms", lat_p99),
            (
                "buffer_available_bytes",
                st.sender.accumulator.free_memory() as f64,
            ),
            ("buffer_total_bytes", self.inner.cfg.buffer_memory as f64),
            ("batches_in_flight", st.sender.in_flight_batches() as f64),
        ]
    }

    /// Flush (up to `timeout`), then fail what is left and stop the threads.
    pub fn close(&mut self, timeout: Option<Duration>) {
        if self.sender_thread.is_none() {
            return;
        }
        self.flush(timeout);
        self.inner.closing.store(true, Ordering::Release);
        self.wake();
        if let Some(t) = self.sender_thread.take() {
            let _ = t.join();
        }
        self.async_client.take();
        self.inner.net.close();
        self.inner.metadata.close();
    }
}

impl<B: EncodableBatch + Send + 'static, C: Completion> Drop for Producer<B, C> {
    fn drop(&mut self) {
        self.close(Some(Duration::ZERO));
    }
}

fn complete_deliveries<B, C: Completion>(
    inner: &Inner<B, C>,
    deliveries: Vec<Delivery<RecordHandle<C>>>,
) {
    let mut n = 0usize;
    for d in deliveries {
        let counter = if d.result.is_ok() {
            &inner.stats.records_sent
        } else {
            &inner.stats.records_errored
        };
        counter.fetch_add(d.handles.len() as u64, Ordering::Relaxed);
        for (i, h) in d.handles.into_iter().enumerate() {
            n += 1;
            let r = match &d.result {
                Ok((base, append_time)) => Ok(DeliveredRecord {
                    topic: d.tp.topic.to_string(),
                    partition: d.tp.partition,
                    offset: if *base >= 0 { base + i as i64 } else { -1 },
                    timestamp_ms: if *append_time >= 0 {
                        *append_time
                    } else {
                        h.timestamp_ms
                    },
                    key_size: h.key_size,
                    value_size: h.value_size,
                }),
                Err(e) => Err(e.clone()),
            };
            h.completion.complete(r);
        }
    }
    if n > 0 {
        let before = inner.pending.fetch_sub(n, Ordering::AcqRel);
        if before <= n {
            let _g = inner.pending_lock.lock().unwrap_or_else(|p| p.into_inner());
            inner.pending_zero.notify_all();
        }
    }
}

/// Apply one Produce answer and complete its records' futures, on the
/// calling thread (the network driver's). Takes `state` with no network lock
/// held (driver callbacks run after the client's locks are released), the
/// same order as everywhere else: `state` may be held while taking the
/// network core's lock, never the reverse.
fn apply_produce_answer<B: EncodableBatch + Send + 'static, C: Completion>(
    inner: &Inner<B, C>,
    token: u64,
    result: Result<Vec<crate::producer::request::PartitionResult>, Error>,
) {
    let now = now_ms();
    let (done, refresh) = {
        let mut st = inner.state.lock().unwrap_or_else(|p| p.into_inner());
        let (d, r) = st.sender.on_response(token, result, now);
        if !d.is_empty() {
            inner.memory_freed.notify_all();
        }
        (d, r)
    };
    if refresh {
        inner.metadata.request_update();
        inner.net.wakeup();
    }
    complete_deliveries(inner, done);
}

/// Apply an InitProducerId answer, on the thread that read it (the driver's,
/// like Produce answers, so both are applied in the order they arrived).
fn apply_producer_id<B: EncodableBatch + Send + 'static, C: Completion>(
    inner: &Inner<B, C>,
    r: Result<(i64, i16), Error>,
) {
    let mut st = inner.state.lock().unwrap_or_else(|p| p.into_inner());
    st.init_in_flight = false;
    match r {
        Ok((id, epoch)) => st.sender.set_producer_id(id, epoch),
        Err(e)
            if !e.retriable()
                && st
                    .sender
                    .idempotence
                    .as_ref()
                    .is_some_and(|i| i.producer_id_and_epoch().is_valid()) =>
        {
            // A bump of our current id was refused (INVALID_PRODUCER_ID_MAPPING,
            // or a broker that restarted without its producer state and
            // answers UNKNOWN_SERVER_ERROR): not fatal for an idempotent
            // producer, a fresh id does the same job.
            st.sender.drop_producer_id();
        }
        Err(e) if !e.retriable() => {
            if let Some(idem) = st.sender.idempotence.as_mut() {
                idem.set_fatal(e.code());
            }
        }
        Err(_) => {}
    }
}

/// The sender thread: decide what to send, send it, fail expired batches.
fn run_sender<B: EncodableBatch + Send + 'static, C: Completion>(
    inner: Arc<Inner<B, C>>,
    rx: Receiver<Msg>,
) {
    let mut wait = Duration::from_millis(0);
    loop {
        // 1. Wait for a wake-up (an append, an answer applied by the
        // driver thread, flush, close) or the next linger/backoff expiry.
        match rx.recv_timeout(wait) {
            Ok(Msg::Wake) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Coalesce the wake-ups that piled up meanwhile: one poll serves them.
        while rx.try_recv().is_ok() {}
        let now = now_ms();

        let closing = inner.closing.load(Ordering::Acquire);
        // 2. Decide what to send.
        let cluster = inner.metadata.fetch();
        let net = &inner.net;
        let mut st = inner.state.lock().unwrap_or_else(|p| p.into_inner());
        if closing {
            // Close after flush: whatever is left fails now.
            let mut left: Vec<Delivery<RecordHandle<C>>> = st
                .sender
                .accumulator
                .abort_all()
                .into_iter()
                .map(|b| Delivery {
                    tp: b.tp.clone(),
                    handles: b.handles,
                    result: Err(Error::Closed { what: "producer" }),
                })
                .collect();
            left.extend(
                st.sender
                    .abort_in_flight(Error::Closed { what: "producer" }),
            );
            drop(st);
            complete_deliveries(&inner, left);
            return;
        }
        if st.sender.needs_producer_id() && !st.init_in_flight {
            if let Some(node) = net.least_loaded_node(now) {
                if net.ready(&node, now) {
                    st.init_in_flight = true;
                    let tx = inner.wake.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let id_inner = inner.clone();
                    let current = st
                        .sender
                        .idempotence
                        .as_ref()
                        .map(|i| i.producer_id_and_epoch())
                        .filter(|p| p.is_valid());
                    // v3+ bumps the epoch of the current id (KIP-360);
                    // older brokers ignore the fields we cannot send.
                    let body = RequestKind::InitProducerId(init_producer_id(
                        current.map(|p| (p.producer_id, p.epoch)),
                        4,
                    ));
                    let cb = Box::new(move |r: &ClientResponse| {
                        let out = match (&r.version_mismatch, r.disconnected, &r.body) {
                            (Some(e), _, _) => Err(e.clone()),
                            (_, true, _) => Err(r.error.clone().unwrap_or(Error::Disconnected {
                                node_id: r.destination,
                            })),
                            (_, _, Some(ResponseKind::InitProducerId(b))) if b.error_code == 0 => {
                                Ok((b.producer_id.0, b.producer_epoch))
                            }
                            (_, _, Some(ResponseKind::InitProducerId(b))) => {
                                Err(Error::broker(b.error_code, None))
                            }
                            _ => Err(Error::State {
                                detail: "unexpected InitProducerId answer".into(),
                            }),
                        };
                        apply_producer_id(&id_inner, out);
                        let _ = tx.send(Msg::Wake);
                    });
                    let req = net.new_client_request(node.id, body, true, Some(cb), now);
                    if net.send(req, now).is_err() {
                        st.init_in_flight = false;
                    }
                }
            }
        }
        let leader_of = |tp: &TopicPartition| cluster.leader_id_for(tp);
        let nodes: HashMap<i32, Node> = cluster.nodes().iter().map(|n| (n.id, n.clone())).collect();
        let mut node_ready = |id: i32| nodes.get(&id).is_some_and(|n| net.ready(n, now));
        let topic_id = |t: &str| cluster.topic_id(t);
        let out = st.sender.poll(now, &leader_of, &mut node_ready, &topic_id);
        // KIP-794: weight the sticky choice of each topic by how many batches
        // wait per available partition, so slow leaders get less new data.
        if inner.cfg.partitioner_adaptive && !st.sticky.is_empty() {
            let mut queued: HashMap<(&str, i32), usize> = HashMap::new();
            for (tp, n) in st.sender.accumulator.queue_sizes() {
                queued.insert((&*tp.topic, tp.partition), n);
            }
            let updates: Vec<(String, Vec<i32>, Vec<usize>)> = st
                .sticky
                .keys()
                .map(|t| {
                    let parts = cluster.available_partition_ids(t);
                    let sizes = parts
                        .iter()
                        .map(|p| queued.get(&(t.as_str(), *p)).copied().unwrap_or(0))
                        .collect();
                    (t.clone(), parts, sizes)
                })
                .collect();
            drop(queued);
            for (t, parts, sizes) in updates {
                if let Some(sp) = st.sticky.get_mut(&t) {
                    sp.update_load_stats(&parts, &sizes);
                }
            }
        }
        drop(st);
        for t in &out.unknown_leader_topics {
            inner.metadata.request_update_for_topic(t);
        }
        if !out.unknown_leader_topics.is_empty() {
            net.wakeup();
        }
        let failed = out.failed;
        for call in out.calls {
            let tx = inner.wake.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let token = call.token;
            let (nbatches, nbytes) = call
                .request
                .topic_data
                .iter()
                .flat_map(|t| t.partition_data.iter())
                .fold((0u64, 0u64), |(n, b), p| {
                    (n + 1, b + p.records.as_ref().map_or(0, |r| r.len() as u64))
                });
            inner.stats.requests.fetch_add(1, Ordering::Relaxed);
            inner.stats.batches.fetch_add(nbatches, Ordering::Relaxed);
            inner.stats.bytes_out.fetch_add(nbytes, Ordering::Relaxed);
            let sent_at = Instant::now();
            let stats_inner = inner.clone();
            let names: HashMap<[u8; 16], String> = call
                .request
                .topic_data
                .iter()
                .map(|t| (*t.topic_id.as_bytes(), t.name.0.to_string()))
                .collect();
            let cb = Box::new(move |r: &ClientResponse| {
                let result = match (&r.version_mismatch, r.disconnected, &r.body) {
                    (Some(e), _, _) => Err(e.clone()),
                    (_, true, _) => Err(r.error.clone().unwrap_or(Error::Disconnected {
                        node_id: r.destination,
                    })),
                    (_, _, Some(ResponseKind::Produce(p))) => {
                        Ok(parse_produce_response(p, &|id| names.get(id).cloned()))
                    }
                    // acks=0: completed when written.
                    (_, _, None) => Ok(Vec::new()),
                    _ => Err(Error::State {
                        detail: "unexpected Produce answer".into(),
                    }),
                };
                if result.is_ok() {
                    stats_inner
                        .stats
                        .record_latency(sent_at.elapsed().as_micros() as u64);
                }
                // Applied here, on the driver thread that read the answer,
                // not handed to the sender thread: one thread wake-up less
                // between the broker's answer and the record's future (ack
                // latency). The sender is woken afterwards, for what the
                // answer unblocked (retries, held-back batches, a bump).
                apply_produce_answer(&stats_inner, token, result);
                let _ = tx.send(Msg::Wake);
            });
            let req = net.new_client_request(
                call.node_id,
                RequestKind::Produce(call.request),
                call.expect_response,
                Some(cb),
                now,
            );
            if let Err(e) = net.send(req, now) {
                apply_produce_answer(&inner, token, Err(e));
            }
        }
        net.wakeup();
        complete_deliveries(&inner, failed);
        // Answers and appends wake us through the channel; a connection
        // becoming ready does not, so with held-back batches look again soon.
        let cap = if out.held_back { 2 } else { 100 };
        wait = Duration::from_millis(out.next_poll_delay_ms.clamp(1, cap) as u64);
    }
}
