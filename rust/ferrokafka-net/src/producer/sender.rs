//! The sender's decisions (Java `Sender`), sans-IO: which batches go to
//! which broker in which Produce request, and what each answer means for each
//! batch. `ProducerCore` (core.rs) owns one `Sender`, turns the requests
//! `poll` returns into actions, and feeds answers to `on_response`.
//!
//! Ordering guarantees come from three places: the accumulator drains at most
//! one batch per partition per request and re-enqueues retries at the front
//! (by sequence); idempotence assigns sequences at first drain and keeps them
//! across retries; and the network client's per-connection in-flight cap
//! bounds how far ahead we run (5 with idempotence, as the broker only
//! de-duplicates the last 5 batches per producer and partition).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use ferrokafka_protocol::kafka_protocol::messages::ProduceRequest;

use crate::cluster::TopicPartition;
use crate::error::Error;
use crate::producer::accumulator::{BatchBuilder, ProducerBatch, RecordAccumulator};
use crate::producer::handles::{take_records, RecordHandles};
use crate::producer::idempotence::{codes, BatchOutcome, IdempotenceState};
use crate::producer::request::{build_produce_request, BatchToSend, PartitionResult};

/// Producer fields written into a batch header when it is (re)sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerFields {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

impl ProducerFields {
    pub const NONE: ProducerFields = ProducerFields {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    };
}

/// A batch that can be turned into RecordBatch bytes; re-encoded on each
/// send because the producer fields (covered by the CRC) may change on retry.
pub trait EncodableBatch: BatchBuilder + Sized {
    fn encode(&mut self, producer: ProducerFields) -> Result<Bytes, Error>;
    /// The first encode's costly part (compression, CRC) as work that the
    /// runner does after it lets go of the producer lock, so `send` is not
    /// held up by it (docs/architecture.md). `None`: `encode` is cheap now
    /// (already encoded once, or a test batch). After a job, `encode`
    /// returns its bytes (or its error).
    fn encode_later(&mut self, producer: ProducerFields) -> Option<Encode> {
        let _ = producer;
        None
    }
    /// The same records, in order, re-cut into new batches of at most
    /// `max_bytes` and at most about half the records each (a record larger
    /// than that alone in its batch): two or more pieces whenever there are
    /// two or more records. Called after the broker refused the batch with
    /// MESSAGE_TOO_LARGE.
    fn split(&mut self, max_bytes: usize) -> Result<Vec<Self>, Error>;
}

#[derive(Debug, Clone)]
pub struct SenderConfig {
    pub acks: i16,
    pub request_timeout_ms: i32,
    pub max_request_size: usize,
    pub retries: u32,
    /// Idempotence: batches of one partition in flight at once (see
    /// `IdempotenceState`); ignored without idempotence, where the
    /// connection's `max_in_flight_requests_per_connection` alone bounds it.
    pub max_in_flight_per_partition: usize,
}

/// The deferred first encode of a batch (`EncodableBatch::encode_later`).
pub type Encode = Box<dyn FnOnce() -> Result<Bytes, Error> + Send>;

/// A deferred encode and the partition whose request it fills.
pub struct EncodeJob {
    pub tp: TopicPartition,
    pub run: Encode,
}

impl std::fmt::Debug for EncodeJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncodeJob").field("tp", &self.tp).finish()
    }
}

/// A Produce request to send.
#[derive(Debug)]
pub struct ProduceCall {
    pub node_id: i32,
    pub token: u64,
    /// The records of partitions with a job in `encode` are empty until the
    /// job has run: `fill_encoded` puts them in.
    pub request: ProduceRequest,
    /// acks=0: the request completes when written (docs/semantics.md §4.8).
    pub expect_response: bool,
    pub encode: Vec<EncodeJob>,
}

