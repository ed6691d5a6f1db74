//! The thread that runs the producer's state machine (`ProducerCore`), and
//! the glue that carries its actions out: requests to the network client,
//! answers back into the core, completed records to their futures.
//!
//! Nothing here decides anything (that is `core.rs`); this file only moves
//! requests and answers, reads the clock, and sleeps until the core's
//! `wake_at_ms` or a wake-up.
//!
//! Threads and locks (the reasoning the rest of the producer relies on):
//! * `core` (one mutex) guards the `ProducerCore` (accumulator, idempotence,
//!   partitioner). `send` holds it only to append; whoever steps holds it
//!   only for `step`; the thread polling the network client for
//!   `on_answer`. Nobody waits for I/O or calls user code under it.
//! * `stepping` (one mutex) is held across a step and the carrying out of
//!   its actions, so requests leave in the order the core drained them. The
//!   runner thread takes it; a thread that made a batch sendable (a `send`,
//!   an answer) takes it only if free (`try_lock`) and steps right there,
//!   else wakes the runner (`step_here_or_wake`). Taken before `core`,
//!   never while holding it.
//! * Actions are carried out after the lock is released, so completing a
//!   record's future (which may take the GIL to hand results to Python) never
//!   blocks another thread's `send`, and a slow Python callback never stalls
//!   the sender (callbacks are queued for `poll`). A `send` that steps the
//!   core itself carries out that step's actions, and waits for no other
//!   thread's.
//! * Network callbacks run with no network lock held on the thread polling
//!   the network client: the driver thread, or the application's thread in
//!   `Producer.poll` when it finds the answer waiting first (the GIL let go
//!   there; `BlockingClient::poll_pending`), one poller's callbacks after
//!   the previous one's.
//!   A Produce answer is applied right there (`apply_answer`) rather than
//!   queued for the runner thread, which saves a thread hop on every
//!   acknowledgement; what the answer unblocked is stepped right there or by
//!   the runner.
//!   Cost: completing a future that an asyncio task awaits takes the GIL, now
//!   on the polling thread.
//!   While a `send_batch` call holds `core` to append, neither the polling
//!   thread nor the runner waits for it: the answer is queued and the step
//!   marked as wanted, and the call applies and carries them out between
//!   slices of its appends (`handover.rs`, docs/semantics.md §5.11).
//! * Lock order everywhere: `core` before the network client's lock (`step`
//!   asks the `ClusterView`, i.e. `net.ready`, under `core`), never the
//!   reverse.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender as ChanSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ferrokafka_protocol::kafka_protocol::messages::{
    InitProducerIdRequest, RequestKind, ResponseKind,
};

use crate::blocking::{now_ms, BlockingClient};
use crate::cluster::{Cluster, Node, TopicPartition};
use crate::error::Error;
use crate::metadata::Metadata;
use crate::network_client::ClientResponse;
use crate::producer::config::ProducerConfig;
use crate::producer::core::{Action, Answer, ClusterView, ProducerCore, HELD_BACK_RECHECK_MS};
use crate::producer::handles::{count_records, RecordHandles};
use crate::producer::handover::Handover;
use crate::producer::request::parse_produce_response;
use crate::producer::sender::{Delivery, EncodableBatch, ProduceCall};
use crate::producer::txn::TxnRequest;

/// What a delivered record reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveredRecord {
    /// Shared with the partition's `TopicPartition`: one reference count
    /// per record instead of a copy of the name.
    pub topic: Arc<str>,
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key_size: i32,
    pub value_size: i32,
}

