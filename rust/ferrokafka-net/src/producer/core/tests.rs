//! The producer's state machine driven with fake answers, a fake cluster and
//! a fake clock: no threads, no sockets, no sleeps. Each test is one rule of
//! docs/semantics.md §5 or of the send path, checked by the requests the core
//! asks for and the records it completes.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use rand::SeedableRng;

use super::*;
use crate::producer::accumulator::BatchBuilder;
use crate::producer::partitioner::partition_for_key;
use crate::producer::sender::ProducerFields;
use crate::producer::txn::Op;

/// Encodes as "producer_id:epoch:base_sequence:records", so a test reads the
/// producer fields each send carried. A record takes 8 bytes plus its key
/// and value; the batch refuses records past its capacity.
struct FakeBatch {
    n: usize,
    size: usize,
    cap: usize,
}

impl BatchBuilder for FakeBatch {
    fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
        let b = 8 + r.key.map_or(0, |k| k.len()) + r.value.map_or(0, |v| v.len());
        if self.n > 0 && self.size + b > self.cap {
            return None;
        }
        self.n += 1;
        self.size += b;
        Some(b)
    }
    fn size_bytes(&self) -> usize {
        self.size
    }
    fn record_count(&self) -> usize {
        self.n
    }
}

impl EncodableBatch for FakeBatch {
    fn encode(&mut self, p: ProducerFields) -> Result<Bytes, Error> {
        Ok(Bytes::from(format!(
            "{}:{}:{}:{}",
            p.producer_id, p.producer_epoch, p.base_sequence, self.n
        )))
    }
    fn split(&mut self, _max_bytes: usize) -> Result<Vec<Self>, Error> {
        let half = self.n.div_ceil(2);
        Ok(vec![
            FakeBatch {
                n: half,
                size: 9 * half,
                cap: self.cap,
            },
            FakeBatch {
                n: self.n - half,
                size: 9 * (self.n - half),
                cap: self.cap,
            },
        ])
    }
}

/// Leaders by partition (topic "t", 4 partitions), and nodes that are not
/// ready; both changeable between steps.
struct FakeCluster {
    leaders: RefCell<HashMap<i32, i32>>,
    not_ready: RefCell<HashSet<i32>>,
}

impl FakeCluster {
    /// Partition p led by node `leader(p)`.
    fn new(leader: impl Fn(i32) -> i32) -> Self {
        FakeCluster {
            leaders: RefCell::new((0..4).map(|p| (p, leader(p))).collect()),
            not_ready: RefCell::default(),
        }
    }
}

impl ClusterView for FakeCluster {
    fn leader_of(&self, tp: &TopicPartition) -> Option<i32> {
        self.leaders.borrow().get(&tp.partition).copied()
    }
    fn topic_id(&self, _: &str) -> Option<[u8; 16]> {
        None
    }
    fn available_partitions(&self, _: &str) -> Vec<i32> {
        let mut v: Vec<i32> = self.leaders.borrow().keys().copied().collect();
        v.sort_unstable();
        v
    }
    fn node_ready(&self, node: i32) -> bool {
        !self.not_ready.borrow().contains(&node)
    }
    fn least_loaded_ready_node(&self) -> Option<i32> {
        let mut nodes: Vec<i32> = self.leaders.borrow().values().copied().collect();
        nodes.sort_unstable();
        nodes.into_iter().find(|&n| self.node_ready(n))
    }
    fn node(&self, id: i32) -> Option<crate::cluster::Node> {
        Some(crate::cluster::Node::new(id, "broker", 9092, None))
    }
}

type Core = ProducerCore<FakeBatch, u32>;

fn config(idempotent: bool) -> ProducerConfig {
    ProducerConfig {
        acks: if idempotent { -1 } else { 1 },
        enable_idempotence: idempotent,
        linger_ms: 0,
        batch_size: 100,
        buffer_memory: 10_000,
        retry_backoff_ms: 10,
        retry_backoff_max_ms: 10,
        delivery_timeout_ms: 1000,
        request_timeout_ms: 500,
        max_request_size: 1 << 20,
        retries: 5,
        max_in_flight_per_partition: 1,
        ..ProducerConfig::default()
    }
}

fn new_core(cfg: ProducerConfig) -> Core {
    ProducerCore::new(
        cfg,
        StdRng::seed_from_u64(1),
        Box::new(|cap| FakeBatch { n: 0, size: 0, cap }),
    )
}