impl ProduceCall {
    /// Run the encode jobs (in parallel when there are several: one thread
    /// per partition's batch, scoped to this call) and put their bytes into
    /// the request. The first error fails the whole call.
    pub fn fill_encoded(&mut self) -> Result<(), Error> {
        let jobs = std::mem::take(&mut self.encode);
        let results: Vec<(TopicPartition, Result<Bytes, Error>)> = if jobs.len() > 1 {
            std::thread::scope(|scope| {
                let handles: Vec<_> = jobs
                    .into_iter()
                    .map(|j| (j.tp, scope.spawn(j.run)))
                    .collect();
                handles
                    .into_iter()
                    .map(|(tp, h)| {
                        let r = h.join().unwrap_or_else(|_| {
                            Err(Error::State {
                                detail: "batch encoding panicked".into(),
                            })
                        });
                        (tp, r)
                    })
                    .collect()
            })
        } else {
            jobs.into_iter().map(|j| (j.tp, (j.run)())).collect()
        };
        for (tp, r) in results {
            let bytes = r?;
            for t in self.request.topic_data.iter_mut() {
                if *t.name.0 != *tp.topic {
                    continue;
                }
                for p in t.partition_data.iter_mut() {
                    if p.index == tp.partition {
                        p.records = Some(bytes.clone());
                    }
                }
            }
        }
        Ok(())
    }
}

/// The outcome of one batch for its records' futures.
#[derive(Debug)]
pub struct Delivery<T> {
    pub tp: TopicPartition,
    pub handles: Vec<T>,
    /// Ok((base offset, log append time or -1)); record i has offset base + i.
    pub result: Result<(i64, i64), Error>,
}

#[derive(Debug)]
pub struct PollOutcome<T> {
    pub calls: Vec<ProduceCall>,
    /// Batches that failed before being sent (delivery timeout, encoding).
    pub failed: Vec<Delivery<T>>,
    /// Topics whose leaders are unknown: ask metadata.
    pub unknown_leader_topics: HashSet<String>,
    /// When to poll again at the latest (linger/backoff expiry).
    pub next_poll_delay_ms: i64,
    /// Some batch was sendable but its leader could not take it yet
    /// (connecting, in-flight cap, ordering rule): poll again soon, since
    /// what unblocks it (a connection, an answer) may not wake the caller.
    pub held_back: bool,
}

struct InFlight<B, T> {
    node_id: i32,
    batches: Vec<ProducerBatch<B, T>>,
}

pub struct Sender<B, T> {
    pub accumulator: RecordAccumulator<B, T>,
    pub idempotence: Option<IdempotenceState>,
    cfg: SenderConfig,
    next_token: u64,
    in_flight: HashMap<u64, InFlight<B, T>>,
    /// Transactional producer: Produce requests carry the id, and a batch
    /// the broker refuses for good is not retried under a bumped epoch
    /// here (the transaction manager bumps it after the abort).
    pub transactional_id: Option<String>,
}

impl<B: EncodableBatch, T: RecordHandles> Sender<B, T> {
    pub fn new(accumulator: RecordAccumulator<B, T>, idempotent: bool, cfg: SenderConfig) -> Self {
        Sender {
            accumulator,
            idempotence: idempotent.then(|| IdempotenceState::new(cfg.max_in_flight_per_partition)),
            cfg,
            next_token: 1,
            in_flight: HashMap::new(),
            transactional_id: None,
        }
    }

    /// A fresh request tag, from the counter Produce requests use, so every
    /// request of the producer (InitProducerId too) has a distinct one.
    pub fn allocate_tag(&mut self) -> u64 {
        let t = self.next_token;
        self.next_token += 1;
        t
    }

    pub fn in_flight_batches(&self) -> usize {
        self.in_flight.values().map(|f| f.batches.len()).sum()
    }

    /// Idempotence: true while a (new) producer id must be obtained first.
    pub fn needs_producer_id(&self) -> bool {
        self.idempotence.as_ref().is_some_and(|i| i.needs_init())
    }

    /// InitProducerId answered: adopt it, and give queued batches fresh
    /// sequences if the epoch changed (KIP-360 bump).
    pub fn set_producer_id(&mut self, producer_id: i64, epoch: i16) {
        let Some(idem) = self.idempotence.as_mut() else {
            return;
        };
        let old = idem.producer_id_and_epoch();
        idem.set_producer_id_and_epoch(crate::producer::idempotence::ProducerIdAndEpoch {
            producer_id,
            epoch,
        });
        // Any change (a bumped epoch, or a fresh id after the broker refused
        // the bump) restarts sequences at 0; batches queued with old
        // sequences get new ones, in queue order.
        if (old.producer_id, old.epoch) != (producer_id, epoch) {
            self.accumulator.for_each_queue_mut(|tp, q| {
                let counts: Vec<i32> = q
                    .iter()
                    .filter(|b| b.base_sequence.is_some())
                    .map(|b| b.builder.record_count() as i32)
                    .collect();
                let seqs = idem.resequence(tp, &counts);
                for (b, s) in q.iter_mut().filter(|b| b.base_sequence.is_some()).zip(seqs) {
                    b.base_sequence = Some(s);
                }
            });
        }
    }