/// Completes one record's future. Called on the runner, a sending thread
/// or the thread polling the network client, with no producer lock held.
/// A completion may stand for a run of records (`RecordHandles`, one
/// record by default).
pub trait Completion: RecordHandles + Send + 'static {
    /// Keep the record's (create timestamp, key size, value size), what its
    /// outcome reports; called as its handle is made (again if a record is
    /// appended later, by the deferral thread). The completion keeps them,
    /// not the handle: handles are written on the calling thread and read
    /// on the completing one, so each byte of a handle is paid for on both
    /// threads (issue 17).
    /// An implementation keeps them where they cost least, or already has
    /// them (ferrokafka-py: a `send_batch` call took its records' sizes
    /// from its input before appending, and keeps one timestamp for all of
    /// them, so that its consecutive records can share one handle,
    /// `absorb`).
    ///
    /// By value, not `&mut self`: the completion then stays in registers
    /// until it is stored in the batch's list, where through a reference it
    /// was built on the stack in 4-byte pieces and copied out in wider
    /// loads, which stall (store forwarding fails; perf annotate).
    fn stamped(self, timestamp_ms: i64, key_size: i32, value_size: i32) -> Self;

    /// What `stamped` kept.
    fn meta(&self) -> (i64, i32, i32);

    fn complete(self, result: Result<DeliveredRecord, Error>);

    /// Complete the records of one finished batch, in order: record i is
    /// `handles[i]`, its result `finished.record(i, &handles[i])`. One call
    /// per batch lets an implementation share work between a batch's
    /// records (one lock and one stored run for records that share a
    /// state); the handles come as the batch kept them, so nothing is
    /// copied per record on the way.
    fn complete_all(handles: Vec<RecordHandle<Self>>, finished: &Finished<'_>)
    where
        Self: Sized,
    {
        // Positions advance by each handle's records; a completion that
        // absorbs others implements its own `complete_all`.
        let mut i = 0;
        for h in handles {
            let n = h.completion.records();
            let r = finished.record(i, h.meta());
            h.completion.complete(r);
            i += n;
        }
    }
}

/// A finished batch as `Completion::complete_all` sees it.
pub struct Finished<'a> {
    pub tp: &'a TopicPartition,
    /// Ok((base offset, log append time or -1)); record i has offset base + i.
    pub result: &'a Result<(i64, i64), Error>,
}

impl Finished<'_> {
    /// Record i's outcome, `meta` its (create timestamp, key size, value
    /// size) (`RecordHandle::meta`).
    pub fn record(&self, i: usize, meta: (i64, i32, i32)) -> Result<DeliveredRecord, Error> {
        DeliveredRecord::nth(&self.tp.topic, self.tp.partition, self.result, i, meta)
    }
}

impl DeliveredRecord {
    /// The k-th record of a run whose first record got `outcome` (Ok((its
    /// offset or -1, log append time or -1))); `meta` is the record's
    /// (create timestamp, key size, value size).
    pub fn nth(
        topic: &Arc<str>,
        partition: i32,
        outcome: &Result<(i64, i64), Error>,
        k: usize,
        meta: (i64, i32, i32),
    ) -> Result<DeliveredRecord, Error> {
        let (timestamp_ms, key_size, value_size) = meta;
        match outcome {
            Ok((first, append_time)) => Ok(DeliveredRecord {
                topic: topic.clone(),
                partition,
                offset: if *first >= 0 { first + k as i64 } else { -1 },
                timestamp_ms: if *append_time >= 0 {
                    *append_time
                } else {
                    timestamp_ms
                },
                key_size,
                value_size,
            }),
            Err(e) => Err(e.clone()),
        }
    }
}

/// Per-record data kept until its batch is answered: its completion, which
/// also keeps what the outcome reports (`Completion::stamped`).
pub struct RecordHandle<C> {
    pub completion: C,
}

/// A handle stands for what its completion stands for.
impl<C: Completion> RecordHandles for RecordHandle<C> {
    #[inline(always)]
    fn records(&self) -> usize {
        self.completion.records()
    }
    #[inline(always)]
    fn absorb(&mut self, next: Self) -> Result<(), Self> {
        self.completion
            .absorb(next.completion)
            .map_err(|completion| RecordHandle { completion })
    }
    fn split_off(&mut self, k: usize) -> Self {
        RecordHandle {
            completion: self.completion.split_off(k),
        }
    }
}

