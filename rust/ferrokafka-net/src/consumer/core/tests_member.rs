//! `ConsumerCore` under `group_protocol = "consumer"` (KIP-848) with fake
//! answers and a fake clock: join, incremental reconciliation (commit and
//! revoke first, callbacks, then the acknowledgement), fencing, coordinator
//! loss, a broker without the API, leaving.

use std::collections::{BTreeSet, HashMap};

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment, TopicPartitions,
};
use ferrokafka_protocol::kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, OffsetCommitRequest,
    RequestKind, ResponseKind,
};

use super::tests::*;
use super::tests_group::coordinator_answer;
use super::*;
use crate::cluster::PartitionMetadata;

const TID: [u8; 16] = [9; 16];

/// Topic "t" (3 partitions, id TID) led by broker 1.
fn cluster_with_ids() -> Arc<Cluster> {
    let mut parts = HashMap::new();
    parts.insert(
        "t".to_string(),
        (0..3)
            .map(|p| PartitionMetadata::new(p, 1, 0, vec![1], vec![1]))
            .collect(),
    );
    let mut ids = HashMap::new();
    ids.insert("t".to_string(), TID);
    Arc::new(Cluster::new(
        None,
        vec![node(1), node(2)],
        parts,
        &ids,
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        None,
    ))
}

fn member_cfg() -> ConsumerConfig {
    ConsumerConfig {
        group_protocol: GroupProtocol::Consumer,
        enable_auto_commit: true,
        auto_commit_interval_ms: 60_000,
        ..group_cfg()
    }
}

fn answer(code: i16, epoch: i32, parts: Option<&[i32]>) -> ResponseKind {
    let mut r = ConsumerGroupHeartbeatResponse::default();
    r.error_code = code;
    r.member_epoch = epoch;
    r.heartbeat_interval_ms = 1000;
    r.assignment = parts.map(|ps| {
        Assignment::default().with_topic_partitions(vec![TopicPartitions::default()
            .with_topic_id(uuid::Uuid::from_bytes(TID))
            .with_partitions(ps.to_vec())])
    });
    ResponseKind::ConsumerGroupHeartbeat(r)
}

fn heartbeat_of(req: Request) -> (Tag, ConsumerGroupHeartbeatRequest) {
    let Request { body, tag, .. } = req;
    match body_at_body(body, 1) {
        RequestKind::ConsumerGroupHeartbeat(r) => (tag, r),
        other => panic!("not a heartbeat: {other:?}"),
    }
}

fn owned_in(r: &ConsumerGroupHeartbeatRequest) -> Option<Vec<i32>> {
    r.topic_partitions.as_ref().map(|tps| {
        tps.iter()
            .flat_map(|t| {
                assert_eq!(t.topic_id.as_bytes(), &TID);
                t.partitions.clone()
            })
            .collect()
    })
}

/// The one heartbeat among the requests of `actions` (panics otherwise).
fn the_heartbeat(actions: Vec<Action>) -> (Tag, ConsumerGroupHeartbeatRequest) {
    let mut hbs: Vec<Request> = sends(actions)
        .into_iter()
        .filter(|r| matches!(r.tag, Tag::MemberHeartbeat { .. } | Tag::Leave))
        .collect();
    assert_eq!(hbs.len(), 1, "{hbs:?}");
    heartbeat_of(hbs.remove(0))
}

fn no_heartbeat(actions: Vec<Action>) -> bool {
    sends(actions)
        .iter()
        .all(|r| !matches!(r.tag, Tag::MemberHeartbeat { .. }))
}

fn poll_events(c: &mut ConsumerCore) -> Vec<RebalanceEvent> {
    c.events_unacked = !c.events.is_empty();
    c.events.drain(..).collect()
}

/// Subscribed to "t", coordinator found, join sent and answered with epoch
/// 1 and `parts`; the assignment's events are still to be polled.
fn joined(parts: &[i32]) -> ConsumerCore {
    let mut c = ConsumerCore::new(member_cfg(), 0);
    c.set_cluster(cluster_with_ids());
    c.subscribe(vec!["t".into()]).unwrap();
    c.on_poll(0).unwrap();
    let reqs = sends(c.step(0).0);
    let find = reqs
        .into_iter()
        .find(|r| matches!(r.tag, Tag::FindCoordinator))
        .expect("coordinator lookup first");
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let (tag, join) = the_heartbeat(c.step(1).0);
    assert_eq!(join.member_epoch, 0);
    assert!(
        !join.member_id.is_empty(),
        "KIP-1082: the client names itself"
    );
    assert_eq!(join.group_id.as_str(), "g");
    assert_eq!(
        join.subscribed_topic_names
            .as_ref()
            .map(|v| v.iter().map(|t| t.as_str().to_string()).collect::<Vec<_>>()),
        Some(vec!["t".to_string()])
    );
    assert_eq!(join.rebalance_timeout_ms, 300_000);
    assert_eq!(owned_in(&join), Some(vec![]));
    c.on_answer(tag, ok(answer(0, 1, Some(parts))), 2);
    c
}

