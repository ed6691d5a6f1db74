//! The share consumer's decisions as a sans-IO state machine (the design of
//! `consumer::core`): time is the `now` argument, the cluster snapshot is
//! handed in, and every effect is an [`Action`] for the shell
//! (`share::client`) to carry out. Rules: docs/semantics.md §11.
//!
//! Where a record is in its life here: `buffer` (acquired and decoded, not
//! yet returned by poll), `delivered` (returned, waiting for the
//! application's or the implicit acknowledgement), `pending` (decided,
//! waiting for the next request to its leader), then in a request's tag
//! until the answer says how the acknowledgement went. Answers are applied
//! in `answers.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind};

use crate::cluster::{Cluster, Node, TopicPartition};
use crate::consumer::pool::ColumnPool;
use crate::consumer::records::RecordColumns;
use crate::consumer::requests as rq;
use crate::driver::Body;
use crate::error::Error;
use crate::share::acks::AckType;
use crate::share::config::{AckMode, ShareConfig};
use crate::share::membership::{MemberSend, ShareMembership};
use crate::share::session::{Acks, SessionChange, ShareSession};

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    Node(Node),
    /// FindCoordinator: any broker (the shell picks the least loaded).
    LeastLoaded,
}

/// A request for the shell; its answer comes back to
/// [`ShareCore::on_answer`] with `tag`.
pub struct Request {
    pub dest: Dest,
    pub body: Body,
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

/// What a request was for.
#[derive(Debug)]
pub enum Tag {
    FindCoordinator,
    Heartbeat,
    /// `acked`: the partitions whose acknowledgements it carries;
    /// `commits`: the commits waiting for them.
    Fetch {
        node: i32,
        change: SessionChange,
        acked: Vec<TopicPartition>,
        commits: Vec<u64>,
        names: HashMap<[u8; 16], String>,
    },
    Acknowledge {
        node: i32,
        acked: Vec<TopicPartition>,
        commits: Vec<u64>,
        close: bool,
        names: HashMap<[u8; 16], String>,
    },
}

#[derive(Debug)]
pub enum Action {
    Send(Box<Request>),
    /// Records, errors or commit results wait for the application.
    WakeApplication,
    MetadataUpdate,
    /// The topics the metadata keeps.
    MetadataTopics(Vec<String>),
}

/// Acquired records of one partition from one leader: rows of `cols`.
#[derive(Debug, Clone)]
pub struct ShareBatch {
    pub tp: TopicPartition,
    pub node: i32,
    pub cols: Arc<RecordColumns>,
    pub rows: Vec<usize>,
    pub delivery_counts: Vec<i16>,
}

/// Per-partition outcome of a commit: None = acknowledged.
pub type CommitResults = BTreeMap<TopicPartition, Option<Error>>;

#[derive(Debug, Default)]
struct CommitWait {
    /// Leaders whose answer is still missing.
    nodes: BTreeSet<i32>,
    results: CommitResults,
}

pub struct ShareCore {
    pub cfg: ShareConfig,
    cluster: Arc<Cluster>,
    pub member: ShareMembership,
    sessions: BTreeMap<i32, ShareSession>,
    pub buffer: VecDeque<ShareBatch>,
    /// (leader, partition) -> offset -> the application's decision.
    delivered: BTreeMap<(i32, TopicPartition), BTreeMap<i64, Option<AckType>>>,
    /// leader -> acknowledgements for its next request.
    pending: BTreeMap<i32, Acks>,
    commits: BTreeMap<u64, CommitWait>,
    next_commit: u64,
    /// leader -> commits its next acknowledging request completes.
    commit_nodes: BTreeMap<i32, Vec<u64>>,
    pub errors: VecDeque<Error>,
    pub closing: bool,
    pub closed: bool,
    metadata_topics: Vec<String>,
    /// When the metadata was last asked to name assigned topic ids.
    names_asked_ms: i64,
    out: Vec<Action>,
    /// Buffers of acquired records the application let go of, for the
    /// next ones (docs/semantics.md §8.7).
    pool: Arc<ColumnPool>,
}

fn names_of(cluster: &Cluster) -> HashMap<[u8; 16], String> {
    cluster
        .topics()
        .into_iter()
        .filter_map(|t| cluster.topic_id(t).map(|id| (id, t.to_string())))
        .collect()
}

impl ShareCore {
    pub fn new(cfg: ShareConfig) -> Self {
        let member = ShareMembership::new(
            cfg.group_id.clone(),
            cfg.client_rack.clone(),
            cfg.retry_backoff_ms,
        );
        let pool = ColumnPool::for_fetch_sizes(cfg.max_partition_fetch_bytes, cfg.fetch_max_bytes);
        ShareCore {
            cfg,
            cluster: Arc::new(Cluster::empty()),
            member,
            sessions: BTreeMap::new(),
            buffer: VecDeque::new(),
            delivered: BTreeMap::new(),
            pending: BTreeMap::new(),
            commits: BTreeMap::new(),
            next_commit: 1,
            commit_nodes: BTreeMap::new(),
            errors: VecDeque::new(),
            closing: false,
            closed: false,
            metadata_topics: Vec::new(),
            names_asked_ms: i64::MIN / 2,
            out: Vec::new(),
            pool,
        }
    }

