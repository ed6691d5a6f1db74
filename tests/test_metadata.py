"""Metadata / ProducerMetadata against docs/semantics.md §3, rule by rule.

Time is injected (``now_ms``) everywhere; nothing here sleeps except the
tests that need a real second thread. Times start at T, a realistic wall
clock: Java's "last_refresh_ms = 0 allows an immediate refresh" relies on the
clock being far from 0.
"""

from __future__ import annotations

import threading
import time

import pytest

import ferrokafka as fk
from ferrokafka import errors

T = 1_700_000_000_000

UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75

BROKERS = [fk.Node(0, "b0", 9092), fk.Node(1, "b1", 9092, rack="r1")]


def part(p, leader=0, epoch=0, error_code=0):
    return fk.PartitionMetadata(p, leader, epoch, [leader], [leader], error_code)


def topic(name, n=1, leader=0, epoch=0, error_code=0, is_internal=False):
    parts = [part(p, leader, epoch) for p in range(n)] if error_code == 0 else []
    return fk.TopicMetadata(name, parts, error_code, is_internal)


def resp(*topics, brokers=BROKERS, cluster_id="cid", controller_id=0):
    return fk.MetadataResponse(list(brokers), list(topics), cluster_id, controller_id)


def producer(**kw):
    md = fk.ProducerMetadata(refresh_backoff_ms=100, metadata_expire_ms=300_000,
                             metadata_idle_ms=kw.pop("metadata_idle_ms", 300_000), **kw)
    md.bootstrap(["s1:9092", "s2:9092"])
    return md


def answered(md, *topics, now=T, partial=None):
    """Send-and-answer one request the way the updater does."""
    names, rv, is_partial = md.new_metadata_request(now)
    md.update(rv, resp(*topics), is_partial if partial is None else partial, now)
    return names, is_partial


# ---- 3.1 - 3.12, one test per rule ------------------------------------------------

def test_rule_3_1_bootstrap():
    md = fk.ProducerMetadata()
    assert md.update_version == 0
    assert not md.need_full_update
    md.bootstrap(["h1:9092", "h2:9093", "h3:9094"])
    assert md.need_full_update
    assert md.update_version == 1
    cluster = md.fetch()
    assert sorted((n.id, n.host, n.port) for n in cluster.nodes) == [
        (-3, "h3", 9094), (-2, "h2", 9093), (-1, "h1", 9092)]
    assert cluster.topics == frozenset()
    assert cluster.is_bootstrap_configured
    assert cluster.node_by_id(-2) == fk.Node(-2, "h2", 9093)


def test_rule_3_1_bootstrap_seeds_in_random_order():
    orders = set()
    for _ in range(30):
        md = fk.Metadata()
        md.bootstrap([f"h{i}:9092" for i in range(6)])
        orders.add(tuple(n.id for n in md.fetch().nodes))
    assert len(orders) > 1


def test_rule_3_1_bootstrap_rejects_bad_addresses():
    md = fk.Metadata()
    for bad in (["nohost"], ["h:0"], ["h:port"], []):
        with pytest.raises(ValueError, match="bootstrap_servers"):
            md.bootstrap(bad)
    md.bootstrap("a:1, b:2")  # one comma-separated string works too
    assert len(md.fetch().nodes) == 2


def test_rule_3_2_request_update():
    md = producer()
    answered(md)
    assert not md.need_full_update
    v = md.update_version
    assert md.request_update() == v
    assert md.need_full_update
    assert md.update_version == v  # asking does not bump the version


def test_rule_3_3_request_update_for_new_topics():
    md = producer()
    answered(md, now=T)
    assert md.last_refresh_ms == T
    rv = md.request_version
    assert md.time_to_next_update(T + 1) > 0
    assert md.request_update_for_new_topics() == md.update_version
    assert md.last_refresh_ms == 0
    assert md.need_partial_update
    assert md.request_version == rv + 1
    # last_refresh_ms = 0 lets the update go out at once.
    assert md.time_to_next_update(T + 1) == 0


