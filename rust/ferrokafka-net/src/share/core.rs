//! The share consumer's decisions as a sans-IO state machine (the design of
//! `consumer::core`): time is the `now` argument, the cluster snapshot is
//! handed in, and every effect is an [`Action`] for the shell
//! (`share::client`) to carry out. Rules: docs/semantics.md §6.
//!
//! Where a record is in its life here: `buffer` (acquired and decoded, not
//! yet returned by poll), `delivered` (returned, waiting for the
//! application's or the implicit acknowledgement), `pending` (decided,
//! waiting for the next request to its leader), then in a request's tag
//! until the answer says how the acknowledgement went.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use ferrokafka_protocol::record::DecodeOptions;

use crate::cluster::{Cluster, Node, TopicPartition};
use crate::consumer::core::coordinator_connection;
use crate::consumer::fetch::AbortedTransactionFilter;
use crate::consumer::records::{decode_fetched, RecordColumns};
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

    /// Explicit mode (docs/semantics.md §6.5): every record of the previous
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

    /// docs/semantics.md §6.6: send the decided acknowledgements now (ShareAcknowledge or the next
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

    /// Start closing (docs/semantics.md §6.7): acknowledgements go out, acquired records not yet
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
        // docs/semantics.md §6.4: a leader is asked for more only once everything it gave us was
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

    // ----- answers --------------------------------------------------------------------

    pub fn on_answer(
        &mut self,
        tag: Tag,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) -> Vec<Action> {
        match tag {
            Tag::FindCoordinator => {
                let r = match result {
                    Ok((ResponseKind::FindCoordinator(resp), _)) => {
                        rq::parse_find_coordinator(&resp, &self.cfg.group_id)
                            .map(|n| coordinator_connection(&n))
                            .map_err(|code| Error::broker(code, Some("FindCoordinator".into())))
                    }
                    Ok(_) => Err(unexpected("FindCoordinator")),
                    Err(e) => Err(e),
                };
                if let Err(e) = self.member.on_coordinator(r, now) {
                    self.report(e);
                }
            }
            Tag::Heartbeat => {
                let r = match result {
                    Ok((ResponseKind::ShareGroupHeartbeat(resp), _)) => Ok(resp),
                    Ok(_) => Err(unexpected("ShareGroupHeartbeat")),
                    Err(e) => Err(e),
                };
                if let Err(e) = self.member.on_heartbeat(r, now) {
                    self.report(e);
                }
            }
            Tag::Fetch {
                node,
                change,
                acked,
                commits,
                names,
            } => self.on_fetch(node, change, acked, commits, names, result, now),
            Tag::Acknowledge {
                node,
                acked,
                commits,
                close,
                names,
            } => self.on_acknowledge(node, acked, commits, close, names, result, now),
        }
        self.take_actions()
    }

    fn report(&mut self, e: Error) {
        log::warn!(target: "ferrokafka::share", "share consumer error: {e}");
        self.errors.push_back(e);
        self.out.push(Action::WakeApplication);
    }

    /// Fill the commits waiting on `node` with the outcome of each
    /// partition's acknowledgements.
    fn ack_results(
        &mut self,
        node: i32,
        commits: &[u64],
        acked: &[TopicPartition],
        outcome: impl Fn(&TopicPartition) -> Option<Error>,
    ) {
        if commits.is_empty() {
            for tp in acked {
                if let Some(e) = outcome(tp) {
                    // Piggybacked acknowledgements have nobody waiting.
                    log::warn!(target: "ferrokafka::share", "acknowledging {}-{} failed: {e}", tp.topic, tp.partition);
                }
            }
            return;
        }
        for id in commits {
            if let Some(w) = self.commits.get_mut(id) {
                for tp in acked {
                    w.results.insert(tp.clone(), outcome(tp));
                }
                w.nodes.remove(&node);
            }
        }
        self.out.push(Action::WakeApplication);
    }

    /// Offsets of `tp` from `node` this member holds: buffered, or returned
    /// and not yet acknowledged.
    fn held(&self, node: i32, tp: &TopicPartition) -> BTreeSet<i64> {
        let mut out: BTreeSet<i64> = self
            .delivered
            .get(&(node, tp.clone()))
            .map(|d| d.keys().copied().collect())
            .unwrap_or_default();
        for b in self.buffer.iter().filter(|b| b.node == node && &b.tp == tp) {
            out.extend(b.rows.iter().map(|&r| b.cols.offsets[r]));
        }
        out
    }

    /// A request failed as a whole: its session is reset (or backed off).
    fn session_failed(&mut self, node: i32, e: &Error, now: i64) {
        let session_gone = matches!(e.code(), c if c == SHARE_SESSION_NOT_FOUND || c == INVALID_SHARE_SESSION_EPOCH);
        let retry = if session_gone {
            now
        } else {
            now + self.cfg.retry_backoff_ms
        };
        if let Some(s) = self.sessions.get_mut(&node) {
            s.reset(retry);
        }
        if !session_gone {
            self.out.push(Action::MetadataUpdate);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_fetch(
        &mut self,
        node: i32,
        change: SessionChange,
        acked: Vec<TopicPartition>,
        commits: Vec<u64>,
        names: HashMap<[u8; 16], String>,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let resp = match result {
            Ok((ResponseKind::ShareFetch(r), _)) if r.error_code == codes::NONE => r,
            other => {
                let e = match other {
                    Ok((ResponseKind::ShareFetch(r), _)) => Error::broker(
                        r.error_code,
                        r.error_message
                            .map(|m| m.to_string())
                            .or_else(|| Some("ShareFetch".into())),
                    ),
                    Ok(_) => unexpected("ShareFetch"),
                    Err(e) => e,
                };
                log::debug!(target: "ferrokafka::share", "ShareFetch to node {node} failed: {e}");
                self.ack_results(node, &commits, &acked, |_| Some(e.clone()));
                if is_fatal(&e) {
                    self.report(e.clone());
                }
                self.session_failed(node, &e, now);
                return;
            }
        };
        if let Some(s) = self.sessions.get_mut(&node) {
            s.on_success(&change);
        }
        let mut ack_codes: BTreeMap<TopicPartition, i16> = BTreeMap::new();
        let opts = DecodeOptions {
            verify_crc: self.cfg.check_crcs,
            ..DecodeOptions::default()
        };
        let mut got = false;
        let mut stale_routes = false;
        for t in resp.responses {
            let Some(name) = names.get(t.topic_id.as_bytes()) else {
                continue;
            };
            for p in t.partitions {
                let tp = TopicPartition::new(name.as_str(), p.partition_index);
                ack_codes.insert(tp.clone(), p.acknowledge_error_code);
                if p.error_code != codes::NONE {
                    log::debug!(target: "ferrokafka::share", "ShareFetch {}-{}: error code {}", tp.topic, tp.partition, p.error_code);
                    if matches!(p.error_code, codes::TOPIC_AUTHORIZATION_FAILED) {
                        self.report(Error::broker(
                            p.error_code,
                            Some(format!("ShareFetch {}-{}", tp.topic, tp.partition)),
                        ));
                    } else {
                        stale_routes = true;
                    }
                    continue;
                }
                if p.acquired_records.is_empty() {
                    continue;
                }
                let ranges: Vec<(i64, i64, i16)> = p
                    .acquired_records
                    .iter()
                    .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
                    .collect();
                log::debug!(target: "ferrokafka::share", "node {node} {}-{}: acquired {ranges:?}", tp.topic, tp.partition);
                let blob = p.records.unwrap_or_default();
                match acquired_rows(&blob, &ranges, opts) {
                    Ok((cols, mut rows, mut counts, gaps)) => {
                        // A record we still hold (buffered or returned and not
                        // yet acknowledged) is not handed out twice, should a
                        // broker list it again.
                        let held = self.held(node, &tp);
                        if !held.is_empty() {
                            let keep: Vec<bool> = rows
                                .iter()
                                .map(|&r| !held.contains(&cols.offsets[r]))
                                .collect();
                            let mut k = keep.iter();
                            rows.retain(|_| *k.next().unwrap_or(&true));
                            let mut k = keep.iter();
                            counts.retain(|_| *k.next().unwrap_or(&true));
                        }
                        if !gaps.is_empty() {
                            let a = self
                                .pending
                                .entry(node)
                                .or_default()
                                .entry(tp.clone())
                                .or_default();
                            for g in gaps {
                                a.insert(g, AckType::Gap);
                            }
                        }
                        if !rows.is_empty() {
                            self.buffer.push_back(ShareBatch {
                                tp,
                                node,
                                cols: Arc::new(cols),
                                rows,
                                delivery_counts: counts,
                            });
                            got = true;
                        }
                    }
                    Err(e) => {
                        // Undecodable: the records go back to the group (a
                        // healthy copy may reach another member) and the
                        // application hears why.
                        let a = self
                            .pending
                            .entry(node)
                            .or_default()
                            .entry(tp.clone())
                            .or_default();
                        for (first, last, _) in &ranges {
                            for o in *first..=*last {
                                a.insert(o, AckType::Release);
                            }
                        }
                        self.report(e);
                    }
                }
            }
        }
        self.ack_results(node, &commits, &acked, |tp| {
            match ack_codes.get(tp).copied().unwrap_or(codes::NONE) {
                codes::NONE => None,
                c => Some(Error::broker(
                    c,
                    Some(format!("acknowledging {}-{}", tp.topic, tp.partition)),
                )),
            }
        });
        if stale_routes {
            self.out.push(Action::MetadataUpdate);
        }
        if !got {
            // Nothing acquired: the broker held the fetch up to
            // fetch_max_wait_ms already, or (a broker that does not hold
            // share fetches) answered at once; the next fetch is paced so
            // such a broker is not asked in a tight loop.
            if let Some(s) = self.sessions.get_mut(&node) {
                s.retry_at_ms = now + EMPTY_FETCH_PACE_MS.min(self.cfg.fetch_max_wait_ms as i64);
            }
        }
        if got {
            self.out.push(Action::WakeApplication);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_acknowledge(
        &mut self,
        node: i32,
        acked: Vec<TopicPartition>,
        commits: Vec<u64>,
        close: bool,
        names: HashMap<[u8; 16], String>,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let resp = match result {
            Ok((ResponseKind::ShareAcknowledge(r), _)) if r.error_code == codes::NONE => r,
            other => {
                let e = match other {
                    Ok((ResponseKind::ShareAcknowledge(r), _)) => Error::broker(
                        r.error_code,
                        r.error_message
                            .map(|m| m.to_string())
                            .or_else(|| Some("ShareAcknowledge".into())),
                    ),
                    Ok(_) => unexpected("ShareAcknowledge"),
                    Err(e) => e,
                };
                self.ack_results(node, &commits, &acked, |_| Some(e.clone()));
                if close {
                    if let Some(s) = self.sessions.get_mut(&node) {
                        s.in_flight = false;
                    }
                } else {
                    self.session_failed(node, &e, now);
                }
                return;
            }
        };
        if let Some(s) = self.sessions.get_mut(&node) {
            if close {
                s.in_flight = false;
            } else {
                s.on_success(&SessionChange::default());
            }
        }
        let mut codes_by_tp: BTreeMap<TopicPartition, i16> = BTreeMap::new();
        for t in resp.responses {
            let Some(name) = names.get(t.topic_id.as_bytes()) else {
                continue;
            };
            for p in t.partitions {
                codes_by_tp.insert(
                    TopicPartition::new(name.as_str(), p.partition_index),
                    p.error_code,
                );
            }
        }
        self.ack_results(node, &commits, &acked, |tp| {
            match codes_by_tp.get(tp).copied().unwrap_or(codes::NONE) {
                codes::NONE => None,
                c => Some(Error::broker(
                    c,
                    Some(format!("acknowledging {}-{}", tp.topic, tp.partition)),
                )),
            }
        });
    }
}

/// Least time between two ShareFetch to a leader whose last answer was empty.
const EMPTY_FETCH_PACE_MS: i64 = 100;

pub const SHARE_SESSION_NOT_FOUND: i16 = 122;
pub const INVALID_SHARE_SESSION_EPOCH: i16 = 123;

fn unexpected(what: &str) -> Error {
    Error::State {
        detail: format!("unexpected answer to {what}"),
    }
}

/// Errors the application must hear about (retrying will not help).
fn is_fatal(e: &Error) -> bool {
    matches!(
        e.code(),
        codes::GROUP_AUTHORIZATION_FAILED
            | codes::TOPIC_AUTHORIZATION_FAILED
            | codes::UNSUPPORTED_VERSION
            | codes::INVALID_GROUP_ID
    ) || matches!(e, Error::UnsupportedVersion { .. })
}

/// Decode a partition's blob and keep only the records inside the acquired
/// ranges (docs/semantics.md §6.3), each with its delivery count. Acquired offsets with no record
/// (control records, compacted holes) are returned as gaps.
#[allow(clippy::type_complexity)]
pub fn acquired_rows(
    blob: &[u8],
    ranges: &[(i64, i64, i16)],
    opts: DecodeOptions,
) -> Result<(RecordColumns, Vec<usize>, Vec<i16>, Vec<i64>), Error> {
    let first = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let mut filter = AbortedTransactionFilter::new(false, Vec::new());
    let decoded = decode_fetched(blob, first, opts, &mut filter)?;
    let cols = decoded.records;
    let mut rows = Vec::new();
    let mut counts = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, &off) in cols.offsets.iter().enumerate() {
        if let Some(r) = ranges.iter().find(|r| r.0 <= off && off <= r.1) {
            if seen.insert(off) {
                rows.push(i);
                counts.push(r.2);
            }
        }
    }
    let mut gaps = Vec::new();
    for (a, b, _) in ranges {
        for o in *a..=*b {
            if !seen.contains(&o) {
                gaps.push(o);
            }
        }
    }
    Ok((cols, rows, counts, gaps))
}
