//! The transaction manager: a sans-IO state machine for the transactional
//! producer (docs/semantics.md §7), after the states and error classes of
//! Java's `TransactionManager`.
//!
//! It reads no clock and sends nothing. `ProducerCore` asks it for the next
//! request (`poll`, one transactional request in flight at a time, as in
//! Java), hands it the answers (`on_answer`), tells it about every partition
//! a record is appended to (`maybe_add_partition`) and every batch the
//! broker refused (`on_batch_failed`), and asks it which partitions may be
//! drained (`may_drain`: only those the coordinator has added to the
//! transaction, so no record is ever written outside it).
//!
//! The user's calls (`init`, `begin`, `send_offsets`, `commit`, `abort`)
//! start an operation and return at once; the facade then waits for
//! `take_outcome(op)`. A call that timed out leaves its operation running,
//! and calling the same method again waits for the same outcome (Java's
//! retry-after-timeout rule).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use ferrokafka_protocol::codes::*;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind};

use crate::cluster::{Node, TopicPartition};
use crate::consumer::requests::{find_coordinator, OffsetAndMetadata};
use crate::error::Error;
use crate::producer::core::ClusterView;
use crate::producer::idempotence::ProducerIdAndEpoch;

mod answers;
pub mod requests;
#[cfg(test)]
mod tests;

use requests as rq;
pub use requests::GroupMetadata;

/// Java's `TransactionManager.State`, named as Java prints them (the names
/// appear in error messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    Uninitialized,
    Initializing,
    Ready,
    InTransaction,
    Committing,
    Aborting,
    AbortableError,
    FatalError,
}

impl std::fmt::Display for TxnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TxnState::Uninitialized => "UNINITIALIZED",
            TxnState::Initializing => "INITIALIZING",
            TxnState::Ready => "READY",
            TxnState::InTransaction => "IN_TRANSACTION",
            TxnState::Committing => "COMMITTING_TRANSACTION",
            TxnState::Aborting => "ABORTING_TRANSACTION",
            TxnState::AbortableError => "ABORTABLE_ERROR",
            TxnState::FatalError => "FATAL_ERROR",
        })
    }
}

/// A user call that runs until the coordinator answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Init,
    SendOffsets,
    Commit,
    Abort,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Init => "init_transactions",
            Op::SendOffsets => "send_offsets_to_transaction",
            Op::Commit => "commit_transaction",
            Op::Abort => "abort_transaction",
        }
    }
}

/// Builds a request body at the version the network client settles on.
pub type BuildFn = Box<dyn Fn(i16) -> RequestKind + Send>;

/// One request to send; its answer goes to `on_answer(tag)`.
pub struct TxnRequest {
    pub tag: u64,
    pub node: Node,
    pub api_key: i16,
    pub max_version: Option<i16>,
    pub build: BuildFn,
}

impl std::fmt::Debug for TxnRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnRequest")
            .field("tag", &self.tag)
            .field("node", &self.node.id)
            .field("api_key", &self.api_key)
            .finish()
    }
}

/// Work waiting to be sent, in Java's priority order (`priority`).
#[derive(Debug, Clone)]
enum Work {
    /// `None`: the transaction coordinator; `Some(group)`: the group's.
    FindCoordinator(Option<String>),
    InitProducerId,
    AddPartitions(BTreeSet<TopicPartition>),
    AddOffsets(Offsets),
    OffsetCommit(Offsets),
    EndTxn {
        commit: bool,
    },
}

#[derive(Debug, Clone)]
struct Offsets {
    offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    group: GroupMetadata,
}

impl Work {
    fn priority(&self) -> u8 {
        match self {
            Work::FindCoordinator(_) => 0,
            Work::InitProducerId => 1,
            Work::AddPartitions(_) | Work::AddOffsets(_) => 2,
            Work::OffsetCommit(_) => 3,
            Work::EndTxn { .. } => 4,
        }
    }
}

