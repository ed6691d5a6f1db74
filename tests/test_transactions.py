"""Transactions (docs/semantics.md §7), on the brokers that can prove them.

* The embedded broker (ferrokafka's Tansu build) implements transactions
  end to end: coordinator, fencing, TxnOffsetCommit, commit/abort markers,
  the last stable offset and the aborted-transaction list in Fetch. The
  read_committed checks run there, with confluent-kafka as the reference on
  both sides (its transactional producer read by us, ours read by it).
* librdkafka's mock cluster accepts the transactional calls but never hides
  aborted records: it is used only to inject errors into each transactional
  API, move the coordinator and take it down mid-transaction.
"""

from __future__ import annotations

import threading
import time

import pytest

import ferrokafka as fk
from ferrokafka import errors

TP = fk.TopicPartition


def _topic(bs: str, name: str, partitions: int = 1) -> str:
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(name, partitions, 1)])
    return name


def _read(bs: str, topic: str, isolation: str, partitions: int = 1, expect: int | None = None,
          wait_s: float = 10.0) -> list:
    """Every value of `topic` as a ferrokafka consumer with `isolation` sees it."""
    c = fk.Consumer(bs, isolation_level=isolation, auto_offset_reset="earliest")
    c.assign([TP(topic, p) for p in range(partitions)])
    got: list = []
    deadline = time.monotonic() + wait_s
    idle_until = None
    while time.monotonic() < deadline:
        batch = c.poll(timeout_ms=200)
        got += [(m.partition, m.value) for m in batch]
        if expect is not None and len(got) >= expect:
            # Keep reading briefly: more than expected would be a failure.
            idle_until = idle_until or time.monotonic() + 0.5
            if time.monotonic() > idle_until:
                break
    c.close()
    return got


def _confluent_read(bs: str, topic: str, isolation: str, expect: int, wait_s: float = 10.0) -> list:
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": f"ref-{topic}-{isolation}",
                     "isolation.level": isolation, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got: list = []
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and len(got) < expect:
        for m in c.consume(1000, 0.2):
            if m.error() is None:
                got.append(m.value())
    # Anything more than expected would show up now.
    for m in c.consume(1000, 0.5):
        if m.error() is None:
            got.append(m.value())
    c.close()
    return got


def _txn_producer(bs: str, tid: str, **cfg) -> fk.Producer:
    p = fk.Producer(bs, transactional_id=tid, **cfg)
    p.init_transactions(20)
    return p


# --- state rules ---------------------------------------------------------------------

def test_transactional_calls_follow_the_state_machine(embedded_broker, topic_name):
    bs = embedded_broker.bootstrap_servers
    _topic(bs, topic_name)
    p = fk.Producer(bs, transactional_id=f"tx-{topic_name}")
    try:
        assert p.transaction_state == "UNINITIALIZED"
        with pytest.raises(errors.IllegalStateError, match="init_transactions"):
            p.send(topic_name, b"x")
        with pytest.raises(errors.IllegalStateError, match="UNINITIALIZED"):
            p.begin_transaction()
        p.init_transactions(20)
        assert p.transaction_state == "READY"
        with pytest.raises(errors.IllegalStateError, match="READY"):
            p.send(topic_name, b"x")
        with pytest.raises(errors.IllegalStateError, match="READY"):
            p.commit_transaction(5)
        with pytest.raises(errors.IllegalStateError, match="READY"):
            p.init_transactions(5)
        p.begin_transaction()
        assert p.transaction_state == "IN_TRANSACTION"
        with pytest.raises(errors.IllegalStateError, match="IN_TRANSACTION"):
            p.begin_transaction()
        p.commit_transaction(10)  # empty: completes without the coordinator
        assert p.transaction_state == "READY"
        # Java's txn timing metrics count every call.
        m = p.metrics()
        assert m["txn-init-time-ns-total"] > 0 and m["txn-commit-time-ns-total"] > 0
        assert m["txn-begin-time-ns-total"] > 0 and m["txn-abort-time-ns-total"] == 0
    finally:
        p.close()
    # Not transactional: the calls say so.
    with fk.Producer(bs) as q:
        assert q.transaction_state is None
        with pytest.raises(errors.IllegalStateError, match="transactional_id"):
            q.begin_transaction()


