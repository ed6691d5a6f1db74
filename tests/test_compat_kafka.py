"""ferrokafka.compat.kafka, the kafka-python facade, against the embedded broker.

Tests parametrized with ``lib`` run the same code against the facade and
against the real kafka-python (when installed), so both must behave alike;
the rest cover what only the facade has (option refusals, error mapping).
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import ferrokafka as fk
from ferrokafka.compat.kafka import _config
from ferrokafka.compat.kafka import errors as E

ROOT = Path(__file__).resolve().parent.parent


def _kafka_python():
    """The installed kafka-python, if it is the 3.x line the facade follows."""
    mod = pytest.importorskip("kafka")
    if int(mod.__version__.split(".")[0]) < 3:
        pytest.skip(f"the facade follows kafka-python 3.x; {mod.__version__} is installed")
    importlib.import_module("kafka.errors")
    return mod


@pytest.fixture(params=["ferrokafka", "kafka-python"])
def lib(request):
    """The kafka-python API: ours, or the real one as the reference."""
    if request.param == "ferrokafka":
        return importlib.import_module("ferrokafka.compat.kafka")
    return _kafka_python()


@pytest.fixture
def bs(embedded_broker):
    return embedded_broker.bootstrap_servers


def _produce(bs, topic, values, partitions=1):
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(topic, partitions, 1)])
    with fk.Producer(bs) as p:
        for i, v in enumerate(values):
            p.send(topic, v, partition=i % partitions)
        assert p.flush(10) == 0


# --- the kafka-python README, run unchanged on both --------------------------------

def test_readme_producer_json_send_get(lib, bs, topic_name):
    producer = lib.KafkaProducer(bootstrap_servers=bs,
                                 value_serializer=lambda v: json.dumps(v).encode("utf-8"))
    try:
        md = producer.send(topic_name, {"foo": "bar"}).get(timeout=10)
        assert (md.topic, md.offset) == (topic_name, 0)
        assert md.topic_partition == (topic_name, md.partition)
        assert md.serialized_value_size == len(b'{"foo": "bar"}')
        assert md.serialized_key_size == -1 and md.serialized_header_size == -1
        assert md.timestamp > 0
        md2 = producer.send(topic_name, key=b"foo", value={"n": 1},
                            headers=[("h", b"12")], partition=md.partition).get(timeout=10)
        assert md2.offset == 1 and md2.serialized_key_size == 3 and md2.serialized_header_size == 3
        fut = producer.send(topic_name, {"n": 2})
        producer.flush()
        assert fut.is_done and fut.succeeded() and not fut.failed()
        assert fut.value.topic == topic_name and fut.exception is None
        assert md.partition in producer.partitions_for(topic_name)
    finally:
        producer.close()


def test_readme_producer_variants(lib, bs, topic_name):
    """The producer snippets of kafka-python's README, one after the other."""
    producer = lib.KafkaProducer(bootstrap_servers=bs, compression_type="gzip", retries=5)
    try:
        for _ in range(3):
            producer.send(topic_name, b"some_message_bytes")
        producer.send(topic_name, key=b"foo", value=b"bar")
        producer.send(topic_name, value=b"c29tZSB2YWx1ZQ==", headers=[("content-encoding", b"base64")])
        md = producer.send(topic_name, b"some_message_bytes").get(timeout=10)
        producer.flush()
        assert md.offset >= 0
        assert isinstance(producer.metrics(), dict)
    finally:
        producer.close()
    consumer = lib.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", consumer_timeout_ms=1500)
    try:
        consumer.subscribe(pattern=f"^{topic_name}.*")
        got = [(r.key, r.value, r.headers) for r in consumer]
        assert (b"foo", b"bar", []) in got
        assert (None, b"c29tZSB2YWx1ZQ==", [("content-encoding", b"base64")]) in got
        assert len(got) == 6
    finally:
        consumer.close()


def test_send_argument_checks_match(lib, bs, topic_name):
    producer = lib.KafkaProducer(bootstrap_servers=bs)
    try:
        with pytest.raises(ValueError):
            producer.send(topic_name)  # neither key nor value
        with pytest.raises(TypeError):
            producer.send(topic_name, b"v", headers={"h": b"x"})
        with pytest.raises(TypeError):
            producer.send(topic_name, b"v", headers=[("h", "not bytes")])
        with pytest.raises(TypeError):
            producer.send(topic_name, "a str value without a serializer")
        with pytest.raises(ValueError):
            producer.send("bad topic name!", b"v")
        producer.send(topic_name, b"v").get(timeout=10)
        with pytest.raises(ValueError):
            producer.send(topic_name, b"v", partition=99)
    finally:
        producer.close()
    with pytest.raises(lib.errors.IllegalStateError):
        producer.send(topic_name, b"v")


