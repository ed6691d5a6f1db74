"""Native Consumer: unassign / incremental_assign / incremental_unassign
(the manual-assignment calls librdkafka has and the confluent-kafka facade uses)."""

from __future__ import annotations

import time

import ferrokafka as fk

TP = fk.TopicPartition


def _setup(bs, topic):
    fk.Admin(bs).create_topics([fk.NewTopic(topic, 2, 1)])
    p = fk.Producer(bs)
    for part in (0, 1):
        for i in range(3):
            p.send(topic, f"{part}-{i}".encode(), partition=part)
    assert p.flush(15) == 0
    p.close()


def _drain(c, n, timeout=20.0):
    got = []
    deadline = time.time() + timeout
    while len(got) < n and time.time() < deadline:
        got.extend(c.poll(200, max_records=n - len(got)))
    return got


def test_incremental_assign_keeps_positions(embedded_broker, topic_name):
    bs = embedded_broker.bootstrap_servers
    _setup(bs, topic_name)
    c = fk.Consumer(bs, auto_offset_reset="earliest")
    c.assign([TP(topic_name, 0)])
    first = _drain(c, 2)
    assert [m.value for m in first] == [b"0-0", b"0-1"]
    c.incremental_assign([TP(topic_name, 1)])
    assert sorted(c.assignment()) == [TP(topic_name, 0), TP(topic_name, 1)]
    assert c.position(TP(topic_name, 0)) == 2  # not reset by the new assignment
    rest = _drain(c, 4)
    assert sorted(m.value for m in rest) == [b"0-2", b"1-0", b"1-1", b"1-2"]
    c.close()


def test_incremental_unassign_and_unassign(embedded_broker, topic_name):
    bs = embedded_broker.bootstrap_servers
    _setup(bs, topic_name)
    c = fk.Consumer(bs, auto_offset_reset="earliest")
    c.assign([TP(topic_name, 0), TP(topic_name, 1)])
    c.incremental_unassign([TP(topic_name, 0)])
    assert c.assignment() == [TP(topic_name, 1)]
    got = _drain(c, 3)
    assert {m.partition for m in got} == {1}
    c.unassign()
    assert c.assignment() == []
    assert c.poll(300) == []
    c.close()
