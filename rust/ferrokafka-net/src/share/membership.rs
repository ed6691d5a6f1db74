//! Share group membership as a sans-IO state machine (KIP-932's
//! ShareGroupHeartbeat, api 76). The member names itself (a random UUID,
//! as KIP-932 requires of the client), joins with epoch 0 and its
//! subscription, then heartbeats at the interval the coordinator gives;
//! the coordinator answers with the partitions assigned to it (by topic
//! id). Leaving is a heartbeat with epoch -1. Rules: docs/semantics.md
//! §11.1.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{
    GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

use crate::cluster::{Cluster, Node, TopicPartition};
use crate::error::Error;

/// Epoch of a heartbeat that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;

/// A fresh member id: 16 random bytes in Kafka's `Uuid.toString` form
/// (URL-safe base64 without padding).
pub fn new_member_id() -> String {
    let bytes: [u8; 16] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// What the membership wants sent.
#[derive(Debug)]
pub enum MemberSend {
    FindCoordinator,
    Heartbeat(Node, Box<ShareGroupHeartbeatRequest>),
}

#[derive(Debug)]
pub struct ShareMembership {
    group_id: String,
    pub member_id: String,
    pub epoch: i32,
    rack: Option<String>,
    subscription: BTreeSet<String>,
    /// The subscription changed since the coordinator last heard it.
    subscription_dirty: bool,
    pub coordinator: Option<Node>,
    find_in_flight: bool,
    heartbeat_in_flight: bool,
    next_heartbeat_ms: i64,
    /// Given by the coordinator in every answer.
    pub heartbeat_interval_ms: i64,
    backoff_ms: i64,
    retry_at_ms: i64,
    /// The assignment by topic id (the coordinator's words).
    assignment: BTreeMap<[u8; 16], BTreeSet<i32>>,
    /// A leave heartbeat was sent or is due.
    leaving: bool,
    pub left: bool,
}

impl ShareMembership {
    pub fn new(group_id: String, rack: Option<String>, backoff_ms: i64) -> Self {
        ShareMembership {
            group_id,
            member_id: new_member_id(),
            epoch: 0,
            rack,
            subscription: BTreeSet::new(),
            subscription_dirty: false,
            coordinator: None,
            find_in_flight: false,
            heartbeat_in_flight: false,
            next_heartbeat_ms: 0,
            heartbeat_interval_ms: 5000,
            backoff_ms,
            retry_at_ms: 0,
            assignment: BTreeMap::new(),
            leaving: false,
            left: false,
        }
    }

    pub fn subscription(&self) -> &BTreeSet<String> {
        &self.subscription
    }

    /// A new subscription is sent with the next heartbeat, at once.
    pub fn subscribe(&mut self, topics: BTreeSet<String>) {
        if topics != self.subscription {
            self.subscription = topics;
            self.subscription_dirty = true;
            self.next_heartbeat_ms = 0;
        }
        self.leaving = false;
        self.left = false;
    }

    /// Leave with the next heartbeat (unsubscribe, close). The assignment
    /// is dropped now: nothing more is fetched for it.
    pub fn leave(&mut self) {
        self.assignment.clear();
        self.subscription.clear();
        if self.epoch == 0 && !self.heartbeat_in_flight {
            // Never joined (or fenced): nothing to leave.
            self.left = true;
            return;
        }
        self.leaving = true;
        self.next_heartbeat_ms = 0;
    }

    fn active(&self) -> bool {
        !self.left && (self.leaving || !self.subscription.is_empty())
    }

    /// The next request, if one is due at `now`.
    pub fn poll(&mut self, now: i64) -> Option<MemberSend> {
        if !self.active() || now < self.retry_at_ms || self.heartbeat_in_flight {
            return None;
        }
        let Some(node) = self.coordinator.clone() else {
            if self.find_in_flight {
                return None;
            }
            self.find_in_flight = true;
            return Some(MemberSend::FindCoordinator);
        };
        if now < self.next_heartbeat_ms {
            return None;
        }
        self.heartbeat_in_flight = true;
        Some(MemberSend::Heartbeat(node, Box::new(self.heartbeat_body())))
    }

    fn heartbeat_body(&mut self) -> ShareGroupHeartbeatRequest {
        let joining = self.epoch == 0;
        let epoch = if self.leaving {
            LEAVE_EPOCH
        } else {
            self.epoch
        };
        // The subscription goes with the join and after a change only
        // (null means "unchanged" to the coordinator).
        let topics = (joining || self.subscription_dirty).then(|| {
            self.subscription
                .iter()
                .map(|t| TopicName(StrBytes::from_string(t.clone())))
                .collect()
        });
        self.subscription_dirty = false;
        ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group_id.clone())))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(epoch)
            .with_rack_id(
                self.rack
                    .clone()
                    .filter(|_| joining)
                    .map(StrBytes::from_string),
            )
            .with_subscribed_topic_names(if self.leaving { None } else { topics })
    }

    /// The FindCoordinator answer: the node, or why not. Errors the
    /// application must see (authorization, an invalid group id) are
    /// returned; the lookup is retried after the backoff either way.
    pub fn on_coordinator(&mut self, r: Result<Node, Error>, now: i64) -> Result<(), Error> {
        self.find_in_flight = false;
        match r {
            Ok(n) => {
                self.coordinator = Some(n);
                Ok(())
            }
            Err(e) => {
                log::debug!(target: "ferrokafka::share", "share group {} coordinator lookup failed: {e}", self.group_id);
                self.retry_at_ms = now + self.backoff_ms;
                match e.code() {
                    codes::GROUP_AUTHORIZATION_FAILED | codes::INVALID_GROUP_ID => {
                        self.retry_at_ms = now + self.backoff_ms.max(1000);
                        Err(e)
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// The heartbeat answer. Errors the application must see are returned.
    pub fn on_heartbeat(
        &mut self,
        r: Result<ShareGroupHeartbeatResponse, Error>,
        now: i64,
    ) -> Result<(), Error> {
        self.heartbeat_in_flight = false;
        if self.leaving {
            // Whatever the answer, the member is gone: the coordinator
            // drops it on its session timeout if the leave was lost.
            self.left = true;
            self.leaving = false;
            self.epoch = 0;
            return Ok(());
        }
        let resp = match r {
            Ok(resp) => resp,
            Err(e @ Error::UnsupportedVersion { .. }) => {
                // The coordinator does not speak KIP-932: retrying will not
                // help until the cluster changes; the application is told.
                self.retry_at_ms = now + self.backoff_ms.max(1000);
                return Err(e);
            }
            Err(e) => {
                // Transport trouble: look for the coordinator again.
                log::debug!(target: "ferrokafka::share", "share group heartbeat failed: {e}");
                self.coordinator = None;
                self.retry_at_ms = now + self.backoff_ms;
                return Ok(());
            }
        };
        match resp.error_code {
            codes::NONE if resp.member_epoch < 0 => {
                // The answer to a leave the member took back (subscribed
                // again while it was in flight): join afresh.
                self.epoch = 0;
                self.assignment.clear();
                self.subscription_dirty = true;
                self.next_heartbeat_ms = 0;
                Ok(())
            }
            codes::NONE => {
                if let Some(id) = &resp.member_id {
                    // The coordinator echoes our id; a different one is its to give.
                    self.member_id = id.to_string();
                }
                self.epoch = resp.member_epoch;
                if resp.heartbeat_interval_ms > 0 {
                    self.heartbeat_interval_ms = resp.heartbeat_interval_ms as i64;
                }
                if let Some(a) = resp.assignment {
                    self.assignment = a
                        .topic_partitions
                        .iter()
                        .map(|t| {
                            (
                                *t.topic_id.as_bytes(),
                                t.partitions.iter().copied().collect(),
                            )
                        })
                        .collect();
                }
                self.next_heartbeat_ms = now + self.heartbeat_interval_ms;
                Ok(())
            }
            codes::NOT_COORDINATOR | codes::COORDINATOR_NOT_AVAILABLE => {
                self.coordinator = None;
                self.retry_at_ms = now + self.backoff_ms;
                Ok(())
            }
            codes::COORDINATOR_LOAD_IN_PROGRESS => {
                self.retry_at_ms = now + self.backoff_ms;
                Ok(())
            }
            codes::UNKNOWN_MEMBER_ID | codes::FENCED_MEMBER_EPOCH => {
                // Fenced: the assignment is no longer ours. Rejoin at once
                // with epoch 0 and the same id, sending the subscription.
                log::info!(target: "ferrokafka::share", "share group member {} fenced (code {}); rejoining", self.member_id, resp.error_code);
                self.assignment.clear();
                self.epoch = 0;
                self.next_heartbeat_ms = 0;
                Ok(())
            }
            code => {
                // Authorization, invalid request, group full, unsupported:
                // the application is told; the heartbeat is retried after
                // the backoff in case the cause goes away (ACLs change).
                self.retry_at_ms = now + self.backoff_ms.max(1000);
                self.subscription_dirty = true;
                Err(Error::broker(
                    code,
                    resp.error_message
                        .map(|m| m.to_string())
                        .or_else(|| Some("ShareGroupHeartbeat".into())),
                ))
            }
        }
    }

    /// When the next request may be due.
    pub fn wake_at(&self) -> i64 {
        if !self.active() {
            return i64::MAX;
        }
        if self.coordinator.is_none() {
            return self.retry_at_ms;
        }
        self.next_heartbeat_ms.max(self.retry_at_ms)
    }

    /// The assignment by name; partitions of topics the metadata does not
    /// know yet are left out until it does.
    pub fn assignment(&self, cluster: &Cluster) -> BTreeSet<TopicPartition> {
        if self.assignment.is_empty() {
            return BTreeSet::new();
        }
        let names: BTreeMap<[u8; 16], &str> = cluster
            .topics()
            .into_iter()
            .filter_map(|t| cluster.topic_id(t).map(|id| (id, t)))
            .collect();
        self.assignment
            .iter()
            .filter_map(|(id, parts)| names.get(id).map(|n| (n, parts)))
            .flat_map(|(n, parts)| parts.iter().map(move |p| TopicPartition::new(*n, *p)))
            .collect()
    }

    /// Topic ids assigned that the metadata cannot name yet.
    pub fn unnamed_topics(&self, cluster: &Cluster) -> bool {
        self.assignment.keys().any(|id| {
            !cluster
                .topics()
                .into_iter()
                .any(|t| cluster.topic_id(t) == Some(*id))
        })
    }
}