def test_callbacks_run_without_polling(lib, bs, topic_name):
    producer = lib.KafkaProducer(bootstrap_servers=bs)
    try:
        got = threading.Event()
        seen = []
        fut = producer.send(topic_name, b"v")
        fut.add_callback(lambda md, tag: (seen.append((tag, md.offset)), got.set()), tag="t")
        # kafka-python's callbacks run in its I/O thread: no flush/get needed.
        assert got.wait(10)
        assert seen == [("t", 0)]
        late = []
        fut.add_callback(late.append)  # already done: runs at once
        assert late and late[0].offset == 0
        errs = []
        fut.add_errback(errs.append)
        assert errs == []
    finally:
        producer.close()


def test_errback_on_failing_send(lib, topic_name):
    """A record that cannot be delivered (its broker gone) fails its future
    after delivery_timeout_ms: errbacks run, get() raises KafkaTimeoutError."""
    from ferrokafka.testing import EmbeddedBroker

    with EmbeddedBroker() as broker:
        producer = lib.KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=0,
                                     request_timeout_ms=1000, delivery_timeout_ms=2000,
                                     max_block_ms=2000, retry_backoff_ms=50)
        try:
            producer.send(topic_name, b"first").get(timeout=10)
            broker.stop()
            errs, oks = [], []
            done = threading.Event()
            try:
                fut = producer.send(topic_name, b"lost")
            except lib.errors.KafkaTimeoutError:
                pytest.fail("send() raised instead of failing the future")
            fut.add_callback(oks.append).add_errback(lambda e: (errs.append(e), done.set()))
            assert done.wait(30), "errback never ran"
            assert fut.failed() and not fut.succeeded() and oks == []
            assert isinstance(errs[0], lib.errors.KafkaTimeoutError)
            assert fut.exception is errs[0]
            with pytest.raises(lib.errors.KafkaTimeoutError):
                fut.get(timeout=1)
        finally:
            producer.close(timeout=2)


def test_consumer_iteration_stops_after_consumer_timeout_ms(lib, bs, topic_name):
    _produce(bs, topic_name, [b"a", b"b", b"c"])
    consumer = lib.KafkaConsumer(topic_name, bootstrap_servers=bs, auto_offset_reset="earliest",
                                 consumer_timeout_ms=1500, value_deserializer=lambda b: b.decode())
    try:
        t0 = time.monotonic()
        records = [msg for msg in consumer]
        elapsed = time.monotonic() - t0
        assert [r.value for r in records] == ["a", "b", "c"]
        assert [r.offset for r in records] == [0, 1, 2]
        r = records[0]
        assert (r.topic, r.partition, r.key, r.headers, r.timestamp_type) == (topic_name, 0, None, [], 0)
        assert r.serialized_value_size == 1 and r.serialized_key_size == -1
        assert 1.4 <= elapsed < 15
        assert consumer.subscription() == {topic_name}
        assert consumer.assignment() == {lib.TopicPartition(topic_name, 0)}
    finally:
        consumer.close()


def test_poll_dict_shape_and_max_records(lib, bs, topic_name):
    _produce(bs, topic_name, [b"%d" % i for i in range(6)], partitions=2)
    consumer = lib.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest")
    try:
        tps = [lib.TopicPartition(topic_name, 0), lib.TopicPartition(topic_name, 1)]
        consumer.assign(tps)
        assert consumer.assignment() == set(tps)
        got = {}
        deadline = time.monotonic() + 15
        while sum(len(v) for v in got.values()) < 6 and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=500, max_records=2)
            assert isinstance(batch, dict)
            assert sum(len(v) for v in batch.values()) <= 2
            for tp, recs in batch.items():
                assert isinstance(tp, lib.TopicPartition)
                assert all(r.topic == tp.topic and r.partition == tp.partition for r in recs)
                got.setdefault(tp, []).extend(recs)
        assert {tp: [r.value for r in v] for tp, v in got.items()} == {
            tps[0]: [b"0", b"2", b"4"], tps[1]: [b"1", b"3", b"5"]}
        assert consumer.poll(timeout_ms=0) == {}
        with pytest.raises(ValueError):
            consumer.poll(timeout_ms=-1)
        with pytest.raises(ValueError):
            consumer.poll(max_records=0)
    finally:
        consumer.close()
    with pytest.raises(lib.errors.IllegalStateError):
        consumer.poll()


