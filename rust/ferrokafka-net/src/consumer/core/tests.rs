//! `ConsumerCore` with fake answers and a fake clock: positions, fetching,
//! commits. Group tests are in `tests_group.rs`, which shares the harness.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use ferrokafka_protocol::codes;
use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData,
};
use ferrokafka_protocol::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use ferrokafka_protocol::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::{
    FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetCommitRequest,
    OffsetCommitResponse, OffsetFetchResponse, RequestKind, ResponseKind, TopicName,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use ferrokafka_protocol::record::RecordBatchBuilder;

use super::*;
use crate::cluster::PartitionMetadata;
use crate::consumer::subscription::FetchState;

// ----- harness (shared with tests_group.rs) -------------------------------------------

pub(super) fn node(id: i32) -> Node {
    Node::new(id, format!("b{id}"), 9092, None)
}

/// Brokers 1 and 2; every partition of `topics` led by broker 1, epoch 0.
pub(super) fn cluster(topics: &[(&str, i32)]) -> Arc<Cluster> {
    let parts: HashMap<String, Vec<PartitionMetadata>> = topics
        .iter()
        .map(|(t, n)| {
            (
                t.to_string(),
                (0..*n)
                    .map(|p| PartitionMetadata::new(p, 1, 0, vec![1], vec![1]))
                    .collect(),
            )
        })
        .collect();
    Arc::new(Cluster::new(
        None,
        vec![node(1), node(2)],
        parts,
        &HashMap::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        None,
    ))
}

/// A consumer without a group, reading from the earliest offset.
pub(super) fn plain_cfg() -> ConsumerConfig {
    ConsumerConfig {
        group_id: None,
        enable_auto_commit: false,
        auto_offset_reset: OffsetResetStrategy::Earliest,
        retry_backoff_ms: 100,
        ..ConsumerConfig::default()
    }
}

/// A group member (eager "range"), sessions of 10 s, heartbeats every 3 s.
pub(super) fn group_cfg() -> ConsumerConfig {
    ConsumerConfig {
        group_id: Some("g".into()),
        session_timeout_ms: 10_000,
        heartbeat_interval_ms: 3_000,
        auto_commit_interval_ms: 5_000,
        assignors: vec!["range".into()],
        ..plain_cfg()
    }
}

pub(super) fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

/// The requests among `actions`, the rest dropped.
pub(super) fn sends(actions: Vec<Action>) -> Vec<Request> {
    actions
        .into_iter()
        .filter_map(|a| match a {
            Action::Send(r) => Some(*r),
            _ => None,
        })
        .collect()
}

/// The request as it would go out at `version`.
pub(super) fn body_at_body(body: Body, version: i16) -> RequestKind {
    match body {
        Body::Ready(b) => b,
        Body::Versioned { build, .. } => build(version),
    }
}

pub(super) fn ok(r: ResponseKind) -> Result<(ResponseKind, i16), Error> {
    Ok((r, 9))
}

pub(super) fn wakes(actions: &[Action]) -> bool {
    actions.iter().any(|a| matches!(a, Action::WakeApplication))
}

pub(super) fn asks_metadata(actions: &[Action]) -> bool {
    actions.iter().any(|a| {
        matches!(
            a,
            Action::MetadataUpdate | Action::MetadataUpdateForTopic(_)
        )
    })
}

fn list_offsets_answer(parts: &[(i32, i16, i64)]) -> ResponseKind {
    let mut t = ListOffsetsTopicResponse::default();
    t.name = TopicName(StrBytes::from_static_str("t"));
    for (p, code, offset) in parts {
        let mut pr = ListOffsetsPartitionResponse::default();
        pr.partition_index = *p;
        pr.error_code = *code;
        pr.offset = *offset;
        pr.leader_epoch = 0;
        t.partitions.push(pr);
    }
    let mut r = ListOffsetsResponse::default();
    r.topics.push(t);
    ResponseKind::ListOffsets(r)
}

/// `n` records of partition `p` from `base`, or an error code.
pub(super) fn fetch_answer(p: i32, code: i16, base: i64, n: usize) -> ResponseKind {
    let mut records = None;
    if n > 0 {
        let mut b = RecordBatchBuilder::new(Compression::None).base_offset(base);
        for i in 0..n {
            let v = format!("v{}", base + i as i64);
            b.append(1000, None, Some(v.as_bytes()), &[]).unwrap();
        }
        records = Some(Bytes::from(b.finish().unwrap().to_vec()));
    }
    let mut pd = PartitionData::default();
    pd.partition_index = p;
    pd.error_code = code;
    pd.high_watermark = base + n as i64;
    pd.records = records;
    let mut t = FetchableTopicResponse::default();
    t.topic = TopicName(StrBytes::from_static_str("t"));
    t.partitions.push(pd);
    let mut r = FetchResponse::default();
    r.responses.push(t);
    ResponseKind::Fetch(r)
}

pub(super) fn offset_fetch_answer(parts: &[(i32, i64)]) -> ResponseKind {
    let mut t = OffsetFetchResponseTopic::default();
    t.name = TopicName(StrBytes::from_static_str("t"));
    for (p, offset) in parts {
        let mut pr = OffsetFetchResponsePartition::default();
        pr.partition_index = *p;
        pr.committed_offset = *offset;
        pr.committed_leader_epoch = -1;
        t.partitions.push(pr);
    }
    let mut r = OffsetFetchResponse::default();
    r.topics.push(t);
    ResponseKind::OffsetFetch(r)
}

pub(super) fn offset_commit_answer(parts: &[(i32, i16)]) -> ResponseKind {
    let mut t = OffsetCommitResponseTopic::default();
    t.name = TopicName(StrBytes::from_static_str("t"));
    for (p, code) in parts {
        let mut pr = OffsetCommitResponsePartition::default();
        pr.partition_index = *p;
        pr.error_code = *code;
        t.partitions.push(pr);
    }
    let mut r = OffsetCommitResponse::default();
    r.topics.push(t);
    ResponseKind::OffsetCommit(r)
}

/// The (partition, offset) pairs of a Fetch request, from its body.
pub(super) fn fetched_from(body: Body) -> Vec<(i32, i64)> {
    let kind = match body {
        Body::Ready(b) => b,
        Body::Versioned { build, .. } => build(12),
    };
    match kind {
        RequestKind::Fetch(FetchRequest { topics, .. }) => topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
            .collect(),
        other => panic!("not a Fetch: {other:?}"),
    }
}

/// Where the Fetch `req` asks from, from its tag (the body is checked
/// against the tag in `assign_reset_fetch_and_take_records`).
pub(super) fn fetch_offsets(req: &Request) -> Vec<(i32, i64)> {
    let Tag::Fetch { offsets, .. } = &req.tag else {
        panic!("not a Fetch: {:?}", req.tag)
    };
    let mut v: Vec<(i32, i64)> = offsets.iter().map(|(t, o)| (t.partition, *o)).collect();
    v.sort();
    v
}

fn commit_offset(offset: i64) -> crate::consumer::requests::OffsetAndMetadata {
    crate::consumer::requests::OffsetAndMetadata {
        offset,
        leader_epoch: -1,
        metadata: None,
    }
}

pub(super) fn offsets_of(records: &[RecordSlice]) -> Vec<i64> {
    records
        .iter()
        .flat_map(|s| s.cols.offsets[s.from..s.to].to_vec())
        .collect()
}

/// A plain consumer assigned `t-0` and polled (positions are resolved),
/// its earliest offset reset to `at`, and its first Fetch returned.
fn assigned_at(at: i64) -> (ConsumerCore, Request) {
    let mut c = ConsumerCore::new(plain_cfg(), 0);
    c.set_cluster(cluster(&[("t", 1)]));
    c.assign(vec![tp(0)]).unwrap();
    c.on_poll(0).unwrap();
    let (a, _) = c.step(0);
    let mut reqs = sends(a);
    assert_eq!(reqs.len(), 1);
    let reset = reqs.remove(0);
    assert_eq!(reset.dest, Dest::Node(node(1)));
    let Tag::Reset { parts } = &reset.tag else {
        panic!("{:?}", reset.tag)
    };
    assert_eq!(parts, &vec![(tp(0), OffsetResetStrategy::Earliest)]);
    c.on_answer(reset.tag, ok(list_offsets_answer(&[(0, 0, at)])), 1);
    let (a, _) = c.step(2);
    let mut reqs = sends(a);
    assert_eq!(reqs.len(), 1, "one Fetch");
    (c, reqs.remove(0))
}

// ----- positions and fetching -------------------------------------------------------

#[test]
fn assign_reset_fetch_and_take_records() {
    let (mut c, fetch) = assigned_at(10);
    let Request {
        body, tag, dest, ..
    } = fetch;
    assert_eq!(dest, Dest::Node(node(1)));
    assert_eq!(fetched_from(body), vec![(0, 10)]);
    let fetch_tag = tag;
    // Nothing more goes to node 1 while its Fetch is in flight.
    assert!(sends(c.step(3).0).is_empty());
    let a = c.on_answer(fetch_tag, ok(fetch_answer(0, codes::NONE, 10, 5)), 4);
    assert!(wakes(&a), "records wake the application");
    let got = c.take_records(3);
    assert_eq!(offsets_of(&got), vec![10, 11, 12]);
    assert_eq!(c.subs.position(&tp(0)).unwrap().offset, 13);
    // Prefetch: the next range is asked for while two records still wait.
    let reqs = sends(c.step(5).0);
    assert_eq!(fetch_offsets(&reqs[0]), vec![(0, 15)]);
    assert_eq!(offsets_of(&c.take_records(10)), vec![13, 14]);
    assert_eq!(c.subs.position(&tp(0)).unwrap().offset, 15);
}

#[test]
fn a_whole_run_comes_alone_for_arrow_when_large_enough() {
    // Two fetched runs wait (10-14 and 15-19): poll_for_arrow's take returns
    // a first whole run of at least `alone_from` records alone.
    let two_runs = || {
        let (mut c, fetch) = assigned_at(10);
        c.on_answer(fetch.tag, ok(fetch_answer(0, codes::NONE, 10, 5)), 4);
        let mut reqs = sends(c.step(5).0);
        assert_eq!(fetch_offsets(&reqs[0]), vec![(0, 15)]);
        let next = reqs.remove(0);
        c.on_answer(next.tag, ok(fetch_answer(0, codes::NONE, 15, 5)), 6);
        c
    };
    let mut c = two_runs();
    let first = c.take_records_runs(100, 5);
    assert_eq!(first.len(), 1, "one slice: exported without a copy");
    assert_eq!(offsets_of(&first), (10..15).collect::<Vec<_>>());
    assert_eq!(
        offsets_of(&c.take_records_runs(100, 5)),
        (15..20).collect::<Vec<_>>()
    );
    // Runs smaller than the bound are merged up to max, as take_records does.
    let mut c = two_runs();
    assert_eq!(
        offsets_of(&c.take_records_runs(100, 6)),
        (10..20).collect::<Vec<_>>()
    );
    // A run already partly taken is not whole: merged with what follows.
    let mut c = two_runs();
    assert_eq!(offsets_of(&c.take_records(2)), vec![10, 11]);
    assert_eq!(
        offsets_of(&c.take_records_runs(100, 1)),
        (12..20).collect::<Vec<_>>()
    );
}

#[test]
fn positions_wait_for_the_first_poll_after_assign() {
    // assign() then seek() must not race a reset: nothing is resolved
    // before the application polls (or asks for a position).
    let mut c = ConsumerCore::new(plain_cfg(), 0);
    c.set_cluster(cluster(&[("t", 1)]));
    c.assign(vec![tp(0)]).unwrap();
    assert!(sends(c.step(0).0).is_empty());
    c.seek(&tp(0), 42).unwrap();
    c.on_poll(1).unwrap();
    let reqs = sends(c.step(1).0);
    assert_eq!(reqs.len(), 1);
    assert_eq!(fetch_offsets(&reqs[0]), vec![(0, 42)]);
}

#[test]
fn offset_out_of_range_resets_by_the_configured_strategy() {
    let (mut c, fetch) = assigned_at(10);
    c.on_answer(
        fetch.tag,
        ok(fetch_answer(0, codes::OFFSET_OUT_OF_RANGE, 10, 0)),
        5,
    );
    assert_eq!(c.subs.state(&tp(0)).unwrap().state, FetchState::AwaitReset);
    let mut reqs = sends(c.step(6).0);
    assert_eq!(reqs.len(), 1);
    let Request { body, tag, .. } = reqs.remove(0);
    match body_at_body(body, 5) {
        RequestKind::ListOffsets(ListOffsetsRequest { topics, .. }) => {
            assert_eq!(
                topics[0].partitions[0].timestamp,
                crate::consumer::fetch::EARLIEST_TIMESTAMP
            )
        }
        other => panic!("{other:?}"),
    }
    c.on_answer(tag, ok(list_offsets_answer(&[(0, 0, 3)])), 7);
    let reqs = sends(c.step(8).0);
    assert_eq!(fetch_offsets(&reqs[0]), vec![(0, 3)]);
}

#[test]
fn offset_out_of_range_without_a_reset_strategy_is_raised() {
    let cfg = ConsumerConfig {
        auto_offset_reset: OffsetResetStrategy::None,
        ..plain_cfg()
    };
    let mut c = ConsumerCore::new(cfg, 0);
    c.set_cluster(cluster(&[("t", 1)]));
    c.assign(vec![tp(0)]).unwrap();
    c.seek(&tp(0), 50).unwrap();
    let mut reqs = sends(c.step(0).0);
    let fetch = reqs.remove(0);
    let a = c.on_answer(
        fetch.tag,
        ok(fetch_answer(0, codes::OFFSET_OUT_OF_RANGE, 50, 0)),
        1,
    );
    assert!(wakes(&a));
    assert_eq!(
        c.errors.pop_front().map(|e| e.code()),
        Some(codes::OFFSET_OUT_OF_RANGE)
    );
}

#[test]
fn a_failed_fetch_backs_off_and_refreshes_metadata() {
    let (mut c, fetch) = assigned_at(0);
    let a = c.on_answer(fetch.tag, Err(Error::Disconnected { node_id: 1 }), 10);
    assert!(asks_metadata(&a));
    // Within retry_backoff_ms (100) the node is not asked again...
    let (a, wake_at) = c.step(20);
    assert!(sends(a).is_empty());
    assert!(wake_at <= 110, "woken when the backoff ends, not later");
    // ...after it, it is.
    assert_eq!(sends(c.step(110).0).len(), 1);
}

#[test]
fn a_partition_error_backs_off_that_partition() {
    let (mut c, fetch) = assigned_at(0);
    let a = c.on_answer(
        fetch.tag,
        ok(fetch_answer(0, codes::NOT_LEADER_OR_FOLLOWER, 0, 0)),
        10,
    );
    assert!(asks_metadata(&a));
    assert!(sends(c.step(50).0).is_empty());
    let reqs = sends(c.step(111).0);
    assert_eq!(fetch_offsets(&reqs[0]), vec![(0, 0)]);
}

#[test]
fn an_answer_for_a_moved_position_is_dropped() {
    let (mut c, fetch) = assigned_at(0);
    c.seek(&tp(0), 100).unwrap();
    c.on_answer(fetch.tag, ok(fetch_answer(0, codes::NONE, 0, 5)), 5);
    assert!(c.take_records(10).is_empty());
    let reqs = sends(c.step(6).0);
    assert_eq!(fetch_offsets(&reqs[0]), vec![(0, 100)]);
}

#[test]
fn a_partition_without_leader_asks_for_its_metadata() {
    let mut c = ConsumerCore::new(plain_cfg(), 0);
    c.set_cluster(cluster(&[("other", 1)]));
    c.assign(vec![tp(0)]).unwrap();
    c.seek(&tp(0), 0).unwrap();
    let (a, _) = c.step(0);
    assert!(a
        .iter()
        .any(|a| matches!(a, Action::MetadataUpdateForTopic(t) if t == "t")));
    assert!(sends(a).is_empty());
}

// ----- commits -------------------------------------------------------------------------

#[test]
fn auto_commit_sends_moved_positions_every_interval() {
    // A manually assigned group consumer: coordinator, no membership.
    let mut c = ConsumerCore::new(
        ConsumerConfig {
            enable_auto_commit: true,
            ..group_cfg()
        },
        0,
    );
    c.set_cluster(cluster(&[("t", 1)]));
    c.assign(vec![tp(0)]).unwrap();
    c.seek(&tp(0), 7).unwrap();
    let reqs = sends(c.step(0).0);
    let find = reqs
        .into_iter()
        .find(|r| matches!(r.tag, Tag::FindCoordinator))
        .expect("coordinator discovery");
    assert_eq!(find.dest, Dest::LeastLoaded);
    c.on_answer(find.tag, ok(super::tests_group::coordinator_answer(1)), 1);
    // Before the interval: no commit.
    let commits = |reqs: Vec<Request>| {
        reqs.into_iter()
            .filter(|r| matches!(r.tag, Tag::AutoCommit { .. }))
            .collect::<Vec<_>>()
    };
    let (a, wake_at) = c.step(4_000);
    assert!(commits(sends(a)).is_empty());
    assert!(wake_at <= 5_000);
    let mut due = commits(sends(c.step(5_000).0));
    assert_eq!(due.len(), 1);
    let commit = due.remove(0);
    assert_eq!(commit.dest, Dest::Node(coordinator_connection(&node(1))));
    let Tag::AutoCommit { offsets, .. } = &commit.tag else {
        unreachable!()
    };
    assert_eq!(offsets.get(&tp(0)), Some(&7));
    let Request { body, tag, .. } = commit;
    match body_at_body(body, 8) {
        RequestKind::OffsetCommit(OffsetCommitRequest {
            generation_id_or_member_epoch,
            topics,
            ..
        }) => {
            assert_eq!(
                generation_id_or_member_epoch, -1,
                "manual assignment commits with generation -1"
            );
            assert_eq!(topics[0].partitions[0].committed_offset, 7);
        }
        other => panic!("{other:?}"),
    }
    c.on_answer(tag, ok(offset_commit_answer(&[(0, codes::NONE)])), 5_012);
    // Auto-commits count in the commit figures: sent at 5000, answered at 5012.
    let m: HashMap<String, f64> = c.metrics(6_000).into_iter().collect();
    assert_eq!(
        (
            m["commit-total"],
            m["commit-latency-avg"],
            m["commit-error-total"]
        ),
        (1.0, 12.0, 0.0)
    );
    // Nothing moved: the next interval sends nothing.
    assert!(commits(sends(c.step(10_000).0)).is_empty());
    c.seek(&tp(0), 9).unwrap();
    assert_eq!(commits(sends(c.step(15_000).0)).len(), 1);
}

#[test]
fn committed_offsets_become_positions_and_missing_ones_reset() {
    let mut c = ConsumerCore::new(group_cfg(), 0);
    c.set_cluster(cluster(&[("t", 2)]));
    c.assign(vec![tp(0), tp(1)]).unwrap();
    c.on_poll(0).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(super::tests_group::coordinator_answer(1)), 1);
    let mut reqs = sends(c.step(2).0);
    assert_eq!(reqs.len(), 1);
    let of = reqs.remove(0);
    assert!(matches!(of.tag, Tag::OffsetFetch));
    // No second lookup while one is in flight.
    assert!(sends(c.step(3).0)
        .iter()
        .all(|r| !matches!(r.tag, Tag::OffsetFetch)));
    c.on_answer(of.tag, ok(offset_fetch_answer(&[(0, 33), (1, -1)])), 4);
    assert_eq!(c.subs.position(&tp(0)).unwrap().offset, 33);
    assert_eq!(c.subs.state(&tp(1)).unwrap().state, FetchState::AwaitReset);
    assert_eq!(c.last_committed.get(&tp(0)), Some(&33));
}