pub struct TransactionManager {
    id: String,
    timeout_ms: i32,
    retry_backoff_ms: i64,
    state: TxnState,
    pid: ProducerIdAndEpoch,
    txn_coordinator: Option<Node>,
    group_coordinator: Option<(String, Node)>,
    /// Appended to in this transaction, not yet asked for.
    new_partitions: BTreeSet<TopicPartition>,
    /// Added by the coordinator: batches of these may be sent.
    in_txn: HashSet<TopicPartition>,
    /// The partition `maybe_add_partition` saw last in this transaction
    /// (added or queued for adding).
    last_seen: Option<TopicPartition>,
    /// A partition or offsets were added: EndTxn must go to the coordinator
    /// (an empty transaction completes locally, as in Java).
    started: bool,
    queue: Vec<Work>,
    in_flight: Option<(u64, Work)>,
    /// No transactional request before this (a retriable answer's backoff).
    retry_at_ms: i64,
    last_error: Option<Error>,
    /// A batch failed in this transaction (a hole in its sequences): after
    /// the abort, InitProducerId bumps the epoch so sequences restart.
    epoch_bump_required: bool,
    /// The coordinator refused an InitProducerId naming our id and epoch:
    /// later ones name the transactional id only.
    bump_refused: bool,
    /// The user call in progress, and its outcome once decided.
    op: Option<Op>,
    outcome: Option<(Op, Result<(), Error>)>,
}

/// Codes that mean another instance with our transactional id took over,
/// or the coordinator no longer accepts us at all.
fn is_fenced(code: i16) -> bool {
    matches!(
        code,
        PRODUCER_FENCED | INVALID_PRODUCER_EPOCH | TRANSACTION_COORDINATOR_FENCED
    )
}

/// The coordinator moved or is not there yet: find it again, then retry.
fn coordinator_moved(code: i16) -> bool {
    matches!(code, NOT_COORDINATOR | COORDINATOR_NOT_AVAILABLE)
}

/// Retry the same request after a backoff.
fn retry_later(code: i16) -> bool {
    matches!(
        code,
        COORDINATOR_LOAD_IN_PROGRESS
            | CONCURRENT_TRANSACTIONS
            | UNKNOWN_TOPIC_OR_PARTITION
            | OPERATION_NOT_ATTEMPTED
            | REQUEST_TIMED_OUT
            | NETWORK_EXCEPTION
    )
}

fn fenced_error(code: i16, what: &str) -> Error {
    // Java reports an INVALID_PRODUCER_EPOCH answer to a transactional call
    // as ProducerFencedException: another producer with the same
    // transactional id has initialized since.
    Error::broker(
        PRODUCER_FENCED,
        Some(format!(
            "{what}: fenced by a newer producer with the same transactional id (broker said code {code})"
        )),
    )
}

impl TransactionManager {
    pub fn new(transactional_id: &str, timeout_ms: i32, retry_backoff_ms: i64) -> Self {
        TransactionManager {
            id: transactional_id.to_string(),
            timeout_ms,
            retry_backoff_ms: retry_backoff_ms.max(1),
            state: TxnState::Uninitialized,
            pid: ProducerIdAndEpoch::NONE,
            txn_coordinator: None,
            group_coordinator: None,
            new_partitions: BTreeSet::new(),
            in_txn: HashSet::new(),
            last_seen: None,
            started: false,
            queue: Vec::new(),
            in_flight: None,
            retry_at_ms: 0,
            last_error: None,
            epoch_bump_required: false,
            bump_refused: false,
            op: None,
            outcome: None,
        }
    }

    pub fn state(&self) -> TxnState {
        self.state
    }

    pub fn transactional_id(&self) -> &str {
        &self.id
    }

    pub fn producer_id_and_epoch(&self) -> ProducerIdAndEpoch {
        self.pid
    }

    /// The error that made the state ABORTABLE_ERROR or FATAL_ERROR.
    pub fn last_error(&self) -> Option<&Error> {
        self.last_error.as_ref()
    }

    /// The Produce code a fatal error should fail pending records with.
    pub fn fatal_code(&self) -> Option<i16> {
        (self.state == TxnState::FatalError)
            .then(|| self.last_error.as_ref().map_or(-1, |e| e.code()))
    }

    fn illegal(&self, what: &str) -> Error {
        Error::State {
            detail: format!("{what} is not allowed in transaction state {}", self.state),
        }
    }

