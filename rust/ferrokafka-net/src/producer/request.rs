//! Produce request building and answer parsing, independent of the wire
//! version: topics are named up to v12 and identified by topic id from v13
//! (KIP-516), so both are filled and the encoder writes the one its version has.

use std::collections::BTreeMap;

use bytes::Bytes;
use ferrokafka_protocol::kafka_protocol::messages::produce_request::{
    PartitionProduceData, TopicProduceData,
};
use ferrokafka_protocol::kafka_protocol::messages::produce_response::ProduceResponse;
use ferrokafka_protocol::kafka_protocol::messages::{ProduceRequest, TopicName, TransactionalId};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

use crate::cluster::TopicPartition;

/// One batch to send: its partition, encoded RecordBatch bytes, and the
/// topic id when metadata knows it.
#[derive(Debug, Clone)]
pub struct BatchToSend {
    pub tp: TopicPartition,
    pub topic_id: Option<[u8; 16]>,
    pub records: Bytes,
}

pub fn build_produce_request(
    acks: i16,
    timeout_ms: i32,
    transactional_id: Option<&str>,
    batches: &[BatchToSend],
) -> ProduceRequest {
    // Group by topic, keeping partitions in order, one entry per topic as the
    // broker expects (duplicates would be rejected).
    let mut by_topic: BTreeMap<&str, (Option<[u8; 16]>, Vec<PartitionProduceData>)> =
        BTreeMap::new();
    for b in batches {
        let entry = by_topic
            .entry(&b.tp.topic)
            .or_insert((b.topic_id, Vec::new()));
        entry.1.push(
            PartitionProduceData::default()
                .with_index(b.tp.partition)
                .with_records(Some(b.records.clone())),
        );
    }
    let topic_data = by_topic
        .into_iter()
        .map(|(name, (id, parts))| {
            let mut t = TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(name.to_string())))
                .with_partition_data(parts);
            if let Some(id) = id {
                t.topic_id = uuid::Uuid::from_bytes(id);
            }
            t
        })
        .collect();
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_transactional_id(
            transactional_id.map(|t| TransactionalId(StrBytes::from_string(t.to_string()))),
        )
        .with_topic_data(topic_data)
}

/// InitProducerId for an idempotent (non-transactional) producer. From v3,
/// passing the current id/epoch asks the broker to bump the epoch (KIP-360)
/// instead of handing out a new id, which keeps the producer's identity.
pub fn init_producer_id(
    current: Option<(i64, i16)>,
    version: i16,
) -> ferrokafka_protocol::kafka_protocol::messages::InitProducerIdRequest {
    use ferrokafka_protocol::kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
    // Java sends Integer.MAX_VALUE for a non-transactional producer; brokers
    // (and the librdkafka mock) reject a negative timeout.
    // The schema default of transactional_id is Some(""), which a broker
    // reads as a transactional producer with an empty id: say null.
    let r = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(i32::MAX);
    match current {
        Some((id, epoch)) if version >= 3 => r
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        _ => r.with_producer_id(ProducerId(-1)).with_producer_epoch(-1),
    }
}

/// One partition's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionResult {
    pub tp: TopicPartition,
    pub error_code: i16,
    pub base_offset: i64,
    /// -1 unless the topic uses LogAppendTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    pub error_message: Option<String>,
    /// Indexes of records the broker rejected (KIP-467); the rest of the batch
    /// may be retried without them.
    pub record_errors: Vec<(i32, Option<String>)>,
    /// KIP-951: the new leader when the error is NOT_LEADER_OR_FOLLOWER.
    pub current_leader: Option<(i32, i32)>,
}

/// Flatten a Produce answer. `topic_names` maps topic ids back to names for
/// v13+ answers, which carry ids only.
pub fn parse_produce_response(
    resp: &ProduceResponse,
    topic_names: &dyn Fn(&[u8; 16]) -> Option<String>,
) -> Vec<PartitionResult> {
    let mut out = Vec::new();
    for t in &resp.responses {
        let name: String = if t.name.0.is_empty() {
            let id: [u8; 16] = *t.topic_id.as_bytes();
            match topic_names(&id) {
                Some(n) => n,
                None => continue,
            }
        } else {
            t.name.0.to_string()
        };
        for p in &t.partition_responses {
            let leader = (p.current_leader.leader_id.0 >= 0)
                .then_some((p.current_leader.leader_id.0, p.current_leader.leader_epoch));
            out.push(PartitionResult {
                tp: TopicPartition::new(name.as_str(), p.index),
                error_code: p.error_code,
                base_offset: p.base_offset,
                log_append_time_ms: p.log_append_time_ms,
                log_start_offset: p.log_start_offset,
                error_message: p.error_message.as_ref().map(|m| m.to_string()),
                record_errors: p
                    .record_errors
                    .iter()
                    .map(|e| {
                        (
                            e.batch_index,
                            e.batch_index_error_message.as_ref().map(|m| m.to_string()),
                        )
                    })
                    .collect(),
                current_leader: leader,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferrokafka_protocol::kafka_protocol::protocol::Encodable;

    #[test]
    fn groups_partitions_by_topic_and_round_trips_every_version() {
        let batches = vec![
            BatchToSend {
                tp: TopicPartition::new("b", 1),
                topic_id: Some([2; 16]),
                records: Bytes::from_static(b"x"),
            },
            BatchToSend {
                tp: TopicPartition::new("a", 0),
                topic_id: Some([1; 16]),
                records: Bytes::from_static(b"y"),
            },
            BatchToSend {
                tp: TopicPartition::new("b", 0),
                topic_id: Some([2; 16]),
                records: Bytes::from_static(b"z"),
            },
        ];
        let req = build_produce_request(-1, 30_000, None, &batches);
        assert_eq!(req.topic_data.len(), 2);
        assert_eq!(req.topic_data[0].name.0.as_str(), "a");
        assert_eq!(req.topic_data[1].partition_data.len(), 2);
        // Every version encodes; v13 writes a 16-byte id where v12 wrote a
        // compact string of 2 bytes (length + "a"), 14 more per topic.
        let size = |v: i16| {
            let mut buf = BytesMut::new();
            req.encode(&mut buf, v).unwrap();
            buf.len()
        };
        for v in 3..=13 {
            assert!(size(v) > 0);
        }
        assert_eq!(size(13), size(12) + 2 * 14);
    }

    #[test]
    fn init_producer_id_is_non_transactional_and_bumps_from_v3() {
        let r = init_producer_id(None, 4);
        assert_eq!(r.transactional_id, None);
        assert_eq!(r.transaction_timeout_ms, i32::MAX);
        assert_eq!(r.producer_id.0, -1);
        let bump = init_producer_id(Some((7, 2)), 3);
        assert_eq!((bump.producer_id.0, bump.producer_epoch), (7, 2));
        // Before v3 the fields do not exist: always a fresh id.
        assert_eq!(init_producer_id(Some((7, 2)), 2).producer_id.0, -1);
    }
}
