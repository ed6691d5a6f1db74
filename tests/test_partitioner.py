"""The named partitioners (chosen in Rust from the ``partitioner`` option)
against librdkafka's, through confluent-kafka on the embedded broker, and
the partition count they use following the producer's metadata."""

from __future__ import annotations

import time
import uuid
import zlib

import pytest

import ferrokafka as fk

try:  # the fixture `confluent_kafka` fails the test in CI when it is missing
    from confluent_kafka import Producer as CkProducer
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError:  # pragma: no cover
    pass

N = 7
KEYS = [b"a", b"hello", "ключ".encode(), bytes(range(256)), b"x" * 1000] + [f"key-{i}".encode() for i in range(60)]


@pytest.fixture
def bs(embedded_broker, confluent_kafka):
    return embedded_broker.bootstrap_servers


def _topic(bs: str, partitions: int, name: str | None = None) -> str:
    name = name or f"pt-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bs})  # must outlive its futures
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(10)
    return name


def _librdkafka_partitions(bs: str, topic: str, partitioner: str, keys: list) -> list:
    out: dict = {}
    ck = CkProducer({"bootstrap.servers": bs, "partitioner": partitioner, "linger.ms": 5})
    for i, k in enumerate(keys):
        ck.produce(topic, b"v", key=k, on_delivery=lambda e, m, i=i: out.__setitem__(i, (e, m.partition())))
    assert ck.flush(20) == 0
    assert all(e is None for e, _ in out.values()), out
    return [out[i][1] for i in range(len(keys))]


def _our_partitions(bs: str, topic: str, partitioner: str, keys: list) -> list:
    with fk.Producer(bs, partitioner=partitioner) as p:
        futs = [p.send(topic, b"v", key=k) for k in keys]
        assert p.flush(20) == 0
        return [f.result(0).partition for f in futs]


# The keys each name places deterministically in librdkafka: the *_random
# names leave null keys (consistent_random also empty ones) to a sticky or
# random choice, and ferrokafka's "murmur2" (the API's default) follows Java
# there, so only their non-null keys are compared.
DETERMINISTIC = {
    "murmur2": KEYS + [b""],
    "murmur2_random": KEYS + [b""],
    "consistent": KEYS + [b"", None],
    "consistent_random": KEYS,
    "fnv1a": KEYS + [b"", None],
    "fnv1a_random": KEYS + [b""],
}


@pytest.mark.parametrize("name", sorted(DETERMINISTIC))
def test_named_partitioner_places_keys_as_librdkafka(bs, name):
    assert name in fk._core.partitioner_names()
    topic = _topic(bs, N)
    keys = DETERMINISTIC[name]
    expected = _librdkafka_partitions(bs, topic, name, keys)
    assert len(set(expected)) > 3, "the keys must exercise the hash"
    assert _our_partitions(bs, topic, name, keys) == expected


def test_the_named_hashes_differ_so_the_comparison_means_something(bs):
    topic = _topic(bs, N)
    got = {name: tuple(_our_partitions(bs, topic, name, KEYS)) for name in ("murmur2", "consistent", "fnv1a")}
    assert len(set(got.values())) == 3
    assert list(got["consistent"]) == [zlib.crc32(k) % N for k in KEYS]


@pytest.mark.parametrize("name", ["murmur2", "murmur2_random", "consistent_random", "fnv1a_random", "random"])
def test_unkeyed_records_of_random_names_are_sticky(bs, name):
    """As librdkafka with its default sticky.partitioning.linger.ms: runs of
    about batch_size bytes on one partition, then another one."""
    topic = _topic(bs, 4)
    key = b"" if name == "consistent_random" else None
    with fk.Producer(bs, partitioner=name, batch_size=1024, linger_ms=1000) as p:
        futs = [p.send(topic, b"x" * 100, key=key) for _ in range(200)]
        assert p.flush(20) == 0
        parts = [f.result(0).partition for f in futs]
    runs = sum(1 for a, b in zip(parts, parts[1:]) if a != b)
    assert 5 <= runs <= 60, parts
    assert len(set(parts)) == 4


def test_random_spreads_a_key_and_round_robin_cycles(bs):
    topic = _topic(bs, 4)
    with fk.Producer(bs, partitioner="random") as p:
        parts = {p.send(topic, b"v", key=b"same").result(10).partition for _ in range(60)}
    assert parts == {0, 1, 2, 3}
    with fk.Producer(bs, partitioner="round_robin") as p:
        futs = [p.send(topic, b"v", key=b"same" if i % 2 else None) for i in range(8)]
        assert p.flush(20) == 0
        assert [f.result(0).partition for f in futs] == [0, 1, 2, 3, 0, 1, 2, 3]


def test_unknown_partitioner_names_are_refused_with_the_accepted_list():
    with pytest.raises(ValueError, match="partitioner.*fnv1a"):
        fk.Producer("127.0.0.1:1", partitioner="crc32")


def _grow_topic(bs: str, topic: str, partitions: int) -> None:
    """Tansu has no CreatePartitions (nor has librdkafka's mock cluster): the
    topic is deleted and created again with more partitions, which the
    producer's metadata sees the same way, as a larger partition count.

    The running producer refreshes its metadata every 300 ms and, like
    Java's, asks the broker to auto-create a topic it does not find: when a
    refresh falls between the deletion and the creation, the broker makes
    the topic again with its default partition count and the creation
    answers TOPIC_ALREADY_EXISTS. Then the topic is deleted once more."""
    from confluent_kafka import KafkaError as CkError

    admin = AdminClient({"bootstrap.servers": bs})
    deadline = time.time() + 30
    while True:
        try:
            for f in admin.delete_topics([topic]).values():
                f.result(10)
        except Exception as e:  # already gone (an earlier round's deletion)
            if e.args[0].code() != CkError.UNKNOWN_TOPIC_OR_PART or time.time() > deadline:
                raise
        while True:
            try:
                _topic(bs, partitions, topic)
                return
            except Exception as e:
                if time.time() > deadline:
                    raise
                if e.args[0].code() == CkError.TOPIC_ALREADY_EXISTS:
                    break  # auto-created again, or the deletion is still under way
                time.sleep(0.2)
        time.sleep(0.2)


@pytest.mark.parametrize("partitioner", ["consistent", "round_robin", "callable"])
def test_partitions_added_after_the_producer_started_are_used(bs, partitioner):
    topic = _topic(bs, 2)
    spec = (lambda key, parts, avail: parts[-1]) if partitioner == "callable" else partitioner
    keys = [f"k{i}".encode() for i in range(40)]
    with fk.Producer(bs, partitioner=spec, metadata_max_age_ms=300) as p:
        before = {p.send(topic, b"v", key=k).result(10).partition for k in keys}
        assert before == ({1} if partitioner == "callable" else {0, 1})
        _grow_topic(bs, topic, 5)
        deadline = time.time() + 20
        while p.partitions_for(topic) != [0, 1, 2, 3, 4] and time.time() < deadline:
            time.sleep(0.1)
        assert p.partitions_for(topic) == [0, 1, 2, 3, 4]
        futs = [(k, p.send(topic, b"v", key=k)) for k in keys]
        assert p.flush(20) == 0
        after = [(k, f.result(0).partition) for k, f in futs]
    if partitioner == "consistent":
        assert all(part == zlib.crc32(k) % 5 for k, part in after)
    if partitioner == "callable":
        assert {part for _, part in after} == {4}
    else:
        assert {part for _, part in after} == {0, 1, 2, 3, 4}