def test_seek_to_beginning_end_and_position(lib, bs, topic_name):
    _produce(bs, topic_name, [b"a", b"b", b"c", b"d"])
    tp = lib.TopicPartition(topic_name, 0)
    consumer = lib.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest")
    try:
        with pytest.raises(ValueError):
            consumer.seek_to_beginning()  # nothing assigned
        consumer.assign([tp])
        consumer.seek_to_end()
        assert consumer.position(tp) == 4
        assert consumer.poll(timeout_ms=300) == {}
        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        consumer.seek(tp, 2)
        recs = []
        deadline = time.monotonic() + 10
        while len(recs) < 2 and time.monotonic() < deadline:
            recs += consumer.poll(timeout_ms=500).get(tp, [])
        assert [r.value for r in recs] == [b"c", b"d"]
        assert consumer.position(tp) == 4
        assert consumer.highwater(tp) == 4  # from the last fetch
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 4}
        found = consumer.offsets_for_times({tp: 0})[tp]
        assert found.offset == 0 and found.timestamp > 0
        assert consumer.offsets_for_times({tp: 2**62}) == {tp: None}
        with pytest.raises(TypeError):
            consumer.seek((topic_name, 0), 1)
        with pytest.raises(ValueError):
            consumer.seek(tp, -1)
        with pytest.raises(ValueError):
            consumer.seek(lib.TopicPartition(topic_name, 5), 0)
        with pytest.raises(ValueError):
            consumer.seek_to_end(lib.TopicPartition("other", 0))
        consumer.pause(tp)
        assert consumer.paused() == {tp}
        consumer.resume(tp)
        assert consumer.paused() == set()
    finally:
        consumer.close()


def test_commit_and_committed(lib, bs, topic_name):
    _produce(bs, topic_name, [b"a", b"b", b"c"])
    tp = lib.TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"
    consumer = lib.KafkaConsumer(bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                                 enable_auto_commit=False)
    try:
        consumer.assign([tp])
        assert consumer.committed(tp) is None
        first = next(iter(consumer))
        assert first.offset == 0
        # Iteration hands out one record at a time: the position (what a
        # commit of "everything consumed" commits) is just past it.
        consumer.commit()
        assert consumer.committed(tp) == 1
        consumer.commit({tp: lib.OffsetAndMetadata(3, "meta", -1)})
        assert consumer.committed(tp) == 3
        om = consumer.committed(tp, metadata=True)
        # The commit's metadata comes back (the embedded broker keeps it since
        # our Tansu patch), through our facade and kafka-python alike.
        assert om.offset == 3 and om.metadata == "meta", om
        called = []
        fut = consumer.commit_async({tp: lib.OffsetAndMetadata(2, "", -1)},
                                    callback=lambda offsets, resp: called.append(offsets))
        deadline = time.monotonic() + 10
        while not called and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        assert called == [{tp: lib.OffsetAndMetadata(2, "", -1)}]
        assert fut.is_done and fut.succeeded()
        assert consumer.committed(tp) == 2
        with pytest.raises(TypeError):
            consumer.committed((topic_name, 0))
        gm = consumer.group_metadata()
        assert isinstance(gm, lib.ConsumerGroupMetadata) and gm.group_id == group
    finally:
        consumer.close()
    groupless = lib.KafkaConsumer(bootstrap_servers=bs)
    try:
        assert groupless.group_metadata().group_id is None
        with pytest.raises(lib.errors.IllegalStateError):
            groupless.commit()
        with pytest.raises(lib.errors.IllegalStateError):
            groupless.committed(tp)
    finally:
        groupless.close()


def test_subscribe_with_listener_in_a_group(lib, bs, topic_name):
    _produce(bs, topic_name, [b"x"])

    class Listener(lib.ConsumerRebalanceListener):
        def __init__(self):
            self.assigned, self.revoked = [], []

        def on_partitions_assigned(self, assigned):
            self.assigned.append(set(assigned))

        def on_partitions_revoked(self, revoked):
            self.revoked.append(set(revoked))

    listener = Listener()
    consumer = lib.KafkaConsumer(bootstrap_servers=bs, group_id=f"g-{topic_name}", auto_offset_reset="earliest")
    try:
        with pytest.raises(TypeError):
            consumer.subscribe([topic_name], listener=object())
        consumer.subscribe([topic_name], listener=listener)
        recs = {}
        deadline = time.monotonic() + 30
        while not recs and time.monotonic() < deadline:
            recs = consumer.poll(timeout_ms=500)
        assert [r.value for v in recs.values() for r in v] == [b"x"]
        assert {lib.TopicPartition(topic_name, 0)} in listener.assigned
        with pytest.raises(lib.errors.IllegalStateError):
            consumer.assign([lib.TopicPartition(topic_name, 0)])
        assert topic_name in consumer.topics()
        assert consumer.partitions_for_topic(topic_name) == {0}
    finally:
        consumer.close()