impl<C: Completion> RecordHandle<C> {
    #[inline(always)]
    pub(crate) fn new(
        completion: C,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
    ) -> Self {
        RecordHandle {
            completion: completion.stamped(
                timestamp_ms,
                key.map_or(-1, |k| k.len() as i32),
                value.map_or(-1, |v| v.len() as i32),
            ),
        }
    }

    /// The handle of a run of a call's records (`completion` stands for all
    /// of them), all with the call's `timestamp_ms`; their sizes are the
    /// completion's to keep (`Producer::send_many_until`).
    #[inline]
    pub(crate) fn run(completion: C, timestamp_ms: i64) -> Self {
        RecordHandle {
            completion: completion.stamped(timestamp_ms, -1, -1),
        }
    }

    /// (create timestamp, key size, value size): what its outcome reports.
    #[inline]
    pub fn meta(&self) -> (i64, i32, i32) {
        self.completion.meta()
    }
}

pub(crate) use crate::producer::stats::Stats;

pub(crate) type Core<B, C> = ProducerCore<B, RecordHandle<C>>;

/// What the producer facade, the runner thread and the network callbacks
/// share.
pub(crate) struct Shared<B, C> {
    pub(crate) cfg: ProducerConfig,
    pub(crate) core: Mutex<Core<B, C>>,
    /// Buffer memory was freed (`Action::MemoryFreed`); paired with `core`.
    pub(crate) memory_freed: Condvar,
    /// A transactional call may have its outcome (notified after every
    /// step and answer of a transactional producer); paired with `core`.
    pub(crate) txn_changed: Condvar,
    pub(crate) metadata: Arc<Metadata>,
    pub(crate) net: Arc<BlockingClient>,
    /// Wakes the runner thread: a new or full batch, an answer, flush, close.
    pub(crate) wake: ChanSender<()>,
    /// Records handed to `send` and not yet completed (for flush). Raised
    /// under `core` before the lock is released, so a completion (which
    /// follows the lock) can never count a record down first.
    pub(crate) pending: AtomicUsize,
    pub(crate) closing: AtomicBool,
    pub(crate) stats: Stats,
    /// Held by whoever steps the core and carries out the step's actions
    /// (the runner, or `step_here_or_wake`): one step at a time.
    pub(crate) stepping: Mutex<()>,
    /// When the runner will step next unless woken (ms), written under
    /// `stepping`.
    pub(crate) runner_wake_at: AtomicI64,
    /// Answers and steps left to a `send_batch` call holding `core`.
    pub(crate) handover: Handover,
}

impl<B, C> Shared<B, C> {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Core<B, C>> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, Core<B, C>>> {
        match self.core.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    pub(crate) fn wake(&self) {
        // Fails only once the runner has exited (close): nothing to wake.
        let _ = self.wake.send(());
    }
}

/// The cluster as the core sees it during one `step`: a metadata snapshot
/// and the network client's readiness at `now`.
struct LiveView<'a> {
    cluster: &'a Cluster,
    net: &'a BlockingClient,
    now: i64,
}

impl ClusterView for LiveView<'_> {
    fn leader_of(&self, tp: &TopicPartition) -> Option<i32> {
        self.cluster.leader_id_for(tp)
    }
    fn topic_id(&self, topic: &str) -> Option<[u8; 16]> {
        self.cluster.topic_id(topic)
    }
    fn available_partitions(&self, topic: &str) -> Vec<i32> {
        self.cluster.available_partition_ids(topic)
    }
    fn node_ready(&self, node: i32) -> bool {
        self.cluster
            .node_by_id(node)
            .is_some_and(|n| self.net.ready(n, self.now))
    }
    fn least_loaded_ready_node(&self) -> Option<i32> {
        let node = self.net.least_loaded_node(self.now)?;
        self.net.ready(&node, self.now).then_some(node.id)
    }
    fn node(&self, id: i32) -> Option<Node> {
        self.cluster.node_by_id(id).cloned()
    }
    fn node_ready_at(&self, node: &Node) -> bool {
        self.net.ready(node, self.now)
    }
}

