//! The idempotent producer's sequence rules on the sans-IO core
//! (docs/semantics.md §5): producer ids and epoch bumps, retries in
//! sequence order, fatal errors. Helpers are the parent module's.

use super::*;

/// The step's one InitProducerId, a bump of id 7 epoch 0, answered with
/// epoch 1.
fn answer_the_bump(c: &mut Core, o: &Out, now: i64) {
    assert_eq!(o.init.len(), 1);
    assert_eq!(o.init[0].2, (7, 0), "bumps the current id");
    let a = c.on_answer(
        o.init[0].1,
        Ok(Answer::ProducerId {
            producer_id: 7,
            epoch: 1,
        }),
        now,
    );
    assert!(a.is_empty());
}

/// docs/semantics.md §5.3: with two batches of a partition in flight and the
/// first coming back unwritten, nothing is sent until the second answered,
/// then the retries go one at a time, lowest sequence first.
#[test]
fn drain_before_retry_then_one_retry_at_a_time() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(true);
    cfg.max_in_flight_per_partition = 2;
    let mut c = with_producer_id(cfg, &view);
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    answer(&mut c, a, ok(0, 0), 0);
    send(&mut c, 0, 2, 1);
    let b = step(&mut c, 1, &view).0.tag();
    send(&mut c, 0, 3, 1);
    let (o, _) = step(&mut c, 1, &view);
    assert_eq!(o.sent(), vec!["7:0:2:1"], "pipelined behind b");
    let cc = o.tag();
    let o = answer(&mut c, b, err(0, codes::NOT_LEADER_OR_FOLLOWER), 10);
    assert!(o.completed.is_empty());
    assert!(
        step(&mut c, 100, &view).0.produce.is_empty(),
        "c still in flight: drain before retry"
    );
    let o = answer(&mut c, cc, err(0, codes::OUT_OF_ORDER_SEQUENCE_NUMBER), 100);
    assert!(o.completed.is_empty(), "c was early, not broken");
    let (o, _) = step(&mut c, 200, &view);
    assert_eq!(o.sent(), vec!["7:0:1:1"], "lowest sequence first");
    let b2 = o.tag();
    assert!(
        step(&mut c, 201, &view).0.produce.is_empty(),
        "one retry at a time"
    );
    assert_eq!(
        answer(&mut c, b2, ok(0, 1), 202).completed,
        vec![(vec![2], Ok(1))]
    );
    let (o, _) = step(&mut c, 300, &view);
    assert_eq!(o.sent(), vec!["7:0:2:1"]);
    let o = answer(&mut c, o.tag(), ok(0, 2), 301);
    assert_eq!(o.completed, vec![(vec![3], Ok(2))]);
    assert!(
        c.init_tag.is_none() && !c.sender.needs_producer_id(),
        "no bump"
    );
}

/// docs/semantics.md §5.1.
#[test]
fn producer_id_first_then_the_first_batch_alone() {
    let view = FakeCluster::new(|_| 1);
    let mut cfg = config(true);
    cfg.max_in_flight_per_partition = 5;
    let mut c = new_core(cfg);
    send(&mut c, 0, 1, 0);
    let (o, _) = step(&mut c, 0, &view);
    assert!(o.produce.is_empty());
    assert_eq!(o.init.len(), 1);
    let (node, tag, bump) = o.init[0];
    assert_eq!((node, bump), (1, (-1, -1)), "a new id, nothing to bump");
    let (o, _) = step(&mut c, 1, &view);
    assert!(
        o.init.is_empty() && o.produce.is_empty(),
        "one InitProducerId at a time"
    );
    c.on_answer(
        tag,
        Ok(Answer::ProducerId {
            producer_id: 7,
            epoch: 0,
        }),
        2,
    );
    send(&mut c, 0, 2, 2);
    let (o, _) = step(&mut c, 2, &view);
    assert_eq!(o.sent(), vec!["7:0:0:2"]);
    let first = o.tag();
    send(&mut c, 0, 3, 3);
    assert!(
        step(&mut c, 3, &view).0.produce.is_empty(),
        "the first batch of an epoch goes alone"
    );
    answer(&mut c, first, ok(0, 0), 4);
    let (o, _) = step(&mut c, 4, &view);
    assert_eq!(o.sent(), vec!["7:0:2:1"]);
    send(&mut c, 0, 4, 5);
    let (o, _) = step(&mut c, 5, &view);
    assert_eq!(
        o.sent(),
        vec!["7:0:3:1"],
        "pipelined once one was acknowledged"
    );
}

