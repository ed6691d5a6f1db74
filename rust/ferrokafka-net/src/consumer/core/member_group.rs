//! The consumer under the KIP-848 group protocol (`group_protocol =
//! "consumer"`): coordinator lookup (shared with the classic protocol),
//! ConsumerGroupHeartbeat requests from `member::ConsumerMember`, and the
//! reconciliation of the coordinator's target assignment with what the
//! consumer owns (docs/semantics.md §6): commit and
//! revoke what is no longer ours first, then assign the new partitions, run
//! the application's callbacks (revoked before assigned, as Java does), and
//! only then acknowledge by heartbeating the owned partitions.

use std::collections::BTreeSet;

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use super::{coordinator_connection, ConsumerCore, Dest, Request, Tag};
use crate::cluster::TopicPartition;
use crate::consumer::config::RebalanceEvent;
use crate::consumer::coordinator::Action as GroupAction;
use crate::consumer::member::{HeartbeatFields, IdAssignment, Outcome, Subscription, TopicId};
use crate::consumer::requests as rq;
use crate::driver::{Body, RequestOpts};
use crate::error::Error;

/// Where the reconciliation of a target assignment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recon {
    Idle,
    /// Auto-commit of the partitions about to be revoked is in flight.
    Committing,
    /// That commit was answered (either way): revoke without committing again.
    Committed,
    /// Events handed to the application; the acknowledgement waits for
    /// its callbacks.
    AwaitCallbacks,
}

/// What a poll raises once the KIP-848 membership failed for good.
pub(super) fn fatal_error(code: i16) -> Error {
    let msg = if code == codes::UNSUPPORTED_VERSION {
        "group_protocol=\"consumer\" is not served by this cluster (no ConsumerGroupHeartbeat, \
         KIP-848); use group_protocol=\"classic\""
            .to_string()
    } else {
        "the consumer group membership failed (KIP-848 heartbeat)".to_string()
    };
    Error::broker(code, Some(msg))
}

impl ConsumerCore {
    fn member_mut(&mut self) -> &mut crate::consumer::member::ConsumerMember {
        self.member
            .as_mut()
            .expect("only called under group_protocol=consumer")
    }

    /// KIP-848 group decisions at `now`; returns how long nothing is due (ms).
    pub(super) fn member_step(&mut self, now: i64) -> i64 {
        // Pattern subscriptions: the coordinator matches the regex; the
        // local match only tells which assigned topics are ours to take.
        let cluster = self.cluster.clone();
        self.subs.match_pattern(self.metadata_version, || cluster);
        let g = self.group.as_mut().expect("a member has a group");
        if g.coordinator_unknown() {
            self.member.as_mut().expect("member").forget_sent();
            let g = self.group.as_mut().expect("a member has a group");
            if let GroupAction::FindCoordinator = g.next_action(now) {
                self.send_find_coordinator();
            }
            return 10;
        }
        if !self.subs.has_auto_assigned_partitions() || self.member_mut().fatal().is_some() {
            return 100;
        }
        let poll_expired = self.group_ref().heartbeat.poll_timeout_expired(now);
        let m = self.member.as_mut().expect("member");
        if m.has_left() {
            if poll_expired {
                return 100;
            }
            m.rejoin(now);
        }
        if poll_expired && m.joined() {
            // Java: the member leaves so its partitions move on; the next
            // poll() joins again.
            let leave = self.leave_request("max_poll_interval_ms passed without a poll");
            self.lose_partitions();
            if let Some(r) = leave {
                self.out.push(super::Action::Send(Box::new(r)));
            }
            self.errors.push_back(Error::State {
                detail: "the consumer left its group because poll() was not called within max_poll_interval_ms".into(),
            });
            self.wake_app();
            return 100;
        }
        if self.member_mut().epoch() == 0 && (!self.events.is_empty() || self.events_unacked) {
            // Fenced: the rejoin waits for on_partitions_lost to have run.
            return 10;
        }
        self.reconcile(now);
        self.maybe_send_member_heartbeat(now);
        self.member_mut().time_to_next(now).clamp(1, 100)
    }

