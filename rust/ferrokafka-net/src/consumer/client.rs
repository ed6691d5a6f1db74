//! The consumer: a background thread that runs the group protocol and the
//! fetcher, and a face for the application thread (`poll`, `commit`, `seek`,
//! offset lookups).
//!
//! Threads and locks (what the rest of this file relies on):
//! * `state` (one mutex) holds the subscription, the group membership, the
//!   buffer of decoded fetches and the events for the application. Nobody
//!   waits for I/O or runs user code under it; the consumer thread decodes
//!   Fetch answers (CRC, decompression) *before* taking it.
//! * Network answers arrive on the driver thread (`AsyncClient`) and are only
//!   pushed into the consumer thread's channel.
//! * The application thread blocks in two ways only: on `data` (a condvar
//!   paired with `state`) in `poll`, and on a reply channel for its own
//!   requests (commit, committed, offset lookups).
//! * Rebalance callbacks run in the application's thread, inside `poll`, as
//!   the Java client does: before an eager rejoin the consumer thread queues
//!   a revocation and waits (heartbeating) until the application has run
//!   `on_revoke` and acknowledged it, so a commit in `on_revoke` still lands
//!   with the old generation.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender as ChanSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use ferrokafka_protocol::record::DecodeOptions;

use crate::blocking::{now_ms, BlockingClient};
use crate::cluster::{Node, TopicPartition};
use crate::consumer::assignor::{self, MemberSubscription};
use crate::consumer::coordinator::{
    commit_reaction, offset_fetch_reaction, Action, GroupMembership, Reaction,
};
use crate::consumer::fetch::{
    build_fetch_request, build_list_offsets_request, parse_fetch_response,
    parse_list_offsets_response, AbortedTransactionFilter, FetchLimits, PartitionFetch,
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED,
};
use crate::consumer::fetcher::{fetch_reaction, FetchReaction};
use crate::consumer::group::MemberState;
use crate::consumer::protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use crate::consumer::records::{decode_fetched, RecordColumns};
use crate::consumer::requests::{self as rq, OffsetAndMetadata};
use crate::consumer::subscription::{
    FetchState, OffsetResetStrategy, SubscriptionState, SubscriptionType,
};
use crate::driver::{AsyncClient, Body, RequestOpts};
use crate::error::Error;
use crate::metadata::Metadata;
use crate::wait;

mod commits;

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
    fn cooperative(&self) -> bool {
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

/// A decoded fetch waiting for the application.
struct Chunk {
    tp: TopicPartition,
    /// The position the records continue from; stale (dropped) when the
    /// partition's position moved (seek, reset, revocation).
    start: i64,
    cols: Arc<RecordColumns>,
    cursor: usize,
    next_offset: i64,
    last_epoch: i32,
    bytes: usize,
}

/// Where the pre-join work of a rebalance is (Java `onJoinPrepare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prepare {
    NotStarted,
    Committing,
    AwaitUser,
    Done,
}

struct JoinOutcome {
    protocol: String,
    members: Vec<MemberSubscription>,
    generation_id: i32,
}

struct State {
    subs: SubscriptionState,
    group: Option<GroupMembership>,
    prepare: Prepare,
    /// The join answer while the leader waits for metadata of every member's topics.
    join: Option<JoinOutcome>,
    join_deadline_ms: i64,
    buffer: VecDeque<Chunk>,
    buffered_bytes: usize,
    events: VecDeque<RebalanceEvent>,
    /// Events handed out whose callbacks have not been acknowledged yet.
    events_unacked: bool,
    commits_done: Vec<(u64, Result<(), Error>)>,
    errors: VecDeque<Error>,
    fetch_in_flight: HashSet<i32>,
    offset_fetch_in_flight: bool,
    resets_in_flight: HashSet<TopicPartition>,
    auto_commit_in_flight: bool,
    next_auto_commit_ms: i64,
    last_committed: BTreeMap<TopicPartition, i64>,
    /// Partition counts of the subscribed topics when we joined: a change
    /// (topic created, partitions added) means a rejoin.
    joined_snapshot: BTreeMap<String, usize>,
    /// Topics the metadata keeps (subscription, assignment, lookups).
    metadata_topics: BTreeSet<String>,
    /// The application polled or asked for a position since the last
    /// assign(): only then are missing positions resolved (Java resolves them
    /// in poll), so `assign` + `seek` never races a committed-offset lookup
    /// or a reset.
    want_positions: bool,
    closed: bool,
}

enum Msg {
    Wake,
    Answer {
        tag: Tag,
        result: Result<(ResponseKind, i16), Error>,
    },
}

enum Tag {
    FindCoordinator,
    Join,
    Sync {
        generation_id: i32,
    },
    /// The generation the heartbeat was sent with (stale answers are ignored).
    Heartbeat {
        generation: crate::consumer::coordinator::Generation,
    },
    /// `offsets`: where each partition was fetched from; an answer is used
    /// only if that is still where the partition continues (seek, reset and
    /// revocation make it stale without further bookkeeping).
    Fetch {
        node: i32,
        offsets: HashMap<TopicPartition, i64>,
        names: HashMap<[u8; 16], String>,
    },
    OffsetFetch,
    Reset {
        parts: Vec<(TopicPartition, OffsetResetStrategy)>,
    },
    AutoCommit {
        offsets: BTreeMap<TopicPartition, i64>,
        pre_join: bool,
        generation: crate::consumer::coordinator::Generation,
    },
    /// LeaveGroup: nothing to do with the answer.
    Leave,
}

struct Inner {
    cfg: ConsumerConfig,
    state: Mutex<State>,
    /// Signalled when records, events or errors arrive (poll waits on it).
    /// Shared so an async commit's answer can wake `poll` from the driver
    /// thread without holding `Inner` (see `commits`).
    data: Arc<Condvar>,
    metadata: Arc<Metadata>,
    client: AsyncClient,
    tx: Mutex<ChanSender<Msg>>,
    stop: AtomicBool,
}

pub struct Consumer {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
    commits: commits::AsyncCommits,
}

