//! Group-protocol request builders and answer parsers. Builders take the
//! version the request will go out at (chosen by the network client after
//! ApiVersions, like Java's `AbstractRequest.Builder.build(version)`), because
//! several messages change shape across versions: FindCoordinator batches
//! keys from v4, OffsetFetch batches groups from v8, OffsetCommit names topics
//! by id from v10.

use bytes::Bytes;
use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions as HeartbeatTopicPartitions;
use ferrokafka_protocol::kafka_protocol::messages::find_coordinator_response::FindCoordinatorResponse;
use ferrokafka_protocol::kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use ferrokafka_protocol::kafka_protocol::messages::leave_group_request::MemberIdentity;
use ferrokafka_protocol::kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::offset_commit_response::OffsetCommitResponse;
use ferrokafka_protocol::kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use ferrokafka_protocol::kafka_protocol::messages::offset_fetch_response::OffsetFetchResponse;
use ferrokafka_protocol::kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use ferrokafka_protocol::kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetFetchRequest,
    SyncGroupRequest, TopicName,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;

use crate::cluster::{Node, TopicPartition};
use crate::consumer::coordinator::Generation;
use crate::consumer::member::{HeartbeatAnswer, HeartbeatFields, IdAssignment};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn opt(v: Option<&str>) -> Option<StrBytes> {
    v.map(s)
}

/// key_type 0 = GROUP, 1 = TRANSACTION (docs/semantics.md §2.1).
pub fn find_coordinator(key: &str, key_type: i8, version: i16) -> FindCoordinatorRequest {
    let r = FindCoordinatorRequest::default();
    let r = if version >= 1 {
        r.with_key_type(key_type)
    } else {
        r
    };
    if version >= 4 {
        r.with_coordinator_keys(vec![s(key)])
    } else {
        r.with_key(s(key))
    }
}

/// The coordinator for `key`, or the error code.
pub fn parse_find_coordinator(resp: &FindCoordinatorResponse, key: &str) -> Result<Node, i16> {
    let (code, id, host, port) =
        if let Some(c) = resp.coordinators.iter().find(|c| c.key.as_str() == key) {
            (c.error_code, c.node_id.0, c.host.to_string(), c.port)
        } else if resp.coordinators.is_empty() {
            (
                resp.error_code,
                resp.node_id.0,
                resp.host.to_string(),
                resp.port,
            )
        } else {
            return Err(15); // COORDINATOR_NOT_AVAILABLE: answer names other keys
        };
    if code != 0 {
        return Err(code);
    }
    let port = u16::try_from(port).map_err(|_| 15i16)?;
    Ok(Node::new(id, host, port, None))
}

pub struct JoinParams<'a> {
    pub group_id: &'a str,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub member_id: &'a str,
    pub group_instance_id: Option<&'a str>,
    /// (assignor name, subscription bytes) in preference order.
    pub protocols: Vec<(String, Bytes)>,
    pub reason: Option<&'a str>,
}

pub fn join_group(p: &JoinParams<'_>, version: i16) -> JoinGroupRequest {
    let mut r = JoinGroupRequest::default()
        .with_group_id(GroupId(s(p.group_id)))
        .with_session_timeout_ms(p.session_timeout_ms)
        .with_member_id(s(p.member_id))
        .with_protocol_type(s("consumer"))
        .with_protocols(
            p.protocols
                .iter()
                .map(|(n, m)| {
                    JoinGroupRequestProtocol::default()
                        .with_name(s(n))
                        .with_metadata(m.clone())
                })
                .collect(),
        );
    if version >= 1 {
        r.rebalance_timeout_ms = p.rebalance_timeout_ms;
    }
    if version >= 5 {
        r.group_instance_id = opt(p.group_instance_id);
    }
    if version >= 8 {
        r.reason = opt(p.reason);
    }
    r
}

