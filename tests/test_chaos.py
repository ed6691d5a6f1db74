"""Faults (issue 8), bounded for CI; `benches/chaos.py` runs the long version.

Mock cluster with 3 brokers: leaders moved every 200 ms, brokers set down
and up, retriable errors injected on Produce, Fetch, OffsetCommit, Heartbeat,
JoinGroup and SyncGroup. Checked: every acknowledged record present exactly
once and in order; a consumer group with members joining and leaving sees
every record at least once and its committed offsets never go back.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict

import pytest

import ferrokafka as fk

pytestmark = pytest.mark.chaos

TP = fk.TopicPartition
RECORDS = int(os.environ.get("FERROKAFKA_CHAOS_RECORDS", "20000"))

PRODUCE, FETCH, OFFSET_COMMIT, JOIN, HEARTBEAT, SYNC = 0, 1, 8, 11, 12, 14
NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS = 6, 7, 19
COORDINATOR_NOT_AVAILABLE, REBALANCE_IN_PROGRESS = 15, 27


class Chaos(threading.Thread):
    """Moves leaders every 200 ms, takes a broker down now and then, and
    injects retriable errors, until stopped."""

    def __init__(self, mock, topic, partitions, seed=7, down=True):
        super().__init__(daemon=True)
        self.m, self.topic, self.partitions = mock, topic, partitions
        self.rng = random.Random(seed)
        self.stop_ev = threading.Event()
        self.down = down
        self.moves = self.downs = self.injected = 0

    def run(self):
        ids = self.m.broker_ids
        while not self.stop_ev.wait(0.2):
            p = self.rng.randrange(self.partitions)
            self.m.set_partition_leader(self.topic, p, self.rng.choice(ids))
            self.moves += 1
            r = self.rng.random()
            if r < 0.15:
                self.m.push_request_errors(PRODUCE, [self.rng.choice([NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS])])
                self.injected += 1
            elif r < 0.25:
                self.m.push_request_errors(FETCH, [NOT_LEADER])
                self.injected += 1
            elif r < 0.30:
                self.m.push_request_errors(OFFSET_COMMIT, [COORDINATOR_NOT_AVAILABLE])
                self.m.push_request_errors(HEARTBEAT, [REBALANCE_IN_PROGRESS])
                self.injected += 2
            elif r < 0.33 and self.down:
                b = self.rng.choice(ids)
                self.m.set_broker_down(b)
                self.downs += 1
                time.sleep(0.3)
                self.m.set_broker_up(b)

    def stop(self):
        self.stop_ev.set()
        self.join(5)
        for b in self.m.broker_ids:
            self.m.set_broker_up(b)


def test_idempotent_producer_exactly_once_in_order_under_chaos(mock_cluster):
    topic, parts = "chaos-produce", 4
    mock_cluster.create_topic(topic, parts, 3)
    chaos = Chaos(mock_cluster, topic, parts)
    p = fk.Producer(mock_cluster.bootstrap_servers, acks="all", enable_idempotence=True, linger_ms=2,
                    retry_backoff_ms=20, request_timeout_ms=3000, delivery_timeout_ms=120_000,
                    metadata_max_age_ms=500)
    chaos.start()
    futs = []
    for i in range(RECORDS):
        futs.append((i, p.send(topic, value=b"%d" % i, key=b"%d" % (i % 97))))
        if i % 2000 == 0:
            time.sleep(0.05)  # spread the sends over the chaos
    assert p.flush(120) == 0
    chaos.stop()
    acked = {}
    failed = 0
    reasons = defaultdict(int)
    for i, f in futs:
        try:
            md = f.result(0)
            acked[i] = md
        except fk.KafkaError as e:
            failed += 1
            reasons[str(e)[:120]] += 1
    p.close()
    assert failed == 0, f"{failed} records failed under retriable faults: {dict(reasons)}"
    # read back with our consumer, per partition
    c = fk.Consumer(mock_cluster.bootstrap_servers, auto_offset_reset="earliest")
    c.assign([TP(topic, q) for q in range(parts)])
    seen = defaultdict(list)
    n = 0
    deadline = time.time() + 60
    while n < len(acked) and time.time() < deadline:
        for m in c.poll(500, max_records=10_000):
            seen[m.partition].append((m.offset, int(m.value)))
            n += 1
    time.sleep(0.5)
    for m in c.poll(500):
        seen[m.partition].append((m.offset, int(m.value)))
        n += 1
    c.close()
    values = [v for q in seen for _, v in seen[q]]
    assert sorted(values) == sorted(acked), "lost or duplicated records"
    for q, recs in seen.items():
        # in send order within each partition, at the offsets the futures reported
        sent_order = [i for i, md in sorted(acked.items()) if md.partition == q]
        assert [v for _, v in recs] == sent_order
        assert {v: o for o, v in recs} == {i: acked[i].offset for i in sent_order}
    print(f"chaos: {RECORDS} sent, {len(acked)} acked, {n} consumed, 0 lost, 0 duplicated; "
          f"{chaos.moves} leader moves, {chaos.downs} brokers down, {chaos.injected} errors injected")


def test_group_at_least_once_and_commits_never_go_back(mock_cluster):
    topic, parts = "chaos-group", 6
    mock_cluster.create_topic(topic, parts, 3)
    n = RECORDS // 4
    with fk.Producer(mock_cluster.bootstrap_servers, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, value=b"%d" % i, partition=i % parts)
        assert p.flush(60) == 0
    group = "chaos-g"
    seen = set()
    lock = threading.Lock()
    commits = defaultdict(list)  # partition -> committed offsets in commit order
    stop = threading.Event()
    chaos = Chaos(mock_cluster, topic, parts, down=False)

    def member(k, lifetime):
        c = fk.Consumer(mock_cluster.bootstrap_servers, group_id=group, auto_offset_reset="earliest",
                        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=300,
                        partition_assignment_strategy="cooperative-sticky")
        c.subscribe([topic])
        end = time.time() + lifetime
        try:
            while time.time() < end and not stop.is_set():
                try:
                    msgs = c.poll(200)
                except fk.KafkaError:
                    continue  # injected errors surface as exceptions; keep polling
                with lock:
                    for m in msgs:
                        seen.add(int(m.value))
                if msgs:
                    try:
                        offs = {TP(topic, m.partition): m.offset + 1 for m in msgs}
                        c.commit(offs)
                        with lock:
                            for tp, o in offs.items():
                                commits[tp.partition].append(o)
                    except fk.KafkaError:
                        pass  # rebalanced meanwhile: another member owns it now
        finally:
            c.close()

    chaos.start()
    threads = [threading.Thread(target=member, args=(k, life), daemon=True)
               for k, life in enumerate([60, 60, 4, 8])]
    for t in threads:
        t.start()
        time.sleep(0.5)
    deadline = time.time() + 60
    while len(seen) < n and time.time() < deadline:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(20)
    chaos.stop()
    assert len(seen) == n, f"{n - len(seen)} records never delivered"
    # the group's committed offsets never go back: check the final values
    # against the highest committed per partition (commit order across
    # members can interleave, the broker's view must end at the max)
    c = fk.Consumer(mock_cluster.bootstrap_servers, group_id=group)
    final = c.committed([TP(topic, q) for q in range(parts)])
    c.close()
    for q in range(parts):
        if commits[q]:
            assert final[TP(topic, q)].offset == max(commits[q])