    /// The broker refused to bump our epoch (INVALID_PRODUCER_ID_MAPPING:
    /// e.g. a broker without KIP-360 state for the id): ask for a fresh id
    /// instead, as librdkafka does; sequences restart when it arrives.
    pub fn drop_producer_id(&mut self) {
        if let Some(idem) = self.idempotence.as_mut() {
            idem.drop_producer_id();
        }
    }

    /// Decide what to send now. `leader_of` gives a partition's leader,
    /// `node_ready` whether a request may go to a node now (connection ready
    /// and under its in-flight cap), `topic_id` the id for Produce v13.
    pub fn poll(
        &mut self,
        now_ms: i64,
        leader_of: &dyn Fn(&TopicPartition) -> Option<i32>,
        node_ready: &mut dyn FnMut(i32) -> bool,
        topic_id: &dyn Fn(&str) -> Option<[u8; 16]>,
    ) -> PollOutcome<T> {
        self.poll_filtered(now_ms, leader_of, node_ready, topic_id, &|_| true)
    }

    /// `poll`, draining only partitions `may_drain` allows (a transactional
    /// producer's partitions once the coordinator has added them).
    pub fn poll_filtered(
        &mut self,
        now_ms: i64,
        leader_of: &dyn Fn(&TopicPartition) -> Option<i32>,
        node_ready: &mut dyn FnMut(i32) -> bool,
        topic_id: &dyn Fn(&str) -> Option<[u8; 16]>,
        may_drain: &dyn Fn(&TopicPartition) -> bool,
    ) -> PollOutcome<T> {
        let mut out = PollOutcome {
            calls: Vec::new(),
            failed: Vec::new(),
            unknown_leader_topics: HashSet::new(),
            next_poll_delay_ms: i64::MAX,
            held_back: false,
        };
        for b in self.accumulator.expire(now_ms) {
            self.unresolved(&b);
            out.failed.push(Delivery {
                tp: b.tp.clone(),
                handles: b.handles,
                result: Err(Error::Timeout {
                    what: format!(
                        "delivery of a batch to {}-{} (delivery_timeout_ms)",
                        b.tp.topic, b.tp.partition
                    ),
                    timeout_ms: self.accumulator.config().delivery_timeout_ms as u64,
                }),
            });
        }
        if let Some(code) = self.idempotence.as_ref().and_then(|i| i.fatal_error()) {
            // Fenced or unauthorized: nothing more can be delivered.
            for b in self.accumulator.abort_all() {
                out.failed.push(Delivery {
                    tp: b.tp.clone(),
                    handles: b.handles,
                    result: Err(Error::broker(
                        code,
                        Some("the idempotent producer hit a fatal error".into()),
                    )),
                });
            }
            return out;
        }
        if self
            .idempotence
            .as_ref()
            .is_some_and(|i| i.sending_blocked())
        {
            // The driver sends InitProducerId (once nothing is in flight);
            // nothing is drained until its answer.
            return out;
        }
        let ready = self.accumulator.ready(now_ms, |tp| leader_of(tp));
        out.unknown_leader_topics = ready.unknown_leader_topics;
        out.next_poll_delay_ms = ready.next_ready_check_delay_ms;
        let mut nodes: Vec<i32> = ready.ready_nodes.into_iter().collect();
        nodes.sort_unstable();
        for node in nodes {
            if !node_ready(node) {
                out.held_back = true;
                continue;
            }
            let acc = &self.accumulator;
            let idem = self.idempotence.as_ref();
            let parts: Vec<TopicPartition> = acc
                .partitions()
                .filter(|tp| leader_of(tp) == Some(node) && may_drain(tp))
                .filter(|tp| {
                    idem.is_none_or(|i| i.may_send(tp, acc.front_sequence(tp).flatten(), node))
                })
                .cloned()
                .collect();
            let mut batches =
                self.accumulator
                    .drain_node(node, &parts, self.cfg.max_request_size, now_ms);
            if batches.is_empty() {
                out.held_back = true;
                continue;
            }
            let mut to_send = Vec::with_capacity(batches.len());
            let mut kept = Vec::with_capacity(batches.len());
            let mut jobs = Vec::new();
            for mut b in batches.drain(..) {
                let fields = match self.idempotence.as_mut() {
                    Some(idem) => {
                        let pid = idem.producer_id_and_epoch();
                        let seq = match b.base_sequence {
                            Some(s) => {
                                idem.mark_resent(&b.tp, s, node);
                                s
                            }
                            None => {
                                let s = idem.assign_sequence(
                                    &b.tp,
                                    b.builder.record_count() as i32,
                                    node,
                                );
                                b.base_sequence = Some(s);
                                s
                            }
                        };
                        ProducerFields {
                            producer_id: pid.producer_id,
                            producer_epoch: pid.epoch,
                            base_sequence: seq,
                        }
                    }
                    None => ProducerFields::NONE,
                };
                if let Some(run) = b.builder.encode_later(fields) {
                    to_send.push(BatchToSend {
                        tp: b.tp.clone(),
                        topic_id: topic_id(&b.tp.topic),
                        records: Bytes::new(),
                    });
                    jobs.push(EncodeJob {
                        tp: b.tp.clone(),
                        run,
                    });
                    kept.push(b);
                    continue;
                }
                match b.builder.encode(fields) {
                    Ok(records) => {
                        to_send.push(BatchToSend {
                            tp: b.tp.clone(),
                            topic_id: topic_id(&b.tp.topic),
                            records,
                        });
                        kept.push(b);
                    }
                    Err(e) => {
                        self.accumulator.deallocate(&b);
                        out.failed.push(Delivery {
                            tp: b.tp.clone(),
                            handles: b.handles,
                            result: Err(e),
                        });
                    }
                }
            }
            if kept.is_empty() {
                continue;
            }
            let token = self.allocate_tag();
            out.calls.push(ProduceCall {
                node_id: node,
                token,
                request: build_produce_request(
                    self.cfg.acks,
                    self.cfg.request_timeout_ms,
                    self.transactional_id.as_deref(),
                    &to_send,
                ),
                expect_response: self.cfg.acks != 0,
                encode: jobs,
            });
            self.in_flight.insert(
                token,
                InFlight {
                    node_id: node,
                    batches: kept,
                },
            );
        }
        out
    }