pub fn sync_group(
    generation: &Generation,
    group_id: &str,
    group_instance_id: Option<&str>,
    assignments: &BTreeMap<String, Bytes>,
    version: i16,
) -> SyncGroupRequest {
    let mut r = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group_id)))
        .with_generation_id(generation.generation_id)
        .with_member_id(s(&generation.member_id))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(m))
                        .with_assignment(a.clone())
                })
                .collect(),
        );
    if version >= 3 {
        r.group_instance_id = opt(group_instance_id);
    }
    if version >= 5 {
        r.protocol_type = Some(s("consumer"));
        r.protocol_name = generation.protocol_name.as_deref().map(s);
    }
    r
}

pub fn heartbeat(
    generation: &Generation,
    group_id: &str,
    group_instance_id: Option<&str>,
    version: i16,
) -> HeartbeatRequest {
    let mut r = HeartbeatRequest::default()
        .with_group_id(GroupId(s(group_id)))
        .with_generation_id(generation.generation_id)
        .with_member_id(s(&generation.member_id));
    if version >= 3 {
        r.group_instance_id = opt(group_instance_id);
    }
    r
}

/// ConsumerGroupHeartbeat (KIP-848). v0 has no topic regex: a regex
/// subscription needs v1 (the core asks for it; v1 is what KIP-848 brokers
/// and the mock serve).
pub fn consumer_group_heartbeat(
    group_id: &str,
    f: &HeartbeatFields,
    version: i16,
) -> ConsumerGroupHeartbeatRequest {
    let mut r = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group_id)))
        .with_member_id(s(&f.member_id))
        .with_member_epoch(f.member_epoch)
        .with_instance_id(opt(f.instance_id.as_deref()))
        .with_rack_id(opt(f.rack_id.as_deref()))
        .with_rebalance_timeout_ms(f.rebalance_timeout_ms)
        .with_subscribed_topic_names(
            f.subscribed_topic_names
                .as_ref()
                .map(|names| names.iter().map(|n| TopicName(s(n))).collect()),
        )
        .with_server_assignor(opt(f.server_assignor.as_deref()));
    if version >= 1 {
        r.subscribed_topic_regex = opt(f.subscribed_topic_regex.as_deref());
    }
    r.topic_partitions = f.owned.as_ref().map(|owned| {
        owned
            .iter()
            .map(|(id, parts)| {
                HeartbeatTopicPartitions::default()
                    .with_topic_id(uuid::Uuid::from_bytes(*id))
                    .with_partitions(parts.iter().copied().collect())
            })
            .collect()
    });
    r
}

pub fn parse_consumer_group_heartbeat(resp: &ConsumerGroupHeartbeatResponse) -> HeartbeatAnswer {
    HeartbeatAnswer {
        error_code: resp.error_code,
        error_message: resp.error_message.as_ref().map(|m| m.to_string()),
        member_id: resp.member_id.as_ref().map(|m| m.to_string()),
        member_epoch: resp.member_epoch,
        heartbeat_interval_ms: resp.heartbeat_interval_ms,
        assignment: resp.assignment.as_ref().map(|a| {
            let mut out = IdAssignment::new();
            for t in &a.topic_partitions {
                out.entry(*t.topic_id.as_bytes())
                    .or_default()
                    .extend(t.partitions.iter().copied());
            }
            out
        }),
    }
}

pub fn leave_group(
    group_id: &str,
    member_id: &str,
    group_instance_id: Option<&str>,
    reason: &str,
    version: i16,
) -> LeaveGroupRequest {
    let r = LeaveGroupRequest::default().with_group_id(GroupId(s(group_id)));
    if version >= 3 {
        let mut m = MemberIdentity::default()
            .with_member_id(s(member_id))
            .with_group_instance_id(opt(group_instance_id));
        if version >= 5 {
            m.reason = Some(s(reason));
        }
        r.with_members(vec![m])
    } else {
        r.with_member_id(s(member_id))
    }
}

/// One offset to commit: next offset to read, its leader epoch, metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

