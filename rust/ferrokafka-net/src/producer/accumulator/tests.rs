use super::*;
use crate::producer::handles::{count_records, take_records, IndexRun};

/// Counts bytes like a record batch would: 61-byte header + payloads.
struct FakeBuilder {
    cap: usize,
    size: usize,
    n: usize,
}

impl BatchBuilder for FakeBuilder {
    fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
        let bytes = 8 + r.key.map_or(0, |k| k.len()) + r.value.map_or(0, |v| v.len());
        if self.n > 0 && self.size + bytes > self.cap {
            return None;
        }
        self.size += bytes;
        self.n += 1;
        Some(bytes)
    }
    fn size_bytes(&self) -> usize {
        self.size
    }
    fn record_count(&self) -> usize {
        self.n
    }
}

fn cfg() -> AccumulatorConfig {
    AccumulatorConfig {
        batch_size: 100,
        linger_ms: 10,
        retry_backoff_ms: 100,
        retry_backoff_max_ms: 1000,
        delivery_timeout_ms: 5000,
        buffer_memory: 1000,
    }
}

fn rec(v: &[u8]) -> RecordRef<'_> {
    RecordRef {
        timestamp_ms: 0,
        key: None,
        value: Some(v),
        headers: &[],
    }
}

fn append(
    acc: &mut RecordAccumulator<FakeBuilder, u32>,
    tp: &TopicPartition,
    v: &[u8],
    h: u32,
    now: i64,
) -> Result<Appended, AppendError<u32>> {
    acc.append(tp, &rec(v), v.len() + 8, h, now, |cap| FakeBuilder {
        cap,
        size: 0,
        n: 0,
    })
}

#[test]
fn a_run_handle_stands_for_exactly_the_records_appended() {
    // The same offers with per-record handles and with one run handle: the
    // same records go in (the batch of 100 bytes fills at 9 bytes a record)
    // and the run handle covers exactly them.
    let new = |cap| FakeBuilder { cap, size: 0, n: 0 };
    let tp = TopicPartition::new("t", 0);
    let mut by_record: RecordAccumulator<FakeBuilder, IndexRun> = RecordAccumulator::new(cfg());
    let mut by_run: RecordAccumulator<FakeBuilder, IndexRun> = RecordAccumulator::new(cfg());
    for acc in [&mut by_record, &mut by_run] {
        acc.append(&tp, &rec(b"a"), 9, IndexRun(0, 1), 0, new)
            .unwrap();
    }
    let one = by_record.extend_open(
        &tp,
        1..50,
        |_| Some((rec(b"a"), 9)),
        |i, _| IndexRun(i as u32, 1),
        None,
        usize::MAX,
    );
    let mut runs = Vec::new();
    let mut make = |r: std::ops::Range<usize>| {
        runs.push(r.clone());
        IndexRun(r.start as u32, r.len() as u32)
    };
    let all = by_run.extend_open(
        &tp,
        1..50,
        |_| Some((rec(b"a"), 9)),
        |_, _| unreachable!("no handle per record with a run handle"),
        Some(&mut make),
        usize::MAX,
    );
    assert_eq!(
        (one.appended, one.bytes, one.became_sendable),
        (all.appended, all.bytes, all.became_sendable)
    );
    assert_eq!(all.appended, 10, "11 records of 9 bytes fill 100");
    assert_eq!(runs, vec![1..11], "one run, made once");
    assert_eq!(by_run.queues[&tp][0].handles, vec![IndexRun(0, 11)]);
    assert_eq!(
        by_record.queues[&tp][0].handles,
        by_run.queues[&tp][0].handles
    );
    // Nothing appended (the batch is full): no run handle made.
    let mut none = |_: std::ops::Range<usize>| -> IndexRun { unreachable!("an empty run") };
    let out = by_run.extend_open(
        &tp,
        11..50,
        |_| Some((rec(b"a"), 9)),
        |_, _| unreachable!(),
        Some(&mut none),
        usize::MAX,
    );
    assert_eq!(out.appended, 0);
}