def test_subscribe_pattern_without_group_takes_every_partition(lib, bs, topic_name):
    """No group_id: kafka-python assigns all partitions of the matching topics
    to the consumer itself (re.match: anchored at the start only)."""
    _produce(bs, topic_name + "-a", [b"1"], partitions=2)
    _produce(bs, topic_name + "-b", [b"2"])
    consumer = lib.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest")
    try:
        consumer.subscribe(pattern=topic_name.replace("-", "[-]"))
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 2 and time.monotonic() < deadline:
            got += [r.value for v in consumer.poll(timeout_ms=500).values() for r in v]
        assert sorted(got) == [b"1", b"2"]
        assert consumer.assignment() == {lib.TopicPartition(topic_name + "-a", 0),
                                         lib.TopicPartition(topic_name + "-a", 1),
                                         lib.TopicPartition(topic_name + "-b", 0)}
        assert consumer.subscription() == {topic_name + "-a", topic_name + "-b"}
        with pytest.raises(lib.errors.IllegalStateError):
            consumer.subscribe(topics=[topic_name], pattern="x")
    finally:
        consumer.close()


def test_subscribe_pattern_in_a_group_matches_from_the_start(lib, bs, topic_name):
    """kafka-python matches a pattern with re.match: a prefix pattern with
    no trailing .* still takes the longer names."""
    _produce(bs, topic_name + "-x", [b"x"])
    consumer = lib.KafkaConsumer(bootstrap_servers=bs, group_id=f"g-{topic_name}", auto_offset_reset="earliest")
    try:
        consumer.subscribe(pattern=topic_name)
        got = {}
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=500)
        assert [r.value for v in got.values() for r in v] == [b"x"]
        assert consumer.assignment() == {lib.TopicPartition(topic_name + "-x", 0)}
    finally:
        consumer.close()


def test_metrics_enabled_false_gives_none(lib, bs):
    producer = lib.KafkaProducer(bootstrap_servers=bs, metrics_enabled=False)
    try:
        assert producer.metrics() is None
    finally:
        producer.close()


@pytest.mark.parametrize("client", ["KafkaProducer", "KafkaConsumer", "KafkaAdminClient"])
def test_no_broker_fails_fast_with_a_timeout_error(lib, client):
    """Both bootstrap in the constructor and give up after bootstrap_timeout_ms."""
    t0 = time.monotonic()
    with pytest.raises(lib.errors.KafkaTimeoutError):
        getattr(lib, client)(bootstrap_servers="127.0.0.1:1", bootstrap_timeout_ms=1000)
    assert time.monotonic() - t0 < 10


def test_unknown_option_is_refused_like_kafka_python(lib):
    with pytest.raises((ValueError, lib.errors.KafkaConfigurationError), match="Unrecognized configs"):
        lib.KafkaProducer(bootstrap_servers="127.0.0.1:1", no_such_option=1)
    with pytest.raises(lib.errors.KafkaConfigurationError, match="Unrecognized configs"):
        lib.KafkaConsumer(bootstrap_servers="127.0.0.1:1", linger_ms=5)


# --- facade only ----------------------------------------------------------------------

def test_admin_client(bs, topic_name):
    from ferrokafka.compat.kafka import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        out = admin.create_topics([NewTopic(topic_name, 2, 1)])
        assert out == {"topics": [{"name": topic_name, "error_code": 0, "error_message": None}]}
        assert topic_name in admin.list_topics()
        with pytest.raises(E.TopicAlreadyExistsError) as ei:
            admin.create_topics({topic_name: {"num_partitions": 1}})
        assert ei.value.errno == 36 and isinstance(ei.value, fk.errors.TopicAlreadyExistsError)
        again = admin.create_topics([topic_name], raise_errors=False)
        assert again["topics"][0]["error_code"] == 36
        cluster = admin.describe_cluster()
        assert cluster["brokers"] and {"broker_id", "host", "port", "rack"} <= set(cluster["brokers"][0])
        assert cluster["controller_id"] in {b["broker_id"] for b in cluster["brokers"]}
        with pytest.raises(NotImplementedError, match="describe_acls"):
            admin.describe_acls(None)
        with pytest.raises(NotImplementedError, match="replica assignments"):
            admin.create_topics([NewTopic(topic_name + "x", 1, 1, replica_assignments={0: [1]})])
        assert admin.delete_topics([topic_name])["topics"][0]["error_code"] == 0
    finally:
        admin.close()