    pub fn set_cluster(&mut self, cluster: Arc<Cluster>) {
        self.cluster = cluster;
    }

    pub fn take_actions(&mut self) -> Vec<Action> {
        std::mem::take(&mut self.out)
    }

    fn send(&mut self, dest: Dest, body: Body, tag: Tag) {
        self.out
            .push(Action::Send(Box::new(Request { dest, body, tag })));
    }

    // ----- the application's commands -----------------------------------------------

    pub fn subscribe(&mut self, topics: Vec<String>) -> Result<(), Error> {
        if let Some(t) = topics.iter().find(|t| t.is_empty()) {
            return Err(Error::Config {
                key: "topics".into(),
                detail: format!("invalid topic name {t:?}"),
            });
        }
        if topics.is_empty() {
            self.unsubscribe();
            return Ok(());
        }
        self.member.subscribe(topics.into_iter().collect());
        Ok(())
    }

    /// Leave the group; records acquired and not yet returned are released.
    pub fn unsubscribe(&mut self) {
        self.flush_delivered(true);
        self.release_buffer();
        self.member.leave();
    }

    /// Decisions on returned records become pending acknowledgements.
    /// `implicit_too`: undecided records are accepted (implicit mode) or,
    /// in explicit mode, left to the broker (released when the session
    /// closes or their lock times out).
    fn flush_delivered(&mut self, finishing: bool) -> bool {
        let implicit = self.cfg.ack_mode == AckMode::Implicit;
        let mut any = false;
        for ((node, tp), offs) in std::mem::take(&mut self.delivered) {
            for (off, d) in offs {
                let t = match d {
                    Some(t) => t,
                    None if implicit => AckType::Accept,
                    None => {
                        debug_assert!(finishing);
                        continue;
                    }
                };
                self.pending
                    .entry(node)
                    .or_default()
                    .entry(tp.clone())
                    .or_default()
                    .insert(off, t);
                any = true;
            }
        }
        any
    }

    /// Records acquired but never returned go back to the group.
    fn release_buffer(&mut self) {
        for b in std::mem::take(&mut self.buffer) {
            let acks = self
                .pending
                .entry(b.node)
                .or_default()
                .entry(b.tp.clone())
                .or_default();
            for &r in &b.rows {
                acks.insert(b.cols.offsets[r], AckType::Release);
            }
        }
    }