    /// The stored error, for calls made after a fatal or abortable error.
    /// After an abortable one, the same error class (so `except
    /// TopicAuthorizationFailedError` works wherever it surfaces) with a
    /// message saying the transaction must be aborted.
    fn failed(&self, what: &str) -> Error {
        let must_abort = |e: &Error| {
            format!(
                "{what}: the transaction hit an error and must be aborted (abort_transaction): {e}"
            )
        };
        match &self.last_error {
            Some(e) if self.state == TxnState::FatalError => e.clone(),
            Some(e @ Error::Broker { code, .. }) => Error::broker(*code, Some(must_abort(e))),
            Some(e @ Error::Timeout { timeout_ms, .. }) => Error::Timeout {
                what: must_abort(e),
                timeout_ms: *timeout_ms,
            },
            Some(e) => Error::State {
                detail: must_abort(e),
            },
            None => self.illegal(what),
        }
    }

    /// `Ok(true)`: the op was started now; `Ok(false)`: it was already
    /// running or finished (a retried call after a timeout): wait for it.
    fn start(&mut self, op: Op) -> Result<bool, Error> {
        if self.op == Some(op) || self.outcome.as_ref().is_some_and(|(o, _)| *o == op) {
            return Ok(false);
        }
        if let Some(other) = self.op {
            return Err(Error::State {
                detail: format!(
                    "{} called while {} is still in progress (state {})",
                    op.name(),
                    other.name(),
                    self.state
                ),
            });
        }
        self.outcome = None;
        self.op = Some(op);
        Ok(true)
    }

    fn finish(&mut self, op: Op, r: Result<(), Error>) {
        if self.op == Some(op) {
            self.op = None;
            self.outcome = Some((op, r));
        }
    }

    /// The outcome of `op`, once decided (taken: a later call starts anew).
    pub fn take_outcome(&mut self, op: Op) -> Option<Result<(), Error>> {
        match &self.outcome {
            Some((o, _)) if *o == op => self.outcome.take().map(|(_, r)| r),
            _ => None,
        }
    }

    /// Whether `op` is still waiting for the coordinator.
    pub fn in_progress(&self, op: Op) -> bool {
        self.op == Some(op)
    }

    pub fn init(&mut self) -> Result<(), Error> {
        if self.state == TxnState::FatalError {
            return Err(self.failed("init_transactions"));
        }
        if self.op == Some(Op::Init) || self.outcome.as_ref().is_some_and(|(o, _)| *o == Op::Init) {
            return Ok(());
        }
        if self.state != TxnState::Uninitialized {
            return Err(self.illegal("init_transactions"));
        }
        self.start(Op::Init)?;
        self.state = TxnState::Initializing;
        self.queue.push(Work::InitProducerId);
        Ok(())
    }

    pub fn begin(&mut self) -> Result<(), Error> {
        match self.state {
            TxnState::Ready if self.op.is_none() => {
                self.state = TxnState::InTransaction;
                self.started = false;
                Ok(())
            }
            TxnState::FatalError | TxnState::AbortableError => {
                Err(self.failed("begin_transaction"))
            }
            _ => Err(self.illegal("begin_transaction")),
        }
    }

    /// Called for every appended record's partition, before the append:
    /// refuses records outside a transaction (Java's `failIfNotReadyForSend`).
    pub fn maybe_add_partition(&mut self, tp: &TopicPartition) -> Result<(), Error> {
        match self.state {
            TxnState::InTransaction => {}
            TxnState::FatalError | TxnState::AbortableError => {
                // A state error (raised by `send`, as Java's send throws),
                // naming the state and the error behind it.
                return Err(Error::State {
                    detail: format!(
                        "send is not allowed in transaction state {}{}",
                        self.state,
                        match (&self.last_error, self.state) {
                            (Some(e), TxnState::AbortableError) => format!(
                                ": the transaction must be aborted (abort_transaction) after: {e}"
                            ),
                            (Some(e), _) => format!(": the producer failed for good: {e}"),
                            (None, _) => String::new(),
                        }
                    ),
                });
            }
            TxnState::Uninitialized | TxnState::Initializing => {
                return Err(Error::State {
                    detail: "send before init_transactions completed: a transactional \
                             producer must call init_transactions and begin_transaction first"
                        .into(),
                });
            }
            _ => {
                return Err(Error::State {
                    detail: format!(
                        "send is only allowed inside a transaction (begin_transaction); \
                         transaction state is {}",
                        self.state
                    ),
                })
            }
        }
        // Most records go to the partition of the record before: skip the
        // set lookups for it (this runs for every record).
        if self.last_seen.as_ref() == Some(tp) {
            return Ok(());
        }
        if !self.in_txn.contains(tp) {
            self.new_partitions.insert(tp.clone());
        }
        self.last_seen = Some(tp.clone());
        Ok(())
    }