/// docs/semantics.md §5.5.
#[test]
fn epoch_bump_waits_until_nothing_is_in_flight() {
    let view = FakeCluster::new(|p| p + 1);
    let mut c = with_producer_id(config(true), &view);
    send(&mut c, 0, 1, 0);
    send(&mut c, 1, 2, 0);
    let (o, _) = step(&mut c, 0, &view);
    assert_eq!(o.produce.len(), 2, "one request per leader");
    let to = |node: i32| o.produce.iter().find(|p| p.0 == node).unwrap().1;
    let (a, b) = (to(1), to(2));
    let o = answer(&mut c, a, err(0, codes::OUT_OF_ORDER_SEQUENCE_NUMBER), 1);
    assert!(o.completed.is_empty(), "retried under a new epoch");
    let (o, _) = step(&mut c, 50, &view);
    assert!(o.init.is_empty(), "b is still in flight: no bump yet");
    assert!(
        o.produce.is_empty(),
        "nothing drains while a bump is pending"
    );
    assert_eq!(
        answer(&mut c, b, ok(1, 10), 51).completed,
        vec![(vec![2], Ok(10))]
    );
    let (o, _) = step(&mut c, 52, &view);
    answer_the_bump(&mut c, &o, 53);
    let (o, _) = step(&mut c, 60, &view);
    assert_eq!(
        o.sent(),
        vec!["7:1:0:1"],
        "renumbered from 0 in the new epoch"
    );
}

#[test]
fn refused_bump_asks_for_a_fresh_id() {
    let view = FakeCluster::new(|_| 1);
    let mut c = with_producer_id(config(true), &view);
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    answer(&mut c, a, err(0, codes::UNKNOWN_PRODUCER_ID), 1);
    let (o, _) = step(&mut c, 2, &view);
    assert_eq!(o.init[0].2, (7, 0));
    let r = c.on_answer(
        o.init[0].1,
        Err(Error::broker(codes::INVALID_PRODUCER_ID_MAPPING, None)),
        3,
    );
    assert!(r.is_empty());
    let (o, _) = step(&mut c, 4, &view);
    assert_eq!(o.init[0].2, (-1, -1), "a fresh id, not a bump");
    assert!(o.completed.is_empty(), "not fatal");
}

#[test]
fn init_producer_id_without_answer_or_send_is_asked_again() {
    let view = FakeCluster::new(|_| 1);
    let mut c = new_core(config(true));
    let (o, _) = step(&mut c, 0, &view);
    assert!(c
        .on_send_failed(o.init[0].1, Error::Disconnected { node_id: 1 }, 0)
        .is_empty());
    let (o, _) = step(&mut c, 1, &view);
    c.on_answer(o.init[0].1, Err(Error::Disconnected { node_id: 1 }), 2);
    let (o, _) = step(&mut c, 3, &view);
    assert_eq!(o.init.len(), 1, "retriable: asked again");
    assert!(o.completed.is_empty());
}

/// docs/semantics.md §5.6.
#[test]
fn duplicate_sequence_number_is_success() {
    let view = FakeCluster::new(|_| 1);
    let mut c = with_producer_id(config(true), &view);
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    let o = answer(&mut c, a, err(0, codes::DUPLICATE_SEQUENCE_NUMBER), 1);
    assert_eq!(o.completed.len(), 1);
    assert!(o.completed[0].1.is_ok(), "{:?}", o.completed);
    send(&mut c, 0, 2, 2);
    let (o, _) = step(&mut c, 2, &view);
    assert!(o.init.is_empty(), "no bump");
    assert_eq!(o.sent(), vec!["7:0:1:1"], "sequences go on");
}