#[test]
fn join_assigns_then_acknowledges_with_the_owned_partitions() {
    let mut c = joined(&[0, 1, 2]);
    let actions = c.step(3).0;
    assert!(no_heartbeat(actions), "the ack waits for the callbacks");
    assert_eq!(
        poll_events(&mut c),
        vec![RebalanceEvent::Assigned(vec![tp(0), tp(1), tp(2)])]
    );
    assert_eq!(c.group.as_ref().unwrap().generation().generation_id, 1);
    assert!(no_heartbeat(c.step(4).0), "callbacks not acknowledged yet");
    c.events_unacked = false;
    let (tag, ack) = the_heartbeat(c.step(5).0);
    assert_eq!(ack.member_epoch, 1);
    assert_eq!(owned_in(&ack), Some(vec![0, 1, 2]));
    assert_eq!(ack.subscribed_topic_names, None, "only what changed");
    assert_eq!(ack.rebalance_timeout_ms, -1);
    c.on_answer(tag, ok(answer(0, 1, None)), 6);
    assert!(
        no_heartbeat(c.step(500).0),
        "interval from the answer (1 s)"
    );
    let (_, hb) = the_heartbeat(c.step(1006).0);
    assert_eq!(owned_in(&hb), None, "ownership unchanged");
}

/// `joined` + the assignment taken and acknowledged.
fn stable(parts: &[i32]) -> (ConsumerCore, i64) {
    let mut c = joined(parts);
    c.step(3);
    poll_events(&mut c);
    c.events_unacked = false;
    let (tag, _) = the_heartbeat(c.step(5).0);
    c.on_answer(tag, ok(answer(0, 1, None)), 6);
    (c, 6)
}

#[test]
fn revocation_commits_first_then_calls_back_then_acknowledges() {
    let (mut c, _) = stable(&[0, 1, 2]);
    // Consumed up to 42 on partition 2.
    c.subs.seek(&tp(2), 42, -1).unwrap();
    let (tag, _) = the_heartbeat(c.step(1006).0);
    c.on_answer(tag, ok(answer(0, 2, Some(&[0, 1]))), 1007);
    let reqs = sends(c.step(1008).0);
    let commit = reqs
        .into_iter()
        .find(|r| matches!(r.tag, Tag::AutoCommit { pre_join: true, .. }))
        .expect("auto-commit before revoking");
    let Request { body, tag, .. } = commit;
    match body_at_body(body, 9) {
        RequestKind::OffsetCommit(OffsetCommitRequest {
            generation_id_or_member_epoch,
            member_id,
            ..
        }) => {
            assert_eq!(generation_id_or_member_epoch, 2, "the member epoch");
            assert_eq!(member_id.as_str(), c.member.as_ref().unwrap().member_id());
        }
        other => panic!("{other:?}"),
    }
    assert!(
        c.events.is_empty(),
        "nothing revoked before the commit is answered"
    );
    assert!(c.subs.is_assigned(&tp(2)));
    c.on_answer(tag, ok(offset_commit_answer(&[(2, 0)])), 1009);
    let actions = c.step(1010).0;
    assert!(no_heartbeat(actions));
    assert!(
        !c.subs.is_assigned(&tp(2)),
        "never owned past the revocation"
    );
    assert_eq!(
        poll_events(&mut c),
        vec![
            RebalanceEvent::Revoked(vec![tp(2)]),
            RebalanceEvent::Assigned(vec![])
        ]
    );
    c.events_unacked = false;
    let (_, ack) = the_heartbeat(c.step(1011).0);
    assert_eq!(ack.member_epoch, 2);
    assert_eq!(owned_in(&ack), Some(vec![0, 1]));
}

#[test]
fn fencing_loses_the_partitions_and_rejoins_with_epoch_zero() {
    for code in [codes::FENCED_MEMBER_EPOCH, codes::UNKNOWN_MEMBER_ID] {
        let (mut c, _) = stable(&[0, 1]);
        let id = c.member.as_ref().unwrap().member_id().to_string();
        let (tag, _) = the_heartbeat(c.step(1006).0);
        c.on_answer(tag, ok(answer(code, -1, None)), 1007);
        assert!(c.subs.assigned_partitions().next().is_none());
        assert!(
            no_heartbeat(c.step(1008).0),
            "rejoin waits for on_partitions_lost"
        );
        assert_eq!(
            poll_events(&mut c),
            vec![RebalanceEvent::Lost(vec![tp(0), tp(1)])]
        );
        c.events_unacked = false;
        let (_, join) = the_heartbeat(c.step(1009).0);
        assert_eq!(join.member_epoch, 0);
        assert_eq!(join.member_id.as_str(), id, "same member id");
        assert!(join.subscribed_topic_names.is_some(), "a full request");
        assert_eq!(owned_in(&join), Some(vec![]));
    }
}

