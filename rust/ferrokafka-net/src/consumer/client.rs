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
//! * The consumer thread only moves bytes and wakes: it asks the core what
//!   to do (`step`, `on_answer`) and carries out the returned actions.
//! * The application thread blocks in two ways only: on `data` (a condvar
//!   paired with `state`) in `poll`, and on a reply channel for its own
//!   requests (commit, committed, offset lookups).
//! * Rebalance callbacks run in the application's thread, inside `poll`, as
//!   the Java client does: before an eager rejoin the core queues a
//!   revocation and waits (heartbeating) until the application has run
//!   `on_revoke` and acknowledged it, so a commit in `on_revoke` still lands
//!   with the old generation.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender as ChanSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::blocking::{now_ms, BlockingClient};
use crate::cluster::{Node, TopicPartition};
use crate::consumer::assignor;
use crate::consumer::coordinator::{offset_fetch_reaction, Generation, Reaction};
use crate::consumer::core::{
    commit_body, coordinator_connection, prepare_answer, Action, ConsumerCore, Dest, Request, Tag,
};
use crate::consumer::fetch::{
    build_list_offsets_request, parse_list_offsets_response, LATEST_TIMESTAMP, READ_COMMITTED,
};
use crate::consumer::records::RecordColumns;
use crate::consumer::requests::{self as rq, OffsetAndMetadata};
use crate::consumer::subscription::{FetchState, OffsetResetStrategy};
use crate::driver::{AsyncClient, Body, RequestOpts};
use crate::error::Error;
use crate::metadata::Metadata;

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub group_id: Option<String>,
    pub group_instance_id: Option<String>,
    pub auto_offset_reset: OffsetResetStrategy,
    pub enable_auto_commit: bool,
    pub auto_commit_interval_ms: i64,
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i64,
    pub max_poll_interval_ms: i64,
    /// Assignor protocol names, preferred first.
    pub assignors: Vec<String>,
    pub fetch_min_bytes: i32,
    pub fetch_max_bytes: i32,
    pub fetch_max_wait_ms: i32,
    pub max_partition_fetch_bytes: i32,
    pub read_committed: bool,
    pub check_crcs: bool,
    pub client_rack: Option<String>,
    pub retry_backoff_ms: i64,
    pub request_timeout_ms: i64,
    pub default_api_timeout_ms: i64,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: None,
            group_instance_id: None,
            auto_offset_reset: OffsetResetStrategy::Latest,
            enable_auto_commit: true,
            auto_commit_interval_ms: 5000,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 3000,
            max_poll_interval_ms: 300_000,
            assignors: vec!["range".into(), "cooperative-sticky".into()],
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            fetch_max_wait_ms: 500,
            max_partition_fetch_bytes: 1_048_576,
            read_committed: false,
            check_crcs: true,
            client_rack: None,
            retry_backoff_ms: 100,
            request_timeout_ms: 30_000,
            default_api_timeout_ms: 60_000,
        }
    }
}

impl ConsumerConfig {
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, detail: String| {
            Err(Error::Config {
                key: key.into(),
                detail,
            })
        };
        // Only a group member heartbeats (Java builds its Heartbeat, and makes
        // this check, only with a group id).
        if self.group_id.is_some() && self.heartbeat_interval_ms >= self.session_timeout_ms {
            return bad(
                "heartbeat_interval_ms",
                format!(
                    "must be lower than session_timeout_ms ({})",
                    self.session_timeout_ms
                ),
            );
        }
        if self.assignors.is_empty() {
            return bad(
                "partition_assignment_strategy",
                "needs at least one assignor".into(),
            );
        }
        for a in &self.assignors {
            if assignor::assign(a, &[], &HashMap::new()).is_none() {
                return bad(
                    "partition_assignment_strategy",
                    format!("unknown assignor {a:?}"),
                );
            }
        }
        if self.group_instance_id.is_some() && self.group_id.is_none() {
            return bad("group_instance_id", "needs group_id".into());
        }
        Ok(())
    }

    /// Java: cooperative only when every configured assignor supports it.
    pub(crate) fn cooperative(&self) -> bool {
        self.assignors.iter().all(|a| a == "cooperative-sticky")
    }
}