    fn group_ref(&self) -> &crate::consumer::coordinator::GroupMembership {
        self.group.as_ref().expect("a member has a group")
    }

    fn topic_name(&self, id: &TopicId) -> Option<String> {
        self.cluster
            .topic_states()
            .iter()
            .find(|(_, t)| t.topic_id.as_ref() == Some(id))
            .map(|(name, _)| name.clone())
    }

    /// The owned partitions by topic id, as the coordinator names them.
    fn owned_ids(&self) -> IdAssignment {
        let mut out = IdAssignment::new();
        for tp in self.subs.assigned_partitions() {
            if let Some(id) = self.cluster.topic_id(&tp.topic) {
                out.entry(id).or_default().insert(tp.partition);
            }
        }
        out
    }

    fn maybe_send_member_heartbeat(&mut self, now: i64) {
        let sub = match self.subs.pattern() {
            Some(p) => Subscription::Regex(p.to_string()),
            None => Subscription::Topics(self.subs.subscription().clone()),
        };
        let owned = self.owned_ids();
        let m = self.member.as_mut().expect("member");
        let incarnation = m.incarnation();
        if let Some(fields) = m.heartbeat(&sub, &owned, now) {
            let req = self.member_request(fields, Tag::MemberHeartbeat { incarnation });
            if let Some(r) = req {
                self.out.push(super::Action::Send(Box::new(r)));
            }
        }
    }

    fn member_request(&self, fields: HeartbeatFields, tag: Tag) -> Option<Request> {
        let g = self.group_ref();
        let node = coordinator_connection(g.coordinator()?);
        let gid = g.group_id.clone();
        Some(Request {
            dest: Dest::Node(node),
            body: Body::Versioned {
                api_key: ApiKey::ConsumerGroupHeartbeat as i16,
                max_version: None,
                build: Box::new(move |v| {
                    RequestKind::ConsumerGroupHeartbeat(rq::consumer_group_heartbeat(
                        &gid, &fields, v,
                    ))
                }),
            },
            opts: RequestOpts::default(),
            tag,
        })
    }

    /// The heartbeat that leaves the group (epoch -1, static -2).
    pub(super) fn member_leave_request(&mut self, reason: &str) -> Option<Request> {
        let now = self.now_ms;
        self.recon = Recon::Idle;
        let fields = self.member_mut().leave(now);
        self.sync_generation();
        if let Some(g) = self.group.as_mut() {
            g.on_leave(reason);
        }
        self.member_request(fields?, Tag::Leave)
    }

    /// The classic membership's generation mirrors the member (id, epoch):
    /// OffsetCommit under KIP-848 carries the member epoch as its
    /// generation id (docs/semantics.md §6.5), and `generation()` / group metadata read it there.
    fn sync_generation(&mut self) {
        let m = self.member.as_ref().expect("member");
        let (id, epoch) = (m.member_id().to_string(), m.epoch());
        if let Some(g) = self.group.as_mut() {
            g.adopt_consumer_member(id, epoch);
        }
    }