/// docs/semantics.md §5.6: fenced (or unauthorized) fails every pending
/// record, in flight and queued, and nothing is sent any more.
#[test]
fn fatal_error_fails_all_pending() {
    let view = FakeCluster::new(|p| p + 1);
    let mut c = with_producer_id(config(true), &view);
    view.not_ready.borrow_mut().insert(2);
    send(&mut c, 0, 1, 0);
    send(&mut c, 1, 2, 0);
    send(&mut c, 1, 3, 0);
    let (o, _) = step(&mut c, 0, &view);
    let a = o.tag();
    let o = answer(&mut c, a, err(0, codes::PRODUCER_FENCED), 1);
    assert_eq!(o.completed, vec![(vec![1], Err(codes::PRODUCER_FENCED))]);
    view.not_ready.borrow_mut().clear();
    let (o, _) = step(&mut c, 2, &view);
    assert!(o.produce.is_empty() && o.init.is_empty());
    assert_eq!(o.completed, vec![(vec![2, 3], Err(codes::PRODUCER_FENCED))]);
    assert_eq!(c.free_memory(), 10_000);
    send(&mut c, 0, 4, 3);
    let (o, _) = step(&mut c, 3, &view);
    assert_eq!(o.completed, vec![(vec![4], Err(codes::PRODUCER_FENCED))]);
}

#[test]
fn fatal_init_producer_id_error_fails_all_pending() {
    let view = FakeCluster::new(|_| 1);
    let mut c = new_core(config(true));
    send(&mut c, 0, 1, 0);
    let (o, _) = step(&mut c, 0, &view);
    let err = Error::broker(codes::CLUSTER_AUTHORIZATION_FAILED, None);
    c.on_answer(o.init[0].1, Err(err), 1);
    let (o, _) = step(&mut c, 2, &view);
    assert!(o.init.is_empty() && o.produce.is_empty());
    assert_eq!(
        o.completed,
        vec![(vec![1], Err(codes::CLUSTER_AUTHORIZATION_FAILED))]
    );
}

/// An idempotent batch that was sent, came back for a retry (no answer: the
/// connection dropped) and then expired in the queue, its leader unknown
/// until delivery_timeout_ms: the broker may or may not have written it, so
/// its sequence may be a hole, and a broker without it refuses every later
/// batch of the partition as out of order (before, they were retried until
/// each expired in turn). The epoch is bumped first, and the next batch
/// starts at sequence 0 of the new epoch (Java's `markSequenceUnresolved`).
#[test]
fn retry_expiring_in_the_queue_bumps_the_epoch() {
    let view = FakeCluster::new(|_| 1);
    let mut c = with_producer_id(config(true), &view);
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    answer(&mut c, a, ok(0, 0), 1);
    send(&mut c, 0, 2, 2);
    let (o, _) = step(&mut c, 2, &view);
    assert_eq!(o.sent(), vec!["7:0:1:1"]);
    view.leaders.borrow_mut().remove(&0);
    let o = Out::of(c.on_answer(o.tag(), Err(Error::Disconnected { node_id: 1 }), 3));
    assert!(o.completed.is_empty(), "retried, not failed");
    let (o, _) = step(&mut c, 1002, &view);
    let timeout = Error::Timeout {
        what: String::new(),
        timeout_ms: 0,
    };
    assert_eq!(o.completed, vec![(vec![2], Err(timeout.code()))]);
    view.leaders.borrow_mut().insert(0, 1);
    send(&mut c, 0, 3, 1003);
    let (o, _) = step(&mut c, 1003, &view);
    assert!(
        o.produce.is_empty(),
        "nothing after the hole before the bump"
    );
    answer_the_bump(&mut c, &o, 1004);
    let (o, _) = step(&mut c, 1005, &view);
    assert_eq!(o.sent(), vec!["7:1:0:1"], "sequence 0 of the new epoch");
}

/// The same hole when the batch's request got no answer and it may not
/// retry (past delivery_timeout_ms): it fails, and the epoch is bumped
/// before anything else of the producer is sent.
#[test]
fn unanswered_batch_that_may_not_retry_bumps_the_epoch() {
    let view = FakeCluster::new(|_| 1);
    let mut c = with_producer_id(config(true), &view);
    send(&mut c, 0, 1, 0);
    let (o, _) = step(&mut c, 0, &view);
    assert_eq!(o.sent(), vec!["7:0:0:1"]);
    let gone = Error::Disconnected { node_id: 1 };
    let o = Out::of(c.on_answer(o.tag(), Err(gone.clone()), 1000));
    assert_eq!(o.completed, vec![(vec![1], Err(gone.code()))]);
    send(&mut c, 0, 2, 1001);
    let (o, _) = step(&mut c, 1001, &view);
    assert!(o.produce.is_empty());
    assert_eq!(o.init.len(), 1);
    assert_eq!(o.init[0].2, (7, 0));
}
