//! The transaction manager driven with fake answers and a fake clock.

use std::collections::BTreeMap;

use ferrokafka_protocol::kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use ferrokafka_protocol::kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AddPartitionsToTxnResponse, BrokerId, EndTxnResponse,
    FindCoordinatorResponse, InitProducerIdResponse, ProducerId, RequestKind, ResponseKind,
    TopicName, TxnOffsetCommitResponse,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

use super::*;

struct View;

impl ClusterView for View {
    fn leader_of(&self, _: &TopicPartition) -> Option<i32> {
        Some(1)
    }
    fn topic_id(&self, _: &str) -> Option<[u8; 16]> {
        None
    }
    fn available_partitions(&self, _: &str) -> Vec<i32> {
        vec![0]
    }
    fn node_ready(&self, _: i32) -> bool {
        true
    }
    fn least_loaded_ready_node(&self) -> Option<i32> {
        Some(1)
    }
    fn node(&self, id: i32) -> Option<Node> {
        Some(Node::new(id, "broker", 9092, None))
    }
}

struct Harness {
    m: TransactionManager,
    now: i64,
    next_tag: u64,
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

impl Harness {
    fn new() -> Self {
        Harness {
            m: TransactionManager::new("tx-1", 60_000, 100),
            now: 1_000,
            next_tag: 1,
        }
    }

    /// The next request, built at `version`.
    fn poll_at(&mut self, has_incomplete: bool, version: i16) -> Option<(u64, i32, RequestKind)> {
        let next = &mut self.next_tag;
        let r = self.m.poll(self.now, has_incomplete, &View, &mut || {
            *next += 1;
            *next
        })?;
        Some((r.tag, r.node.id, (r.build)(version)))
    }

    fn poll(&mut self) -> Option<(u64, i32, RequestKind)> {
        self.poll_at(false, 3)
    }

    fn answer(&mut self, tag: u64, r: ResponseKind) {
        self.m.on_answer(tag, Ok(r), self.now);
    }

    /// Answer a FindCoordinator with node `node`.
    fn coordinator(&mut self, node: i32) {
        let (tag, _, req) = self.poll().expect("FindCoordinator");
        assert!(matches!(req, RequestKind::FindCoordinator(_)), "{req:?}");
        self.answer(
            tag,
            ResponseKind::FindCoordinator(
                FindCoordinatorResponse::default()
                    .with_node_id(BrokerId(node))
                    .with_host(StrBytes::from_static_str("broker"))
                    .with_port(9092),
            ),
        );
    }

    fn init(&mut self) {
        self.m.init().unwrap();
        self.coordinator(2);
        let (tag, node, req) = self.poll().expect("InitProducerId");
        assert_eq!(
            node, 2,
            "InitProducerId goes to the transaction coordinator"
        );
        let RequestKind::InitProducerId(r) = req else {
            panic!("{req:?}")
        };
        assert_eq!(r.transactional_id.as_ref().unwrap().0.as_str(), "tx-1");
        assert_eq!(r.transaction_timeout_ms, 60_000);
        self.answer(tag, pid_answer(0, 7, 0));
        assert!(matches!(self.m.take_outcome(Op::Init), Some(Ok(()))));
        assert_eq!(self.m.state(), TxnState::Ready);
    }

    /// begin + one partition added.
    fn in_txn_with(&mut self, p: i32) {
        self.m.begin().unwrap();
        self.m.maybe_add_partition(&tp(p)).unwrap();
        let (tag, _, req) = self.poll().expect("AddPartitionsToTxn");
        let RequestKind::AddPartitionsToTxn(r) = req else {
            panic!("{req:?}")
        };
        assert_eq!(r.v3_and_below_topics[0].partitions, vec![p]);
        self.answer(tag, add_partitions_answer(&[(p, 0)]));
        assert!(self.m.may_drain(&tp(p)));
    }
}

fn pid_answer(code: i16, id: i64, epoch: i16) -> ResponseKind {
    ResponseKind::InitProducerId(
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
    )
}

fn add_partitions_answer(codes: &[(i32, i16)]) -> ResponseKind {
    ResponseKind::AddPartitionsToTxn(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(vec![
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_results_by_partition(
                    codes
                        .iter()
                        .map(|&(p, c)| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(c)
                        })
                        .collect(),
                ),
        ]),
    )
}

fn end_answer(code: i16) -> ResponseKind {
    ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(code))
}

fn group() -> GroupMetadata {
    GroupMetadata {
        group_id: "g".into(),
        generation_id: 4,
        member_id: "m-1".into(),
        group_instance_id: None,
    }
}

fn offsets() -> BTreeMap<TopicPartition, OffsetAndMetadata> {
    BTreeMap::from([(
        TopicPartition::new("in", 0),
        OffsetAndMetadata {
            offset: 42,
            leader_epoch: -1,
            metadata: None,
        },
    )])
}

