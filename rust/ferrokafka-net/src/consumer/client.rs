//! The consumer: the application's face (`poll`, `commit`, `seek`, offset
//! lookups) and the consumer thread that carries out what the sans-IO
//! [`ConsumerCore`](crate::consumer::core::ConsumerCore) decides.
//!
//! Threads and locks (what the rest of this file relies on):
//! * `state` (one mutex) holds the `ConsumerCore`: the subscription, the
//!   group membership, the buffer of decoded fetches and the events for the
//!   application. Nobody waits for I/O or runs user code under it; the
//!   consumer thread decodes Fetch answers (CRC, decompression) *before*
//!   taking it (`prepare_answer`).
//! * The consumer thread owns the consumer's connections: it alone polls
//!   the `BlockingClient`, so an answer goes connection task -> consumer
//!   thread -> application (no driver thread in between). It only moves
//!   bytes and wakes: it asks the core what to do (`step`, `on_answer`),
//!   carries out the returned actions, and sleeps in `BlockingClient::poll`
//!   until the core's `wake_at`, an answer, or `wakeup()` from the
//!   application thread (a command changed the state). That poll also
//!   drives the metadata updater of this client.
//! * Requests of the application thread (commit, committed, offset
//!   lookups, LeaveGroup) go through `outbox` to the consumer thread, which
//!   sends them like its own; their answers come back on a channel.
//! * The application thread blocks in two ways only: on `data` (a condvar
//!   paired with `state`) in `poll`, and on a reply channel for its own
//!   requests (commit, committed, offset lookups).
//! * Rebalance callbacks run in the application's thread, inside `poll`, as
//!   the Java client does: before an eager rejoin the core queues a
//!   revocation and waits (heartbeating) until the application has run
//!   `on_revoke` and acknowledged it, so a commit in `on_revoke` still lands
//!   with the old generation.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::blocking::{now_ms, BlockingClient};
use crate::cluster::{Node, TopicPartition};
use crate::consumer::coordinator::{offset_fetch_reaction, Reaction};
use crate::consumer::core::{commit_body, coordinator_connection, ConsumerCore, Dest, Request};
use crate::consumer::fetch::{
    build_list_offsets_request, parse_list_offsets_response, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP,
    READ_COMMITTED,
};
use crate::consumer::pool::ColumnPool;
use crate::consumer::requests::{self as rq, OffsetAndMetadata};
use crate::consumer::subscription::{FetchState, OffsetResetStrategy};
use crate::driver::{Body, RequestOpts, Requester};
use crate::error::Error;
use crate::metadata::Metadata;
use crate::telemetry::agent::Agent;
use crate::telemetry::Kind as TelemetryKind;
use crate::wait;

mod commits;
mod offsets;

pub use crate::consumer::config::{ConsumerConfig, Polled, RebalanceEvent, RecordSlice};
use crate::consumer::shell::{run, Inner};

/// Records of one whole fetched run from which `poll_for_arrow` returns the
/// run alone: below it, merging with the next run (a copy) costs less than
/// another call would.
pub const ARROW_RUN_ALONE: usize = 1024;

/// ListOffsets queries grouped by leader: node id -> (node, [(partition,
/// timestamp, leader epoch)]).
type ByLeader = BTreeMap<i32, (Node, Vec<(TopicPartition, i64, i32)>)>;

pub struct Consumer {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
    commits: commits::AsyncCommits,
    /// KIP-714 metrics push; closed (terminating push) before the
    /// consumer's thread stops polling the network client.
    telemetry: Mutex<Option<Agent>>,
}

