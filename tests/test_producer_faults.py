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
    leader = p.partitions_for("down") and 1
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
    more = [p.send("down", b"y") for _ in range(5)] if leader else []
    p.close(0)
    for f in more:
        assert f.done() and f.exception(0) is not None


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
