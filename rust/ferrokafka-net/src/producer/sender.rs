//! The sender's decisions (Java `Sender`), sans-IO: which batches go to
//! which broker in which Produce request, and what each answer means for each
//! batch. The tokio driver owns one `Sender` behind a mutex, sends the
//! requests `poll` returns, and feeds answers to `on_response`.
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

/// A Produce request to send.
#[derive(Debug)]
pub struct ProduceCall {
    pub node_id: i32,
    pub token: u64,
    pub request: ProduceRequest,
    /// acks=0: the request completes when written (docs/semantics.md §4.8).
    pub expect_response: bool,
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
}

impl<B: EncodableBatch, T> Sender<B, T> {
    pub fn new(accumulator: RecordAccumulator<B, T>, idempotent: bool, cfg: SenderConfig) -> Self {
        Sender {
            accumulator,
            idempotence: idempotent.then(|| IdempotenceState::new(cfg.max_in_flight_per_partition)),
            cfg,
            next_token: 1,
            in_flight: HashMap::new(),
        }
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
        let mut out = PollOutcome {
            calls: Vec::new(),
            failed: Vec::new(),
            unknown_leader_topics: HashSet::new(),
            next_poll_delay_ms: i64::MAX,
            held_back: false,
        };
        for b in self.accumulator.expire(now_ms) {
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
                .filter(|tp| leader_of(tp) == Some(node))
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
            let token = self.next_token;
            self.next_token += 1;
            out.calls.push(ProduceCall {
                node_id: node,
                token,
                request: build_produce_request(
                    self.cfg.acks,
                    self.cfg.request_timeout_ms,
                    None,
                    &to_send,
                ),
                expect_response: self.cfg.acks != 0,
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
                BatchOutcome::Retry | BatchOutcome::BumpEpochAndRetry => self.retry(batch, now_ms),
                BatchOutcome::Fail(_) => self.fail(batch, err, &mut deliveries),
            }
        }
        (deliveries, refresh)
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
        let mut handles = std::mem::take(&mut batch.handles).into_iter();
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
                handles: handles.by_ref().take(count).collect(),
                builder: part,
                created_ms: batch.created_ms,
                last_attempt_ms: batch.last_attempt_ms,
                attempts: batch.attempts,
                sealed: true,
                base_sequence: seq,
                reserved_bytes: reserved,
            });
            seq = seq.map(|s| s.wrapping_add(count as i32) & i32::MAX);
        }
        self.accumulator.reenqueue_split(pieces, now_ms);
        Ok(())
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
mod tests {
    use super::*;
    use crate::producer::accumulator::{AccumulatorConfig, RecordRef};

    /// Records the producer fields it was encoded with.
    struct FakeBatch {
        n: usize,
        size: usize,
    }

