//! `ShareCore` with fake answers and a fake clock: membership, share
//! sessions, acquired records, acknowledgements, commits and close.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use ferrokafka_protocol::codes;
use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::kafka_protocol::messages::find_coordinator_response::Coordinator;
use ferrokafka_protocol::kafka_protocol::messages::share_acknowledge_response::{
    self, ShareAcknowledgeTopicResponse,
};
use ferrokafka_protocol::kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, PartitionData, ShareFetchableTopicResponse,
};
use ferrokafka_protocol::kafka_protocol::messages::share_group_heartbeat_response::{
    Assignment, TopicPartitions,
};
use ferrokafka_protocol::kafka_protocol::messages::{
    BrokerId, FindCoordinatorResponse, RequestKind, ResponseKind, ShareAcknowledgeRequest,
    ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use ferrokafka_protocol::record::RecordBatchBuilder;
use uuid::Uuid;

use crate::cluster::{Cluster, Node, PartitionMetadata, TopicPartition};
use crate::driver::Body;
use crate::error::Error;
use crate::share::acks::{batches, AckType};
use crate::share::config::{AckMode, ShareConfig};
use crate::share::core::{Action, Dest, Request, ShareCore, Tag};

const TID: [u8; 16] = [7; 16];

fn node(id: i32) -> Node {
    Node::new(id, format!("b{id}"), 9092, None)
}

/// Topic "t" with `n` partitions, all led by broker 1, topic id TID.
fn cluster(n: i32) -> Arc<Cluster> {
    let parts: HashMap<String, Vec<PartitionMetadata>> = [(
        "t".to_string(),
        (0..n)
            .map(|p| PartitionMetadata::new(p, 1, 0, vec![1], vec![1]))
            .collect(),
    )]
    .into();
    let ids: HashMap<String, [u8; 16]> = [("t".to_string(), TID)].into();
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

fn cfg(mode: AckMode) -> ShareConfig {
    ShareConfig {
        group_id: "sg".into(),
        ack_mode: mode,
        retry_backoff_ms: 100,
        ..ShareConfig::default()
    }
}

fn sends(actions: Vec<Action>) -> Vec<Request> {
    actions
        .into_iter()
        .filter_map(|a| match a {
            Action::Send(r) => Some(*r),
            _ => None,
        })
        .collect()
}

fn body(r: &mut Request) -> RequestKind {
    match std::mem::replace(
        &mut r.body,
        Body::Ready(RequestKind::ApiVersions(Default::default())),
    ) {
        Body::Ready(k) => k,
        Body::Versioned { build, .. } => build(4),
    }
}

fn heartbeat_of(r: &mut Request) -> ShareGroupHeartbeatRequest {
    match body(r) {
        RequestKind::ShareGroupHeartbeat(h) => h,
        other => panic!("not a heartbeat: {other:?}"),
    }
}

fn fetch_of(r: &mut Request) -> ShareFetchRequest {
    match body(r) {
        RequestKind::ShareFetch(f) => f,
        other => panic!("not a ShareFetch: {other:?}"),
    }
}

fn ack_of(r: &mut Request) -> ShareAcknowledgeRequest {
    match body(r) {
        RequestKind::ShareAcknowledge(a) => a,
        other => panic!("not a ShareAcknowledge: {other:?}"),
    }
}

fn coordinator_answer() -> ResponseKind {
    let mut c = Coordinator::default();
    c.key = StrBytes::from_static_str("sg");
    c.node_id = BrokerId(2);
    c.host = StrBytes::from_static_str("b2");
    c.port = 9092;
    let mut r = FindCoordinatorResponse::default();
    r.coordinators.push(c);
    ResponseKind::FindCoordinator(r)
}

fn heartbeat_answer(epoch: i32, parts: &[i32]) -> ResponseKind {
    let mut r = ShareGroupHeartbeatResponse::default();
    r.member_epoch = epoch;
    r.heartbeat_interval_ms = 2000;
    let mut tp = TopicPartitions::default();
    tp.topic_id = Uuid::from_bytes(TID);
    tp.partitions = parts.to_vec();
    let mut a = Assignment::default();
    a.topic_partitions.push(tp);
    r.assignment = Some(a);
    ResponseKind::ShareGroupHeartbeat(r)
}

fn records(base: i64, n: i32) -> Bytes {
    let mut b = RecordBatchBuilder::new(Compression::None).base_offset(base);
    for i in 0..n {
        let v = format!("v{}", base + i as i64);
        b.append(1000, None, Some(v.as_bytes()), &[]).unwrap();
    }
    Bytes::from(b.finish().unwrap().to_vec())
}

/// A ShareFetch answer for partition `p`: `blob` and the acquired ranges.
fn fetch_answer(p: i32, blob: Option<Bytes>, acquired: &[(i64, i64, i16)]) -> ResponseKind {
    let mut pd = PartitionData::default();
    pd.partition_index = p;
    pd.records = blob;
    pd.acquired_records = acquired
        .iter()
        .map(|&(f, l, d)| {
            let mut a = AcquiredRecords::default();
            a.first_offset = f;
            a.last_offset = l;
            a.delivery_count = d;
            a
        })
        .collect();
    let mut t = ShareFetchableTopicResponse::default();
    t.topic_id = Uuid::from_bytes(TID);
    t.partitions.push(pd);
    let mut r = ShareFetchResponse::default();
    r.responses.push(t);
    ResponseKind::ShareFetch(r)
}

fn ack_answer(p: i32, code: i16) -> ResponseKind {
    let mut pd = share_acknowledge_response::PartitionData::default();
    pd.partition_index = p;
    pd.error_code = code;
    let mut t = ShareAcknowledgeTopicResponse::default();
    t.topic_id = Uuid::from_bytes(TID);
    t.partitions.push(pd);
    let mut r = ShareAcknowledgeResponse::default();
    r.responses.push(t);
    ResponseKind::ShareAcknowledge(r)
}

fn ok(k: ResponseKind) -> Result<(ResponseKind, i16), Error> {
    Ok((k, 1))
}

/// Subscribed to "t", joined with epoch 1 and partitions `parts`; returns
/// the core and the first ShareFetch request (not answered).
fn joined(mode: AckMode, parts: &[i32], now: i64) -> (ShareCore, Request) {
    let mut c = ShareCore::new(cfg(mode));
    c.set_cluster(cluster(3));
    c.subscribe(vec!["t".into()]).unwrap();
    let (a, _) = c.step(now);
    let mut s = sends(a);
    assert_eq!(s.len(), 1);
    let find = s.remove(0);
    assert_eq!(find.dest, Dest::LeastLoaded);
    assert!(matches!(find.tag, Tag::FindCoordinator));
    c.on_answer(find.tag, ok(coordinator_answer()), now);
    let (a, _) = c.step(now);
    let mut s = sends(a);
    let hb = heartbeat_of(&mut s[0]);
    c.on_answer(s.remove(0).tag, ok(heartbeat_answer(1, parts)), now);
    assert_eq!(hb.member_epoch, 0);
    let (a, _) = c.step(now);
    let mut s = sends(a);
    assert_eq!(s.len(), 1, "one ShareFetch to the leader");
    (c, s.remove(0))
}

#[test]
fn ack_batches_join_runs_of_one_type() {
    let m: BTreeMap<i64, AckType> = [
        (1, AckType::Accept),
        (2, AckType::Accept),
        (3, AckType::Release),
        (5, AckType::Accept),
        (6, AckType::Gap),
    ]
    .into();
    assert_eq!(
        batches(&m),
        vec![(1, 2, 1), (3, 3, 2), (5, 5, 1), (6, 6, 0)]
    );
}

#[test]
fn join_sends_generated_member_id_epoch_zero_and_subscription() {
    let mut c = ShareCore::new(cfg(AckMode::Implicit));
    c.set_cluster(cluster(3));
    c.subscribe(vec!["t".into()]).unwrap();
    let (a, _) = c.step(0);
    let mut s = sends(a);
    c.on_answer(s.remove(0).tag, ok(coordinator_answer()), 0);
    let (a, _) = c.step(0);
    let mut s = sends(a);
    let Dest::Node(n) = &s[0].dest else { panic!() };
    // The coordinator gets its own connection id (as the consumer's does).
    assert_eq!(n.id, i32::MAX - 2);
    let hb = heartbeat_of(&mut s[0]);
    assert_eq!(hb.member_epoch, 0);
    assert_eq!(hb.member_id.len(), 22, "a UUID in Kafka's base64 form");
    let topics: Vec<String> = hb
        .subscribed_topic_names
        .unwrap()
        .iter()
        .map(|t| t.0.to_string())
        .collect();
    assert_eq!(topics, vec!["t"]);
    let id = hb.member_id.to_string();
    c.on_answer(s.remove(0).tag, ok(heartbeat_answer(3, &[0, 2])), 0);
    assert_eq!(c.member.epoch, 3);
    let got: Vec<i32> = c
        .member
        .assignment(&cluster(3))
        .iter()
        .map(|tp| tp.partition)
        .collect();
    assert_eq!(got, vec![0, 2]);
    // Next heartbeat at the interval the coordinator gave, with the epoch
    // it gave, the same id, and no subscription (unchanged).
    let (a, _) = c.step(1999);
    assert!(sends(a).iter().all(|r| !matches!(r.tag, Tag::Heartbeat)));
    let (a, _) = c.step(2000);
    let mut hbs: Vec<Request> = sends(a)
        .into_iter()
        .filter(|r| matches!(r.tag, Tag::Heartbeat))
        .collect();
    let hb = heartbeat_of(&mut hbs[0]);
    assert_eq!(hb.member_epoch, 3);
    assert_eq!(hb.member_id.to_string(), id);
    assert!(hb.subscribed_topic_names.is_none());
}

#[test]
fn fenced_member_rejoins_with_epoch_zero_and_same_id() {
    let (mut c, _fetch) = joined(AckMode::Implicit, &[0], 0);
    let id = c.member.member_id.clone();
    let (a, _) = c.step(2000);
    let mut hb: Vec<Request> = sends(a)
        .into_iter()
        .filter(|r| matches!(r.tag, Tag::Heartbeat))
        .collect();
    let mut r = ShareGroupHeartbeatResponse::default();
    r.error_code = codes::FENCED_MEMBER_EPOCH;
    c.on_answer(
        hb.remove(0).tag,
        ok(ResponseKind::ShareGroupHeartbeat(r)),
        2000,
    );
    assert!(c.member.assignment(&cluster(3)).is_empty());
    let (a, _) = c.step(2000);
    let mut hb: Vec<Request> = sends(a)
        .into_iter()
        .filter(|r| matches!(r.tag, Tag::Heartbeat))
        .collect();
    let h = heartbeat_of(&mut hb[0]);
    assert_eq!(h.member_epoch, 0);
    assert_eq!(h.member_id.to_string(), id);
    assert!(h.subscribed_topic_names.is_some());
}

#[test]
fn share_fetch_opens_session_and_returns_only_acquired_records() {
    let (mut c, mut f) = joined(AckMode::Implicit, &[0, 1], 0);
    let req = fetch_of(&mut f);
    assert_eq!(req.share_session_epoch, 0);
    assert_eq!(req.topics.len(), 1);
    assert_eq!(req.topics[0].partitions.len(), 2);
    assert!(req.topics[0]
        .partitions
        .iter()
        .all(|p| p.acknowledgement_batches.is_empty()));
    // Five records in the blob, offsets 1..=3 acquired (2 redelivered).
    c.on_answer(
        f.tag,
        ok(fetch_answer(
            0,
            Some(records(0, 5)),
            &[(1, 1, 1), (2, 3, 2)],
        )),
        10,
    );
    assert!(!c.begin_poll().unwrap());
    let got = c.take_records(100);
    assert_eq!(got.len(), 1);
    let b = &got[0];
    let offs: Vec<i64> = b.rows.iter().map(|&r| b.cols.offsets[r]).collect();
    assert_eq!(offs, vec![1, 2, 3]);
    assert_eq!(b.delivery_counts, vec![1, 2, 2]);
    // Everything returned but not yet acknowledged: no new fetch until the
    // application polls again, and that fetch carries the acknowledgements
    // (epoch 1, partition 1 not re-listed: already in the session).
    let (a, _) = c.step(10);
    assert!(sends(a).is_empty());
    assert!(c.begin_poll().unwrap());
    let (a, _) = c.step(10);
    let mut s = sends(a);
    let f2 = fetch_of(&mut s[0]);
    assert_eq!(f2.share_session_epoch, 1);
    assert_eq!(f2.topics.len(), 1);
    let parts: Vec<(i32, usize)> = f2.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.acknowledgement_batches.len()))
        .collect();
    assert_eq!(parts, vec![(0, 1)]);
}