#[test]
fn coordinator_errors_look_it_up_again_and_send_a_full_heartbeat() {
    let (mut c, _) = stable(&[0]);
    let (tag, _) = the_heartbeat(c.step(1006).0);
    c.on_answer(tag, ok(answer(codes::NOT_COORDINATOR, 1, None)), 1007);
    assert!(c.group.as_ref().unwrap().coordinator_unknown());
    assert!(c.subs.is_assigned(&tp(0)), "still a member: nothing lost");
    let reqs = sends(c.step(1200).0);
    let find = reqs
        .into_iter()
        .find(|r| matches!(r.tag, Tag::FindCoordinator))
        .expect("lookup again");
    c.on_answer(find.tag, ok(coordinator_answer(2)), 1201);
    let (_, hb) = the_heartbeat(c.step(1400).0);
    assert_eq!(hb.member_epoch, 1);
    assert!(hb.subscribed_topic_names.is_some());
    assert_eq!(owned_in(&hb), Some(vec![0]));
}

#[test]
fn a_broker_without_the_api_is_a_clear_error_on_poll() {
    let mut c = ConsumerCore::new(member_cfg(), 0);
    c.set_cluster(cluster_with_ids());
    c.subscribe(vec!["t".into()]).unwrap();
    c.on_poll(0).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let (tag, _) = the_heartbeat(c.step(1).0);
    let unsupported = Error::UnsupportedVersion {
        api: "ConsumerGroupHeartbeat".into(),
        node_id: 1,
        broker_min: -1,
        broker_max: -1,
        client_min: 0,
        client_max: 1,
    };
    c.on_answer(tag, Err(unsupported), 2);
    let e = c.on_poll(3).unwrap_err();
    assert_eq!(e.code(), codes::UNSUPPORTED_VERSION);
    assert!(e.to_string().contains("group_protocol=\"consumer\""), "{e}");
    assert!(no_heartbeat(c.step(10_000).0), "no retry loop");
}

#[test]
fn fatal_and_raised_heartbeat_errors_reach_poll() {
    let mut c = joined(&[0]);
    c.step(3);
    poll_events(&mut c);
    c.events_unacked = false;
    let (tag, _) = the_heartbeat(c.step(5).0);
    c.on_answer(
        tag,
        ok(answer(codes::TOPIC_AUTHORIZATION_FAILED, 1, None)),
        6,
    );
    assert_eq!(c.errors.pop_front().map(|e| e.code()), Some(29));
    assert!(c.on_poll(7).is_ok(), "not fatal");
    let (tag, _) = the_heartbeat(c.step(200).0);
    c.on_answer(tag, ok(answer(codes::GROUP_MAX_SIZE_REACHED, 1, None)), 201);
    assert_eq!(
        c.on_poll(202).unwrap_err().code(),
        codes::GROUP_MAX_SIZE_REACHED
    );
}

#[test]
fn close_leaves_with_epoch_minus_one_and_static_members_with_minus_two() {
    let (mut c, _) = stable(&[0]);
    let leave = c.close().expect("a member leaves");
    assert!(matches!(leave.tag, Tag::Leave));
    let (_, r) = heartbeat_of(leave);
    assert_eq!(r.member_epoch, -1);
    let cfg = ConsumerConfig {
        group_instance_id: Some("i-1".into()),
        ..member_cfg()
    };
    let mut c = ConsumerCore::new(cfg, 0);
    c.set_cluster(cluster_with_ids());
    c.subscribe(vec!["t".into()]).unwrap();
    c.on_poll(0).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let (tag, join) = the_heartbeat(c.step(1).0);
    assert_eq!(join.instance_id.as_ref().map(|s| s.as_str()), Some("i-1"));
    c.on_answer(tag, ok(answer(0, 1, Some(&[0]))), 2);
    let (_, r) = heartbeat_of(c.close().expect("leave"));
    assert_eq!(r.member_epoch, -2);
}

#[test]
fn unknown_topic_ids_wait_for_metadata_and_are_not_owned() {
    let mut c = ConsumerCore::new(member_cfg(), 0);
    c.set_cluster(cluster(&[("t", 3)])); // no topic ids yet
    c.subscribe(vec!["t".into()]).unwrap();
    c.on_poll(0).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let (tag, _) = the_heartbeat(c.step(1).0);
    c.on_answer(tag, ok(answer(0, 1, Some(&[0, 1]))), 2);
    let actions = c.step(3).0;
    assert!(asks_metadata(&actions));
    assert!(c.subs.assigned_partitions().next().is_none());
    c.set_cluster(cluster_with_ids());
    c.step(4);
    assert_eq!(
        poll_events(&mut c),
        vec![RebalanceEvent::Assigned(vec![tp(0), tp(1)])]
    );
}

#[test]
fn poll_timeout_leaves_and_the_next_poll_rejoins() {
    let (mut c, _) = stable(&[0]);
    // Heartbeats keep going without polls until max_poll_interval_ms.
    let actions = c.step(300_001).0;
    let (_, leave) = the_heartbeat(actions);
    assert_eq!(leave.member_epoch, -1);
    assert_eq!(poll_events(&mut c), vec![RebalanceEvent::Lost(vec![tp(0)])]);
    c.events_unacked = false;
    assert!(no_heartbeat(c.step(300_100).0), "no rejoin before a poll");
    assert!(c.errors.pop_front().is_some());
    c.on_poll(300_200).unwrap();
    let (_, join) = the_heartbeat(c.step(300_201).0);
    assert_eq!(join.member_epoch, 0);
}
