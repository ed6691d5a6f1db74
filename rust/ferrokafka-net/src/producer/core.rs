//! The producer's orchestration as a sans-IO state machine: what `send`
//! appends where, when a batch is sendable, which request goes to which
//! broker, and what each answer means for the records waiting on it.
//!
//! `ProducerCore` reads no clock, starts no thread and takes no lock: time
//! comes in as `now_ms`, the cluster (leaders, which connections may take a
//! request) through a `ClusterView`, and everything it wants done goes out as
//! `Action`s. The thread that runs it (`producer::runner`) only moves
//! requests and answers and sleeps until `Step::wake_at_ms` or a wake-up, so
//! every ordering rule of docs/semantics.md §5 is decided here, where the unit
//! tests (`core/tests.rs`) can drive it with fake answers and a fake clock.
//!
//! The loop is `step` (expire, InitProducerId, drain ready batches into
//! Produce requests) and `on_answer` (apply one answer); both return actions.
//! `append` is the one path by which records enter, for `send` and
//! `send_many` alike: size check, partition choice, accumulator append.

use std::collections::HashMap;

use ferrokafka_protocol::kafka_protocol::messages::InitProducerIdRequest;
use rand::rngs::StdRng;

use crate::cluster::{Node, TopicPartition};
use crate::error::Error;
use crate::producer::accumulator::{
    AccumulatorConfig, AppendError, Extended, RecordAccumulator, RecordRef,
};
use crate::producer::config::ProducerConfig;
use crate::producer::handles::RecordHandles;
use crate::producer::idempotence::codes;
use crate::producer::partitioner::{PartitionChoice, Partitioners};
use crate::producer::request::{init_producer_id, PartitionResult};
use crate::producer::sender::{Delivery, EncodableBatch, ProduceCall, Sender, SenderConfig};
use crate::producer::txn::{TransactionManager, TxnRequest};

/// InitProducerId version whose fields we fill: v3+ can bump the epoch of
/// the current id (KIP-360); the network client downgrades to what the
/// broker supports and older versions ignore the fields they lack.
const INIT_PRODUCER_ID_VERSION: i16 = 4;

/// Longest sleep while something is held back for a reason that may clear
/// without waking the runner (a connection becoming ready). Short, because
/// the batch is otherwise ready to go.
pub const HELD_BACK_RECHECK_MS: i64 = 2;

/// Longest sleep otherwise: metadata arriving (a leader becoming known) and
/// queued batches reaching `delivery_timeout_ms` do not wake the runner
/// either, and are noticed within this.
pub const IDLE_RECHECK_MS: i64 = 100;

/// Upper bound of one record's encoded size: the batch header (61 bytes, for
/// a record that opens a batch), the record's own framing (varints of at
/// most 5 bytes each), the key, the value and each header's framing and bytes.
pub fn record_size(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&str, Option<&[u8]>)],
) -> usize {
    61 + 21
        + key.map_or(0, |k| k.len())
        + value.map_or(0, |v| v.len())
        + headers
            .iter()
            .map(|(k, v)| 10 + k.len() + v.map_or(0, |v| v.len()))
            .sum::<usize>()
}

/// What the core may ask about the cluster while it decides. The runner's
/// view is a metadata snapshot plus the network client's readiness; tests
/// use fixed tables. Nothing here may block.
pub trait ClusterView {
    /// The partition's leader, `None` when unknown.
    fn leader_of(&self, tp: &TopicPartition) -> Option<i32>;
    /// Topic id for Produce v13+ (`None`: send the name).
    fn topic_id(&self, topic: &str) -> Option<[u8; 16]>;
    /// Partitions of `topic` with a reachable leader (KIP-794 load stats).
    fn available_partitions(&self, topic: &str) -> Vec<i32>;
    /// May a request go to `node` now (connected, under its in-flight cap)?
    /// May start connecting as a side effect, as Java's `ready` does.
    fn node_ready(&self, node: i32) -> bool;
    /// A node that may take a request now for one any broker can answer
    /// (InitProducerId), if there is one.
    fn least_loaded_ready_node(&self) -> Option<i32>;
    /// The node with this id as metadata knows it (host and port).
    fn node(&self, id: i32) -> Option<Node>;
    /// May a request go to `node` now? For a coordinator that
    /// FindCoordinator named, which metadata may not list yet; starts
    /// connecting as a side effect.
    fn node_ready_at(&self, node: &Node) -> bool {
        self.node_ready(node.id)
    }
}