#[test]
fn implicit_mode_accepts_the_previous_poll_in_the_next_fetch() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 3)), &[(0, 2, 1)])),
        10,
    );
    let _ = c.take_records(2); // offsets 0, 1; offset 2 stays buffered
    assert_eq!(c.buffer.len(), 1);
    // Buffered records from node 1: no fetch yet.
    let (a, _) = c.step(10);
    assert!(sends(a).is_empty());
    assert!(c.begin_poll().unwrap(), "acknowledgements to send");
    let _ = c.take_records(10); // offset 2
                                // Offset 2 is still undecided, so no fetch: the acknowledgements of 0
                                // and 1 go out at once in a ShareAcknowledge.
    let (a, _) = c.step(10);
    let mut s = sends(a);
    let req = ack_of(&mut s[0]);
    assert_eq!(req.share_session_epoch, 1);
    let b = &req.topics[0].partitions[0].acknowledgement_batches;
    assert_eq!(
        (
            b[0].first_offset,
            b[0].last_offset,
            b[0].acknowledge_types.clone()
        ),
        (0, 1, vec![1])
    );
    c.on_answer(s.remove(0).tag, ok(ack_answer(0, 0)), 20);
    // The next poll accepts offset 2; that ShareFetch carries it.
    assert!(c.begin_poll().unwrap());
    let (a, _) = c.step(20);
    let mut s = sends(a);
    let req = fetch_of(&mut s[0]);
    assert_eq!(req.share_session_epoch, 2);
    let p = &req.topics[0].partitions[0];
    let b: Vec<(i64, i64, Vec<i8>)> = p
        .acknowledgement_batches
        .iter()
        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
        .collect();
    assert_eq!(b, vec![(2, 2, vec![1])]);
}