def test_transactional_id_needs_idempotence():
    with pytest.raises(ValueError, match="enable_idempotence"):
        fk.Producer("localhost:9", transactional_id="t", enable_idempotence=False)
    with pytest.raises(ValueError, match="acks"):
        fk.Producer("localhost:9", transactional_id="t", acks=1)


# --- visibility (embedded broker: it hides aborted records) ----------------------------

def test_commit_and_abort_as_read_committed_consumers_see_them(embedded_broker, topic_name):
    """100 committed, 50 aborted (written, then aborted), 1 committed: both
    clients read 101 under read_committed and all 151 under read_uncommitted."""
    bs = embedded_broker.bootstrap_servers
    _topic(bs, topic_name)
    p = _txn_producer(bs, f"tx-{topic_name}")
    try:
        p.begin_transaction()
        ok = [p.send(topic_name, b"c%d" % i) for i in range(100)]
        p.commit_transaction(20)
        assert [f.result(5).offset for f in ok] == list(range(100))
        p.begin_transaction()
        aborted = [p.send(topic_name, b"a%d" % i) for i in range(50)]
        p.flush(10)  # written to the log, so the abort must hide them
        assert all(f.exception(5) is None for f in aborted)
        p.abort_transaction(20)
        p.begin_transaction()
        p.send(topic_name, b"last")
        p.commit_transaction(20)
    finally:
        p.close()
    want = [b"c%d" % i for i in range(100)] + [b"last"]
    assert [v for _, v in _read(bs, topic_name, "read_committed", expect=101)] == want
    everything = [v for _, v in _read(bs, topic_name, "read_uncommitted", expect=151)]
    assert everything == want[:100] + [b"a%d" % i for i in range(50)] + [b"last"]
    # confluent-kafka as the reference reader.
    assert _confluent_read(bs, topic_name, "read_committed", 101) == want
    assert len(_confluent_read(bs, topic_name, "read_uncommitted", 151)) == 151


def test_records_queued_at_abort_fail_with_transaction_aborted(embedded_broker, topic_name):
    bs = embedded_broker.bootstrap_servers
    _topic(bs, topic_name)
    p = _txn_producer(bs, f"tx-{topic_name}", linger_ms=60_000)
    try:
        p.begin_transaction()
        futs = [p.send(topic_name, b"v%d" % i) for i in range(10)]
        p.abort_transaction(20)
        for f in futs:
            assert isinstance(f.exception(5), errors.TransactionAbortedError)
        p.begin_transaction()
        p.send(topic_name, b"after")
        p.commit_transaction(20)
    finally:
        p.close()
    assert [v for _, v in _read(bs, topic_name, "read_committed", expect=1)] == [b"after"]


def test_confluent_transactions_are_filtered_by_ferrokafka(embedded_broker, topic_name):
    """The reverse pair: confluent-kafka's transactional producer, our
    read_committed consumer; end_offsets stop at the last stable offset while
    a transaction is open."""
    ck = pytest.importorskip("confluent_kafka")
    bs = embedded_broker.bootstrap_servers
    _topic(bs, topic_name)
    p = ck.Producer({"bootstrap.servers": bs, "transactional.id": f"ck-{topic_name}"})
    p.init_transactions(20)
    p.begin_transaction()
    for i in range(100):
        p.produce(topic_name, b"c%d" % i)
    p.commit_transaction(20)
    p.begin_transaction()
    for i in range(50):
        p.produce(topic_name, b"a%d" % i)
    p.flush(10)
    p.abort_transaction(20)
    p.begin_transaction()
    p.produce(topic_name, b"open")
    p.flush(10)
    # A transaction is open: read_committed stops before it.
    c = fk.Consumer(bs, isolation_level="read_committed")
    u = fk.Consumer(bs, isolation_level="read_uncommitted")
    try:
        lso = c.end_offsets([TP(topic_name, 0)])[TP(topic_name, 0)]
        hw = u.end_offsets([TP(topic_name, 0)])[TP(topic_name, 0)]
        # 100 records + marker, 50 + marker, then the open record at 152.
        assert (lso, hw) == (152, 153)
        seen = [v for _, v in _read(bs, topic_name, "read_committed", expect=100, wait_s=4)]
        assert seen == [b"c%d" % i for i in range(100)]
        p.commit_transaction(20)
        assert c.end_offsets([TP(topic_name, 0)])[TP(topic_name, 0)] == 154
    finally:
        c.close()
        u.close()
    seen = [v for _, v in _read(bs, topic_name, "read_committed", expect=101)]
    assert seen == [b"c%d" % i for i in range(100)] + [b"open"]


