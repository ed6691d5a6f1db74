//! `ConsumerCore` group behaviour with fake answers and a fake clock:
//! discovery, join/sync, heartbeats and sessions, error reactions,
//! revocation ordering, subscription changes, leaving.

use bytes::Bytes;
use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use ferrokafka_protocol::kafka_protocol::messages::{
    BrokerId, FindCoordinatorResponse, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, RequestKind, ResponseKind, SyncGroupRequest, SyncGroupResponse,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

use super::tests::*;
use super::*;
use crate::consumer::group::MemberState;
use crate::consumer::protocol::{encode_assignment, encode_subscription};

pub(super) fn coordinator_answer(id: i32) -> ResponseKind {
    let mut r = FindCoordinatorResponse::default();
    r.node_id = BrokerId(id);
    r.host = StrBytes::from_string(format!("b{id}"));
    r.port = 9092;
    ResponseKind::FindCoordinator(r)
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// JoinGroup answer; `members` (id, topics) only for the leader.
fn join_answer(
    code: i16,
    gen: i32,
    me: &str,
    leader: &str,
    members: &[(&str, &[&str])],
) -> ResponseKind {
    let mut r = JoinGroupResponse::default();
    r.error_code = code;
    r.generation_id = gen;
    r.member_id = s(me);
    r.leader = s(leader);
    r.protocol_name = Some(s("range"));
    for (id, topics) in members {
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        let mut m = JoinGroupResponseMember::default();
        m.member_id = s(id);
        m.metadata = encode_subscription(&topics, &[], -1, None, None, 3).unwrap();
        r.members.push(m);
    }
    ResponseKind::JoinGroup(r)
}

fn sync_answer(code: i16, parts: &[TopicPartition]) -> ResponseKind {
    let mut r = SyncGroupResponse::default();
    r.error_code = code;
    r.assignment = if code == codes::NONE {
        encode_assignment(parts, None, 3).unwrap()
    } else {
        Bytes::new()
    };
    ResponseKind::SyncGroup(r)
}

fn heartbeat_answer(code: i16) -> ResponseKind {
    let mut r = HeartbeatResponse::default();
    r.error_code = code;
    ResponseKind::Heartbeat(r)
}

/// The one request with a tag like `pred` among `reqs`.
fn take(reqs: &mut Vec<Request>, pred: impl Fn(&Tag) -> bool) -> Request {
    let i = reqs
        .iter()
        .position(|r| pred(&r.tag))
        .unwrap_or_else(|| panic!("no such request in {reqs:?}"));
    reqs.remove(i)
}

fn no_join(reqs: &[Request]) -> bool {
    reqs.iter().all(|r| !matches!(r.tag, Tag::Join))
}

fn coordinator() -> Dest {
    Dest::Node(coordinator_connection(&node(1)))
}

/// The application's side of `poll`: events handed out, not yet acknowledged.
fn poll_events(c: &mut ConsumerCore) -> Vec<RebalanceEvent> {
    c.events_unacked = !c.events.is_empty();
    c.events.drain(..).collect()
}

/// A member of "g" subscribed to `t` (2 partitions), through discovery,
/// join (as leader, alone) and sync, owning both partitions at `now` = 3.
fn stable_member(cfg: ConsumerConfig) -> ConsumerCore {
    let mut c = ConsumerCore::new(cfg, 0);
    c.set_cluster(cluster(&[("t", 2)]));
    let a = c.subscribe(vec!["t".into()]).unwrap();
    assert!(a
        .iter()
        .any(|a| matches!(a, Action::MetadataTopics(Some(t)) if t == &vec!["t".to_string()])));
    c.on_poll(0).unwrap();
    let mut reqs = sends(c.step(0).0);
    let find = take(&mut reqs, |t| matches!(t, Tag::FindCoordinator));
    assert_eq!(find.dest, Dest::LeastLoaded);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let mut reqs = sends(c.step(1).0);
    let Request {
        dest, body, tag, ..
    } = take(&mut reqs, |t| matches!(t, Tag::Join));
    assert_eq!(dest, coordinator(), "the coordinator's own connection");
    match body_at_body(body, 9) {
        RequestKind::JoinGroup(JoinGroupRequest {
            member_id,
            protocols,
            ..
        }) => {
            assert_eq!(member_id.as_str(), "");
            assert_eq!(protocols[0].name.as_str(), c.cfg.assignors[0]);
        }
        other => panic!("{other:?}"),
    }
    c.on_answer(
        tag,
        ok(join_answer(codes::NONE, 1, "m1", "m1", &[("m1", &["t"])])),
        2,
    );
    // The leader assigns (metadata knows `t`) and syncs.
    let mut reqs = sends(c.step(2).0);
    let Request { body, tag, .. } = take(&mut reqs, |t| matches!(t, Tag::Sync { .. }));
    match body_at_body(body, 5) {
        RequestKind::SyncGroup(SyncGroupRequest {
            generation_id,
            assignments,
            ..
        }) => {
            assert_eq!(generation_id, 1);
            assert_eq!(assignments.len(), 1, "the leader assigns every member");
        }
        other => panic!("{other:?}"),
    }
    let a = c.on_answer(tag, ok(sync_answer(codes::NONE, &[tp(0), tp(1)])), 3);
    assert!(wakes(&a));
    assert_eq!(c.group.as_ref().unwrap().state(), MemberState::Stable);
    assert_eq!(
        poll_events(&mut c),
        vec![RebalanceEvent::Assigned(vec![tp(0), tp(1)])]
    );
    c.events_unacked = false;
    c
}

#[test]
fn discovery_join_sync_committed_offsets_then_fetch() {
    let mut c = stable_member(group_cfg());
    // New partitions: their committed offsets first, from the coordinator.
    let mut reqs = sends(c.step(4).0);
    let of = take(&mut reqs, |t| matches!(t, Tag::OffsetFetch));
    assert_eq!(of.dest, coordinator());
    assert!(reqs.iter().all(|r| !matches!(r.tag, Tag::Fetch { .. })));
    c.on_answer(of.tag, ok(offset_fetch_answer(&[(0, 5), (1, 8)])), 5);
    // Then one Fetch to the leader, from the committed offsets.
    let mut reqs = sends(c.step(6).0);
    let fetch = take(&mut reqs, |t| matches!(t, Tag::Fetch { .. }));
    assert_eq!(fetch.dest, Dest::Node(node(1)));
    assert_eq!(fetch_offsets(&fetch), vec![(0, 5), (1, 8)]);
    c.on_answer(fetch.tag, ok(fetch_answer(1, codes::NONE, 8, 2)), 7);
    assert_eq!(offsets_of(&c.take_records(10)), vec![8, 9]);
}

#[test]
fn a_follower_syncs_with_no_assignments() {
    let mut c = ConsumerCore::new(group_cfg(), 0);
    c.set_cluster(cluster(&[("t", 2)]));
    c.subscribe(vec!["t".into()]).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let join = take(&mut sends(c.step(1).0), |t| matches!(t, Tag::Join));
    let a = c.on_answer(
        join.tag,
        ok(join_answer(codes::NONE, 4, "m2", "m1", &[])),
        2,
    );
    let Request { body, .. } = take(&mut sends(a), |_| true);
    match body_at_body(body, 5) {
        RequestKind::SyncGroup(r) => {
            assert_eq!(r.generation_id, 4);
            assert!(r.assignments.is_empty());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn heartbeats_every_interval_and_a_silent_session_expires() {
    let mut c = stable_member(group_cfg());
    // Synced at 3: the first heartbeat is due at 3 + 3000.
    let (a, wake_at) = c.step(100);
    assert!(sends(a)
        .iter()
        .all(|r| !matches!(r.tag, Tag::Heartbeat { .. })));
    assert!(wake_at <= 3_003);
    let mut reqs = sends(c.step(3_003).0);
    let hb = take(&mut reqs, |t| matches!(t, Tag::Heartbeat { .. }));
    assert_eq!(hb.dest, coordinator());
    // One in flight at a time.
    assert!(sends(c.step(4_000).0)
        .iter()
        .all(|r| !matches!(r.tag, Tag::Heartbeat { .. })));
    c.on_answer(hb.tag, ok(heartbeat_answer(codes::NONE)), 4_000);
    let mut reqs = sends(c.step(7_000).0);
    let hb = take(&mut reqs, |t| matches!(t, Tag::Heartbeat { .. }));
    // That one is never answered: the session (10 s from the last answer
    // at 4000) runs out, and the coordinator is looked up again.
    drop(hb);
    assert!(c.group.as_ref().unwrap().coordinator().is_some());
    let mut reqs = sends(c.step(14_000).0);
    let find = take(&mut reqs, |t| matches!(t, Tag::FindCoordinator));
    assert!(c.group.as_ref().unwrap().coordinator().is_none());
    assert_eq!(find.dest, Dest::LeastLoaded);
}

#[test]
fn rebalance_in_progress_revokes_and_rejoins_only_after_the_ack() {
    // Eager: everything owned is revoked before the join, and the join
    // waits until the application has run on_revoke.
    let mut c = stable_member(group_cfg());
    let hb = take(&mut sends(c.step(3_003).0), |t| {
        matches!(t, Tag::Heartbeat { .. })
    });
    c.on_answer(
        hb.tag,
        ok(heartbeat_answer(codes::REBALANCE_IN_PROGRESS)),
        3_004,
    );
    let (a, _) = c.step(3_005);
    assert!(wakes(&a));
    assert!(
        no_join(&sends(a)),
        "no join before the revocation is acknowledged"
    );
    assert!(c.subs.assigned_partitions().next().is_none());
    assert_eq!(
        poll_events(&mut c),
        vec![RebalanceEvent::Revoked(vec![tp(0), tp(1)])]
    );
    // Handed out but the callbacks still run: still no join.
    assert!(no_join(&sends(c.step(3_100).0)));
    c.events_unacked = false;
    let join = take(&mut sends(c.step(3_200).0), |t| matches!(t, Tag::Join));
    let Request { body, .. } = join;
    match body_at_body(body, 9) {
        RequestKind::JoinGroup(r) => assert_eq!(r.member_id.as_str(), "m1", "same member"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_pre_join_commit_goes_out_before_the_revocation() {
    let mut c = stable_member(ConsumerConfig {
        enable_auto_commit: true,
        ..group_cfg()
    });
    c.seek(&tp(0), 10).unwrap();
    c.group.as_mut().unwrap().request_rejoin("test");
    let mut reqs = sends(c.step(4).0);
    let commit = take(&mut reqs, |t| {
        matches!(t, Tag::AutoCommit { pre_join: true, .. })
    });
    assert!(no_join(&reqs));
    assert!(c.events.is_empty(), "revocation waits for the commit");
    assert!(no_join(&sends(c.step(5).0)));
    c.on_answer(commit.tag, ok(offset_commit_answer(&[(0, codes::NONE)])), 6);
    assert_eq!(
        poll_events(&mut c),
        vec![RebalanceEvent::Revoked(vec![tp(0), tp(1)])]
    );
    c.events_unacked = false;
    assert!(!no_join(&sends(c.step(7).0)));
}

#[test]
fn cooperative_rejoins_at_once_and_revokes_only_moved_partitions() {
    let mut c = stable_member(ConsumerConfig {
        assignors: vec!["cooperative-sticky".into()],
        ..group_cfg()
    });
    c.group.as_mut().unwrap().request_rejoin("a member joined");
    // No revocation before the join: the partitions stay ours.
    let join = take(&mut sends(c.step(4).0), |t| matches!(t, Tag::Join));
    assert!(c.events.is_empty());
    assert_eq!(c.subs.assigned_partitions().count(), 2);
    let a = c.on_answer(
        join.tag,
        ok(join_answer(codes::NONE, 2, "m1", "m0", &[])),
        5,
    );
    let sync = take(&mut sends(a), |t| {
        matches!(t, Tag::Sync { generation_id: 2 })
    });
    c.on_answer(sync.tag, ok(sync_answer(codes::NONE, &[tp(0)])), 6);
    assert_eq!(
        poll_events(&mut c),
        vec![
            RebalanceEvent::Revoked(vec![tp(1)]),
            RebalanceEvent::Assigned(vec![])
        ]
    );
    // KIP-429: a second join follows so others can take t-1, once the
    // revocation is acknowledged.
    assert!(no_join(&sends(c.step(7).0)));
    c.events_unacked = false;
    assert!(!no_join(&sends(c.step(8).0)));
    assert_eq!(
        c.subs.assigned_partitions().cloned().collect::<Vec<_>>(),
        vec![tp(0)]
    );
}

#[test]
fn unknown_member_id_loses_partitions_and_joins_as_a_new_member() {
    let mut c = stable_member(group_cfg());
    let hb = take(&mut sends(c.step(3_003).0), |t| {
        matches!(t, Tag::Heartbeat { .. })
    });
    let a = c.on_answer(
        hb.tag,
        ok(heartbeat_answer(codes::UNKNOWN_MEMBER_ID)),
        3_004,
    );
    assert!(wakes(&a));
    assert_eq!(
        poll_events(&mut c),
        vec![RebalanceEvent::Lost(vec![tp(0), tp(1)])]
    );
    c.events_unacked = false;
    let Request { body, .. } = take(&mut sends(c.step(3_005).0), |t| matches!(t, Tag::Join));
    match body_at_body(body, 9) {
        RequestKind::JoinGroup(r) => assert_eq!(r.member_id.as_str(), ""),
        other => panic!("{other:?}"),
    }
}

#[test]
fn illegal_generation_on_sync_keeps_the_member_id() {
    let mut c = stable_member(group_cfg());
    c.group.as_mut().unwrap().request_rejoin("test");
    // Eager with nothing to commit: revocation, ack, join.
    c.step(4);
    poll_events(&mut c);
    c.events_unacked = false;
    let join = take(&mut sends(c.step(5).0), |t| matches!(t, Tag::Join));
    let a = c.on_answer(
        join.tag,
        ok(join_answer(codes::NONE, 2, "m1", "m0", &[])),
        6,
    );
    let sync = take(&mut sends(a), |t| matches!(t, Tag::Sync { .. }));
    c.on_answer(sync.tag, ok(sync_answer(codes::ILLEGAL_GENERATION, &[])), 7);
    let g = c.group.as_ref().unwrap();
    assert_eq!(g.generation().generation_id, -1);
    assert_eq!(g.generation().member_id, "m1");
    let Request { body, .. } = take(&mut sends(c.step(8).0), |t| matches!(t, Tag::Join));
    match body_at_body(body, 9) {
        RequestKind::JoinGroup(r) => assert_eq!(r.member_id.as_str(), "m1"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn not_coordinator_forgets_the_coordinator_and_finds_it_again() {
    let mut c = stable_member(group_cfg());
    let hb = take(&mut sends(c.step(3_003).0), |t| {
        matches!(t, Tag::Heartbeat { .. })
    });
    c.on_answer(hb.tag, ok(heartbeat_answer(codes::NOT_COORDINATOR)), 3_004);
    assert!(c.group.as_ref().unwrap().coordinator().is_none());
    // After the retry backoff (100 ms), discovery again; partitions kept.
    assert!(sends(c.step(3_050).0)
        .iter()
        .all(|r| !matches!(r.tag, Tag::FindCoordinator)));
    let find = take(&mut sends(c.step(3_104).0), |t| {
        matches!(t, Tag::FindCoordinator)
    });
    assert_eq!(c.subs.assigned_partitions().count(), 2);
    c.on_answer(find.tag, ok(coordinator_answer(2)), 3_105);
    assert_eq!(c.group.as_ref().unwrap().coordinator(), Some(&node(2)));
}

#[test]
fn a_join_that_fails_in_transit_forgets_the_coordinator() {
    let mut c = ConsumerCore::new(group_cfg(), 0);
    c.set_cluster(cluster(&[("t", 2)]));
    c.subscribe(vec!["t".into()]).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let join = take(&mut sends(c.step(1).0), |t| matches!(t, Tag::Join));
    c.on_answer(join.tag, Err(Error::Disconnected { node_id: 1 }), 2);
    let g = c.group.as_ref().unwrap();
    assert!(g.coordinator().is_none());
    assert_eq!(g.state(), MemberState::Unjoined);
}

#[test]
fn a_sync_answer_for_an_older_generation_is_ignored() {
    let mut c = stable_member(group_cfg());
    let before = c.group.as_ref().unwrap().generation().clone();
    c.on_answer(
        Tag::Sync { generation_id: 0 },
        ok(sync_answer(codes::NONE, &[])),
        10,
    );
    assert_eq!(c.group.as_ref().unwrap().generation(), &before);
    assert_eq!(c.subs.assigned_partitions().count(), 2);
}

#[test]
fn fatal_join_errors_reach_poll() {
    let mut c = ConsumerCore::new(group_cfg(), 0);
    c.set_cluster(cluster(&[("t", 2)]));
    c.subscribe(vec!["t".into()]).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let join = take(&mut sends(c.step(1).0), |t| matches!(t, Tag::Join));
    let a = c.on_answer(
        join.tag,
        ok(join_answer(
            codes::GROUP_AUTHORIZATION_FAILED,
            -1,
            "",
            "",
            &[],
        )),
        2,
    );
    assert!(wakes(&a));
    assert_eq!(
        c.errors.pop_front().map(|e| e.code()),
        Some(codes::GROUP_AUTHORIZATION_FAILED)
    );
    assert!(c.on_poll(3).is_err(), "the membership failed for good");
}

#[test]
fn a_pattern_follows_the_metadata_and_rejoins_on_new_topics() {
    let mut c = ConsumerCore::new(group_cfg(), 0);
    c.set_metadata(1, cluster(&[("t", 2), ("other", 1)]));
    let a = c.subscribe_pattern("t.*", 1).unwrap();
    assert!(
        a.iter().any(|a| matches!(a, Action::MetadataTopics(None))),
        "a pattern needs metadata of every topic"
    );
    assert!(a.iter().any(|a| matches!(a, Action::MetadataUpdate)));
    let find = take(&mut sends(c.step(0).0), |t| {
        matches!(t, Tag::FindCoordinator)
    });
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    // Metadata of the subscription's own version may predate it: no join
    // until a newer update has been matched.
    assert!(no_join(&sends(c.step(1).0)));
    c.set_metadata(2, cluster(&[("t", 2), ("t2", 1), ("other", 1)]));
    let join = take(&mut sends(c.step(2).0), |t| matches!(t, Tag::Join));
    let subscribed: Vec<&String> = c.subs.subscription().iter().collect();
    assert_eq!(subscribed, vec!["t", "t2"], "whole names only: not `other`");
    let a = c.on_answer(
        join.tag,
        ok(join_answer(codes::NONE, 1, "m1", "m0", &[])),
        3,
    );
    let sync = take(&mut sends(a), |t| matches!(t, Tag::Sync { .. }));
    c.on_answer(sync.tag, ok(sync_answer(codes::NONE, &[tp(0), tp(1)])), 4);
    // A newer update with the same matches: no rejoin.
    c.set_metadata(3, cluster(&[("t", 2), ("t2", 1), ("other", 1)]));
    c.step(5);
    assert!(!c.group.as_ref().unwrap().rejoin_needed());
    // A new matching topic appears: rejoin with it.
    c.set_metadata(4, cluster(&[("t", 2), ("t2", 1), ("t3", 1)]));
    c.step(6);
    assert!(c.group.as_ref().unwrap().rejoin_needed());
    assert!(c.subs.subscription().contains("t3"));
}

#[test]
fn more_partitions_of_a_subscribed_topic_rejoin() {
    let mut c = stable_member(group_cfg());
    c.step(4);
    assert!(!c.group.as_ref().unwrap().rejoin_needed());
    c.set_cluster(cluster(&[("t", 3)]));
    c.step(5);
    assert!(c.group.as_ref().unwrap().rejoin_needed());
}

#[test]
fn the_leader_waits_for_metadata_of_other_members_topics() {
    let mut c = ConsumerCore::new(group_cfg(), 0);
    c.set_cluster(cluster(&[("t", 2)]));
    c.subscribe(vec!["t".into()]).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(coordinator_answer(1)), 0);
    let join = take(&mut sends(c.step(1).0), |t| matches!(t, Tag::Join));
    c.on_answer(
        join.tag,
        ok(join_answer(
            codes::NONE,
            1,
            "m1",
            "m1",
            &[("m1", &["t"]), ("m2", &["u"])],
        )),
        2,
    );
    let (a, _) = c.step(3);
    assert!(a
        .iter()
        .any(|a| matches!(a, Action::MetadataUpdateForNewTopics)));
    assert!(sends(a).iter().all(|r| !matches!(r.tag, Tag::Sync { .. })));
    c.set_cluster(cluster(&[("t", 2), ("u", 1)]));
    let sync = take(&mut sends(c.step(4).0), |t| matches!(t, Tag::Sync { .. }));
    match body_at_body(sync.body, 5) {
        RequestKind::SyncGroup(r) => assert_eq!(r.assignments.len(), 2),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_missed_poll_deadline_leaves_the_group() {
    let mut c = stable_member(ConsumerConfig {
        max_poll_interval_ms: 20_000,
        ..group_cfg()
    });
    // Heartbeats keep the session alive, but the application never polls.
    let mut now = 3_003;
    while now < 20_003 {
        let mut reqs = sends(c.step(now).0);
        if let Some(i) = reqs
            .iter()
            .position(|r| matches!(r.tag, Tag::Heartbeat { .. }))
        {
            let hb = reqs.remove(i);
            c.on_answer(hb.tag, ok(heartbeat_answer(codes::NONE)), now);
        }
        now += 1_000;
    }
    let mut reqs = sends(c.step(20_003).0);
    let leave = take(&mut reqs, |t| matches!(t, Tag::Leave));
    match body_at_body(leave.body, 2) {
        RequestKind::LeaveGroup(LeaveGroupRequest { member_id, .. }) => {
            assert_eq!(member_id.as_str(), "m1")
        }
        other => panic!("{other:?}"),
    }
    assert!(c.errors.pop_front().is_some());
    assert_eq!(
        poll_events(&mut c),
        vec![RebalanceEvent::Lost(vec![tp(0), tp(1)])]
    );
}

#[test]
fn close_leaves_the_group_once_and_stops_deciding() {
    let mut c = stable_member(group_cfg());
    let leave = c.close().expect("a joined member leaves");
    assert_eq!(leave.dest, coordinator());
    assert!(matches!(leave.tag, Tag::Leave));
    assert!(c.closed);
    assert_eq!(c.group.as_ref().unwrap().generation().generation_id, -1);
    assert!(sends(c.step(5_000).0).is_empty());
    assert!(c.close().is_none(), "nothing left to leave");
}

#[test]
fn a_static_member_does_not_leave() {
    let mut c = stable_member(ConsumerConfig {
        group_instance_id: Some("i1".into()),
        ..group_cfg()
    });
    assert!(c.close().is_none(), "KIP-345: its partitions wait for it");
}

#[test]
fn unsubscribe_leaves_and_clears_the_metadata_topics() {
    let mut c = stable_member(group_cfg());
    let (leave, actions) = c.unsubscribe();
    assert!(matches!(leave.map(|r| r.tag), Some(Tag::Leave)));
    assert!(actions
        .iter()
        .any(|a| matches!(a, Action::MetadataTopics(Some(t)) if t.is_empty())));
    assert!(c.subs.assigned_partitions().next().is_none());
}