#[test]
fn explicit_mode_refuses_poll_with_unacknowledged_records() {
    let (mut c, f) = joined(AckMode::Explicit, &[0], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 3)), &[(0, 2, 1)])),
        10,
    );
    c.begin_poll().unwrap();
    let got = c.take_records(10);
    assert_eq!(got[0].rows.len(), 3);
    let tp = TopicPartition::new("t", 0);
    c.acknowledge(&tp, 0, AckType::Accept).unwrap();
    c.acknowledge(&tp, 1, AckType::Release).unwrap();
    let e = c.begin_poll().unwrap_err();
    assert!(matches!(e, Error::State { .. }), "{e:?}");
    assert!(
        c.acknowledge(&tp, 9, AckType::Accept).is_err(),
        "never delivered"
    );
    c.acknowledge(&tp, 2, AckType::Reject).unwrap();
    // A commit sends them (the partition is not buffered: a ShareFetch
    // carries them) and completes with the per-partition result.
    let id = c.commit();
    assert!(c.take_commit(id).is_none());
    let (a, _) = c.step(20);
    let mut s = sends(a);
    let req = fetch_of(&mut s[0]);
    let b: Vec<(i64, i64, Vec<i8>)> = req.topics[0].partitions[0]
        .acknowledgement_batches
        .iter()
        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
        .collect();
    assert_eq!(b, vec![(0, 0, vec![1]), (1, 1, vec![2]), (2, 2, vec![3])]);
    c.on_answer(s.remove(0).tag, ok(fetch_answer(0, None, &[])), 30);
    let res = c.take_commit(id).expect("commit done");
    assert_eq!(res.len(), 1);
    assert!(res[&tp].is_none());
    // Polling again is fine now.
    c.begin_poll().unwrap();
}