    /// Whether batches of `tp` may be drained: the coordinator added it.
    pub fn may_drain(&self, tp: &TopicPartition) -> bool {
        self.in_txn.contains(tp)
    }

    pub fn send_offsets(
        &mut self,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
        group: GroupMetadata,
    ) -> Result<(), Error> {
        if self.op == Some(Op::SendOffsets)
            || self
                .outcome
                .as_ref()
                .is_some_and(|(o, _)| *o == Op::SendOffsets)
        {
            return Ok(());
        }
        match self.state {
            TxnState::InTransaction => {}
            TxnState::FatalError | TxnState::AbortableError => {
                return Err(self.failed("send_offsets_to_transaction"))
            }
            _ => return Err(self.illegal("send_offsets_to_transaction")),
        }
        if group.group_id.is_empty() {
            return Err(Error::Config {
                key: "group_metadata".into(),
                detail: "the consumer has no group_id".into(),
            });
        }
        self.start(Op::SendOffsets)?;
        self.queue
            .push(Work::AddOffsets(Offsets { offsets, group }));
        Ok(())
    }

    pub fn commit(&mut self) -> Result<(), Error> {
        if self.op == Some(Op::Commit)
            || self.outcome.as_ref().is_some_and(|(o, _)| *o == Op::Commit)
        {
            return Ok(());
        }
        match self.state {
            TxnState::InTransaction => {}
            TxnState::FatalError | TxnState::AbortableError => {
                return Err(self.failed("commit_transaction"))
            }
            _ => return Err(self.illegal("commit_transaction")),
        }
        self.start(Op::Commit)?;
        self.state = TxnState::Committing;
        self.queue.push(Work::EndTxn { commit: true });
        Ok(())
    }

    pub fn abort(&mut self) -> Result<(), Error> {
        if self.op == Some(Op::Abort) || self.outcome.as_ref().is_some_and(|(o, _)| *o == Op::Abort)
        {
            return Ok(());
        }
        match self.state {
            TxnState::InTransaction | TxnState::AbortableError => {}
            TxnState::FatalError => return Err(self.failed("abort_transaction")),
            _ => return Err(self.illegal("abort_transaction")),
        }
        if let Some(other) = self.op.take() {
            // A send_offsets still waiting: the abort supersedes it.
            self.outcome = Some((
                other,
                Err(Error::State {
                    detail: format!("{} was cut short by abort_transaction", other.name()),
                }),
            ));
        }
        self.start(Op::Abort)?;
        self.state = TxnState::Aborting;
        // Nothing new is added to a transaction being aborted; what was
        // appended but not added is failed by the core (never sent).
        self.new_partitions.clear();
        self.last_seen = None;
        self.queue
            .retain(|w| matches!(w, Work::FindCoordinator(_) | Work::InitProducerId));
        let no_mapping = self
            .last_error
            .as_ref()
            .is_some_and(|e| e.code() == INVALID_PRODUCER_ID_MAPPING);
        if no_mapping {
            // The coordinator has no state for our id: EndTxn would be
            // refused; a fresh InitProducerId ends the transaction instead.
            self.state = TxnState::Initializing;
            self.queue.push(Work::InitProducerId);
        } else {
            self.queue.push(Work::EndTxn { commit: false });
        }
        Ok(())
    }

    /// Queued (undrained) batches must fail now: the transaction is being
    /// aborted or must be. Their error: the stored one, or "aborted".
    pub fn abort_undrained_error(&self) -> Option<Error> {
        match self.state {
            TxnState::Aborting => Some(Error::Aborted {
                detail: "the transaction was aborted before this record was sent".into(),
            }),
            TxnState::AbortableError => Some(match &self.last_error {
                Some(e) => e.clone(),
                None => Error::Aborted {
                    detail: "the transaction must be aborted".into(),
                },
            }),
            TxnState::Initializing if self.op == Some(Op::Abort) => Some(Error::Aborted {
                detail: "the transaction was aborted before this record was sent".into(),
            }),
            _ => None,
        }
    }

