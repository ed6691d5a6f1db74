//! The consumer's decisions as a sans-IO state machine: what to send, what
//! an answer changes, what the application is told.
//!
//! `ConsumerCore` owns no thread, channel, lock or clock: time is the `now`
//! argument of every call, the cluster snapshot is handed in with
//! `set_cluster`, and every effect is returned as an [`Action`] for the
//! shell (`consumer::shell`, the consumer thread) to carry out: send a
//! request, wake the application, ask the metadata for an update. The shell
//! keeps the core behind its one mutex and never holds that mutex across
//! I/O; everything here is therefore short, non-blocking work, and the heavy
//! part of a Fetch answer (CRC, decompression, column building) is done
//! before the lock by [`prepare_answer`].
//!
//! Split by concern: `group.rs` (discovery, join/sync, heartbeats,
//! rebalance events), `fetching.rs` (positions, fetch planning, fetched
//! data, the buffer the application drains), `commits.rs` (auto-commit and
//! the reactions to commit / offset-fetch errors shared with the facade).

mod commits;
mod fetching;
mod group;
mod metrics;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_group;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use ferrokafka_protocol::kafka_protocol::messages::ResponseKind;

use crate::cluster::{Cluster, Node, TopicPartition};
use crate::consumer::config::{ConsumerConfig, RebalanceEvent, RecordSlice};
use crate::consumer::coordinator::{Generation, GroupMembership};
use crate::consumer::subscription::{OffsetResetStrategy, SubscriptionState, SubscriptionType};
use crate::driver::{Body, RequestOpts};
use crate::error::Error;

pub use commits::commit_body;
pub use fetching::{prepare_answer, Answer, Chunk};
use group::{JoinOutcome, Prepare};

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Node(Node),
    /// FindCoordinator: any broker will do; the shell picks the least-loaded
    /// one (docs/semantics.md §2.2; it owns the connection states).
    LeastLoaded,
}