const ALL: [i32; 4] = [0, 1, 2, 3];

fn info() -> TopicInfo<'static> {
    TopicInfo {
        num_partitions: 4,
        available: &ALL,
    }
}

fn record<'a>(key: Option<&'a [u8]>, value: &'a [u8], now: i64) -> RecordRef<'a> {
    RecordRef {
        timestamp_ms: now,
        key,
        value: Some(value),
        headers: &[],
    }
}

/// Append a 1-byte record (9 bytes in a FakeBatch) to partition `p`.
fn send(c: &mut Core, p: i32, h: u32, now: i64) -> bool {
    match c.append("t", Some(p), info(), &record(None, b"v", now), h, now) {
        Ok(wake) => wake,
        Err(e) => panic!("append refused: {e:?}"),
    }
}

/// One Produce request: (node, tag, (partition, encoded batch) per batch,
/// expect_response).
type SentProduce = (i32, u64, Vec<(i32, String)>, bool);

/// A step's or an answer's actions, sorted for assertions.
#[derive(Default)]
struct Out {
    produce: Vec<SentProduce>,
    /// (node, tag, producer id and epoch asked to bump)
    init: Vec<(i32, u64, (i64, i16))>,
    /// (handles, Ok(base offset) or Err(error code))
    completed: Vec<(Vec<u32>, Result<i64, i16>)>,
    update_topics: Vec<String>,
    update_metadata: bool,
    memory_freed: bool,
    /// The transactional id of each Produce request.
    produce_txn_ids: Vec<Option<String>>,
    /// Transactional requests: (tag, node, body built at v3).
    txn: Vec<(
        u64,
        i32,
        ferrokafka_protocol::kafka_protocol::messages::RequestKind,
    )>,
}

impl Out {
    fn of(actions: Vec<Action<u32>>) -> Out {
        let mut o = Out::default();
        for a in actions {
            match a {
                Action::Produce(call) => {
                    o.produce_txn_ids.push(
                        call.request
                            .transactional_id
                            .as_ref()
                            .map(|t| t.0.to_string()),
                    );
                    let batches = call
                        .request
                        .topic_data
                        .iter()
                        .flat_map(|t| t.partition_data.iter())
                        .map(|p| {
                            let r = p.records.clone().unwrap_or_default().to_vec();
                            (p.index, String::from_utf8(r).unwrap())
                        })
                        .collect();
                    o.produce
                        .push((call.node_id, call.token, batches, call.expect_response));
                }
                Action::InitProducerId {
                    node_id,
                    tag,
                    request,
                } => o.init.push((
                    node_id,
                    tag,
                    (request.producer_id.0, request.producer_epoch),
                )),
                Action::Txn(r) => o.txn.push((r.tag, r.node.id, (r.build)(3))),
                Action::UpdateTopics(t) => o.update_topics.extend(t),
                Action::UpdateMetadata => o.update_metadata = true,
                Action::MemoryFreed => o.memory_freed = true,
                Action::Complete(ds) => o.completed.extend(ds.into_iter().map(|d| {
                    let r = d.result.map(|(base, _)| base).map_err(|e| e.code());
                    (d.handles, r)
                })),
            }
        }
        o
    }

    /// The encoded batches of every Produce request, in order.
    fn sent(&self) -> Vec<&str> {
        self.produce
            .iter()
            .flat_map(|p| p.2.iter().map(|(_, s)| s.as_str()))
            .collect()
    }

    /// The one Produce request's tag.
    fn tag(&self) -> u64 {
        assert_eq!(self.produce.len(), 1, "expected one Produce request");
        self.produce[0].1
    }
}

fn step(c: &mut Core, now: i64, view: &FakeCluster) -> (Out, i64) {
    let s = c.step(now, view);
    (Out::of(s.actions), s.wake_at_ms)
}

fn answer(c: &mut Core, tag: u64, results: Vec<PartitionResult>, now: i64) -> Out {
    Out::of(c.on_answer(tag, Ok(Answer::Produce(results)), now))
}

fn result(p: i32, code: i16, base: i64) -> PartitionResult {
    PartitionResult {
        tp: TopicPartition::new("t", p),
        error_code: code,
        base_offset: base,
        log_append_time_ms: -1,
        log_start_offset: 0,
        error_message: None,
        record_errors: vec![],
        current_leader: None,
    }
}

fn ok(p: i32, base: i64) -> Vec<PartitionResult> {
    vec![result(p, 0, base)]
}

