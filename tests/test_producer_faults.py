"""Producer under injected faults (librdkafka mock cluster): acks=all with
idempotence must deliver every acknowledged record exactly once, in order per
partition, through retriable errors and a leader move."""

from __future__ import annotations

import time

import ferrokafka as fk

PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
MESSAGE_TOO_LARGE = 10


def _read_all(confluent_kafka, bs, topic, partitions, n, timeout=30.0):
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "fault-reader",
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.time() + timeout
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            out.append(m)
    # Read a little longer: a duplicate would show up after the expected count.
    end = time.time() + 1.0
    while time.time() < end:
        m = c.poll(0.1)
        if m is not None and not m.error():
            out.append(m)
    c.close()
    return out


def test_retries_and_leader_move_keep_exactly_once_and_order(mock_cluster, confluent_kafka):
    m = mock_cluster
    m.create_topic("faults", 3, 3)
    p = fk.Producer(m.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=2,
                    batch_size=2048, retry_backoff_ms=10, request_timeout_ms=5000,
                    delivery_timeout_ms=60_000)
    futs = []
    n = 3000
    for i in range(n):
        if i == 500:
            m.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
                                            NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER])
        if i == 1500:
            m.set_partition_leader("faults", 0, 2)
            m.set_partition_leader("faults", 1, 3)
        if i == 2200:
            m.push_request_errors(PRODUCE, [REQUEST_TIMED_OUT] * 3)
        futs.append(p.send("faults", f"{i:06d}".encode(), key=str(i % 50).encode()))
    assert p.flush(60) == 0
    acked = [f.result(0) for f in futs]
    p.close()
    got = _read_all(confluent_kafka, m.bootstrap_servers, "faults", 3, n)
    values = [g.value() for g in got]
    assert len(values) == len(set(values)), "a record was written twice"
    assert len(values) == n, f"{n - len(values)} acknowledged records missing"
    # Per partition, the broker's order is the send order.
    by_part: dict[int, list[int]] = {}
    for g in sorted(got, key=lambda g: (g.partition(), g.offset())):
        by_part.setdefault(g.partition(), []).append(int(g.value()))
    for part, seq in by_part.items():
        assert seq == sorted(seq), f"partition {part} reordered"
    # Futures report the offsets the reader saw.
    where = {g.value(): (g.partition(), g.offset()) for g in got}
    for i, md in enumerate(acked):
        assert where[f"{i:06d}".encode()] == (md.partition, md.offset)


def test_undeliverable_records_fail_at_delivery_timeout_and_close_never_drops(mock_cluster):
    m = mock_cluster
    m.create_topic("down", 1, 1)
    p = fk.Producer(m.bootstrap_servers, linger_ms=0, request_timeout_ms=500,
                    delivery_timeout_ms=1500, retry_backoff_ms=50, max_block_ms=5000)
    p.send("down", b"first").result(10)
    assert p.partitions_for("down") == [0]
    for b in m.broker_ids:
        m.set_broker_down(b)
    futs = [p.send("down", b"x") for _ in range(20)]
    t0 = time.monotonic()
    p.flush(10)
    for f in futs:
        assert f.done()
        assert isinstance(f.exception(0), fk.KafkaError)
    assert time.monotonic() - t0 < 10
    # close() with records still queued fails them, it does not drop them.
    # (With every broker down these fail in send(), on the metadata wait;
    # test_close_fails_queued_and_in_flight_records covers close itself.)
    more = [p.send("down", b"y") for _ in range(5)]
    p.close(0)
    for f in more:
        assert f.done() and isinstance(f.exception(0), fk.KafkaError)