#[test]
fn acknowledge_is_refused_in_implicit_mode() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 1)), &[(0, 0, 1)])),
        10,
    );
    let _ = c.take_records(10);
    let e = c
        .acknowledge(&TopicPartition::new("t", 0), 0, AckType::Release)
        .unwrap_err();
    assert!(matches!(e, Error::State { .. }));
}

#[test]
fn commit_with_buffered_records_uses_share_acknowledge_and_reports_errors() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 4)), &[(0, 3, 1)])),
        10,
    );
    let _ = c.take_records(2);
    let id = c.commit();
    let (a, _) = c.step(10);
    let mut s = sends(a);
    assert_eq!(s.len(), 1);
    let req = ack_of(&mut s[0]);
    assert_eq!(req.share_session_epoch, 1);
    let b = &req.topics[0].partitions[0].acknowledgement_batches;
    assert_eq!(
        (
            b[0].first_offset,
            b[0].last_offset,
            b[0].acknowledge_types.clone()
        ),
        (0, 1, vec![1])
    );
    c.on_answer(s.remove(0).tag, ok(ack_answer(0, 121)), 20); // INVALID_RECORD_STATE
    let res = c.take_commit(id).unwrap();
    let e = res[&TopicPartition::new("t", 0)]
        .as_ref()
        .expect("an error");
    assert_eq!(e.code(), 121);
    // The session moved on: the next request carries epoch 2.
    let _ = c.take_records(10);
    c.begin_poll().unwrap();
    let (a, _) = c.step(20);
    let mut s = sends(a);
    assert_eq!(fetch_of(&mut s[0]).share_session_epoch, 2);
}