/// The runner thread: step the core, carry out its actions, sleep until it
/// wants to be stepped again or something wakes it.
pub(crate) fn run<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: Arc<Shared<B, C>>,
    rx: Receiver<()>,
) {
    let mut wait = Duration::ZERO;
    loop {
        match rx.recv_timeout(wait) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // Coalesce the wake-ups that piled up meanwhile: one step serves them.
        while rx.try_recv().is_ok() {}
        let stepping = shared.stepping.lock().unwrap_or_else(|p| p.into_inner());
        let now = now_ms();
        if shared.closing.load(Ordering::Acquire) {
            // Close after flush: whatever is left fails now.
            let actions = shared.lock().abort_all(Error::Closed { what: "producer" });
            execute(&shared, actions, now);
            return;
        }
        if shared.handover.defer_step() {
            // A `send_batch` call holds the core: it steps at its next
            // slice (handover.rs). Look again soon, as for a held-back
            // batch: this thread's schedule (linger, timeouts) is stale
            // while it does not step, and a step elsewhere wakes it only
            // for a time before that schedule.
            wait = Duration::from_millis(HELD_BACK_RECHECK_MS as u64);
            continue;
        }
        let wake_at = step_and_execute(&shared, now);
        // Under `stepping`, so a step elsewhere after this one compares
        // its own wake-up time with this (`step_here_or_wake`).
        shared.runner_wake_at.store(wake_at, Ordering::Release);
        drop(stepping);
        wait = Duration::from_millis(wake_at.saturating_sub(now).max(1) as u64);
    }
}

/// One step of the core and its actions; returns when the core wants the
/// next. The caller holds `Shared::stepping`: the requests of one step are
/// sent before those of the next, as the core drained them.
fn step_and_execute<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    now: i64,
) -> i64 {
    let cluster = shared.metadata.fetch();
    let view = LiveView {
        cluster: &cluster,
        net: &shared.net,
        now,
    };
    let (step, txn) = {
        let mut core = shared.lock();
        let step = core.step(now, &view);
        (step, core.txn().is_some())
    };
    if txn {
        // A step can settle a call too (an empty transaction ends
        // without a request; a fatal error fails the call).
        shared.txn_changed.notify_all();
    }
    // No wake-up of the network driver here: the actions that need it
    // wake it themselves (metadata requests; a request completed
    // locally, see `BlockingClient::send_polled`), and the rest it
    // notices within `DRIVER_POLL` (a connection `node_ready` started,
    // a request's timeout). Waking it after every step cost a context
    // switch per step.
    execute(shared, step.actions, now);
    step.wake_at_ms
}

/// What made a batch sendable (an append, an answer) steps the core on its
/// own thread when no step is under way, instead of waking the runner to do
/// it: a thread hop less between a record and its request (and between an
/// answer and the next request). The runner is woken only if this step
/// wants the core stepped again sooner than the runner will look (its
/// `wake_at`), or when another step is under way (it may have drained
/// before this thread's append: the runner steps again after it).
///
/// Why: at 10k records a second with linger 0 on a 2-core machine, each
/// hop to the runner cost ~25 µs of the acknowledgement's round trip
/// (perf sched, issue 17). Steps stay one at a time (`stepping`), so
/// requests leave in the order the core drained them.
///
/// The calling thread may hold the GIL: nothing a step waits for (the
/// core's and the network client's locks) is held by a thread that waits
/// for the GIL, and the completions of failed batches it makes take the
/// GIL on this thread, which may hold it already.
pub(crate) fn step_here_or_wake<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
) {
    if shared.closing.load(Ordering::Acquire) {
        return shared.wake();
    }
    if shared.handover.defer_step() {
        return;
    }
    let Ok(stepping) = shared.stepping.try_lock() else {
        return shared.wake();
    };
    let wake_at = step_and_execute(shared, now_ms());
    let runner_at = shared.runner_wake_at.load(Ordering::Acquire);
    drop(stepping);
    if wake_at < runner_at {
        shared.wake();
    }
}