def test_admin_group_listing(bs, topic_name):
    from ferrokafka.compat.kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

    _produce(bs, topic_name, [b"a"])
    group = f"g-{topic_name}"
    c = KafkaConsumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False)
    c.assign([TopicPartition(topic_name, 0)])
    c.commit({TopicPartition(topic_name, 0): _oam(1)})
    c.close()
    with KafkaAdminClient(bootstrap_servers=bs) as admin:
        assert group in {g["group_id"] for g in admin.list_groups()}
        assert (group, "consumer") in admin.list_consumer_groups()
        offsets = admin.list_group_offsets(group)[group]
        assert offsets[TopicPartition(topic_name, 0)].offset == 1
        assert admin.list_consumer_group_offsets(group)[TopicPartition(topic_name, 0)].offset == 1


def _oam(offset):
    from ferrokafka.compat.kafka import OffsetAndMetadata

    return OffsetAndMetadata(offset, "", -1)


@pytest.mark.parametrize("key, value, why", [
    ("api_version", (0, 10), "message format v2"),
    ("ssl_context", object(), "SSLContext"),
    ("sasl_mechanism", "GSSAPI", "Kerberos"),
    ("proxy_url", "http://proxy:1", "proxy"),
    ("metric_reporters", [object], "reporters"),
    ("allow_auto_create_topics", False, "always lets the broker create"),
    ("partitioner", type("P", (), {"partition": lambda self: 0})(), "Partitioner object"),
])
def test_options_that_cannot_be_honoured_are_refused(key, value, why):
    from ferrokafka.compat.kafka import KafkaProducer

    with pytest.raises(ValueError, match=key) as ei:
        KafkaProducer(bootstrap_servers="127.0.0.1:1", **{key: value})
    assert why in str(ei.value)
    assert isinstance(ei.value, E.KafkaConfigurationError)


def test_option_table_covers_kafka_python_and_maps_units():
    kafka = _kafka_python()
    for client, cls in (("P", kafka.KafkaProducer), ("C", kafka.KafkaConsumer), ("A", kafka.KafkaAdminClient)):
        ours = {n for (n, c) in _config.TABLE if c == client}
        assert ours == set(cls.DEFAULT_CONFIG), client
    native, facade = _config.split_config("P", {"acks": 1, "retries": float("inf"), "compression_type": None,
                                                "bootstrap_servers": "h1,h2:9093"})
    assert native["acks"] == "1" and native["retries"] == 2**31 - 1
    assert native["bootstrap_servers"] == ["h1:9092", "h2:9093"]
    assert native["compression_type"] == "none"  # kafka-python's None
    assert native["linger_ms"] == 0  # kafka-python's default, not ferrokafka's 5
    native, _ = _config.split_config("C", {"auto_offset_reset": "smallest", "group_id": "g",
                                           "partition_assignment_strategy": ["roundrobin"]})
    assert native["auto_offset_reset"] == "earliest"
    assert native["partition_assignment_strategy"] == ("roundrobin",)
    native, _ = _config.split_config("C", {"enable_auto_commit": True})  # no group: dropped, as kafka-python
    assert "enable_auto_commit" not in native
    with pytest.raises(ValueError, match="fetch_max_wait_ms"):
        _config.split_config("C", {"fetch_max_wait_ms": 40000})


def test_error_classes_match_kafka_python():
    kerr = _kafka_python().errors
    for code, cls in kerr.kafka_errors.items():
        if code is None:
            continue
        ours = E.for_code(code)
        assert ours.__name__ == cls.__name__, code
        assert ours.errno == code and ours.retriable == cls.retriable, code
        assert ours.invalid_metadata == cls.invalid_metadata, code
    for name in ("CommitFailedError", "IllegalStateError", "KafkaTimeoutError", "KafkaConnectionError",
                 "UnsupportedVersionError", "NoError", "BrokerResponseError", "RetriableError"):
        assert hasattr(E, name)