#[test]
fn consecutive_records_share_a_handle_that_splits_where_the_batch_does() {
    let mut acc: RecordAccumulator<FakeBuilder, IndexRun> = RecordAccumulator::new(cfg());
    let tp = TopicPartition::new("t", 0);
    let new = |cap| FakeBuilder { cap, size: 0, n: 0 };
    acc.append(&tp, &rec(b"a"), 9, IndexRun(0, 1), 0, new)
        .unwrap();
    // The run path: records 1..5 of the same call.
    let ext = acc.extend_open(
        &tp,
        1..5,
        |_| Some((rec(b"a"), 9)),
        |i, _| IndexRun(i as u32, 1),
        None,
        usize::MAX,
    );
    assert_eq!(ext.appended, 4);
    // A record of another call (not next): a handle of its own.
    acc.append(&tp, &rec(b"a"), 9, IndexRun(40, 1), 0, new)
        .unwrap();
    let q = &acc.queues[&tp];
    assert_eq!(q[0].handles, vec![IndexRun(0, 5), IndexRun(40, 1)]);
    assert_eq!(count_records(&q[0].handles), 6);
    let mut handles: std::collections::VecDeque<IndexRun> =
        vec![IndexRun(0, 5), IndexRun(40, 1)].into();
    assert_eq!(take_records(&mut handles, 2), vec![IndexRun(0, 2)]);
    assert_eq!(
        take_records(&mut handles, 4),
        vec![IndexRun(2, 3), IndexRun(40, 1)]
    );
    assert!(handles.is_empty());
}

/// A batch reserves a first chunk and doubles its reservation as it
/// grows, so a large batch_size does not reserve memory up front.
#[test]
fn reservation_grows_with_the_batch() {
    let mut c = cfg();
    c.batch_size = 100_000;
    c.buffer_memory = 200_000;
    let mut acc = RecordAccumulator::new(c);
    let tp = TopicPartition::new("t", 0);
    let v = vec![0u8; 992]; // 1000 bytes a record in the fake builder
    append(&mut acc, &tp, &v, 0, 0).unwrap();
    assert_eq!(acc.free_memory(), 200_000 - FIRST_CHUNK);
    for i in 1..16 {
        append(&mut acc, &tp, &v, i, 0).unwrap();
    }
    assert_eq!(
        acc.free_memory(),
        200_000 - FIRST_CHUNK,
        "16 records fit the first chunk"
    );
    append(&mut acc, &tp, &v, 16, 0).unwrap();
    assert_eq!(acc.free_memory(), 200_000 - 2 * FIRST_CHUNK, "doubled");
    for i in 17..100 {
        append(&mut acc, &tp, &v, i, 0).unwrap();
    }
    // 100 records of 1000 bytes: the batch is full at batch_size, and its
    // reservation never exceeds batch_size.
    let q = &acc.queues[&tp];
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].reserved_bytes, 100_000);
    assert_eq!(acc.free_memory(), 100_000);
    let b = acc.queues.get_mut(&tp).unwrap().pop_front().unwrap();
    acc.deallocate(&b);
    assert_eq!(acc.free_memory(), 200_000);
}

/// The pool's kept buffers count as free for the metrics (as Java's
/// `availableMemory`) but are held: growing a batch by a chunk does not let
/// them go, a new batch takes one whole (here with a builder that has no
/// use for it, so the pool lets that room go), and what the producer holds
/// stays within `buffer_memory`.
#[test]
fn kept_buffers_are_let_go_before_an_append_waits_for_memory() {
    let mut c = cfg();
    c.batch_size = 40_000;
    c.buffer_memory = 100_000;
    let mut acc = RecordAccumulator::new(c);
    for p in 0..3 {
        append(&mut acc, &TopicPartition::new("t", p), &[0; 50], 0, 0).unwrap();
    }
    let mut kept = Vec::with_capacity(50_000);
    kept.resize(10, 0);
    acc.pool.give(kept);
    assert_eq!(acc.pool.kept_bytes(), 50_000);
    assert_eq!(
        acc.free_memory(),
        100_000 - 3 * FIRST_CHUNK,
        "the kept bytes count as free"
    );
    // Growing a batch by a chunk would need them: the run path stops...
    let big = vec![0u8; 20_000];
    let out = acc.extend_open(
        &TopicPartition::new("t", 0),
        0..1,
        |_| Some((rec(&big), big.len() + 8)),
        |i, _| i as u32,
        None,
        usize::MAX,
    );
    assert_eq!(out.appended, 0);
    assert_eq!(acc.pool.kept_bytes(), 50_000);
    // ...and a new batch is given their room whole instead of waiting.
    append(&mut acc, &TopicPartition::new("t", 3), &[0; 50], 0, 0).unwrap();
    assert_eq!(acc.pool.kept_bytes(), 0);
    assert_eq!(acc.free_memory(), 100_000 - 3 * FIRST_CHUNK - 40_000);
    assert!(matches!(
        append(&mut acc, &TopicPartition::new("t", 4), &[0; 50], 0, 0),
        Err(AppendError::NeedMemory { .. })
    ));
}