/// A request for the shell to send; its answer comes back to
/// [`ConsumerCore::on_answer`] with `tag`.
pub struct Request {
    pub dest: Dest,
    pub body: Body,
    pub opts: RequestOpts,
    pub tag: Tag,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("dest", &self.dest)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

/// An effect the shell carries out.
#[derive(Debug)]
pub enum Action {
    /// Boxed: a request is large next to the other actions.
    Send(Box<Request>),
    /// Records, events or errors are waiting for the application.
    WakeApplication,
    /// `Metadata::request_update`: routing looks stale.
    MetadataUpdate,
    /// `Metadata::request_update_for_topic`: a partition has no leader.
    MetadataUpdateForTopic(String),
    /// `Metadata::request_update_for_new_topics`: the leader waits for
    /// metadata of topics only other members subscribe to.
    MetadataUpdateForNewTopics,
    /// `Metadata::set_subscription`: the topics the metadata keeps.
    MetadataTopics(Option<Vec<String>>),
}

/// What a request was for; handed back with its answer.
#[derive(Debug)]
pub enum Tag {
    FindCoordinator,
    Join,
    Sync {
        generation_id: i32,
    },
    /// The generation the heartbeat was sent with (stale answers are ignored).
    Heartbeat {
        generation: Generation,
    },
    /// `offsets`: where each partition was fetched from; an answer is used
    /// only if that is still where the partition continues (seek, reset and
    /// revocation make it stale without further bookkeeping).
    Fetch {
        node: i32,
        offsets: HashMap<TopicPartition, i64>,
        names: HashMap<[u8; 16], String>,
        /// When the core decided to send it (fetch-latency).
        sent_ms: i64,
    },
    OffsetFetch,
    Reset {
        parts: Vec<(TopicPartition, OffsetResetStrategy)>,
    },
    AutoCommit {
        offsets: BTreeMap<TopicPartition, i64>,
        pre_join: bool,
        generation: Generation,
        /// When the core decided to send it (commit-latency).
        sent_ms: i64,
    },
    /// LeaveGroup: nothing to do with the answer.
    Leave,
}

/// Java gives the coordinator its own connection (id `MAX - id`), so
/// heartbeats never queue behind a long-polling Fetch to the same broker.
pub fn coordinator_connection(node: &Node) -> Node {
    Node::new(
        i32::MAX - node.id,
        node.host.clone(),
        node.port,
        node.rack.clone(),
    )
}

/// The consumer's state. Fields are visible to the facade in
/// `consumer::client`, which reads them under the shell's mutex.
pub struct ConsumerCore {
    pub(in crate::consumer) cfg: ConsumerConfig,
    pub(in crate::consumer) cluster: Arc<Cluster>,
    /// The metadata update version `cluster` is at least as new as
    /// (pattern subscriptions match each version once).
    metadata_version: i32,
    pub(in crate::consumer) subs: SubscriptionState,
    pub(in crate::consumer) group: Option<GroupMembership>,
    prepare: Prepare,
    /// The join answer while the leader waits for metadata of every member's topics.
    join: Option<JoinOutcome>,
    join_deadline_ms: i64,
    pub(in crate::consumer) buffer: VecDeque<Chunk>,
    pub(in crate::consumer) buffered_bytes: usize,
    pub(in crate::consumer) events: VecDeque<RebalanceEvent>,
    /// Events handed out whose callbacks have not been acknowledged yet.
    pub(in crate::consumer) events_unacked: bool,
    pub(in crate::consumer) commits_done: Vec<(u64, Result<(), Error>)>,
    pub(in crate::consumer) errors: VecDeque<Error>,
    fetch_in_flight: HashSet<i32>,
    /// Nodes and partitions whose last Fetch failed: not fetched from again
    /// before the time given (retry_backoff_ms), so a broken leader or a
    /// stale route is not asked again in a tight loop while the metadata
    /// refreshes.
    fetch_backoff: HashMap<i32, i64>,
    partition_backoff: HashMap<TopicPartition, i64>,
    offset_fetch_in_flight: bool,
    resets_in_flight: HashSet<TopicPartition>,
    auto_commit_in_flight: bool,
    next_auto_commit_ms: i64,
    pub(in crate::consumer) last_committed: BTreeMap<TopicPartition, i64>,
    /// Partition counts of the subscribed topics when we joined: a change
    /// (topic created, partitions added) means a rejoin.
    joined_snapshot: BTreeMap<String, usize>,
    /// Topics the metadata keeps (subscription, assignment, lookups).
    pub(in crate::consumer) metadata_topics: BTreeSet<String>,
    /// The application polled or asked for a position since the last
    /// assign(): only then are missing positions resolved (Java resolves them
    /// in poll), so `assign` + `seek` never races a committed-offset lookup
    /// or a reset.
    pub(in crate::consumer) want_positions: bool,
    pub(in crate::consumer) closed: bool,
    metrics: metrics::ConsumerMetrics,
    /// The `now` of the last `step` or answer: the send time of requests
    /// decided deep inside (auto-commit), for their latency.
    now_ms: i64,
    /// Effects of the call in progress; every public entry point hands them
    /// out (`take_actions`).
    out: Vec<Action>,
}

impl ConsumerCore {
    /// `cfg` must have passed `ConsumerConfig::validate`.
    pub fn new(cfg: ConsumerConfig, now: i64) -> Self {
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
        ConsumerCore {
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
            fetch_backoff: HashMap::new(),
            partition_backoff: HashMap::new(),
            offset_fetch_in_flight: false,
            resets_in_flight: HashSet::new(),
            auto_commit_in_flight: false,
            next_auto_commit_ms: now + cfg.auto_commit_interval_ms,
            last_committed: BTreeMap::new(),
            joined_snapshot: BTreeMap::new(),
            metadata_topics: BTreeSet::new(),
            want_positions: false,
            closed: false,
            metrics: metrics::ConsumerMetrics::new(now),
            now_ms: now,
            cluster: Arc::new(Cluster::empty()),
            metadata_version: -1,
            out: Vec::new(),
            cfg,
        }
    }