/// An answer to a request the core asked for.
#[derive(Debug)]
pub enum Answer {
    /// The per-partition results of a Produce request (empty for acks=0,
    /// which completes when written).
    Produce(Vec<PartitionResult>),
    ProducerId {
        producer_id: i64,
        epoch: i16,
    },
    /// The answer to a transactional request (`Action::Txn`).
    Txn(Box<ferrokafka_protocol::kafka_protocol::messages::ResponseKind>),
}

/// What the core wants done. The runner carries these out in order, with no
/// producer lock held.
#[derive(Debug)]
pub enum Action<T> {
    /// Send this Produce request; its answer goes to `on_answer(call.token)`
    /// (`expect_response` false, acks=0: answer `Ok(Answer::Produce(vec![]))`
    /// once written).
    Produce(ProduceCall),
    /// Send InitProducerId to `node_id`; its answer goes to `on_answer(tag)`.
    InitProducerId {
        node_id: i32,
        tag: u64,
        request: InitProducerIdRequest,
    },
    /// Send this transactional request (FindCoordinator, InitProducerId,
    /// AddPartitionsToTxn, ...; docs/semantics.md §7); its answer goes to
    /// `on_answer(request.tag)` as `Answer::Txn`.
    Txn(TxnRequest),
    /// These topics have batches but no known leader: ask metadata for them.
    UpdateTopics(Vec<String>),
    /// A Produce error said our metadata is stale: refresh it.
    UpdateMetadata,
    /// Buffer memory was given back: wake `send`s waiting for it.
    MemoryFreed,
    /// These batches are finished: complete their records' futures.
    Complete(Vec<Delivery<T>>),
}

/// The outcome of `step`: actions, and when to step again at the latest
/// (absolute, in the caller's `now_ms` clock).
#[derive(Debug)]
pub struct Step<T> {
    pub actions: Vec<Action<T>>,
    pub wake_at_ms: i64,
}

/// What `append` knows of the record's topic (from metadata).
#[derive(Debug, Clone, Copy)]
pub struct TopicInfo<'a> {
    pub num_partitions: usize,
    /// Partitions with a reachable leader, for the sticky partitioner.
    pub available: &'a [i32],
}

/// Why `append` did not take a record; the record's handle comes back.
#[derive(Debug)]
pub enum Refused<T> {
    /// `buffer_memory` is used up: wait for `Action::MemoryFreed` (up to
    /// max_block_ms), then append again.
    NeedMemory(T),
    /// The record can never be appended (too large, bad partition).
    Failed(Error, T),
}

pub struct ProducerCore<B, T> {
    cfg: ProducerConfig,
    sender: Sender<B, T>,
    partitioner: Partitioners,
    /// Tag of the InitProducerId request in flight, if any: one at a time.
    init_tag: Option<u64>,
    /// The topic of the last append, shared: most producers send to one
    /// topic (or a few in turn), so `append` clones this instead of
    /// allocating the name for every record's `TopicPartition`.
    last_topic: Option<std::sync::Arc<str>>,
    new_builder: Box<dyn Fn(usize) -> B + Send + Sync>,
    /// Transactions (`transactional_id` set): the coordinator's state
    /// machine, consulted on every append, drain and answer.
    txn: Option<TransactionManager>,
    /// A commit holds a flush (no linger) until the transaction ends.
    txn_flushing: bool,
}