pub fn offset_commit(
    group_id: &str,
    generation: &Generation,
    group_instance_id: Option<&str>,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    topic_ids: &dyn Fn(&str) -> Option<[u8; 16]>,
    version: i16,
) -> OffsetCommitRequest {
    let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, o) in offsets {
        let mut p = OffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition)
            .with_committed_offset(o.offset)
            .with_committed_metadata(Some(s(o.metadata.as_deref().unwrap_or(""))));
        if version >= 6 {
            p.committed_leader_epoch = o.leader_epoch;
        }
        by_topic.entry(&tp.topic).or_default().push(p);
    }
    let mut r = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group_id)))
        .with_generation_id_or_member_epoch(generation.generation_id)
        .with_member_id(s(&generation.member_id))
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    let mut topic = OffsetCommitRequestTopic::default().with_partitions(ps);
                    if version >= 10 {
                        topic.topic_id = uuid::Uuid::from_bytes(topic_ids(t).unwrap_or([0; 16]));
                    } else {
                        topic.name = TopicName(s(t));
                    }
                    topic
                })
                .collect(),
        );
    if (2..=4).contains(&version) {
        r.retention_time_ms = -1;
    }
    if version >= 7 {
        r.group_instance_id = opt(group_instance_id);
    }
    r
}

/// Per-partition commit errors (0 = committed).
pub fn parse_offset_commit(
    resp: &OffsetCommitResponse,
    topic_names: &dyn Fn(&[u8; 16]) -> Option<String>,
) -> Vec<(TopicPartition, i16)> {
    let mut out = Vec::new();
    for t in &resp.topics {
        let name = if t.name.0.is_empty() {
            match topic_names(t.topic_id.as_bytes()) {
                Some(n) => n,
                None => continue,
            }
        } else {
            t.name.0.to_string()
        };
        for p in &t.partitions {
            out.push((
                TopicPartition::new(name.as_str(), p.partition_index),
                p.error_code,
            ));
        }
    }
    out
}

/// `partitions` None = all the group's committed offsets.
pub fn offset_fetch(
    group_id: &str,
    partitions: Option<&[TopicPartition]>,
    require_stable: bool,
    version: i16,
) -> OffsetFetchRequest {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions.unwrap_or(&[]) {
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let mut r = OffsetFetchRequest::default();
    if version >= 8 {
        let topics = partitions.map(|_| {
            by_topic
                .iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopics::default()
                        .with_name(TopicName(s(t)))
                        .with_partition_indexes(ps.clone())
                })
                .collect()
        });
        r.groups = vec![OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(group_id)))
            .with_topics(topics)];
    } else {
        r.group_id = GroupId(s(group_id));
        r.topics = partitions.map(|_| {
            by_topic
                .iter()
                .map(|(t, ps)| {
                    OffsetFetchRequestTopic::default()
                        .with_name(TopicName(s(t)))
                        .with_partition_indexes(ps.clone())
                })
                .collect()
        });
    }
    if version >= 7 {
        r.require_stable = require_stable;
    }
    r
}

/// The error an OffsetFetch answer reports: the group's, else the first
/// partition's (a coordinator that is loading answers per partition).
pub fn offset_fetch_error(
    group_code: i16,
    parts: &[(TopicPartition, OffsetAndMetadata, i16)],
) -> i16 {
    if group_code != codes::NONE {
        return group_code;
    }
    parts
        .iter()
        .map(|p| p.2)
        .find(|c| *c != codes::NONE)
        .unwrap_or(codes::NONE)
}

