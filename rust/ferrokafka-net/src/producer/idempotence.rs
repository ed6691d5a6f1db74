//! Idempotent-producer bookkeeping (the non-transactional half of Java's
//! `TransactionManager`): the producer id and epoch, per-partition sequence
//! numbers, and the decision of what a Produce error means for a batch.
//!
//! Why this is subtle: with several batches of one partition in flight, batch
//! N+1 can reach the broker before a retried batch N. A broker that checks
//! sequences rejects N+1 with OUT_OF_ORDER_SEQUENCE_NUMBER; that is expected
//! and N+1 must simply be retried after N. Only when the *first*
//! unacknowledged batch itself is rejected is the sequence state really
//! broken; then the epoch is bumped (KIP-360), which resets every partition's
//! sequence to 0 on the broker, and every unacknowledged batch is
//! re-sequenced from 0, in record order.
//!
//! Three rules keep a partition in order whatever the broker checks
//! (docs/semantics.md §5):
//! * **drain before retry**: once a batch of a partition comes back unwritten
//!   (retriable error, no answer), nothing more of that partition is sent
//!   until every batch of it still in flight has answered; then the retries
//!   go one at a time, lowest sequence first;
//! * **no bump under batches in flight**: an epoch bump waits until no batch
//!   of any partition is in flight, so no batch is ever answered under an
//!   epoch its sequence does not belong to;
//! * **one leader at a time**: a partition's batches go to a new leader only
//!   when none is in flight to the old one.
//!
//! Pipelining within a partition (`max_in_flight_per_partition` > 1) relies
//! on the broker rejecting a batch whose predecessor was not written, as
//! Kafka does. A broker that does not check (librdkafka's mock cluster does
//! not, for non-transactional producers) can then take a later batch while
//! an earlier one is retried; with 1 (the default) no partition ever has two
//! batches in flight, so order holds on any broker.
//!
//! Pure state; the sender calls it under the accumulator's lock.

use std::collections::{BTreeMap, HashMap};

use crate::cluster::TopicPartition;

/// Kafka error codes: the one table in the protocol crate.
pub use ferrokafka_protocol::codes;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdAndEpoch {
    pub producer_id: i64,
    pub epoch: i16,
}

impl ProducerIdAndEpoch {
    pub const NONE: ProducerIdAndEpoch = ProducerIdAndEpoch {
        producer_id: NO_PRODUCER_ID,
        epoch: NO_PRODUCER_EPOCH,
    };

    pub fn is_valid(&self) -> bool {
        self.producer_id >= 0
    }
}

/// What the sender does with a batch after its Produce answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Acknowledged (DUPLICATE_SEQUENCE_NUMBER counts: the broker already has it).
    Success,
    /// Put back in the queue with its sequence, send again after backoff.
    Retry,
    /// Fail the batch's records with this error code.
    Fail(i16),
    /// Sequence state is broken: bump the epoch (InitProducerId), re-sequence
    /// from 0, and retry this batch.
    BumpEpochAndRetry,
}

#[derive(Debug)]
struct PartitionSeq {
    /// Sequence the next new batch gets.
    next: i32,
    /// Last sequence the broker acknowledged (-1: none yet this epoch).
    last_acked: i32,
    /// Batches sent and not yet resolved: base sequence -> where it went.
    in_flight: BTreeMap<i32, Sent>,
    /// A batch came back unwritten: send nothing of this partition until
    /// `in_flight` is empty (drain before retry). Cleared when it empties.
    draining: bool,
}

/// Where an in-flight batch went, and whether it is a retry.
#[derive(Debug, Clone, Copy)]
struct Sent {
    node: i32,
    retry: bool,
}

impl Default for PartitionSeq {
    fn default() -> Self {
        PartitionSeq {
            next: 0,
            last_acked: -1,
            in_flight: BTreeMap::new(),
            draining: false,
        }
    }
}

impl PartitionSeq {
    fn resolved(&mut self, base: i32) {
        self.in_flight.remove(&base);
        if self.in_flight.is_empty() {
            self.draining = false;
        }
    }

    /// The batch came back unwritten (or maybe written): it goes again, so
    /// the partition drains first (drain before retry).
    fn unwritten(&mut self, base: i32) {
        self.draining = true;
        self.resolved(base);
    }
}

