//! Group membership I/O decisions: coordinator discovery, the pre-join work
//! (commit, eager revocation), JoinGroup / SyncGroup, the leader's
//! assignment, heartbeats, leaving. The reaction tables live in
//! `coordinator.rs`; this file turns reactions into requests and events.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use super::{coordinator_connection, ConsumerCore, Dest, Request, Tag};
use crate::cluster::TopicPartition;
use crate::consumer::assignor::{self, MemberSubscription};
use crate::consumer::config::RebalanceEvent;
use crate::consumer::coordinator::{Action as GroupAction, Generation, Reaction};
use crate::consumer::group::MemberState;
use crate::consumer::protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use crate::consumer::requests as rq;
use crate::driver::{Body, RequestOpts};
use crate::error::Error;

/// Where the pre-join work of a rebalance is (Java `onJoinPrepare`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Prepare {
    NotStarted,
    Committing,
    AwaitUser,
    Done,
}

pub(super) struct JoinOutcome {
    protocol: String,
    members: Vec<MemberSubscription>,
    generation_id: i32,
}

/// Which half of a rebalance an answer belongs to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Phase {
    Join,
    Sync { generation_id: i32 },
}

impl Phase {
    fn doing(self) -> &'static str {
        match self {
            Phase::Join => "joining the group",
            Phase::Sync { .. } => "syncing the group",
        }
    }
}

/// How long a leader waits for metadata of topics only other members
/// subscribe to before assigning without them.
const LEADER_METADATA_WAIT_MS: i64 = 5000;

impl ConsumerCore {
    /// Group decisions at `now`; returns how long nothing is due (ms).
    pub(super) fn group_step(&mut self, now: i64) -> i64 {
        let subscribed = self.subs.has_auto_assigned_partitions();
        // Pattern subscriptions follow every metadata update. A change
        // rejoins in any state: a join under way carries the old topics.
        let cluster = self.cluster.clone();
        if self.subs.match_pattern(self.metadata_version, || cluster) {
            if let Some(g) = self.group.as_mut() {
                g.request_rejoin("the topics matching the subscribed pattern changed");
            }
        }
        // Pattern / partition-count changes of subscribed topics mean a rejoin.
        if subscribed && self.group().state() == MemberState::Stable {
            let snapshot = self.partition_counts();
            if snapshot != self.joined_snapshot && snapshot.values().all(|n| *n > 0) {
                self.group_mut()
                    .request_rejoin("the partitions of a subscribed topic changed");
            }
        }
        // A member without a subscription only needs the coordinator (commits
        // and offset lookups of manually assigned partitions).
        if !subscribed {
            let g = self.group_mut();
            if g.coordinator_unknown() {
                if let GroupAction::FindCoordinator = g.next_action(now) {
                    self.send_find_coordinator();
                }
            }
            return 100;
        }
        // Leader waiting for metadata of every member's topics before assigning.
        if self.join.is_some() {
            return self.leader_assign(now);
        }
        // Before (re)joining: commit, then let the application revoke (eager).
        let g = self.group();
        let needs_join = g.rejoin_needed()
            && !g.coordinator_unknown()
            && !matches!(
                g.state(),
                MemberState::PreparingRebalance | MemberState::CompletingRebalance
            );
        if needs_join && !self.subs.pattern_ready() {
            // A new pattern waits for its first match against metadata
            // fetched after it: no join with an older pattern's topics.
            return 50;
        }
        if needs_join && g.fatal().is_none() {
            if self.prepare == Prepare::NotStarted {
                self.prepare = Prepare::Committing;
                if self.cfg.enable_auto_commit && self.maybe_auto_commit(true) {
                    // The commit's answer starts the revocation.
                    return 10;
                }
                self.prepare = Prepare::AwaitUser;
                self.start_revocation();
            }
            match self.prepare {
                Prepare::Committing => return 10,
                Prepare::AwaitUser if self.events_unacked || !self.events.is_empty() => {
                    // The application has not run (or acknowledged) its
                    // callbacks yet: the join waits, so a commit in
                    // `on_revoke` still carries the old generation. The
                    // session stays alive meanwhile. (Not `next_action`:
                    // with a rejoin pending it would answer Join.)
                    let g = self.group_mut();
                    if g.state() == MemberState::Stable && g.heartbeat.should_heartbeat(now) {
                        g.heartbeat.sent_heartbeat(now);
                        let generation = g.generation().clone();
                        self.send_heartbeat(generation);
                    }
                    return 10;
                }
                Prepare::AwaitUser => self.prepare = Prepare::Done,
                Prepare::NotStarted | Prepare::Done => {}
            }
        }
        match self.group_mut().next_action(now) {
            GroupAction::FindCoordinator => {
                self.send_find_coordinator();
                10
            }
            GroupAction::Join { member_id } => {
                self.send_join(member_id);
                100
            }
            GroupAction::Heartbeat { generation } => {
                self.send_heartbeat(generation);
                self.group().heartbeat.time_to_next_heartbeat(now).max(1)
            }
            GroupAction::LeaveForPollTimeout => {
                // Java: the member leaves so the group can move on; the next
                // poll() rejoins.
                let leave = self.leave_request("max_poll_interval_ms passed without a poll");
                self.lose_partitions();
                if let Some(r) = leave {
                    self.out.push(super::Action::Send(Box::new(r)));
                }
                self.errors.push_back(Error::State {
                    detail: "the consumer left its group because poll() was not called within max_poll_interval_ms".into(),
                });
                self.wake_app();
                100
            }
            GroupAction::Wait(ms) => ms,
        }
    }

