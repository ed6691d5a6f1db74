"""Metadata (docs/semantics.md §3) driven by real answers: the producer's live
ProducerMetadata against Tansu and librdkafka's mock cluster."""

from __future__ import annotations

import threading
import time

import pytest

import ferrokafka as fk

PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6


def _until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_bootstrap_then_first_update_then_topics_appear(embedded_broker, confluent_kafka, topic_name):
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": embedded_broker.bootstrap_servers})
    for f in admin.create_topics([confluent_kafka.admin.NewTopic(topic_name, 2, 1)]).values():
        f.result(10)
    with fk.Producer(embedded_broker.bootstrap_servers) as p:
        md = p.metadata
        assert isinstance(md, fk.ProducerMetadata) and isinstance(md, fk.Metadata)
        # Bootstrap nodes only, no topics yet.
        assert topic_name not in md.fetch().topics
        assert p.partitions_for(topic_name) == [0, 1]
        cluster = md.fetch()
        assert topic_name in cluster.topics and topic_name in md.topics
        assert all(n.id >= 0 for n in cluster.nodes), "brokers of the answer, not bootstrap ids"
        assert md.last_successful_refresh_ms > 0 and not md.need_partial_update
        assert cluster.leader_for(fk.TopicPartition(topic_name, 0)) is not None


def test_await_update_wakes_another_thread_on_a_real_answer(embedded_broker):
    with fk.Producer(embedded_broker.bootstrap_servers) as p:
        md = p.metadata
        _until(lambda: md.update_version > 1)
        v = md.update_version
        woke = []
        t = threading.Thread(target=lambda: woke.append(md.await_update(v, 10_000)))
        t.start()
        md.request_update()  # the producer's network client answers it
        t.join(15)
        assert not t.is_alive() and md.update_version > v


def test_leader_move_is_followed_after_not_leader(mock_cluster):
    m = mock_cluster
    m.create_topic("moving", 1, 3)
    m.set_partition_leader("moving", 0, 1)
    tp = fk.TopicPartition("moving", 0)
    with fk.Producer(m.bootstrap_servers, retry_backoff_ms=20) as p:
        assert p.send("moving", b"a").result(10).offset == 0
        assert p.metadata.fetch().leader_for(tp).id == 1
        m.set_partition_leader("moving", 0, 3)
        # The old leader now answers NOT_LEADER_OR_FOLLOWER: the producer
        # refreshes, routes to broker 3 and the record still lands once.
        assert p.send("moving", b"b").result(15).offset == 1
        assert p.metadata.fetch().leader_for(tp).id == 3


def test_a_down_broker_is_routed_around(mock_cluster):
    m = mock_cluster
    m.create_topic("around", 2, 3)
    m.set_partition_leader("around", 0, 1)
    m.set_partition_leader("around", 1, 2)
    with fk.Producer(m.bootstrap_servers, request_timeout_ms=2000, retry_backoff_ms=20) as p:
        assert p.partitions_for("around") == [0, 1]
        m.set_broker_down(1)
        m.set_partition_leader("around", 0, 3)
        md = p.send("around", b"x", partition=0).result(20)
        assert md.offset >= 0
        assert p.metadata.fetch().leader_for(fk.TopicPartition("around", 0)).id == 3
        # The other partition's traffic was never affected.
        assert p.send("around", b"y", partition=1).result(10).offset >= 0


def test_unknown_topic_makes_no_refresh_storm(mock_cluster):
    """An unknown topic lands in no cache, and its refreshes are paced by the
    backoff (<= 1 per refresh_backoff_ms), not a spin."""
    m = mock_cluster
    # The mock auto-creates topics; make this one answer UNKNOWN_TOPIC_OR_PARTITION.
    m.set_topic_error("does-not-exist", 3)
    with fk.Producer(m.bootstrap_servers, max_block_ms=1500, retry_backoff_ms=100) as p:
        md = p.metadata
        _until(lambda: md.update_version > 1)
        v0 = md.update_version
        t0 = time.monotonic()
        f = p.send("does-not-exist", b"v")
        with pytest.raises(fk.KafkaTimeoutError):
            f.result(10)
        elapsed = time.monotonic() - t0
        updates = md.update_version - v0
        assert "does-not-exist" not in md.fetch().topics
        assert updates <= elapsed / 0.1 + 2, f"{updates} updates in {elapsed:.2f}s"
        assert updates >= 2, "the producer kept asking while it waited"


def test_list_topics_waits_for_an_answer_covering_all_topics(mock_cluster):
    """A consumer's first Metadata request asks for no topics; list_topics
    called while it is in flight must not take its answer for the list
    (docs/semantics.md §3.13; a Spark read once planned no partitions so).
    Every broker answers after 800 ms, so the first request is still in
    flight when list_topics asks for all topics."""
    METADATA = 3
    mock_cluster.create_topic("lt-visible", 2, 1)
    for b in mock_cluster.broker_ids:
        mock_cluster.set_rtt(b, 800)
    mock_cluster.start_request_tracking()
    with fk.Consumer(mock_cluster.bootstrap_servers) as c:
        assert _until(lambda: METADATA in mock_cluster.requests(), 10)
        assert c.list_topics(timeout_ms=20_000) == {"lt-visible": 2}