# --- fencing and offsets -----------------------------------------------------------------

def test_a_second_producer_with_the_same_id_fences_the_first(embedded_broker, topic_name):
    bs = embedded_broker.bootstrap_servers
    _topic(bs, topic_name)
    tid = f"tx-{topic_name}"
    zombie = _txn_producer(bs, tid, linger_ms=60_000)
    fresh = None
    try:
        zombie.begin_transaction()
        pending = [zombie.send(topic_name, b"zombie%d" % i) for i in range(5)]
        fresh = _txn_producer(bs, tid)
        with pytest.raises(errors.ProducerFencedError):
            zombie.commit_transaction(20)
        assert zombie.transaction_state == "FATAL_ERROR"
        for f in pending:
            assert isinstance(f.exception(5), errors.ProducerFencedError)
        with pytest.raises(errors.ProducerFencedError):
            zombie.begin_transaction()
        fresh.begin_transaction()
        fresh.send(topic_name, b"fresh")
        fresh.commit_transaction(20)
    finally:
        zombie.close(0)
        if fresh is not None:
            fresh.close()
    assert [v for _, v in _read(bs, topic_name, "read_committed", expect=1)] == [b"fresh"]


def test_offsets_commit_with_the_transaction_and_only_then(embedded_broker, topic_name):
    """send_offsets_to_transaction: the group's offsets appear exactly when
    the transaction commits (our Admin and confluent-kafka's committed())."""
    ck = pytest.importorskip("confluent_kafka")
    bs = embedded_broker.bootstrap_servers
    src, dst = _topic(bs, topic_name + "-in"), _topic(bs, topic_name + "-out")
    group = f"g-{topic_name}"
    with fk.Producer(bs) as p:
        p.send_batch(src, [b"r%d" % i for i in range(20)]).result(10)
    c = fk.Consumer(bs, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                    isolation_level="read_committed")
    c.subscribe([src])
    got: list = []
    deadline = time.monotonic() + 20
    while len(got) < 20 and time.monotonic() < deadline:
        got += c.poll(timeout_ms=500)
    assert len(got) == 20
    meta = c.group_metadata()
    # Tansu numbers generations from 0 (Kafka from 1).
    assert meta.group_id == group and meta.generation_id >= 0 and meta.member_id
    p = _txn_producer(bs, f"tx-{topic_name}")
    try:
        # An aborted transaction commits no offsets.
        p.begin_transaction()
        p.send_offsets_to_transaction({TP(src, 0): 10}, meta)
        p.abort_transaction(20)
        with fk.Admin(bs) as a:
            assert a.list_consumer_group_offsets(group).get(TP(src, 0)) is None
        p.begin_transaction()
        for m in got:
            p.send(dst, m.value.upper())
        p.send_offsets_to_transaction({TP(src, 0): fk.OffsetAndMetadata(20, "eos")}, meta)
        p.commit_transaction(20)
    finally:
        p.close()
    with fk.Admin(bs) as a:
        assert a.list_consumer_group_offsets(group)[TP(src, 0)] == 20
    # (Offset only: the embedded broker's OffsetFetch does not return metadata.)
    assert c.committed([TP(src, 0)])[TP(src, 0)].offset == 20
    c.close()
    ref = ck.Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        assert ref.committed([ck.TopicPartition(src, 0)], 10)[0].offset == 20
    finally:
        ref.close()
    assert len(_read(bs, dst, "read_committed", expect=20)) == 20


# --- injected errors (mock cluster) ----------------------------------------------------------

def _mock_txn(mock_cluster, topic: str, tid: str, **cfg) -> fk.Producer:
    mock_cluster.create_topic(topic, 3, 1)
    bs = mock_cluster.bootstrap_servers
    p = fk.Producer(bs, transactional_id=tid, retry_backoff_ms=20, **cfg)
    p.init_transactions(20)
    return p


def _one_transaction(p: fk.Producer, topic: str, n: int = 30, offsets_group=None) -> list:
    p.begin_transaction()
    futs = [p.send(topic, b"v%d" % i, key=b"k%d" % i) for i in range(n)]
    if offsets_group is not None:
        p.send_offsets_to_transaction({TP(topic, 0): 5}, offsets_group)
    p.commit_transaction(30)
    return [f.result(5) for f in futs]