    fn group(&self) -> &crate::consumer::coordinator::GroupMembership {
        self.group.as_ref().expect("only called for a group member")
    }

    fn group_mut(&mut self) -> &mut crate::consumer::coordinator::GroupMembership {
        self.group.as_mut().expect("only called for a group member")
    }

    fn partition_counts(&self) -> BTreeMap<String, usize> {
        self.subs
            .subscription()
            .iter()
            .map(|t| {
                (
                    t.clone(),
                    self.cluster.partition_count_for_topic(t).unwrap_or(0),
                )
            })
            .collect()
    }

    pub(super) fn send_find_coordinator(&mut self) {
        let gid = self.group().group_id.clone();
        let body = Body::Versioned {
            api_key: ApiKey::FindCoordinator as i16,
            max_version: None,
            build: Box::new(move |v| {
                RequestKind::FindCoordinator(rq::find_coordinator(&gid, 0, v))
            }),
        };
        self.send(
            Dest::LeastLoaded,
            body,
            RequestOpts::default(),
            Tag::FindCoordinator,
        );
    }

    /// JoinGroup and SyncGroup wait for the whole group on the broker: Java
    /// gives them the rebalance timeout plus a margin.
    fn rebalance_opts(&self) -> RequestOpts {
        RequestOpts {
            request_timeout_ms: Some(
                self.cfg
                    .request_timeout_ms
                    .max(self.group().rebalance_timeout_ms + 5000),
            ),
            max_version: None,
        }
    }

