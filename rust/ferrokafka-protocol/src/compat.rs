//! Fit a request body to the version it will be sent at.
//!
//! A caller builds a request once, without knowing which version the broker
//! will take (that is settled per connection after ApiVersions). A few
//! messages changed shape across versions — a single key became a batch of
//! keys, names became ids — so the one place that picks the version also
//! moves such fields to where that version keeps them. Everything else is
//! left alone: a field the version cannot carry still fails to encode, which
//! is the right error (e.g. static membership against a broker too old).

use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::RequestKind;

pub fn fit_to_version(body: &mut RequestKind, version: i16) {
    match body {
        RequestKind::FindCoordinator(r) => {
            if version >= 4 {
                if r.coordinator_keys.is_empty() && !r.key.is_empty() {
                    r.coordinator_keys = vec![std::mem::take(&mut r.key)];
                }
            } else if r.key.is_empty() && r.coordinator_keys.len() == 1 {
                r.key = r.coordinator_keys.pop().expect("len checked");
            }
        }
        RequestKind::OffsetFetch(r) => {
            if version >= 8 {
                if r.groups.is_empty() && !r.group_id.0.is_empty() {
                    let topics = r.topics.take().map(|ts| {
                        ts.into_iter()
                            .map(|t| {
                                OffsetFetchRequestTopics::default()
                                    .with_name(t.name)
                                    .with_partition_indexes(t.partition_indexes)
                            })
                            .collect()
                    });
                    // v8+ encodes the old top-level list only as "present
                    // and empty"; None would be rejected.
                    r.topics = Some(Vec::new());
                    let gid = std::mem::take(&mut r.group_id);
                    r.groups = vec![OffsetFetchRequestGroup::default()
                        .with_group_id(gid)
                        .with_topics(topics)];
                }
            } else if r.group_id.0.is_empty() && r.groups.len() == 1 {
                let g = r.groups.pop().expect("len checked");
                r.group_id = g.group_id;
                r.topics = g.topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| {
                            OffsetFetchRequestTopic::default()
                                .with_name(t.name)
                                .with_partition_indexes(t.partition_indexes)
                        })
                        .collect()
                });
            }
        }
        RequestKind::DeleteTopics(r) => {
            if version >= 6 {
                if r.topics.is_empty() && !r.topic_names.is_empty() {
                    r.topics = std::mem::take(&mut r.topic_names)
                        .into_iter()
                        .map(|n| DeleteTopicState::default().with_name(Some(n)))
                        .collect();
                }
            } else if r.topic_names.is_empty()
                && !r.topics.is_empty()
                && r.topics.iter().all(|t| t.name.is_some())
            {
                r.topic_names = std::mem::take(&mut r.topics)
                    .into_iter()
                    .filter_map(|t| t.name)
                    .collect();
            }
        }
        RequestKind::LeaveGroup(r) => {
            if version >= 3 {
                if r.members.is_empty() && !r.member_id.is_empty() {
                    r.members =
                        vec![MemberIdentity::default()
                            .with_member_id(std::mem::take(&mut r.member_id))];
                }
            } else if r.member_id.is_empty()
                && r.members.len() == 1
                && r.members[0].group_instance_id.is_none()
            {
                r.member_id = r.members.pop().expect("len checked").member_id;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::{
        DeleteTopicsRequest, FindCoordinatorRequest, GroupId, LeaveGroupRequest,
        OffsetFetchRequest, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;

    fn s(v: &str) -> StrBytes {
        StrBytes::from_string(v.into())
    }

    fn encodes(body: &RequestKind, v: i16) -> bool {
        let mut b = BytesMut::new();
        body.encode(&mut b, v).is_ok()
    }

    #[test]
    fn find_coordinator_single_key_fits_every_version() {
        for v in 0..=6 {
            let mut body =
                RequestKind::FindCoordinator(FindCoordinatorRequest::default().with_key(s("g")));
            fit_to_version(&mut body, v);
            assert!(encodes(&body, v), "v{v}");
            let mut batched = RequestKind::FindCoordinator(
                FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")]),
            );
            fit_to_version(&mut batched, v);
            assert!(encodes(&batched, v), "batched v{v}");
        }
    }

    #[test]
    fn offset_fetch_both_shapes_fit_every_version() {
        for v in 1..=9 {
            let topics = Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![0])]);
            let mut body = RequestKind::OffsetFetch(
                OffsetFetchRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_topics(topics),
            );
            fit_to_version(&mut body, v);
            assert!(encodes(&body, v), "v{v}");
            if let RequestKind::OffsetFetch(r) = &body {
                if v >= 8 {
                    assert_eq!(r.groups[0].group_id.0.as_str(), "g");
                } else {
                    assert_eq!(r.group_id.0.as_str(), "g");
                }
            }
        }
    }

    #[test]
    fn delete_topics_and_leave_group_fit() {
        for v in 1..=6 {
            let mut body = RequestKind::DeleteTopics(
                DeleteTopicsRequest::default().with_topic_names(vec![TopicName(s("t"))]),
            );
            fit_to_version(&mut body, v);
            assert!(encodes(&body, v), "delete v{v}");
        }
        for v in 0..=5 {
            let mut body = RequestKind::LeaveGroup(
                LeaveGroupRequest::default()
                    .with_group_id(GroupId(s("g")))
                    .with_member_id(s("m")),
            );
            fit_to_version(&mut body, v);
            assert!(encodes(&body, v), "leave v{v}");
        }
    }
}