/// Takes a kept buffer for a full-size batch, as the record batch does
/// (`takes`), or has no use for one.
struct PooledBuilder {
    inner: FakeBuilder,
    takes: bool,
    took: Option<Vec<u8>>,
}

impl BatchBuilder for PooledBuilder {
    fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
        self.inner.try_append(r)
    }
    fn size_bytes(&self) -> usize {
        self.inner.size_bytes()
    }
    fn record_count(&self) -> usize {
        self.inner.record_count()
    }
    fn reserve_total(&mut self, _total: usize, pool: &Arc<BufferPool>) {
        if self.takes {
            self.took = pool.take();
        }
    }
}

/// A producer held at `buffer_memory`: a hot partition's next batch takes
/// a kept buffer whole (what is held unchanged) instead of opening at a
/// first chunk and letting the pool go; with a builder that takes none the
/// pool lets go, so what is held stays within `buffer_memory` either way.
#[test]
fn a_hot_partition_takes_a_kept_buffer_when_memory_is_short() {
    let tp = TopicPartition::new("t", 0);
    for takes in [true, false] {
        let mut c = cfg();
        c.batch_size = 40_000;
        c.buffer_memory = 200_000;
        let mut acc: RecordAccumulator<PooledBuilder, u32> = RecordAccumulator::new(c);
        let new = |cap| PooledBuilder {
            inner: FakeBuilder { cap, size: 0, n: 0 },
            takes,
            took: None,
        };
        let append = |acc: &mut RecordAccumulator<PooledBuilder, u32>| {
            acc.append(&tp, &rec(&[0; 992]), 1000, 0, 0, new).unwrap();
        };
        // The first batch fills (so the partition is hot) and the second
        // opens whole, while memory is plentiful.
        while acc.queues.get(&tp).is_none_or(|q| q.len() < 2) {
            append(&mut acc);
        }
        // Other partitions take most of the rest; a kept buffer comes back.
        for p in 1..5 {
            let other = TopicPartition::new("t", p);
            acc.append(&other, &rec(&[0; 50]), 58, 0, 0, new).unwrap();
        }
        let mut kept = Vec::with_capacity(40_000);
        kept.resize(10, 0);
        acc.pool.give(kept);
        assert_eq!(acc.pool.kept_bytes(), 40_000);
        assert!(acc.free_memory() < 2 * 40_000, "memory is short");
        assert!(acc.used_memory + acc.pool.kept_bytes() <= 200_000);
        // The second batch fills; the third opens.
        while acc.queues[&tp].len() < 3 {
            append(&mut acc);
        }
        let last = acc.queues[&tp].back().unwrap();
        assert_eq!(last.builder.took.is_some(), takes);
        assert_eq!(last.reserved_bytes, 40_000, "reserved whole");
        assert_eq!(acc.pool.kept_bytes(), 0, "taken, or let go");
        assert!(acc.used_memory <= 200_000);
    }
}

/// After a batch of the partition filled up, the next one takes its
/// whole size at once (while memory is plentiful).
#[test]
fn a_hot_partition_reserves_whole_batches() {
    let mut c = cfg();
    c.batch_size = 100_000;
    c.buffer_memory = 1_000_000;
    let mut acc = RecordAccumulator::new(c);
    let tp = TopicPartition::new("t", 0);
    let v = vec![0u8; 992];
    for i in 0..101 {
        append(&mut acc, &tp, &v, i, 0).unwrap();
    }
    let q = &acc.queues[&tp];
    assert_eq!(q.len(), 2);
    assert!(q[0].sealed);
    assert_eq!(q[1].reserved_bytes, 100_000);
    assert_eq!(acc.free_memory(), 800_000);
}

/// Growth that the memory left cannot cover seals the batch (it becomes
/// sendable, so memory comes back); the next record needs memory.
#[test]
fn a_batch_that_cannot_grow_is_sealed() {
    let mut c = cfg();
    c.batch_size = 100_000;
    c.buffer_memory = FIRST_CHUNK + 1000;
    let mut acc = RecordAccumulator::new(c);
    let tp = TopicPartition::new("t", 0);
    let v = vec![0u8; 992];
    for i in 0..16 {
        append(&mut acc, &tp, &v, i, 0).unwrap();
    }
    match append(&mut acc, &tp, &v, 16, 0) {
        Err(AppendError::NeedMemory { handle: 16, .. }) => {}
        other => panic!("{other:?}"),
    }
    let q = &acc.queues[&tp];
    assert_eq!(q.len(), 1);
    assert!(q[0].sealed);
    assert_eq!(q[0].handles.len(), 16);
    assert!(acc.used_memory <= FIRST_CHUNK + 1000);
}