    /// Explicit mode (docs/semantics.md §11.5): every record of the previous
    /// poll must have been acknowledged (Java's IllegalStateException otherwise).
    pub fn check_acknowledged(&self) -> Result<(), Error> {
        if self.cfg.ack_mode == AckMode::Explicit {
            let missing = self
                .delivered
                .iter()
                .flat_map(|((_, tp), offs)| offs.iter().map(move |(o, d)| (tp, o, d)))
                .find(|(_, _, d)| d.is_none());
            if let Some((tp, off, _)) = missing {
                return Err(Error::State {
                    detail: format!(
                        "share_acknowledgement_mode is 'explicit' and record {}-{} at offset {} \
                         from the previous poll was not acknowledged; acknowledge every record \
                         before polling again",
                        tp.topic, tp.partition, off
                    ),
                });
            }
        }
        Ok(())
    }

    /// The start of a poll: the previous poll's records are acknowledged
    /// (implicitly or as decided). True when the shell has work to send.
    pub fn begin_poll(&mut self) -> Result<bool, Error> {
        self.check_acknowledged()?;
        Ok(self.flush_delivered(false))
    }

    /// Up to `max` buffered records; they become delivered (awaiting
    /// acknowledgement).
    pub fn take_records(&mut self, max: usize) -> Vec<ShareBatch> {
        let mut out = Vec::new();
        let mut left = max;
        while left > 0 {
            let Some(mut b) = self.buffer.pop_front() else {
                break;
            };
            if b.rows.len() > left {
                let rest = ShareBatch {
                    tp: b.tp.clone(),
                    node: b.node,
                    cols: b.cols.clone(),
                    rows: b.rows.split_off(left),
                    delivery_counts: b.delivery_counts.split_off(left),
                };
                self.buffer.push_front(rest);
            }
            left -= b.rows.len();
            let d = self.delivered.entry((b.node, b.tp.clone())).or_default();
            for &r in &b.rows {
                d.insert(b.cols.offsets[r], None);
            }
            out.push(b);
        }
        out
    }

    /// The application's decision on one returned record.
    pub fn acknowledge(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
        t: AckType,
    ) -> Result<(), Error> {
        if self.cfg.ack_mode != AckMode::Explicit {
            return Err(Error::State {
                detail: "acknowledge() needs share_acknowledgement_mode='explicit' \
                         (in implicit mode every returned record is accepted at the next poll or commit)"
                    .into(),
            });
        }
        for ((_, p), offs) in self.delivered.iter_mut() {
            if p == tp {
                if let Some(d) = offs.get_mut(&offset) {
                    *d = Some(t);
                    return Ok(());
                }
            }
        }
        Err(Error::State {
            detail: format!(
                "record {}-{} at offset {offset} is not waiting for acknowledgement \
                 (not returned by the last poll, or already committed)",
                tp.topic, tp.partition
            ),
        })
    }

    /// docs/semantics.md §11.6: send the decided acknowledgements now (ShareAcknowledge or the next
    /// ShareFetch); the returned id's results come from [`take_commit`].
    pub fn commit(&mut self) -> u64 {
        self.flush_delivered(false);
        let id = self.next_commit;
        self.next_commit += 1;
        let mut w = CommitWait::default();
        for (node, acks) in &self.pending {
            if acks.is_empty() {
                continue;
            }
            w.nodes.insert(*node);
            self.commit_nodes.entry(*node).or_default().push(id);
        }
        self.commits.insert(id, w);
        id
    }

    /// The results of commit `id` once every leader answered.
    pub fn take_commit(&mut self, id: u64) -> Option<CommitResults> {
        if self.commits.get(&id)?.nodes.is_empty() {
            return self.commits.remove(&id).map(|w| w.results);
        }
        None
    }

    /// Forget a commit nobody waits for any more (commit_async).
    pub fn forget_commit(&mut self, id: u64) {
        if let Some(w) = self.commits.get(&id) {
            if w.nodes.is_empty() {
                self.commits.remove(&id);
            }
        }
    }