/// Java gives the coordinator its own connection (id `MAX - id`), so
/// heartbeats never queue behind a long-polling Fetch to the same broker.
fn coordinator_connection(node: &Node) -> Node {
    Node::new(
        i32::MAX - node.id,
        node.host.clone(),
        node.port,
        node.rack.clone(),
    )
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn sender(&self) -> ChanSender<Msg> {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn wake(&self) {
        let _ = self.sender().send(Msg::Wake);
    }

    fn submit(&self, node: Node, body: Body, opts: RequestOpts, tag: Tag) {
        let tx = self.sender();
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

    fn group_id(&self) -> Result<&str, Error> {
        self.cfg.group_id.as_deref().ok_or_else(|| Error::Config {
            key: "group_id".into(),
            detail: "this operation needs a consumer group (group_id is None)".into(),
        })
    }

    /// Keep metadata for these topics too (assignment, lookups).
    fn want_topics(&self, st: &mut State, topics: impl IntoIterator<Item = String>) {
        let before = st.metadata_topics.len();
        st.metadata_topics.extend(topics);
        if st.metadata_topics.len() != before && st.subs.kind() != SubscriptionType::AutoPattern {
            let _ = self
                .metadata
                .set_subscription(Some(st.metadata_topics.iter().cloned().collect()));
        }
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
        let now = now_ms();
        let group = cfg.group_id.as_ref().map(|g| {
            GroupMembership::new(
                g.clone(),
                cfg.group_instance_id.clone(),
                cfg.session_timeout_ms,
                cfg.heartbeat_interval_ms,
                cfg.max_poll_interval_ms,
                cfg.retry_backoff_ms,
                now,
            )
        });
        metadata.set_subscription(Some(vec![]))?;
        let (tx, rx) = channel();
        let inner = Arc::new(Inner {
            state: Mutex::new(State {
                subs: SubscriptionState::new(cfg.auto_offset_reset),
                group,
                prepare: Prepare::NotStarted,
                join: None,
                join_deadline_ms: 0,
                buffer: VecDeque::new(),
                buffered_bytes: 0,
                events: VecDeque::new(),
                events_unacked: false,
                commits_done: Vec::new(),
                errors: VecDeque::new(),
                fetch_in_flight: HashSet::new(),
                offset_fetch_in_flight: false,
                resets_in_flight: HashSet::new(),
                auto_commit_in_flight: false,
                next_auto_commit_ms: now + cfg.auto_commit_interval_ms,
                last_committed: BTreeMap::new(),
                joined_snapshot: BTreeMap::new(),
                metadata_topics: BTreeSet::new(),
                want_positions: false,
                closed: false,
            }),
            cfg,
            data: Arc::new(Condvar::new()),
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
            commits: commits::AsyncCommits::default(),
        })
    }

    pub fn config(&self) -> &ConsumerConfig {
        &self.inner.cfg
    }

    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.inner.metadata
    }

    fn check_open(&self, st: &State) -> Result<(), Error> {
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
        let changed = st.subs.subscribe(topics.iter().cloned())?;
        st.metadata_topics = topics.iter().cloned().collect();
        self.inner.metadata.set_subscription(Some(topics))?;
        if changed {
            if let Some(g) = st.group.as_mut() {
                g.request_rejoin("subscription changed");
            }
        }
        drop(st);
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
        if st.subs.pattern() != Some(pattern) {
            let version = self.inner.metadata.update_version();
            st.subs.subscribe_pattern(pattern, version)?;
            // Every topic's metadata, and a fresh copy for the first match.
            self.inner.metadata.set_subscription(None)?;
            self.inner.metadata.request_update();
        }
        drop(st);
        self.inner.wake();
        Ok(())
    }

    pub fn assign(&self, partitions: Vec<TopicPartition>) -> Result<(), Error> {
        let mut st = self.inner.lock();
        self.check_open(&st)?;
        if st.subs.kind() != SubscriptionType::UserAssigned
            && st.subs.kind() != SubscriptionType::None
        {
            return Err(Error::State {
                detail: "assign() after subscribe(): call unsubscribe() first".into(),
            });
        }
        let topics: Vec<String> = partitions.iter().map(|tp| tp.topic.to_string()).collect();
        let keep: HashSet<TopicPartition> = partitions.iter().cloned().collect();
        st.subs.assign_from_user(partitions)?;
        st.want_positions = false;
        drop_buffered(&mut st, |tp| !keep.contains(tp));
        self.inner.want_topics(&mut st, topics);
        drop(st);
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
            let had_group = st.subs.has_auto_assigned_partitions();
            st.subs.unsubscribe();
            drop_buffered(&mut st, |_| true);
            st.metadata_topics.clear();
            let _ = self.inner.metadata.set_subscription(Some(vec![]));
            if had_group {
                leave_request(&mut st, "the consumer unsubscribed")
            } else {
                None
            }
        };
        if let Some((node, body)) = leave {
            let r = self.inner.client.request_blocking(
                node,
                body,
                RequestOpts::default(),
                5_000,
                interrupted,
            );
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
        let deadline = Instant::now() + timeout;
        // Before the lock: taking a commit answer locks the state.
        self.commits.drive(self);
        let mut st = self.inner.lock();
        self.check_open(&st)?;
        if !st.want_positions {
            st.want_positions = true;
            self.inner.wake();
        }
        if let Some(g) = st.group.as_mut() {
            g.on_poll(now_ms());
            if let Some(code) = g.fatal() {
                return Err(Error::broker(
                    code,
                    Some("the consumer group membership failed".into()),
                ));
            }
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
            let records = take_records(&mut st, max_records);
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
        st.subs.seek(tp, offset, -1)?;
        drop_buffered(&mut st, |t| t == tp);
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
        let tps = tps.unwrap_or_else(|| st.subs.assigned_partitions().cloned().collect());
        for tp in &tps {
            st.subs.request_offset_reset(tp, Some(strategy))?;
        }
        let set: HashSet<&TopicPartition> = tps.iter().collect();
        drop_buffered(&mut st, |t| set.contains(t));
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
        for tp in tps {
            st.subs.pause(tp)?;
        }
        // Java keeps buffered records of paused partitions out of poll;
        // dropping them is simpler and refetching is cheap.
        let set: HashSet<&TopicPartition> = tps.iter().collect();
        drop_buffered(&mut st, |t| set.contains(t));
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
        if let Some(g) = self.inner.lock().group.as_mut() {
            g.mark_coordinator_unknown(reason, now_ms());
        }
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
            match self.inner.commit_result(answer, &offsets, &generation) {
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
            let r = self.inner.client.request_blocking(
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
                    let code = if code != 0 {
                        code
                    } else {
                        parts.iter().map(|p| p.2).find(|c| *c != 0).unwrap_or(0)
                    };
                    if code == 0 {
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
            if Instant::now() < deadline && interrupted() {
                return Err(Error::Interrupted);
            }
            if Instant::now() >= deadline {
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
                match self.inner.client.request_blocking(
                    node,
                    Body::Ready(body),
                    RequestOpts::default(),
                    left.as_millis() as i64,
                    interrupted,
                ) {
                    // Nothing to undo: offset lookups change no state.
                    Err(Error::Interrupted) => return Err(Error::Interrupted),
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
                                0 => {
                                    out.insert(
                                        r.tp,
                                        (r.offset >= 0).then_some((r.offset, r.timestamp)),
                                    );
                                }
                                code if Error::broker(code, None).retriable() || code == 3 => {
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
                let backoff = Duration::from_millis(self.inner.cfg.retry_backoff_ms.max(10) as u64);
                if !wait::sleep(backoff, interrupted) {
                    return Err(Error::Interrupted);
                }
            }
            todo = retry;
        }
        Ok(out)
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
        let leave = {
            let mut st = self.inner.lock();
            let leave = if st.subs.has_auto_assigned_partitions() {
                leave_request(&mut st, "the consumer is being closed")
            } else {
                None
            };
            st.closed = true;
            leave
        };
        if let Some((node, body)) = leave {
            let ready_ms = timeout.as_millis().min(5000) as i64;
            // Interrupted: still leave (the group rebalances at once instead
            // of after session_timeout_ms), without waiting for the answer.
            let _ = self.inner.client.request_blocking(
                node,
                body,
                RequestOpts::default(),
                ready_ms,
                &interrupted,
            );
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

/// LeaveGroup for the current member, resetting the membership. Static
/// members do not leave (KIP-345): their partitions wait for them.
fn leave_request(st: &mut State, reason: &str) -> Option<(Node, Body)> {
    let g = st.group.as_mut()?;
    let node = g.coordinator().cloned();
    let member_id = g.generation().member_id.clone();
    let instance = g.group_instance_id.clone();
    let group_id = g.group_id.clone();
    g.on_leave(reason);
    st.prepare = Prepare::NotStarted;
    if instance.is_some() || member_id.is_empty() {
        return None;
    }
    let reason = reason.to_string();
    Some((
        coordinator_connection(&node?),
        Body::Versioned {
            api_key: ApiKey::LeaveGroup as i16,
            max_version: None,
            build: Box::new(move |v| {
                RequestKind::LeaveGroup(rq::leave_group(&group_id, &member_id, None, &reason, v))
            }),
        },
    ))
}

fn drop_buffered(st: &mut State, pred: impl Fn(&TopicPartition) -> bool) {
    let mut freed = 0;
    st.buffer.retain(|c| {
        let drop = pred(&c.tp);
        if drop {
            freed += c.bytes;
        }
        !drop
    });
    st.buffered_bytes -= freed;
}

/// Move up to `max` records from the buffer to the application, advancing
/// positions. Chunks whose partition moved (seek, revocation) are dropped.
fn take_records(st: &mut State, max: usize) -> Vec<RecordSlice> {
    let mut out = Vec::new();
    let mut left = max;
    while left > 0 {
        let Some(c) = st.buffer.front_mut() else {
            break;
        };
        let current = st
            .subs
            .state(&c.tp)
            .filter(|s| s.state == FetchState::Fetching && !s.paused)
            .and_then(|s| s.position)
            .is_some_and(|p| p.offset == c.start);
        if !current {
            let b = c.bytes;
            st.buffer.pop_front();
            st.buffered_bytes -= b;
            continue;
        }
        let n = (c.cols.len() - c.cursor).min(left);
        if n > 0 {
            out.push(RecordSlice {
                tp: c.tp.clone(),
                cols: c.cols.clone(),
                from: c.cursor,
                to: c.cursor + n,
            });
            c.cursor += n;
            left -= n;
        }
        let tp = c.tp.clone();
        let (next, epoch) = if c.cursor >= c.cols.len() {
            (c.next_offset, c.last_epoch)
        } else {
            (c.cols.offsets[c.cursor], c.cols.leader_epochs[c.cursor - 1])
        };
        // `start` always names where the unread part begins, which is the
        // position once we advance it below.
        c.start = next;
        if c.cursor >= c.cols.len() {
            let b = c.bytes;
            st.buffer.pop_front();
            st.buffered_bytes -= b;
        }
        st.subs.advance(&tp, next, epoch);
    }
    out
}

fn commit_body(
    inner: &Inner,
    group_id: &str,
    generation: &crate::consumer::coordinator::Generation,
    instance: Option<String>,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
) -> Body {
    let cluster = inner.metadata.fetch();
    let ids: HashMap<String, [u8; 16]> = offsets
        .keys()
        .filter_map(|tp| {
            cluster
                .topic_id(&tp.topic)
                .map(|id| (tp.topic.to_string(), id))
        })
        .collect();
    let all_ids = offsets
        .keys()
        .all(|tp| ids.get(&*tp.topic).is_some_and(|id| *id != [0; 16]));
    let (g, gen, o) = (group_id.to_string(), generation.clone(), offsets.clone());
    Body::Versioned {
        api_key: ApiKey::OffsetCommit as i16,
        // v10 names topics by id only.
        max_version: if all_ids { None } else { Some(9) },
        build: Box::new(move |v| {
            RequestKind::OffsetCommit(rq::offset_commit(
                &g,
                &gen,
                instance.as_deref(),
                &o,
                &|t| ids.get(t).copied(),
                v,
            ))
        }),
    }
}

impl Inner {
    /// Apply a coordinator-related reaction to the membership.
    /// `sent`: the generation the request carried. A rebalance or
    /// generation error about a generation we have already left (a commit
    /// sent in generation N answered after the sync of N+1) changes nothing:
    /// acting on it would throw away a valid membership and start one more
    /// rebalance (Java KAFKA-9823 checks `generationUnchanged` the same way).
    fn apply_coordinator_reaction(
        &self,
        r: Reaction,
        what: &str,
        sent: Option<&crate::consumer::coordinator::Generation>,
    ) {
        let mut st = self.lock();
        let lost = {
            let Some(g) = st.group.as_mut() else { return };
            let stale = sent.is_some_and(|s| s != g.generation());
            if stale
                && matches!(
                    r,
                    Reaction::Rejoin | Reaction::ResetAndRejoin | Reaction::ResetGeneration
                )
            {
                return;
            }
            match r {
                Reaction::CoordinatorUnknown => {
                    g.mark_coordinator_unknown(what, now_ms());
                    false
                }
                Reaction::Rejoin => {
                    g.request_rejoin(format!("{what}: group is rebalancing"));
                    false
                }
                Reaction::ResetAndRejoin | Reaction::ResetGeneration => {
                    g.on_generation_error(r, what);
                    true
                }
                _ => false,
            }
        };
        if lost {
            lose_partitions(&mut st);
        }
        drop(st);
        self.wake();
    }

    /// Commit answer -> Ok, or (error, retriable).
    fn commit_result(
        &self,
        r: Result<(ResponseKind, i16), Error>,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        sent: &crate::consumer::coordinator::Generation,
    ) -> Result<(), (Error, bool)> {
        match r {
            Ok((ResponseKind::OffsetCommit(resp), _)) => {
                let cluster = self.metadata.fetch();
                let names: HashMap<[u8; 16], String> = offsets
                    .keys()
                    .filter_map(|tp| {
                        cluster
                            .topic_id(&tp.topic)
                            .map(|id| (id, tp.topic.to_string()))
                    })
                    .collect();
                let parts = rq::parse_offset_commit(&resp, &|id| names.get(id).cloned());
                match parts.iter().find(|(_, c)| *c != 0) {
                    None => {
                        let mut st = self.lock();
                        for (tp, o) in offsets {
                            st.last_committed.insert(tp.clone(), o.offset);
                        }
                        Ok(())
                    }
                    Some((tp, code)) => {
                        let reaction = commit_reaction(*code);
                        self.apply_coordinator_reaction(reaction, "offset commit", Some(sent));
                        let retriable =
                            matches!(reaction, Reaction::Retry | Reaction::CoordinatorUnknown);
                        let msg = match reaction {
                            Reaction::Rejoin | Reaction::ResetAndRejoin | Reaction::ResetGeneration => format!(
                                "commit of {}-{} failed: the group rebalanced; the partitions may now belong to another member",
                                tp.topic, tp.partition
                            ),
                            _ => format!("commit of {}-{} failed", tp.topic, tp.partition),
                        };
                        Err((Error::broker(*code, Some(msg)), retriable))
                    }
                }
            }
            Ok(_) => Err((
                Error::State {
                    detail: "unexpected OffsetCommit answer".into(),
                },
                false,
            )),
            Err(e) => {
                self.apply_coordinator_reaction(
                    Reaction::CoordinatorUnknown,
                    "offset commit failed",
                    None,
                );
                let retriable = e.retriable()
                    || matches!(e, Error::Disconnected { .. } | Error::Timeout { .. });
                Err((e, retriable))
            }
        }
    }
}

/// The member lost its partitions without revoking them (generation reset,
/// session timeout): Java `onPartitionsLost`.
fn lose_partitions(st: &mut State) {
    if !st.subs.has_auto_assigned_partitions() {
        return;
    }
    let lost: Vec<TopicPartition> = st.subs.assigned_partitions().cloned().collect();
    if lost.is_empty() {
        return;
    }
    let _ = st.subs.assign_from_subscribed(Vec::new());
    drop_buffered(st, |_| true);
    st.events.push_back(RebalanceEvent::Lost(lost));
    st.prepare = Prepare::NotStarted;
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
            let mut st = inner.lock();
            st.closed = true;
            drop(st);
            inner.data.notify_all();
            return;
        }
        for m in first.into_iter().chain(rx.try_iter()) {
            if let Msg::Answer { tag, result } = m {
                handle_answer(&inner, tag, result);
            }
        }
        wait = step(&inner, now_ms());
    }
}

/// One round of decisions: what to send now. Returns how long nothing needs doing.
fn step(inner: &Arc<Inner>, now: i64) -> Duration {
    let mut wait_ms: i64 = 100;
    let cluster = inner.metadata.fetch();
    let mut st = inner.lock();
    if st.closed {
        return Duration::from_millis(100);
    }

    // Group: discovery, (re)join, heartbeats.
    if st.group.is_some() {
        wait_ms = wait_ms.min(group_step(inner, &mut st, &cluster, now));
    }

    // Positions: committed offsets for new partitions, then resets.
    let initializing = if st.want_positions || st.subs.has_auto_assigned_partitions() {
        st.subs.initializing_partitions()
    } else {
        Vec::new()
    };
    if !initializing.is_empty() {
        if inner.cfg.group_id.is_none() {
            if let Err(e) = st.subs.reset_initializing_to_default() {
                st.errors.push_back(e);
                inner.data.notify_all();
            }
        } else if !st.offset_fetch_in_flight {
            if let Some(node) = st.group.as_ref().and_then(|g| g.coordinator().cloned()) {
                st.offset_fetch_in_flight = true;
                let gid = inner.cfg.group_id.clone().unwrap_or_default();
                let body = Body::Versioned {
                    api_key: ApiKey::OffsetFetch as i16,
                    max_version: None,
                    build: Box::new(move |v| {
                        RequestKind::OffsetFetch(rq::offset_fetch(
                            &gid,
                            Some(&initializing),
                            true,
                            v,
                        ))
                    }),
                };
                inner.submit(
                    coordinator_connection(&node),
                    body,
                    RequestOpts::default(),
                    Tag::OffsetFetch,
                );
            }
        }
    }
    let resets: Vec<_> = st
        .subs
        .partitions_needing_reset(now)
        .into_iter()
        .filter(|(tp, _)| !st.resets_in_flight.contains(tp))
        .collect();
    if !resets.is_empty() {
        let mut by_leader: BTreeMap<i32, (Node, Vec<(TopicPartition, OffsetResetStrategy)>)> =
            BTreeMap::new();
        for (tp, s) in resets {
            match cluster.leader_for(&tp.topic, tp.partition) {
                Some(n) => by_leader
                    .entry(n.id)
                    .or_insert_with(|| (n.clone(), vec![]))
                    .1
                    .push((tp, s)),
                None => {
                    inner.metadata.request_update_for_topic(&tp.topic);
                }
            }
        }
        let isolation = if inner.cfg.read_committed {
            READ_COMMITTED
        } else {
            0
        };
        for (_, (node, parts)) in by_leader {
            let q: Vec<(TopicPartition, i64, i32)> = parts
                .iter()
                .map(|(tp, s)| {
                    let ts = if *s == OffsetResetStrategy::Earliest {
                        EARLIEST_TIMESTAMP
                    } else {
                        LATEST_TIMESTAMP
                    };
                    (
                        tp.clone(),
                        ts,
                        cluster
                            .leader_epoch_for(&tp.topic, tp.partition)
                            .unwrap_or(-1),
                    )
                })
                .collect();
            for (tp, _) in &parts {
                st.resets_in_flight.insert(tp.clone());
            }
            let body = RequestKind::ListOffsets(build_list_offsets_request(
                isolation,
                &q,
                inner.cfg.request_timeout_ms as i32,
            ));
            inner.submit(
                node,
                Body::Ready(body),
                RequestOpts::default(),
                Tag::Reset { parts },
            );
        }
    }

    // Fetches: one in flight per leader. A partition is fetched again while
    // at most one decoded answer of it waits (prefetch: the next range is
    // here when the application asks), or while what waits is less than one
    // full partition answer (max_partition_fetch_bytes). The second rule is
    // for logs of many small batches from a broker that answers one batch
    // per partition per Fetch (librdkafka's mock does): capped by count
    // alone, such a partition drops out of the next Fetch, which then holds
    // only caught-up partitions and waits fetch_max_wait_ms at the broker,
    // a few batches per half second while a backlog waits. Memory stays
    // bounded by bytes either way (and by `cap` overall).
    let mut buffered: HashMap<TopicPartition, (usize, i64, usize)> = HashMap::new();
    for c in &st.buffer {
        let e = buffered
            .entry(c.tp.clone())
            .or_insert((0, c.next_offset, 0));
        e.0 += 1;
        e.1 = c.next_offset;
        e.2 += c.bytes;
    }
    let cap =
        (inner.cfg.fetch_max_bytes as usize).max(inner.cfg.max_partition_fetch_bytes as usize * 2);
    if st.buffered_bytes < cap {
        let mut plan: BTreeMap<i32, (Node, Vec<PartitionFetch>)> = BTreeMap::new();
        for (tp, pos) in st.subs.fetchable_partitions() {
            let (count, next, bytes) = buffered.get(&tp).copied().unwrap_or((0, pos.offset, 0));
            if count >= 2 && bytes >= inner.cfg.max_partition_fetch_bytes.max(1) as usize {
                continue;
            }
            let Some(leader) = cluster.leader_for(&tp.topic, tp.partition) else {
                inner.metadata.request_update_for_topic(&tp.topic);
                continue;
            };
            if st.fetch_in_flight.contains(&leader.id) {
                continue;
            }
            let epoch = cluster
                .leader_epoch_for(&tp.topic, tp.partition)
                .unwrap_or(-1);
            let topic_id = cluster.topic_id(&tp.topic).filter(|id| *id != [0; 16]);
            plan.entry(leader.id)
                .or_insert_with(|| (leader.clone(), vec![]))
                .1
                .push(PartitionFetch {
                    tp,
                    topic_id,
                    fetch_offset: if count == 0 { pos.offset } else { next },
                    current_leader_epoch: epoch,
                    partition_max_bytes: inner.cfg.max_partition_fetch_bytes,
                });
        }
        let limits = FetchLimits {
            max_wait_ms: inner.cfg.fetch_max_wait_ms,
            min_bytes: inner.cfg.fetch_min_bytes,
            max_bytes: inner.cfg.fetch_max_bytes,
            isolation_level: if inner.cfg.read_committed {
                READ_COMMITTED
            } else {
                0
            },
        };
        let rack = inner.cfg.client_rack.clone().unwrap_or_default();
        for (node_id, (node, parts)) in plan {
            st.fetch_in_flight.insert(node_id);
            let all_ids = parts.iter().all(|p| p.topic_id.is_some());
            let offsets: HashMap<TopicPartition, i64> = parts
                .iter()
                .map(|p| (p.tp.clone(), p.fetch_offset))
                .collect();
            let names: HashMap<[u8; 16], String> = parts
                .iter()
                .filter_map(|p| p.topic_id.map(|id| (id, p.tp.topic.to_string())))
                .collect();
            let rack = rack.clone();
            let body = Body::Versioned {
                api_key: ApiKey::Fetch as i16,
                // Topic ids from v13 on; without ids, names (<= v12).
                max_version: if all_ids { None } else { Some(12) },
                build: Box::new(move |v| {
                    let mut parts = parts;
                    if v < 13 {
                        for p in &mut parts {
                            p.topic_id = None;
                        }
                    }
                    let mut req = build_fetch_request(limits, &parts, &rack);
                    if v >= 13 {
                        for t in &mut req.topics {
                            t.topic = Default::default();
                        }
                    }
                    RequestKind::Fetch(req)
                }),
            };
            // The broker may hold a Fetch for max_wait: the request timeout
            // must cover it (Java adds fetch.max.wait.ms).
            let opts = RequestOpts {
                request_timeout_ms: Some(
                    inner.cfg.request_timeout_ms + inner.cfg.fetch_max_wait_ms as i64,
                ),
                max_version: None,
            };
            inner.submit(
                node,
                body,
                opts,
                Tag::Fetch {
                    node: node_id,
                    offsets,
                    names,
                },
            );
        }
    }

    // Auto-commit.
    if inner.cfg.enable_auto_commit && now >= st.next_auto_commit_ms {
        st.next_auto_commit_ms = now + inner.cfg.auto_commit_interval_ms;
        maybe_auto_commit(inner, &mut st, false);
    }
    if inner.cfg.enable_auto_commit {
        wait_ms = wait_ms.min((st.next_auto_commit_ms - now).max(1));
    }
    Duration::from_millis(wait_ms.clamp(1, 100) as u64)
}

/// Send an auto-commit of the consumed positions that moved since the last
/// commit. Returns true when one was sent.
fn maybe_auto_commit(inner: &Arc<Inner>, st: &mut State, pre_join: bool) -> bool {
    if st.auto_commit_in_flight {
        return false;
    }
    let Some(g) = st.group.as_ref() else {
        return false;
    };
    let Some(node) = g.coordinator().cloned() else {
        return false;
    };
    let offsets: BTreeMap<TopicPartition, i64> = st
        .subs
        .all_consumed()
        .into_iter()
        .filter(|(tp, p)| st.last_committed.get(tp) != Some(&p.offset))
        .map(|(tp, p)| (tp, p.offset))
        .collect();
    if offsets.is_empty() {
        return false;
    }
    let generation = if st.subs.has_auto_assigned_partitions() {
        if g.state() != MemberState::Stable && !pre_join {
            return false;
        }
        g.generation().clone()
    } else {
        crate::consumer::coordinator::Generation::none()
    };
    let full: BTreeMap<TopicPartition, OffsetAndMetadata> = st
        .subs
        .all_consumed()
        .into_iter()
        .filter(|(tp, _)| offsets.contains_key(tp))
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
        .collect();
    let body = commit_body(
        inner,
        g.group_id.as_str(),
        &generation,
        g.group_instance_id.clone(),
        &full,
    );
    st.auto_commit_in_flight = true;
    inner.submit(
        coordinator_connection(&node),
        body,
        RequestOpts::default(),
        Tag::AutoCommit {
            offsets,
            pre_join,
            generation,
        },
    );
    true
}

fn group_step(
    inner: &Arc<Inner>,
    st: &mut State,
    cluster: &crate::cluster::Cluster,
    now: i64,
) -> i64 {
    let subscribed = st.subs.has_auto_assigned_partitions();
    // Pattern subscriptions follow every metadata update (the version first:
    // the snapshot fetched after it is at least as new). A change rejoins in
    // any state: a join under way carries the old topics.
    if st
        .subs
        .match_pattern(inner.metadata.update_version(), || inner.metadata.fetch())
    {
        if let Some(g) = st.group.as_mut() {
            g.request_rejoin("the topics matching the subscribed pattern changed");
        }
    }
    // Pattern / partition-count changes of subscribed topics mean a rejoin.
    if subscribed {
        let g = st.group.as_ref().expect("group");
        if g.state() == MemberState::Stable {
            let snapshot: BTreeMap<String, usize> = st
                .subs
                .subscription()
                .iter()
                .map(|t| (t.clone(), cluster.partition_count_for_topic(t).unwrap_or(0)))
                .collect();
            if snapshot != st.joined_snapshot && snapshot.values().all(|n| *n > 0) {
                st.group
                    .as_mut()
                    .expect("group")
                    .request_rejoin("the partitions of a subscribed topic changed");
            }
        }
    }
    let g = st.group.as_mut().expect("group");
    // A member without a subscription only needs the coordinator (commits
    // and offset lookups of manually assigned partitions).
    if !subscribed {
        if g.coordinator_unknown() {
            if let Action::FindCoordinator = g.next_action(now) {
                send_find_coordinator(inner, g, now);
            }
        }
        return 100;
    }
    // Leader waiting for metadata of every member's topics before assigning.
    if st.join.is_some() {
        return leader_assign(inner, st, cluster, now);
    }
    // Before (re)joining: commit, then let the application revoke (eager).
    let needs_join = g.rejoin_needed()
        && !g.coordinator_unknown()
        && !matches!(
            g.state(),
            MemberState::PreparingRebalance | MemberState::CompletingRebalance
        );
    if needs_join && !st.subs.pattern_ready() {
        return 50;
    }
    if needs_join && g.fatal().is_none() {
        match st.prepare {
            Prepare::NotStarted => {
                st.prepare = Prepare::Committing;
                if inner.cfg.enable_auto_commit && maybe_auto_commit(inner, st, true) {
                    return 10;
                }
                st.prepare = Prepare::AwaitUser;
                start_revocation(inner, st);
            }
            Prepare::Committing => return 10,
            Prepare::AwaitUser => {
                if !st.events_unacked && st.events.is_empty() {
                    st.prepare = Prepare::Done;
                } else {
                    // Keep the session alive while the application catches up
                    // (not with next_action: that starts the join, unsent).
                    let g = st.group.as_mut().expect("group");
                    if let Some(generation) = g.heartbeat_while_rejoin_waits(now) {
                        send_heartbeat(inner, g, generation);
                    }
                    return 10;
                }
            }
            Prepare::Done => {}
        }
    }
    let g = st.group.as_mut().expect("group");
    match g.next_action(now) {
        Action::FindCoordinator => {
            send_find_coordinator(inner, g, now);
            10
        }
        Action::Join { member_id } => {
            let topics: Vec<String> = st.subs.subscription().iter().cloned().collect();
            let owned: Vec<TopicPartition> = st.subs.assigned_partitions().cloned().collect();
            let g = st.group.as_mut().expect("group");
            let generation_id = g.generation().generation_id;
            let rack = inner.cfg.client_rack.clone();
            let mut protocols = Vec::new();
            for name in &inner.cfg.assignors {
                // v1+ carries owned partitions (cooperative); v3 the rack.
                match encode_subscription(&topics, &owned, generation_id, rack.as_deref(), None, 3)
                {
                    Ok(meta) => protocols.push((name.clone(), meta)),
                    Err(e) => {
                        st.errors.push_back(e.into());
                        return 100;
                    }
                }
            }
            let p = (
                g.group_id.clone(),
                inner.cfg.session_timeout_ms as i32,
                g.rebalance_timeout_ms as i32,
                member_id,
                g.group_instance_id.clone(),
                g.rejoin_reason().to_string(),
            );
            let node = coordinator_connection(g.coordinator().expect("join needs a coordinator"));
            let body = Body::Versioned {
                api_key: ApiKey::JoinGroup as i16,
                max_version: None,
                build: Box::new(move |v| {
                    RequestKind::JoinGroup(rq::join_group(
                        &rq::JoinParams {
                            group_id: &p.0,
                            session_timeout_ms: p.1,
                            rebalance_timeout_ms: p.2,
                            member_id: &p.3,
                            group_instance_id: p.4.as_deref(),
                            protocols,
                            reason: Some(&p.5),
                        },
                        v,
                    ))
                }),
            };
            let opts = RequestOpts {
                request_timeout_ms: Some(
                    inner
                        .cfg
                        .request_timeout_ms
                        .max(g.rebalance_timeout_ms + 5000),
                ),
                max_version: None,
            };
            inner.submit(node, body, opts, Tag::Join);
            100
        }
        Action::Heartbeat { generation } => {
            send_heartbeat(inner, g, generation);
            g.heartbeat.time_to_next_heartbeat(now).max(1)
        }
        Action::LeaveForPollTimeout => {
            // Java: the member leaves so the group can move on; the next
            // poll() rejoins.
            let leave = leave_request(st, "max_poll_interval_ms passed without a poll");
            lose_partitions(st);
            if let Some((node, body)) = leave {
                inner.submit(node, body, RequestOpts::default(), Tag::Leave);
            }
            st.errors.push_back(Error::State {
                detail: "the consumer left its group because poll() was not called within max_poll_interval_ms".into(),
            });
            inner.data.notify_all();
            100
        }
        Action::Wait(ms) => ms,
    }
}

fn send_find_coordinator(inner: &Arc<Inner>, g: &mut GroupMembership, now: i64) {
    let Some(node) = inner.client.client().least_loaded_node(now) else {
        g.on_find_coordinator(Err(15), now);
        inner.metadata.request_update();
        return;
    };
    let gid = g.group_id.clone();
    let body = Body::Versioned {
        api_key: ApiKey::FindCoordinator as i16,
        max_version: None,
        build: Box::new(move |v| RequestKind::FindCoordinator(rq::find_coordinator(&gid, 0, v))),
    };
    inner.submit(node, body, RequestOpts::default(), Tag::FindCoordinator);
}

fn send_heartbeat(
    inner: &Arc<Inner>,
    g: &GroupMembership,
    generation: crate::consumer::coordinator::Generation,
) {
    let Some(node) = g.coordinator().map(coordinator_connection) else {
        return;
    };
    let sent = generation.clone();
    let (gid, inst) = (g.group_id.clone(), g.group_instance_id.clone());
    let body = Body::Versioned {
        api_key: ApiKey::Heartbeat as i16,
        max_version: None,
        build: Box::new(move |v| {
            RequestKind::Heartbeat(rq::heartbeat(&generation, &gid, inst.as_deref(), v))
        }),
    };
    inner.submit(
        node,
        body,
        RequestOpts::default(),
        Tag::Heartbeat { generation: sent },
    );
}

/// Eager protocol: everything owned is revoked before the join. The
/// application gets `on_revoke` in its next poll; we wait for its ack.
fn start_revocation(inner: &Arc<Inner>, st: &mut State) {
    if inner.cfg.cooperative() {
        return;
    }
    let owned: Vec<TopicPartition> = st.subs.assigned_partitions().cloned().collect();
    if owned.is_empty() {
        return;
    }
    let _ = st.subs.assign_from_subscribed(Vec::new());
    drop_buffered(st, |_| true);
    st.events.push_back(RebalanceEvent::Revoked(owned));
    inner.data.notify_all();
}

/// The leader's assignment once metadata covers every member's topics
/// (bounded wait: topics still unknown after 5 s get no partitions).
fn leader_assign(
    inner: &Arc<Inner>,
    st: &mut State,
    cluster: &crate::cluster::Cluster,
    now: i64,
) -> i64 {
    let join = st.join.as_ref().expect("join");
    let topics: BTreeSet<String> = join
        .members
        .iter()
        .flat_map(|m| m.topics.iter().cloned())
        .collect();
    let missing: Vec<&String> = topics
        .iter()
        .filter(|t| cluster.partition_count_for_topic(t).unwrap_or(0) == 0)
        .collect();
    if !missing.is_empty() && now < st.join_deadline_ms {
        let ts: Vec<String> = topics.iter().cloned().collect();
        inner.want_topics(st, ts);
        inner.metadata.request_update_for_new_topics();
        inner.client.client().wakeup();
        return 20;
    }
    let join = st.join.take().expect("join");
    let counts: HashMap<String, i32> = topics
        .iter()
        .filter_map(|t| {
            cluster
                .partition_count_for_topic(t)
                .map(|n| (t.clone(), n as i32))
        })
        .collect();
    let assignment = assignor::assign(&join.protocol, &join.members, &counts).unwrap_or_default();
    let mut assignments: BTreeMap<String, Bytes> = BTreeMap::new();
    for m in &join.members {
        let parts = assignment.get(&m.member_id).cloned().unwrap_or_default();
        match encode_assignment(&parts, None, 3) {
            Ok(b) => {
                assignments.insert(m.member_id.clone(), b);
            }
            Err(e) => {
                st.errors.push_back(e.into());
                return 100;
            }
        }
    }
    send_sync(inner, st, join.generation_id, assignments);
    100
}

fn send_sync(
    inner: &Arc<Inner>,
    st: &mut State,
    generation_id: i32,
    assignments: BTreeMap<String, Bytes>,
) {
    let g = st.group.as_ref().expect("group");
    let Some(node) = g.coordinator().map(coordinator_connection) else {
        return;
    };
    let (gen, gid, inst) = (
        g.generation().clone(),
        g.group_id.clone(),
        g.group_instance_id.clone(),
    );
    let body = Body::Versioned {
        api_key: ApiKey::SyncGroup as i16,
        max_version: None,
        build: Box::new(move |v| {
            RequestKind::SyncGroup(rq::sync_group(&gen, &gid, inst.as_deref(), &assignments, v))
        }),
    };
    let opts = RequestOpts {
        request_timeout_ms: Some(
            inner
                .cfg
                .request_timeout_ms
                .max(g.rebalance_timeout_ms + 5000),
        ),
        max_version: None,
    };
    inner.submit(node, body, opts, Tag::Sync { generation_id });
}

fn handle_answer(inner: &Arc<Inner>, tag: Tag, result: Result<(ResponseKind, i16), Error>) {
    let now = now_ms();
    match tag {
        Tag::Fetch {
            node,
            offsets,
            names,
        } => {
            // Decode before taking the state lock: this is the heavy part.
            let decoded = match result {
                Ok((ResponseKind::Fetch(resp), _)) => {
                    let (code, parts) = parse_fetch_response(&resp, &|id| names.get(id).cloned());
                    if code != 0 {
                        Err(Error::broker(code, Some("fetch".into())))
                    } else {
                        let opts = DecodeOptions {
                            verify_crc: inner.cfg.check_crcs,
                            ..DecodeOptions::default()
                        };
                        Ok(parts
                            .into_iter()
                            .filter_map(|p| {
                                let at = *offsets.get(&p.tp)?;
                                let reaction = fetch_reaction(p.error_code);
                                let decoded = if reaction == FetchReaction::Deliver {
                                    let mut filter = AbortedTransactionFilter::new(
                                        inner.cfg.read_committed,
                                        p.aborted_transactions.clone(),
                                    );
                                    Some(decode_fetched(&p.records, at, opts, &mut filter))
                                } else {
                                    None
                                };
                                Some((p, at, reaction, decoded))
                            })
                            .collect::<Vec<_>>())
                    }
                }
                Ok(_) => Err(Error::State {
                    detail: "unexpected Fetch answer".into(),
                }),
                Err(e) => Err(e),
            };
            let mut st = inner.lock();
            st.fetch_in_flight.remove(&node);
            let parts = match decoded {
                Ok(p) => p,
                Err(e) => {
                    // Disconnects and timeouts: the leader may have moved.
                    drop(st);
                    let _ = e;
                    inner.metadata.request_update();
                    return;
                }
            };
            let mut notify = false;
            for (p, at, reaction, decoded) in parts {
                // Still ours, and still where we asked from?
                let Some(s) = st.subs.state(&p.tp) else {
                    continue;
                };
                if s.state != FetchState::Fetching || s.paused {
                    continue;
                }
                let expected = st
                    .buffer
                    .iter()
                    .rev()
                    .find(|c| c.tp == p.tp)
                    .map(|c| c.next_offset)
                    .or(s.position.map(|p| p.offset));
                if expected != Some(at) {
                    continue;
                }
                match reaction {
                    FetchReaction::Deliver => {
                        st.subs.update_watermarks(
                            &p.tp,
                            p.high_watermark,
                            p.log_start_offset,
                            p.last_stable_offset,
                        );
                        match decoded.expect("decoded on Deliver") {
                            Ok(d) => {
                                if d.record_too_large {
                                    st.errors.push_back(Error::broker(
                                        10,
                                        Some(format!(
                                            "the record at offset {at} of {}-{} is larger than max_partition_fetch_bytes ({})",
                                            p.tp.topic, p.tp.partition, inner.cfg.max_partition_fetch_bytes
                                        )),
                                    ));
                                    notify = true;
                                } else if d.next_offset > at {
                                    let bytes = d.records.byte_size();
                                    st.buffered_bytes += bytes;
                                    st.buffer.push_back(Chunk {
                                        tp: p.tp.clone(),
                                        start: at,
                                        cols: Arc::new(d.records),
                                        cursor: 0,
                                        next_offset: d.next_offset,
                                        last_epoch: d.last_epoch,
                                        bytes,
                                    });
                                    notify = true;
                                }
                            }
                            Err(e) => {
                                st.errors.push_back(Error::State {
                                    detail: format!(
                                        "corrupt records from {}-{} at offset {at}: {e}",
                                        p.tp.topic, p.tp.partition
                                    ),
                                });
                                notify = true;
                            }
                        }
                    }
                    FetchReaction::RefreshMetadata => {
                        inner.metadata.request_update();
                    }
                    FetchReaction::Retry => {}
                    FetchReaction::OffsetOutOfRange => {
                        if inner.cfg.auto_offset_reset == OffsetResetStrategy::None {
                            st.errors.push_back(Error::broker(
                                1,
                                Some(format!(
                                    "offset {at} of {}-{} is out of range",
                                    p.tp.topic, p.tp.partition
                                )),
                            ));
                            notify = true;
                        } else {
                            let _ = st.subs.request_offset_reset(&p.tp, None);
                        }
                    }
                    FetchReaction::Raise(code) => {
                        st.errors.push_back(Error::broker(
                            code,
                            Some(format!("fetching {}-{}", p.tp.topic, p.tp.partition)),
                        ));
                        notify = true;
                    }
                }
            }
            drop(st);
            if notify {
                inner.data.notify_all();
            }
        }
        Tag::Leave => {}
        Tag::FindCoordinator => {
            let mut st = inner.lock();
            let Some(g) = st.group.as_mut() else { return };
            let r = match &result {
                Ok((ResponseKind::FindCoordinator(resp), _)) => {
                    rq::parse_find_coordinator(resp, &g.group_id)
                }
                _ => Err(15),
            };
            log::debug!(target: "ferrokafka::group", "find coordinator: {:?} / {:?}", r, result.as_ref().err());
            g.on_find_coordinator(r, now);
            drop(st);
            inner.data.notify_all();
        }
        Tag::Heartbeat { generation } => {
            let mut st = inner.lock();
            let lost = {
                let Some(g) = st.group.as_mut() else { return };
                if result.is_ok() && *g.generation() != generation {
                    // Sent in a generation we have left since (Java
                    // KAFKA-9823, `generationUnchanged`): whatever it says
                    // about that generation no longer concerns us.
                    return;
                }
                let r = match &result {
                    Ok((ResponseKind::Heartbeat(resp), _)) => {
                        g.on_heartbeat(Ok(resp.error_code), now)
                    }
                    _ => {
                        g.mark_coordinator_unknown("heartbeat failed", now);
                        g.on_heartbeat(Err(()), now)
                    }
                };
                matches!(r, Reaction::ResetAndRejoin | Reaction::ResetGeneration)
            };
            if lost {
                lose_partitions(&mut st);
                inner.data.notify_all();
            }
        }
        Tag::Join => {
            let mut st = inner.lock();
            let Some(g) = st.group.as_mut() else { return };
            let resp = match result {
                Ok((ResponseKind::JoinGroup(resp), _)) => resp,
                other => {
                    let reason = match other {
                        Err(e) => format!("join failed: {e:?}"),
                        _ => "unexpected JoinGroup answer".into(),
                    };
                    log::debug!(target: "ferrokafka::group", "{reason}");
                    g.mark_coordinator_unknown(&reason, now);
                    g.on_join(15, -1, "", "", None, now);
                    return;
                }
            };
            let protocol = resp.protocol_name.as_ref().map(|s| s.to_string());
            let r = g.on_join(
                resp.error_code,
                resp.generation_id,
                resp.member_id.as_str(),
                resp.leader.as_str(),
                protocol.as_deref(),
                now,
            );
            log::debug!(target: "ferrokafka::group", "join: code {} gen {} -> {r:?}", resp.error_code, resp.generation_id);
            match r {
                Reaction::Ok => {
                    st.prepare = Prepare::NotStarted;
                    let g = st.group.as_ref().expect("group");
                    let leader = g.is_leader(resp.leader.as_str());
                    if leader {
                        let mut members = Vec::new();
                        for m in &resp.members {
                            match decode_subscription(
                                m.member_id.as_str(),
                                m.group_instance_id.as_deref(),
                                m.metadata.clone(),
                            ) {
                                Ok(s) => members.push(s),
                                Err(e) => st.errors.push_back(e.into()),
                            }
                        }
                        st.join = Some(JoinOutcome {
                            protocol: protocol.unwrap_or_else(|| "range".into()),
                            members,
                            generation_id: resp.generation_id,
                        });
                        st.join_deadline_ms = now + 5000;
                    } else {
                        let generation_id = resp.generation_id;
                        send_sync(inner, &mut st, generation_id, BTreeMap::new());
                    }
                }
                Reaction::Fatal(code) => {
                    st.errors
                        .push_back(Error::broker(code, Some("joining the group".into())));
                    inner.data.notify_all();
                }
                Reaction::RaiseAndRejoin(code) => {
                    raise_once(&mut st, code, "joining the group");
                    inner.data.notify_all();
                }
                Reaction::ResetAndRejoin | Reaction::ResetGeneration => {
                    lose_partitions(&mut st);
                    inner.data.notify_all();
                }
                _ => {}
            }
        }
        Tag::Sync { generation_id } => {
            let mut st = inner.lock();
            let Some(g) = st.group.as_mut() else { return };
            let resp = match result {
                Ok((ResponseKind::SyncGroup(resp), _)) => resp,
                other => {
                    let reason = match other {
                        Err(e) => format!("sync failed: {e}"),
                        _ => "unexpected SyncGroup answer".into(),
                    };
                    log::debug!(target: "ferrokafka::group", "{reason}");
                    g.mark_coordinator_unknown(&reason, now);
                    g.on_sync(15, now);
                    return;
                }
            };
            if g.generation().generation_id != generation_id {
                log::debug!(target: "ferrokafka::group", "sync: code {} for generation {generation_id} ignored: now in {}", resp.error_code, g.generation().generation_id);
                return;
            }
            let r = g.on_sync(resp.error_code, now);
            log::debug!(target: "ferrokafka::group", "sync: code {} -> {r:?}", resp.error_code);
            match r {
                Reaction::Ok => {
                    let parts = match decode_assignment(resp.assignment.clone()) {
                        Ok(p) => p,
                        Err(e) => {
                            st.errors.push_back(e.into());
                            st.group
                                .as_mut()
                                .expect("group")
                                .request_rejoin("undecodable assignment");
                            inner.data.notify_all();
                            return;
                        }
                    };
                    apply_assignment(inner, &mut st, parts);
                }
                Reaction::Fatal(code) => {
                    st.errors
                        .push_back(Error::broker(code, Some("syncing the group".into())));
                    inner.data.notify_all();
                }
                Reaction::RaiseAndRejoin(code) => {
                    raise_once(&mut st, code, "syncing the group");
                    inner.data.notify_all();
                }
                Reaction::ResetAndRejoin | Reaction::ResetGeneration => {
                    lose_partitions(&mut st);
                    inner.data.notify_all();
                }
                _ => {}
            }
        }
        Tag::OffsetFetch => {
            let mut st = inner.lock();
            st.offset_fetch_in_flight = false;
            match result {
                Ok((ResponseKind::OffsetFetch(resp), _)) => {
                    let gid = inner.cfg.group_id.clone().unwrap_or_default();
                    let (code, parts) = rq::parse_offset_fetch(&resp, &gid);
                    let code = if code != 0 {
                        code
                    } else {
                        parts.iter().map(|p| p.2).find(|c| *c != 0).unwrap_or(0)
                    };
                    if code != 0 {
                        drop(st);
                        let reaction = offset_fetch_reaction(code);
                        if let Reaction::Fatal(c) = reaction {
                            inner.lock().errors.push_back(Error::broker(
                                c,
                                Some("fetching committed offsets".into()),
                            ));
                            inner.data.notify_all();
                        } else {
                            inner.apply_coordinator_reaction(reaction, "offset fetch", None);
                        }
                        return;
                    }
                    let mut missing = Vec::new();
                    for (tp, o, _) in parts {
                        let Some(s) = st.subs.state(&tp) else {
                            continue;
                        };
                        if s.state != FetchState::Initializing {
                            continue;
                        }
                        if o.offset >= 0 {
                            let _ = st.subs.seek(&tp, o.offset, o.leader_epoch);
                            st.last_committed.insert(tp, o.offset);
                        } else {
                            missing.push(tp);
                        }
                    }
                    if !missing.is_empty() {
                        if inner.cfg.auto_offset_reset == OffsetResetStrategy::None {
                            st.errors.push_back(Error::broker(
                                1,
                                Some(format!("no committed offset and auto_offset_reset is 'none' for {} partition(s)", missing.len())),
                            ));
                            inner.data.notify_all();
                        }
                        for tp in missing {
                            if inner.cfg.auto_offset_reset != OffsetResetStrategy::None {
                                let _ = st.subs.request_offset_reset(&tp, None);
                            }
                        }
                    }
                    inner.data.notify_all();
                }
                _ => {
                    drop(st);
                    inner.apply_coordinator_reaction(
                        Reaction::CoordinatorUnknown,
                        "offset fetch failed",
                        None,
                    );
                }
            }
        }
        Tag::Reset { parts } => {
            let mut st = inner.lock();
            for (tp, _) in &parts {
                st.resets_in_flight.remove(tp);
            }
            match result {
                Ok((ResponseKind::ListOffsets(resp), _)) => {
                    for r in parse_list_offsets_response(&resp) {
                        let Some(strategy) = parts.iter().find(|p| p.0 == r.tp).map(|p| p.1) else {
                            continue;
                        };
                        if r.error_code == 0 && r.offset >= 0 {
                            st.subs
                                .maybe_complete_reset(&r.tp, r.offset, r.leader_epoch, strategy);
                        } else {
                            st.subs
                                .set_reset_pending(&r.tp, now + inner.cfg.retry_backoff_ms);
                            inner.metadata.request_update();
                        }
                    }
                    inner.data.notify_all();
                }
                _ => {
                    for (tp, _) in &parts {
                        st.subs
                            .set_reset_pending(tp, now + inner.cfg.retry_backoff_ms);
                    }
                    inner.metadata.request_update();
                }
            }
        }
        Tag::AutoCommit {
            offsets,
            pre_join,
            generation,
        } => {
            let full: BTreeMap<TopicPartition, OffsetAndMetadata> = offsets
                .iter()
                .map(|(tp, o)| {
                    (
                        tp.clone(),
                        OffsetAndMetadata {
                            offset: *o,
                            leader_epoch: -1,
                            metadata: None,
                        },
                    )
                })
                .collect();
            let r = inner.commit_result(result, &full, &generation);
            let mut st = inner.lock();
            st.auto_commit_in_flight = false;
            if pre_join && st.prepare == Prepare::Committing {
                // Java commits before revoking and goes on even when the
                // commit fails (the records will be seen again).
                st.prepare = Prepare::AwaitUser;
                start_revocation(inner, &mut st);
            }
            let _ = r;
        }
    }
}

/// An unexpected JoinGroup/SyncGroup error for poll to raise; the member
/// rejoins by itself. One of a kind waits at a time: a member that polls
/// rarely must not find a backlog of the same error.
fn raise_once(st: &mut State, code: i16, what: &str) {
    if !st.errors.iter().any(|e| e.code() == code) {
        st.errors.push_back(Error::broker(
            code,
            Some(format!("{what} (unexpected answer; rejoining)")),
        ));
    }
}

/// A SyncGroup answer's assignment becomes ours. Eager: everything was
/// revoked before the join, so all of it is new. Cooperative: only moved
/// partitions are revoked (and a second rebalance follows, KIP-429).
fn apply_assignment(inner: &Arc<Inner>, st: &mut State, parts: Vec<TopicPartition>) {
    let owned: BTreeSet<TopicPartition> = st.subs.assigned_partitions().cloned().collect();
    let new: BTreeSet<TopicPartition> = parts.iter().cloned().collect();
    let revoked: Vec<TopicPartition> = owned.difference(&new).cloned().collect();
    let added: Vec<TopicPartition> = new.difference(&owned).cloned().collect();
    let subscribed = st.subs.subscription().clone();
    let ours: Vec<TopicPartition> = parts
        .into_iter()
        .filter(|tp| subscribed.contains(&*tp.topic))
        .collect();
    if let Err(e) = st.subs.assign_from_subscribed(ours) {
        st.errors.push_back(e);
    }
    let gone: HashSet<TopicPartition> = revoked.iter().cloned().collect();
    drop_buffered(st, |tp| gone.contains(tp));
    let cluster = inner.metadata.fetch();
    st.joined_snapshot = subscribed
        .iter()
        .map(|t| (t.clone(), cluster.partition_count_for_topic(t).unwrap_or(0)))
        .collect();
    inner.want_topics(st, new.iter().map(|tp| tp.topic.to_string()));
    if !revoked.is_empty() {
        st.events.push_back(RebalanceEvent::Revoked(revoked));
        if inner.cfg.cooperative() {
            st.group
                .as_mut()
                .expect("group")
                .request_rejoin("partitions revoked (cooperative): rejoin to let others take them");
        }
    }
    st.events.push_back(RebalanceEvent::Assigned(added));
    st.prepare = Prepare::NotStarted;
    inner.data.notify_all();
}