    /// A Produce request finished: `Ok(results)` with the broker's
    /// per-partition answers (empty for acks=0), or `Err` when the request
    /// never got an answer (disconnect, timeout). Returns the finished batches
    /// and whether metadata should be refreshed.
    pub fn on_response(
        &mut self,
        token: u64,
        result: Result<Vec<PartitionResult>, Error>,
        now_ms: i64,
    ) -> (Vec<Delivery<T>>, bool) {
        let Some(flight) = self.in_flight.remove(&token) else {
            return (Vec::new(), false);
        };
        let _ = flight.node_id;
        let mut deliveries = Vec::new();
        let mut refresh = false;
        let acks0 = self.cfg.acks == 0;
        for batch in flight.batches {
            let can_retry = batch.attempts < self.cfg.retries
                && !batch.purged
                && !batch.has_reached_delivery_timeout(self.accumulator.config(), now_ms);
            let (code, base, append_time, message) = match &result {
                Err(e) => {
                    // Java logs a retried batch at WARN ("Got error produce response").
                    log::warn!(
                        target: "ferrokafka::producer",
                        "Produce to {}-{} (base sequence {:?}) got no answer: {e}; {}",
                        batch.tp.topic,
                        batch.tp.partition,
                        batch.base_sequence,
                        if can_retry { "retrying" } else { "no retries left" }
                    );
                    refresh = true;
                    if let (Some(idem), Some(seq)) =
                        (self.idempotence.as_mut(), batch.base_sequence)
                    {
                        idem.on_unwritten(&batch.tp, seq);
                    }
                    // No answer: as if the partition answered with a network
                    // error; with idempotence the broker de-duplicates a retry
                    // of a batch that did land.
                    if can_retry {
                        self.retry(batch, now_ms);
                    } else {
                        self.unresolved(&batch);
                        self.fail(batch, e.clone(), &mut deliveries);
                    }
                    continue;
                }
                Ok(_) if acks0 => (0, -1, -1, None),
                Ok(results) => match results.iter().find(|r| r.tp == batch.tp) {
                    Some(r) => (
                        r.error_code,
                        r.base_offset,
                        r.log_append_time_ms,
                        r.error_message.clone(),
                    ),
                    // The broker skipped the partition: treat as unknown.
                    None => (
                        -1,
                        -1,
                        -1,
                        Some("partition missing from Produce answer".into()),
                    ),
                },
            };
            if code == codes::MESSAGE_TOO_LARGE
                && batch.builder.record_count() > 1
                && !batch.purged
                && !batch.has_reached_delivery_timeout(self.accumulator.config(), now_ms)
            {
                // Java `splitAndReenqueue`: the broker's limit (message.max.bytes)
                // is below our batch; the records may still fit one by one. Not
                // counted as a retry: the records were refused, not lost.
                if let (Some(idem), Some(seq)) = (self.idempotence.as_mut(), batch.base_sequence) {
                    idem.on_unwritten(&batch.tp, seq);
                }
                if let Err((batch, e)) = self.split_and_reenqueue(batch, now_ms) {
                    self.fail(batch, e, &mut deliveries);
                }
                continue;
            }
            let err = Error::broker(code, message);
            let retriable = err.retriable();
            if code != 0 && crate::metadata::is_invalid_metadata_error(code) {
                refresh = true;
            }
            let outcome = match self.idempotence.as_mut() {
                Some(idem) => {
                    let seq = batch.base_sequence.unwrap_or(0);
                    idem.on_response(
                        &batch.tp,
                        seq,
                        batch.builder.record_count() as i32,
                        code,
                        retriable,
                        can_retry,
                    )
                }
                None if code == 0 => BatchOutcome::Success,
                None if retriable && can_retry => BatchOutcome::Retry,
                None => BatchOutcome::Fail(code),
            };
            if code != 0 {
                log::warn!(
                    target: "ferrokafka::producer",
                    "Produce to {}-{} (base sequence {:?}) failed with {}: {outcome:?}",
                    batch.tp.topic,
                    batch.tp.partition,
                    batch.base_sequence,
                    err
                );
            }
            match outcome {
                BatchOutcome::Success => {
                    self.accumulator.deallocate(&batch);
                    deliveries.push(Delivery {
                        tp: batch.tp.clone(),
                        handles: batch.handles,
                        result: Ok((base, append_time)),
                    });
                }
                BatchOutcome::BumpEpochAndRetry if self.transactional_id.is_some() => {
                    // Within a transaction the hole cannot be papered over:
                    // the batch fails and the transaction must abort.
                    self.fail(batch, err, &mut deliveries)
                }
                BatchOutcome::Retry | BatchOutcome::BumpEpochAndRetry => self.retry(batch, now_ms),
                BatchOutcome::Fail(_) => self.fail(batch, err, &mut deliveries),
            }
        }
        (deliveries, refresh)
    }

