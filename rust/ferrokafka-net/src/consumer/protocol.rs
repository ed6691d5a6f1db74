//! The "consumer" embedded protocol: what members put in JoinGroup metadata
//! (their subscription) and what the leader puts in SyncGroup (assignments).
//! Both are a 2-byte version followed by the struct at that version (Java
//! `ConsumerProtocol`), so Java, librdkafka and ferrokafka members can share a
//! group. Decoding takes the version the sender wrote, including versions
//! newer than ours (their extra fields are in tagged or trailing data we skip).

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ferrokafka_protocol::kafka_protocol::messages::consumer_protocol_assignment::{
    ConsumerProtocolAssignment, TopicPartition as AssignedTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::consumer_protocol_subscription::{
    ConsumerProtocolSubscription, TopicPartition as OwnedTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::TopicName;
use ferrokafka_protocol::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use ferrokafka_protocol::ProtocolError;
use std::collections::BTreeMap;

use crate::cluster::TopicPartition;
use crate::consumer::assignor::MemberSubscription;

/// The highest subscription/assignment version we write (v3 adds rack id).
pub const CONSUMER_PROTOCOL_VERSION: i16 = 3;

fn group_by_topic(parts: &[TopicPartition]) -> BTreeMap<&str, Vec<i32>> {
    let mut m: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in parts {
        m.entry(&tp.topic).or_default().push(tp.partition);
    }
    m
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn invalid(what: &'static str, e: impl std::fmt::Display) -> ProtocolError {
    ProtocolError::invalid(what, e.to_string())
}

pub fn encode_subscription(
    topics: &[String],
    owned: &[TopicPartition],
    generation: i32,
    rack: Option<&str>,
    user_data: Option<Bytes>,
    version: i16,
) -> Result<Bytes, ProtocolError> {
    let sub = ConsumerProtocolSubscription::default()
        .with_topics(
            topics
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        )
        .with_user_data(user_data)
        .with_owned_partitions(
            group_by_topic(owned)
                .into_iter()
                .map(|(t, ps)| {
                    OwnedTopic::default()
                        .with_topic(name(t))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_generation_id(generation)
        .with_rack_id(rack.map(|r| StrBytes::from_string(r.to_string())));
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    sub.encode(&mut buf, version)
        .map_err(|e| invalid("consumer subscription", e))?;
    Ok(buf.freeze())
}

/// Decode a member's JoinGroup metadata into what the assignors need.
pub fn decode_subscription(
    member_id: &str,
    group_instance_id: Option<&str>,
    mut data: Bytes,
) -> Result<MemberSubscription, ProtocolError> {
    if data.remaining() < 2 {
        return Err(ProtocolError::truncated(
            "consumer subscription version",
            2,
            data.remaining(),
        ));
    }
    let version = data.get_i16();
    if version < 0 {
        return Err(invalid("consumer subscription version", version));
    }
    // A newer member's subscription parses as our newest version: fields are
    // only ever appended, so the prefix we know is laid out the same.
    let v = version.min(CONSUMER_PROTOCOL_VERSION);
    let sub = ConsumerProtocolSubscription::decode(&mut data, v)
        .map_err(|e| invalid("consumer subscription", e))?;
    Ok(MemberSubscription {
        member_id: member_id.to_string(),
        group_instance_id: group_instance_id.map(str::to_string),
        topics: sub.topics.iter().map(|t| t.to_string()).collect(),
        owned_partitions: sub
            .owned_partitions
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |&p| TopicPartition::new(t.topic.0.as_str(), p))
            })
            .collect(),
        generation: if v >= 2 { sub.generation_id } else { -1 },
    })
}

pub fn encode_assignment(
    parts: &[TopicPartition],
    user_data: Option<Bytes>,
    version: i16,
) -> Result<Bytes, ProtocolError> {
    let a = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(
            group_by_topic(parts)
                .into_iter()
                .map(|(t, ps)| {
                    AssignedTopic::default()
                        .with_topic(name(t))
                        .with_partitions(ps)
                })
                .collect(),
        )
        .with_user_data(user_data);
    let mut buf = BytesMut::new();
    buf.put_i16(version);
    a.encode(&mut buf, version)
        .map_err(|e| invalid("consumer assignment", e))?;
    Ok(buf.freeze())
}

/// An empty SyncGroup assignment (we got no partitions) is zero bytes.
pub fn decode_assignment(mut data: Bytes) -> Result<Vec<TopicPartition>, ProtocolError> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    if data.remaining() < 2 {
        return Err(ProtocolError::truncated(
            "consumer assignment version",
            2,
            data.remaining(),
        ));
    }
    let version = data.get_i16();
    if version < 0 {
        return Err(invalid("consumer assignment version", version));
    }
    let v = version.min(CONSUMER_PROTOCOL_VERSION);
    let a = ConsumerProtocolAssignment::decode(&mut data, v)
        .map_err(|e| invalid("consumer assignment", e))?;
    Ok(a.assigned_partitions
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |&p| TopicPartition::new(t.topic.0.as_str(), p))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_round_trip_every_version() {
        let owned = vec![
            TopicPartition::new("a", 0),
            TopicPartition::new("a", 2),
            TopicPartition::new("b", 1),
        ];
        for v in 0..=3 {
            let bytes =
                encode_subscription(&["a".into(), "b".into()], &owned, 7, Some("r1"), None, v)
                    .unwrap();
            let m = decode_subscription("m", None, bytes).unwrap();
            assert_eq!(m.topics, vec!["a", "b"]);
            if v >= 1 {
                assert_eq!(m.owned_partitions, owned, "v{v}");
            } else {
                assert!(m.owned_partitions.is_empty());
            }
            assert_eq!(m.generation, if v >= 2 { 7 } else { -1 });
        }
    }

    #[test]
    fn golden_v0_subscription_as_java_writes_it() {
        let bytes = Bytes::from_static(&[
            0x00, 0x00, // version 0
            0x00, 0x00, 0x00, 0x01, // topics: array of 1
            0x00, 0x03, b'f', b'o', b'o', // "foo"
            0xff, 0xff, 0xff, 0xff, // user_data: null
        ]);
        let m = decode_subscription("m", None, bytes.clone()).unwrap();
        assert_eq!(m.topics, vec!["foo"]);
        assert_eq!(
            encode_subscription(&["foo".into()], &[], -1, None, None, 0).unwrap(),
            bytes
        );
    }

    #[test]
    fn newer_version_from_another_client_decodes() {
        let mut b =
            BytesMut::from(&encode_subscription(&["t".into()], &[], 3, None, None, 3).unwrap()[..]);
        b[1] = 9; // claims v9: we read it as v3
        let m = decode_subscription("m", None, b.freeze()).unwrap();
        assert_eq!(m.topics, vec!["t"]);
    }

    #[test]
    fn assignment_round_trip_and_empty() {
        let parts = vec![TopicPartition::new("a", 0), TopicPartition::new("b", 3)];
        for v in 0..=3 {
            let b = encode_assignment(&parts, None, v).unwrap();
            assert_eq!(decode_assignment(b).unwrap(), parts);
        }
        assert!(decode_assignment(Bytes::new()).unwrap().is_empty());
        assert!(decode_assignment(Bytes::from_static(&[0])).is_err());
        assert!(decode_assignment(Bytes::from_static(&[0, 0, 0xff, 0xff])).is_err());
    }
}
