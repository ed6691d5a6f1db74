"""Broker conformance: the same checks on every broker the project tests with.

A test broker that answers wrongly makes client bugs pass and correct code fail
(issue 15: Tansu 0.6.0 answered ListOffsets(latest) with the base offset of the
newest batch + 1, so Spark read 2 of 1,000 records without an error). Every
broker ferrokafka offers (``EmbeddedBroker``, ``MockCluster``) must pass these:

* ListOffsets earliest / latest / by-timestamp agree with what Fetch returns
  (latest = high watermark = last offset + 1) after batches of many sizes, in
  every codec, over several partitions;
* a new group of consumers with the Java defaults (session 45 s, max poll 300 s)
  has its first assignment within 4 s (Kafka's broker waits
  group.initial.rebalance.delay.ms = 3 s for more members, then assigns);
* committed offsets read back (same member, a new member, the admin API);
* topic auto-creation and CreateTopics agree on partition counts;
* a Fetch is answered as soon as it holds fetch.min.bytes (not held for
  fetch.max.wait.ms when it found records), and a partition's share of it is
  bounded by max.partition.fetch.bytes.

Only ferrokafka's clients decide pass/fail, plus confluent-kafka (librdkafka) as
a second opinion on the watermarks, so a bug shared by our client and a broker
cannot hide.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import pytest

import ferrokafka as fk

TP = fk.TopicPartition
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PARTITIONS = 3
# Records per produced batch (one flush each): single records, odd sizes, and a
# batch larger than the default 16 KiB batch.size splits into several.
BATCH_SIZES = (1, 7, 1, 120, 33, 1000, 2)
FIRST_JOIN_BUDGET_S = 4.0


@dataclass
class Broker:
    kind: str
    bootstrap_servers: str
    # librdkafka's mock cluster has no CreateTopics; topics are made through its API.
    create_topics_api: bool
    _mock: object = None

    def create(self, topic: str, partitions: int) -> None:
        if self.create_topics_api:
            with fk.Admin(self.bootstrap_servers) as a:
                a.create_topics([fk.NewTopic(topic, partitions, 1)])
        else:
            self._mock.create_topic(topic, partitions, 1)
        # Metadata can trail topic creation.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with fk.Admin(self.bootstrap_servers) as a:
                if a.list_topics().get(topic) == partitions:
                    return
            time.sleep(0.1)
        raise AssertionError(f"{topic} not visible with {partitions} partitions after creation")


@pytest.fixture(params=["embedded", "mock"])
def broker(request):
    """The broker under test. The mock keeps librdkafka's default 3 s initial
    rebalance delay here (the project's fixture sets 0), as Kafka does."""
    if request.param == "embedded":
        b = request.getfixturevalue("embedded_broker")
        yield Broker("embedded", b.bootstrap_servers, True)
        return
    from ferrokafka.testing import MockCluster

    try:
        m = MockCluster(num_brokers=3, initial_rebalance_delay_ms=None)
    except ImportError as e:
        from conftest import _unavailable

        _unavailable("librdkafka mock cluster (confluent-kafka)", e)
    with m:
        yield Broker("mock", m.bootstrap_servers, False, m)


def _name(prefix: str) -> str:
    return f"conf-{prefix}-{uuid.uuid4().hex[:8]}"


def _fetch_all(bs: str, topic: str, counts: dict[int, int], timeout: float = 30.0) -> dict[int, list]:
    """Every record of every partition, from the beginning, by Fetch."""
    c = fk.Consumer(bs, auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        c.assign([TP(topic, p) for p in counts])
        c.seek_to_beginning()
        got: dict[int, list] = {p: [] for p in counts}
        deadline = time.monotonic() + timeout
        while any(len(got[p]) < n for p, n in counts.items()) and time.monotonic() < deadline:
            for m in c.poll(timeout_ms=200):
                got[m.partition].append((m.offset, m.timestamp_ms, m.value))
        # A little longer: a broker that serves more than it acknowledged fails below.
        for m in c.poll(timeout_ms=300):
            got[m.partition].append((m.offset, m.timestamp_ms, m.value))
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_list_offsets_agree_with_fetch(broker, codec, confluent_kafka):
    kind, bs = broker.kind, broker.bootstrap_servers
    topic = _name(codec)
    broker.create(topic, PARTITIONS)
    # Timestamps chosen by the test (CreateTime), in the past, strictly
    # increasing per partition except for a run of equal ones, so "first record
    # at or after T" has one right answer.
    t0 = int(time.time() * 1000) - 3_600_000
    sent: dict[int, list] = {p: [] for p in range(PARTITIONS)}
    with fk.Producer(bs, compression_type=codec, linger_ms=1000, batch_size=16384, acks="all") as prod:
        for p in range(PARTITIONS):
            ts = t0 + p
            for size in BATCH_SIZES[p:] + BATCH_SIZES[:p]:
                futs = []
                for i in range(size):
                    ts += 0 if i % 50 == 49 else 10
                    value = b"%s-%d-%d" % (codec.encode(), p, len(sent[p]))
                    futs.append(prod.send(topic, value, partition=p, timestamp_ms=ts))
                    sent[p].append((ts, value))
                assert prod.flush(30) == 0, "undelivered records"
                offsets = [f.result(10).offset for f in futs]
                assert offsets == list(range(offsets[0], offsets[0] + size)), offsets
    counts = {p: len(v) for p, v in sent.items()}

    fetched = _fetch_all(bs, topic, counts)
    for p in range(PARTITIONS):
        assert [v for _, _, v in fetched[p]] == [v for _, v in sent[p]], f"partition {p}: fetched != produced"
        assert [o for o, _, _ in fetched[p]] == list(range(counts[p]))
        assert [t for _, t, _ in fetched[p]] == [t for t, _ in sent[p]], f"partition {p}: timestamps"

    # Fetch from inside a batch starts exactly there (the broker sends the batch
    # holding the offset; the client skips what precedes it).
    c = fk.Consumer(bs, enable_auto_commit=False)
    try:
        for p in range(PARTITIONS):
            for start in sorted({3, counts[p] // 2 + 1}):
                c.assign([TP(topic, p)])
                c.seek(TP(topic, p), start)
                first = []
                deadline = time.monotonic() + 10
                while not first and time.monotonic() < deadline:
                    first = c.poll(timeout_ms=200)
                assert first and first[0].offset == start, f"{kind}: fetch from {start} in p{p}: {first[:1]}"
    finally:
        c.close()

    c = fk.Consumer(bs)
    try:
        tps = [TP(topic, p) for p in range(PARTITIONS)]
        end = c.end_offsets(tps)
        begin = c.beginning_offsets(tps)
        for p in range(PARTITIONS):
            last = fetched[p][-1][0]
            assert end[TP(topic, p)] == last + 1 == counts[p], f"{kind}: latest for partition {p}"
            assert begin[TP(topic, p)] == fetched[p][0][0] == 0, f"{kind}: earliest for partition {p}"

    finally:
        c.close()

    # Second opinion: librdkafka's view of the watermarks.
    ck = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "conf-ck"})
    try:
        for p in range(PARTITIONS):
            lo, hi = ck.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=10)
            assert (lo, hi) == (0, counts[p]), f"{kind}: confluent-kafka watermarks for partition {p}"
    finally:
        ck.close()

    # By timestamp: at, just before and just after record timestamps, before the
    # first and after the last (None: no such record).
    c = fk.Consumer(bs)
    try:
        for p in range(PARTITIONS):
            records = fetched[p]
            targets = {records[0][1] - 1000, records[-1][1] + 1}
            for i in range(0, len(records), 17):
                targets |= {records[i][1], records[i][1] - 1, records[i][1] + 1}
            for t in sorted(targets):
                want = next(((o, ts) for o, ts, _ in records if ts >= t), None)
                got = c.offsets_for_times({TP(topic, p): t})[TP(topic, p)]
                got = None if got is None else (got[0], got[1])
                if got != want and kind == "mock" and got is None:
                    pytest.xfail("librdkafka's mock cluster answers every ListOffsets by timestamp with "
                                 "offset -1 (it keeps no timestamp index); use EmbeddedBroker for timestamp lookups")
                assert got == want, f"{kind}/{codec}: offsets_for_times(p{p}, {t}) = {got}, Fetch says {want}"
    finally:
        c.close()


def test_empty_partition_offsets(broker):
    kind, bs = broker.kind, broker.bootstrap_servers
    topic = _name("empty")
    broker.create(topic, 2)
    c = fk.Consumer(bs)
    try:
        tps = [TP(topic, 0), TP(topic, 1)]
        assert c.end_offsets(tps) == {tp: 0 for tp in tps}, kind
        assert c.beginning_offsets(tps) == {tp: 0 for tp in tps}, kind
        assert c.offsets_for_times({TP(topic, 0): 0})[TP(topic, 0)] is None, kind
    finally:
        c.close()


def test_fetch_answers_when_records_are_there(broker):
    """Kafka holds a Fetch only while it has fewer than fetch.min.bytes. Tansu
    0.6.0 held every answer that found records ~250 ms at the default 500 ms
    fetch.max.wait.ms (docs/embedded-broker.md), which capped every consumer near
    180k records/s and delayed records produced while a Fetch waited."""
    kind, bs = broker.kind, broker.bootstrap_servers
    topic = _name("fetchwait")
    broker.create(topic, 1)
    tp = TP(topic, 0)
    with fk.Producer(bs, linger_ms=0) as p:
        for _ in range(30):  # 30 batches of ~11 KB (a flush each: not merged)
            p.send_batch(topic, [b"x" * 100] * 100, partition=0)
            p.flush()
    part_max = 32_768
    c = fk.Consumer(bs, auto_offset_reset="earliest", enable_auto_commit=False,
                    max_partition_fetch_bytes=part_max)
    try:
        c.assign([tp])
        got, deadline = 0, time.monotonic() + 30
        while got < 3000 and time.monotonic() < deadline:
            got += len(c.poll(timeout_ms=1000, max_records=10_000))
        assert got == 3000, kind
        m = c.metrics()
        # A backlog read: no answer waits (the default fetch_max_wait_ms is 500).
        assert m["fetch-latency-avg"] < 100, (kind, m["fetch-latency-avg"])
        # The partition's share: max.partition.fetch.bytes, plus at most the batch
        # that crosses it (Kafka's rule sends a first batch larger than it whole).
        assert 0 < m["fetch-size-avg"] <= part_max + 12_000, (kind, m["fetch-size-avg"])

        # Live: a record produced while a Fetch waits is answered at once, not at
        # the end of the wait.
        waits = []
        with fk.Producer(bs, linger_ms=0) as p:
            for _ in range(8):
                c.poll(timeout_ms=50)  # a Fetch is now waiting on the broker
                t0 = time.monotonic()
                p.send(topic, b"live", partition=0).result(10)
                while not c.poll(timeout_ms=1000) and time.monotonic() - t0 < 5:
                    pass
                waits.append(time.monotonic() - t0)
        waits.sort()
        if kind == "mock" and waits[len(waits) // 2] >= 0.1:
            pytest.xfail("librdkafka's mock cluster holds a Fetch that found nothing for its whole "
                         f"max wait, records produced meanwhile or not (median {waits[len(waits) // 2]:.3f} s)")
        assert waits[len(waits) // 2] < 0.1, (kind, waits)
    finally:
        c.close()


def _poll_tolerating_mock_sync_race(c, kind):
    """librdkafka's mock answers a follower's SyncGroup that arrives after the
    leader's with INVALID_REQUEST (a real broker hands out the assignment); the
    client raises that once from poll and rejoins, as Java does. Only on the
    mock is it expected here."""
    try:
        c.poll(timeout_ms=50)
    except fk.errors.InvalidRequestError:
        if kind != "mock":
            raise


def _first_assignment(consumers, topic, budget, kind=None):
    """Poll every consumer until each has a non-empty assignment that, together,
    covers the topic exactly once; the seconds that took (or None)."""
    t0 = time.monotonic()
    deadline = t0 + budget
    while time.monotonic() < deadline:
        for c in consumers:
            _poll_tolerating_mock_sync_race(c, kind)
        owned = [set(c.assignment()) for c in consumers]
        if all(owned):
            return time.monotonic() - t0, owned
    return None, [set(c.assignment()) for c in consumers]


@pytest.mark.parametrize("members", [1, 2])
def test_first_group_assignment_with_java_defaults(broker, members, request):
    """A new group, Java-default timeouts: first assignment within 4 s."""
    kind, bs = broker.kind, broker.bootstrap_servers
    if kind == "mock" and members == 2:
        # The mock's group state machine (docs/embedded-broker.md): with Java-default
        # timeouts a follower's SyncGroup after the leader's is answered INVALID_REQUEST
        # and the rejoin waits out a 45 s session; confluent-kafka's consumers stall the
        # same way (4 of 5 runs). Not seen on the embedded broker.
        request.applymarker(pytest.mark.xfail(reason="librdkafka's mock: a 2-member group with Java "
                                              "defaults stalls until a session timeout (confluent-kafka "
                                              "too)", strict=False))
    topic = _name("join")
    broker.create(topic, 4)
    group = _name("g")
    consumers = [fk.Consumer(bs, group_id=group, session_timeout_ms=45_000, max_poll_interval_ms=300_000,
                             heartbeat_interval_ms=3_000, auto_offset_reset="earliest") for _ in range(members)]
    try:
        for c in consumers:
            c.subscribe([topic])
        took, owned = _first_assignment(consumers, topic, FIRST_JOIN_BUDGET_S + 20, kind)
        print(f"{kind}: first assignment of a {members}-member group in {took}s")
        assert took is not None, f"{kind}: no complete assignment within 24 s: {owned}"
        # Kafka extends a new group's initial rebalance delay (3 s) by each
        # member that joins during it: a second member whose JoinGroup follows
        # the first by a second or two (a loaded 2-core CI machine: seen once,
        # 5.0 s) legitimately takes that much longer. The defect this guards
        # against (a first join waiting out a 45 s session or more) stays caught.
        budget = FIRST_JOIN_BUDGET_S + (2.0 if members > 1 else 0.0)
        assert took <= budget, f"{kind}: first assignment took {took:.1f}s (> {budget}s)"
        # Settle, then every partition has exactly one owner.
        end = time.monotonic() + (4 if members > 1 else 0.5)
        while time.monotonic() < end:
            for c in consumers:
                _poll_tolerating_mock_sync_race(c, kind)
        owned = [set(c.assignment()) for c in consumers]
        assert sorted(tp.partition for o in owned for tp in o) == [0, 1, 2, 3], f"{kind}: {owned}"
    finally:
        t = time.monotonic()
        for c in consumers:
            c.close()
        assert time.monotonic() - t < 10, f"{kind}: close() took {time.monotonic() - t:.1f}s"


def test_committed_offsets_read_back(broker, request):
    kind, bs = broker.kind, broker.bootstrap_servers
    if kind == "mock":
        # Known on librdkafka's mock (docs/embedded-broker.md): OffsetFetch for a
        # whole group does not decode, and one CI run timed out waiting for a node
        # at the commit. The check that matters runs on the embedded broker.
        request.applymarker(pytest.mark.xfail(reason="mock: OffsetFetch/commit read-back not reliable (open)",
                                              strict=False))
    topic = _name("commit")
    broker.create(topic, 2)
    with fk.Producer(bs, linger_ms=0) as prod:
        for i in range(10):
            prod.send(topic, b"%d" % i, partition=i % 2)
        assert prod.flush(30) == 0
    group = _name("g")
    c = fk.Consumer(bs, group_id=group, enable_auto_commit=False)
    try:
        c.assign([TP(topic, 0), TP(topic, 1)])
        c.commit({TP(topic, 0): (3, "meta-0"), TP(topic, 1): 5})
        got = c.committed([TP(topic, 0), TP(topic, 1)])
        assert got[TP(topic, 0)].offset == 3, (kind, got)
        assert got[TP(topic, 1)].offset == 5, (kind, got)
        metadata = got[TP(topic, 0)].metadata
        # A commit without metadata reads back as Java's broker answers it: "".
        no_metadata = got[TP(topic, 1)].metadata
    finally:
        c.close()
    c2 = fk.Consumer(bs, group_id=group, enable_auto_commit=False)
    try:
        got = c2.committed([TP(topic, 0), TP(topic, 1)])
        assert [got[TP(topic, 0)].offset, got[TP(topic, 1)].offset] == [3, 5], (kind, got)
        c2.assign([TP(topic, 0), TP(topic, 1)])
        records = []
        deadline = time.monotonic() + 15
        while len(records) < 2 and time.monotonic() < deadline:
            records += c2.poll(timeout_ms=200)
        records += c2.poll(timeout_ms=300)  # and nothing more
        # resumes at the committed offsets: 5 - 3 = 2 left in p0, 5 - 5 = 0 in p1
        assert sorted((m.partition, m.offset) for m in records) == [(0, 3), (0, 4)], (kind, records)
    finally:
        c2.close()
    with fk.Admin(bs) as a:
        try:
            listed = a.list_consumer_group_offsets(group, timeout_ms=10_000)
        except fk.errors.BadMsgError as e:
            if kind != "mock":
                raise
            # Seen with librdkafka 2.x's mock: its OffsetFetch v6 answer for a whole
            # group (topics=null) does not decode; the per-partition form above works.
            pytest.xfail(f"mock cluster: OffsetFetch for a whole group: {e}")
        assert listed == {TP(topic, 0): 3, TP(topic, 1): 5}, kind
    # The embedded broker answers the metadata since our Tansu patch
    # (third_party/tansu/README.md: OffsetFetch answered offsets only).
    assert metadata == "meta-0", (kind, metadata)
    if kind == "embedded":
        assert no_metadata == "", (kind, no_metadata)


def test_auto_creation_and_create_topics_agree(broker, confluent_kafka):
    """Auto-created and created topics: every client sees the same partition
    counts; CreateTopics with the broker defaults (-1) matches auto-creation;
    CreateTopics of an auto-created topic is TopicAlreadyExists."""
    kind, bs = broker.kind, broker.bootstrap_servers
    auto = _name("auto")
    with fk.Producer(bs, linger_ms=0) as prod:
        prod.send(auto, b"x").result(15)
        n_auto = len(prod.partitions_for(auto))
    assert n_auto >= 1
    explicit, default = _name("explicit"), _name("default")
    topics = [auto, explicit]
    if broker.create_topics_api:
        topics.append(default)
        with fk.Admin(bs) as a:
            a.create_topics([fk.NewTopic(explicit, 5, 1), fk.NewTopic(default)])
            with pytest.raises(fk.errors.TopicAlreadyExistsError):
                a.create_topics([fk.NewTopic(auto, n_auto, 1)])
    else:
        broker.create(explicit, 5)
    deadline = time.monotonic() + 10
    with fk.Admin(bs) as a:
        while time.monotonic() < deadline:
            admin_view = a.list_topics()
            if all(t in admin_view for t in topics):
                break
            time.sleep(0.1)
    assert admin_view[auto] == n_auto, (kind, admin_view)
    assert admin_view[explicit] == 5, (kind, admin_view)
    if broker.create_topics_api:
        assert admin_view[default] == n_auto, (kind, "CreateTopics(-1) vs auto-creation", admin_view)
    c = fk.Consumer(bs)
    try:
        consumer_view = c.list_topics()
    finally:
        c.close()
    md = confluent_kafka.admin.AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10)
    for t in topics:
        assert consumer_view[t] == admin_view[t] == len(md.topics[t].partitions), (kind, t)