fn err(p: i32, code: i16) -> Vec<PartitionResult> {
    vec![result(p, code, -1)]
}

/// Idempotent core with producer id 7, epoch 0.
fn with_producer_id(cfg: ProducerConfig, view: &FakeCluster) -> Core {
    let mut c = new_core(cfg);
    let (o, _) = step(&mut c, 0, view);
    assert_eq!(o.init.len(), 1);
    let a = c.on_answer(
        o.init[0].1,
        Ok(Answer::ProducerId {
            producer_id: 7,
            epoch: 0,
        }),
        0,
    );
    assert!(a.is_empty());
    c
}

#[test]
fn linger_expires_by_the_clock() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(false);
    cfg.linger_ms = 20;
    let mut c = new_core(cfg);
    assert!(send(&mut c, 0, 1, 0), "a new batch wakes the runner");
    let (o, wake_at) = step(&mut c, 0, &view);
    assert!(o.produce.is_empty());
    assert_eq!(wake_at, 20, "sleeps until linger expires");
    let (o, wake_at) = step(&mut c, 19, &view);
    assert!(o.produce.is_empty());
    assert_eq!(wake_at, 20);
    let (o, _) = step(&mut c, 20, &view);
    assert_eq!(o.sent(), vec!["-1:-1:-1:1"]);
}

#[test]
fn full_batch_is_ready_before_linger() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(false);
    cfg.linger_ms = 1000;
    cfg.delivery_timeout_ms = 10_000;
    let mut c = new_core(cfg);
    // 11 records of 9 bytes fill a 100-byte batch; the 12th opens the next.
    let wakes: Vec<bool> = (1..=12).map(|h| send(&mut c, 0, h, 0)).collect();
    assert!(wakes[0] && !wakes[1] && !wakes[10] && wakes[11]);
    let (o, _) = step(&mut c, 0, &view);
    assert_eq!(o.sent(), vec!["-1:-1:-1:11"], "the full batch goes at once");
    let (o, wake_at) = step(&mut c, 1, &view);
    assert!(o.produce.is_empty(), "the open batch lingers");
    assert_eq!(wake_at, 1 + IDLE_RECHECK_MS, "a long linger is rechecked");
    assert!(step(&mut c, 999, &view).0.produce.is_empty());
    assert_eq!(step(&mut c, 1000, &view).0.sent(), vec!["-1:-1:-1:1"]);
}

#[test]
fn records_behind_a_waiting_batch_do_not_wake_the_runner() {
    // A full batch held back (no answer yet frees its partition) is known
    // to the runner; the records appended behind it change nothing it could
    // act on before its wake time, so only the batch boundaries wake it.
    let mut cfg = config(false);
    cfg.linger_ms = 1000;
    cfg.delivery_timeout_ms = 10_000;
    let mut c = new_core(cfg);
    // 11 records of 9 bytes go into a 100-byte batch; the 12th does not fit
    // and opens the second (sealing the first), the 23rd the third.
    let wakes: Vec<bool> = (1..=23).map(|h| send(&mut c, 0, h, 0)).collect();
    let woke: Vec<usize> = (0..wakes.len())
        .filter(|&i| wakes[i])
        .map(|i| i + 1)
        .collect();
    assert_eq!(woke, vec![1, 12, 23], "{wakes:?}");
}

#[test]
fn retriable_error_retries_after_backoff_by_the_clock() {
    let view = FakeCluster::new(|_| 1);
    let mut c = with_producer_id(config(true), &view);
    send(&mut c, 0, 1, 0);
    let (o, _) = step(&mut c, 0, &view);
    let a = o.tag();
    send(&mut c, 0, 2, 1);
    let (o, _) = step(&mut c, 1, &view);
    assert!(o.produce.is_empty(), "one batch of a partition in flight");
    let o = answer(&mut c, a, err(0, codes::NOT_LEADER_OR_FOLLOWER), 5);
    assert!(o.completed.is_empty() && o.update_metadata);
    let (o, wake_at) = step(&mut c, 14, &view);
    assert!(o.produce.is_empty(), "backing off until 15");
    assert_eq!(wake_at, 15);
    let (o, _) = step(&mut c, 15, &view);
    assert_eq!(o.sent(), vec!["7:0:0:1"], "the retry, alone, same sequence");
    let retry = o.tag();
    assert!(
        step(&mut c, 16, &view).0.produce.is_empty(),
        "nothing follows a retry"
    );
    let o = answer(&mut c, retry, ok(0, 100), 17);
    assert_eq!(o.completed, vec![(vec![1], Ok(100))]);
    let (o, _) = step(&mut c, 17, &view);
    assert_eq!(o.sent(), vec!["7:0:1:1"]);
}