# API keys: FindCoordinator 10, InitProducerId 22, AddPartitionsToTxn 24,
# AddOffsetsToTxn 25, EndTxn 26, TxnOffsetCommit 28.
RETRIABLE = {
    10: [15, 15],           # COORDINATOR_NOT_AVAILABLE
    22: [15, 16, 14],       # ... NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
    24: [51, 51, 16],       # CONCURRENT_TRANSACTIONS, then the coordinator moved
    25: [51, 15],
    26: [51, 16, 14],
    28: [16, 14],
}


@pytest.mark.parametrize("api_key", sorted(RETRIABLE))
def test_retriable_errors_on_each_transactional_api_are_retried(mock_cluster, topic_name, api_key):
    if api_key in (10, 22):
        # Errors before the producer id exists: init must ride them out.
        mock_cluster.push_request_errors(api_key, RETRIABLE[api_key])
    p = _mock_txn(mock_cluster, topic_name, f"tx-{topic_name}")
    try:
        mock_cluster.push_request_errors(api_key, RETRIABLE[api_key])
        group = fk.ConsumerGroupMetadata(f"g-{topic_name}")
        done = _one_transaction(p, topic_name, offsets_group=group)
        assert len(done) == 30 and all(r.offset >= 0 for r in done)
        assert p.transaction_state == "READY"
        _one_transaction(p, topic_name)  # and the next one goes through too
    finally:
        p.close()


def test_fatal_errors_fail_the_producer_for_good(mock_cluster, topic_name):
    mock_cluster.create_topic(topic_name, 1, 1)
    mock_cluster.push_request_errors(22, [53])  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    p = fk.Producer(mock_cluster.bootstrap_servers, transactional_id=f"tx-{topic_name}")
    try:
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError):
            p.init_transactions(20)
        assert p.transaction_state == "FATAL_ERROR"
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError):
            p.begin_transaction()
    finally:
        p.close(0)
    p = _mock_txn(mock_cluster, topic_name + "-b", f"tx2-{topic_name}")
    try:
        p.begin_transaction()
        f = p.send(topic_name + "-b", b"x")
        mock_cluster.push_request_errors(26, [90])  # PRODUCER_FENCED on EndTxn
        with pytest.raises(errors.ProducerFencedError):
            p.commit_transaction(20)
        assert f.exception(5) is None  # written before the commit failed
        assert p.transaction_state == "FATAL_ERROR"
    finally:
        p.close(0)


def test_an_abortable_error_is_recovered_by_aborting(mock_cluster, topic_name):
    p = _mock_txn(mock_cluster, topic_name, f"tx-{topic_name}")
    try:
        p.begin_transaction()
        mock_cluster.push_request_errors(24, [29])  # TOPIC_AUTHORIZATION_FAILED
        f = p.send(topic_name, b"doomed", partition=0)
        with pytest.raises(errors.TopicAuthorizationFailedError):
            p.commit_transaction(20)
        assert p.transaction_state == "ABORTABLE_ERROR"
        # Every call but abort says so, with the error that caused it.
        with pytest.raises(errors.IllegalStateError, match="ABORTABLE_ERROR.*must be aborted"):
            p.send(topic_name, b"more")
        with pytest.raises(errors.TopicAuthorizationFailedError, match="must be aborted"):
            p.commit_transaction(5)
        p.abort_transaction(20)
        assert f.exception(5) is not None
        assert p.transaction_state == "READY"
        assert len(_one_transaction(p, topic_name)) == 30
    finally:
        p.close()


def test_coordinator_moved_mid_transaction(mock_cluster, topic_name):
    tid = f"tx-{topic_name}"
    mock_cluster.set_coordinator(tid, 1, "transaction")
    p = _mock_txn(mock_cluster, topic_name, tid)
    try:
        p.begin_transaction()
        futs = [p.send(topic_name, b"v%d" % i) for i in range(20)]
        p.flush(10)
        mock_cluster.set_coordinator(tid, 2, "transaction")
        mock_cluster.push_request_errors(26, [16])  # the old one says NOT_COORDINATOR
        p.commit_transaction(30)
        assert all(f.exception(1) is None for f in futs)
    finally:
        p.close()