def test_rule_3_4_update():
    md = producer()
    md.add("a", T)
    md.add("b", T)  # request_version is now 2
    assert md.request_version == 2
    v = md.update_version
    # An answer to request_version 1 leaves a partial update pending...
    md.update(1, resp(topic("a")), True, T + 5)
    assert md.need_partial_update
    assert md.update_version == v + 1
    assert md.last_refresh_ms == T + 5
    # ...partial: full-update state untouched.
    assert md.need_full_update
    assert md.last_successful_refresh_ms == 0
    # An answer to the latest version clears it; full: full state set.
    md.update(2, resp(topic("a"), topic("b")), False, T + 10)
    assert not md.need_partial_update
    assert not md.need_full_update
    assert md.last_successful_refresh_ms == T + 10
    assert md.last_refresh_ms == T + 10
    assert md.update_version == v + 2


def test_rule_3_5_handling_a_response():
    md = producer()
    for t in ("ok", "lna", "bad_part", "invalid!", "secret", "__consumer_offsets"):
        md.add(t, T)
    names, partial = answered(
        md,
        topic("ok", 2),
        topic("not_ours", 3),  # not retained: skipped
        topic("lna", error_code=LEADER_NOT_AVAILABLE),
        fk.TopicMetadata("bad_part", [part(0), part(1, leader=-1, error_code=LEADER_NOT_AVAILABLE)]),
        topic("invalid!", error_code=INVALID_TOPIC_EXCEPTION),
        topic("secret", error_code=TOPIC_AUTHORIZATION_FAILED),
        topic("__consumer_offsets", 1, is_internal=True),
    )
    assert not partial
    c = md.fetch()
    assert c.topics == {"ok", "bad_part", "__consumer_offsets"}
    assert "not_ours" not in c.topics
    assert c.internal_topics == {"__consumer_offsets"}
    assert c.invalid_topics == {"invalid!"} == md.invalid_topics
    assert c.unauthorized_topics == {"secret"} == md.unauthorized_topics
    # The errored partition is kept, leaderless.
    assert len(c.partitions_for_topic("bad_part")) == 2
    assert [p.partition for p in c.available_partitions_for_topic("bad_part")] == [0]
    # Invalid-metadata errors (topic or partition level) request a full update.
    assert md.need_full_update


@pytest.mark.parametrize("code", [UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
                                  NOT_LEADER_OR_FOLLOWER])
def test_rule_3_5_invalid_metadata_errors_request_update(code):
    md = producer()
    md.add("t", T)
    answered(md, fk.TopicMetadata("t", [part(0, -1, 0, error_code=code)]))
    assert md.need_full_update
    md2 = producer()
    md2.add("t", T)
    answered(md2, topic("t", error_code=code))
    assert md2.need_full_update


def test_rule_3_5_partial_merges_full_replaces():
    md = producer()
    md.add("a", T)
    answered(md, topic("a", 1), now=T)
    md.add("b", T + 1)
    names, partial = answered(md, topic("b", 2), now=T + 2)
    assert partial and names == ["b"]
    assert md.fetch().topics == {"a", "b"}  # merged: a kept
    # A full answer replaces the cache: a topic we keep but which the answer
    # omitted is gone from the cache.
    md.request_update()
    names, partial = answered(md, topic("b", 2), now=T + 3)
    assert not partial and names == ["a", "b"]
    assert md.fetch().topics == {"b"}


def test_rule_3_5_partial_merge_keeps_old_errors_of_unnamed_topics():
    md = producer()
    md.add("secret", T)
    answered(md, topic("secret", error_code=TOPIC_AUTHORIZATION_FAILED), now=T)
    md.add("b", T + 1)
    answered(md, topic("b"), now=T + 2)
    assert md.unauthorized_topics == {"secret"}
    # Once an answer names it without error, the error is gone.
    md.request_update()
    answered(md, topic("secret"), topic("b"), now=T + 3)
    assert md.unauthorized_topics == set()