#[derive(Debug)]
pub struct IdempotenceState {
    pid: ProducerIdAndEpoch,
    partitions: HashMap<TopicPartition, PartitionSeq>,
    /// A bump was requested (an unresolvable sequence error); the sender sends
    /// InitProducerId before draining more.
    bump_requested: bool,
    /// Non-retriable producer-level error (e.g. PRODUCER_FENCED, cluster
    /// authorization): every future send fails with it.
    fatal: Option<i16>,
    /// Batches of one partition allowed in flight at once (see module doc).
    max_in_flight_per_partition: usize,
}

impl Default for IdempotenceState {
    fn default() -> Self {
        Self::new(1)
    }
}

impl IdempotenceState {
    pub fn new(max_in_flight_per_partition: usize) -> Self {
        IdempotenceState {
            pid: ProducerIdAndEpoch::NONE,
            partitions: HashMap::new(),
            bump_requested: false,
            fatal: None,
            max_in_flight_per_partition: max_in_flight_per_partition.max(1),
        }
    }

    pub fn producer_id_and_epoch(&self) -> ProducerIdAndEpoch {
        self.pid
    }

    pub fn has_producer_id(&self) -> bool {
        self.pid.is_valid() && !self.bump_requested
    }

    /// Send InitProducerId now: there is no id, or a bump was requested and
    /// no batch is in flight any more (a bump under in-flight batches would
    /// have them answered under the wrong epoch).
    pub fn needs_init(&self) -> bool {
        self.fatal.is_none()
            && (!self.pid.is_valid() || (self.bump_requested && !self.any_in_flight()))
    }

    /// Nothing may be drained: no id yet, or a bump is pending (possibly
    /// still waiting for in-flight batches to answer).
    pub fn sending_blocked(&self) -> bool {
        !self.pid.is_valid() || self.bump_requested
    }

    fn any_in_flight(&self) -> bool {
        self.partitions.values().any(|s| !s.in_flight.is_empty())
    }

    pub fn fatal_error(&self) -> Option<i16> {
        self.fatal
    }

    pub fn set_fatal(&mut self, code: i16) {
        self.fatal = Some(code);
    }

    /// InitProducerId answered: adopt the id/epoch. A new epoch restarts every
    /// partition's sequence at 0 on the broker, so ours restart too.
    pub fn set_producer_id_and_epoch(&mut self, pid: ProducerIdAndEpoch) {
        if pid != self.pid {
            for s in self.partitions.values_mut() {
                *s = PartitionSeq::default();
            }
        }
        self.pid = pid;
        self.bump_requested = false;
    }

    /// Bump the epoch once nothing is in flight: a batch with a sequence
    /// will never be acknowledged (it expired in the queue before its
    /// retry), and a broker that did not write it would refuse every later
    /// batch of its partition as out of order (docs/semantics.md §5.5).
    pub fn request_bump(&mut self) {
        if self.fatal.is_none() && self.pid.is_valid() {
            self.bump_requested = true;
        }
    }

    /// Forget the id (its bump was refused): `needs_init` asks for a fresh
    /// one, without a current id to bump. Sequence state is kept until the
    /// new id arrives (`set_producer_id_and_epoch` resets it then).
    pub fn drop_producer_id(&mut self) {
        self.pid = ProducerIdAndEpoch::NONE;
        self.bump_requested = false;
    }

    /// Assign the base sequence of a batch drained for the first time and
    /// sent to `node`.
    pub fn assign_sequence(&mut self, tp: &TopicPartition, record_count: i32, node: i32) -> i32 {
        let s = self.partitions.entry(tp.clone()).or_default();
        let base = s.next;
        // Sequences wrap at i32::MAX as the broker's do.
        s.next = base.wrapping_add(record_count) & i32::MAX;
        s.in_flight.insert(base, Sent { node, retry: false });
        base
    }

    /// A retried batch goes out again, to `node`, with its old sequence.
    pub fn mark_resent(&mut self, tp: &TopicPartition, base: i32, node: i32) {
        if let Some(s) = self.partitions.get_mut(tp) {
            s.in_flight.insert(base, Sent { node, retry: true });
        }
    }

    /// After an epoch bump the queued batches of `tp` (in queue order) get new
    /// sequences from 0; returns them in the same order.
    pub fn resequence(&mut self, tp: &TopicPartition, record_counts: &[i32]) -> Vec<i32> {
        let s = self.partitions.entry(tp.clone()).or_default();
        *s = PartitionSeq::default();
        record_counts
            .iter()
            .map(|&n| {
                let base = s.next;
                s.next = base.wrapping_add(n) & i32::MAX;
                base
            })
            .collect()
    }