#[test]
fn init_finds_the_coordinator_then_gets_an_id() {
    let mut h = Harness::new();
    assert_eq!(h.m.state(), TxnState::Uninitialized);
    h.init();
    assert_eq!(h.m.producer_id_and_epoch().producer_id, 7);
    // A second init is a state error that names the state.
    let e = h.m.init().unwrap_err();
    assert!(e.to_string().contains("READY"), "{e}");
}

#[test]
fn sends_are_refused_outside_a_transaction() {
    let mut h = Harness::new();
    let e = h.m.maybe_add_partition(&tp(0)).unwrap_err();
    assert!(e.to_string().contains("init_transactions"), "{e}");
    h.init();
    let e = h.m.maybe_add_partition(&tp(0)).unwrap_err();
    assert!(e.to_string().contains("READY"), "{e}");
    assert!(h.m.commit().is_err() && h.m.abort().is_err());
}

#[test]
fn a_partition_is_drained_only_once_added_and_commit_waits_for_batches() {
    let mut h = Harness::new();
    h.init();
    h.m.begin().unwrap();
    h.m.maybe_add_partition(&tp(0)).unwrap();
    h.m.maybe_add_partition(&tp(1)).unwrap();
    assert!(!h.m.may_drain(&tp(0)));
    let (tag, node, req) = h.poll().unwrap();
    assert_eq!(node, 2);
    let RequestKind::AddPartitionsToTxn(r) = req else {
        panic!()
    };
    assert_eq!(
        r.v3_and_below_topics[0].partitions,
        vec![0, 1],
        "one request for both"
    );
    assert_eq!(r.v3_and_below_producer_id.0, 7);
    // Only one transactional request in flight at a time.
    h.m.maybe_add_partition(&tp(2)).unwrap();
    assert!(h.poll().is_none());
    h.answer(tag, add_partitions_answer(&[(0, 0), (1, 0)]));
    assert!(h.m.may_drain(&tp(0)) && h.m.may_drain(&tp(1)) && !h.m.may_drain(&tp(2)));
    h.m.commit().unwrap();
    assert_eq!(h.m.state(), TxnState::Committing);
    // Partition 2 is added before EndTxn; EndTxn waits for the batches.
    let (tag, _, req) = h.poll().unwrap();
    assert!(matches!(req, RequestKind::AddPartitionsToTxn(_)));
    h.answer(tag, add_partitions_answer(&[(2, 0)]));
    assert!(
        h.poll_at(true, 3).is_none(),
        "EndTxn waits while batches are incomplete"
    );
    let (tag, _, req) = h.poll_at(false, 3).unwrap();
    let RequestKind::EndTxn(r) = req else {
        panic!()
    };
    assert!(r.committed);
    h.answer(tag, end_answer(0));
    assert!(matches!(h.m.take_outcome(Op::Commit), Some(Ok(()))));
    assert_eq!(h.m.state(), TxnState::Ready);
    assert!(
        !h.m.may_drain(&tp(0)),
        "a new transaction adds its partitions again"
    );
}

#[test]
fn an_empty_transaction_commits_without_a_request() {
    let mut h = Harness::new();
    h.init();
    h.m.begin().unwrap();
    h.m.commit().unwrap();
    assert!(h.poll().is_none());
    assert!(matches!(h.m.take_outcome(Op::Commit), Some(Ok(()))));
    assert_eq!(h.m.state(), TxnState::Ready);
}

#[test]
fn fenced_init_is_fatal_and_every_later_call_fails() {
    let mut h = Harness::new();
    h.m.init().unwrap();
    h.coordinator(2);
    let (tag, _, _) = h.poll().unwrap();
    h.answer(tag, pid_answer(INVALID_PRODUCER_EPOCH, -1, -1));
    let e = h.m.take_outcome(Op::Init).unwrap().unwrap_err();
    assert_eq!(
        e.code(),
        PRODUCER_FENCED,
        "reported as ProducerFenced, as Java"
    );
    assert_eq!(h.m.state(), TxnState::FatalError);
    assert_eq!(h.m.fatal_code(), Some(PRODUCER_FENCED));
    assert_eq!(h.m.begin().unwrap_err().code(), PRODUCER_FENCED);
    // A send is a state error (raised by `send`) that names the cause.
    let e = h.m.maybe_add_partition(&tp(0)).unwrap_err();
    assert!(
        e.to_string().contains("FATAL_ERROR") && e.to_string().contains("ProducerFenced"),
        "{e}"
    );
}