def test_rule_3_5_stale_leader_epoch_keeps_cached_entry():
    md = fk.Metadata()
    md.update(0, resp(topic("t", 1, leader=0, epoch=5)), False, T)
    md.update(0, resp(topic("t", 1, leader=1, epoch=4)), False, T + 1)
    c = md.fetch()
    assert c.leader_for(fk.TopicPartition("t", 0)).id == 0
    assert c.leader_epoch_for(fk.TopicPartition("t", 0)) == 5
    md.update(0, resp(topic("t", 1, leader=1, epoch=5)), False, T + 2)  # same epoch: taken
    assert md.fetch().leader_for(("t", 0)).id == 1
    md.update(0, resp(topic("t", 1, leader=0, epoch=6)), False, T + 3)
    assert md.fetch().leader_for(("t", 0)).id == 0
    assert md.last_seen_leader_epoch(("t", 0)) == 6


@pytest.mark.serial
def test_rule_3_6_fetch_returns_snapshot_without_blocking():
    md = producer()
    before = md.fetch()
    md.add("t", T)
    answered(md, topic("t", 3))
    after = md.fetch()
    # The old snapshot is immutable; the new one has the answer.
    assert before.topics == frozenset() and before.is_bootstrap_configured
    assert after.partition_count_for_topic("t") == 3
    assert after.cluster_id == "cid"
    assert after.controller == BROKERS[0]
    assert after.nodes == BROKERS
    # fetch() while another thread waits in await_update does not block.
    t = threading.Thread(target=lambda: pytest.raises(fk.KafkaTimeoutError, md.await_update,
                                                      md.update_version, 300))
    t.start()
    t0 = time.monotonic()
    for _ in range(1000):
        md.fetch()
    assert time.monotonic() - t0 < 0.25
    t.join()


def test_rule_3_7_time_to_next_update():
    md = fk.ProducerMetadata(refresh_backoff_ms=100, metadata_expire_ms=10_000)
    md.bootstrap(["s:1"])
    assert md.update_requested()
    assert md.time_to_next_update(T) == 0
    md.update(md.request_version, resp(), False, T)
    assert not md.update_requested()
    # Nothing requested: the expiry governs.
    assert md.time_to_next_update(T) == 10_000
    assert md.time_to_next_update(T + 9_000) == 1_000
    assert md.time_to_next_update(T + 10_000) == 0
    assert md.time_to_next_update(T + 99_999) == 0  # never negative
    # Requested: the refresh backoff governs.
    md.request_update()
    assert md.update_requested()
    assert md.time_to_next_update(T + 40) == 60
    assert md.time_to_next_update(T + 100) == 0
    assert md.time_to_next_update(T + 500) == 0


def test_rule_3_7_partial_asks_new_topics_full_asks_all_retained():
    md = producer()
    md.add("a", T)
    names, _, partial = md.new_metadata_request(T)
    assert not partial and names == ["a"]  # bootstrap asked for a full update
    answered(md, topic("a"), now=T)
    md.add("b", T + 1)
    md.add("c", T + 1)
    names, _, partial = md.new_metadata_request(T + 2)
    assert partial and sorted(names) == ["b", "c"]
    # A full update requested, or the last full one expired: all retained topics.
    md.request_update()
    names, _, partial = md.new_metadata_request(T + 2)
    assert not partial and names == ["a", "b", "c"]
    md2 = fk.ProducerMetadata(metadata_expire_ms=1000)
    md2.add("a", T)
    md2.update(md2.request_version, resp(topic("a")), False, T)
    md2.add("b", T)
    assert md2.new_metadata_request(T + 999)[2] is True
    assert md2.new_metadata_request(T + 1000)[2] is False
    # Base Metadata asks for all topics.
    assert fk.Metadata().new_metadata_request(T)[0] is None


def test_rule_3_8_add():
    md = fk.ProducerMetadata(metadata_idle_ms=5_000)
    assert md.metadata_idle_ms == 5_000
    md.add("t", T)
    assert md.topics == {"t": T + 5_000}
    assert md.new_topics == {"t"}
    assert md.need_partial_update
    assert md.request_version == 1
    assert md.last_refresh_ms == 0
    # Present: only the expiry moves.
    md.add("t", T + 100)
    assert md.topics == {"t": T + 5_100}
    assert md.request_version == 1
    assert md.new_topics == {"t"}