#[test]
fn delivery_timeout_fails_the_batch_records() {
    let view = FakeCluster::new(|_| 1);
    view.leaders.borrow_mut().remove(&0);
    let mut c = new_core(config(false));
    send(&mut c, 0, 1, 0);
    send(&mut c, 0, 2, 0);
    let (o, _) = step(&mut c, 0, &view);
    assert!(o.produce.is_empty());
    assert_eq!(o.update_topics, vec!["t"], "leader unknown: ask metadata");
    assert!(step(&mut c, 999, &view).0.completed.is_empty());
    let (o, _) = step(&mut c, 1000, &view);
    assert_eq!(
        o.completed,
        vec![(
            vec![1, 2],
            Err(Error::Timeout {
                what: String::new(),
                timeout_ms: 0
            }
            .code())
        )]
    );
    assert!(o.memory_freed);
    assert_eq!(c.free_memory(), 10_000);
}

#[test]
fn retriable_error_past_delivery_timeout_fails_instead_of_retrying() {
    let view = FakeCluster::new(|_| 1);
    let mut c = new_core(config(false));
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    c.memory_waiter(true);
    let o = answer(&mut c, a, err(0, codes::NOT_LEADER_OR_FOLLOWER), 1000);
    assert_eq!(
        o.completed,
        vec![(vec![1], Err(codes::NOT_LEADER_OR_FOLLOWER))]
    );
    assert!(o.memory_freed);
}

/// docs/semantics.md §5.4.
#[test]
fn leader_change_waits_for_in_flight_to_the_old_leader() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(true);
    cfg.max_in_flight_per_partition = 2;
    let mut c = with_producer_id(cfg, &view);
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    answer(&mut c, a, ok(0, 0), 0);
    send(&mut c, 0, 2, 1);
    let (o, _) = step(&mut c, 1, &view);
    assert_eq!(o.produce[0].0, 1);
    let b = o.tag();
    view.leaders.borrow_mut().insert(0, 2);
    send(&mut c, 0, 3, 2);
    assert!(
        step(&mut c, 2, &view).0.produce.is_empty(),
        "b is still in flight to node 1"
    );
    answer(&mut c, b, ok(0, 1), 3);
    let (o, _) = step(&mut c, 3, &view);
    assert_eq!(o.produce.len(), 1);
    assert_eq!(o.produce[0].0, 2, "to the new leader");
    assert_eq!(o.sent(), vec!["7:0:2:1"]);
}

#[test]
fn acks_zero_completes_on_write() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(false);
    cfg.acks = 0;
    let mut c = new_core(cfg);
    send(&mut c, 0, 9, 0);
    let (o, _) = step(&mut c, 0, &view);
    assert!(!o.produce[0].3, "no answer expected");
    let o = answer(&mut c, o.tag(), vec![], 0);
    assert_eq!(o.completed, vec![(vec![9], Ok(-1))], "no offset known");
}

#[test]
fn held_back_batch_rechecks_soon_and_idle_sleeps_long() {
    let view = FakeCluster::new(|_| 1);
    let mut c = new_core(config(false));
    assert_eq!(step(&mut c, 0, &view).1, IDLE_RECHECK_MS, "nothing to do");
    view.not_ready.borrow_mut().insert(1);
    send(&mut c, 0, 1, 0);
    let (o, wake_at) = step(&mut c, 0, &view);
    assert!(o.produce.is_empty());
    assert_eq!(
        wake_at, HELD_BACK_RECHECK_MS,
        "a connection may become ready"
    );
    view.not_ready.borrow_mut().clear();
    assert_eq!(step(&mut c, 2, &view).0.produce.len(), 1);
}

#[test]
fn close_fails_queued_and_in_flight_records() {
    let view = FakeCluster::new(|p| p + 1);
    let mut c = new_core(config(false));
    send(&mut c, 0, 1, 0);
    step(&mut c, 0, &view);
    view.not_ready.borrow_mut().insert(2);
    send(&mut c, 1, 2, 0);
    step(&mut c, 0, &view);
    let o = Out::of(c.abort_all(Error::Closed { what: "producer" }));
    let mut handles: Vec<u32> = o.completed.iter().flat_map(|c| c.0.clone()).collect();
    handles.sort_unstable();
    assert_eq!(handles, vec![1, 2]);
    assert!(o.completed.iter().all(|c| c.1.is_err()));
    assert_eq!(c.free_memory(), 10_000);
}