#[test]
fn acquired_offsets_without_records_are_acknowledged_as_gaps() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 2)), &[(0, 3, 1)])),
        10,
    );
    let got = c.take_records(10);
    assert_eq!(got[0].rows.len(), 2);
    c.begin_poll().unwrap();
    let (a, _) = c.step(10);
    let mut s = sends(a);
    let req = fetch_of(&mut s[0]);
    let b: Vec<(i64, i64, Vec<i8>)> = req.topics[0].partitions[0]
        .acknowledgement_batches
        .iter()
        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
        .collect();
    assert_eq!(b, vec![(0, 1, vec![1]), (2, 3, vec![0])]);
}

#[test]
fn lost_session_reopens_with_epoch_zero_and_fails_its_acknowledgements() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 2)), &[(0, 1, 1)])),
        10,
    );
    let _ = c.take_records(10);
    let id = c.commit();
    let (a, _) = c.step(10);
    let mut s = sends(a);
    let mut r = ShareFetchResponse::default();
    r.error_code = 122; // SHARE_SESSION_NOT_FOUND
    c.on_answer(s.remove(0).tag, ok(ResponseKind::ShareFetch(r)), 20);
    let res = c.take_commit(id).unwrap();
    assert_eq!(
        res[&TopicPartition::new("t", 0)].as_ref().unwrap().code(),
        122
    );
    let (a, _) = c.step(20);
    let mut s = sends(a);
    let req = fetch_of(&mut s[0]);
    assert_eq!(req.share_session_epoch, 0);
    assert_eq!(
        req.topics[0].partitions.len(),
        1,
        "the partitions are listed again"
    );
}

#[test]
fn transport_failure_backs_off_then_reopens() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(f.tag, Err(Error::Disconnected { node_id: 1 }), 10);
    let (a, wake) = c.step(10);
    assert!(sends(a).is_empty());
    assert!(wake <= 110);
    let (a, _) = c.step(110);
    let mut s = sends(a);
    assert_eq!(fetch_of(&mut s[0]).share_session_epoch, 0);
}

#[test]
fn close_releases_buffered_records_closes_sessions_and_leaves() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 4)), &[(0, 3, 1)])),
        10,
    );
    let _ = c.take_records(1); // offset 0 delivered, 1..=3 buffered
    c.begin_close();
    assert!(!c.close_done());
    let (a, _) = c.step(20);
    let mut s = sends(a);
    assert_eq!(s.len(), 2, "{s:?}");
    let ai = s
        .iter()
        .position(|r| matches!(r.tag, Tag::Acknowledge { .. }))
        .unwrap();
    let mut ackr = s.remove(ai);
    let req = ack_of(&mut ackr);
    assert_eq!(req.share_session_epoch, -1);
    let b: Vec<(i64, i64, Vec<i8>)> = req.topics[0].partitions[0]
        .acknowledgement_batches
        .iter()
        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
        .collect();
    assert_eq!(b, vec![(0, 0, vec![1]), (1, 3, vec![2])]);
    let mut hb = s.remove(0);
    assert_eq!(heartbeat_of(&mut hb).member_epoch, -1);
    c.on_answer(ackr.tag, ok(ack_answer(0, 0)), 30);
    assert!(!c.close_done());
    c.on_answer(
        hb.tag,
        ok(ResponseKind::ShareGroupHeartbeat(Default::default())),
        30,
    );
    assert!(c.close_done());
}