    /// Committing: every queued batch should be sent now (no linger).
    pub fn is_committing(&self) -> bool {
        self.state == TxnState::Committing
    }

    /// A batch that had a sequence was failed without being acknowledged
    /// (aborted after a retry): sequences must restart after the abort.
    pub fn require_epoch_bump(&mut self) {
        self.epoch_bump_required = true;
    }

    /// The broker refused one of our batches for good (or it timed out).
    pub fn on_batch_failed(&mut self, err: &Error) {
        if self.state == TxnState::FatalError {
            // Already failed for good: the batches that fail after it (every
            // pending one) add nothing, and must not log the error again each.
            return;
        }
        let code = err.code();
        if is_fenced(code) {
            self.fatal(fenced_error(code, "Produce"));
        } else if matches!(
            code,
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED | CLUSTER_AUTHORIZATION_FAILED
        ) {
            self.fatal(err.clone());
        } else {
            // Java: `handleFailedBatch` -> abortable, and the sequence hole
            // needs a new epoch once the transaction is aborted.
            self.epoch_bump_required = true;
            self.abortable(err.clone());
        }
    }

    fn fatal(&mut self, e: Error) {
        log::error!(
            target: "ferrokafka::producer",
            "transactional producer {} hit a fatal error: {e}",
            self.id
        );
        self.state = TxnState::FatalError;
        self.last_error = Some(e.clone());
        self.queue.clear();
        self.new_partitions.clear();
        self.last_seen = None;
        if let Some(op) = self.op {
            self.finish(op, Err(e));
        }
    }

    fn abortable(&mut self, e: Error) {
        match self.state {
            // Already ending the transaction: the abort goes on.
            TxnState::Aborting | TxnState::FatalError => return,
            TxnState::Initializing if self.op == Some(Op::Abort) => return,
            TxnState::Initializing | TxnState::Uninitialized => {
                // No transaction yet: an init that fails this way is fatal.
                return self.fatal(e);
            }
            _ => {}
        }
        log::warn!(
            target: "ferrokafka::producer",
            "transaction of {} must be aborted: {e}",
            self.id
        );
        self.state = TxnState::AbortableError;
        self.last_error = Some(e.clone());
        self.new_partitions.clear();
        self.last_seen = None;
        self.queue
            .retain(|w| matches!(w, Work::FindCoordinator(_) | Work::InitProducerId));
        if let Some(op) = self.op {
            self.finish(op, Err(e));
        }
    }

    /// The transaction ended (EndTxn answered, or nothing to end).
    fn complete_transaction(&mut self) {
        self.in_txn.clear();
        self.new_partitions.clear();
        self.last_seen = None;
        self.started = false;
        self.last_error = None;
        let op = self.op.unwrap_or(Op::Commit);
        if self.epoch_bump_required {
            self.state = TxnState::Initializing;
            self.queue.push(Work::InitProducerId);
        } else {
            self.state = TxnState::Ready;
            self.finish(op, Ok(()));
        }
    }