/// `Producer::purge`, on the calling thread: the purged records complete
/// here (their callbacks queued for the application's next poll).
pub(crate) fn purge<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    in_queue: bool,
    in_flight: bool,
) {
    let actions = shared.lock().purge(in_queue, in_flight);
    execute(shared, actions, now_ms());
}

/// Carry out the core's actions, in order, with no producer lock held.
fn execute<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    actions: Vec<Action<RecordHandle<C>>>,
    now: i64,
) {
    for action in actions {
        match action {
            Action::Produce(call) => send_produce(shared, call, now),
            Action::InitProducerId {
                node_id,
                tag,
                request,
            } => send_init_producer_id(shared, node_id, tag, request, now),
            Action::Txn(request) => send_txn(shared, request, now),
            Action::UpdateTopics(topics) => {
                for t in &topics {
                    shared.metadata.request_update_for_topic(t);
                }
                shared.net.wakeup();
            }
            Action::UpdateMetadata => {
                shared.metadata.request_update();
                shared.net.wakeup();
            }
            Action::MemoryFreed => shared.memory_freed.notify_all(),
            Action::Complete(deliveries) => complete_deliveries(shared, deliveries),
        }
    }
}

/// Apply one answer on the calling thread (the network driver's, for both
/// kinds of request, so answers are applied in the order they arrived), then
/// step for what it unblocked (retries, held-back batches, a bump) if the
/// core has anything for a step (`ProducerCore::has_work`), here or on the
/// runner (`step_here_or_wake`): stepped after every answer, the runner
/// went over an empty accumulator once a record when records go out one at
/// a time, a context switch each on a machine whose other core the
/// application keeps busy (issue 17).
///
/// While a `send_batch` call holds the core, the answer is left to it
/// instead of waiting for the lock (handover.rs); answers queued before this
/// one are applied first, by whichever thread applies them.
fn apply_answer<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    tag: u64,
    result: Result<Answer, Error>,
) {
    let mut answer = Some((tag, result));
    let mut core = loop {
        if let Some(core) = shared.try_lock() {
            break core;
        }
        if !shared.handover.is_appending() {
            break shared.lock();
        }
        if let Some(a) = answer.take() {
            if shared.handover.queue(a) {
                return;
            }
        } else if shared.handover.is_appending() {
            // Queued before, and the appender took the lock back (it
            // takes the queue when it lets go).
            return;
        }
    };
    let now = now_ms();
    let mut answers = shared.handover.take();
    answers.extend(answer);
    let handed = apply_answers(&mut core, answers, false, now);
    drop(core);
    carry_out(shared, handed, now);
}

/// What applying answers (and a wanted step) leaves to do once the core's
/// lock is let go (`carry_out`).
pub(crate) struct Handed<C: Completion> {
    actions: Vec<Action<RecordHandle<C>>>,
    /// Answers were applied to a transactional producer.
    txn: bool,
    pub(crate) step: bool,
}

impl<C: Completion> Handed<C> {
    pub(crate) fn is_empty(&self) -> bool {
        self.actions.is_empty() && !self.txn && !self.step
    }
}

/// Apply `answers` in order to the core (its lock held). `step`: a step
/// was wanted besides what the answers leave.
fn apply_answers<B: EncodableBatch + Send + 'static, C: Completion>(
    core: &mut Core<B, C>,
    answers: Vec<crate::producer::handover::QueuedAnswer>,
    step: bool,
    now: i64,
) -> Handed<C> {
    let any = !answers.is_empty();
    let mut actions = Vec::new();
    for (tag, result) in answers {
        actions.extend(core.on_answer(tag, result, now));
    }
    Handed {
        actions,
        txn: any && core.txn().is_some(),
        step: step || (any && core.has_work()),
    }
}