    /// Start closing (docs/semantics.md §11.7): acknowledgements go out, acquired records not yet
    /// returned are released, every share session is closed (epoch -1) and
    /// the member leaves the group.
    pub fn begin_close(&mut self) {
        if self.closing {
            return;
        }
        self.flush_delivered(true);
        self.release_buffer();
        self.closing = true;
        self.member.leave();
    }

    /// Closing finished: sessions closed and the leave answered (or nothing
    /// to leave).
    pub fn close_done(&self) -> bool {
        self.closing
            && self
                .sessions
                .values()
                .all(|s| !s.in_flight && (s.closed || s.epoch == 0))
            && (self.member.left || self.member.coordinator.is_none())
    }

    // ----- deciding what to send -----------------------------------------------------

    /// Decide what to send at `now`; returns the actions and when to decide
    /// again at the latest.
    pub fn step(&mut self, now: i64) -> (Vec<Action>, i64) {
        let mut wake_at = now + 1000;
        self.metadata_wanted();
        match self.member.poll(now) {
            Some(MemberSend::FindCoordinator) => {
                let gid = self.cfg.group_id.clone();
                let body = Body::Versioned {
                    api_key: ApiKey::FindCoordinator as i16,
                    max_version: None,
                    build: Box::new(move |v| {
                        RequestKind::FindCoordinator(rq::find_coordinator(&gid, 0, v))
                    }),
                };
                self.send(Dest::LeastLoaded, body, Tag::FindCoordinator);
            }
            Some(MemberSend::Heartbeat(node, req)) => {
                let body = Body::Ready(RequestKind::ShareGroupHeartbeat(*req));
                self.send(Dest::Node(node), body, Tag::Heartbeat);
            }
            None => {}
        }
        wake_at = wake_at.min(self.member.wake_at());
        if self.member.unnamed_topics(&self.cluster)
            && now - self.names_asked_ms >= self.cfg.retry_backoff_ms
        {
            self.names_asked_ms = now;
            self.out.push(Action::MetadataUpdate);
            wake_at = wake_at.min(now + self.cfg.retry_backoff_ms);
        }
        self.step_sessions(now, &mut wake_at);
        (self.take_actions(), wake_at)
    }

    fn metadata_wanted(&mut self) {
        let mut topics: BTreeSet<String> = self.member.subscription().clone();
        topics.extend(
            self.member
                .assignment(&self.cluster)
                .into_iter()
                .map(|tp| tp.topic.to_string()),
        );
        let topics: Vec<String> = topics.into_iter().collect();
        if topics != self.metadata_topics {
            self.metadata_topics = topics.clone();
            self.out.push(Action::MetadataTopics(topics));
        }
    }