    impl BatchBuilder for FakeBatch {
        fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
            let b = r.value.map_or(0, |v| v.len()) + 8;
            if self.n > 0 && self.size + b > 100 {
                return None;
            }
            self.n += 1;
            self.size += b;
            Some(b)
        }
        fn size_bytes(&self) -> usize {
            self.size
        }
        fn record_count(&self) -> usize {
            self.n
        }
    }

    impl EncodableBatch for FakeBatch {
        fn encode(&mut self, p: ProducerFields) -> Result<Bytes, Error> {
            Ok(Bytes::from(format!(
                "{}:{}:{}:{}",
                p.producer_id, p.producer_epoch, p.base_sequence, self.n
            )))
        }
        /// Every fake record is 9 bytes ("v" + 8).
        fn split(&mut self, max_bytes: usize) -> Result<Vec<Self>, Error> {
            let per = (max_bytes / 9).min(self.n.div_ceil(2)).max(1);
            let mut out = Vec::new();
            let mut left = self.n;
            while left > 0 {
                let n = per.min(left);
                out.push(FakeBatch { n, size: 9 * n });
                left -= n;
            }
            Ok(out)
        }
    }

    fn sender(idempotent: bool, acks: i16) -> Sender<FakeBatch, u32> {
        let acc = RecordAccumulator::new(AccumulatorConfig {
            batch_size: 100,
            linger_ms: 0,
            retry_backoff_ms: 10,
            retry_backoff_max_ms: 100,
            delivery_timeout_ms: 10_000,
            buffer_memory: 10_000,
        });
        Sender::new(
            acc,
            idempotent,
            SenderConfig {
                acks,
                request_timeout_ms: 1000,
                max_request_size: 1 << 20,
                retries: 3,
                max_in_flight_per_partition: 5,
            },
        )
    }

    fn send(s: &mut Sender<FakeBatch, u32>, p: i32, h: u32) {
        let r = RecordRef {
            timestamp_ms: 0,
            key: None,
            value: Some(b"v"),
            headers: &[],
        };
        s.accumulator
            .append(&TopicPartition::new("t", p), &r, 9, h, 0, |_| FakeBatch {
                n: 0,
                size: 0,
            })
            .map_err(|_| ())
            .unwrap();
    }

    fn ok(p: i32, base: i64) -> PartitionResult {
        PartitionResult {
            tp: TopicPartition::new("t", p),
            error_code: 0,
            base_offset: base,
            log_append_time_ms: -1,
            log_start_offset: 0,
            error_message: None,
            record_errors: vec![],
            current_leader: None,
        }
    }

    fn records(call: &ProduceCall) -> Vec<String> {
        call.request
            .topic_data
            .iter()
            .flat_map(|t| {
                t.partition_data
                    .iter()
                    .map(|p| String::from_utf8(p.records.clone().unwrap().to_vec()).unwrap())
            })
            .collect()
    }

    #[test]
    fn idempotent_waits_for_producer_id_then_sends_with_sequences() {
        let mut s = sender(true, -1);
        send(&mut s, 0, 1);
        send(&mut s, 0, 2);
        let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
        assert!(o.calls.is_empty() && s.needs_producer_id());
        s.set_producer_id(42, 0);
        let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
        assert_eq!(o.calls.len(), 1);
        assert_eq!(records(&o.calls[0]), vec!["42:0:0:2"]);
        let (d, refresh) = s.on_response(o.calls[0].token, Ok(vec![ok(0, 100)]), 5);
        assert!(!refresh);
        assert_eq!(d[0].handles, vec![1, 2]);
        assert_eq!(d[0].result.as_ref().unwrap().0, 100);
    }

    #[test]
    fn retriable_error_is_retried_with_same_sequence_after_backoff() {
        let mut s = sender(true, -1);
        s.set_producer_id(7, 0);
        send(&mut s, 0, 1);
        let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
        let mut err = ok(0, -1);
        err.error_code = 6; // NOT_LEADER_OR_FOLLOWER
        let (d, refresh) = s.on_response(o.calls[0].token, Ok(vec![err]), 1);
        assert!(d.is_empty() && refresh);
        assert!(
            s.poll(5, &|_| Some(2), &mut |_| true, &|_| None)
                .calls
                .is_empty(),
            "backoff"
        );
        let o = s.poll(11, &|_| Some(2), &mut |_| true, &|_| None);
        assert_eq!(o.calls[0].node_id, 2);
        assert_eq!(
            records(&o.calls[0]),
            vec!["7:0:0:1"],
            "same sequence on retry"
        );
    }

    /// Regression (found by the chaos test): a batch whose request got no
    /// answer (connection reset) stayed "in flight" in the idempotence state,
    /// so its own retry waited for it forever and the partition stalled
    /// until delivery_timeout_ms.
    #[test]
    fn idempotent_retry_after_disconnect_is_sent_again() {
        let mut s = sender(true, -1);
        s.set_producer_id(7, 0);
        send(&mut s, 0, 1);
        let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
        let (d, _) = s.on_response(o.calls[0].token, Ok(vec![ok(0, 0)]), 1);
        assert_eq!(d.len(), 1);
        send(&mut s, 0, 2);
        let o = s.poll(2, &|_| Some(1), &mut |_| true, &|_| None);
        assert_eq!(records(&o.calls[0]), vec!["7:0:1:1"]);
        let (d, _) = s.on_response(o.calls[0].token, Err(Error::Disconnected { node_id: 1 }), 3);
        assert!(d.is_empty(), "retried, not failed");
        let o = s.poll(20, &|_| Some(1), &mut |_| true, &|_| None);
        assert_eq!(o.calls.len(), 1, "the retry must go out");
        assert_eq!(records(&o.calls[0]), vec!["7:0:1:1"], "with its sequence");
    }

    #[test]
    fn disconnect_without_retries_left_fails_only_those_records() {
        let mut s = sender(false, 1);
        send(&mut s, 0, 1);
        send(&mut s, 1, 2);
        let o = s.poll(0, &|tp| Some(tp.partition + 1), &mut |_| true, &|_| None);
        assert_eq!(o.calls.len(), 2);
        let mut s_batches = 0;
        for c in &o.calls {
            let node = c.node_id;
            let result = if node == 1 {
                Err(Error::Disconnected { node_id: 1 })
            } else {
                Ok(vec![ok(1, 0)])
            };
            let (d, _) = s.on_response(c.token, result, 1);
            s_batches += d.len();
        }
        assert_eq!(
            s_batches, 1,
            "the disconnected batch is retried, the other delivered"
        );
        // Exhaust retries.
        for t in 0..3 {
            let now = 100 * (t + 1);
            let o = s.poll(now, &|tp| Some(tp.partition + 1), &mut |_| true, &|_| None);
            let (d, _) = s.on_response(
                o.calls[0].token,
                Err(Error::Disconnected { node_id: 1 }),
                now,
            );
            if t == 2 {
                assert_eq!(d.len(), 1);
                assert!(d[0].result.is_err());
                assert_eq!(d[0].handles, vec![1]);
            }
        }
    }

    #[test]
    fn acks_zero_completes_without_offsets() {
        let mut s = sender(false, 0);
        send(&mut s, 0, 9);
        let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
        assert!(!o.calls[0].expect_response);
        let (d, _) = s.on_response(o.calls[0].token, Ok(vec![]), 0);
        assert_eq!(d[0].result.as_ref().unwrap().0, -1);
    }

    #[test]
    fn epoch_bump_resequences_queued_batches() {
        let mut s = sender(true, -1);
        s.set_producer_id(7, 0);
        send(&mut s, 0, 1);
        let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
        let mut err = ok(0, -1);
        err.error_code = 59; // UNKNOWN_PRODUCER_ID on the next expected batch
        s.on_response(o.calls[0].token, Ok(vec![err]), 1);
        assert!(s.needs_producer_id());
        assert!(s
            .poll(50, &|_| Some(1), &mut |_| true, &|_| None)
            .calls
            .is_empty());
        s.set_producer_id(7, 1);
        let o = s.poll(50, &|_| Some(1), &mut |_| true, &|_| None);
        assert_eq!(records(&o.calls[0]), vec!["7:1:0:1"]);
    }

    #[test]
    fn node_not_ready_keeps_batches_queued() {
        let mut s = sender(false, 1);
        send(&mut s, 0, 1);
        assert!(s
            .poll(0, &|_| Some(1), &mut |_| false, &|_| None)
            .calls
            .is_empty());
        assert_eq!(
            s.poll(0, &|_| Some(1), &mut |_| true, &|_| None)
                .calls
                .len(),
            1
        );
    }

    fn err(p: i32, code: i16) -> PartitionResult {
        let mut r = ok(p, -1);
        r.error_code = code;
        r
    }

    /// Poll once and return the one call (panics if not exactly one).
    fn one_call(s: &mut Sender<FakeBatch, u32>, now: i64) -> ProduceCall {
        let mut o = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None);
        assert_eq!(o.calls.len(), 1, "expected one request at {now}");
        o.calls.pop().unwrap()
    }

    #[test]
    fn too_large_batch_is_split_and_resent_in_order_with_its_sequences() {
        let mut s = sender(true, -1);
        s.set_producer_id(7, 0);
        for h in 1..=4 {
            send(&mut s, 0, h);
        }
        let c = one_call(&mut s, 0);
        assert_eq!(records(&c), vec!["7:0:0:4"]);
        send(&mut s, 0, 5); // queued behind, while the big batch is in flight
        let (d, _) = s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1);
        assert!(d.is_empty(), "nothing fails: the batch is split");
        assert!(!s.needs_producer_id(), "a split is no sequence break");
        // The pieces cover sequences 0..4 in order; until one is acknowledged
        // in this epoch only one batch may be in flight.
        let first = one_call(&mut s, 2);
        assert!(
            s.poll(2, &|_| Some(1), &mut |_| true, &|_| None)
                .calls
                .is_empty(),
            "one at a time before an ack"
        );
        let mut sent = records(&first);
        let mut delivered = Vec::new();
        let mut pending = vec![first];
        let mut base = 100;
        for now in 3..10 {
            for c in pending.drain(..) {
                let (d, _) = s.on_response(c.token, Ok(vec![ok(0, base)]), now);
                for x in d {
                    base += x.handles.len() as i64;
                    delivered.push((x.handles, x.result.unwrap().0));
                }
            }
            pending = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None).calls;
            sent.extend(pending.iter().flat_map(records));
        }
        assert_eq!(sent, vec!["7:0:0:2", "7:0:2:2", "7:0:4:1"]);
        assert_eq!(
            delivered,
            vec![(vec![1, 2], 100), (vec![3, 4], 102), (vec![5], 104)]
        );
        assert_eq!(
            s.accumulator.free_memory(),
            10_000,
            "every reserved byte is given back"
        );
    }

    #[test]
    fn single_record_too_large_fails_alone_and_its_neighbour_is_delivered() {
        let mut s = sender(true, -1);
        s.set_producer_id(7, 0);
        send(&mut s, 0, 1);
        send(&mut s, 0, 2);
        let c = one_call(&mut s, 0);
        let (d, _) = s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1);
        assert!(d.is_empty());
        let c = one_call(&mut s, 1);
        assert_eq!(records(&c), vec!["7:0:0:1"]);
        // Record 1 alone is still too large: it fails, only it.
        let (d, _) = s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 2);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].handles, vec![1]);
        assert!(
            matches!(&d[0].result, Err(e) if e.code() == codes::MESSAGE_TOO_LARGE),
            "{:?}",
            d[0].result
        );
        // The hole at sequence 0 needs a new epoch; record 2 is resequenced.
        assert!(s.needs_producer_id());
        s.set_producer_id(7, 1);
        let c = one_call(&mut s, 3);
        assert_eq!(records(&c), vec!["7:1:0:1"]);
        let (d, _) = s.on_response(c.token, Ok(vec![ok(0, 50)]), 4);
        assert_eq!(d[0].handles, vec![2]);
        assert_eq!(s.accumulator.free_memory(), 10_000);
    }

    #[test]
    fn batch_in_flight_behind_a_split_one_is_retried_after_its_pieces() {
        let mut s = sender(true, -1);
        s.set_producer_id(7, 0);
        send(&mut s, 0, 1);
        let c = one_call(&mut s, 0);
        s.on_response(c.token, Ok(vec![ok(0, 0)]), 0); // seq 0 acknowledged: pipelining allowed
        send(&mut s, 0, 2);
        send(&mut s, 0, 3);
        let a = one_call(&mut s, 1); // seq 1..2
        send(&mut s, 0, 4);
        let b = one_call(&mut s, 1); // seq 3, in flight behind a
        assert_eq!(records(&a), vec!["7:0:1:2"]);
        assert_eq!(records(&b), vec!["7:0:3:1"]);
        assert!(s
            .on_response(a.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 2)
            .0
            .is_empty());
        let (d, _) = s.on_response(
            b.token,
            Ok(vec![err(0, codes::OUT_OF_ORDER_SEQUENCE_NUMBER)]),
            2,
        );
        assert!(
            d.is_empty() && !s.needs_producer_id(),
            "b was early, not broken"
        );
        let mut sent = Vec::new();
        let mut handles = Vec::new();
        for now in 200..210 {
            let o = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None);
            for c in o.calls {
                sent.extend(records(&c));
                let (d, _) = s.on_response(c.token, Ok(vec![ok(0, 10)]), now);
                handles.extend(d.into_iter().flat_map(|x| x.handles));
            }
        }
        assert_eq!(sent, vec!["7:0:1:1", "7:0:2:1", "7:0:3:1"]);
        assert_eq!(handles, vec![2, 3, 4]);
    }

    #[test]
    fn too_large_without_idempotence_splits_too() {
        let mut s = sender(false, 1);
        for h in 1..=3 {
            send(&mut s, 0, h);
        }
        let c = one_call(&mut s, 0);
        assert!(s
            .on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1)
            .0
            .is_empty());
        let mut handles = Vec::new();
        for now in 1..5 {
            let o = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None);
            for c in o.calls {
                let (d, _) = s.on_response(c.token, Ok(vec![ok(0, 10)]), now);
                handles.extend(d.into_iter().flat_map(|x| x.handles));
            }
        }
        assert_eq!(handles, vec![1, 2, 3]);
    }

    #[test]
    fn refused_bump_takes_a_fresh_id_and_resequences_from_zero() {
        let mut s = sender(true, -1);
        s.set_producer_id(7, 0);
        send(&mut s, 0, 1);
        send(&mut s, 0, 2);
        let c = one_call(&mut s, 0);
        s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1);
        let c = one_call(&mut s, 1);
        s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 2); // record 1 fails: bump
        assert!(s.needs_producer_id());
        s.drop_producer_id(); // the broker refused the bump
        assert!(s.needs_producer_id(), "still needs an id, now a fresh one");
        s.set_producer_id(8, 0);
        let c = one_call(&mut s, 3);
        assert_eq!(
            records(&c),
            vec!["8:0:0:1"],
            "record 2 resequenced under the new id"
        );
    }
}
