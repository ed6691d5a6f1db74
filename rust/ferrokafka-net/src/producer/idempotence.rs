//! Idempotent-producer bookkeeping (the non-transactional half of Java's
//! `TransactionManager`): the producer id and epoch, per-partition sequence
//! numbers, and the decision of what a Produce error means for a batch.
//!
//! Why this is subtle: with up to 5 requests in flight per connection, batch
//! N+1 can reach the broker before a retried batch N. The broker rejects N+1
//! with OUT_OF_ORDER_SEQUENCE_NUMBER; that is expected and N+1 must simply be
//! retried after N. Only when the *first* unacknowledged batch itself is
//! rejected is the sequence state really broken; then the epoch is bumped
//! (KIP-360), which resets every partition's sequence to 0 on the broker, and
//! the still-queued batches are re-sequenced from 0.
//!
//! Pure state; the sender calls it under the accumulator's lock.

use std::collections::{BTreeSet, HashMap};

use crate::cluster::TopicPartition;

/// Kafka error codes this module reasons about.
pub mod codes {
    pub const NONE: i16 = 0;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const PRODUCER_FENCED: i16 = 90;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
}

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

#[derive(Debug, Default)]
struct PartitionSeq {
    /// Sequence the next new batch gets.
    next: i32,
    /// Last sequence the broker acknowledged (-1: none yet this epoch).
    last_acked: i32,
    /// Base sequences of batches sent and not yet resolved, ascending.
    in_flight: BTreeSet<i32>,
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
}

impl Default for IdempotenceState {
    fn default() -> Self {
        Self::new()
    }
}

impl IdempotenceState {
    pub fn new() -> Self {
        IdempotenceState {
            pid: ProducerIdAndEpoch::NONE,
            partitions: HashMap::new(),
            bump_requested: false,
            fatal: None,
        }
    }

    pub fn producer_id_and_epoch(&self) -> ProducerIdAndEpoch {
        self.pid
    }

    pub fn has_producer_id(&self) -> bool {
        self.pid.is_valid() && !self.bump_requested
    }