    fn send_join(&mut self, member_id: String) {
        let topics: Vec<String> = self.subs.subscription().iter().cloned().collect();
        let owned: Vec<TopicPartition> = self.subs.assigned_partitions().cloned().collect();
        let g = self.group();
        let generation_id = g.generation().generation_id;
        let rack = self.cfg.client_rack.clone();
        let mut protocols = Vec::new();
        for name in &self.cfg.assignors {
            // v1+ carries owned partitions (cooperative); v3 the rack.
            match encode_subscription(&topics, &owned, generation_id, rack.as_deref(), None, 3) {
                Ok(meta) => protocols.push((name.clone(), meta)),
                Err(e) => {
                    self.errors.push_back(e.into());
                    self.wake_app();
                    return;
                }
            }
        }
        let p = (
            g.group_id.clone(),
            self.cfg.session_timeout_ms as i32,
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
        let opts = self.rebalance_opts();
        self.send(Dest::Node(node), body, opts, Tag::Join);
    }

    pub(super) fn send_heartbeat(&mut self, generation: Generation) {
        let g = self.group();
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
        self.send(
            Dest::Node(node),
            body,
            RequestOpts::default(),
            Tag::Heartbeat { generation: sent },
        );
    }

    fn send_sync(&mut self, generation_id: i32, assignments: BTreeMap<String, Bytes>) {
        let g = self.group();
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
        let opts = self.rebalance_opts();
        self.send(Dest::Node(node), body, opts, Tag::Sync { generation_id });
    }

    /// Eager protocol: everything owned is revoked before the join. The
    /// application gets `on_revoke` in its next poll; the join waits for its
    /// acknowledgement (`Prepare::AwaitUser`).
    pub(super) fn start_revocation(&mut self) {
        if self.cfg.cooperative() {
            return;
        }
        let owned: Vec<TopicPartition> = self.subs.assigned_partitions().cloned().collect();
        if owned.is_empty() {
            return;
        }
        let _ = self.subs.assign_from_subscribed(Vec::new());
        self.drop_buffered(|_| true);
        self.events.push_back(RebalanceEvent::Revoked(owned));
        self.wake_app();
    }

    /// The leader's assignment once metadata covers every member's topics
    /// (bounded wait: topics still unknown after 5 s get no partitions).
    fn leader_assign(&mut self, now: i64) -> i64 {
        let join = self.join.as_ref().expect("join");
        let topics: BTreeSet<String> = join
            .members
            .iter()
            .flat_map(|m| m.topics.iter().cloned())
            .collect();
        let missing = topics
            .iter()
            .any(|t| self.cluster.partition_count_for_topic(t).unwrap_or(0) == 0);
        if missing && now < self.join_deadline_ms {
            let ts: Vec<String> = topics.iter().cloned().collect();
            let actions = self.want_topics(ts);
            self.out.extend(actions);
            self.out.push(super::Action::MetadataUpdateForNewTopics);
            return 20;
        }
        let join = self.join.take().expect("join");
        let counts: HashMap<String, i32> = topics
            .iter()
            .filter_map(|t| {
                self.cluster
                    .partition_count_for_topic(t)
                    .map(|n| (t.clone(), n as i32))
            })
            .collect();
        let assignment =
            assignor::assign(&join.protocol, &join.members, &counts).unwrap_or_default();
        let mut assignments: BTreeMap<String, Bytes> = BTreeMap::new();
        for m in &join.members {
            let parts = assignment.get(&m.member_id).cloned().unwrap_or_default();
            match encode_assignment(&parts, None, 3) {
                Ok(b) => {
                    assignments.insert(m.member_id.clone(), b);
                }
                Err(e) => {
                    self.errors.push_back(e.into());
                    self.wake_app();
                    return 100;
                }
            }
        }
        self.send_sync(join.generation_id, assignments);
        100
    }

    pub(super) fn on_find_coordinator(
        &mut self,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let Some(g) = self.group.as_mut() else { return };
        let r = match &result {
            Ok((ResponseKind::FindCoordinator(resp), _)) => {
                rq::parse_find_coordinator(resp, &g.group_id)
            }
            _ => Err(codes::COORDINATOR_NOT_AVAILABLE),
        };
        log::debug!(target: "ferrokafka::group", "find coordinator: {:?} / {:?}", r, result.as_ref().err());
        g.on_find_coordinator(r, now);
        self.wake_app();
    }

    pub(super) fn on_heartbeat(
        &mut self,
        sent: Generation,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let Some(g) = self.group.as_mut() else { return };
        if result.is_ok() && *g.generation() != sent {
            // Sent in a generation we have left since (Java KAFKA-9823,
            // `generationUnchanged`): whatever it says about that generation
            // no longer concerns us.
            return;
        }
        let r = match &result {
            Ok((ResponseKind::Heartbeat(resp), _)) => {
                self.metrics.heartbeats += 1;
                self.metrics.last_heartbeat_ms = Some(now);
                g.on_heartbeat(Ok(resp.error_code), now)
            }
            _ => {
                g.mark_coordinator_unknown("heartbeat failed", now);
                g.on_heartbeat(Err(()), now)
            }
        };
        if matches!(r, Reaction::ResetAndRejoin | Reaction::ResetGeneration) {
            self.lose_partitions();
        }
    }

    /// JoinGroup and SyncGroup answers: one path for what they share (a
    /// transport failure forgets the coordinator; the error reactions are
    /// the same), the success of each in its own function.
    pub(super) fn on_join_or_sync(
        &mut self,
        phase: Phase,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let Some(g) = self.group.as_mut() else { return };
        let reaction = match (phase, result) {
            (Phase::Join, Ok((ResponseKind::JoinGroup(resp), _))) => {
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
                if r == Reaction::Ok {
                    self.joined(resp, protocol, now);
                }
                r
            }
            (Phase::Sync { generation_id }, Ok((ResponseKind::SyncGroup(resp), _))) => {
                if g.generation().generation_id != generation_id {
                    log::debug!(target: "ferrokafka::group", "sync: code {} for generation {generation_id} ignored: now in {}", resp.error_code, g.generation().generation_id);
                    return;
                }
                let r = g.on_sync(resp.error_code, now);
                log::debug!(target: "ferrokafka::group", "sync: code {} -> {r:?}", resp.error_code);
                if r == Reaction::Ok {
                    self.synced(resp.assignment.clone(), now);
                }
                r
            }
            (phase, other) => {
                let reason = match other {
                    Err(e) => format!("{} failed: {e}", phase.doing()),
                    Ok(_) => format!("unexpected answer {}", phase.doing()),
                };
                log::debug!(target: "ferrokafka::group", "{reason}");
                g.mark_coordinator_unknown(&reason, now);
                let unavailable = codes::COORDINATOR_NOT_AVAILABLE;
                match phase {
                    Phase::Join => g.on_join(unavailable, -1, "", "", None, now),
                    Phase::Sync { .. } => g.on_sync(unavailable, now),
                };
                return;
            }
        };
        match reaction {
            Reaction::Fatal(code) => {
                self.errors
                    .push_back(Error::broker(code, Some(phase.doing().into())));
                self.wake_app();
            }
            Reaction::RaiseAndRejoin(code) => {
                self.raise_once(code, phase.doing());
                self.wake_app();
            }
            Reaction::ResetAndRejoin | Reaction::ResetGeneration => self.lose_partitions(),
            _ => {}
        }
    }

    /// JoinGroup succeeded: the leader computes the assignment (once the
    /// metadata covers every member's topics), a follower syncs at once.
    fn joined(
        &mut self,
        resp: ferrokafka_protocol::kafka_protocol::messages::JoinGroupResponse,
        protocol: Option<String>,
        now: i64,
    ) {
        self.prepare = Prepare::NotStarted;
        if self.group().is_leader(resp.leader.as_str()) {
            let mut members = Vec::new();
            for m in &resp.members {
                match decode_subscription(
                    m.member_id.as_str(),
                    m.group_instance_id.as_deref(),
                    m.metadata.clone(),
                ) {
                    Ok(s) => members.push(s),
                    Err(e) => self.errors.push_back(e.into()),
                }
            }
            self.join = Some(JoinOutcome {
                protocol: protocol.unwrap_or_else(|| "range".into()),
                members,
                generation_id: resp.generation_id,
            });
            self.join_deadline_ms = now + LEADER_METADATA_WAIT_MS;
        } else {
            self.send_sync(resp.generation_id, BTreeMap::new());
        }
    }

    /// SyncGroup succeeded: its assignment becomes ours.
    fn synced(&mut self, assignment: Bytes, now: i64) {
        // A completed rebalance, as Java's rebalance-total counts it.
        self.metrics.rebalances += 1;
        self.metrics.last_rebalance_ms = Some(now);
        match decode_assignment(assignment) {
            Ok(parts) => self.apply_assignment(parts),
            Err(e) => {
                self.errors.push_back(e.into());
                self.group_mut().request_rejoin("undecodable assignment");
                self.wake_app();
            }
        }
    }

    /// An unexpected JoinGroup/SyncGroup error for poll to raise; the member
    /// rejoins by itself. One of a kind waits at a time: a member that polls
    /// rarely must not find a backlog of the same error.
    pub(super) fn raise_once(&mut self, code: i16, what: &str) {
        if !self.errors.iter().any(|e| e.code() == code) {
            self.errors.push_back(Error::broker(
                code,
                Some(format!("{what} (unexpected answer; rejoining)")),
            ));
        }
    }

    /// A SyncGroup answer's assignment becomes ours. Eager: everything was
    /// revoked before the join, so all of it is new. Cooperative: only moved
    /// partitions are revoked (and a second rebalance follows, KIP-429).
    fn apply_assignment(&mut self, parts: Vec<TopicPartition>) {
        let owned: BTreeSet<TopicPartition> = self.subs.assigned_partitions().cloned().collect();
        let new: BTreeSet<TopicPartition> = parts.iter().cloned().collect();
        let revoked: Vec<TopicPartition> = owned.difference(&new).cloned().collect();
        let added: Vec<TopicPartition> = new.difference(&owned).cloned().collect();
        let subscribed = self.subs.subscription().clone();
        let ours: Vec<TopicPartition> = parts
            .into_iter()
            .filter(|tp| subscribed.contains(&*tp.topic))
            .collect();
        if let Err(e) = self.subs.assign_from_subscribed(ours) {
            self.errors.push_back(e);
        }
        let gone: HashSet<TopicPartition> = revoked.iter().cloned().collect();
        self.drop_buffered(|tp| gone.contains(tp));
        self.joined_snapshot = self.partition_counts();
        let actions = self.want_topics(new.iter().map(|tp| tp.topic.to_string()));
        self.out.extend(actions);
        if !revoked.is_empty() {
            self.events.push_back(RebalanceEvent::Revoked(revoked));
            if self.cfg.cooperative() {
                self.group_mut().request_rejoin(
                    "partitions revoked (cooperative): rejoin to let others take them",
                );
            }
        }
        self.events.push_back(RebalanceEvent::Assigned(added));
        self.prepare = Prepare::NotStarted;
        self.wake_app();
    }

    /// LeaveGroup for the current member, resetting the membership. Static
    /// members do not leave (KIP-345): their partitions wait for them.
    pub(super) fn leave_request(&mut self, reason: &str) -> Option<Request> {
        if self.member.is_some() {
            return self.member_leave_request(reason);
        }
        let g = self.group.as_mut()?;
        let node = g.coordinator().cloned();
        let member_id = g.generation().member_id.clone();
        let instance = g.group_instance_id.clone();
        let group_id = g.group_id.clone();
        g.on_leave(reason);
        self.prepare = Prepare::NotStarted;
        if instance.is_some() || member_id.is_empty() {
            return None;
        }
        let reason = reason.to_string();
        Some(Request {
            dest: Dest::Node(coordinator_connection(&node?)),
            body: Body::Versioned {
                api_key: ApiKey::LeaveGroup as i16,
                max_version: None,
                build: Box::new(move |v| {
                    RequestKind::LeaveGroup(rq::leave_group(
                        &group_id, &member_id, None, &reason, v,
                    ))
                }),
            },
            opts: RequestOpts::default(),
            tag: Tag::Leave,
        })
    }
}