def test_rule_3_9_retain_topic():
    md = fk.ProducerMetadata(metadata_idle_ms=1_000)
    assert md.retain_topic("unknown", False, T) is False
    md.add("t", T)
    # In new_topics: kept even past expiry.
    assert md.retain_topic("t", False, T + 5_000) is True
    md.update(md.request_version, resp(topic("t")), False, T)
    assert md.new_topics == set()
    assert md.retain_topic("t", False, T + 999) is True
    assert md.retain_topic("t", False, T + 1_000) is False  # expired: removed
    assert "t" not in md.topics
    assert md.retain_topic("t", False, T + 1) is False
    # Base Metadata keeps everything.
    assert fk.Metadata().retain_topic("anything", False, T) is True


def test_rule_3_10_request_update_for_topic():
    md = producer()
    md.add("new", T)
    rv = md.request_version
    md.request_update_for_topic("new")
    assert md.request_version == rv + 1 and md.need_partial_update
    answered(md, topic("new"), now=T)
    assert not md.need_full_update
    rv = md.request_version
    assert md.request_update_for_topic("new") == md.update_version
    assert md.request_version == rv  # no longer new: a full update
    assert md.need_full_update


def test_rule_3_11_producer_update_clears_new_topics_and_wakes():
    md = producer()
    md.add("a", T)
    md.add("b", T)
    v = md.update_version
    woke = []
    t = threading.Thread(target=lambda: woke.append(md.await_update(v, 5_000)))
    t.start()
    time.sleep(0.05)
    md.update(md.request_version, resp(topic("a")), True, T)
    t.join(5)
    assert woke == [None]
    # Only topics named in the answer leave new_topics.
    assert md.new_topics == {"b"}


def test_rule_3_12_await_update():
    md = producer()
    v = md.update_version
    answered(md)
    md.await_update(v, 0)  # already newer: returns at once
    with pytest.raises(fk.KafkaTimeoutError) as ei:
        md.await_update(md.update_version, 50)
    assert isinstance(ei.value, TimeoutError)
    md.fatal_error(58, "SASL authentication failed")
    with pytest.raises(fk.KafkaError) as ei:
        md.await_update(md.update_version, 1000)
    assert ei.value.code == 58
    md.close()
    assert md.is_closed()
    with pytest.raises(errors.KafkaClosedError):
        md.await_update(md.update_version, 1000)
    with pytest.raises(errors.IllegalStateError):
        md.update(md.request_version, resp(), False, T)


# ---- threads and the GIL ----------------------------------------------------------------

def test_await_update_woken_by_another_thread():
    md = producer()
    v = md.update_version
    result = {}

    def waiter():
        t0 = time.monotonic()
        md.await_update(v, 10_000)
        result["waited"] = time.monotonic() - t0

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.1)
    md.update(md.request_version, resp(), False, T)
    t.join(5)
    assert not t.is_alive()
    assert 0.05 < result["waited"] < 2


def test_await_update_times_out():
    md = producer()
    t0 = time.monotonic()
    with pytest.raises(fk.KafkaTimeoutError):
        md.await_update(md.update_version, 200)
    assert 0.15 < time.monotonic() - t0 < 2
    with pytest.raises(TimeoutError):
        md.await_update(md.update_version, 0)


def test_await_update_raises_after_close_from_other_thread():
    md = producer()
    caught = []

    def waiter():
        try:
            md.await_update(md.update_version, 10_000)
        except Exception as e:
            caught.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    md.close()
    t.join(5)
    assert len(caught) == 1 and isinstance(caught[0], errors.KafkaClosedError)


def test_await_update_releases_the_gil():
    md = producer()
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.02)
        before = counter[0]
        with pytest.raises(fk.KafkaTimeoutError):
            md.await_update(md.update_version, 300)
        ran = counter[0] - before
    finally:
        stop.set()
        t.join()
    # With the GIL held for 300 ms the spinner would barely move.
    assert ran > 10_000


# ---- leader epochs and stale leaders -----------------------------------------------------