    pub(super) fn on_member_heartbeat(
        &mut self,
        incarnation: u64,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let answer = match &result {
            Ok((ResponseKind::ConsumerGroupHeartbeat(resp), _)) => {
                self.metrics.heartbeats += 1;
                self.metrics.last_heartbeat_ms = Some(now);
                Ok(rq::parse_consumer_group_heartbeat(resp))
            }
            Err(Error::UnsupportedVersion { .. }) => {
                self.member_mut().fail(codes::UNSUPPORTED_VERSION);
                self.errors
                    .push_back(fatal_error(codes::UNSUPPORTED_VERSION));
                self.wake_app();
                return;
            }
            _ => Err(()),
        };
        let message = answer.as_ref().ok().and_then(|a| a.error_message.clone());
        let outcome = self.member_mut().on_answer(incarnation, answer, now);
        log::debug!(target: "ferrokafka::group", "consumer group heartbeat -> {outcome:?} (epoch {})", self.member_mut().epoch());
        if outcome != Outcome::Stale {
            self.sync_generation();
        }
        match outcome {
            Outcome::Ok | Outcome::Target | Outcome::Stale | Outcome::Retry => {}
            Outcome::Fenced(_) => {
                self.recon = Recon::Idle;
                self.lose_partitions();
            }
            Outcome::CoordinatorUnknown => {
                if let Some(g) = self.group.as_mut() {
                    g.mark_coordinator_unknown("consumer group heartbeat failed", now);
                }
            }
            Outcome::Raise(code) => {
                let what = match message {
                    Some(m) if !m.is_empty() => format!("consumer group heartbeat: {m}"),
                    _ => "consumer group heartbeat".to_string(),
                };
                self.raise_once(code, &what);
                self.wake_app();
            }
            Outcome::Fatal(code) => {
                self.lose_partitions();
                self.errors.push_back(fatal_error(code));
                self.wake_app();
            }
        }
    }

    /// A commit said the member epoch or id is no longer valid: the same
    /// as a fenced heartbeat.
    pub(super) fn member_fenced_by_commit(&mut self) {
        let now = self.now_ms;
        self.member_mut().fence(now);
        self.sync_generation();
        self.recon = Recon::Idle;
        self.lose_partitions();
    }

    /// The auto-commit before a revocation was answered.
    pub(super) fn member_commit_done(&mut self) {
        if self.recon == Recon::Committing {
            self.recon = Recon::Committed;
        }
    }

    /// One step of reconciling the target assignment with what is owned
    /// (docs/semantics.md §6.3).
    fn reconcile(&mut self, now: i64) {
        match self.recon {
            Recon::Committing => return,
            Recon::AwaitCallbacks => {
                if self.events.is_empty() && !self.events_unacked {
                    self.recon = Recon::Idle;
                    self.member_mut().acknowledge_soon(now);
                }
                return;
            }
            Recon::Idle | Recon::Committed => {}
        }
        let Some(target) = self.member_mut().target().cloned() else {
            return;
        };
        let mut desired: BTreeSet<TopicPartition> = BTreeSet::new();
        let mut unresolved = false;
        for (id, parts) in &target {
            match self.topic_name(id) {
                Some(name) if self.subs.subscription().contains(&name) => {
                    desired.extend(parts.iter().map(|p| TopicPartition::new(name.as_str(), *p)));
                }
                // Not in the metadata yet (or, for a pattern, not matched
                // locally yet): taken once the metadata has it.
                _ => unresolved = true,
            }
        }
        if unresolved {
            self.metadata_update();
        }
        let owned: BTreeSet<TopicPartition> = self.subs.assigned_partitions().cloned().collect();
        if desired == owned {
            self.recon = Recon::Idle;
            return;
        }
        let revoked: Vec<TopicPartition> = owned.difference(&desired).cloned().collect();
        let added: Vec<TopicPartition> = desired.difference(&owned).cloned().collect();
        if !revoked.is_empty()
            && self.recon == Recon::Idle
            && self.cfg.enable_auto_commit
            && self.maybe_auto_commit(true)
        {
            // Commit what was consumed before giving the partitions away.
            self.recon = Recon::Committing;
            return;
        }
        if let Err(e) = self.subs.assign_from_subscribed(desired.iter().cloned()) {
            self.errors.push_back(e);
        }
        let gone: BTreeSet<TopicPartition> = revoked.iter().cloned().collect();
        self.drop_buffered(|tp| gone.contains(tp));
        let actions = self.want_topics(desired.iter().map(|tp| tp.topic.to_string()));
        self.out.extend(actions);
        if !revoked.is_empty() {
            self.events.push_back(RebalanceEvent::Revoked(revoked));
        }
        self.events.push_back(RebalanceEvent::Assigned(added));
        self.metrics.rebalances += 1;
        self.metrics.last_rebalance_ms = Some(now);
        self.recon = Recon::AwaitCallbacks;
        self.wake_app();
    }
}