/// (group error, [(tp, offset or -1, leader epoch, metadata, partition error)]).
/// v8+ answers per group; older ones at the top level.
pub fn parse_offset_fetch(
    resp: &OffsetFetchResponse,
    group_id: &str,
) -> (i16, Vec<(TopicPartition, OffsetAndMetadata, i16)>) {
    fn entry(
        topic: &str,
        partition: i32,
        offset: i64,
        epoch: i32,
        metadata: &Option<StrBytes>,
        code: i16,
    ) -> (TopicPartition, OffsetAndMetadata, i16) {
        let om = OffsetAndMetadata {
            offset,
            leader_epoch: epoch,
            metadata: metadata.as_ref().map(|m| m.to_string()),
        };
        (TopicPartition::new(topic, partition), om, code)
    }
    if let Some(g) = resp
        .groups
        .iter()
        .find(|g| g.group_id.0.as_str() == group_id)
    {
        let out = g
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    entry(
                        t.name.0.as_str(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        &p.metadata,
                        p.error_code,
                    )
                })
            })
            .collect();
        return (g.error_code, out);
    }
    let out = resp
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                entry(
                    t.name.0.as_str(),
                    p.partition_index,
                    p.committed_offset,
                    p.committed_leader_epoch,
                    &p.metadata,
                    p.error_code,
                )
            })
        })
        .collect();
    (resp.error_code, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferrokafka_protocol::kafka_protocol::protocol::Encodable;

    fn enc<T: Encodable>(r: &T, v: i16) {
        let mut b = BytesMut::new();
        r.encode(&mut b, v)
            .unwrap_or_else(|e| panic!("{} v{v}: {e}", std::any::type_name::<T>()));
    }

    #[test]
    fn every_version_encodes_with_the_right_shape() {
        let g = Generation {
            generation_id: 3,
            member_id: "m".into(),
            protocol_name: Some("range".into()),
        };
        let mut offsets = BTreeMap::new();
        offsets.insert(
            TopicPartition::new("t", 0),
            OffsetAndMetadata {
                offset: 5,
                leader_epoch: 1,
                metadata: None,
            },
        );
        let mut assignments = BTreeMap::new();
        assignments.insert("m".to_string(), Bytes::from_static(b"\x00\x00"));
        let tps = [TopicPartition::new("t", 0)];
        for v in 0..=6 {
            enc(&find_coordinator("g", 0, v), v);
        }
        for v in 0..=9 {
            let p = JoinParams {
                group_id: "g",
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
                member_id: "",
                group_instance_id: Some("i"),
                protocols: vec![("range".into(), Bytes::from_static(b"x"))],
                reason: Some("r"),
            };
            enc(&join_group(&p, v), v);
        }
        for v in 0..=5 {
            enc(&sync_group(&g, "g", Some("i"), &assignments, v), v);
            enc(&leave_group("g", "m", Some("i"), "closing", v), v);
        }
        for v in 0..=4 {
            enc(&heartbeat(&g, "g", Some("i"), v), v);
        }
        let mut owned = IdAssignment::new();
        owned.insert([1; 16], [0, 2].into_iter().collect());
        let f = HeartbeatFields {
            member_id: "m".into(),
            member_epoch: 0,
            instance_id: Some("i".into()),
            rack_id: Some("r".into()),
            rebalance_timeout_ms: 1000,
            subscribed_topic_names: Some(vec!["t".into()]),
            subscribed_topic_regex: Some("t.*".into()),
            server_assignor: Some("uniform".into()),
            owned: Some(owned),
        };
        for v in 0..=1 {
            enc(&consumer_group_heartbeat("g", &f, v), v);
        }
        for v in 2..=9 {
            enc(
                &offset_commit("g", &g, Some("i"), &offsets, &|_| Some([1; 16]), v),
                v,
            );
        }
        for v in 1..=9 {
            enc(&offset_fetch("g", Some(&tps), true, v), v);
            enc(&offset_fetch("g", None, false, v.max(2)), v.max(2));
        }
    }

    #[test]
    fn find_coordinator_answer_both_shapes() {
        use ferrokafka_protocol::kafka_protocol::messages::find_coordinator_response::Coordinator;
        use ferrokafka_protocol::kafka_protocol::messages::BrokerId;
        let old = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(2))
            .with_host(s("h"))
            .with_port(9092);
        assert_eq!(
            parse_find_coordinator(&old, "g").unwrap(),
            Node::new(2, "h", 9092, None)
        );
        let new =
            FindCoordinatorResponse::default().with_coordinators(vec![Coordinator::default()
                .with_key(s("g"))
                .with_node_id(BrokerId(3))
                .with_host(s("x"))
                .with_port(1)
                .with_error_code(0)]);
        assert_eq!(parse_find_coordinator(&new, "g").unwrap().id, 3);
        let err = FindCoordinatorResponse::default().with_error_code(15);
        assert_eq!(parse_find_coordinator(&err, "g"), Err(15));
    }
}