def test_buffer_memory_bounds_a_flood_to_a_slow_broker(mock_cluster):
    m = mock_cluster
    m.create_topic("slow", 1, 1)
    p = fk.Producer(m.bootstrap_servers, buffer_memory=64 * 1024, batch_size=16 * 1024,
                    max_block_ms=300, linger_ms=0, max_in_flight_requests_per_connection=1,
                    enable_idempotence=False, acks=1)
    p.send("slow", b"warm").result(10)
    for b in m.broker_ids:
        m.set_rtt(b, 400)
    payload = b"x" * 1000
    accepted, blocked = [], None
    t_first_block = None
    for _ in range(400):
        t0 = time.monotonic()
        f = p.send("slow", payload)
        dt = time.monotonic() - t0
        if f.done() and isinstance(f.exception(0), fk.KafkaTimeoutError):
            blocked, t_first_block = f, dt
            break
        accepted.append(f)
        assert p.metrics()["buffer_available_bytes"] >= 0
    assert blocked is not None, "the buffer never filled: memory is not bounded"
    # send() waited for memory about max_block_ms, then failed that record only.
    assert 0.25 <= t_first_block <= 2.0, t_first_block
    assert len(accepted) * 1000 <= 64 * 1024 + 16 * 1024
    for b in m.broker_ids:
        m.set_rtt(b, 0)
    assert p.flush(30) == 0
    assert all(f.exception(0) is None for f in accepted), "records accepted before the block are delivered"
    p.close()


def _by_offset(got):
    return [g.value() for g in sorted(got, key=lambda g: g.offset())]


def test_message_too_large_splits_the_batch_and_delivers_each_record_once_in_order(
        mock_cluster, confluent_kafka):
    m = mock_cluster
    m.create_topic("big", 1, 3)
    # One long linger so the records form one batch; the broker refuses the
    # first three Produce requests as too large, so the batch is split, then
    # its first piece split again, and so on.
    p = fk.Producer(m.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=200,
                    batch_size=1 << 20, retry_backoff_ms=10)
    p.partitions_for("big")
    m.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE] * 3)
    n = 200
    futs = [p.send("big", f"{i:06d}".encode(), partition=0) for i in range(n)]
    assert p.flush(30) == 0
    mds = [f.result(0) for f in futs]
    p.close()
    offsets = [md.offset for md in mds]
    assert offsets == sorted(offsets) and len(set(offsets)) == n, "futures out of order or shared offsets"
    values = _by_offset(_read_all(confluent_kafka, m.bootstrap_servers, "big", 1, n))
    assert values == [f"{i:06d}".encode() for i in range(n)], "lost, duplicated or reordered"
    assert offsets == list(range(offsets[0], offsets[0] + n))


def test_single_record_too_large_fails_only_that_record(mock_cluster, confluent_kafka):
    m = mock_cluster
    m.create_topic("big1", 1, 3)
    p = fk.Producer(m.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=200,
                    retry_backoff_ms=10)
    p.partitions_for("big1")
    # 4 records in one batch: refused (split 2+2), first piece refused (split
    # 1+1), record 0 alone refused: it fails, records 1..3 are delivered.
    m.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE] * 3)
    futs = [p.send("big1", f"r{i}".encode(), partition=0) for i in range(4)]
    p.flush(30)
    err = futs[0].exception(10)
    assert isinstance(err, fk.MessageSizeTooLargeError), repr(err)
    assert err.code == MESSAGE_TOO_LARGE
    mds = [f.result(0) for f in futs[1:]]
    assert [md.offset for md in mds] == sorted(md.offset for md in mds)
    # The producer goes on after the hole in its sequence (new epoch).
    last = p.send("big1", b"after", partition=0).result(10)
    p.close()
    values = _by_offset(_read_all(confluent_kafka, m.bootstrap_servers, "big1", 1, 4))
    assert values == [b"r1", b"r2", b"r3", b"after"]
    assert last.offset > mds[-1].offset


def test_close_fails_queued_and_in_flight_records(mock_cluster):
    m = mock_cluster
    m.create_topic("stuck", 1, 3)
    p = fk.Producer(m.bootstrap_servers, linger_ms=0, retry_backoff_ms=200,
                    delivery_timeout_ms=120_000)
    p.send("stuck", b"warm").result(10)
    # Every Produce answer is a retriable error: nothing can be delivered, the
    # records sit in the queue or in flight until close.
    m.push_request_errors(PRODUCE, [NOT_ENOUGH_REPLICAS] * 10_000)
    futs = [p.send("stuck", f"s{i}".encode()) for i in range(50)]
    assert p.flush(0.5) == 50, "records were delivered despite the errors"
    assert not any(f.done() for f in futs)
    t0 = time.monotonic()
    p.close(0)
    assert time.monotonic() - t0 < 5
    for f in futs:
        assert f.done(), "close left a future pending"
        assert isinstance(f.exception(0), fk.KafkaError)
    m.clear_request_errors(PRODUCE)