    pub fn config(&self) -> &ConsumerConfig {
        &self.cfg
    }

    /// The metadata snapshot decisions are made against (routing, partition
    /// counts, topic ids).
    pub fn set_cluster(&mut self, cluster: Arc<Cluster>) {
        self.cluster = cluster;
    }

    /// `set_cluster` with the metadata update `version` the snapshot is at
    /// least as new as (read the version first, then fetch the snapshot).
    /// The shell hands in the newest before each call.
    pub fn set_metadata(&mut self, version: i32, cluster: Arc<Cluster>) {
        self.metadata_version = version;
        self.cluster = cluster;
    }

    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.out)
    }

    fn send(&mut self, dest: Dest, body: Body, opts: RequestOpts, tag: Tag) {
        self.out.push(Action::Send(Box::new(Request {
            dest,
            body,
            opts,
            tag,
        })));
    }

    fn wake_app(&mut self) {
        if !self
            .out
            .iter()
            .any(|a| matches!(a, Action::WakeApplication))
        {
            self.out.push(Action::WakeApplication);
        }
    }

    fn metadata_update_for_topic(&mut self, topic: &str) {
        let dup = self
            .out
            .iter()
            .any(|a| matches!(a, Action::MetadataUpdateForTopic(t) if t == topic));
        if !dup {
            self.out
                .push(Action::MetadataUpdateForTopic(topic.to_string()));
        }
    }

    fn metadata_update(&mut self) {
        if !self.out.iter().any(|a| matches!(a, Action::MetadataUpdate)) {
            self.out.push(Action::MetadataUpdate);
        }
    }

    /// Keep metadata for these topics too (assignment, lookups).
    pub fn want_topics(&mut self, topics: impl IntoIterator<Item = String>) -> Vec<Action> {
        let before = self.metadata_topics.len();
        self.metadata_topics.extend(topics);
        if self.metadata_topics.len() != before && self.subs.kind() != SubscriptionType::AutoPattern
        {
            let topics = self.metadata_topics.iter().cloned().collect();
            self.out.push(Action::MetadataTopics(Some(topics)));
        }
        self.take_actions()
    }

    // ----- the application's commands --------------------------------------------

    /// Subscribe to topic names; a different topic set means a rejoin.
    pub fn subscribe(&mut self, topics: Vec<String>) -> Result<Vec<Action>, Error> {
        let changed = self.subs.subscribe(topics.iter().cloned())?;
        self.metadata_topics = topics.iter().cloned().collect();
        self.out.push(Action::MetadataTopics(Some(topics)));
        if changed {
            if let Some(g) = self.group.as_mut() {
                g.request_rejoin("subscription changed");
            }
        }
        Ok(self.take_actions())
    }

    /// Subscribe to the topics whose whole name matches `pattern` (Java's
    /// `subscribe(Pattern)`), now and as topics come and go: `step` matches
    /// it against every metadata update newer than `metadata_version` and
    /// rejoins when the topics change.
    pub fn subscribe_pattern(
        &mut self,
        pattern: &str,
        metadata_version: i32,
    ) -> Result<Vec<Action>, Error> {
        if self.subs.pattern() != Some(pattern) {
            self.subs.subscribe_pattern(pattern, metadata_version)?;
            // Every topic's metadata, and a fresh copy for the first match.
            self.out.push(Action::MetadataTopics(None));
            self.out.push(Action::MetadataUpdate);
        }
        Ok(self.take_actions())
    }

    pub fn assign(&mut self, partitions: Vec<TopicPartition>) -> Result<Vec<Action>, Error> {
        if self.subs.kind() != SubscriptionType::UserAssigned
            && self.subs.kind() != SubscriptionType::None
        {
            return Err(Error::State {
                detail: "assign() after subscribe(): call unsubscribe() first".into(),
            });
        }
        let topics: Vec<String> = partitions.iter().map(|tp| tp.topic.to_string()).collect();
        let keep: HashSet<TopicPartition> = partitions.iter().cloned().collect();
        self.subs.assign_from_user(partitions)?;
        self.want_positions = false;
        self.drop_buffered(|tp| !keep.contains(tp));
        Ok(self.want_topics(topics))
    }

    /// Drop the subscription or assignment; the LeaveGroup to send (and
    /// wait for) when the member had joined.
    pub fn unsubscribe(&mut self) -> (Option<Request>, Vec<Action>) {
        let had_group = self.subs.has_auto_assigned_partitions();
        self.subs.unsubscribe();
        self.drop_buffered(|_| true);
        self.metadata_topics.clear();
        self.out.push(Action::MetadataTopics(Some(vec![])));
        let leave = if had_group {
            self.leave_request("the consumer unsubscribed")
        } else {
            None
        };
        (leave, self.take_actions())
    }

    /// `poll` started: positions may be resolved from now on, the poll timer
    /// restarts. Err: the membership failed for good (fatal group error).
    /// Ok(true): the consumer thread should look at the state again now.
    pub fn on_poll(&mut self, now: i64) -> Result<bool, Error> {
        let first = !self.want_positions;
        self.want_positions = true;
        if let Some(g) = self.group.as_mut() {
            g.on_poll(now);
            if let Some(code) = g.fatal() {
                return Err(Error::broker(
                    code,
                    Some("the consumer group membership failed".into()),
                ));
            }
        }
        Ok(first)
    }

    pub fn seek(&mut self, tp: &TopicPartition, offset: i64) -> Result<(), Error> {
        self.subs.seek(tp, offset, -1)?;
        self.drop_buffered(|t| t == tp);
        Ok(())
    }

    pub fn seek_to(
        &mut self,
        tps: Option<Vec<TopicPartition>>,
        strategy: OffsetResetStrategy,
    ) -> Result<(), Error> {
        let tps = tps.unwrap_or_else(|| self.subs.assigned_partitions().cloned().collect());
        for tp in &tps {
            self.subs.request_offset_reset(tp, Some(strategy))?;
        }
        let set: HashSet<&TopicPartition> = tps.iter().collect();
        self.drop_buffered(|t| set.contains(t));
        Ok(())
    }

    pub fn pause(&mut self, tps: &[TopicPartition]) -> Result<(), Error> {
        for tp in tps {
            self.subs.pause(tp)?;
        }
        // Java keeps buffered records of paused partitions out of poll;
        // dropping them is simpler and refetching is cheap.
        let set: HashSet<&TopicPartition> = tps.iter().collect();
        self.drop_buffered(|t| set.contains(t));
        Ok(())
    }

    pub fn mark_coordinator_unknown(&mut self, reason: &str, now: i64) {
        if let Some(g) = self.group.as_mut() {
            g.mark_coordinator_unknown(reason, now);
        }
    }

    /// Close: the LeaveGroup to send when the member had joined; the
    /// consumer is closed from here on.
    pub fn close(&mut self) -> Option<Request> {
        let leave = if self.subs.has_auto_assigned_partitions() {
            self.leave_request("the consumer is being closed")
        } else {
            None
        };
        self.closed = true;
        leave
    }

    /// Up to `max` records for the application (see `fetching.rs`).
    pub fn take_records(&mut self, max: usize) -> Vec<RecordSlice> {
        fetching::take_records(self, max)
    }

    // ----- the consumer thread's entry points -----------------------------------

    /// One round of decisions at `now`: the actions to carry out, and when
    /// the core wants to be asked again at the latest (answers and the
    /// application's commands are reasons to call it earlier).
    pub fn step(&mut self, now: i64) -> (Vec<Action>, i64) {
        self.now_ms = now;
        if self.closed {
            return (self.take_actions(), now + 100);
        }
        let mut wait_ms: i64 = 100;
        if self.group.is_some() {
            wait_ms = wait_ms.min(self.group_step(now));
        }
        self.positions_step(now);
        wait_ms = wait_ms.min(self.fetch_step(now));
        if self.cfg.enable_auto_commit && now >= self.next_auto_commit_ms {
            self.next_auto_commit_ms = now + self.cfg.auto_commit_interval_ms;
            self.maybe_auto_commit(false);
        }
        if self.cfg.enable_auto_commit {
            wait_ms = wait_ms.min((self.next_auto_commit_ms - now).max(1));
        }
        (self.take_actions(), now + wait_ms.clamp(1, 100))
    }

    /// An answer (or the transport error) to a request of ours. Fetch
    /// answers are decoded here; the shell uses [`prepare_answer`] and
    /// [`ConsumerCore::on_prepared`] to decode outside its lock instead.
    pub fn on_answer(
        &mut self,
        tag: Tag,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) -> Vec<Action> {
        let answer = prepare_answer(&self.cfg, &tag, result);
        self.on_prepared(tag, answer, now)
    }

    pub fn on_prepared(&mut self, tag: Tag, answer: Answer, now: i64) -> Vec<Action> {
        self.now_ms = now;
        match (tag, answer) {
            (
                Tag::Fetch {
                    node,
                    offsets: _,
                    names: _,
                    sent_ms,
                },
                Answer::Fetched(parts),
            ) => self.on_fetch(node, sent_ms, parts, now),
            (_, Answer::Fetched(_)) => {
                debug_assert!(false, "a decoded Fetch answer for another request");
            }
            (tag, Answer::Response(result)) => {
                let result = *result;
                match tag {
                    Tag::Fetch { node, sent_ms, .. } => self.on_fetch(
                        node,
                        sent_ms,
                        Err(Error::State {
                            detail: "undecoded Fetch answer".into(),
                        }),
                        now,
                    ),
                    Tag::Leave => {}
                    Tag::FindCoordinator => self.on_find_coordinator(result, now),
                    Tag::Heartbeat { generation } => self.on_heartbeat(generation, result, now),
                    Tag::Join => self.on_join_or_sync(group::Phase::Join, result, now),
                    Tag::Sync { generation_id } => {
                        self.on_join_or_sync(group::Phase::Sync { generation_id }, result, now)
                    }
                    Tag::OffsetFetch => self.on_offset_fetch(result, now),
                    Tag::Reset { parts } => self.on_reset(parts, result, now),
                    Tag::AutoCommit {
                        offsets,
                        pre_join,
                        generation,
                        sent_ms,
                    } => self.on_auto_commit(offsets, pre_join, generation, sent_ms, result, now),
                }
            }
        }
        self.take_actions()
    }

    /// The member lost its partitions without revoking them (generation
    /// reset, session timeout): Java `onPartitionsLost`.
    fn lose_partitions(&mut self) {
        if !self.subs.has_auto_assigned_partitions() {
            return;
        }
        let lost: Vec<TopicPartition> = self.subs.assigned_partitions().cloned().collect();
        if lost.is_empty() {
            return;
        }
        let _ = self.subs.assign_from_subscribed(Vec::new());
        self.drop_buffered(|_| true);
        self.events.push_back(RebalanceEvent::Lost(lost));
        self.prepare = Prepare::NotStarted;
        self.wake_app();
    }

    pub(in crate::consumer) fn drop_buffered(&mut self, pred: impl Fn(&TopicPartition) -> bool) {
        let mut freed = 0;
        self.buffer.retain(|c| {
            let drop = pred(&c.tp);
            if drop {
                freed += c.bytes;
            }
            !drop
        });
        self.buffered_bytes -= freed;
    }
}