/// The one append path: size check, explicit partition range, keyed records
/// by murmur2 (`partition_for_key`), unkeyed records sticky to one partition.
#[test]
fn append_checks_size_and_partition_and_picks_partitions() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(false);
    cfg.max_request_size = 200;
    let mut c = new_core(cfg.clone());
    let big = [0u8; 200];
    match c.append("t", None, info(), &record(None, &big, 0), 1, 0) {
        Err(Refused::Failed(e, 1)) => assert_eq!(e.code(), codes::MESSAGE_TOO_LARGE),
        other => panic!("{other:?}"),
    }
    match c.append("t", Some(4), info(), &record(None, b"v", 0), 2, 0) {
        Err(Refused::Failed(Error::Config { key, .. }, 2)) => assert_eq!(key, "partition"),
        other => panic!("{other:?}"),
    }
    let key: &[u8] = b"some key";
    for h in 0..3 {
        c.append("t", None, info(), &record(Some(key), b"v", 0), h, 0)
            .unwrap();
    }
    let (o, _) = step(&mut c, 0, &view);
    let batches: Vec<(i32, String)> = o.produce.into_iter().flat_map(|p| p.2).collect();
    assert_eq!(
        batches,
        vec![(partition_for_key(key, 4), "-1:-1:-1:3".into())]
    );

    // 11 unkeyed records of 9 bytes (99 < batch_size): one sticky partition.
    let mut c = new_core(cfg);
    for h in 10..21 {
        c.append("t", None, info(), &record(None, b"v", 0), h, 0)
            .unwrap();
    }
    let (o, _) = step(&mut c, 0, &view);
    let batches: Vec<(i32, String)> = o.produce.into_iter().flat_map(|p| p.2).collect();
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!(batches[0].1, "-1:-1:-1:11");
}

#[test]
fn full_buffer_needs_memory_until_an_answer_frees_it() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(false);
    cfg.buffer_memory = 200;
    let mut c = new_core(cfg);
    send(&mut c, 0, 1, 0);
    send(&mut c, 1, 2, 0);
    match c.append("t", Some(2), info(), &record(None, b"v", 0), 3, 0) {
        Err(Refused::NeedMemory(3)) => {}
        other => panic!("{other:?}"),
    }
    // The refused send waits (producer/client.rs `append_waiting`).
    c.memory_waiter(true);
    let (o, _) = step(&mut c, 0, &view);
    let a = o.tag();
    let o = answer(&mut c, a, vec![result(0, 0, 5), result(1, 0, 6)], 1);
    assert!(o.memory_freed);
    assert_eq!(o.completed.len(), 2);
    assert!(send(&mut c, 2, 3, 1));
}

// --- transactions (docs/semantics.md §7): the core with its manager ----------

fn txn_answer(
    c: &mut Core,
    tag: u64,
    r: ferrokafka_protocol::kafka_protocol::messages::ResponseKind,
    now: i64,
) {
    assert!(c
        .on_answer(tag, Ok(Answer::Txn(Box::new(r))), now)
        .is_empty());
}

/// A transactional core past init_transactions (coordinator node 2, id 7).
fn transactional(view: &FakeCluster) -> Core {
    use ferrokafka_protocol::kafka_protocol::messages::{
        BrokerId, FindCoordinatorResponse, InitProducerIdResponse, ProducerId, ResponseKind,
    };
    use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
    let mut cfg = config(true);
    cfg.transactional_id = Some("tx".into());
    let mut c = new_core(cfg);
    // Records are refused before init_transactions.
    assert!(matches!(
        c.append("t", Some(0), info(), &record(None, b"v", 0), 1, 0),
        Err(Refused::Failed(Error::State { .. }, 1))
    ));
    let (o, _) = step(&mut c, 0, view);
    assert!(
        o.init.is_empty() && o.txn.is_empty(),
        "no id is asked for before init"
    );
    c.txn_call(|t| t.init()).unwrap();
    let (o, _) = step(&mut c, 0, view);
    let find = FindCoordinatorResponse::default()
        .with_node_id(BrokerId(2))
        .with_host(StrBytes::from_static_str("b"))
        .with_port(9092);
    txn_answer(&mut c, o.txn[0].0, ResponseKind::FindCoordinator(find), 0);
    let (o, _) = step(&mut c, 0, view);
    assert_eq!(o.txn[0].1, 2);
    let pid = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(7))
        .with_producer_epoch(0);
    txn_answer(&mut c, o.txn[0].0, ResponseKind::InitProducerId(pid), 0);
    assert!(matches!(c.txn_call_outcome(Op::Init), Some(Ok(()))));
    c
}

