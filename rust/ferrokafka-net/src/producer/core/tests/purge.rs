//! `ProducerCore::purge` (librdkafka's `rd_kafka_purge`) on the sans-IO
//! core. Helpers are the parent module's.

use super::*;

fn purged(in_flight: bool) -> Result<i64, i16> {
    Err(Error::Purged { in_flight }.code())
}

#[test]
fn purge_fails_queued_and_in_flight_records_and_ignores_the_late_answer() {
    let view = FakeCluster::new(|_| 1);
    let mut c = new_core(config(false));
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    view.not_ready.borrow_mut().insert(1);
    send(&mut c, 0, 2, 1);
    send(&mut c, 1, 3, 1);
    assert!(
        step(&mut c, 1, &view).0.produce.is_empty(),
        "node 1 not ready"
    );
    // in_queue only: the queued records, not the one in flight.
    let o = Out::of(c.purge(true, false));
    assert!(o.memory_freed);
    let mut done = o.completed;
    done.sort();
    assert_eq!(
        done,
        vec![(vec![2], purged(false)), (vec![3], purged(false))]
    );
    // in_flight: the request's record fails now, its answer later is
    // nobody's, and nothing is left to send.
    let o = Out::of(c.purge(true, true));
    assert_eq!(o.completed, vec![(vec![1], purged(true))]);
    assert!(answer(&mut c, a, ok(0, 0), 2)
        .completed
        .iter()
        .all(|(h, _)| h.is_empty()));
    view.not_ready.borrow_mut().clear();
    assert!(step(&mut c, 3, &view).0.produce.is_empty());
    assert_eq!(c.free_memory(), 10_000, "every batch's memory is back");
    assert!(
        Out::of(c.purge(true, true)).completed.is_empty(),
        "nothing left"
    );
}

#[test]
fn purged_in_flight_batch_is_not_retried() {
    let view = FakeCluster::new(|_| 1);
    let mut c = new_core(config(false));
    send(&mut c, 0, 1, 0);
    let a = step(&mut c, 0, &view).0.tag();
    assert_eq!(
        Out::of(c.purge(false, true)).completed,
        vec![(vec![1], purged(true))]
    );
    answer(&mut c, a, err(0, codes::NOT_LEADER_OR_FOLLOWER), 1);
    assert!(
        step(&mut c, 100, &view).0.produce.is_empty(),
        "not sent again"
    );
    assert_eq!(c.free_memory(), 10_000);
}

/// A purged retry had been sent: its sequence may be a hole, so the
/// idempotent producer bumps its epoch before sending anything else
/// (docs/semantics.md §5.5).
#[test]
fn purging_an_idempotent_retry_bumps_the_epoch() {
    let view = FakeCluster::new(|_| 1);
    let mut c = with_producer_id(config(true), &view);
    send(&mut c, 0, 1, 0);
    let (o, _) = step(&mut c, 0, &view);
    let o = Out::of(c.on_answer(o.tag(), Err(Error::Disconnected { node_id: 1 }), 1));
    assert!(o.completed.is_empty(), "queued for a retry");
    assert_eq!(
        Out::of(c.purge(true, false)).completed,
        vec![(vec![1], purged(false))]
    );
    send(&mut c, 0, 2, 2);
    let (o, _) = step(&mut c, 100, &view);
    assert!(o.produce.is_empty());
    assert_eq!(o.init.len(), 1);
    assert_eq!(o.init[0].2, (7, 0));
}
