//! The sender's drain and answer decisions, with a counting fake batch.

use super::*;
use crate::producer::accumulator::{AccumulatorConfig, RecordRef};

/// Records the producer fields it was encoded with.
struct FakeBatch {
    n: usize,
    size: usize,
}

impl BatchBuilder for FakeBatch {
    fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
        let b = r.value.map_or(0, |v| v.len()) + 8;
        if self.n > 0 && self.size + b > 100 {
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
    /// Every fake record is 9 bytes ("v" + 8).
    fn split(&mut self, max_bytes: usize) -> Result<Vec<Self>, Error> {
        let per = (max_bytes / 9).min(self.n.div_ceil(2)).max(1);
        let mut out = Vec::new();
        let mut left = self.n;
        while left > 0 {
            let n = per.min(left);
            out.push(FakeBatch { n, size: 9 * n });
            left -= n;
        }
        Ok(out)
    }
}

fn sender(idempotent: bool, acks: i16) -> Sender<FakeBatch, u32> {
    let acc = RecordAccumulator::new(AccumulatorConfig {
        batch_size: 100,
        linger_ms: 0,
        retry_backoff_ms: 10,
        retry_backoff_max_ms: 100,
        delivery_timeout_ms: 10_000,
        buffer_memory: 10_000,
    });
    Sender::new(
        acc,
        idempotent,
        SenderConfig {
            acks,
            request_timeout_ms: 1000,
            max_request_size: 1 << 20,
            retries: 3,
            max_in_flight_per_partition: 5,
        },
    )
}

fn send(s: &mut Sender<FakeBatch, u32>, p: i32, h: u32) {
    let r = RecordRef {
        timestamp_ms: 0,
        key: None,
        value: Some(b"v"),
        headers: &[],
    };
    s.accumulator
        .append(&TopicPartition::new("t", p), &r, 9, h, 0, |_| FakeBatch {
            n: 0,
            size: 0,
        })
        .map_err(|_| ())
        .unwrap();
}

fn ok(p: i32, base: i64) -> PartitionResult {
    PartitionResult {
        tp: TopicPartition::new("t", p),
        error_code: 0,
        base_offset: base,
        log_append_time_ms: -1,
        log_start_offset: 0,
        error_message: None,
        record_errors: vec![],
        current_leader: None,
    }
}

fn records(call: &ProduceCall) -> Vec<String> {
    call.request
        .topic_data
        .iter()
        .flat_map(|t| {
            t.partition_data
                .iter()
                .map(|p| String::from_utf8(p.records.clone().unwrap().to_vec()).unwrap())
        })
        .collect()
}

#[test]
fn idempotent_waits_for_producer_id_then_sends_with_sequences() {
    let mut s = sender(true, -1);
    send(&mut s, 0, 1);
    send(&mut s, 0, 2);
    let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
    assert!(o.calls.is_empty() && s.needs_producer_id());
    s.set_producer_id(42, 0);
    let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
    assert_eq!(o.calls.len(), 1);
    assert_eq!(records(&o.calls[0]), vec!["42:0:0:2"]);
    let (d, refresh) = s.on_response(o.calls[0].token, Ok(vec![ok(0, 100)]), 5);
    assert!(!refresh);
    assert_eq!(d[0].handles, vec![1, 2]);
    assert_eq!(d[0].result.as_ref().unwrap().0, 100);
}

#[test]
fn retriable_error_is_retried_with_same_sequence_after_backoff() {
    let mut s = sender(true, -1);
    s.set_producer_id(7, 0);
    send(&mut s, 0, 1);
    let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
    let mut err = ok(0, -1);
    err.error_code = 6; // NOT_LEADER_OR_FOLLOWER
    let (d, refresh) = s.on_response(o.calls[0].token, Ok(vec![err]), 1);
    assert!(d.is_empty() && refresh);
    assert!(
        s.poll(5, &|_| Some(2), &mut |_| true, &|_| None)
            .calls
            .is_empty(),
        "backoff"
    );
    let o = s.poll(11, &|_| Some(2), &mut |_| true, &|_| None);
    assert_eq!(o.calls[0].node_id, 2);
    assert_eq!(
        records(&o.calls[0]),
        vec!["7:0:0:1"],
        "same sequence on retry"
    );
}

/// Regression (found by the chaos test): a batch whose request got no
/// answer (connection reset) stayed "in flight" in the idempotence state,
/// so its own retry waited for it forever and the partition stalled
/// until delivery_timeout_ms.
#[test]
fn idempotent_retry_after_disconnect_is_sent_again() {
    let mut s = sender(true, -1);
    s.set_producer_id(7, 0);
    send(&mut s, 0, 1);
    let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
    let (d, _) = s.on_response(o.calls[0].token, Ok(vec![ok(0, 0)]), 1);
    assert_eq!(d.len(), 1);
    send(&mut s, 0, 2);
    let o = s.poll(2, &|_| Some(1), &mut |_| true, &|_| None);
    assert_eq!(records(&o.calls[0]), vec!["7:0:1:1"]);
    let (d, _) = s.on_response(o.calls[0].token, Err(Error::Disconnected { node_id: 1 }), 3);
    assert!(d.is_empty(), "retried, not failed");
    let o = s.poll(20, &|_| Some(1), &mut |_| true, &|_| None);
    assert_eq!(o.calls.len(), 1, "the retry must go out");
    assert_eq!(records(&o.calls[0]), vec!["7:0:1:1"], "with its sequence");
}

#[test]
fn disconnect_without_retries_left_fails_only_those_records() {
    let mut s = sender(false, 1);
    send(&mut s, 0, 1);
    send(&mut s, 1, 2);
    let o = s.poll(0, &|tp| Some(tp.partition + 1), &mut |_| true, &|_| None);
    assert_eq!(o.calls.len(), 2);
    let mut s_batches = 0;
    for c in &o.calls {
        let node = c.node_id;
        let result = if node == 1 {
            Err(Error::Disconnected { node_id: 1 })
        } else {
            Ok(vec![ok(1, 0)])
        };
        let (d, _) = s.on_response(c.token, result, 1);
        s_batches += d.len();
    }
    assert_eq!(
        s_batches, 1,
        "the disconnected batch is retried, the other delivered"
    );
    // Exhaust retries.
    for t in 0..3 {
        let now = 100 * (t + 1);
        let o = s.poll(now, &|tp| Some(tp.partition + 1), &mut |_| true, &|_| None);
        let (d, _) = s.on_response(
            o.calls[0].token,
            Err(Error::Disconnected { node_id: 1 }),
            now,
        );
        if t == 2 {
            assert_eq!(d.len(), 1);
            assert!(d[0].result.is_err());
            assert_eq!(d[0].handles, vec![1]);
        }
    }
}

#[test]
fn acks_zero_completes_without_offsets() {
    let mut s = sender(false, 0);
    send(&mut s, 0, 9);
    let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
    assert!(!o.calls[0].expect_response);
    let (d, _) = s.on_response(o.calls[0].token, Ok(vec![]), 0);
    assert_eq!(d[0].result.as_ref().unwrap().0, -1);
}

#[test]
fn epoch_bump_resequences_queued_batches() {
    let mut s = sender(true, -1);
    s.set_producer_id(7, 0);
    send(&mut s, 0, 1);
    let o = s.poll(0, &|_| Some(1), &mut |_| true, &|_| None);
    let mut err = ok(0, -1);
    err.error_code = 59; // UNKNOWN_PRODUCER_ID on the next expected batch
    s.on_response(o.calls[0].token, Ok(vec![err]), 1);
    assert!(s.needs_producer_id());
    assert!(s
        .poll(50, &|_| Some(1), &mut |_| true, &|_| None)
        .calls
        .is_empty());
    s.set_producer_id(7, 1);
    let o = s.poll(50, &|_| Some(1), &mut |_| true, &|_| None);
    assert_eq!(records(&o.calls[0]), vec!["7:1:0:1"]);
}

#[test]
fn node_not_ready_keeps_batches_queued() {
    let mut s = sender(false, 1);
    send(&mut s, 0, 1);
    assert!(s
        .poll(0, &|_| Some(1), &mut |_| false, &|_| None)
        .calls
        .is_empty());
    assert_eq!(
        s.poll(0, &|_| Some(1), &mut |_| true, &|_| None)
            .calls
            .len(),
        1
    );
}

fn err(p: i32, code: i16) -> PartitionResult {
    let mut r = ok(p, -1);
    r.error_code = code;
    r
}

/// Poll once and return the one call (panics if not exactly one).
fn one_call(s: &mut Sender<FakeBatch, u32>, now: i64) -> ProduceCall {
    let mut o = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None);
    assert_eq!(o.calls.len(), 1, "expected one request at {now}");
    o.calls.pop().unwrap()
}