    pub fn needs_init(&self) -> bool {
        self.fatal.is_none() && (!self.pid.is_valid() || self.bump_requested)
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
                s.next = 0;
                s.last_acked = -1;
                s.in_flight.clear();
            }
        }
        self.pid = pid;
        self.bump_requested = false;
    }

    /// Forget the id (its bump was refused): `needs_init` asks for a fresh
    /// one, without a current id to bump. Sequence state is kept until the
    /// new id arrives (`set_producer_id_and_epoch` resets it then).
    pub fn drop_producer_id(&mut self) {
        self.pid = ProducerIdAndEpoch::NONE;
        self.bump_requested = false;
    }

    /// Assign the base sequence of a batch drained for the first time.
    pub fn assign_sequence(&mut self, tp: &TopicPartition, record_count: i32) -> i32 {
        let s = self
            .partitions
            .entry(tp.clone())
            .or_insert_with(|| PartitionSeq {
                last_acked: -1,
                ..Default::default()
            });
        let base = s.next;
        // Sequences wrap at i32::MAX as the broker's do.
        s.next = base.wrapping_add(record_count) & i32::MAX;
        s.in_flight.insert(base);
        base
    }

    /// A retried batch goes out again with its old sequence.
    pub fn mark_resent(&mut self, tp: &TopicPartition, base: i32) {
        if let Some(s) = self.partitions.get_mut(tp) {
            s.in_flight.insert(base);
        }
    }

    /// After an epoch bump the queued batches of `tp` (in queue order) get new
    /// sequences from 0; returns them in the same order.
    pub fn resequence(&mut self, tp: &TopicPartition, record_counts: &[i32]) -> Vec<i32> {
        let s = self.partitions.entry(tp.clone()).or_default();
        s.next = 0;
        s.last_acked = -1;
        s.in_flight.clear();
        record_counts
            .iter()
            .map(|&n| {
                let base = s.next;
                s.next = base.wrapping_add(n) & i32::MAX;
                base
            })
            .collect()
    }

    /// The batch sent with `base` was refused without touching the broker's
    /// sequence state (MESSAGE_TOO_LARGE before a split): it is no longer in
    /// flight, and its sequence range will be sent again by its pieces.
    pub fn forget_in_flight(&mut self, tp: &TopicPartition, base: i32) {
        if let Some(s) = self.partitions.get_mut(tp) {
            s.in_flight.remove(&base);
        }
    }

    /// Is `base` the first sequence the broker has not acknowledged?
    fn is_next_expected(&self, tp: &TopicPartition, base: i32) -> bool {
        self.partitions.get(tp).map_or(base == 0, |s| {
            base == s.last_acked.wrapping_add(1) & i32::MAX
        })
    }

    /// May the partition's next batch (`retry_sequence`: its sequence if it is
    /// a retry) be sent now? Two rules keep per-partition order with several
    /// requests in flight:
    /// * until the broker has acknowledged one batch of this epoch, only one
    ///   batch is in flight: a broker with no state for the producer accepts
    ///   any first sequence, so a later batch could land before a failed
    ///   earlier one;
    /// * a retried batch goes only when no earlier sequence is in flight
    ///   (Java `shouldStopDrainBatchesForPartition`): during retries the
    ///   partition runs one batch at a time.
    /// The request carrying this batch got no answer (disconnect, timeout):
    /// it is no longer in flight. Without this a retried batch would wait
    /// for itself forever (`may_send` compares with the lowest in flight).
    pub fn on_no_answer(&mut self, tp: &TopicPartition, base: i32) {
        if let Some(s) = self.partitions.get_mut(tp) {
            s.in_flight.remove(&base);
        }
    }

    pub fn may_send(&self, tp: &TopicPartition, retry_sequence: Option<i32>) -> bool {
        let Some(s) = self.partitions.get(tp) else {
            return true;
        };
        let Some(&first_in_flight) = s.in_flight.iter().next() else {
            return true;
        };
        if s.last_acked < 0 {
            return false;
        }
        match retry_sequence {
            Some(seq) => seq < first_in_flight,
            None => true,
        }
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
        let s = self
            .partitions
            .entry(tp.clone())
            .or_insert_with(|| PartitionSeq {
                last_acked: -1,
                ..Default::default()
            });
        match outcome {
            BatchOutcome::Success => {
                s.in_flight.remove(&base);
                let last = base.wrapping_add(count - 1) & i32::MAX;
                if s.last_acked < 0 || last > s.last_acked {
                    s.last_acked = last;
                }
            }
            BatchOutcome::Retry => {
                s.in_flight.remove(&base);
            }
            BatchOutcome::Fail(_) => {
                s.in_flight.remove(&base);
                // A failed batch leaves a hole in the sequence: batches after it
                // would be rejected forever. Bump the epoch to start over.
                if self.fatal.is_none() {
                    self.bump_requested = true;
                }
            }
            BatchOutcome::BumpEpochAndRetry => {
                s.in_flight.remove(&base);
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
        let mut s = IdempotenceState::new();
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
        assert_eq!(s.assign_sequence(&tp(), 3), 0);
        assert_eq!(s.assign_sequence(&tp(), 2), 3);
        assert_eq!(s.assign_sequence(&TopicPartition::new("t", 1), 1), 0);
    }

    #[test]
    fn early_batch_out_of_order_is_retried_not_bumped() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 5);
        let b = s.assign_sequence(&tp(), 5);
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
        s.mark_resent(&tp(), a);
        assert_eq!(
            s.on_response(&tp(), a, 5, 0, false, true),
            BatchOutcome::Success
        );
        s.mark_resent(&tp(), b);
        assert_eq!(
            s.on_response(&tp(), b, 5, 0, false, true),
            BatchOutcome::Success
        );
    }

    #[test]
    fn next_expected_batch_rejected_bumps_epoch() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 2);
        assert_eq!(
            s.on_response(&tp(), a, 2, 0, false, true),
            BatchOutcome::Success
        );
        let b = s.assign_sequence(&tp(), 2);
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
        assert_eq!(s.assign_sequence(&tp(), 1), 6);
    }

    #[test]
    fn first_batch_alone_in_flight_then_pipelined() {
        let mut s = ready_state();
        assert!(s.may_send(&tp(), None));
        let a = s.assign_sequence(&tp(), 2);
        assert!(!s.may_send(&tp(), None), "no ack yet: one batch in flight");
        s.on_response(&tp(), a, 2, 0, false, true);
        let b = s.assign_sequence(&tp(), 2);
        assert!(
            s.may_send(&tp(), None),
            "after an ack the broker checks sequences"
        );
        let _c = s.assign_sequence(&tp(), 2);
        // b failed and is retried while c is in flight: b (seq 2) < c (seq 4) goes.
        s.on_response(&tp(), b, 2, 6, true, true);
        assert!(s.may_send(&tp(), Some(b)));
        // A retry behind an earlier in-flight sequence waits.
        assert!(!s.may_send(&tp(), Some(100)));
    }

    #[test]
    fn duplicate_sequence_is_success() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 1);
        assert_eq!(
            s.on_response(&tp(), a, 1, codes::DUPLICATE_SEQUENCE_NUMBER, false, true),
            BatchOutcome::Success
        );
    }

    #[test]
    fn failed_batch_requests_bump_and_fencing_is_fatal() {
        let mut s = ready_state();
        let a = s.assign_sequence(&tp(), 1);
        assert_eq!(
            s.on_response(&tp(), a, 1, codes::MESSAGE_TOO_LARGE, false, true),
            BatchOutcome::Fail(codes::MESSAGE_TOO_LARGE)
        );
        assert!(s.needs_init());
        s.set_producer_id_and_epoch(ProducerIdAndEpoch {
            producer_id: 7,
            epoch: 1,
        });
        let b = s.assign_sequence(&tp(), 1);
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
        let a = s.assign_sequence(&tp(), 1);
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
        assert_eq!(s.assign_sequence(&tp(), 3), i32::MAX - 1);
        assert_eq!(s.assign_sequence(&tp(), 1), 1);
    }
}
