//! The transaction manager's handling of answers (docs/semantics.md §7.6):
//! which codes are retried, which move the coordinator, which make the
//! transaction abortable and which are fatal, per API.

use std::collections::{BTreeMap, BTreeSet};

use ferrokafka_protocol::codes::*;
use ferrokafka_protocol::kafka_protocol::messages::ResponseKind;

use super::requests as rq;
use super::{
    coordinator_moved, fenced_error, is_fenced, retry_later, Op, TransactionManager, TxnState, Work,
};
use crate::consumer::requests::parse_find_coordinator;
use crate::error::Error;
use crate::producer::idempotence::ProducerIdAndEpoch;

impl TransactionManager {
    /// Put `work` back and wait a backoff before the next request.
    fn again(&mut self, work: Work, now_ms: i64) {
        self.queue.push(work);
        self.retry_at_ms = now_ms + self.retry_backoff_ms;
    }

    /// The answer to our request `tag` (`Err`: none came: disconnected,
    /// timed out, or the request could not be sent).
    pub fn on_answer(&mut self, tag: u64, result: Result<ResponseKind, Error>, now_ms: i64) {
        let Some((t, work)) = self.in_flight.take() else {
            return;
        };
        if t != tag {
            self.in_flight = Some((t, work));
            return;
        }
        let resp = match result {
            Ok(r) => r,
            Err(e @ Error::UnsupportedVersion { .. }) => {
                // The broker does not speak this transactional API at all.
                return self.fatal(e);
            }
            Err(e) => {
                log::debug!(
                    target: "ferrokafka::producer",
                    "transactional request {work:?} got no answer ({e}); retrying"
                );
                // The coordinator may be gone: look it up again first.
                match &work {
                    Work::OffsetCommit(_) => self.group_coordinator = None,
                    Work::FindCoordinator(_) => {}
                    _ => self.txn_coordinator = None,
                }
                return self.again(work, now_ms);
            }
        };
        match (work, resp) {
            (Work::FindCoordinator(group), ResponseKind::FindCoordinator(r)) => {
                let key = group.clone().unwrap_or_else(|| self.id.clone());
                match parse_find_coordinator(&r, &key) {
                    Ok(node) => match group {
                        Some(g) => self.group_coordinator = Some((g, node)),
                        None => self.txn_coordinator = Some(node),
                    },
                    Err(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) => self.fatal(Error::broker(
                        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        Some(format!(
                            "finding the coordinator of transactional id {}",
                            self.id
                        )),
                    )),
                    Err(GROUP_AUTHORIZATION_FAILED) => self.abortable(Error::broker(
                        GROUP_AUTHORIZATION_FAILED,
                        Some(format!("finding the coordinator of group {key}")),
                    )),
                    Err(_) => self.retry_at_ms = now_ms + self.retry_backoff_ms,
                }
            }
            (Work::InitProducerId, ResponseKind::InitProducerId(r)) => match r.error_code {
                NONE => {
                    self.pid = ProducerIdAndEpoch {
                        producer_id: r.producer_id.0,
                        epoch: r.producer_epoch,
                    };
                    self.epoch_bump_required = false;
                    self.last_error = None;
                    self.state = TxnState::Ready;
                    let op = self.op.unwrap_or(Op::Init);
                    self.finish(op, Ok(()));
                }
                c if coordinator_moved(c) => {
                    self.txn_coordinator = None;
                    self.again(Work::InitProducerId, now_ms)
                }
                c if retry_later(c) => self.again(Work::InitProducerId, now_ms),
                c if is_fenced(c) => self.fatal(fenced_error(c, "InitProducerId")),
                c if self.pid.is_valid()
                    && !self.bump_refused
                    && c != TRANSACTIONAL_ID_AUTHORIZATION_FAILED =>
                {
                    // A coordinator that does not take KIP-360's "bump this
                    // id" form (the embedded broker answers it with
                    // UNKNOWN_SERVER_ERROR): the plain form, by transactional
                    // id alone, bumps the epoch as well.
                    log::info!(
                        target: "ferrokafka::producer",
                        "InitProducerId naming our id was refused ({c}); asking by transactional id"
                    );
                    self.bump_refused = true;
                    self.again(Work::InitProducerId, now_ms)
                }
                c => self.fatal(Error::broker(c, Some("InitProducerId".into()))),
            },
            (Work::AddPartitions(asked), ResponseKind::AddPartitionsToTxn(r)) => {
                let codes = rq::parse_add_partitions(&r, &asked);
                let mut retry = BTreeSet::new();
                let mut moved = false;
                for (tp, code) in codes {
                    match code {
                        NONE => {
                            self.in_txn.insert(tp);
                            self.started = true;
                        }
                        c if coordinator_moved(c) => {
                            moved = true;
                            retry.insert(tp);
                        }
                        c if retry_later(c) => {
                            retry.insert(tp);
                        }
                        c if is_fenced(c) => {
                            return self.fatal(fenced_error(c, "AddPartitionsToTxn"))
                        }
                        c @ (TRANSACTIONAL_ID_AUTHORIZATION_FAILED | INVALID_TXN_STATE) => {
                            return self.fatal(Error::broker(
                                c,
                                Some(format!("adding {tp:?} to the transaction")),
                            ))
                        }
                        c @ (UNKNOWN_PRODUCER_ID | INVALID_PRODUCER_ID_MAPPING) => {
                            self.epoch_bump_required = true;
                            return self.abortable(Error::broker(
                                c,
                                Some(format!("adding {tp:?} to the transaction")),
                            ));
                        }
                        c => {
                            return self.abortable(Error::broker(
                                c,
                                Some(format!("adding {tp:?} to the transaction")),
                            ))
                        }
                    }
                }
                if moved {
                    self.txn_coordinator = None;
                }
                if !retry.is_empty() {
                    // Partitions appended since join this retry.
                    retry.append(&mut self.new_partitions);
                    self.again(Work::AddPartitions(retry), now_ms);
                }
            }
            (Work::AddOffsets(o), ResponseKind::AddOffsetsToTxn(r)) => match r.error_code {
                NONE => {
                    self.started = true;
                    self.queue.push(Work::OffsetCommit(o));
                }
                c if coordinator_moved(c) => {
                    self.txn_coordinator = None;
                    self.again(Work::AddOffsets(o), now_ms)
                }
                c if retry_later(c) => self.again(Work::AddOffsets(o), now_ms),
                c if is_fenced(c) => self.fatal(fenced_error(c, "AddOffsetsToTxn")),
                c @ TRANSACTIONAL_ID_AUTHORIZATION_FAILED => {
                    self.fatal(Error::broker(c, Some("AddOffsetsToTxn".into())))
                }
                c @ (UNKNOWN_PRODUCER_ID | INVALID_PRODUCER_ID_MAPPING) => {
                    self.epoch_bump_required = true;
                    self.abortable(Error::broker(c, Some("AddOffsetsToTxn".into())))
                }
                c => self.abortable(Error::broker(c, Some("AddOffsetsToTxn".into()))),
            },
            (Work::OffsetCommit(mut o), ResponseKind::TxnOffsetCommit(r)) => {
                let codes = rq::parse_txn_offset_commit(&r);
                let mut moved = false;
                let mut left = BTreeMap::new();
                for (tp, code) in codes {
                    match code {
                        NONE => {}
                        c if coordinator_moved(c) => {
                            moved = true;
                            if let Some(off) = o.offsets.get(&tp) {
                                left.insert(tp, off.clone());
                            }
                        }
                        c if retry_later(c) => {
                            if let Some(off) = o.offsets.get(&tp) {
                                left.insert(tp, off.clone());
                            }
                        }
                        c if is_fenced(c) => return self.fatal(fenced_error(c, "TxnOffsetCommit")),
                        c @ TRANSACTIONAL_ID_AUTHORIZATION_FAILED => {
                            return self.fatal(Error::broker(c, Some("TxnOffsetCommit".into())))
                        }
                        c @ (UNKNOWN_MEMBER_ID | ILLEGAL_GENERATION | FENCED_INSTANCE_ID) => {
                            // Java's CommitFailedException: the consumer left
                            // the generation; this transaction cannot commit.
                            return self.abortable(Error::broker(
                                c,
                                Some(format!(
                                    "committing offsets of group {} in the transaction: the consumer \
                                     is no longer a member of that generation",
                                    o.group.group_id
                                )),
                            ));
                        }
                        c => {
                            return self.abortable(Error::broker(
                                c,
                                Some(format!("committing offsets of group {}", o.group.group_id)),
                            ))
                        }
                    }
                }
                if moved {
                    self.group_coordinator = None;
                }
                if left.is_empty() {
                    self.finish(Op::SendOffsets, Ok(()));
                } else {
                    o.offsets = left;
                    self.again(Work::OffsetCommit(o), now_ms);
                }
            }
            (Work::EndTxn { commit }, ResponseKind::EndTxn(r)) => match r.error_code {
                NONE => self.complete_transaction(),
                c if coordinator_moved(c) => {
                    self.txn_coordinator = None;
                    self.again(Work::EndTxn { commit }, now_ms)
                }
                c if retry_later(c) => self.again(Work::EndTxn { commit }, now_ms),
                c if is_fenced(c) => self.fatal(fenced_error(c, "EndTxn")),
                c @ (UNKNOWN_PRODUCER_ID | INVALID_PRODUCER_ID_MAPPING) if commit => {
                    self.epoch_bump_required = true;
                    self.abortable(Error::broker(c, Some("EndTxn".into())))
                }
                c @ (UNKNOWN_PRODUCER_ID | INVALID_PRODUCER_ID_MAPPING) => {
                    // An abort the coordinator has no state for: ending it
                    // with a fresh InitProducerId does the same job.
                    log::debug!(target: "ferrokafka::producer", "EndTxn(abort) got {c}: re-initializing");
                    self.in_txn.clear();
                    self.last_seen = None;
                    self.started = false;
                    self.state = TxnState::Initializing;
                    self.queue.push(Work::InitProducerId);
                }
                c => self.fatal(Error::broker(c, Some("EndTxn".into()))),
            },
            (work, _) => {
                log::warn!(target: "ferrokafka::producer", "unexpected answer to {work:?}; retrying");
                self.again(work, now_ms);
            }
        }
    }
}