    fn step_sessions(&mut self, now: i64, wake_at: &mut i64) {
        // The partitions each leader should serve us.
        let mut wanted: BTreeMap<i32, BTreeSet<TopicPartition>> = BTreeMap::new();
        if !self.closing {
            let mut leaderless = false;
            for tp in self.member.assignment(&self.cluster) {
                match self.cluster.leader_for(&tp.topic, tp.partition) {
                    Some(n) => {
                        let n = n.clone();
                        self.sessions
                            .entry(n.id)
                            .or_insert_with(|| ShareSession::new(n.clone()));
                        wanted.entry(n.id).or_default().insert(tp);
                    }
                    None => leaderless = true,
                }
            }
            if leaderless {
                self.out.push(Action::MetadataUpdate);
            }
        }
        // docs/semantics.md §11.4: a leader is asked for more only once everything it gave us was
        // returned by poll and the application polled again (or committed):
        // the acknowledgements then ride on that ShareFetch, as Java's share
        // consumer does, and the broker never sees a fetch while records it
        // handed out are still undecided.
        let buffered: BTreeSet<i32> = self
            .buffer
            .iter()
            .map(|b| b.node)
            .chain(self.delivered.keys().map(|(n, _)| *n))
            .collect();
        let ids = self.cluster.clone();
        let id_of = |t: &str| ids.topic_id(t);
        let nodes: Vec<i32> = self.sessions.keys().copied().collect();
        for node in nodes {
            let sess = &self.sessions[&node];
            if sess.in_flight || sess.closed {
                continue;
            }
            if now < sess.retry_at_ms {
                *wake_at = (*wake_at).min(sess.retry_at_ms);
                continue;
            }
            let opening = sess.epoch == 0;
            if opening {
                // Acknowledgements of records acquired in a session that is
                // gone cannot be sent: the broker releases those records when
                // their locks expire.
                if let Some(lost) = self.pending.remove(&node) {
                    let err = Error::State {
                        detail: format!("the share session with node {node} was lost before the acknowledgements were sent"),
                    };
                    let tps: Vec<TopicPartition> = lost.keys().cloned().collect();
                    let commits = self.commit_nodes.remove(&node).unwrap_or_default();
                    self.ack_results(node, &commits, &tps, |_| Some(err.clone()));
                }
            }
            let acks = self.pending.remove(&node).unwrap_or_default();
            let commits = if acks.is_empty() {
                Vec::new()
            } else {
                self.commit_nodes.remove(&node).unwrap_or_default()
            };
            let acked: Vec<TopicPartition> = acks.keys().cloned().collect();
            if !acks.is_empty() {
                log::debug!(target: "ferrokafka::share", "node {node} epoch {}: acknowledging {:?}", self.sessions[&node].epoch,
                    acks.iter().map(|(tp, a)| (tp.partition, crate::share::acks::batches(a))).collect::<Vec<_>>());
            }
            let names = names_of(&self.cluster);
            let sess = &self.sessions[&node];
            let node_dest = sess.node.clone();
            if self.closing {
                if opening && acks.is_empty() {
                    // Never opened (or already lost): nothing to close.
                    if let Some(s) = self.sessions.get_mut(&node) {
                        s.closed = true;
                    }
                    continue;
                }
                let req = sess.acknowledge_request(
                    &self.cfg,
                    &self.member.member_id,
                    &acks,
                    true,
                    &id_of,
                );
                let s = self.sessions.get_mut(&node).expect("session");
                s.in_flight = true;
                s.closed = true;
                self.send(
                    Dest::Node(node_dest),
                    Body::Ready(RequestKind::ShareAcknowledge(req)),
                    Tag::Acknowledge {
                        node,
                        acked,
                        commits,
                        close: true,
                        names,
                    },
                );
                continue;
            }
            let want = wanted.get(&node).cloned().unwrap_or_default();
            let fetch = !want.is_empty() && !buffered.contains(&node);
            if fetch {
                let (req, change) =
                    sess.fetch_request(&self.cfg, &self.member.member_id, &want, &acks, &id_of);
                self.sessions.get_mut(&node).expect("session").in_flight = true;
                self.send(
                    Dest::Node(node_dest),
                    Body::Ready(RequestKind::ShareFetch(req)),
                    Tag::Fetch {
                        node,
                        change,
                        acked,
                        commits,
                        names,
                    },
                );
            } else if !acks.is_empty() && !opening {
                let req = sess.acknowledge_request(
                    &self.cfg,
                    &self.member.member_id,
                    &acks,
                    false,
                    &id_of,
                );
                self.sessions.get_mut(&node).expect("session").in_flight = true;
                self.send(
                    Dest::Node(node_dest),
                    Body::Ready(RequestKind::ShareAcknowledge(req)),
                    Tag::Acknowledge {
                        node,
                        acked,
                        commits,
                        close: false,
                        names,
                    },
                );
            }
        }
    }
}

/// Least time between two ShareFetch to a leader whose last answer was empty.
const EMPTY_FETCH_PACE_MS: i64 = 100;

pub const SHARE_SESSION_NOT_FOUND: i16 = 122;
pub const INVALID_SHARE_SESSION_EPOCH: i16 = 123;

mod answers;
pub use answers::acquired_rows;