/// What `poll` hands the application before records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceEvent {
    Revoked(Vec<TopicPartition>),
    Assigned(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

/// Rows `[from, to)` of one partition's decoded fetch.
#[derive(Debug, Clone)]
pub struct RecordSlice {
    pub tp: TopicPartition,
    pub cols: Arc<RecordColumns>,
    pub from: usize,
    pub to: usize,
}

/// One `poll`'s result. Events come first and alone: records are returned by
/// the next call, once the callbacks have run.
#[derive(Debug, Default)]
pub struct Polled {
    pub events: Vec<RebalanceEvent>,
    pub records: Vec<RecordSlice>,
    /// Outcomes of asynchronous commits: (token, result).
    pub commits: Vec<(u64, Result<(), Error>)>,
}

/// A consumer-thread message.
enum Msg {
    Wake,
    Answer {
        tag: Tag,
        result: Result<(ResponseKind, i16), Error>,
    },
}

struct Inner {
    cfg: ConsumerConfig,
    state: Mutex<ConsumerCore>,
    /// Signalled when records, events or errors arrive (poll waits on it).
    data: Condvar,
    metadata: Arc<Metadata>,
    client: AsyncClient,
    tx: Mutex<ChanSender<Msg>>,
    stop: AtomicBool,
}

pub struct Consumer {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, ConsumerCore> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sender(&self) -> ChanSender<Msg> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The consumer thread should look at the state again.
    fn wake(&self) {
        let _ = self.sender().send(Msg::Wake);
    }

    fn group_id(&self) -> Result<&str, Error> {
        self.cfg.group_id.as_deref().ok_or_else(|| Error::Config {
            key: "group_id".into(),
            detail: "this operation needs a consumer group (group_id is None)".into(),
        })
    }

    /// Keep metadata for these topics too (assignment, lookups).
    fn want_topics(&self, st: &mut ConsumerCore, topics: impl IntoIterator<Item = String>) {
        let actions = st.want_topics(topics);
        let _ = self.apply(actions);
    }

    /// Carry out the core's actions (never under the state lock). The first
    /// metadata error is returned (`subscribe` reports an invalid topic).
    fn apply(&self, actions: Vec<Action>) -> Result<(), Error> {
        let mut result = Ok(());
        for a in actions {
            match a {
                Action::Send(req) => self.submit(req),
                Action::WakeApplication => self.data.notify_all(),
                Action::MetadataUpdate => {
                    self.metadata.request_update();
                }
                Action::MetadataUpdateForTopic(t) => {
                    self.metadata.request_update_for_topic(&t);
                }
                Action::MetadataUpdateForNewTopics => {
                    self.metadata.request_update_for_new_topics();
                    self.client.client().wakeup();
                }
                Action::MetadataTopics(topics) => {
                    if let Err(e) = self.metadata.set_subscription(topics) {
                        if result.is_ok() {
                            result = Err(e);
                        }
                    }
                }
            }
        }
        result
    }

    fn submit(&self, req: Request) {
        let Request {
            dest,
            body,
            opts,
            tag,
        } = req;
        let tx = self.sender();
        let node = match dest {
            Dest::Node(n) => n,
            Dest::LeastLoaded => match self.client.client().least_loaded_node(now_ms()) {
                Some(n) => n,
                None => {
                    // docs/semantics.md §2.2: no node to ask; the answer is
                    // a failure (retried after the backoff) and the metadata
                    // looks for brokers.
                    self.metadata.request_update();
                    let _ = tx.send(Msg::Answer {
                        tag,
                        result: Err(Error::State {
                            detail: "no broker to send the request to".into(),
                        }),
                    });
                    return;
                }
            },
        };
        self.client.submit(
            node,
            body,
            opts,
            self.cfg.request_timeout_ms,
            Box::new(move |result| {
                let _ = tx.send(Msg::Answer { tag, result });
            }),
        );
    }

    /// Send one request for the application thread and wait for its answer.
    fn request_blocking(
        &self,
        node: Node,
        body: Body,
        opts: RequestOpts,
        timeout_ms: i64,
    ) -> Result<(ResponseKind, i16), Error> {
        self.client.request_blocking(node, body, opts, timeout_ms)
    }

    /// Apply a coordinator-related reaction to the membership (see
    /// `ConsumerCore::apply_coordinator_reaction`).
    fn apply_coordinator_reaction(&self, r: Reaction, what: &str, sent: Option<&Generation>) {
        let actions = {
            let mut st = self.lock();
            st.apply_coordinator_reaction(r, what, sent, now_ms());
            st.take_actions()
        };
        let _ = self.apply(actions);
        self.wake();
    }

    /// Commit answer -> Ok, or (error, retriable).
    fn commit_result(
        &self,
        r: Result<(ResponseKind, i16), Error>,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        sent: &Generation,
    ) -> Result<(), (Error, bool)> {
        let cluster = self.metadata.fetch();
        let (result, actions) = {
            let mut st = self.lock();
            let result = st.commit_result(r, offsets, sent, &cluster, now_ms());
            (result, st.take_actions())
        };
        let _ = self.apply(actions);
        self.wake();
        result
    }
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
        let (tx, rx) = channel();
        let inner = Arc::new(Inner {
            state: Mutex::new(ConsumerCore::new(cfg.clone(), now_ms())),
            cfg,
            data: Condvar::new(),
            metadata,
            client: AsyncClient::start(net),
            tx: Mutex::new(tx),
            stop: AtomicBool::new(false),
        });
        let worker = inner.clone();
        let thread = std::thread::Builder::new()
            .name("ferrokafka-consumer".into())
            .spawn(move || run(worker, rx))
            .map_err(|e| Error::State {
                detail: format!("cannot start the consumer thread: {e}"),
            })?;
        Ok(Consumer {
            inner,
            thread: Some(thread),
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

    /// Subscribe to topic names (`pattern` = the names are what a pattern
    /// matched right now; the Python layer re-evaluates it on metadata change).
    pub fn subscribe(&self, topics: Vec<String>, pattern: Option<String>) -> Result<(), Error> {
        self.inner.group_id()?;
        let mut st = self.inner.lock();
        self.check_open(&st)?;
        let actions = st.subscribe(topics, pattern)?;
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

    /// Leave the group (if any) and drop the assignment.
    pub fn unsubscribe(&self) -> Result<(), Error> {
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
            let _ = self.inner.request_blocking(node, body, opts, 5_000);
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
    /// waiting up to `timeout` for something to arrive. `stop` is checked
    /// between waits (Ctrl-C from the bindings).
    pub fn poll(
        &self,
        max_records: usize,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Polled, Error> {
        let deadline = Instant::now() + timeout;
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
            let records = st.take_records(max_records);
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
            if now >= deadline || interrupted() {
                return Ok(Polled::default());
            }
            let slice = (deadline - now).min(Duration::from_millis(100));
            st = self
                .inner
                .data
                .wait_timeout(st, slice)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if st.closed {
                return Err(Error::Closed { what: "consumer" });
            }
        }
    }

    /// A TLS/SASL refusal by any broker we tried, if the last attempt failed so.
    fn auth_error(&self) -> Option<Error> {
        let core = self.inner.client.client().core();
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
            if now >= deadline || interrupted() {
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

    // ----- offsets ---------------------------------------------------------------

    /// Consumed positions of every assigned partition (what `commit()` sends).
    pub fn consumed_offsets(&self) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.inner
            .lock()
            .subs
            .all_consumed()
            .into_iter()
            .map(|(tp, p)| {
                (
                    tp,
                    OffsetAndMetadata {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata: None,
                    },
                )
            })
            .collect()
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
            if now >= deadline || interrupted() {
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
    pub fn commit_sync(
        &self,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndMetadata>>,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        let group_id = self.inner.group_id()?.to_string();
        let offsets = offsets.unwrap_or_else(|| self.consumed_offsets());
        if offsets.is_empty() {
            return Ok(());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let node = self.ensure_coordinator_ready(left, interrupted)?;
            let (generation, instance) = {
                let st = self.inner.lock();
                let g = st.group.as_ref().expect("group");
                // A member that joined commits with its generation; a
                // manually assigned consumer with generation -1 (Java).
                let gen = if st.subs.has_auto_assigned_partitions() {
                    g.generation().clone()
                } else {
                    Generation::none()
                };
                (gen, g.group_instance_id.clone())
            };
            let body = commit_body(
                &self.inner.metadata.fetch(),
                &group_id,
                &generation,
                instance,
                &offsets,
            );
            let r = self.inner.request_blocking(
                coordinator_connection(&node),
                body,
                RequestOpts::default(),
                left.as_millis() as i64,
            );
            match self.inner.commit_result(r, &offsets, &generation) {
                Ok(()) => return Ok(()),
                Err((e, retriable)) => {
                    if !retriable
                        || Instant::now()
                            + Duration::from_millis(self.inner.cfg.retry_backoff_ms as u64)
                            >= deadline
                        || interrupted()
                    {
                        return Err(e);
                    }
                    std::thread::sleep(Duration::from_millis(
                        self.inner.cfg.retry_backoff_ms as u64,
                    ));
                }
            }
        }
    }

    /// Commit without waiting; the outcome comes back through `poll` with `token`.
    pub fn commit_async(
        &self,
        offsets: Option<BTreeMap<TopicPartition, OffsetAndMetadata>>,
        token: u64,
    ) -> Result<(), Error> {
        self.inner.group_id()?;
        let offsets = offsets.unwrap_or_else(|| self.consumed_offsets());
        let inner = self.inner.clone();
        // A short-lived thread keeps the retry loop of commit_sync without a
        // second state machine; async commits are rare next to fetches.
        std::thread::Builder::new()
            .name("ferrokafka-commit".into())
            .spawn(move || {
                let c = Consumer {
                    inner: inner.clone(),
                    thread: None,
                };
                let timeout = Duration::from_millis(inner.cfg.default_api_timeout_ms as u64);
                let r = c.commit_sync(Some(offsets), timeout, &|| false);
                let mut st = inner.lock();
                st.commits_done.push((token, r));
                drop(st);
                inner.data.notify_all();
            })
            .map_err(|e| Error::State {
                detail: format!("cannot start a commit thread: {e}"),
            })?;
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
            );
            let err = match r {
                Ok((ResponseKind::OffsetFetch(resp), _)) => {
                    let (code, parts) = rq::parse_offset_fetch(&resp, &group_id);
                    let code = if code != codes::NONE {
                        code
                    } else {
                        parts
                            .iter()
                            .map(|p| p.2)
                            .find(|c| *c != codes::NONE)
                            .unwrap_or(codes::NONE)
                    };
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
            if !err.1 || Instant::now() >= deadline || interrupted() {
                return Err(err.0);
            }
            std::thread::sleep(Duration::from_millis(
                self.inner.cfg.retry_backoff_ms as u64,
            ));
        }
    }

    /// ListOffsets for each partition at `timestamp` (-2 earliest, -1
    /// latest, else the first offset with a timestamp >= it). Returns
    /// (offset, timestamp) or None when no such record exists.
    pub fn list_offsets(
        &self,
        query: &[(TopicPartition, i64)],
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<TopicPartition, Option<(i64, i64)>>, Error> {
        let deadline = Instant::now() + timeout;
        {
            let mut st = self.inner.lock();
            self.inner
                .want_topics(&mut st, query.iter().map(|(tp, _)| tp.topic.to_string()));
        }
        let mut out = BTreeMap::new();
        let mut todo: Vec<(TopicPartition, i64)> = query.to_vec();
        let mut last_err: Option<Error> = None;
        while !todo.is_empty() {
            if Instant::now() >= deadline || interrupted() {
                return Err(last_err.unwrap_or(Error::Timeout {
                    what: format!(
                        "listing offsets{}",
                        self.inner.metadata.connection_error_hint()
                    ),
                    timeout_ms: timeout.as_millis() as u64,
                }));
            }
            let cluster = self.inner.metadata.fetch();
            let mut by_leader: BTreeMap<i32, (Node, Vec<(TopicPartition, i64, i32)>)> =
                BTreeMap::new();
            let mut missing = false;
            for (tp, ts) in &todo {
                if let Some(err) = self.inner.metadata.error_for_topic(&tp.topic) {
                    return Err(err);
                }
                match cluster.leader_for(&tp.topic, tp.partition) {
                    Some(n) => {
                        let epoch = cluster
                            .leader_epoch_for(&tp.topic, tp.partition)
                            .unwrap_or(-1);
                        by_leader
                            .entry(n.id)
                            .or_insert_with(|| (n.clone(), vec![]))
                            .1
                            .push((tp.clone(), *ts, epoch));
                    }
                    None => missing = true,
                }
            }
            if missing {
                let v = self.inner.metadata.request_update();
                self.inner.client.client().wakeup();
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(200));
                if let Err(e @ Error::Authentication { .. }) =
                    self.inner.metadata.await_update(v, None, Some(left))
                {
                    return Err(e);
                }
                if by_leader.is_empty() {
                    continue;
                }
            }
            let isolation = if self.inner.cfg.read_committed {
                READ_COMMITTED
            } else {
                0
            };
            let mut retry = Vec::new();
            for (_, (node, parts)) in by_leader {
                let left = deadline.saturating_duration_since(Instant::now());
                let body = RequestKind::ListOffsets(build_list_offsets_request(
                    isolation,
                    &parts,
                    self.inner.cfg.request_timeout_ms as i32,
                ));
                match self.inner.request_blocking(
                    node,
                    Body::Ready(body),
                    RequestOpts::default(),
                    left.as_millis() as i64,
                ) {
                    Ok((ResponseKind::ListOffsets(resp), _)) => {
                        let mut answered = HashSet::new();
                        for r in parse_list_offsets_response(&resp) {
                            answered.insert(r.tp.clone());
                            let ts = parts
                                .iter()
                                .find(|p| p.0 == r.tp)
                                .map(|p| p.1)
                                .unwrap_or(LATEST_TIMESTAMP);
                            match r.error_code {
                                codes::NONE => {
                                    out.insert(
                                        r.tp,
                                        (r.offset >= 0).then_some((r.offset, r.timestamp)),
                                    );
                                }
                                code if Error::broker(code, None).retriable()
                                    || code == codes::UNKNOWN_TOPIC_OR_PARTITION =>
                                {
                                    self.inner.metadata.request_update();
                                    last_err = Some(Error::broker(code, None));
                                    retry.push((r.tp, ts));
                                }
                                code => {
                                    return Err(Error::broker(
                                        code,
                                        Some(format!(
                                            "listing offsets of {}-{}",
                                            r.tp.topic, r.tp.partition
                                        )),
                                    ))
                                }
                            }
                        }
                        for (tp, ts, _) in parts {
                            if !answered.contains(&tp) {
                                retry.push((tp, ts));
                            }
                        }
                    }
                    Ok(_) => {
                        return Err(Error::State {
                            detail: "unexpected ListOffsets answer".into(),
                        })
                    }
                    Err(e) => {
                        self.inner.metadata.request_update();
                        last_err = Some(e);
                        retry.extend(parts.into_iter().map(|(tp, ts, _)| (tp, ts)));
                    }
                }
            }
            if !retry.is_empty() {
                std::thread::sleep(Duration::from_millis(
                    self.inner.cfg.retry_backoff_ms.max(10) as u64,
                ));
            }
            todo = retry;
        }
        Ok(out)
    }

    // ----- close -------------------------------------------------------------------

    /// Commit (auto-commit), leave the group, stop the threads. Idempotent.
    pub fn close(&self, timeout: Duration) -> Result<(), Error> {
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
            result = self.commit_sync(None, timeout, &|| false);
        }
        let leave = self.inner.lock().close();
        if let Some(Request {
            dest: Dest::Node(node),
            body,
            opts,
            ..
        }) = leave
        {
            let _ =
                self.inner
                    .request_blocking(node, body, opts, timeout.as_millis().min(5000) as i64);
        }
        self.inner.stop.store(true, Ordering::Release);
        self.inner.wake();
        self.inner.data.notify_all();
        result
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.close(Duration::from_millis(1000));
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

// ----- the consumer thread ------------------------------------------------------------

fn run(inner: Arc<Inner>, rx: Receiver<Msg>) {
    let mut wait = Duration::from_millis(0);
    loop {
        let first = match rx.recv_timeout(wait) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        if inner.stop.load(Ordering::Acquire) {
            inner.lock().closed = true;
            inner.data.notify_all();
            return;
        }
        for m in first.into_iter().chain(rx.try_iter()) {
            if let Msg::Answer { tag, result } = m {
                // Decode before taking the state lock: this is the heavy part.
                let answer = prepare_answer(&inner.cfg, &tag, result);
                let actions = {
                    let mut st = inner.lock();
                    st.set_cluster(inner.metadata.fetch());
                    st.on_prepared(tag, answer, now_ms())
                };
                let _ = inner.apply(actions);
            }
        }
        let now = now_ms();
        let (actions, wake_at) = {
            let mut st = inner.lock();
            st.set_cluster(inner.metadata.fetch());
            st.step(now)
        };
        let _ = inner.apply(actions);
        wait = Duration::from_millis((wake_at - now).clamp(1, 100) as u64);
    }
}