#[test]
fn concurrent_transactions_is_retried_after_the_backoff() {
    let mut h = Harness::new();
    h.init();
    h.m.begin().unwrap();
    h.m.maybe_add_partition(&tp(0)).unwrap();
    let (tag, _, _) = h.poll().unwrap();
    h.answer(tag, add_partitions_answer(&[(0, CONCURRENT_TRANSACTIONS)]));
    assert!(!h.m.may_drain(&tp(0)));
    assert!(h.poll().is_none(), "backoff");
    h.now += 100;
    let (tag, _, req) = h.poll().unwrap();
    assert!(matches!(req, RequestKind::AddPartitionsToTxn(_)));
    h.answer(tag, add_partitions_answer(&[(0, 0)]));
    assert!(h.m.may_drain(&tp(0)));
}

#[test]
fn coordinator_moves_and_lost_answers_find_it_again() {
    let mut h = Harness::new();
    h.init();
    h.in_txn_with(0);
    h.m.commit().unwrap();
    let (tag, _, _) = h.poll().unwrap();
    h.answer(tag, end_answer(NOT_COORDINATOR));
    h.now += 100;
    h.coordinator(3);
    let (tag, node, req) = h.poll().unwrap();
    assert_eq!(node, 3, "EndTxn goes to the new coordinator");
    assert!(matches!(req, RequestKind::EndTxn(_)));
    // The broker goes away during EndTxn: no answer, find it and retry.
    h.m.on_answer(tag, Err(Error::Disconnected { node_id: 3 }), h.now);
    h.now += 100;
    h.coordinator(2);
    let (tag, node, _) = h.poll().unwrap();
    assert_eq!(node, 2);
    h.answer(tag, end_answer(0));
    assert!(matches!(h.m.take_outcome(Op::Commit), Some(Ok(()))));
}

#[test]
fn a_failed_batch_makes_the_transaction_abortable_and_the_abort_bumps_the_epoch() {
    let mut h = Harness::new();
    h.init();
    h.in_txn_with(0);
    h.m.on_batch_failed(&Error::broker(NOT_ENOUGH_REPLICAS, None));
    assert_eq!(h.m.state(), TxnState::AbortableError);
    assert!(
        h.m.abort_undrained_error().is_some(),
        "queued records fail now"
    );
    let e = h.m.commit().unwrap_err();
    assert!(e.to_string().contains("must be aborted"), "{e}");
    assert!(h.m.maybe_add_partition(&tp(1)).is_err());
    h.m.abort().unwrap();
    let (tag, _, req) = h.poll().unwrap();
    let RequestKind::EndTxn(r) = req else {
        panic!()
    };
    assert!(!r.committed);
    h.answer(tag, end_answer(0));
    // The sequence hole needs a new epoch: InitProducerId naming our id (v3+).
    let (tag, _, req) = h.poll().unwrap();
    let RequestKind::InitProducerId(r) = req else {
        panic!("{req:?}")
    };
    assert_eq!((r.producer_id.0, r.producer_epoch), (7, 0));
    assert!(
        h.m.take_outcome(Op::Abort).is_none(),
        "not done before the bump"
    );
    h.answer(tag, pid_answer(0, 7, 1));
    assert!(matches!(h.m.take_outcome(Op::Abort), Some(Ok(()))));
    assert_eq!(h.m.producer_id_and_epoch().epoch, 1);
    assert_eq!(h.m.state(), TxnState::Ready);
    h.m.begin().unwrap();
}

#[test]
fn a_fenced_produce_answer_is_fatal() {
    let mut h = Harness::new();
    h.init();
    h.in_txn_with(0);
    h.m.commit().unwrap();
    h.m.on_batch_failed(&Error::broker(PRODUCER_FENCED, None));
    assert_eq!(h.m.state(), TxnState::FatalError);
    assert_eq!(
        h.m.take_outcome(Op::Commit).unwrap().unwrap_err().code(),
        PRODUCER_FENCED
    );
    assert!(h.m.abort().is_err(), "a fatal error cannot be aborted");
}

#[test]
fn offsets_go_to_the_group_coordinator_with_the_members_generation() {
    let mut h = Harness::new();
    h.init();
    h.m.begin().unwrap();
    h.m.send_offsets(offsets(), group()).unwrap();
    let (tag, node, req) = h.poll().unwrap();
    assert_eq!(node, 2);
    let RequestKind::AddOffsetsToTxn(r) = req else {
        panic!()
    };
    assert_eq!(r.group_id.0.as_str(), "g");
    h.answer(
        tag,
        ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default()),
    );
    // The group's coordinator first, then TxnOffsetCommit to it.
    h.coordinator(5);
    let (tag, node, req) = h.poll().unwrap();
    assert_eq!(node, 5);
    let RequestKind::TxnOffsetCommit(r) = req else {
        panic!()
    };
    assert_eq!((r.generation_id, r.member_id.as_str()), (4, "m-1"));
    assert_eq!(r.topics[0].partitions[0].committed_offset, 42);
    h.answer(tag, offset_commit_answer(0));
    assert!(matches!(h.m.take_outcome(Op::SendOffsets), Some(Ok(()))));
    // The transaction holds offsets: EndTxn is sent even with no records.
    h.m.commit().unwrap();
    let (_, _, req) = h.poll().unwrap();
    assert!(matches!(req, RequestKind::EndTxn(_)));
}