    /// Is `base` the first sequence the broker has not acknowledged?
    fn is_next_expected(&self, tp: &TopicPartition, base: i32) -> bool {
        self.partitions.get(tp).map_or(base == 0, |s| {
            base == s.last_acked.wrapping_add(1) & i32::MAX
        })
    }

    /// The batch sent with `base` is no longer in flight and will be sent
    /// again, so the partition drains first. Either its request got no
    /// answer (disconnect, timeout: it may or may not have been written; a
    /// broker that did write it answers the retry with
    /// DUPLICATE_SEQUENCE_NUMBER), or it was refused without touching the
    /// broker's sequence state (MESSAGE_TOO_LARGE before a split: its pieces
    /// take its sequence range).
    pub fn on_unwritten(&mut self, tp: &TopicPartition, base: i32) {
        if let Some(s) = self.partitions.get_mut(tp) {
            s.unwritten(base);
        }
    }

    /// May the partition's next batch (`retry_sequence`: its sequence if it
    /// is a retry) be sent to `node` now? The rules of the module doc:
    /// * nothing in flight: yes;
    /// * draining after an unwritten batch: no;
    /// * until the broker has acknowledged one batch of this epoch, only one
    ///   batch is in flight (a broker with no state for the producer accepts
    ///   any first sequence);
    /// * a retry goes alone, and nothing follows it until it is answered
    ///   (Java `shouldStopDrainBatchesForPartition`; a retry that fails again
    ///   must not find a newer batch already written);
    /// * a batch in flight to another node (the leader moved): no;
    /// * at most `max_in_flight_per_partition`.
    pub fn may_send(&self, tp: &TopicPartition, retry_sequence: Option<i32>, node: i32) -> bool {
        let Some(s) = self.partitions.get(tp) else {
            return true;
        };
        if s.in_flight.is_empty() {
            return true;
        }
        !s.draining
            && s.last_acked >= 0
            && retry_sequence.is_none()
            && s.in_flight.values().all(|f| f.node == node && !f.retry)
            && s.in_flight.len() < self.max_in_flight_per_partition
    }

    /// Decide what a Produce answer means for a batch (`base`, `count`
    /// records), given whether retrying is still allowed (attempts below
    /// `retries` and delivery timeout not reached) and whether the error code
    /// is retriable per the protocol.
    pub fn on_response(
        &mut self,
        tp: &TopicPartition,
        base: i32,
        count: i32,
        error_code: i16,
        retriable: bool,
        can_retry: bool,
    ) -> BatchOutcome {
        use codes::*;
        let outcome = match error_code {
            NONE | DUPLICATE_SEQUENCE_NUMBER => BatchOutcome::Success,
            OUT_OF_ORDER_SEQUENCE_NUMBER | UNKNOWN_PRODUCER_ID => {
                if !can_retry {
                    BatchOutcome::Fail(error_code)
                } else if self.is_next_expected(tp, base) {
                    // The broker rejects the very batch it should take next:
                    // its state for us is gone (log truncated, retention).
                    BatchOutcome::BumpEpochAndRetry
                } else {
                    // An earlier batch is still unresolved; this one was
                    // simply early. Retry after it.
                    BatchOutcome::Retry
                }
            }
            INVALID_PRODUCER_EPOCH | PRODUCER_FENCED | CLUSTER_AUTHORIZATION_FAILED => {
                self.fatal = Some(error_code);
                BatchOutcome::Fail(error_code)
            }
            _ if retriable && can_retry => BatchOutcome::Retry,
            code => BatchOutcome::Fail(code),
        };
        let s = self.partitions.entry(tp.clone()).or_default();
        match outcome {
            BatchOutcome::Success => {
                s.resolved(base);
                let last = base.wrapping_add(count - 1) & i32::MAX;
                if s.last_acked < 0 || last > s.last_acked {
                    s.last_acked = last;
                }
            }
            BatchOutcome::Retry => s.unwritten(base),
            BatchOutcome::Fail(_) => {
                s.resolved(base);
                // A failed batch leaves a hole in the sequence: batches after it
                // would be rejected forever. Bump the epoch to start over.
                if self.fatal.is_none() {
                    self.bump_requested = true;
                }
            }
            BatchOutcome::BumpEpochAndRetry => {
                s.resolved(base);
                self.bump_requested = true;
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition::new("t", 0)
    }

    fn ready_state() -> IdempotenceState {
        let mut s = IdempotenceState::new(5);
        assert!(s.needs_init());
        s.set_producer_id_and_epoch(ProducerIdAndEpoch {
            producer_id: 7,
            epoch: 0,
        });
        assert!(!s.needs_init());
        s
    }

    #[test]
    fn sequences_advance_by_record_count() {
        let mut s = ready_state();
        assert_eq!(s.assign_sequence(&tp(), 3, 1), 0);
        assert_eq!(s.assign_sequence(&tp(), 2, 1), 3);
        assert_eq!(s.assign_sequence(&TopicPartition::new("t", 1), 1, 1), 0);
    }

    #[test]
    fn early_batch_out_of_order_is_retried_not_bumped() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 5, 1);
        let b = s.assign_sequence(&tp(), 5, 1);
        // a failed with a retriable error, b arrived first: OOO for b.
        assert_eq!(
            s.on_response(&tp(), a, 5, 7, true, true),
            BatchOutcome::Retry
        );
        assert_eq!(
            s.on_response(&tp(), b, 5, codes::OUT_OF_ORDER_SEQUENCE_NUMBER, true, true),
            BatchOutcome::Retry
        );
        assert!(!s.needs_init());
        s.mark_resent(&tp(), a, 1);
        assert_eq!(
            s.on_response(&tp(), a, 5, 0, false, true),
            BatchOutcome::Success
        );
        s.mark_resent(&tp(), b, 1);
        assert_eq!(
            s.on_response(&tp(), b, 5, 0, false, true),
            BatchOutcome::Success
        );
    }