#[test]
fn fatal_heartbeat_error_reaches_the_application() {
    let mut c = ShareCore::new(cfg(AckMode::Implicit));
    c.set_cluster(cluster(1));
    c.subscribe(vec!["t".into()]).unwrap();
    let (a, _) = c.step(0);
    c.on_answer(sends(a).remove(0).tag, ok(coordinator_answer()), 0);
    let (a, _) = c.step(0);
    let mut r = ShareGroupHeartbeatResponse::default();
    r.error_code = codes::GROUP_AUTHORIZATION_FAILED;
    c.on_answer(
        sends(a).remove(0).tag,
        ok(ResponseKind::ShareGroupHeartbeat(r)),
        0,
    );
    assert_eq!(
        c.errors.pop_front().unwrap().code(),
        codes::GROUP_AUTHORIZATION_FAILED
    );
}

#[test]
fn a_record_listed_again_while_held_is_not_returned_twice() {
    let (mut c, f) = joined(AckMode::Implicit, &[0, 1], 0);
    c.on_answer(
        f.tag,
        ok(fetch_answer(0, Some(records(0, 4)), &[(0, 3, 1)])),
        10,
    );
    let _ = c.take_records(2); // 0, 1 returned; 2, 3 buffered
                               // A broker lists 0..=5 again as acquired by us (same delivery count).
    let mut s = ShareFetchResponse::default();
    if let ResponseKind::ShareFetch(r) = fetch_answer(0, Some(records(0, 6)), &[(0, 5, 1)]) {
        s = r;
    }
    let tag = Tag::Fetch {
        node: 1,
        change: Default::default(),
        acked: vec![],
        commits: vec![],
        names: [(TID, "t".to_string())].into(),
    };
    c.on_answer(tag, ok(ResponseKind::ShareFetch(s)), 20);
    let got = c.take_records(100);
    let offs: Vec<i64> = got
        .iter()
        .flat_map(|b| b.rows.iter().map(|&r| b.cols.offsets[r]))
        .collect();
    assert_eq!(offs, vec![2, 3, 4, 5]);
}

#[test]
fn an_empty_answer_paces_the_next_fetch() {
    let (mut c, f) = joined(AckMode::Implicit, &[0], 0);
    c.on_answer(f.tag, ok(fetch_answer(0, None, &[])), 10);
    let (a, wake) = c.step(10);
    assert!(sends(a).is_empty(), "not again at once");
    assert!(wake <= 110);
    let (a, _) = c.step(110);
    let mut s = sends(a);
    assert_eq!(fetch_of(&mut s[0]).share_session_epoch, 1);
}

#[test]
fn answer_to_a_leave_taken_back_rejoins() {
    let (mut c, _f) = joined(AckMode::Implicit, &[0], 0);
    c.unsubscribe();
    let (a, _) = c.step(10);
    let mut hb: Vec<Request> = sends(a)
        .into_iter()
        .filter(|r| matches!(r.tag, Tag::Heartbeat))
        .collect();
    assert_eq!(heartbeat_of(&mut hb[0]).member_epoch, -1);
    c.subscribe(vec!["t".into()]).unwrap();
    let mut r = ShareGroupHeartbeatResponse::default();
    r.member_epoch = -1;
    c.on_answer(
        hb.remove(0).tag,
        ok(ResponseKind::ShareGroupHeartbeat(r)),
        20,
    );
    let (a, _) = c.step(20);
    let mut hb: Vec<Request> = sends(a)
        .into_iter()
        .filter(|r| matches!(r.tag, Tag::Heartbeat))
        .collect();
    let h = heartbeat_of(&mut hb[0]);
    assert_eq!(h.member_epoch, 0);
    assert!(h.subscribed_topic_names.is_some());
}

#[test]
fn coordinator_authorization_failure_reaches_the_application() {
    let mut c = ShareCore::new(cfg(AckMode::Implicit));
    c.set_cluster(cluster(1));
    c.subscribe(vec!["t".into()]).unwrap();
    let (a, _) = c.step(0);
    let mut co = Coordinator::default();
    co.key = StrBytes::from_static_str("sg");
    co.error_code = codes::GROUP_AUTHORIZATION_FAILED;
    let mut r = FindCoordinatorResponse::default();
    r.coordinators.push(co);
    c.on_answer(
        sends(a).remove(0).tag,
        ok(ResponseKind::FindCoordinator(r)),
        0,
    );
    assert_eq!(
        c.errors.pop_front().unwrap().code(),
        codes::GROUP_AUTHORIZATION_FAILED
    );
    // Retried later, not in a tight loop.
    let (a, wake) = c.step(10);
    assert!(sends(a).is_empty());
    assert!(wake >= 1000);
}