    /// `purge(in_flight)`: the records of every batch waiting for an answer
    /// fail now with `Purged { in_flight: true }`. The batches stay in
    /// flight, so that their answers still settle the idempotent sequences
    /// (one that comes back for a retry is not retried: it fails with no
    /// records left, and its sequence is resolved like any failed batch's).
    pub fn purge_in_flight(&mut self) -> Vec<Delivery<T>> {
        let mut out = Vec::new();
        for f in self.in_flight.values_mut() {
            for b in f.batches.iter_mut().filter(|b| !b.purged) {
                b.purged = true;
                out.push(Delivery {
                    tp: b.tp.clone(),
                    handles: std::mem::take(&mut b.handles),
                    result: Err(Error::Purged { in_flight: true }),
                });
            }
        }
        out
    }

    /// Close: fail every batch still waiting for an answer.
    pub fn abort_in_flight(&mut self, err: Error) -> Vec<Delivery<T>> {
        let mut out = Vec::new();
        let flights: Vec<InFlight<B, T>> = self.in_flight.drain().map(|(_, f)| f).collect();
        for f in flights {
            for b in f.batches {
                self.fail(b, err.clone(), &mut out);
            }
        }
        out
    }

    /// Cut a refused batch into smaller ones and put them at the front of
    /// its partition's queue, ahead of newer batches.
    ///
    /// Each split at least halves the records per batch (and pieces never
    /// exceed `batch_size`), so a record that is too large on its own ends up alone
    /// after a few rounds and fails by itself, while its neighbours get
    /// through. With idempotence the pieces take the refused batch's sequence
    /// range in order (base, base + n1, ...): the broker never accepted any
    /// of it, and the batches queued behind keep their sequences. In-flight
    /// batches of the partition sent after it come back OUT_OF_ORDER and are
    /// retried behind the pieces (see `IdempotenceState::may_send`).
    // The error hands the batch back so the caller can fail its records; it
    // is the rare path (a split that cannot be made), not worth a Box.
    #[allow(clippy::result_large_err)]
    fn split_and_reenqueue(
        &mut self,
        mut batch: ProducerBatch<B, T>,
        now_ms: i64,
    ) -> Result<(), (ProducerBatch<B, T>, Error)> {
        let total = batch.builder.size_bytes().max(1);
        let parts = match batch.builder.split(self.accumulator.config().batch_size) {
            Ok(p) if p.len() > 1 => p,
            Ok(_) => {
                let e = Error::State {
                    detail: "splitting a batch refused as too large made no progress".into(),
                };
                return Err((batch, e));
            }
            Err(e) => return Err((batch, e)),
        };
        let mut handles: std::collections::VecDeque<T> = std::mem::take(&mut batch.handles).into();
        let mut seq = batch.base_sequence;
        let mut reserved_left = batch.reserved_bytes;
        let n = parts.len();
        let mut pieces = Vec::with_capacity(n);
        for (i, part) in parts.into_iter().enumerate() {
            let count = part.record_count();
            // buffer_memory: the refused batch's reservation is shared out by
            // size, so memory comes back as each piece is acknowledged and the
            // total freed is exactly what was reserved.
            let reserved = if i + 1 == n {
                reserved_left
            } else {
                (batch.reserved_bytes * part.size_bytes() / total).min(reserved_left)
            };
            reserved_left -= reserved;
            pieces.push(ProducerBatch {
                tp: batch.tp.clone(),
                handles: take_records(&mut handles, count),
                builder: part,
                created_ms: batch.created_ms,
                last_attempt_ms: batch.last_attempt_ms,
                attempts: batch.attempts,
                sealed: true,
                base_sequence: seq,
                reserved_bytes: reserved,
                purged: false,
            });
            seq = seq.map(|s| s.wrapping_add(count as i32) & i32::MAX);
        }
        self.accumulator.reenqueue_split(pieces, now_ms);
        Ok(())
    }

    /// A batch that was sent (it has a sequence) fails without an answer
    /// saying whether it was written: it expired in the queue before its
    /// retry, or its request got no answer and it may not retry. Its
    /// sequence may be a hole, and a broker without the batch refuses every
    /// later one of its partition as out of order, so the epoch is bumped
    /// (Java's unresolved sequence; docs/semantics.md §5.5). A transactional
    /// producer's sending then waits for the manager's bump after the abort
    /// the failed records force, as after any failed batch.
    pub(crate) fn unresolved(&mut self, batch: &ProducerBatch<B, T>) {
        if let (Some(idem), Some(_)) = (self.idempotence.as_mut(), batch.base_sequence) {
            idem.request_bump();
        }
    }

    fn retry(&mut self, batch: ProducerBatch<B, T>, now_ms: i64) {
        self.accumulator.reenqueue(batch, now_ms);
    }

    fn fail(&mut self, batch: ProducerBatch<B, T>, err: Error, out: &mut Vec<Delivery<T>>) {
        self.accumulator.deallocate(&batch);
        out.push(Delivery {
            tp: batch.tp.clone(),
            handles: batch.handles,
            result: Err(err),
        });
    }
}

#[cfg(test)]
mod tests;