#[test]
fn too_large_batch_is_split_and_resent_in_order_with_its_sequences() {
    let mut s = sender(true, -1);
    s.set_producer_id(7, 0);
    for h in 1..=4 {
        send(&mut s, 0, h);
    }
    let c = one_call(&mut s, 0);
    assert_eq!(records(&c), vec!["7:0:0:4"]);
    send(&mut s, 0, 5); // queued behind, while the big batch is in flight
    let (d, _) = s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1);
    assert!(d.is_empty(), "nothing fails: the batch is split");
    assert!(!s.needs_producer_id(), "a split is no sequence break");
    // The pieces cover sequences 0..4 in order; until one is acknowledged
    // in this epoch only one batch may be in flight.
    let first = one_call(&mut s, 2);
    assert!(
        s.poll(2, &|_| Some(1), &mut |_| true, &|_| None)
            .calls
            .is_empty(),
        "one at a time before an ack"
    );
    let mut sent = records(&first);
    let mut delivered = Vec::new();
    let mut pending = vec![first];
    let mut base = 100;
    for now in 3..10 {
        for c in pending.drain(..) {
            let (d, _) = s.on_response(c.token, Ok(vec![ok(0, base)]), now);
            for x in d {
                base += x.handles.len() as i64;
                delivered.push((x.handles, x.result.unwrap().0));
            }
        }
        pending = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None).calls;
        sent.extend(pending.iter().flat_map(records));
    }
    assert_eq!(sent, vec!["7:0:0:2", "7:0:2:2", "7:0:4:1"]);
    assert_eq!(
        delivered,
        vec![(vec![1, 2], 100), (vec![3, 4], 102), (vec![5], 104)]
    );
    assert_eq!(
        s.accumulator.free_memory(),
        10_000,
        "every reserved byte is given back"
    );
}