fn offset_commit_answer(code: i16) -> ResponseKind {
    ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(vec![
        TxnOffsetCommitResponseTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("in")))
            .with_partitions(vec![TxnOffsetCommitResponsePartition::default()
                .with_partition_index(0)
                .with_error_code(code)]),
    ]))
}

#[test]
fn a_stale_generation_makes_the_offsets_commit_abortable() {
    let mut h = Harness::new();
    h.init();
    h.m.begin().unwrap();
    h.m.send_offsets(offsets(), group()).unwrap();
    let (tag, _, _) = h.poll().unwrap();
    h.answer(
        tag,
        ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default()),
    );
    h.coordinator(5);
    let (tag, _, _) = h.poll().unwrap();
    h.answer(tag, offset_commit_answer(ILLEGAL_GENERATION));
    let e = h.m.take_outcome(Op::SendOffsets).unwrap().unwrap_err();
    assert_eq!(e.code(), ILLEGAL_GENERATION);
    assert_eq!(h.m.state(), TxnState::AbortableError);
}

#[test]
fn a_call_that_timed_out_is_waited_for_again_not_restarted() {
    let mut h = Harness::new();
    h.init();
    h.in_txn_with(0);
    h.m.commit().unwrap();
    let (tag, _, _) = h.poll().unwrap();
    // The caller gave up; calling commit again joins the same call.
    h.m.commit().unwrap();
    assert!(h.poll().is_none(), "no second EndTxn");
    assert!(
        h.m.abort().is_err(),
        "another call while commit runs names the state"
    );
    h.answer(tag, end_answer(0));
    assert!(matches!(h.m.take_outcome(Op::Commit), Some(Ok(()))));
}

#[test]
fn an_abort_skips_end_txn_when_the_coordinator_lost_our_id() {
    let mut h = Harness::new();
    h.init();
    h.in_txn_with(0);
    h.m.commit().unwrap();
    let (tag, _, _) = h.poll().unwrap();
    h.answer(tag, end_answer(INVALID_PRODUCER_ID_MAPPING));
    assert_eq!(h.m.state(), TxnState::AbortableError);
    h.m.abort().unwrap();
    let (tag, _, req) = h.poll().unwrap();
    assert!(matches!(req, RequestKind::InitProducerId(_)), "{req:?}");
    h.answer(tag, pid_answer(0, 9, 0));
    assert!(matches!(h.m.take_outcome(Op::Abort), Some(Ok(()))));
}

#[test]
fn an_unsupported_api_is_fatal_not_retried_forever() {
    let mut h = Harness::new();
    h.m.init().unwrap();
    h.coordinator(2);
    let (tag, _, _) = h.poll().unwrap();
    h.m.on_answer(
        tag,
        Err(Error::UnsupportedVersion {
            api: "InitProducerId".into(),
            node_id: 2,
            broker_min: -1,
            broker_max: -1,
            client_min: 0,
            client_max: 5,
        }),
        h.now,
    );
    assert_eq!(h.m.state(), TxnState::FatalError);
    assert!(h.m.take_outcome(Op::Init).unwrap().is_err());
}

#[test]
fn a_refused_bump_is_asked_again_by_transactional_id_alone() {
    let mut h = Harness::new();
    h.init();
    h.in_txn_with(0);
    h.m.on_batch_failed(&Error::broker(NOT_ENOUGH_REPLICAS, None));
    h.m.abort().unwrap();
    let (tag, _, _) = h.poll().unwrap();
    h.answer(tag, end_answer(0));
    let (tag, _, _) = h.poll().unwrap();
    h.answer(tag, pid_answer(-1, -1, -1)); // UNKNOWN_SERVER_ERROR
    assert!(
        h.m.take_outcome(Op::Abort).is_none(),
        "not fatal: asked again"
    );
    h.now += 100;
    let (tag, _, req) = h.poll().unwrap();
    let RequestKind::InitProducerId(r) = req else {
        panic!("{req:?}")
    };
    assert_eq!((r.producer_id.0, r.producer_epoch), (-1, -1));
    h.answer(tag, pid_answer(0, 7, 1));
    assert!(matches!(h.m.take_outcome(Op::Abort), Some(Ok(()))));
}