@pytest.mark.parametrize("code", [NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH])
def test_leader_errors_mark_leader_unknown_and_request_update(code):
    md = producer()
    md.add("t", T)
    answered(md, topic("t", 2, leader=1, epoch=3))
    assert not md.update_requested()
    tp = fk.TopicPartition("t", 0)
    before = md.fetch()
    assert md.handle_partition_error(tp, code) is True
    c = md.fetch()
    assert c.leader_for(tp) is None
    assert c.leader_epoch_for(tp) == 3
    assert [p.partition for p in c.available_partitions_for_topic("t")] == [1]
    assert before.leader_for(tp).id == 1  # snapshots are immutable
    assert md.need_full_update
    # The refreshed answer names the new leader.
    answered(md, topic("t", 2, leader=0, epoch=4))
    assert md.fetch().leader_for(tp).id == 0


def test_non_metadata_errors_do_not_touch_leaders():
    md = producer()
    md.add("t", T)
    answered(md, topic("t", 1, leader=1))
    assert md.handle_partition_error(("t", 0), 87) is False  # INVALID_RECORD
    assert md.fetch().leader_for(("t", 0)).id == 1
    assert not md.update_requested()
    assert md.handle_partition_error(("t", 0), LEADER_NOT_AVAILABLE) is True
    assert md.update_requested()
    assert md.fetch().leader_for(("t", 0)).id == 1


def test_epoch_seen_elsewhere_makes_older_metadata_stale():
    md = fk.Metadata()
    md.update(0, resp(topic("t", 1, leader=0, epoch=2)), False, T)
    tp = fk.TopicPartition("t", 0)
    assert md.update_last_seen_epoch_if_newer(tp, 5) is True
    assert md.update_last_seen_epoch_if_newer(tp, 4) is False
    assert md.need_full_update
    md.update(0, resp(topic("t", 1, leader=1, epoch=3)), False, T + 1)
    assert md.fetch().leader_for(tp).id == 0  # epoch 3 < 5: ignored
    md.update(0, resp(topic("t", 1, leader=1, epoch=5)), False, T + 2)
    assert md.fetch().leader_for(tp).id == 1


def test_kip951_leader_hints_from_produce_or_fetch_answers():
    md = producer()
    md.add("t", T)
    answered(md, topic("t", 2, leader=0, epoch=5))
    v = md.update_version
    b2 = fk.Node(2, "b2", 9092)
    applied = md.update_partition_leadership(
        {fk.TopicPartition("t", 0): (2, 6), ("t", 1): (1, 5), ("gone", 0): (1, 9)}, [b2])
    assert applied == {fk.TopicPartition("t", 0)}
    c = md.fetch()
    assert c.leader_for(("t", 0)) == b2 and c.leader_epoch_for(("t", 0)) == 6
    assert c.leader_for(("t", 1)).id == 0
    assert md.update_version == v  # no metadata round trip, nothing to wake
    assert md.update_partition_leadership({("t", 1): (7, 9)}) == set()  # unknown node


# ---- idle expiry -----------------------------------------------------------------------------

def test_idle_topic_expires_and_leaves_cache_and_requests():
    md = producer(metadata_idle_ms=1_000)
    md.add("busy", T)
    md.add("idle", T)
    answered(md, topic("busy"), topic("idle"), now=T)
    assert md.fetch().topics == {"busy", "idle"}
    md.add("busy", T + 900)  # used again: expiry moves
    md.request_update()
    # At T+1000 "idle" has not been used for metadata_idle_ms: the answer
    # still names it, but it is not kept, and it is forgotten.
    names, _ = answered(md, topic("busy"), topic("idle"), now=T + 1_000)
    assert names == ["busy", "idle"]
    assert md.fetch().topics == {"busy"}
    assert set(md.topics) == {"busy"}
    md.request_update()
    assert md.new_metadata_request(T + 1_001)[0] == ["busy"]
    # Using it again makes it a new topic (partial update).
    md.add("idle", T + 2_000)
    assert md.new_topics == {"idle"}


# ---- invalid / unauthorized topics -------------------------------------------------------------