/// A `send_batch` call is about to let go of the core (its lock held):
/// what was left to it (handover.rs), applied now; carry it out after
/// letting go (`carry_out`).
pub(crate) fn end_hold<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Shared<B, C>,
    core: &mut Core<B, C>,
) -> Handed<C> {
    let (answers, step) = shared.handover.end();
    apply_answers(core, answers, step, now_ms())
}

/// The actions of applied answers, and the step they or another thread
/// wanted, with no lock held.
pub(crate) fn carry_out<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    handed: Handed<C>,
    now: i64,
) {
    if handed.txn {
        shared.txn_changed.notify_all();
    }
    execute(shared, handed.actions, now);
    if handed.step {
        step_here_or_wake(shared);
    }
}

/// The request got no usable answer: the error to hand the core.
fn no_answer(r: &ClientResponse) -> Option<Error> {
    if let Some(e) = &r.version_mismatch {
        return Some(e.clone());
    }
    r.disconnected.then(|| {
        r.error.clone().unwrap_or(Error::Disconnected {
            node_id: r.destination,
        })
    })
}

fn send_init_producer_id<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    node_id: i32,
    tag: u64,
    request: InitProducerIdRequest,
    now: i64,
) {
    let cb_shared = shared.clone();
    let cb = Box::new(move |r: &ClientResponse| {
        let answer = match (no_answer(r), &r.body) {
            (Some(e), _) => Err(e),
            (None, Some(ResponseKind::InitProducerId(b))) if b.error_code == 0 => {
                Ok(Answer::ProducerId {
                    producer_id: b.producer_id.0,
                    epoch: b.producer_epoch,
                })
            }
            (None, Some(ResponseKind::InitProducerId(b))) => Err(Error::broker(b.error_code, None)),
            _ => Err(Error::State {
                detail: "unexpected InitProducerId answer".into(),
            }),
        };
        apply_answer(&cb_shared, tag, answer);
    });
    let net = &shared.net;
    let req = net.new_client_request(
        node_id,
        RequestKind::InitProducerId(request),
        true,
        Some(cb),
        now,
    );
    if let Err(e) = net.send_polled(req, now) {
        let actions = shared.lock().on_send_failed(tag, e, now);
        execute(shared, actions, now);
    }
}

/// Send a transactional request (the core checked its node is ready), its
/// body built for the version both sides support.
fn send_txn<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    req: TxnRequest,
    now: i64,
) {
    let tag = req.tag;
    let cb_shared = shared.clone();
    let cb = Box::new(move |r: &ClientResponse| {
        let answer = match (no_answer(r), &r.body) {
            (Some(e), _) => Err(e),
            (None, Some(body)) => Ok(Answer::Txn(Box::new(body.clone()))),
            (None, None) => Err(Error::State {
                detail: "transactional request got no answer body".into(),
            }),
        };
        apply_answer(&cb_shared, tag, answer);
    });
    let sent = {
        let mut core = shared.net.core();
        match core.usable_version(req.node.id, req.api_key, req.max_version) {
            Some(v) => {
                let mut cr =
                    core.new_client_request(req.node.id, (req.build)(v), true, Some(cb), now);
                // Built for `v`: it must go out at exactly `v`.
                cr.max_version = Some(v);
                core.send(cr, now)
            }
            None => {
                let range = core.api_versions(req.node.id).get(&req.api_key).copied();
                Err(Error::UnsupportedVersion {
                    api: format!("api key {}", req.api_key),
                    node_id: req.node.id,
                    broker_min: range.map_or(-1, |r| r.0),
                    broker_max: range.map_or(-1, |r| r.1),
                    client_min: 0,
                    client_max: req.max_version.unwrap_or(-1),
                })
            }
        }
    };
    // Rare requests: wake the driver so the request goes out now.
    shared.net.wakeup();
    if let Err(e) = sent {
        let actions = shared.lock().on_send_failed(tag, e, now);
        execute(shared, actions, now);
        shared.wake();
    }
}

