"""Idempotent producer ordering under faults (issue 14, item 1).

The reported scenario: 3 brokers, a topic of 3 partitions with replication 3,
records `i` sent to partition `i % 3` with acks=all and idempotence, bursts of
retriable Produce errors (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
NOT_ENOUGH_REPLICAS) and leader moves in the middle of the stream. Read back
in offset order, every partition must hold its records exactly once and in
send order: the check counts *inversions* (a record followed by an earlier
one), not only losses and duplicates.

The mock cluster does not check idempotent sequences of a non-transactional
producer (only transactional ones), so a batch sent while an earlier batch of
its partition is retried is simply appended: these tests catch any client
that lets that happen (docs/semantics.md §5).

`run_order_scenario` returns figures so that `benches/chaos.py` can run it
longer and print them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

import pytest

import ferrokafka as fk

pytestmark = pytest.mark.chaos

TP = fk.TopicPartition
PRODUCE = 0
NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS = 6, 7, 19


def read_log(mock, topic, parts, expected, timeout=60):
    """{partition: [value, ...]} in offset order."""
    c = fk.Consumer(mock.bootstrap_servers, auto_offset_reset="earliest")
    c.assign([TP(topic, q) for q in range(parts)])
    seen, n = defaultdict(list), 0
    deadline = time.time() + timeout
    while n < expected and time.time() < deadline:
        for m in c.poll(500, max_records=10_000):
            seen[m.partition].append(int(m.value))
            n += 1
    for m in c.poll(200):  # anything beyond what was expected
        seen[m.partition].append(int(m.value))
    c.close()
    return seen


def order_figures(seen, sent):
    """Per partition: records, lost, duplicated, inversions, first inversions."""
    out = {}
    for q, want in sent.items():
        got = seen.get(q, [])
        counts = Counter(got)
        out[q] = dict(
            records=len(got),
            lost=len(set(want) - set(counts)),
            duplicated=sum(c - 1 for c in counts.values() if c > 1),
            inversions=sum(1 for a, b in zip(got, got[1:]) if b < a),
            examples=[(a, b) for a, b in zip(got, got[1:]) if b < a][:3],
        )
    return out


def run_order_scenario(mock, records=12_000, rate=12_000, in_flight=5, codec="none", faults="bursts",
                       topic=None):
    """Send `records` records to partition i % 3 (paced at `rate` per second
    in every other thousand) while `faults` happen; returns the figures
    (asserts nothing)."""
    topic = topic or f"order-{faults}-{in_flight}-{codec}"
    parts = 3
    mock.create_topic(topic, parts, 3)
    ids = mock.broker_ids
    p = fk.Producer(mock.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=1,
                    retry_backoff_ms=20, request_timeout_ms=5000, compression_type=codec,
                    max_in_flight_requests_per_connection=in_flight)

    def fault(i):
        if faults == "bursts":
            # The reported scenario, with the bursts repeated through the stream.
            if i % 4000 == 1000:
                mock.push_request_errors(PRODUCE, [NOT_LEADER, NOT_LEADER, REQUEST_TIMED_OUT,
                                                   NOT_ENOUGH_REPLICAS, NOT_LEADER])
            if i % 4000 == 3000:
                mock.set_partition_leader(topic, 0, ids[(i // 4000) % len(ids)])
                mock.set_partition_leader(topic, 1, ids[(i // 4000 + 1) % len(ids)])
            if i % 4000 == 3500:
                mock.push_request_errors(PRODUCE, [REQUEST_TIMED_OUT] * 3)
        elif faults == "moves_during_retries":
            # Leaders move while the retries of a burst are under way.
            if i % 3000 == 1000:
                mock.push_request_errors(PRODUCE, [NOT_LEADER] * 6)
                for q in range(parts):
                    mock.set_partition_leader(topic, q, ids[(q + i // 3000 + 1) % len(ids)])
        elif faults == "broker_down":
            # A broker goes down for 300 ms, with errors queued.
            if i % 4000 == 1000:
                mock.push_request_errors(PRODUCE, [NOT_ENOUGH_REPLICAS] * 2)
                down = ids[(i // 4000) % len(ids)]
                mock.set_broker_down(down)
                up = threading.Timer(0.3, mock.set_broker_up, (down,))
                timers.append(up)
                up.start()
        else:
            raise ValueError(faults)

    timers = []
    t0 = time.time()
    futs = []
    sent = defaultdict(list)
    for i in range(records):
        # Paced in even thousands, as fast as possible in odd ones, where the
        # faults land: a tight loop queues several batches per partition, so
        # batches are in flight behind the one that fails.
        if i % 100 == 0 and (i // 1000) % 2 == 0:
            lag = t0 + i / rate - time.time()
            if lag > 0:
                time.sleep(lag)
        fault(i)
        futs.append(p.send(topic, b"%08d" % i, partition=i % parts))
        sent[i % parts].append(i)
    left = p.flush(60)
    for t in timers:
        t.join()
    for b in ids:
        mock.set_broker_up(b)
    mock.clear_request_errors(PRODUCE)
    failed = Counter(str(f.exception(0))[:80] for f in futs if f.done() and f.exception(0) is not None)
    p.close()
    seen = read_log(mock, topic, parts, records)
    per = order_figures(seen, sent)
    return dict(faults=faults, in_flight=in_flight, codec=codec, sent=records, unflushed=left,
                failed=dict(failed), seconds=round(time.time() - t0, 1), partitions=per,
                inversions=sum(f["inversions"] for f in per.values()),
                lost=sum(f["lost"] for f in per.values()),
                duplicated=sum(f["duplicated"] for f in per.values()))


def check(f):
    assert f["unflushed"] == 0 and not f["failed"], f"records failed under retriable faults: {f}"
    assert f["lost"] == 0 and f["duplicated"] == 0, f"lost or duplicated: {f['partitions']}"
    assert f["inversions"] == 0, f"records out of send order: {f['partitions']}"


@pytest.mark.parametrize("in_flight", [1, 5])
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_bursts_of_retriable_errors_keep_every_partition_in_order(mock_cluster, in_flight, codec):
    check(run_order_scenario(mock_cluster, in_flight=in_flight, codec=codec, faults="bursts"))


@pytest.mark.parametrize("faults", ["moves_during_retries", "broker_down"])
def test_leader_moves_and_a_broker_down_keep_order(mock_cluster, faults):
    check(run_order_scenario(mock_cluster, faults=faults))