#[test]
fn linger_then_ready() {
    let mut acc = RecordAccumulator::new(cfg());
    let tp = TopicPartition::new("t", 0);
    append(&mut acc, &tp, &[0; 10], 1, 0).unwrap();
    let r = acc.ready(5, |_| Some(1));
    assert!(r.ready_nodes.is_empty());
    assert_eq!(r.next_ready_check_delay_ms, 5);
    let r = acc.ready(10, |_| Some(1));
    assert!(r.ready_nodes.contains(&1));
}

#[test]
fn full_batch_is_ready_before_linger() {
    let mut acc = RecordAccumulator::new(cfg());
    let tp = TopicPartition::new("t", 0);
    for i in 0..6 {
        append(&mut acc, &tp, &[0; 10], i, 0).unwrap(); // 18 bytes each; 6th opens batch 2
    }
    assert!(acc.ready(0, |_| Some(1)).ready_nodes.contains(&1));
    let batches = acc.drain_node(1, std::slice::from_ref(&tp), 1 << 20, 0);
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].handles, vec![0, 1, 2, 3, 4]);
}

#[test]
fn batch_size_zero_gives_each_record_its_own_ready_batch() {
    // Java: "a batch size of zero will disable batching entirely".
    let mut acc = RecordAccumulator::new(AccumulatorConfig {
        batch_size: 0,
        ..cfg()
    });
    let tp = TopicPartition::new("t", 0);
    for i in 0..3 {
        let a = append(&mut acc, &tp, &[0; 10], i, 0).unwrap();
        assert!(a.new_batch && a.batch_is_full, "record {i}: {a:?}");
    }
    // Full batches do not wait for linger.
    assert!(acc.ready(0, |_| Some(1)).ready_nodes.contains(&1));
    let mut handles = Vec::new();
    loop {
        let b = acc.drain_node(1, std::slice::from_ref(&tp), 1 << 20, 0);
        if b.is_empty() {
            break;
        }
        handles.extend(b.into_iter().map(|b| b.handles));
    }
    assert_eq!(handles, vec![vec![0], vec![1], vec![2]]);
}

#[test]
fn unknown_leader_reported() {
    let mut acc = RecordAccumulator::new(cfg());
    append(&mut acc, &TopicPartition::new("x", 0), b"v", 1, 0).unwrap();
    let r = acc.ready(100, |_| None);
    assert!(r.unknown_leader_topics.contains("x"));
}

#[test]
fn memory_bound_asks_caller_to_wait_and_is_returned() {
    let mut acc = RecordAccumulator::new(cfg());
    for p in 0..10 {
        let o = append(&mut acc, &TopicPartition::new("t", p), b"v", 0, 0);
        assert!(matches!(
            o,
            Ok(Appended {
                new_batch: true,
                ..
            })
        ));
    }
    assert_eq!(acc.free_memory(), 0);
    let o = append(&mut acc, &TopicPartition::new("t", 10), b"v", 0, 0);
    assert_eq!(
        o,
        Err(AppendError::NeedMemory {
            bytes: 100,
            handle: 0
        })
    );
    let b = acc.drain_node(1, &[TopicPartition::new("t", 0)], 1 << 20, 20);
    acc.deallocate(&b[0]);
    assert_eq!(acc.free_memory(), 100);
}

#[test]
fn drain_respects_max_request_size_and_round_robins() {
    let mut acc = RecordAccumulator::new(cfg());
    let tps: Vec<_> = (0..3).map(|p| TopicPartition::new("t", p)).collect();
    for tp in &tps {
        append(&mut acc, tp, &[0; 50], 0, 0).unwrap();
    }
    // 58 bytes each: two do not fit in 100, the first always goes.
    let a = acc.drain_node(1, &tps, 100, 10);
    assert_eq!(a.len(), 1);
    let b = acc.drain_node(1, &tps, 100, 10);
    assert_eq!(b.len(), 1);
    assert_ne!(a[0].tp, b[0].tp);
}