#[test]
fn transactional_records_wait_for_add_partitions_and_carry_the_id() {
    use ferrokafka_protocol::kafka_protocol::messages::{RequestKind, ResponseKind};
    let view = FakeCluster::new(|_| 1);
    let mut c = transactional(&view);
    c.txn_call(|t| t.begin()).unwrap();
    send(&mut c, 0, 1, 10);
    let (o, _) = step(&mut c, 20, &view);
    assert!(
        o.produce.is_empty(),
        "not before the partition is in the transaction"
    );
    assert_eq!(o.txn.len(), 1);
    let RequestKind::AddPartitionsToTxn(r) = &o.txn[0].2 else {
        panic!("{:?}", o.txn[0].2)
    };
    assert_eq!(r.v3_and_below_topics[0].partitions, vec![0]);
    let added = ferrokafka_protocol::kafka_protocol::messages::AddPartitionsToTxnResponse::default()
        .with_results_by_topic_v3_and_below(vec![
            ferrokafka_protocol::kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                .with_name(ferrokafka_protocol::kafka_protocol::messages::TopicName("t".into()))
                .with_results_by_partition(vec![
                    ferrokafka_protocol::kafka_protocol::messages::add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(0),
                ]),
        ]);
    txn_answer(
        &mut c,
        o.txn[0].0,
        ResponseKind::AddPartitionsToTxn(added),
        20,
    );
    let (o, _) = step(&mut c, 20, &view);
    // Sent under the coordinator's producer id and epoch, sequence 0.
    assert_eq!(o.sent(), vec!["7:0:0:1"]);
    assert_eq!(o.produce_txn_ids, vec![Some("tx".to_string())]);
    // Commit: EndTxn only once the batch is acknowledged.
    c.txn_call(|t| t.commit()).unwrap();
    let (o2, _) = step(&mut c, 21, &view);
    assert!(o2.txn.is_empty(), "EndTxn waits for the batch in flight");
    let done = answer(&mut c, o.tag(), ok(0, 0), 22);
    assert_eq!(done.completed.len(), 1);
    let (o, _) = step(&mut c, 22, &view);
    let RequestKind::EndTxn(r) = &o.txn[0].2 else {
        panic!("{:?}", o.txn[0].2)
    };
    assert!(r.committed && r.producer_id.0 == 7);
}

#[test]
fn an_abort_fails_queued_records_without_sending_them() {
    let view = FakeCluster::new(|_| 1);
    let mut c = transactional(&view);
    c.txn_call(|t| t.begin()).unwrap();
    send(&mut c, 0, 1, 10);
    send(&mut c, 1, 2, 10);
    c.txn_call(|t| t.abort()).unwrap();
    let (o, _) = step(&mut c, 11, &view);
    assert!(o.produce.is_empty());
    let mut failed: Vec<(Vec<u32>, Result<i64, i16>)> = o.completed;
    failed.sort();
    assert_eq!(
        failed,
        vec![
            (vec![1], Err(crate::error::local_code::PURGE_QUEUE)),
            (vec![2], Err(crate::error::local_code::PURGE_QUEUE))
        ]
    );
    assert!(o.memory_freed);
    assert_eq!(c.free_memory(), 10_000, "their memory is back");
    // Nothing reached the coordinator: the abort ends without EndTxn.
    assert!(o.txn.is_empty());
    assert!(matches!(c.txn_call_outcome(Op::Abort), Some(Ok(()))));
}

/// Drive `c` until every queued batch was sent and answered (each partition
/// led by its own node, base offset = partition * 1000): the handles of each
/// batch with the base offset naming its partition, sorted.
fn drain_all(c: &mut Core) -> Vec<(i64, Vec<u32>)> {
    let view = FakeCluster::new(|p| p);
    let mut done = Vec::new();
    for now in 0..500 {
        let (o, _) = step(c, now, &view);
        for (_, tag, batches, _) in &o.produce {
            let results = batches.iter().map(|(p, _)| result(*p, 0, *p as i64 * 1000));
            done.extend(answer(c, *tag, results.collect(), now).completed);
        }
    }
    let mut out: Vec<(i64, Vec<u32>)> = done.into_iter().map(|(h, r)| (r.unwrap(), h)).collect();
    out.sort();
    out
}

