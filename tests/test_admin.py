"""fk.Admin on Tansu and on the 3-broker mock cluster (controller routing,
retried errors), and group offsets read back as confluent-kafka committed them."""

from __future__ import annotations

import time

import pytest

import ferrokafka as fk

TP = fk.TopicPartition
CREATE_TOPICS, DELETE_TOPICS = 19, 20


def test_create_list_describe_delete(embedded_broker, topic_name):
    a = fk.Admin(embedded_broker.bootstrap_servers)
    assert a.create_topics([fk.NewTopic(topic_name, 3, 1)]) == {topic_name: None}
    assert a.list_topics()[topic_name] == 3
    with pytest.raises(fk.errors.TopicAlreadyExistsError) as ei:
        a.create_topics([fk.NewTopic(topic_name, 3, 1), fk.NewTopic(topic_name + "-b", 2, 1)])
    assert set(ei.value.errors) == {topic_name}  # the other topic was created
    assert a.list_topics()[topic_name + "-b"] == 2
    d = a.describe_cluster()
    assert d.nodes and d.nodes[0].port == embedded_broker.port
    assert d.cluster_id
    assert a.delete_topics([topic_name, topic_name + "-b"]) == {topic_name: None, topic_name + "-b": None}
    deadline = time.time() + 10
    while topic_name in a.list_topics() and time.time() < deadline:
        time.sleep(0.2)
    assert topic_name not in a.list_topics()
    a.close()


def test_per_topic_errors_without_raising(embedded_broker, topic_name):
    with fk.Admin({"bootstrap.servers": embedded_broker.bootstrap_servers}) as a:
        a.create_topics([fk.NewTopic(topic_name, 1, 1)])
        r = a.create_topics([fk.NewTopic(topic_name, 1, 1)], raise_on_error=False)
        assert isinstance(r[topic_name], fk.errors.TopicAlreadyExistsError)
        r = a.delete_topics(["no-such-topic-" + topic_name], raise_on_error=False)
        assert isinstance(next(iter(r.values())), fk.KafkaError)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_partitions"):
        fk.NewTopic("t", 0, 1)
    with pytest.raises(ValueError, match="replication_factor"):
        fk.NewTopic("t", 1, 0)
    with pytest.raises(ValueError, match="request_timeout_ms"):
        fk.Admin("localhost:1", request_timeout_ms="soon")
    with pytest.raises(ValueError, match="NewTopic"):
        fk.Admin("localhost:1").create_topics(["t"])


def test_three_broker_cluster_on_mock(mock_cluster, topic_name):
    """Describe and list across three brokers. (librdkafka's mock answers
    neither CreateTopics nor DeleteTopics, so controller routing with injected
    NOT_CONTROLLER cannot be exercised there; see the Rust unit tests.)"""
    mock_cluster.create_topic(topic_name, 4, 2)
    with fk.Admin(mock_cluster.bootstrap_servers, retry_backoff_ms=20) as a:
        d = a.describe_cluster()
        # the mock reports no controller (-1): requests then go to a broker
        # of the metadata, as the Java client's fallback does
        assert sorted(n.id for n in d.nodes) == [1, 2, 3]
        assert d.controller is None or d.controller in d.nodes
        assert a.list_topics()[topic_name] == 4
        with pytest.raises(fk.UnsupportedVersionError):
            a.create_topics([fk.NewTopic(topic_name + "-x", 1, 1)], timeout_ms=5000)


def test_group_listing_and_offsets_match_confluent(embedded_broker, confluent_kafka, topic_name):
    bs = embedded_broker.bootstrap_servers
    group = f"g-{topic_name}"
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(topic_name, 2, 1)])
        c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[confluent_kafka.TopicPartition(topic_name, 0, 11),
                          confluent_kafka.TopicPartition(topic_name, 1, 22)], asynchronous=False)
        c.close()
        assert a.list_consumer_group_offsets(group) == {TP(topic_name, 0): 11, TP(topic_name, 1): 22}
        # the group shows up in the listing (Tansu 0.6.0 lists groups it keeps
        # offsets for; a live member without commits is not listed there)
        listing = {g.group_id: g for g in a.list_consumer_groups()}
        assert group in listing


def test_unreachable_cluster_times_out_with_reason():
    with fk.Admin("127.0.0.1:1", request_timeout_ms=500, reconnect_backoff_ms=50) as a:
        t0 = time.time()
        with pytest.raises(fk.KafkaTimeoutError, match="connection|refused"):
            a.list_topics(timeout_ms=1500)
        assert time.time() - t0 < 10