impl Consumer {
    /// `metadata` must be base (non-producer) metadata driven by `net`'s updater.
    pub fn new(
        cfg: ConsumerConfig,
        metadata: Arc<Metadata>,
        net: Arc<BlockingClient>,
    ) -> Result<Self, Error> {
        cfg.validate()?;
        metadata.set_subscription(Some(vec![]))?;
        let pool = ColumnPool::for_fetch_sizes(cfg.max_partition_fetch_bytes, cfg.fetch_max_bytes);
        let inner = Arc::new(Inner {
            state: Mutex::new(ConsumerCore::new(cfg.clone(), now_ms())),
            cfg,
            data: Arc::new(Condvar::new()),
            metadata,
            net,
            outbox: Mutex::default(),
            stop: AtomicBool::new(false),
            pool,
        });
        let telemetry = if inner.net.metrics_push() {
            // A weak handle: the agent must not keep a dropped consumer alive.
            let weak = Arc::downgrade(&inner);
            Agent::start(
                TelemetryKind::Consumer,
                inner.net.clone(),
                Box::new(move || {
                    weak.upgrade()
                        .map(|i| {
                            let mut out = i.lock().metrics(now_ms());
                            out.extend(i.net.node_metrics());
                            out
                        })
                        .unwrap_or_default()
                }),
            )
        } else {
            None
        };
        let worker = inner.clone();
        let log = inner.net.log_context();
        let thread = std::thread::Builder::new()
            .name("ferrokafka-consumer".into())
            .spawn(move || {
                crate::log_context::set_thread(log);
                run(worker)
            })
            .map_err(|e| Error::State {
                detail: format!("cannot start the consumer thread: {e}"),
            })?;
        Ok(Consumer {
            inner,
            thread: Some(thread),
            commits: commits::AsyncCommits::default(),
            telemetry: Mutex::new(telemetry),
        })
    }