#[test]
fn run_path_puts_every_record_where_the_record_by_record_path_does() {
    // `extend_run` is an optimisation of `append` for the records of one
    // `send_many` call: the same partitions, the same batches, the same
    // sticky switches, for unkeyed runs broken by keyed and oversized
    // records, with and without an explicit partition.
    let value = [b'v'; 40];
    let rec = |i: usize| RecordRef {
        timestamp_ms: 0,
        key: (i % 13 == 5).then_some(&b"key"[..]),
        value: Some(&value[..1 + (i * 7) % 23]),
        headers: &[],
    };
    for partition in [None, Some(2)] {
        let mut cfg = config(false);
        cfg.buffer_memory = 1 << 20;
        cfg.max_in_flight_per_partition = 5;
        let n = 300;
        let mut by_record = new_core(cfg.clone());
        for i in 0..n {
            by_record
                .append("t", partition, info(), &rec(i), i as u32, 0)
                .unwrap();
        }
        let mut by_run = new_core(cfg);
        let (mut i, mut ran) = (0, 0);
        while i < n {
            let r = rec(i);
            by_run
                .append("t", partition, info(), &r, i as u32, 0)
                .unwrap();
            let handle = |j: usize, _: &RecordRef<'_>| j as u32;
            let k = by_run
                .extend_run("t", partition, &r, i + 1..n, &rec, handle, None, usize::MAX)
                .appended;
            ran += k;
            i += 1 + k;
        }
        assert!(ran > n / 2, "the run path took only {ran} of {n} records");
        let (a, b) = (drain_all(&mut by_record), drain_all(&mut by_run));
        assert_eq!(a.iter().map(|(_, h)| h.len()).sum::<usize>(), n);
        assert!(a.len() > 10, "{partition:?}: {} batches", a.len());
        if partition.is_none() {
            let parts: HashSet<i64> = a.iter().map(|(base, _)| *base).collect();
            assert!(parts.len() > 1, "the sticky partition never switched");
        }
        assert_eq!(a, b, "partition {partition:?}");
    }
}

#[test]
fn keyed_records_appended_partition_by_partition_land_as_record_by_record() {
    // `send_many` groups a keyed call by the key's partition and appends each
    // group with that partition explicit (append, then extend_run): every
    // partition gets the same records in the same batches and order as
    // record-by-record keyed appends.
    let keys: Vec<Vec<u8>> = (0..400)
        .map(|i| format!("k{}", i % 29).into_bytes())
        .collect();
    let value = [b'v'; 30];
    let rec = |i: usize| RecordRef {
        timestamp_ms: 0,
        key: Some(&keys[i][..]),
        value: Some(&value[..1 + i % 17]),
        headers: &[],
    };
    let n = keys.len();
    let mut cfg = config(false);
    cfg.buffer_memory = 1 << 20;
    cfg.max_in_flight_per_partition = 5;
    let mut by_record = new_core(cfg.clone());
    for i in 0..n {
        by_record
            .append("t", None, info(), &rec(i), i as u32, 0)
            .unwrap();
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| partition_for_key(&keys[i], 4)); // stable
    let mut by_plan = new_core(cfg);
    let mut q = 0;
    let mut ran = 0;
    while q < n {
        let p = partition_for_key(&keys[order[q]], 4);
        let end = order[q..]
            .iter()
            .position(|&i| partition_for_key(&keys[i], 4) != p)
            .map_or(n, |k| q + k);
        let r = rec(order[q]);
        by_plan
            .append("t", Some(p), info(), &r, order[q] as u32, 0)
            .unwrap();
        let k = by_plan
            .extend_run(
                "t",
                Some(p),
                &r,
                q + 1..end,
                &|x| rec(order[x]),
                &mut |x, _: &RecordRef<'_>| order[x] as u32,
                None,
                usize::MAX,
            )
            .appended;
        ran += k;
        q += 1 + k;
    }
    assert!(ran > n / 2, "the run path took only {ran} of {n} records");
    let (a, b) = (drain_all(&mut by_record), drain_all(&mut by_plan));
    assert!(a.len() > 10, "{} batches", a.len());
    assert_eq!(a, b);
}