impl<B: EncodableBatch, T: RecordHandles> ProducerCore<B, T> {
    /// `rng` drives the sticky partitioner (seeded in tests);
    /// `new_builder(capacity)` opens a batch.
    pub fn new(
        cfg: ProducerConfig,
        rng: StdRng,
        new_builder: Box<dyn Fn(usize) -> B + Send + Sync>,
    ) -> Self {
        let acc = RecordAccumulator::new(AccumulatorConfig {
            batch_size: cfg.batch_size,
            linger_ms: cfg.linger_ms,
            retry_backoff_ms: cfg.retry_backoff_ms,
            retry_backoff_max_ms: cfg.retry_backoff_max_ms,
            delivery_timeout_ms: cfg.delivery_timeout_ms,
            buffer_memory: cfg.buffer_memory,
        });
        let mut sender = Sender::new(
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
        let txn = cfg.transactional_id.as_deref().map(|id| {
            TransactionManager::new(id, cfg.transaction_timeout_ms, cfg.retry_backoff_ms)
        });
        sender.transactional_id = cfg.transactional_id.clone();
        ProducerCore {
            partitioner: Partitioners::new(cfg.partitioner, cfg.batch_size, rng),
            cfg,
            sender,
            init_tag: None,
            last_topic: None,
            new_builder,
            txn,
            txn_flushing: false,
        }
    }

    /// The transaction manager, when the producer is transactional.
    pub fn txn(&self) -> Option<&TransactionManager> {
        self.txn.as_ref()
    }

    /// The outcome of transactional call `op`, once decided.
    pub fn txn_call_outcome(&mut self, op: crate::producer::txn::Op) -> Option<Result<(), Error>> {
        self.txn.as_mut()?.take_outcome(op)
    }

    /// Start or continue a transactional call (`f` on the manager); the
    /// runner must step afterwards. Errors: not transactional, or the call
    /// is not allowed in the current state.
    pub fn txn_call(
        &mut self,
        f: impl FnOnce(&mut TransactionManager) -> Result<(), Error>,
    ) -> Result<(), Error> {
        match self.txn.as_mut() {
            Some(t) => f(t),
            None => Err(Error::State {
                detail:
                    "transactional calls need a transactional_id in the producer's configuration"
                        .into(),
            }),
        }
    }

    pub fn config(&self) -> &ProducerConfig {
        &self.cfg
    }

    /// The one append path of `send` and `send_many`: size check, partition
    /// choice (`Partitioner::partition`), append to the partition's open
    /// batch. `Ok(true)` when the runner should step now: the record opened
    /// a batch (its linger timer starts, and a previous batch of the
    /// partition was sealed) or filled one, so something may be sendable
    /// before the runner's current wake time.
    ///
    /// `Ok(false)` for every other record, including records appended while
    /// earlier batches of the partition wait (Java wakes its sender for
    /// those too): the runner already knows about those batches: it either
    /// sends them, or holds them back for a reason whose end wakes it (an
    /// answer frees an in-flight slot or unmutes the partition) or that it
    /// rechecks on its own (`HELD_BACK_RECHECK_MS`). Waking it per record
    /// cost a futex wake and a context switch per `send`.
    pub fn append(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        info: TopicInfo<'_>,
        record: &RecordRef<'_>,
        handle: T,
        now_ms: i64,
    ) -> Result<bool, Refused<T>> {
        let size = record_size(record.key, record.value, record.headers);
        let cfg = &self.cfg;
        if size > cfg.max_request_size || size > cfg.buffer_memory {
            // Java's RecordTooLargeException.
            let e = Error::broker(
                codes::MESSAGE_TOO_LARGE,
                Some(format!(
                    "the record is {size} bytes, more than max_request_size ({}) or buffer_memory ({})",
                    cfg.max_request_size, cfg.buffer_memory
                )),
            );
            return Err(Refused::Failed(e, handle));
        }
        let choice = match self.partitioner.partition(
            topic,
            partition,
            record.key,
            info.num_partitions,
            info.available,
        ) {
            Ok(c) => c,
            Err(e) => return Err(Refused::Failed(e, handle)),
        };
        let name = match &self.last_topic {
            Some(t) if **t == *topic => t.clone(),
            _ => {
                let t: std::sync::Arc<str> = topic.into();
                self.last_topic = Some(t.clone());
                t
            }
        };
        let tp = TopicPartition::new(name, choice.partition);
        if let Some(txn) = self.txn.as_mut() {
            // Java's `maybeAddPartition`: refused outside a transaction;
            // a first record of a partition queues its AddPartitionsToTxn.
            if let Err(e) = txn.maybe_add_partition(&tp) {
                return Err(Refused::Failed(e, handle));
            }
        }
        match self
            .sender
            .accumulator
            .append(&tp, record, size, handle, now_ms, &self.new_builder)
        {
            Ok(a) => {
                self.partitioner.on_append(topic, choice, a.bytes);
                Ok(a.new_batch || a.became_sendable)
            }
            Err(AppendError::NeedMemory { handle, .. }) => Err(Refused::NeedMemory(handle)),
            Err(AppendError::DoesNotFit(h)) => Err(Refused::Failed(
                Error::State {
                    detail: "record does not fit an empty batch".into(),
                },
                h,
            )),
        }
    }

    /// The run path of `send_many`: right after `append` put record `after`
    /// of `topic` into a batch, append the call's next records (`record(i)` for
    /// `i` in `range`) to that same open batch while each would have gone
    /// there record by record: the same explicit `partition`, or, without
    /// one, no key and the sticky partition not due to switch. Stops at the
    /// first record that would not (a key, a record too large, the batch
    /// full or out of memory), which the caller appends on the general path.
    ///
    /// What it saves per record is everything `append` repeats for the same
    /// outcome: the partitioner's topic lookup, the topic compare, the
    /// `TopicPartition` reference count, the transaction check and the
    /// queue lookup; the partitioner is told the run's bytes once, with the
    /// run stopping where a record-by-record count would have switched.
    /// The run also stops once it has appended `max_bytes` (encoded).
    /// Returns the records appended (`handle(i)` made for each, or one
    /// `run(range)` for all: `RecordAccumulator::extend_open`), their
    /// bytes, and whether the runner should step (the run filled the batch).
    #[allow(clippy::too_many_arguments)]
    pub fn extend_run<'a>(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        after: &RecordRef<'_>,
        range: std::ops::Range<usize>,
        record: impl Fn(usize) -> RecordRef<'a>,
        handle: impl FnMut(usize, &RecordRef<'a>) -> T,
        run: Option<&mut (dyn FnMut(std::ops::Range<usize>) -> T + '_)>,
        max_bytes: usize,
    ) -> Extended {
        let kind = self.partitioner.kind();
        // `after` must have taken the same way (explicit, or sticky): a
        // keyed record before leaves the sticky partition unchecked against
        // the partitions available, which `append` does.
        if partition.is_none() && !kind.is_sticky(after.key) {
            return Extended::default();
        }
        let Some(name) = self.last_topic.as_ref().filter(|t| ***t == *topic) else {
            return Extended::default();
        };
        let (p, left) = match partition {
            Some(p) => (p, usize::MAX),
            None => match self.partitioner.sticky_run(topic) {
                Some(run) => run,
                None => return Extended::default(),
            },
        };
        let tp = TopicPartition::new(name.clone(), p);
        if let Some(txn) = self.txn.as_mut() {
            if txn.maybe_add_partition(&tp).is_err() {
                return Extended::default();
            }
        }
        let max = self.cfg.max_request_size.min(self.cfg.buffer_memory);
        let eligible = |i: usize| {
            let r = record(i);
            let size = record_size(r.key, r.value, r.headers);
            (size <= max && (partition.is_some() || kind.is_sticky(r.key))).then_some((r, size))
        };
        let ext = self.sender.accumulator.extend_open(
            &tp,
            range,
            eligible,
            handle,
            run,
            left.min(max_bytes),
        );
        if partition.is_none() && ext.appended > 0 {
            let choice = PartitionChoice {
                partition: p,
                sticky: true,
            };
            self.partitioner.on_append(topic, choice, ext.bytes);
        }
        ext
    }

    /// An appender starts (`true`) or stops waiting for memory. While any
    /// waits, every batch is sendable now, so memory comes back sooner
    /// (Java's "exhausted" readiness), and answers that free memory say so
    /// (`Action::MemoryFreed`). Counted, so that one of several waiters
    /// giving up does not leave the others unannounced.
    pub fn memory_waiter(&mut self, waiting: bool) {
        self.sender.accumulator.memory_waiter(waiting);
    }

    /// Whether a `step` may have anything to do now besides what its timer
    /// is for: batches queued, a producer id or bump to ask for, a
    /// transaction under way. An answer leads to a step only then
    /// (`runner::apply_answer`); an append, flush or close asks for one
    /// itself.
    pub fn has_work(&self) -> bool {
        self.txn.is_some()
            || self.init_tag.is_some()
            || self.sender.needs_producer_id()
            || self.sender.accumulator.has_undrained()
    }

    /// A flush is in progress: every batch is sendable now (no linger).
    pub fn begin_flush(&mut self) {
        self.sender.accumulator.begin_flush();
    }

    pub fn end_flush(&mut self) {
        self.sender.accumulator.end_flush();
    }

    pub fn free_memory(&self) -> usize {
        self.sender.accumulator.free_memory()
    }

    pub fn in_flight_batches(&self) -> usize {
        self.sender.in_flight_batches()
    }

    /// Decide what to do at `now_ms`: fail batches past delivery_timeout_ms,
    /// ask for a producer id (or an epoch bump) when idempotence needs one,
    /// drain sendable batches into Produce requests for ready leaders.
    pub fn step(&mut self, now_ms: i64, view: &dyn ClusterView) -> Step<T> {
        let mut actions = Vec::new();
        // Idempotence: a producer id first (and a bump only once nothing is
        // in flight: `needs_producer_id` says so, docs/semantics.md §5.5).
        // `Sender::poll` drains nothing while it is missing.
        let mut init_waits = false;
        let mut txn_wake: Option<i64> = None;
        if self.txn.is_some() {
            txn_wake = self.step_txn(now_ms, view, &mut actions);
        } else if self.sender.needs_producer_id() && self.init_tag.is_none() {
            match view.least_loaded_ready_node() {
                Some(node_id) => {
                    let tag = self.sender.allocate_tag();
                    let current = self
                        .sender
                        .idempotence
                        .as_ref()
                        .map(|i| i.producer_id_and_epoch())
                        .filter(|p| p.is_valid())
                        .map(|p| (p.producer_id, p.epoch));
                    self.init_tag = Some(tag);
                    actions.push(Action::InitProducerId {
                        node_id,
                        tag,
                        request: init_producer_id(current, INIT_PRODUCER_ID_VERSION),
                    });
                }
                None => init_waits = true,
            }
        }
        let txn = self.txn.as_ref();
        let out = self.sender.poll_filtered(
            now_ms,
            &|tp| view.leader_of(tp),
            &mut |node| view.node_ready(node),
            &|topic| view.topic_id(topic),
            // Transactional: only partitions the coordinator has added.
            &|tp| txn.is_none_or(|t| t.may_drain(tp)),
        );
        if self.cfg.partitioner_adaptive && self.partitioner.has_sticky_topics() {
            // KIP-794: weight each topic's sticky choice by how many batches
            // wait per available partition, so slow leaders get less data.
            let mut queued: HashMap<(&str, i32), usize> = HashMap::new();
            for (tp, n) in self.sender.accumulator.queue_sizes() {
                queued.insert((&*tp.topic, tp.partition), n);
            }
            self.partitioner.update_load_stats(
                &mut |topic| view.available_partitions(topic),
                &|topic, p| queued.get(&(topic, p)).copied().unwrap_or(0),
            );
        }
        if !out.unknown_leader_topics.is_empty() {
            let mut topics: Vec<String> = out.unknown_leader_topics.into_iter().collect();
            topics.sort_unstable();
            actions.push(Action::UpdateTopics(topics));
        }
        actions.extend(out.calls.into_iter().map(Action::Produce));
        if !out.failed.is_empty() {
            if let Some(txn) = self.txn.as_mut() {
                // Expired or unencodable batches of a transaction doom it.
                if let Some(e) = out.failed.iter().find_map(|d| d.result.as_ref().err()) {
                    txn.on_batch_failed(e);
                }
            }
            // Expired, aborted or unencodable batches gave their memory back.
            actions.push(Action::MemoryFreed);
            actions.push(Action::Complete(out.failed));
        }
        // Answers and appends wake the runner; a connection becoming ready
        // does not, so with something held back for one look again soon.
        // Waiting for a node to ask for an id counts only with records
        // queued behind it: an idle producer need not poll the network.
        let held_back = out.held_back || (init_waits && self.sender.accumulator.has_undrained());
        let cap = if held_back {
            HELD_BACK_RECHECK_MS
        } else {
            IDLE_RECHECK_MS
        };
        let mut wake_at_ms = now_ms.saturating_add(out.next_poll_delay_ms.clamp(1, cap));
        if let Some(t) = txn_wake {
            wake_at_ms = wake_at_ms.min(t.max(now_ms + 1));
        }
        Step {
            actions,
            wake_at_ms,
        }
    }

    /// The transactional half of `step`: fail what a (to be) aborted
    /// transaction holds queued, flush while committing, keep the sender's
    /// producer id in step with the manager's, and send the manager's next
    /// request. Returns when the manager wants to be asked again.
    fn step_txn(
        &mut self,
        now_ms: i64,
        view: &dyn ClusterView,
        actions: &mut Vec<Action<T>>,
    ) -> Option<i64> {
        let txn = self.txn.as_mut()?;
        if let Some(code) = txn.fatal_code() {
            // Fenced (or otherwise fatal): `Sender::poll` fails everything
            // pending with this code, now and for any later record.
            if let Some(idem) = self.sender.idempotence.as_mut() {
                if idem.fatal_error().is_none() {
                    idem.set_fatal(code);
                }
            }
            return None;
        }
        if let Some(err) = txn.abort_undrained_error() {
            let queued = self.sender.accumulator.abort_queued();
            if !queued.is_empty() {
                let mut done = Vec::with_capacity(queued.len());
                for b in queued {
                    if b.base_sequence.is_some() {
                        // A retry that will now never be acknowledged left
                        // a hole in the partition's sequences.
                        txn.require_epoch_bump();
                    }
                    done.push(Delivery {
                        tp: b.tp.clone(),
                        handles: b.handles,
                        result: Err(err.clone()),
                    });
                }
                actions.push(Action::MemoryFreed);
                actions.push(Action::Complete(done));
            }
        }
        let committing = txn.is_committing();
        if committing != self.txn_flushing {
            if committing {
                self.sender.accumulator.begin_flush();
            } else {
                self.sender.accumulator.end_flush();
            }
            self.txn_flushing = committing;
        }
        let pid = txn.producer_id_and_epoch();
        let has_id = self
            .sender
            .idempotence
            .as_ref()
            .map(|i| i.producer_id_and_epoch());
        if pid.is_valid() && has_id != Some(pid) {
            // A new id or epoch from the coordinator: sequences restart.
            self.sender.set_producer_id(pid.producer_id, pid.epoch);
        }
        let has_incomplete =
            self.sender.accumulator.has_undrained() || self.sender.in_flight_batches() > 0;
        let sender = &mut self.sender;
        if let Some(req) = txn.poll(now_ms, has_incomplete, view, &mut || sender.allocate_tag()) {
            actions.push(Action::Txn(req));
        }
        txn.wake_at_ms()
    }

    /// Apply the answer to request `tag` (`Err`: it got none: disconnect,
    /// timeout, version mismatch). Never sends: what the answer unblocked is
    /// sent by the next `step`, which the runner should run soon.
    pub fn on_answer(
        &mut self,
        tag: u64,
        result: Result<Answer, Error>,
        now_ms: i64,
    ) -> Vec<Action<T>> {
        if let Some(txn) = self.txn.as_mut().filter(|t| t.owns(tag)) {
            let r = match result {
                Ok(Answer::Txn(resp)) => Ok(*resp),
                Ok(_) => Err(Error::State {
                    detail: "a transactional request answered as Produce".into(),
                }),
                Err(e) => Err(e),
            };
            txn.on_answer(tag, r, now_ms);
            return Vec::new();
        }
        if self.init_tag == Some(tag) {
            self.init_tag = None;
            let r = match result {
                Ok(Answer::ProducerId { producer_id, epoch }) => Ok((producer_id, epoch)),
                Ok(_) => Err(Error::State {
                    detail: "InitProducerId answered as another request".into(),
                }),
                Err(e) => Err(e),
            };
            self.apply_producer_id(r);
            return Vec::new();
        }
        let result = match result {
            Ok(Answer::Produce(r)) => Ok(r),
            Ok(_) => Err(Error::State {
                detail: "Produce answered as another request".into(),
            }),
            Err(e) => Err(e),
        };
        let (done, refresh) = self.sender.on_response(tag, result, now_ms);
        if let Some(txn) = self.txn.as_mut() {
            for d in &done {
                if let Err(e) = &d.result {
                    txn.on_batch_failed(e);
                }
            }
        }
        let mut actions = Vec::new();
        if refresh {
            actions.push(Action::UpdateMetadata);
        }
        if !done.is_empty() {
            // A send blocked on memory is woken once a quarter of the
            // buffer is free, not per batch freed: woken per batch, it
            // filled the one batch's room and slept again at once, a
            // context switch per batch for it and the thread waking it.
            // It looks again every WAIT_SLICE regardless (docs/semantics.md
            // §5.9). And only with a send waiting: a condvar notify is a
            // syscall even with nobody waiting, one per answer when records
            // go out one at a time (issue 17); a waiter counts itself in
            // under this lock before it waits, so none is missed.
            if self.sender.accumulator.memory_waiters() > 0
                && self.free_memory() >= self.cfg.buffer_memory / 4
            {
                actions.push(Action::MemoryFreed);
            }
            actions.push(Action::Complete(done));
        }
        actions
    }

    /// Request `tag` could not even be handed to the network client (the
    /// connection went away between `node_ready` and the send). A Produce
    /// request counts as sent without an answer (retried by the usual
    /// rules); an InitProducerId is simply asked again by the next `step`.
    pub fn on_send_failed(&mut self, tag: u64, err: Error, now_ms: i64) -> Vec<Action<T>> {
        if let Some(txn) = self.txn.as_mut().filter(|t| t.owns(tag)) {
            txn.on_answer(tag, Err(err), now_ms);
            return Vec::new();
        }
        if self.init_tag == Some(tag) {
            self.init_tag = None;
            return Vec::new();
        }
        self.on_answer(tag, Err(err), now_ms)
    }

    /// `Producer.purge` (librdkafka's `rd_kafka_purge`): the records queued
    /// and not yet sent fail with `Purged { in_flight: false }`
    /// (`in_queue`), and those whose request is in flight with `Purged {
    /// in_flight: true }` (`in_flight`), their answers then ignored. A
    /// queued retry had been sent: its sequence may now be a hole, so the
    /// idempotent producer bumps its epoch (docs/semantics.md §5.5); a
    /// transaction with purged records must be aborted.
    pub fn purge(&mut self, in_queue: bool, in_flight: bool) -> Vec<Action<T>> {
        let mut done = Vec::new();
        if in_queue {
            for b in self.sender.accumulator.abort_queued() {
                self.sender.unresolved(&b);
                done.push(Delivery {
                    tp: b.tp.clone(),
                    handles: b.handles,
                    result: Err(Error::Purged { in_flight: false }),
                });
            }
        }
        if in_flight {
            done.extend(self.sender.purge_in_flight());
        }
        if done.is_empty() {
            return Vec::new();
        }
        // The transaction hears the error its first purged record got.
        if let (Some(txn), Err(e)) = (self.txn.as_mut(), &done[0].result) {
            txn.on_batch_failed(e);
        }
        vec![Action::MemoryFreed, Action::Complete(done)]
    }

    /// Close: every queued and in-flight batch fails with `err`.
    pub fn abort_all(&mut self, err: Error) -> Vec<Action<T>> {
        let mut left: Vec<Delivery<T>> = self
            .sender
            .accumulator
            .abort_all()
            .into_iter()
            .map(|b| Delivery {
                tp: b.tp.clone(),
                handles: b.handles,
                result: Err(err.clone()),
            })
            .collect();
        left.extend(self.sender.abort_in_flight(err));
        if left.is_empty() {
            return Vec::new();
        }
        vec![Action::MemoryFreed, Action::Complete(left)]
    }

    /// An InitProducerId answer. Failures other than a refused bump are
    /// retried by the next `step` (retriable) or make the producer fatal:
    /// `Sender::poll` then fails every pending record with the code
    /// (docs/semantics.md §5.6).
    fn apply_producer_id(&mut self, r: Result<(i64, i16), Error>) {
        let has_id = self
            .sender
            .idempotence
            .as_ref()
            .is_some_and(|i| i.producer_id_and_epoch().is_valid());
        match r {
            Ok((id, epoch)) => self.sender.set_producer_id(id, epoch),
            Err(e) if !e.retriable() && has_id => {
                log::warn!(
                    target: "ferrokafka::producer",
                    "the epoch bump was refused ({e}); asking for a fresh producer id"
                );
                // A bump of our current id was refused (INVALID_PRODUCER_ID_MAPPING,
                // or a broker that restarted without its producer state and
                // answers UNKNOWN_SERVER_ERROR): not fatal for an idempotent
                // producer, a fresh id does the same job.
                self.sender.drop_producer_id();
            }
            Err(e) if !e.retriable() => {
                log::error!(
                    target: "ferrokafka::producer",
                    "InitProducerId failed: {e}; every pending record fails"
                );
                if let Some(idem) = self.sender.idempotence.as_mut() {
                    idem.set_fatal(e.code());
                }
            }
            Err(e) => log::debug!(
                target: "ferrokafka::producer",
                "InitProducerId got no answer ({e}); asking again"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