fn send_produce<B: EncodableBatch + Send + 'static, C: Completion>(
    shared: &Arc<Shared<B, C>>,
    mut call: ProduceCall,
    now: i64,
) {
    let tag = call.token;
    // Compression and CRC of the new batches, here with no producer lock
    // held (`step` only took their builders out), so `send` never waits
    // for them.
    if let Err(e) = call.fill_encoded() {
        let actions = shared.lock().on_send_failed(tag, e, now);
        execute(shared, actions, now);
        return;
    }
    let stats = &shared.stats;
    let (mut nbatches, mut nbytes) = (0u64, 0u64);
    for t in &call.request.topic_data {
        let (n, b) = t.partition_data.iter().fold((0u64, 0u64), |(n, b), p| {
            (n + 1, b + p.records.as_ref().map_or(0, |r| r.len() as u64))
        });
        // Java's per-topic byte-total (one lock per topic per request).
        stats.topic_bytes(t.name.0.as_str(), b);
        nbatches += n;
        nbytes += b;
    }
    stats.requests.fetch_add(1, Ordering::Relaxed);
    stats.batches.fetch_add(nbatches, Ordering::Relaxed);
    stats.bytes_out.fetch_add(nbytes, Ordering::Relaxed);
    // Produce v13+ answers carry topic ids only: keep the names to map back.
    let names: HashMap<[u8; 16], String> = call
        .request
        .topic_data
        .iter()
        .map(|t| (*t.topic_id.as_bytes(), t.name.0.to_string()))
        .collect();
    let sent_at = Instant::now();
    let cb_shared = shared.clone();
    let cb = Box::new(move |r: &ClientResponse| {
        let answer = match (no_answer(r), &r.body) {
            (Some(e), _) => Err(e),
            (None, Some(ResponseKind::Produce(p))) => {
                Ok(Answer::Produce(parse_produce_response(p, &|id| {
                    names.get(id).cloned()
                })))
            }
            // acks=0: completed when written.
            (None, None) => Ok(Answer::Produce(Vec::new())),
            _ => Err(Error::State {
                detail: "unexpected Produce answer".into(),
            }),
        };
        if answer.is_ok() {
            cb_shared
                .stats
                .record_latency(sent_at.elapsed().as_micros() as u64);
        }
        apply_answer(&cb_shared, tag, answer);
    });
    let net = &shared.net;
    let req = net.new_client_request(
        call.node_id,
        RequestKind::Produce(call.request),
        call.expect_response,
        Some(cb),
        now,
    );
    if let Err(e) = net.send_polled(req, now) {
        let actions = shared.lock().on_send_failed(tag, e, now);
        execute(shared, actions, now);
    }
}

/// Complete the records of finished batches, then count them off `pending`
/// (waking flushers at zero): a flush returns only once every record's
/// future has its result.
fn complete_deliveries<B, C: Completion>(
    shared: &Shared<B, C>,
    deliveries: Vec<Delivery<RecordHandle<C>>>,
) {
    let mut n = 0usize;
    for d in deliveries {
        let counter = if d.result.is_ok() {
            &shared.stats.records_sent
        } else {
            &shared.stats.records_errored
        };
        let records = count_records(&d.handles);
        counter.fetch_add(records as u64, Ordering::Relaxed);
        shared
            .stats
            .topic_records(&d.tp.topic, records as u64, d.result.is_ok());
        n += records;
        let finished = Finished {
            tp: &d.tp,
            result: &d.result,
        };
        C::complete_all(d.handles, &finished);
    }
    if n > 0 {
        let before = shared.pending.fetch_sub(n, Ordering::AcqRel);
        if before <= n {
            // Flushes wait on the network client's events for `pending` to
            // reach zero (`Producer::flush_step`), checking it under the
            // event queue's lock before they sleep: this wake-up, which
            // takes that lock after the decrement above, cannot fall
            // between their check and their sleep. It notifies only when a
            // thread waits there (no syscall per answer otherwise, issue 17).
            shared.net.wake_answer_waiters();
        }
    }
}