#[test]
fn a_failed_commit_marks_the_coordinator_unknown_and_is_retriable() {
    let mut c = ConsumerCore::new(group_cfg(), 0);
    c.set_cluster(cluster(&[("t", 1)]));
    c.assign(vec![tp(0)]).unwrap();
    let find = sends(c.step(0).0).remove(0);
    c.on_answer(find.tag, ok(super::tests_group::coordinator_answer(1)), 1);
    assert!(c.group.as_ref().unwrap().coordinator().is_some());
    let offsets = [(tp(0), commit_offset(1))].into_iter().collect();
    let cl = cluster(&[("t", 1)]);
    let r = c.commit_result(
        ok(offset_commit_answer(&[(0, codes::NOT_COORDINATOR)])),
        &offsets,
        &Generation::none(),
        &cl,
        2,
    );
    assert!(matches!(r, Err((_, true))));
    assert!(c.group.as_ref().unwrap().coordinator().is_none());
    let r = c.commit_result(
        ok(offset_commit_answer(&[(
            0,
            codes::OFFSET_METADATA_TOO_LARGE,
        )])),
        &offsets,
        &Generation::none(),
        &cl,
        3,
    );
    assert!(matches!(r, Err((_, false))));
}

#[test]
fn metrics_count_fetches_records_and_lag_per_partition() {
    let (mut c, fetch) = assigned_at(10);
    // Sent at 2 (`assigned_at`'s step), answered at 9: 7 ms.
    let mut answer = fetch_answer(0, codes::NONE, 10, 5);
    if let ResponseKind::Fetch(r) = &mut answer {
        r.responses[0].partitions[0].high_watermark = 40;
    }
    c.on_answer(fetch.tag, ok(answer), 9);
    let m: HashMap<String, f64> = c.metrics(1000).into_iter().collect();
    assert_eq!(m["fetch-total"], 1.0);
    assert_eq!(m["fetch-latency-avg"], 7.0);
    assert_eq!(m["fetch-latency-max"], 7.0);
    assert_eq!(m["records-per-request-avg"], 5.0);
    // Fetched, not yet polled: nothing consumed, 30 behind (40 - 10).
    assert_eq!(m["records-consumed-total"], 0.0);
    assert_eq!(m["records-lag{topic=t,partition=0}"], 30.0);
    assert_eq!(m["records-lag-max"], 30.0);
    assert_eq!(
        c.take_records(3)
            .iter()
            .map(|s| s.to - s.from)
            .sum::<usize>(),
        3
    );
    let m: HashMap<String, f64> = c.metrics(2000).into_iter().collect();
    assert_eq!(m["records-consumed-total"], 3.0);
    assert_eq!(m["records-consumed-rate"], 1.5);
    assert_eq!(m["records-lag-max"], 27.0);
    assert_eq!(c.lag(), vec![(tp(0), 27)]);
    assert_eq!(m["assigned-partitions"], 1.0);
    assert_eq!(m["rebalance-total"], 0.0);
    assert_eq!(m["last-rebalance-seconds-ago"], -1.0);
}