def test_topic_errors_surface_for_that_topic_only():
    md = producer()
    md.add("ok", T)
    md.add("secret", T)
    md.add("bad name", T)
    v = md.update_version
    answered(md, topic("ok"), topic("secret", error_code=TOPIC_AUTHORIZATION_FAILED),
             topic("bad name", error_code=INVALID_TOPIC_EXCEPTION))
    md.await_update(v, 0, topic="ok")
    with pytest.raises(errors.TopicAuthorizationFailedError):
        md.await_update(v, 0, topic="secret")
    with pytest.raises(errors.for_code(INVALID_TOPIC_EXCEPTION)):
        md.await_update(v, 0, topic="bad name")
    # Without a topic: any topic error of the answer.
    with pytest.raises(fk.KafkaError):
        md.await_update(v, 0)
    assert md.error_for_topic("ok") is None
    assert isinstance(md.error_for_topic("secret"), errors.TopicAuthorizationFailedError)
    with pytest.raises(errors.TopicAuthorizationFailedError):
        md.maybe_throw_exception_for_topic("secret")
    md.maybe_throw_exception_for_topic("ok")
    assert md.fetch().topics == {"ok"}


def test_unknown_topic_lands_in_no_cache():
    md = producer()
    md.add("missing", T)
    answered(md, topic("missing", error_code=UNKNOWN_TOPIC_OR_PARTITION))
    c = md.fetch()
    assert "missing" not in c.topics
    assert c.partitions_for_topic("missing") == []
    assert c.partition_count_for_topic("missing") is None
    # No spin: the next attempt waits a refresh backoff.
    md.request_update_for_topic("missing")
    assert md.time_to_next_update(T) == 100


def test_failed_updates_back_off_exponentially():
    md = fk.Metadata(refresh_backoff_ms=100, refresh_backoff_max_ms=1_000)
    md.update(0, resp(), False, T)
    md.request_update()
    waits = []
    for _ in range(8):
        md.failed_update(T)
        waits.append(md.time_to_next_update(T))
    assert md.failed_attempts == 8
    assert 80 <= waits[0] <= 120
    assert 160 <= waits[1] <= 240
    assert 320 <= waits[2] <= 480
    assert all(w <= 1_000 for w in waits)
    assert waits[-1] >= 800
    md.update(0, resp(), False, T)
    md.request_update()
    assert md.time_to_next_update(T) == 100


# ---- construction -----------------------------------------------------------------------------

def test_constructor_defaults_and_isinstance():
    md = fk.ProducerMetadata()
    assert isinstance(md, fk.Metadata)
    assert (md.refresh_backoff_ms, md.metadata_expire_ms, md.metadata_idle_ms) == (100, 300_000, 300_000)
    assert fk.metadata.ProducerMetadata is fk.ProducerMetadata
    assert not hasattr(fk.Metadata(), "add")
    assert "ProducerMetadata" in repr(md)


@pytest.mark.parametrize("key", ["refresh_backoff_ms", "metadata_expire_ms", "refresh_backoff_max_ms",
                                 "metadata_idle_ms"])
def test_invalid_values_name_the_key(key):
    for bad in (-1, "soon", 1.5, True):
        with pytest.raises(ValueError, match=key):
            fk.ProducerMetadata(**{key: bad})


def test_unknown_option_and_dotted_names():
    with pytest.raises(ValueError, match="linger"):
        fk.Metadata(linger_ms=5)
    with pytest.raises(ValueError, match="metadata_idle_ms"):
        fk.Metadata(metadata_idle_ms=5)  # a producer-only option
    md = fk.ProducerMetadata({"retry.backoff.ms": 7, "metadata.max.age.ms": 70,
                              "metadata.max.idle.ms": 700})
    assert (md.refresh_backoff_ms, md.metadata_expire_ms, md.metadata_idle_ms) == (7, 70, 700)
    md = fk.Metadata(config={"retry.backoff.max.ms": 5000})
    assert md.refresh_backoff_max_ms == 5000


def test_base_metadata_subscription():
    md = fk.Metadata()
    assert md.subscription is None
    md.set_subscription(["a", "b"])
    assert md.subscription == {"a", "b"}
    names, rv, partial = md.new_metadata_request(T)
    assert names == ["a", "b"] and not partial
    md.update(rv, resp(topic("a"), topic("other")), False, T)
    assert md.fetch().topics == {"a"}
    md.set_subscription(None)
    assert md.new_metadata_request(T)[0] is None
    with pytest.raises(errors.IllegalStateError):
        fk.ProducerMetadata().set_subscription(["a"])
