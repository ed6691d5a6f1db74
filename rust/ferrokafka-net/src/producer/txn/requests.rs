//! Request builders and answer parsers of the transactional APIs: one per
//! API, each taking the version the request goes out at (the runner picks
//! it after ApiVersions, as for the group APIs in `consumer::requests`).

use std::collections::{BTreeMap, BTreeSet};

use ferrokafka_protocol::kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use ferrokafka_protocol::kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest,
    GroupId, InitProducerIdRequest, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

use crate::cluster::TopicPartition;
use crate::consumer::requests::OffsetAndMetadata;
use crate::producer::idempotence::ProducerIdAndEpoch;

/// AddPartitionsToTxn v4+ is the broker-to-broker form (KIP-890); clients
/// send at most v3, as Java's `forClient` builder does.
pub const ADD_PARTITIONS_CLIENT_MAX_VERSION: i16 = 3;

/// EndTxn v5 belongs to transactions v2 (KIP-890), which needs the
/// broker's `transaction.version` feature; we speak v1 transactions.
pub const END_TXN_MAX_VERSION: i16 = 4;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(s(id))
}

/// The consumer's group membership that `send_offsets_to_transaction`
/// commits under (KIP-447): the coordinator fences a commit from a member
/// that has since left the generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// InitProducerId for a transactional id. From v3, `current` (our id and
/// epoch, when we have one) lets the coordinator bump our own epoch after an
/// abortable error instead of treating us as a new instance (KIP-360).
pub fn init_producer_id(
    transactional_id: &str,
    timeout_ms: i32,
    current: Option<ProducerIdAndEpoch>,
    version: i16,
) -> InitProducerIdRequest {
    let r = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(transactional_id)))
        .with_transaction_timeout_ms(timeout_ms);
    match current {
        Some(p) if version >= 3 && p.is_valid() => r
            .with_producer_id(ProducerId(p.producer_id))
            .with_producer_epoch(p.epoch),
        _ => r.with_producer_id(ProducerId(-1)).with_producer_epoch(-1),
    }
}

pub fn add_partitions(
    transactional_id: &str,
    pid: ProducerIdAndEpoch,
    partitions: &BTreeSet<TopicPartition>,
) -> AddPartitionsToTxnRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(transactional_id))
        .with_v3_and_below_producer_id(ProducerId(pid.producer_id))
        .with_v3_and_below_producer_epoch(pid.epoch)
        .with_v3_and_below_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(ps)
                })
                .collect(),
        )
}

/// Per-partition codes of an AddPartitionsToTxn answer (a top-level error,
/// v4+ only, applies to every partition asked).
pub fn parse_add_partitions(
    resp: &AddPartitionsToTxnResponse,
    asked: &BTreeSet<TopicPartition>,
) -> BTreeMap<TopicPartition, i16> {
    let mut out = BTreeMap::new();
    for t in &resp.results_by_topic_v3_and_below {
        for p in &t.results_by_partition {
            out.insert(
                TopicPartition::new(t.name.0.as_str(), p.partition_index),
                p.partition_error_code,
            );
        }
    }
    for tp in asked {
        // A partition the answer leaves out was not added: say so, so it is
        // asked again rather than produced to outside the transaction.
        let code = if resp.error_code != 0 {
            resp.error_code
        } else {
            ferrokafka_protocol::codes::OPERATION_NOT_ATTEMPTED
        };
        out.entry(tp.clone()).or_insert(code);
    }
    out
}

pub fn add_offsets(
    transactional_id: &str,
    pid: ProducerIdAndEpoch,
    group_id: &str,
) -> AddOffsetsToTxnRequest {
    AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_producer_id(ProducerId(pid.producer_id))
        .with_producer_epoch(pid.epoch)
        .with_group_id(GroupId(s(group_id)))
}

pub fn txn_offset_commit(
    transactional_id: &str,
    pid: ProducerIdAndEpoch,
    group: &GroupMetadata,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    version: i16,
) -> TxnOffsetCommitRequest {
    let mut by_topic: BTreeMap<&str, Vec<TxnOffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, o) in offsets {
        let mut p = TxnOffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition)
            .with_committed_offset(o.offset)
            .with_committed_metadata(Some(s(o.metadata.as_deref().unwrap_or(""))));
        if version >= 2 {
            p.committed_leader_epoch = o.leader_epoch;
        }
        by_topic.entry(&tp.topic).or_default().push(p);
    }
    let mut r = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_group_id(GroupId(s(&group.group_id)))
        .with_producer_id(ProducerId(pid.producer_id))
        .with_producer_epoch(pid.epoch)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partitions(ps)
                })
                .collect(),
        );
    if version >= 3 {
        // KIP-447: the group coordinator checks the member is still current.
        r.generation_id = group.generation_id;
        r.member_id = s(&group.member_id);
        r.group_instance_id = group.group_instance_id.as_deref().map(s);
    }
    r
}

pub fn parse_txn_offset_commit(resp: &TxnOffsetCommitResponse) -> BTreeMap<TopicPartition, i16> {
    let mut out = BTreeMap::new();
    for t in &resp.topics {
        for p in &t.partitions {
            out.insert(
                TopicPartition::new(t.name.0.as_str(), p.partition_index),
                p.error_code,
            );
        }
    }
    out
}

pub fn end_txn(transactional_id: &str, pid: ProducerIdAndEpoch, commit: bool) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_producer_id(ProducerId(pid.producer_id))
        .with_producer_epoch(pid.epoch)
        .with_committed(commit)
}
