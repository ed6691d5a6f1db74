//! Admin request builders and answer parsers (CreateTopics, DeleteTopics,
//! ListGroups), version-aware like the group builders.

use ferrokafka_protocol::kafka_protocol::messages::create_topics_request::{
    CreatableTopic, CreatableTopicConfig,
};
use ferrokafka_protocol::kafka_protocol::messages::create_topics_response::CreateTopicsResponse;
use ferrokafka_protocol::kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use ferrokafka_protocol::kafka_protocol::messages::delete_topics_response::DeleteTopicsResponse;
use ferrokafka_protocol::kafka_protocol::messages::list_groups_response::ListGroupsResponse;
use ferrokafka_protocol::kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, ListGroupsRequest, TopicName,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

pub mod client;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    pub name: String,
    /// -1: broker default (CreateTopics v4+).
    pub num_partitions: i32,
    /// -1: broker default (CreateTopics v4+).
    pub replication_factor: i16,
    pub config: Vec<(String, String)>,
}

pub fn create_topics(
    topics: &[NewTopic],
    timeout_ms: i32,
    validate_only: bool,
) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(timeout_ms)
        .with_validate_only(validate_only)
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(TopicName(s(&t.name)))
                        .with_num_partitions(t.num_partitions)
                        .with_replication_factor(t.replication_factor)
                        .with_configs(
                            t.config
                                .iter()
                                .map(|(k, v)| {
                                    CreatableTopicConfig::default()
                                        .with_name(s(k))
                                        .with_value(Some(s(v)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// (topic, error code, message) per topic; 0 = created.
pub fn parse_create_topics(resp: &CreateTopicsResponse) -> Vec<(String, i16, Option<String>)> {
    resp.topics
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.error_code,
                t.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

pub fn delete_topics(names: &[String], timeout_ms: i32, version: i16) -> DeleteTopicsRequest {
    let r = DeleteTopicsRequest::default().with_timeout_ms(timeout_ms);
    if version >= 6 {
        r.with_topics(
            names
                .iter()
                .map(|n| DeleteTopicState::default().with_name(Some(TopicName(s(n)))))
                .collect(),
        )
    } else {
        r.with_topic_names(names.iter().map(|n| TopicName(s(n))).collect())
    }
}

pub fn parse_delete_topics(resp: &DeleteTopicsResponse) -> Vec<(String, i16, Option<String>)> {
    resp.responses
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                t.error_code,
                t.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

pub fn list_groups() -> ListGroupsRequest {
    ListGroupsRequest::default()
}

/// (error code, [(group id, protocol type, state)]).
pub fn parse_list_groups(resp: &ListGroupsResponse) -> (i16, Vec<(String, String, String)>) {
    (
        resp.error_code,
        resp.groups
            .iter()
            .map(|g| {
                (
                    g.group_id.0.to_string(),
                    g.protocol_type.to_string(),
                    g.group_state.to_string(),
                )
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferrokafka_protocol::kafka_protocol::protocol::Encodable;

    #[test]
    fn encode_every_version() {
        let t = NewTopic {
            name: "t".into(),
            num_partitions: 3,
            replication_factor: 1,
            config: vec![("retention.ms".into(), "1000".into())],
        };
        for v in 2..=7 {
            create_topics(std::slice::from_ref(&t), 1000, false)
                .encode(&mut BytesMut::new(), v)
                .unwrap();
        }
        for v in 1..=6 {
            delete_topics(&["t".into()], 1000, v)
                .encode(&mut BytesMut::new(), v)
                .unwrap();
        }
        for v in 0..=5 {
            list_groups().encode(&mut BytesMut::new(), v).unwrap();
        }
    }
}