    #[test]
    fn next_expected_batch_rejected_bumps_epoch() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 2, 1);
        assert_eq!(
            s.on_response(&tp(), a, 2, 0, false, true),
            BatchOutcome::Success
        );
        let b = s.assign_sequence(&tp(), 2, 1);
        assert_eq!(
            s.on_response(&tp(), b, 2, codes::UNKNOWN_PRODUCER_ID, true, true),
            BatchOutcome::BumpEpochAndRetry
        );
        assert!(s.needs_init());
        assert!(!s.has_producer_id());
        s.set_producer_id_and_epoch(ProducerIdAndEpoch {
            producer_id: 7,
            epoch: 1,
        });
        assert_eq!(s.resequence(&tp(), &[2, 4]), vec![0, 2]);
        assert_eq!(s.assign_sequence(&tp(), 1, 1), 6);
    }

    #[test]
    fn first_batch_alone_in_flight_then_pipelined() {
        let mut s = ready_state();
        assert!(s.may_send(&tp(), None, 1));
        let a = s.assign_sequence(&tp(), 2, 1);
        assert!(
            !s.may_send(&tp(), None, 1),
            "no ack yet: one batch in flight"
        );
        s.on_response(&tp(), a, 2, 0, false, true);
        let _b = s.assign_sequence(&tp(), 2, 1);
        assert!(
            s.may_send(&tp(), None, 1),
            "after an ack the broker checks sequences"
        );
    }

    /// The chaos finding of issue 14: a retried batch sent while later
    /// batches of its partition were still in flight landed after them on a
    /// broker that does not check sequences. Now the partition drains first
    /// and the retries go one at a time, lowest sequence first.
    #[test]
    fn retry_waits_until_the_partition_has_drained() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 2, 1);
        s.on_response(&tp(), a, 2, 0, false, true);
        let b = s.assign_sequence(&tp(), 2, 1);
        let c = s.assign_sequence(&tp(), 2, 1);
        let d = s.assign_sequence(&tp(), 2, 1);
        // b comes back unwritten while c and d are in flight.
        assert_eq!(
            s.on_response(&tp(), b, 2, 6, true, true),
            BatchOutcome::Retry
        );
        assert!(!s.may_send(&tp(), Some(b), 1), "c and d still in flight");
        assert!(!s.may_send(&tp(), None, 1), "no new batch either");
        // A checking broker refuses c as early; d got no answer.
        assert_eq!(
            s.on_response(&tp(), c, 2, codes::OUT_OF_ORDER_SEQUENCE_NUMBER, true, true),
            BatchOutcome::Retry
        );
        s.on_unwritten(&tp(), d);
        assert!(
            s.may_send(&tp(), Some(b), 1),
            "drained: the lowest retry goes"
        );
        s.mark_resent(&tp(), b, 1);
        assert!(!s.may_send(&tp(), Some(c), 1), "retries go one at a time");
        s.on_response(&tp(), b, 2, 0, false, true);
        assert!(s.may_send(&tp(), Some(c), 1));
        assert!(!s.needs_init(), "early batches are no sequence break");
    }

    /// Found by the chaos test with 5 batches per partition allowed: a new
    /// batch followed a retry in flight, the retry failed again, and a broker
    /// that does not check sequences wrote the new batch first.
    #[test]
    fn nothing_follows_a_retry_in_flight() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 1, 1);
        s.on_response(&tp(), a, 1, 0, false, true);
        let b = s.assign_sequence(&tp(), 1, 1);
        s.on_response(&tp(), b, 1, 7, true, true);
        assert!(s.may_send(&tp(), Some(b), 1));
        s.mark_resent(&tp(), b, 1);
        assert!(!s.may_send(&tp(), None, 1), "a retry is in flight");
        s.on_response(&tp(), b, 1, 0, false, true);
        assert!(s.may_send(&tp(), None, 1));
    }

    #[test]
    fn epoch_bump_waits_for_batches_in_flight() {
        let mut s = ready_state();
        let other = TopicPartition::new("t", 1);
        let a = s.assign_sequence(&tp(), 1, 1);
        s.on_response(&tp(), a, 1, 0, false, true);
        let b = s.assign_sequence(&tp(), 1, 1);
        let x = s.assign_sequence(&other, 1, 2);
        // b is rejected although it is the next expected: state lost.
        assert_eq!(
            s.on_response(&tp(), b, 1, codes::UNKNOWN_PRODUCER_ID, true, true),
            BatchOutcome::BumpEpochAndRetry
        );
        assert!(s.sending_blocked(), "nothing more is drained");
        assert!(!s.needs_init(), "x is still in flight under the old epoch");
        s.on_response(&other, x, 1, 0, false, true);
        assert!(s.needs_init(), "drained: now bump");
    }

    #[test]
    fn a_moved_partition_waits_for_the_old_leader() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 1, 1);
        s.on_response(&tp(), a, 1, 0, false, true);
        let b = s.assign_sequence(&tp(), 1, 1);
        assert!(s.may_send(&tp(), None, 1));
        assert!(!s.may_send(&tp(), None, 2), "b is in flight to node 1");
        s.on_response(&tp(), b, 1, 0, false, true);
        assert!(s.may_send(&tp(), None, 2));
    }

    #[test]
    fn per_partition_cap() {
        let mut s = IdempotenceState::new(1);
        s.set_producer_id_and_epoch(ProducerIdAndEpoch {
            producer_id: 7,
            epoch: 0,
        });
        let a = s.assign_sequence(&tp(), 1, 1);
        s.on_response(&tp(), a, 1, 0, false, true);
        s.assign_sequence(&tp(), 1, 1);
        assert!(!s.may_send(&tp(), None, 1), "cap 1: one batch in flight");
        assert!(
            s.may_send(&TopicPartition::new("t", 1), None, 1),
            "other partitions are not held"
        );
    }

    #[test]
    fn duplicate_sequence_is_success() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 1, 1);
        assert_eq!(
            s.on_response(&tp(), a, 1, codes::DUPLICATE_SEQUENCE_NUMBER, false, true),
            BatchOutcome::Success
        );
    }

    #[test]
    fn failed_batch_requests_bump_and_fencing_is_fatal() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 1, 1);
        assert_eq!(
            s.on_response(&tp(), a, 1, codes::MESSAGE_TOO_LARGE, false, true),
            BatchOutcome::Fail(codes::MESSAGE_TOO_LARGE)
        );
        assert!(s.needs_init());
        s.set_producer_id_and_epoch(ProducerIdAndEpoch {
            producer_id: 7,
            epoch: 1,
        });
        let b = s.assign_sequence(&tp(), 1, 1);
        assert_eq!(b, 0, "new epoch restarts sequences");
        assert_eq!(
            s.on_response(&tp(), b, 1, codes::PRODUCER_FENCED, false, true),
            BatchOutcome::Fail(codes::PRODUCER_FENCED)
        );
        assert_eq!(s.fatal_error(), Some(codes::PRODUCER_FENCED));
        assert!(!s.needs_init());
    }

    #[test]
    fn retriable_error_without_retries_left_fails() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 1, 1);
        assert_eq!(
            s.on_response(&tp(), a, 1, 6, true, false),
            BatchOutcome::Fail(6)
        );
    }

    #[test]
    fn sequence_wraps_at_i32_max() {
        let mut s = ready_state();
        s.resequence(&tp(), &[]);
        s.partitions.get_mut(&tp()).unwrap().next = i32::MAX - 1;
        assert_eq!(s.assign_sequence(&tp(), 3, 1), i32::MAX - 1);
        assert_eq!(s.assign_sequence(&tp(), 1, 1), 1);
    }
}
