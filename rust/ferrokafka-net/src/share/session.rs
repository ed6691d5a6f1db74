//! One share session per leader (KIP-932): ShareFetch (api 78) opens it
//! with epoch 0 and the partitions to fetch, every later ShareFetch or
//! ShareAcknowledge (api 79) carries the next epoch and only what changed
//! (partitions added in `topics`, removed in `forgotten_topics_data`), and
//! a ShareAcknowledge with epoch -1 closes it (docs/semantics.md §11.2). The broker serialises a
//! session, so one request per session is in flight at a time.

use std::collections::{BTreeMap, BTreeSet};

use ferrokafka_protocol::kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic, ForgottenTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::{
    share_acknowledge_request, GroupId, ShareAcknowledgeRequest, ShareFetchRequest,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::cluster::{Node, TopicPartition};
use crate::share::acks::{batches, AckType};
use crate::share::config::ShareConfig;

/// Epoch of the request that closes a session.
pub const CLOSE_EPOCH: i32 = -1;

/// Acknowledgements for one request, by partition.
pub type Acks = BTreeMap<TopicPartition, BTreeMap<i64, AckType>>;

#[derive(Debug)]
pub struct ShareSession {
    pub node: Node,
    /// The epoch the next request carries; 0 opens a new session.
    pub epoch: i32,
    /// Partitions the broker holds in this session.
    pub partitions: BTreeSet<TopicPartition>,
    pub in_flight: bool,
    /// No request before this (after a failure).
    pub retry_at_ms: i64,
    /// A close (epoch -1) was sent.
    pub closed: bool,
}

/// What a ShareFetch changes in the session when it succeeds.
#[derive(Debug, Clone, Default)]
pub struct SessionChange {
    pub added: Vec<TopicPartition>,
    pub forgotten: Vec<TopicPartition>,
}

fn next_epoch(e: i32) -> i32 {
    // Wraps to 1, never to 0 (which would open a new session) or -1.
    if e == i32::MAX {
        1
    } else {
        e + 1
    }
}

fn group(cfg: &ShareConfig) -> GroupId {
    GroupId(StrBytes::from_string(cfg.group_id.clone()))
}

impl ShareSession {
    pub fn new(node: Node) -> Self {
        ShareSession {
            node,
            epoch: 0,
            partitions: BTreeSet::new(),
            in_flight: false,
            retry_at_ms: 0,
            closed: false,
        }
    }

    /// The answer was good: the next request carries the next epoch.
    pub fn on_success(&mut self, change: &SessionChange) {
        self.in_flight = false;
        self.epoch = next_epoch(self.epoch);
        for tp in &change.forgotten {
            self.partitions.remove(tp);
        }
        self.partitions.extend(change.added.iter().cloned());
    }

    /// The session is gone or in doubt (unknown session, wrong epoch, lost
    /// connection): the next request opens a new one.
    pub fn reset(&mut self, retry_at_ms: i64) {
        self.in_flight = false;
        self.epoch = 0;
        self.partitions.clear();
        self.retry_at_ms = retry_at_ms;
    }

    /// A ShareFetch for `wanted` (the partitions this leader should serve
    /// us) carrying `acks`. Acknowledgements cannot open a session (the
    /// records were acquired in the old one): callers send none at epoch 0.
    pub fn fetch_request(
        &self,
        cfg: &ShareConfig,
        member_id: &str,
        wanted: &BTreeSet<TopicPartition>,
        acks: &Acks,
        ids: &dyn Fn(&str) -> Option<[u8; 16]>,
    ) -> (ShareFetchRequest, SessionChange) {
        let opening = self.epoch == 0;
        let mut change = SessionChange::default();
        let mut topics: BTreeMap<[u8; 16], Vec<FetchPartition>> = BTreeMap::new();
        let mut listed: BTreeSet<&TopicPartition> = BTreeSet::new();
        for tp in wanted {
            if !opening && self.partitions.contains(tp) && !acks.contains_key(tp) {
                continue;
            }
            let Some(id) = ids(&tp.topic) else { continue };
            let mut p = FetchPartition::default()
                .with_partition_index(tp.partition)
                .with_partition_max_bytes(cfg.max_partition_fetch_bytes);
            if let Some(a) = acks.get(tp) {
                p.acknowledgement_batches = fetch_batches(a);
            }
            topics.entry(id).or_default().push(p);
            listed.insert(tp);
            if !self.partitions.contains(tp) || opening {
                change.added.push(tp.clone());
            }
        }
        // Acknowledgements for partitions no longer wanted still go out
        // (listed like any partition; the session forgets them after).
        for (tp, a) in acks {
            if listed.contains(tp) {
                continue;
            }
            let Some(id) = ids(&tp.topic) else { continue };
            topics.entry(id).or_default().push(
                FetchPartition::default()
                    .with_partition_index(tp.partition)
                    .with_partition_max_bytes(cfg.max_partition_fetch_bytes)
                    .with_acknowledgement_batches(fetch_batches(a)),
            );
        }
        let mut forgotten: BTreeMap<[u8; 16], Vec<i32>> = BTreeMap::new();
        if !opening {
            for tp in &self.partitions {
                if wanted.contains(tp) {
                    continue;
                }
                if let Some(id) = ids(&tp.topic) {
                    forgotten.entry(id).or_default().push(tp.partition);
                }
                change.forgotten.push(tp.clone());
            }
        }
        let req = ShareFetchRequest::default()
            .with_group_id(Some(group(cfg)))
            .with_member_id(Some(StrBytes::from_string(member_id.to_string())))
            .with_share_session_epoch(self.epoch)
            .with_max_wait_ms(cfg.fetch_max_wait_ms)
            .with_min_bytes(cfg.fetch_min_bytes)
            .with_max_bytes(cfg.fetch_max_bytes)
            .with_max_records(cfg.max_poll_records)
            .with_batch_size(cfg.max_poll_records)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(id, partitions)| {
                        FetchTopic::default()
                            .with_topic_id(Uuid::from_bytes(id))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
            .with_forgotten_topics_data(
                forgotten
                    .into_iter()
                    .map(|(id, partitions)| {
                        ForgottenTopic::default()
                            .with_topic_id(Uuid::from_bytes(id))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        (req, change)
    }

    /// A ShareAcknowledge carrying `acks`; `close` closes the session
    /// (epoch -1), which also releases whatever the member still holds.
    pub fn acknowledge_request(
        &self,
        cfg: &ShareConfig,
        member_id: &str,
        acks: &Acks,
        close: bool,
        ids: &dyn Fn(&str) -> Option<[u8; 16]>,
    ) -> ShareAcknowledgeRequest {
        let mut topics: BTreeMap<[u8; 16], Vec<AcknowledgePartition>> = BTreeMap::new();
        for (tp, a) in acks {
            let Some(id) = ids(&tp.topic) else { continue };
            topics.entry(id).or_default().push(
                AcknowledgePartition::default()
                    .with_partition_index(tp.partition)
                    .with_acknowledgement_batches(
                        batches(a)
                            .into_iter()
                            .map(|(first, last, ty)| {
                                share_acknowledge_request::AcknowledgementBatch::default()
                                    .with_first_offset(first)
                                    .with_last_offset(last)
                                    .with_acknowledge_types(vec![ty])
                            })
                            .collect(),
                    ),
            );
        }
        ShareAcknowledgeRequest::default()
            .with_group_id(Some(group(cfg)))
            .with_member_id(Some(StrBytes::from_string(member_id.to_string())))
            .with_share_session_epoch(if close { CLOSE_EPOCH } else { self.epoch })
            .with_topics(
                topics
                    .into_iter()
                    .map(|(id, partitions)| {
                        AcknowledgeTopic::default()
                            .with_topic_id(Uuid::from_bytes(id))
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
    }
}

fn fetch_batches(a: &BTreeMap<i64, AckType>) -> Vec<AcknowledgementBatch> {
    batches(a)
        .into_iter()
        .map(|(first, last, ty)| {
            AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![ty])
        })
        .collect()
}