#[test]
fn retry_backoff_grows_and_reenqueue_keeps_order() {
    let mut acc = RecordAccumulator::new(cfg());
    let tp = TopicPartition::new("t", 0);
    append(&mut acc, &tp, b"a", 1, 0).unwrap();
    let mut b = acc
        .drain_node(1, std::slice::from_ref(&tp), 1 << 20, 10)
        .pop()
        .unwrap();
    b.base_sequence = Some(0);
    append(&mut acc, &tp, b"b", 2, 11).unwrap();
    acc.reenqueue(b, 20);
    // The retried batch is first and waits its backoff (100 ms).
    assert!(acc.ready(50, |_| Some(1)).ready_nodes.is_empty());
    assert!(acc.ready(120, |_| Some(1)).ready_nodes.contains(&1));
    let again = acc
        .drain_node(1, std::slice::from_ref(&tp), 1 << 20, 120)
        .pop()
        .unwrap();
    assert_eq!(again.handles, vec![1]);
    assert_eq!(again.retry_backoff_ms(acc.config()), 100);
    let mut again = again;
    again.attempts = 4;
    assert_eq!(again.retry_backoff_ms(acc.config()), 800);
    again.attempts = 9;
    assert_eq!(again.retry_backoff_ms(acc.config()), 1000);
}

#[test]
fn delivery_timeout_expires_queued_batches() {
    let mut acc = RecordAccumulator::new(cfg());
    let tp = TopicPartition::new("t", 0);
    append(&mut acc, &tp, b"a", 1, 0).unwrap();
    assert!(acc.expire(4999).is_empty());
    let gone = acc.expire(5000);
    assert_eq!(gone.len(), 1);
    assert_eq!(acc.free_memory(), 1000);
}

#[test]
fn flush_makes_everything_ready() {
    let mut acc = RecordAccumulator::new(cfg());
    append(&mut acc, &TopicPartition::new("t", 0), b"a", 1, 0).unwrap();
    acc.begin_flush();
    assert!(acc.ready(0, |_| Some(3)).ready_nodes.contains(&3));
    acc.end_flush();
    assert!(acc.ready(0, |_| Some(3)).ready_nodes.is_empty());
}

/// `extend_open` with a run handle appends through the batch's one-pass
/// path (`append_run`) and with per-record handles record by record: the
/// same records land in the same batches, byte for byte, and the memory
/// charged follows the batch's reservation as it grows either way.
#[test]
fn a_run_and_records_one_by_one_build_the_same_batches() {
    use crate::producer::batch::{record_size_upper_bound, ProducerRecordBatch};
    use crate::producer::sender::{EncodableBatch, ProducerFields};
    use ferrokafka_protocol::compression::Compression;

    type Acc = RecordAccumulator<ProducerRecordBatch, IndexRun>;
    let tp = TopicPartition::new("t", 0);
    let values: Vec<Vec<u8>> = (0..3000)
        .map(|i| vec![i as u8; [100, 100, 57, 300, 9000][i % 5]])
        .collect();
    let at = |i: usize| {
        let r = RecordRef {
            timestamp_ms: 5 + (i % 3) as i64,
            key: None,
            value: Some(&values[i][..]),
            headers: &[],
        };
        Some((r, record_size_upper_bound(&r)))
    };
    let build = |by_run: bool| {
        let mut c = cfg();
        c.batch_size = 64 * 1024;
        c.buffer_memory = 64 << 20;
        let mut acc: Acc = RecordAccumulator::new(c);
        let new = |cap| ProducerRecordBatch::new(Compression::None, None, cap);
        let mut i = 0;
        let mut used = Vec::new();
        while i < values.len() {
            let (r, size) = at(i).unwrap();
            acc.append(&tp, &r, size, IndexRun(i as u32, 1), 5, new)
                .unwrap();
            i += 1;
            let mut make = |r: Range<usize>| IndexRun(r.start as u32, r.len() as u32);
            let out = acc.extend_open(
                &tp,
                i..values.len(),
                at,
                |j, _| IndexRun(j as u32, 1),
                by_run.then_some(&mut make as &mut dyn FnMut(Range<usize>) -> IndexRun),
                usize::MAX,
            );
            i += out.appended;
            used.push(acc.used_memory);
        }
        let batches: Vec<_> = acc.queues.get_mut(&tp).unwrap().drain(..).collect();
        let encoded: Vec<_> = batches
            .into_iter()
            .map(|mut b| {
                assert!(b.reserved_bytes >= b.builder.size_bytes(), "reserved");
                (
                    count_records(&b.handles),
                    b.builder.encode(ProducerFields::NONE).unwrap(),
                )
            })
            .collect();
        (encoded, used)
    };
    let (one, used_one) = build(false);
    let (run, used_run) = build(true);
    assert!(one.len() > 3, "several batches");
    assert_eq!(used_one, used_run, "memory charged");
    assert_eq!(one.len(), run.len());
    for (a, b) in one.iter().zip(&run) {
        assert_eq!(a.0, b.0, "records a batch");
        assert_eq!(a.1, b.1, "the same bytes");
    }
}
