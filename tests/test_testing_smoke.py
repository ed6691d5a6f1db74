"""The test brokers work with a known-good client (confluent-kafka)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from ferrokafka.testing import EmbeddedBroker, MockCluster, api_versions

# Byte-exact round trip must cover empty, binary and non-UTF-8 payloads.
PAYLOADS = [b"", b"\x00\xff\x00", "h\u00e9llo".encode(), os.urandom(1000)] + [
    f"msg-{i}".encode() for i in range(46)
]


def _produce(ck, bs, topic, payloads, partition=None):
    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0, "message.timeout.ms": 10000})
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append(err)

    for i, v in enumerate(payloads):
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, value=v, key=str(i).encode(), on_delivery=cb, **kw)
    assert p.flush(15) == 0
    assert errors == []


def _consume_assigned(ck, bs, topic, n, partitions=(0,), timeout=15.0):
    # assign() rather than subscribe(): no group join, which Tansu does slowly.
    c = ck.Consumer({
        "bootstrap.servers": bs,
        "group.id": "smoke",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in partitions])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append(m)
    finally:
        c.close()
    return got


def test_embedded_broker_answers_api_versions(embedded_broker):
    host, port = embedded_broker.bootstrap_servers.rsplit(":", 1)
    versions = api_versions(host, int(port))
    assert versions[18][0] == 0  # ApiVersions
    assert 0 in versions and 1 in versions  # Produce, Fetch


def test_embedded_broker_produce_consume(embedded_broker, topic_name, confluent_kafka):
    ck = confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic

    bs = embedded_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    fs = admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])
    fs[topic_name].result(timeout=10)
    assert topic_name in admin.list_topics(timeout=10).topics

    _produce(ck, bs, topic_name, PAYLOADS, partition=0)
    got = _consume_assigned(ck, bs, topic_name, len(PAYLOADS))
    assert [m.value() or b"" for m in got] == PAYLOADS
    assert [m.key() for m in got] == [str(i).encode() for i in range(len(PAYLOADS))]
    assert [m.offset() for m in got] == list(range(len(PAYLOADS)))


def test_embedded_broker_stops_and_reports_start_failure(tmp_path):
    with EmbeddedBroker() as b:
        bs = b.bootstrap_servers
        assert b.is_running()
    assert not b.is_running()
    host, port = bs.rsplit(":", 1)
    with pytest.raises(OSError):
        api_versions(host, int(port), timeout=0.5)

    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho boom-from-fake-broker\nexit 3\n")
    fake.chmod(0o755)
    from ferrokafka.testing import BrokerStartError

    with pytest.raises(BrokerStartError, match="boom-from-fake-broker") as ei:
        EmbeddedBroker(binary=str(fake), startup_timeout=5)
    # A failed start keeps its log and says where it is.
    kept = str(ei.value).rsplit("broker log kept at ", 1)[1].rstrip(")")
    assert b"boom-from-fake-broker" in open(kept, "rb").read()
    shutil.rmtree(os.path.dirname(kept))


def test_embedded_broker_log_is_removed_on_close(tmp_path, monkeypatch):
    """The log lives in a private temporary directory that close() removes:
    runs leave nothing behind in the temp dir (issue 15)."""
    import tempfile

    # A temp dir of this test's own: the suite's other workers (pytest-xdist)
    # start brokers of their own in the shared one meanwhile.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    b = EmbeddedBroker()
    log_dir = os.path.dirname(b.log_path)
    assert os.path.isfile(b.log_path) and os.path.dirname(log_dir) == str(tmp_path)
    b.close()
    assert not os.path.exists(log_dir)
    assert os.listdir(tmp_path) == []


def test_tansu_build_id_matches_the_patch():
    """EmbeddedBroker runs the binary built from the patch in this tree:
    scripts/build-tansu.sh and _broker.TANSU_BUILD_ID must name the same build."""
    from ferrokafka.testing import _broker

    root = os.path.join(os.path.dirname(__file__), "..")
    out = subprocess.run(["bash", os.path.join(root, "scripts", "build-tansu.sh"), "--id"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == _broker.TANSU_BUILD_ID, "update TANSU_BUILD_ID after changing third_party/tansu/ (and rebuild)"


def test_mock_cluster_produce_consume(mock_cluster, topic_name, confluent_kafka):
    ck = confluent_kafka
    mock_cluster.create_topic(topic_name, 3, 2)
    bs = mock_cluster.bootstrap_servers
    assert len(bs.split(",")) == 3
    md = ck.admin.AdminClient({"bootstrap.servers": bs}).list_topics(timeout=5)
    assert sorted(md.brokers) == [1, 2, 3]
    assert len(md.topics[topic_name].partitions) == 3

    _produce(ck, bs, topic_name, PAYLOADS, partition=1)
    got = _consume_assigned(ck, bs, topic_name, len(PAYLOADS), partitions=(1,))
    assert [m.value() or b"" for m in got] == PAYLOADS


def test_mock_partition_leader_is_reported(mock_cluster, topic_name, confluent_kafka):
    mock_cluster.create_topic(topic_name, 2, 3)
    mock_cluster.set_partition_leader(topic_name, 0, 3)
    mock_cluster.set_partition_leader(topic_name, 1, 2)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": mock_cluster.bootstrap_servers})
    parts = admin.list_topics(topic_name, timeout=5).topics[topic_name].partitions
    assert parts[0].leader == 3 and parts[1].leader == 2


def test_mock_broker_down_then_up(mock_cluster, topic_name, confluent_kafka):
    ck = confluent_kafka
    mock_cluster.create_topic(topic_name, 1, 1)
    mock_cluster.set_partition_leader(topic_name, 0, 2)
    bs = mock_cluster.bootstrap_servers
    mock_cluster.set_broker_down(2)

    p = ck.Producer({"bootstrap.servers": bs, "linger.ms": 0, "message.timeout.ms": 1500})
    results = []
    p.produce(topic_name, b"x", partition=0, on_delivery=lambda e, m: results.append(e))
    p.flush(5)
    assert len(results) == 1 and results[0] is not None
    assert results[0].code() == ck.KafkaError._MSG_TIMED_OUT

    mock_cluster.set_broker_up(2)
    results.clear()
    p.produce(topic_name, b"y", partition=0, on_delivery=lambda e, m: results.append(e))
    assert p.flush(10) == 0
    assert results == [None]


def test_mock_pushed_errors_are_seen(mock_cluster, topic_name, confluent_kafka):
    ck = confluent_kafka
    mock_cluster.create_topic(topic_name, 1, 1)
    PRODUCE = 0
    # Non-retriable error surfaces to the client as-is.
    mock_cluster.push_request_errors(PRODUCE, [ck.KafkaError.INVALID_RECORD])  # (87)
    p = ck.Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "linger.ms": 0,
                     "message.timeout.ms": 5000})
    results = []
    cb = lambda e, m: results.append(e)  # noqa: E731
    p.produce(topic_name, b"a", partition=0, on_delivery=cb)
    p.flush(5)
    assert len(results) == 1 and results[0] is not None
    assert results[0].code() == ck.KafkaError.INVALID_RECORD

    # The error stack is consumed: the next produce goes through.
    results.clear()
    p.produce(topic_name, b"b", partition=0, on_delivery=cb)
    assert p.flush(5) == 0
    assert results == [None]


def test_mock_rtt_slows_requests(mock_cluster, topic_name, confluent_kafka):
    mock_cluster.create_topic(topic_name, 1, 1)
    mock_cluster.set_partition_leader(topic_name, 0, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "linger.ms": 0})
    p.produce(topic_name, b"warm", partition=0)
    assert p.flush(5) == 0
    mock_cluster.set_rtt(1, 400)
    t = time.monotonic()
    p.produce(topic_name, b"slow", partition=0)
    assert p.flush(5) == 0
    assert time.monotonic() - t >= 0.35


def test_mock_cluster_close_is_idempotent_and_guards_use():
    m = MockCluster(1)
    m.close()
    m.close()
    with pytest.raises(RuntimeError, match="closed"):
        m.create_topic("x")


@pytest.mark.parametrize("coordinator", [2, 3])
def test_mock_coordinator_is_used(mock_cluster, topic_name, confluent_kafka, coordinator):
    import json

    mock_cluster.create_topic(topic_name, 1, 1)
    group = f"g-{topic_name}"
    mock_cluster.set_coordinator(group, coordinator)
    stats = []
    c = confluent_kafka.Consumer({
        "bootstrap.servers": mock_cluster.bootstrap_servers, "group.id": group,
        "statistics.interval.ms": 100, "stats_cb": lambda s: stats.append(json.loads(s)),
    })
    try:
        c.subscribe([topic_name])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not (stats and "GroupCoordinator" in stats[-1]["brokers"]):
            c.poll(0.1)
    finally:
        c.close()
    brokers = stats[-1]["brokers"]
    # librdkafka reports the coordinator as a logical broker named after the real one.
    by_id = {b["nodeid"]: b["nodename"] for b in brokers.values() if b["source"] == "learned"}
    assert brokers["GroupCoordinator"]["nodename"] == by_id[coordinator]


def test_mock_cluster_missing_confluent_kafka_names_the_extra(monkeypatch):
    import sys

    from ferrokafka.testing import _mock

    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    monkeypatch.setattr(_mock, "_lib", None)
    monkeypatch.delenv("FERROKAFKA_LIBRDKAFKA", raising=False)
    with pytest.raises(ImportError, match=r"pip install ferrokafka\[testing\]"):
        MockCluster(1)


def test_embedded_broker_bad_tansu_bin_is_reported(monkeypatch, tmp_path):
    from ferrokafka.testing import BrokerStartError

    monkeypatch.setenv("TANSU_BIN", str(tmp_path / "nope"))
    with pytest.raises(BrokerStartError, match="TANSU_BIN"):
        EmbeddedBroker()