def test_poll_update_offsets_false_and_close_refusal(bs, topic_name):
    from ferrokafka.compat.kafka import KafkaConsumer, TopicPartition

    _produce(bs, topic_name, [b"a", b"b"])
    tp = TopicPartition(topic_name, 0)
    c = KafkaConsumer(bootstrap_servers=bs, group_id=f"g-{topic_name}", auto_offset_reset="earliest")
    try:
        c.assign([tp])
        first = {}
        deadline = time.monotonic() + 10
        while not first and time.monotonic() < deadline:
            first = c.poll(timeout_ms=500, update_offsets=False)
        assert [r.offset for r in first[tp]] == [0, 1]
        assert c.position(tp) == 0  # not moved: the records come again
        m = c.metrics()
        assert set(m) == {"consumer-metrics"}
        assert m["consumer-metrics"]["records-consumed-total"] >= 2
        with pytest.raises(NotImplementedError, match="autocommit=False"):
            c.close(autocommit=False)  # auto-commit is on: the native close commits
    finally:
        c.close()


def test_producer_metrics_shape(bs):
    from ferrokafka.compat.kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bs)
    try:
        m = p.metrics()
        assert set(m) == {"producer-metrics"} and "records_sent" in m["producer-metrics"]
        with pytest.raises(NotImplementedError):
            p.metrics(raw=True)
    finally:
        p.close()


def test_native_errors_are_translated():
    native = fk.errors.for_code(6)("leader moved", code=6)
    out = E.translate(native)
    assert type(out) is E.NotLeaderForPartitionError
    assert isinstance(out, fk.errors.NotLeaderOrFollowerError)  # native handlers still catch it
    assert out.errno == 6 and out.retriable and out.invalid_metadata
    assert str(out) == "[Error 6] NotLeaderForPartitionError: leader moved"
    assert type(E.translate(fk.KafkaTimeoutError("t"))) is E.KafkaTimeoutError
    assert isinstance(E.translate(fk.KafkaTimeoutError("t")), TimeoutError)
    assert type(E.translate(fk.errors.for_code(-195)("x", code=-195))) is E.KafkaConnectionError
    assert issubclass(E.NoBrokersAvailable, E.KafkaTimeoutError)
    assert str(E.CommitFailedError()).startswith("CommitFailedError: Commit cannot be completed")


def test_commit_after_rebalance_is_commit_failed_error():
    from ferrokafka.compat.kafka.consumer import _commit_error

    for code in (22, 25, 27):
        assert type(_commit_error(fk.errors.for_code(code)("gone", code=code))) is E.CommitFailedError
    assert type(_commit_error(fk.errors.for_code(29)("no", code=29))) is E.TopicAuthorizationFailedError


def test_errback_on_broker_error_mock_cluster(mock_cluster, topic_name):
    from ferrokafka.compat.kafka import KafkaProducer

    mock_cluster.create_topic(topic_name, 1, 1)
    mock_cluster.push_request_errors(0, [29])  # Produce: TOPIC_AUTHORIZATION_FAILED
    producer = KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers)
    try:
        errs = []
        fut = producer.send(topic_name, b"x").add_errback(errs.append)
        with pytest.raises(E.TopicAuthorizationFailedError) as ei:
            fut.get(timeout=10)
        assert isinstance(ei.value, E.AuthorizationError) and ei.value.errno == 29
        deadline = time.monotonic() + 5
        while not errs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert errs == [ei.value]
    finally:
        producer.close()


def test_native_commit_takes_a_timeout(mock_cluster, topic_name):
    """ferrokafka.Consumer.commit(timeout_ms=...) bounds a synchronous
    commit (kafka-python's commit(timeout_ms) relies on it)."""
    mock_cluster.create_topic(topic_name, 1, 1)
    c = fk.Consumer(mock_cluster.bootstrap_servers, group_id=f"g-{topic_name}", enable_auto_commit=False)
    try:
        c.assign([fk.TopicPartition(topic_name, 0)])
        for b in (1, 2, 3):
            mock_cluster.set_broker_down(b)
        t0 = time.monotonic()
        with pytest.raises(fk.KafkaError):
            c.commit({fk.TopicPartition(topic_name, 0): 1}, timeout_ms=1000)
        assert time.monotonic() - t0 < 10
    finally:
        c.close(timeout_ms=1000)


def test_doc_is_current():
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-compat-kafka-doc.py"), "--check"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_migration_example_runs(bs):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "migrate_kafka_python.py"), "--bootstrap", bs],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "quantity ordered: 15" in out.stdout
    assert "partition 0 again: ['order-1'" in out.stdout