    /// The next request to send, if any (`None` while one is in flight, a
    /// backoff runs, or EndTxn waits for `has_incomplete` batches).
    /// `tag` allocates the request's tag.
    pub fn poll(
        &mut self,
        now_ms: i64,
        has_incomplete: bool,
        view: &dyn ClusterView,
        tag: &mut dyn FnMut() -> u64,
    ) -> Option<TxnRequest> {
        if matches!(self.state, TxnState::InTransaction | TxnState::Committing)
            && !self.new_partitions.is_empty()
            && !self
                .queue
                .iter()
                .any(|w| matches!(w, Work::AddPartitions(_)))
            && !matches!(self.in_flight, Some((_, Work::AddPartitions(_))))
        {
            let parts = std::mem::take(&mut self.new_partitions);
            self.queue.push(Work::AddPartitions(parts));
        }
        if self.in_flight.is_some() || now_ms < self.retry_at_ms {
            return None;
        }
        loop {
            let i = (0..self.queue.len()).min_by_key(|&i| self.queue[i].priority())?;
            if let Work::EndTxn { .. } = self.queue[i] {
                if has_incomplete || !self.new_partitions.is_empty() {
                    // Java sends EndTxn only once every batch of the
                    // transaction is answered.
                    return None;
                }
                if !self.started {
                    // Nothing was added: nothing for the coordinator to end.
                    self.queue.remove(i);
                    self.complete_transaction();
                    continue;
                }
            }
            let work = self.queue.remove(i);
            let node = match &work {
                Work::FindCoordinator(_) => {
                    view.least_loaded_ready_node().and_then(|id| view.node(id))
                }
                Work::OffsetCommit(o) => match &self.group_coordinator {
                    Some((g, n)) if *g == o.group.group_id => Some(n.clone()),
                    _ => {
                        let g = o.group.group_id.clone();
                        self.queue.push(work);
                        self.queue.push(Work::FindCoordinator(Some(g)));
                        continue;
                    }
                },
                _ => match &self.txn_coordinator {
                    Some(n) => Some(n.clone()),
                    None => {
                        self.queue.push(work);
                        self.queue.push(Work::FindCoordinator(None));
                        continue;
                    }
                },
            };
            let Some(node) = node.filter(|n| view.node_ready_at(n)) else {
                // Not connected yet (ready() started it): look again soon.
                self.queue.push(work);
                self.retry_at_ms = now_ms + 2;
                return None;
            };
            let req = self.build(work.clone(), node, tag());
            self.in_flight = Some((req.tag, work));
            return Some(req);
        }
    }

    /// When `poll` wants to be called again at the latest, if it waits.
    pub fn wake_at_ms(&self) -> Option<i64> {
        (self.in_flight.is_none() && !self.queue.is_empty()).then_some(self.retry_at_ms)
    }

    fn build(&self, work: Work, node: Node, tag: u64) -> TxnRequest {
        let id = self.id.clone();
        let pid = self.pid;
        let (api_key, max_version, build): (ApiKey, Option<i16>, BuildFn) = match work {
            Work::FindCoordinator(group) => (
                ApiKey::FindCoordinator,
                None,
                Box::new(move |v| {
                    RequestKind::FindCoordinator(match &group {
                        Some(g) => find_coordinator(g, 0, v),
                        None => find_coordinator(&id, 1, v),
                    })
                }),
            ),
            Work::InitProducerId => {
                let timeout = self.timeout_ms;
                // With a valid id (a bump after an abort), v3+ names it,
                // unless the coordinator refused that once already.
                let current = (pid.is_valid() && !self.bump_refused).then_some(pid);
                (
                    ApiKey::InitProducerId,
                    None,
                    Box::new(move |v| {
                        RequestKind::InitProducerId(rq::init_producer_id(&id, timeout, current, v))
                    }),
                )
            }
            Work::AddPartitions(parts) => (
                ApiKey::AddPartitionsToTxn,
                Some(rq::ADD_PARTITIONS_CLIENT_MAX_VERSION),
                Box::new(move |_| {
                    RequestKind::AddPartitionsToTxn(rq::add_partitions(&id, pid, &parts))
                }),
            ),
            Work::AddOffsets(o) => (
                ApiKey::AddOffsetsToTxn,
                None,
                Box::new(move |_| {
                    RequestKind::AddOffsetsToTxn(rq::add_offsets(&id, pid, &o.group.group_id))
                }),
            ),
            Work::OffsetCommit(o) => (
                ApiKey::TxnOffsetCommit,
                None,
                Box::new(move |v| {
                    RequestKind::TxnOffsetCommit(rq::txn_offset_commit(
                        &id, pid, &o.group, &o.offsets, v,
                    ))
                }),
            ),
            Work::EndTxn { commit } => (
                ApiKey::EndTxn,
                Some(rq::END_TXN_MAX_VERSION),
                Box::new(move |_| RequestKind::EndTxn(rq::end_txn(&id, pid, commit))),
            ),
        };
        TxnRequest {
            tag,
            node,
            api_key: api_key as i16,
            max_version,
            build,
        }
    }

    /// Whether `tag` is this manager's request.
    pub fn owns(&self, tag: u64) -> bool {
        self.in_flight.as_ref().is_some_and(|(t, _)| *t == tag)
    }
}
