//! The producer's transactional calls (docs/semantics.md §7): each starts
//! a call on the transaction manager under the core's lock, wakes the
//! runner, and waits on `txn_changed` for the call's outcome.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{Producer, WAIT_SLICE};
use crate::cluster::TopicPartition;
use crate::consumer::requests::OffsetAndMetadata;
use crate::error::Error;
use crate::producer::runner::Completion;
use crate::producer::sender::EncodableBatch;
use crate::producer::txn::{GroupMetadata, Op, TransactionManager, TxnState};

impl<B: EncodableBatch + Send + 'static, C: Completion> Producer<B, C> {
    /// Start transactional call `op` (`start` on the manager: it refuses a
    /// call the state does not allow, and accepts a repeat of a call still
    /// running), then wait for its outcome until `timeout` (None:
    /// `max_block_ms`, as Java). A timeout leaves the call running: calling
    /// the same method again waits for the same outcome (docs/semantics.md §7).
    fn txn_run(
        &self,
        op: Op,
        start: impl FnOnce(&mut TransactionManager) -> Result<(), Error>,
        timeout: Option<Duration>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        let timeout = timeout.unwrap_or(Duration::from_millis(
            self.shared.cfg.max_block_ms.max(0) as u64
        ));
        let started = Instant::now();
        let r = self.txn_wait(op, start, timeout, interrupted);
        // Java counts the time of every call, failed ones included.
        self.shared.stats.txn_time(
            match op {
                Op::Init => 0,
                Op::SendOffsets => 2,
                Op::Commit => 3,
                Op::Abort => 4,
            },
            started.elapsed().as_nanos() as u64,
        );
        r
    }

    fn txn_wait(
        &self,
        op: Op,
        start: impl FnOnce(&mut TransactionManager) -> Result<(), Error>,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        let mut st = self.lock();
        st.txn_call(start)?;
        drop(st);
        self.wake();
        st = self.lock();
        loop {
            if let Some(t) = st.txn_call_outcome(op) {
                return t;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "{} (still running: call it again to keep waiting)",
                        match op {
                            Op::Init => "init_transactions",
                            Op::SendOffsets => "send_offsets_to_transaction",
                            Op::Commit => "commit_transaction",
                            Op::Abort => "abort_transaction",
                        }
                    ),
                    timeout_ms: timeout.as_millis() as u64,
                });
            }
            if interrupted() {
                return Err(Error::Interrupted);
            }
            st = self
                .shared
                .txn_changed
                .wait_timeout(st, (deadline - now).min(WAIT_SLICE))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Java's `initTransactions`: find the coordinator, get the producer id
    /// and epoch of our transactional id (fencing older instances, and
    /// having the coordinator finish their open transaction).
    pub fn init_transactions(
        &self,
        timeout: Option<Duration>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        self.txn_run(Op::Init, |t| t.init(), timeout, interrupted)
    }

    pub fn begin_transaction(&self) -> Result<(), Error> {
        let started = Instant::now();
        let r = self.lock().txn_call(|t| t.begin());
        self.shared
            .stats
            .txn_time(1, started.elapsed().as_nanos() as u64);
        r
    }

    pub fn send_offsets_to_transaction(
        &self,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
        group: GroupMetadata,
        timeout: Option<Duration>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        self.txn_run(
            Op::SendOffsets,
            move |t| t.send_offsets(offsets, group),
            timeout,
            interrupted,
        )
    }

    /// Sends what is queued (no linger), then EndTxn(commit) once every
    /// record of the transaction is acknowledged.
    pub fn commit_transaction(
        &self,
        timeout: Option<Duration>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        self.txn_run(Op::Commit, |t| t.commit(), timeout, interrupted)
    }

    /// Fails queued records (`Error::Aborted`), waits for those in flight,
    /// then EndTxn(abort); allowed after an abortable error.
    pub fn abort_transaction(
        &self,
        timeout: Option<Duration>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        self.txn_run(Op::Abort, |t| t.abort(), timeout, interrupted)
    }

    /// The transaction state's name (`None`: not transactional).
    pub fn transaction_state(&self) -> Option<TxnState> {
        self.lock().txn().map(|t| t.state())
    }
}