/// docs/semantics.md §5.9: a send blocked on a full buffer is woken once a
/// quarter of `buffer_memory` is free, not by every batch freed.
#[test]
fn memory_waiters_are_woken_once_a_quarter_of_the_buffer_is_free() {
    let view = FakeCluster::new(|_| 1);
    // What eight single-record batches reserve (batch_size 1 and 200-byte
    // values: a batch each).
    let big = [b'x'; 200];
    let send = |c: &mut Core, h: u32| {
        c.append("t", Some(0), info(), &record(None, &big, 0), h, 0)
            .unwrap();
    };
    let cfg = ProducerConfig {
        batch_size: 1,
        ..config(false)
    };
    let mut probe = new_core(cfg.clone());
    for h in 0..8 {
        send(&mut probe, h);
    }
    let eight = 10_000 - probe.free_memory();
    // They fill the buffer; one at a time in flight.
    let mut c = new_core(ProducerConfig {
        buffer_memory: eight,
        ..cfg
    });
    for h in 0..8 {
        send(&mut c, h);
    }
    assert_eq!(c.free_memory(), 0);
    // Two sends wait; one gives up.
    c.memory_waiter(true);
    c.memory_waiter(true);
    let a = step(&mut c, 0, &view).0.tag();
    let o = answer(&mut c, a, ok(0, 0), 1);
    assert_eq!(o.completed, vec![(vec![0], Ok(0))]);
    assert!(!o.memory_freed, "an eighth free: no wake-up yet");
    c.memory_waiter(false);
    let b = step(&mut c, 1, &view).0.tag();
    let o = answer(&mut c, b, ok(0, 1), 2);
    assert_eq!(c.free_memory(), eight / 4);
    assert!(o.memory_freed, "a quarter free: wake the one still waiting");
    // Nobody waits: no notify (a syscall each), however much is free.
    c.memory_waiter(false);
    let d = step(&mut c, 2, &view).0.tag();
    let o = answer(&mut c, d, ok(0, 2), 3);
    assert!(c.free_memory() > eight / 4);
    assert!(!o.memory_freed, "nobody waits");
}

/// After an answer the runner is woken only if a step has anything to do
/// (`runner::apply_answer`): batches queued, a producer id to get.
#[test]
fn has_work_while_batches_are_queued_or_a_producer_id_is_missing() {
    let view = FakeCluster::new(|_| 1);
    let mut c = new_core(config(false));
    assert!(!c.has_work(), "a new core without idempotence");
    send(&mut c, 0, 1, 0);
    assert!(c.has_work(), "a batch queued");
    let a = step(&mut c, 0, &view).0.tag();
    send(&mut c, 0, 2, 0);
    answer(&mut c, a, ok(0, 0), 1);
    assert!(c.has_work(), "the second batch still queued");
    let b = step(&mut c, 1, &view).0.tag();
    answer(&mut c, b, ok(0, 1), 2);
    assert!(!c.has_work(), "all answered, nothing queued");
    // A retriable error puts the batch back: work again.
    send(&mut c, 0, 3, 2);
    let d = step(&mut c, 2, &view).0.tag();
    answer(&mut c, d, err(0, codes::NOT_LEADER_OR_FOLLOWER), 3);
    assert!(c.has_work(), "the batch is queued for its retry");
    // Idempotent: nothing can be sent before a producer id.
    let c = new_core(config(true));
    assert!(c.has_work(), "a producer id to ask for");
}

/// `extend_run` stops once it has appended `max_bytes` (the bound of one
/// lock hold of `send_batch`, producer/client.rs).
#[test]
fn extend_run_stops_at_its_byte_bound() {
    let mut c = new_core(ProducerConfig {
        batch_size: 1_000,
        ..config(false)
    });
    let rec = |_: usize| record(None, b"v", 0);
    send(&mut c, 0, 0, 0);
    let handle = |j: usize, _: &RecordRef<'_>| j as u32;
    // 9 bytes a record (FakeBatch): the run stops at the record reaching 30.
    let ext = c.extend_run("t", Some(0), &rec(0), 1..100, &rec, handle, None, 30);
    assert_eq!((ext.appended, ext.bytes), (4, 36));
    let ext = c.extend_run(
        "t",
        Some(0),
        &rec(0),
        5..100,
        &rec,
        handle,
        None,
        usize::MAX,
    );
    assert_eq!(ext.appended, 95);
}

mod idempotence;
mod purge;
