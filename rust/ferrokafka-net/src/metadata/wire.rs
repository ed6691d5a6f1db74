//! Metadata requests and answers on the wire: `MetadataRequestSpec` -> the
//! schema crate's `MetadataRequest` at a negotiated version, and its
//! `MetadataResponse` -> our `cluster::MetadataResponse`. The network client
//! calls these from `UpdaterContext::send_metadata_request` and when the
//! internal Metadata answer arrives, so version quirks live in one place.

use ferrokafka_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use ferrokafka_protocol::kafka_protocol::messages::metadata_response::MetadataResponse as WireResponse;
use ferrokafka_protocol::kafka_protocol::messages::{MetadataRequest, TopicName};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

use crate::cluster::{MetadataResponse, Node, PartitionMetadata, TopicMetadata};
use crate::error::{Error, Result};
use crate::updater::MetadataRequestSpec;

/// Metadata API key.
pub const API_KEY: i16 = 3;
/// Versions the schema crate (and so this client) can encode.
pub const MIN_VERSION: i16 = 0;
pub const MAX_VERSION: i16 = 13;

/// The request for `spec` at `version`.
///
/// * v0 has no "null = all topics": an empty list means all topics there, so
///   `None` is sent as `[]` (and "no topics" cannot be asked at v0: it asks
///   for all, a harmless superset).
/// * `allow_auto_topic_creation` exists from v4; older versions always
///   auto-create (the broker's setting decides), so it is left at its default.
pub fn build_metadata_request(spec: &MetadataRequestSpec, version: i16) -> MetadataRequest {
    let topics = spec.topics.as_ref().map(|names| {
        names
            .iter()
            .map(|n| {
                MetadataRequestTopic::default()
                    .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
            })
            .collect::<Vec<_>>()
    });
    let topics = match (topics, version) {
        (None, 0) => Some(Vec::new()),
        (t, _) => t,
    };
    let mut req = MetadataRequest::default().with_topics(topics);
    if version >= 4 {
        req = req.with_allow_auto_topic_creation(spec.allow_auto_topic_creation);
    }
    req
}

fn non_nil(id: &[u8; 16]) -> Option<[u8; 16]> {
    id.iter().any(|b| *b != 0).then_some(*id)
}

/// Our form of an answer. A top-level error (v13+, e.g. REBOOTSTRAP_REQUIRED)
/// is returned as `Error::Broker` for the caller to treat as a failed update.
/// Brokers with an impossible port are dropped (nobody could connect to them).
pub fn metadata_response_from_wire(r: &WireResponse) -> Result<MetadataResponse> {
    if r.error_code != 0 {
        return Err(Error::broker(r.error_code, None));
    }
    let brokers = r
        .brokers
        .iter()
        .filter_map(|b| {
            let port = u16::try_from(b.port).ok().filter(|p| *p > 0)?;
            Some(Node::new(
                b.node_id.0,
                b.host.to_string(),
                port,
                b.rack.as_ref().map(|s| s.to_string()),
            ))
        })
        .collect();
    let topics = r
        .topics
        .iter()
        .map(|t| TopicMetadata {
            // v12+ may omit the name for topics asked by id; we ask by name.
            name: t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
            topic_id: non_nil(t.topic_id.as_bytes()),
            partitions: t
                .partitions
                .iter()
                .map(|p| PartitionMetadata {
                    partition: p.partition_index,
                    leader_id: p.leader_id.0,
                    // Absent before v7: the schema default is -1 (unknown).
                    leader_epoch: p.leader_epoch,
                    replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                    isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                    offline_replicas: p.offline_replicas.iter().map(|b| b.0).collect(),
                    error_code: p.error_code,
                })
                .collect(),
            error_code: t.error_code,
            is_internal: t.is_internal,
        })
        .collect();
    Ok(MetadataResponse {
        brokers,
        topics,
        cluster_id: r.cluster_id.as_ref().map(|s| s.to_string()),
        controller_id: r.controller_id.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferrokafka_protocol::kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use ferrokafka_protocol::kafka_protocol::messages::BrokerId;
    use ferrokafka_protocol::kafka_protocol::protocol::Encodable;

    fn spec(topics: Option<Vec<&str>>) -> MetadataRequestSpec {
        MetadataRequestSpec {
            topics: topics.map(|t| t.into_iter().map(String::from).collect()),
            allow_auto_topic_creation: false,
        }
    }

    #[test]
    fn request_encodes_at_every_version() {
        // The schema crate is built for the client side: requests encode,
        // responses decode, so requests are checked by their encoding.
        for v in MIN_VERSION..=MAX_VERSION {
            let mut sizes = vec![];
            for s in [spec(None), spec(Some(vec![])), spec(Some(vec!["a", "b"]))] {
                let req = build_metadata_request(&s, v);
                let mut buf = BytesMut::new();
                req.encode(&mut buf, v)
                    .unwrap_or_else(|e| panic!("v{v} {s:?}: {e}"));
                sizes.push(buf.len());
                if v >= 4 {
                    assert!(!req.allow_auto_topic_creation);
                }
                if v == 0 && s.topics.is_none() {
                    assert_eq!(req.topics, Some(vec![]));
                }
            }
            // "two topics" is longer than "no topics"/"all topics".
            assert!(
                sizes[2] > sizes[1] && sizes[2] > sizes[0],
                "v{v}: {sizes:?}"
            );
        }
    }

    #[test]
    fn response_converts() {
        let wire = WireResponse::default()
            .with_brokers(vec![
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("h1"))
                    .with_port(9092)
                    .with_rack(Some(StrBytes::from_static_str("r"))),
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(2))
                    .with_host(StrBytes::from_static_str("bad"))
                    .with_port(-1),
            ])
            .with_cluster_id(Some(StrBytes::from_static_str("cid")))
            .with_controller_id(BrokerId(1))
            .with_topics(vec![MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("t"))))
                .with_is_internal(true)
                .with_partitions(vec![MetadataResponsePartition::default()
                    .with_partition_index(0)
                    .with_leader_id(BrokerId(1))
                    .with_leader_epoch(4)
                    .with_replica_nodes(vec![BrokerId(1), BrokerId(2)])
                    .with_isr_nodes(vec![BrokerId(1)])])]);
        let r = metadata_response_from_wire(&wire).unwrap();
        assert_eq!(r.brokers, vec![Node::new(1, "h1", 9092, Some("r".into()))]);
        assert_eq!(r.controller_id, 1);
        assert_eq!(r.cluster_id.as_deref(), Some("cid"));
        let t = &r.topics[0];
        assert_eq!(t.name, "t");
        assert!(t.is_internal);
        assert_eq!(t.topic_id, None);
        assert_eq!(t.partitions[0].replicas, vec![1, 2]);
        assert_eq!(t.partitions[0].isr, vec![1]);
        assert_eq!(t.partitions[0].leader_epoch, 4);
        // A partition from a pre-v7 answer carries the schema default: unknown.
        assert_eq!(MetadataResponsePartition::default().leader_epoch, -1);
        assert_eq!(WireResponse::default().controller_id.0, -1);
        let err = WireResponse::default().with_error_code(129);
        assert_eq!(metadata_response_from_wire(&err).unwrap_err().code(), 129);
    }
}