    pub fn config(&self) -> &ConsumerConfig {
        &self.inner.cfg
    }

    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.inner.metadata
    }

    fn check_open(&self, st: &ConsumerCore) -> Result<(), Error> {
        if st.closed {
            Err(Error::Closed { what: "consumer" })
        } else {
            Ok(())
        }
    }

    // ----- subscription ------------------------------------------------------

    /// Subscribe to topic names.
    pub fn subscribe(&self, topics: Vec<String>) -> Result<(), Error> {
        self.inner.group_id()?;
        let mut st = self.inner.lock();
        self.check_open(&st)?;
        let actions = st.subscribe(topics)?;
        drop(st);
        self.inner.apply(actions)?;
        self.inner.wake();
        Ok(())
    }

    /// Subscribe to the topics whose whole name matches `pattern` (Java's
    /// `subscribe(Pattern)`; the dialect: `SubscriptionState::subscribe_pattern`),
    /// now and as topics come and go: the background thread matches it
    /// against every metadata update and rejoins when the topics change.
    pub fn subscribe_pattern(&self, pattern: &str) -> Result<(), Error> {
        self.inner.group_id()?;
        let mut st = self.inner.lock();
        self.check_open(&st)?;
        let version = self.inner.metadata.update_version();
        let actions = st.subscribe_pattern(pattern, version)?;
        drop(st);
        self.inner.apply(actions)?;
        self.inner.wake();
        Ok(())
    }

    pub fn assign(&self, partitions: Vec<TopicPartition>) -> Result<(), Error> {
        let mut st = self.inner.lock();
        self.check_open(&st)?;
        let actions = st.assign(partitions)?;
        drop(st);
        self.inner.apply(actions)?;
        self.inner.wake();
        Ok(())
    }

    /// Leave the group (if any) and drop the assignment. Only the wait for
    /// the LeaveGroup answer can be interrupted: the consumer has then left
    /// already (locally), and the LeaveGroup may still reach the broker.
    pub fn unsubscribe(&self, interrupted: &dyn Fn() -> bool) -> Result<(), Error> {
        let leave = {
            let mut st = self.inner.lock();
            self.check_open(&st)?;
            let (leave, actions) = st.unsubscribe();
            drop(st);
            let _ = self.inner.apply(actions);
            leave
        };
        if let Some(Request {
            dest: Dest::Node(node),
            body,
            opts,
            ..
        }) = leave
        {
            let r = self
                .inner
                .request_blocking(node, body, opts, 5_000, interrupted);
            if let Err(Error::Interrupted) = r {
                return Err(Error::Interrupted);
            }
        }
        Ok(())
    }

    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.inner
            .lock()
            .subs
            .assigned_partitions()
            .cloned()
            .collect()
    }

    pub fn subscription(&self) -> Vec<String> {
        self.inner
            .lock()
            .subs
            .subscription()
            .iter()
            .cloned()
            .collect()
    }

    // ----- poll ----------------------------------------------------------------

    /// Rebalance events first (alone), then up to `max_records` records,
    /// waiting up to `timeout` for something to arrive. `interrupted` is
    /// asked between waits (Ctrl-C from the bindings); interrupted, poll
    /// returns what it has (nothing). Also drives pending async commits.
    pub fn poll(
        &self,
        max_records: usize,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Polled, Error> {
        self.poll_taking(max_records, usize::MAX, timeout, interrupted)
    }

    /// `poll` for an Arrow batch: a first whole fetched run of at least
    /// `ARROW_RUN_ALONE` records comes alone, so it is exported without a
    /// copy (docs/semantics.md §8.4).
    pub fn poll_for_arrow(
        &self,
        max_records: usize,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Polled, Error> {
        self.poll_taking(max_records, ARROW_RUN_ALONE, timeout, interrupted)
    }

    fn poll_taking(
        &self,
        max_records: usize,
        alone_from: usize,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Polled, Error> {
        let deadline = Instant::now() + timeout;
        // Before the lock: taking a commit answer locks the state.
        self.commits.drive(self);
        let mut st = self.inner.lock();
        self.check_open(&st)?;
        if st.on_poll(now_ms())? {
            self.inner.wake();
        }
        loop {
            if let Some(e) = st.errors.pop_front() {
                return Err(e);
            }
            if let Some(e) = self.auth_error() {
                // Java's poll raises AuthenticationException while the
                // brokers refuse us, rather than returning nothing forever.
                return Err(e);
            }
            let commits = std::mem::take(&mut st.commits_done);
            if !st.events.is_empty() {
                st.events_unacked = true;
                return Ok(Polled {
                    events: st.events.drain(..).collect(),
                    records: vec![],
                    commits,
                });
            }
            let records = st.take_records_runs(max_records, alone_from);
            if !records.is_empty() || !commits.is_empty() {
                drop(st);
                // Fetch the next range now, while the application works.
                self.inner.wake();
                return Ok(Polled {
                    events: vec![],
                    records,
                    commits,
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Polled::default());
            }
            let slice = (deadline - now).min(wait::SLICE);
            st = self
                .inner
                .data
                .wait_timeout(st, slice)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if st.closed {
                return Err(Error::Closed { what: "consumer" });
            }
            // Never ask with the state locked: the bindings' check takes the
            // GIL, and a Python thread holding the GIL may be waiting for
            // the state (assignment(), seek()...): a deadlock. Whatever
            // arrived meanwhile stays queued for the next poll.
            drop(st);
            if interrupted() {
                return Ok(Polled::default());
            }
            self.commits.drive(self);
            st = self.inner.lock();
        }
    }

    /// A TLS/SASL refusal by any broker we tried, if the last attempt failed so.
    fn auth_error(&self) -> Option<Error> {
        let core = self.inner.net.core();
        core.known_nodes()
            .iter()
            .find_map(|n| core.auth_error(n.id))
    }

    /// The application ran the callbacks of the events `poll` returned.
    pub fn ack_events(&self) {
        let mut st = self.inner.lock();
        st.events_unacked = false;
        drop(st);
        self.inner.wake();
    }

    // ----- positions -----------------------------------------------------------

    pub fn seek(&self, tp: &TopicPartition, offset: i64) -> Result<(), Error> {
        let mut st = self.inner.lock();
        st.seek(tp, offset)?;
        drop(st);
        self.inner.wake();
        Ok(())
    }

    pub fn seek_to(
        &self,
        tps: Option<Vec<TopicPartition>>,
        strategy: OffsetResetStrategy,
    ) -> Result<(), Error> {
        let mut st = self.inner.lock();
        st.seek_to(tps, strategy)?;
        drop(st);
        self.inner.wake();
        Ok(())
    }

    /// The offset of the next record for `tp`, waiting (up to `timeout`) for
    /// the committed offset or a reset when it is not known yet.
    pub fn position(
        &self,
        tp: &TopicPartition,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<i64, Error> {
        let deadline = Instant::now() + timeout;
        let mut st = self.inner.lock();
        st.want_positions = true;
        loop {
            let s = st.subs.state(tp).ok_or_else(|| Error::State {
                detail: format!(
                    "position() of {}-{}, which is not assigned to this consumer",
                    tp.topic, tp.partition
                ),
            })?;
            if let (Some(p), FetchState::Fetching) = (s.position, s.state) {
                return Ok(p.offset);
            }
            if let Some(e) = st.errors.pop_front() {
                return Err(e);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "position of {}-{}{}",
                        tp.topic,
                        tp.partition,
                        self.inner.metadata.connection_error_hint()
                    ),
                    timeout_ms: timeout.as_millis() as u64,
                });
            }
            drop(st);
            // Asked without the state locked (see `poll`).
            if interrupted() {
                return Err(Error::Interrupted);
            }
            self.inner.wake();
            st = self.inner.lock();
            st = self
                .inner
                .data
                .wait_timeout(st, (deadline - now).min(Duration::from_millis(50)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    pub fn pause(&self, tps: &[TopicPartition]) -> Result<(), Error> {
        let mut st = self.inner.lock();
        st.pause(tps)?;
        Ok(())
    }

    pub fn resume(&self, tps: &[TopicPartition]) -> Result<(), Error> {
        let mut st = self.inner.lock();
        for tp in tps {
            st.subs.resume(tp)?;
        }
        drop(st);
        self.inner.wake();
        Ok(())
    }

    pub fn paused(&self) -> Vec<TopicPartition> {
        self.inner.lock().subs.paused()
    }

    /// High watermark seen in the last fetch of `tp` (-1 before one).
    pub fn watermarks(&self, tp: &TopicPartition) -> Option<(i64, i64)> {
        self.inner
            .lock()
            .subs
            .state(tp)
            .map(|s| (s.log_start_offset, s.high_watermark))
    }

    /// Java-named figures (docs/metrics.md), read on demand from the
    /// core's counters and the network client's per-node figures.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        let mut out = self.inner.lock().metrics(now_ms());
        out.extend(self.inner.net.node_metrics());
        out
    }

    /// Per assigned partition: last Fetch high watermark minus the
    /// position. No request is sent (a partition not fetched yet is absent).
    pub fn lag(&self) -> Vec<(TopicPartition, i64)> {
        self.inner.lock().lag()
    }

    // ----- offsets ---------------------------------------------------------------

    /// Consumed positions of every assigned partition (what `commit()` sends).
    pub fn consumed_offsets(&self) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.inner.lock().subs.consumed_offsets()
    }

    /// The coordinator, waiting (up to `timeout`) for discovery.
    pub fn ensure_coordinator_ready(
        &self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Node, Error> {
        self.inner.group_id()?;
        let deadline = Instant::now() + timeout;
        loop {
            {
                let st = self.inner.lock();
                let g = st.group.as_ref().expect("group_id implies a membership");
                if let Some(code) = g.fatal() {
                    return Err(Error::broker(code, None));
                }
                if let Some(n) = g.coordinator() {
                    return Ok(n.clone());
                }
            }
            self.inner.wake();
            let now = Instant::now();
            if now < deadline && interrupted() {
                return Err(Error::Interrupted);
            }
            if now >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "finding the group coordinator{}",
                        self.inner.metadata.connection_error_hint()
                    ),
                    timeout_ms: timeout.as_millis() as u64,
                });
            }
            std::thread::sleep((deadline - now).min(Duration::from_millis(10)));
        }
    }

    pub fn coordinator(&self) -> Option<Node> {
        self.inner
            .lock()
            .group
            .as_ref()
            .and_then(|g| g.coordinator().cloned())
    }

    pub fn mark_coordinator_unknown(&self, reason: &str) {
        self.inner.lock().mark_coordinator_unknown(reason, now_ms());
        self.inner.wake();
    }

    /// (generation id, member id, protocol, state)
    pub fn generation(&self) -> (i32, String, Option<String>, &'static str) {
        let st = self.inner.lock();
        match st.group.as_ref() {
            Some(g) => {
                let gen = g.generation();
                (
                    gen.generation_id,
                    gen.member_id.clone(),
                    gen.protocol_name.clone(),
                    g.state().as_str(),
                )
            }
            None => (-1, String::new(), None, "UNJOINED"),
        }
    }

    /// Commit and wait, retrying retriable errors (coordinator moves) until
    /// `timeout`. `None` commits the consumed positions.
    ///
    /// `interrupted` is asked while waiting (for the coordinator, the
    /// answer, a retry backoff). Interrupted, this returns
    /// `Error::Interrupted` and nothing is lost or half-applied: if an
    /// OffsetCommit was in flight the broker may still apply it, and its
    /// answer is taken by the next `poll` (or `close`), which does the
    /// bookkeeping of a finished commit without reporting it. The caller
    /// cannot tell whether the offsets were committed; committing them again
    /// is harmless.
    pub fn commit_sync(
        &self,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndMetadata>>,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        self.inner.group_id()?;
        let offsets = offsets.unwrap_or_else(|| self.consumed_offsets());
        if offsets.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let node = self.ensure_coordinator_ready(left, interrupted)?;
            let (reply, generation) = commits::send(&self.inner, &node, &offsets, left, false)?;
            let answer = reply.wait(interrupted);
            if let Err(Error::Interrupted) = answer {
                self.commits.adopt(reply, offsets, generation);
                return Err(Error::Interrupted);
            }
            match self
                .inner
                .commit_result(answer, &offsets, &generation, reply.age())
            {
                Ok(()) => return Ok(()),
                Err((e, retriable)) => {
                    let backoff = Duration::from_millis(self.inner.cfg.retry_backoff_ms as u64);
                    if !retriable || Instant::now() + backoff >= deadline {
                        return Err(e);
                    }
                    if !wait::sleep(backoff, interrupted) {
                        return Err(Error::Interrupted);
                    }
                }
            }
        }
    }

    /// Commit without waiting; the outcome comes back through `poll` with
    /// `token`. No thread: the OffsetCommit goes out now if the coordinator
    /// is known, else from the next `poll`; the `poll` calls that follow
    /// take its answer and retry retriable errors until
    /// `default_api_timeout_ms` (see `commits`), and `close` waits for it.
    pub fn commit_async(
        &self,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndMetadata>>,
        token: u64,
    ) -> Result<(), Error> {
        self.inner.group_id()?;
        let offsets = offsets.unwrap_or_else(|| self.consumed_offsets());
        self.commits.add(self, token, offsets);
        Ok(())
    }

    /// Committed offsets (OffsetFetch); partitions without one map to None.
    pub fn committed(
        &self,
        tps: &[TopicPartition],
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<TopicPartition, Option<OffsetAndMetadata>>, Error> {
        let group_id = self.inner.group_id()?.to_string();
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let node = self.ensure_coordinator_ready(left, interrupted)?;
            let parts = tps.to_vec();
            let gid = group_id.clone();
            let body = Body::Versioned {
                api_key: ApiKey::OffsetFetch as i16,
                max_version: None,
                build: Box::new(move |v| {
                    RequestKind::OffsetFetch(rq::offset_fetch(&gid, Some(&parts), true, v))
                }),
            };
            let r = self.inner.request_blocking(
                coordinator_connection(&node),
                body,
                RequestOpts::default(),
                left.as_millis() as i64,
                interrupted,
            );
            let err = match r {
                // Only the wait ended: the coordinator is fine.
                Err(Error::Interrupted) => return Err(Error::Interrupted),
                Ok((ResponseKind::OffsetFetch(resp), _)) => {
                    let (code, parts) = rq::parse_offset_fetch(&resp, &group_id);
                    let code = rq::offset_fetch_error(code, &parts);
                    if code == codes::NONE {
                        let mut out: BTreeMap<TopicPartition, Option<OffsetAndMetadata>> =
                            tps.iter().map(|tp| (tp.clone(), None)).collect();
                        for (tp, o, _) in parts {
                            if o.offset >= 0 && out.contains_key(&tp) {
                                out.insert(tp, Some(o));
                            }
                        }
                        return Ok(out);
                    }
                    let reaction = offset_fetch_reaction(code);
                    self.inner
                        .apply_coordinator_reaction(reaction, "offset fetch", None);
                    (
                        Error::broker(code, None),
                        matches!(reaction, Reaction::Retry | Reaction::CoordinatorUnknown),
                    )
                }
                Ok(_) => (
                    Error::State {
                        detail: "unexpected OffsetFetch answer".into(),
                    },
                    false,
                ),
                Err(e) => {
                    self.mark_coordinator_unknown("offset fetch failed");
                    let retriable = e.retriable()
                        || matches!(e, Error::Disconnected { .. } | Error::Timeout { .. });
                    (e, retriable)
                }
            };
            if !err.1 || Instant::now() >= deadline {
                return Err(err.0);
            }
            let backoff = Duration::from_millis(self.inner.cfg.retry_backoff_ms as u64);
            if !wait::sleep(backoff, interrupted) {
                return Err(Error::Interrupted);
            }
        }
    }

    // ----- close -------------------------------------------------------------------

    /// Commit (auto-commit), let queued async commits land, leave the
    /// group, stop the threads. Idempotent.
    ///
    /// `interrupted` only shortens the waits: once it has said yes, close
    /// waits for nothing more but still closes (LeaveGroup sent, threads
    /// told to stop), then returns `Error::Interrupted`. An interrupted
    /// commit is as described at `commit_sync`; async commits still pending
    /// are abandoned (their outcome is never reported, as after any close).
    pub fn close(&self, timeout: Duration, interrupted: &dyn Fn() -> bool) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        // Sticky: every wait after the first "yes" ends at once.
        let cut = std::cell::Cell::new(false);
        let interrupted = || {
            if !cut.get() && interrupted() {
                cut.set(true);
            }
            cut.get()
        };
        let (auto, subscribed) = {
            let st = self.inner.lock();
            if st.closed {
                return Ok(());
            }
            let has_partitions = st.subs.assigned_partitions().next().is_some();
            (
                self.inner.cfg.enable_auto_commit && self.inner.cfg.group_id.is_some(),
                has_partitions,
            )
        };
        let mut result = Ok(());
        if auto && subscribed {
            result = self.commit_sync(None, timeout, &interrupted);
        }
        self.commits.finish(self, deadline, &interrupted);
        let leave = self.inner.lock().close();
        if let Some(Request {
            dest: Dest::Node(node),
            body,
            opts,
            ..
        }) = leave
        {
            let ready_ms = timeout.as_millis().min(5000) as i64;
            // Interrupted: still leave (the group rebalances at once instead
            // of after session_timeout_ms), without waiting for the answer.
            let _ = self
                .inner
                .request_blocking(node, body, opts, ready_ms, &interrupted);
        }
        let agent = self
            .telemetry
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(mut agent) = agent {
            agent.close();
        }
        self.inner.stop.store(true, Ordering::Release);
        self.inner.wake();
        self.inner.data.notify_all();
        if cut.get() {
            return Err(Error::Interrupted);
        }
        result
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.close(Duration::from_millis(1000), &wait::never);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}