def test_broker_down_during_end_txn_then_a_retried_commit_succeeds(mock_cluster, topic_name):
    tid = f"tx-{topic_name}"
    mock_cluster.set_coordinator(tid, 3, "transaction")
    p = _mock_txn(mock_cluster, topic_name, tid)
    try:
        p.begin_transaction()
        futs = [p.send(topic_name, b"v%d" % i, partition=0) for i in range(10)]
        p.flush(10)
        mock_cluster.set_broker_down(3)
        # The commit cannot finish while the coordinator is down: a timeout,
        # and the commit keeps running.
        with pytest.raises(errors.KafkaTimeoutError, match="call it again"):
            p.commit_transaction(1.0)
        assert p.transaction_state == "COMMITTING_TRANSACTION"
        threading.Timer(0.5, mock_cluster.set_broker_up, args=(3,)).start()
        p.commit_transaction(30)  # waits for the same commit
        assert p.transaction_state == "READY"
        assert all(f.exception(1) is None for f in futs)
    finally:
        p.close()


# --- asyncio ---------------------------------------------------------------------------------

def test_aio_producer_transactions(embedded_broker, topic_name):
    import asyncio

    from ferrokafka.aio import AIOKafkaProducer, AIOProducer

    bs = embedded_broker.bootstrap_servers
    _topic(bs, topic_name)

    async def main() -> None:
        async with AIOProducer(bs, transactional_id=f"aio-{topic_name}") as p:
            await p.init_transactions(20)
            async with p.transaction():
                await p.send(topic_name, b"committed")
            with pytest.raises(RuntimeError):
                async with p.transaction():
                    p.send_nowait(topic_name, b"aborted")
                    raise RuntimeError("the block failed")
            assert p.transaction_state == "READY"
        # aiokafka's shape: start() registers the transactional id.
        k = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=f"aiok-{topic_name}")
        await k.start()
        assert k.transaction_state == "READY"
        k.begin_transaction()
        await k.send_and_wait(topic_name, b"kafka-style")
        await k.commit_transaction()
        await k.stop()

    asyncio.run(main())
    assert sorted(v for _, v in _read(bs, topic_name, "read_committed", expect=2)) == \
        [b"committed", b"kafka-style"]


# --- exactly once under SIGKILL ------------------------------------------------------------

def test_consume_transform_produce_is_exactly_once_across_kills(embedded_broker, topic_name):
    """50,000 records through tests/_eos_worker.py, the worker SIGKILLed at
    random points and restarted 5 times: the output read read_committed holds
    each input exactly once, and the group's committed offsets are the ends."""
    import os
    import random
    import signal
    import subprocess
    import sys

    bs = embedded_broker.bootstrap_servers
    parts, n = 3, 50_000
    src, dst = _topic(bs, topic_name + "-in", parts), _topic(bs, topic_name + "-out", parts)
    group, tid = f"g-{topic_name}", f"tx-{topic_name}"
    with fk.Producer(bs) as p:
        p.send_batch(src, [b"v%d" % i for i in range(n)], keys=[b"k%d" % i for i in range(n)]).result(30)
    worker = os.path.join(os.path.dirname(__file__), "_eos_worker.py")
    cmd = [sys.executable, worker, bs, src, dst, group, tid, str(parts)]
    rng = random.Random(18)
    kills = 0
    while kills < 5:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"
            # Killed after a random number of its own commits (each about
            # 300 records of 50,000), a little later still: mid-work, inside
            # or between transactions, however fast the worker runs. (A sleep
            # after "ready" landed before any commit or after all of them
            # once the broker answered Fetch at once.)
            for _ in range(rng.randint(1, 12)):
                if proc.stdout.readline().strip() != "committed":
                    break
            time.sleep(rng.uniform(0, 0.01))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
    # The kills landed mid-work: some input committed, not all of it (else
    # this test would not test recovery).
    with fk.Admin(bs) as a:
        before = sum(a.list_consumer_group_offsets(group).values())
    assert 0 < before < n, before
    final = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert final.returncode == 0 and final.stdout.split()[-1] == "done", final.stderr[-2000:]
    out = _read(bs, dst, "read_committed", partitions=parts, expect=n, wait_s=60)
    values = sorted(v for _, v in out)
    assert len(values) == n, f"{len(values)} records for {n} inputs"
    assert values == sorted(b"V%d" % i for i in range(n))
    with fk.Admin(bs) as a:
        committed = a.list_consumer_group_offsets(group)
    c = fk.Consumer(bs)
    try:
        ends = c.end_offsets([TP(src, p) for p in range(parts)])
    finally:
        c.close()
    assert {tp: committed.get(tp) for tp in ends} == ends