#[test]
fn single_record_too_large_fails_alone_and_its_neighbour_is_delivered() {
    let mut s = sender(true, -1);
    s.set_producer_id(7, 0);
    send(&mut s, 0, 1);
    send(&mut s, 0, 2);
    let c = one_call(&mut s, 0);
    let (d, _) = s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1);
    assert!(d.is_empty());
    let c = one_call(&mut s, 1);
    assert_eq!(records(&c), vec!["7:0:0:1"]);
    // Record 1 alone is still too large: it fails, only it.
    let (d, _) = s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 2);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].handles, vec![1]);
    assert!(
        matches!(&d[0].result, Err(e) if e.code() == codes::MESSAGE_TOO_LARGE),
        "{:?}",
        d[0].result
    );
    // The hole at sequence 0 needs a new epoch; record 2 is resequenced.
    assert!(s.needs_producer_id());
    s.set_producer_id(7, 1);
    let c = one_call(&mut s, 3);
    assert_eq!(records(&c), vec!["7:1:0:1"]);
    let (d, _) = s.on_response(c.token, Ok(vec![ok(0, 50)]), 4);
    assert_eq!(d[0].handles, vec![2]);
    assert_eq!(s.accumulator.free_memory(), 10_000);
}

#[test]
fn batch_in_flight_behind_a_split_one_is_retried_after_its_pieces() {
    let mut s = sender(true, -1);
    s.set_producer_id(7, 0);
    send(&mut s, 0, 1);
    let c = one_call(&mut s, 0);
    s.on_response(c.token, Ok(vec![ok(0, 0)]), 0); // seq 0 acknowledged: pipelining allowed
    send(&mut s, 0, 2);
    send(&mut s, 0, 3);
    let a = one_call(&mut s, 1); // seq 1..2
    send(&mut s, 0, 4);
    let b = one_call(&mut s, 1); // seq 3, in flight behind a
    assert_eq!(records(&a), vec!["7:0:1:2"]);
    assert_eq!(records(&b), vec!["7:0:3:1"]);
    assert!(s
        .on_response(a.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 2)
        .0
        .is_empty());
    let (d, _) = s.on_response(
        b.token,
        Ok(vec![err(0, codes::OUT_OF_ORDER_SEQUENCE_NUMBER)]),
        2,
    );
    assert!(
        d.is_empty() && !s.needs_producer_id(),
        "b was early, not broken"
    );
    let mut sent = Vec::new();
    let mut handles = Vec::new();
    for now in 200..210 {
        let o = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None);
        for c in o.calls {
            sent.extend(records(&c));
            let (d, _) = s.on_response(c.token, Ok(vec![ok(0, 10)]), now);
            handles.extend(d.into_iter().flat_map(|x| x.handles));
        }
    }
    assert_eq!(sent, vec!["7:0:1:1", "7:0:2:1", "7:0:3:1"]);
    assert_eq!(handles, vec![2, 3, 4]);
}

#[test]
fn too_large_without_idempotence_splits_too() {
    let mut s = sender(false, 1);
    for h in 1..=3 {
        send(&mut s, 0, h);
    }
    let c = one_call(&mut s, 0);
    assert!(s
        .on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1)
        .0
        .is_empty());
    let mut handles = Vec::new();
    for now in 1..5 {
        let o = s.poll(now, &|_| Some(1), &mut |_| true, &|_| None);
        for c in o.calls {
            let (d, _) = s.on_response(c.token, Ok(vec![ok(0, 10)]), now);
            handles.extend(d.into_iter().flat_map(|x| x.handles));
        }
    }
    assert_eq!(handles, vec![1, 2, 3]);
}

#[test]
fn refused_bump_takes_a_fresh_id_and_resequences_from_zero() {
    let mut s = sender(true, -1);
    s.set_producer_id(7, 0);
    send(&mut s, 0, 1);
    send(&mut s, 0, 2);
    let c = one_call(&mut s, 0);
    s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 1);
    let c = one_call(&mut s, 1);
    s.on_response(c.token, Ok(vec![err(0, codes::MESSAGE_TOO_LARGE)]), 2); // record 1 fails: bump
    assert!(s.needs_producer_id());
    s.drop_producer_id(); // the broker refused the bump
    assert!(s.needs_producer_id(), "still needs an id, now a fresh one");
    s.set_producer_id(8, 0);
    let c = one_call(&mut s, 3);
    assert_eq!(
        records(&c),
        vec!["8:0:0:1"],
        "record 2 resequenced under the new id"
    );
}
