"""Pattern subscriptions, matched by the Rust core (Java's ``subscribe(Pattern)``:
the whole topic name must match; re-matched after every metadata update)."""

from __future__ import annotations

import re
import time

import pytest

import ferrokafka as fk
from ferrokafka import TopicPartition as TP

FAST = dict(session_timeout_ms=6000, heartbeat_interval_ms=300, auto_offset_reset="earliest",
            metadata_max_age_ms=300)


def _admin(bs, confluent_kafka):
    return confluent_kafka.admin.AdminClient({"bootstrap.servers": bs})


def _create(admin, confluent_kafka, *topics):
    for f in admin.create_topics([confluent_kafka.admin.NewTopic(t, 1, 1) for t in topics]).values():
        f.result(15)


def _state(c):
    """What a failed wait reports: whether the pattern matched, and how far
    the group join got."""
    co = c.coordinator
    return (f"subscription={c.subscription()} assignment={c.assignment()} "
            f"coordinator={co.coordinator()} generation={co.generation()} member={co.member_id()!r}")


def _until(cond, consumer=None, timeout=30.0):
    deadline = time.time() + timeout
    while not cond() and time.time() < deadline:
        if consumer is not None:
            consumer.poll(100)
        else:
            time.sleep(0.05)
    return cond()


def test_whole_names_match_and_topics_come_and_go_without_python_polling(embedded_broker, confluent_kafka, topic_name):
    bs = embedded_broker.bootstrap_servers
    prefix = topic_name[:40]
    admin = _admin(bs, confluent_kafka)
    # "-ab" and "x-" names would match as a prefix (Python's re.match) or a
    # substring (librdkafka's search); Java matches the whole name only.
    _create(admin, confluent_kafka, f"{prefix}-a", f"{prefix}-ab", f"x-{prefix}-a")
    c = fk.Consumer(bs, group_id=f"g-{topic_name}", **FAST)
    c.subscribe(f"^{prefix}-(a|b|c)")
    assert _until(lambda: c.assignment() == [TP(f"{prefix}-a", 0)], c), _state(c)
    assert c.subscription() == [f"{prefix}-a"]
    # The core re-matches on its own thread: the subscription follows a new
    # topic with no poll() (the rebalance itself waits for poll, which runs
    # its callbacks).
    _create(admin, confluent_kafka, f"{prefix}-b")
    assert _until(lambda: c.subscription() == sorted([f"{prefix}-a", f"{prefix}-b"]))
    assert _until(lambda: sorted(c.assignment()) == [TP(f"{prefix}-a", 0), TP(f"{prefix}-b", 0)], c)
    for f in admin.delete_topics([f"{prefix}-a"]).values():
        f.result(15)
    assert _until(lambda: c.assignment() == [TP(f"{prefix}-b", 0)], c)
    assert c.subscription() == [f"{prefix}-b"]
    c.close()


def test_re_pattern_flags_carry_over(embedded_broker, confluent_kafka, topic_name):
    bs = embedded_broker.bootstrap_servers
    name = f"{topic_name[:40]}-Mixed"
    _create(_admin(bs, confluent_kafka), confluent_kafka, name)
    c = fk.Consumer(bs, group_id=f"g-{topic_name}", **FAST)
    c.subscribe(re.compile(re.escape(name.lower()), re.IGNORECASE))
    assert _until(lambda: c.assignment() == [TP(name, 0)], c), _state(c)
    c.close()


def test_patterns_the_core_cannot_match_are_refused():
    c = fk.Consumer("127.0.0.1:1", group_id="g")
    with pytest.raises(ValueError, match="not a valid regex"):
        c.subscribe("^(?<=x)y")  # look-behind: Java has it, Rust's regex does not
    with pytest.raises(ValueError, match="not supported"):
        c.subscribe(re.compile("t.*", re.VERBOSE))
    with pytest.raises(TypeError):
        c.subscribe(re.compile(b"t.*"))
    c.subscribe("^t.*")
    with pytest.raises(fk.KafkaError, match="mutually exclusive"):
        c.subscribe(["t"])
    c.unsubscribe()
    c.subscribe(["t"])
    assert c.subscription() == ["t"]
    c.close(0)
