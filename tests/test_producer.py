"""Producer against the embedded Tansu broker and librdkafka's mock cluster,
with confluent-kafka as the independent reader."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
import uuid

import pytest

import ferrokafka as fk

try:  # the fixture `confluent_kafka` fails the test in CI when it is missing
    from confluent_kafka import Consumer as CkConsumer
    from confluent_kafka import Producer as CkProducer
    from confluent_kafka import TopicPartition as CkTP
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError:  # pragma: no cover
    pass


def _topic(bs: str, partitions: int = 3) -> str:
    name = f"p-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bs})  # must outlive its futures
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(10)
    return name


def _consume_all(bs: str, topic: str, partitions: int, n: int, timeout: float = 20.0):
    c = CkConsumer({"bootstrap.servers": bs, "group.id": "reader-" + uuid.uuid4().hex,
                    "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([CkTP(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.time() + timeout
    while len(out) < n and time.time() < deadline:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        out.append(m)
    c.close()
    return out


@pytest.fixture
def bs(embedded_broker, confluent_kafka):
    return embedded_broker.bootstrap_servers


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_reads_what_we_produce_byte_exact(bs, codec):
    topic = _topic(bs)
    sent = {}
    with fk.Producer(bs, compression_type=codec, linger_ms=2) as p:
        futs = []
        for i in range(300):
            key = f"key-{i}".encode()
            value = bytes([i % 256]) * (i % 50) + "é€".encode() * (i % 3)
            headers = [("idx", str(i).encode()), ("empty", None)] if i % 2 else None
            sent[key] = (value, headers)
            futs.append(p.send(topic, value, key=key, headers=headers))
        assert p.flush(30) == 0
        mds = [f.result(0) for f in futs]
    assert all(md.topic == topic and md.offset >= 0 for md in mds)
    got = _consume_all(bs, topic, 3, 300)
    assert len(got) == 300
    for m in got:
        value, headers = sent[m.key()]
        assert m.value() == value
        if headers:
            assert m.headers() == [("idx", headers[0][1]), ("empty", None)]
        else:
            assert not m.headers()
    # Offsets reported by futures match what the reader sees.
    by_key = {m.key(): (m.partition(), m.offset()) for m in got}
    for i, md in enumerate(mds):
        assert by_key[f"key-{i}".encode()] == (md.partition, md.offset)


def test_keyed_partitioning_matches_java_murmur2(bs):
    topic = _topic(bs, partitions=7)
    keys = [b"", b"a", b"hello", "ключ".encode(), bytes(range(256)), b"x" * 1000] + [str(i).encode() for i in range(50)]
    ck = CkProducer({"bootstrap.servers": bs, "partitioner": "murmur2_random"})
    expected = {}

    def record(err, msg, key):
        assert err is None
        expected[key] = msg.partition()

    for k in keys:
        ck.produce(topic, b"v", key=k, on_delivery=lambda e, m, k=k: record(e, m, k))
    ck.flush(20)
    with fk.Producer(bs) as p:
        futs = {k: p.send(topic, b"v", key=k) for k in keys}
        p.flush(20)
        ours = {k: f.result(0).partition for k, f in futs.items()}
    assert ours == expected


def test_unkeyed_records_are_sticky_then_spread(bs):
    topic = _topic(bs, partitions=4)
    with fk.Producer(bs, batch_size=1024, linger_ms=1000) as p:
        futs = [p.send(topic, b"x" * 100) for _ in range(200)]
        p.flush(20)
        parts = [f.result(0).partition for f in futs]
    # Runs of about batch_size bytes on one partition, then a switch.
    runs = sum(1 for a, b in zip(parts, parts[1:]) if a != b)
    assert 5 <= runs <= 60, parts
    assert len(set(parts)) == 4


def test_callbacks_run_in_the_flushing_thread_and_await_works(bs):
    topic = _topic(bs, 1)
    seen = []
    with fk.Producer(bs) as p:
        f = p.send(topic, b"v")
        f.add_done_callback(lambda fut: seen.append((threading.get_ident(), fut.result().offset)))
        p.flush(10)
        assert seen == [(threading.get_ident(), 0)]

        async def main():
            return await p.send(topic, b"w")

        md = asyncio.run(main())
        assert md.offset == 1 and md.partition == 0


def test_undeliverable_records_fail_only_their_own_futures(bs):
    topic = _topic(bs, 1)
    with fk.Producer(bs, max_request_size=10_000, max_block_ms=2000) as p:
        ok1 = p.send(topic, b"a")
        too_big = p.send(topic, b"x" * 20_000)
        bad_topic = p.send("bad topic name!", b"b")
        ok2 = p.send(topic, b"c")
        p.flush(20)
        with pytest.raises(fk.MessageSizeTooLargeError):
            too_big.result(0)
        with pytest.raises(fk.KafkaError):
            bad_topic.result(0)
        assert ok1.result(0).offset == 0
        assert ok2.result(0).offset == 1
        with pytest.raises(ValueError, match="partition"):
            p.send(topic, b"v", partition=5)


def test_purge_fails_queued_records_and_the_producer_goes_on(bs):
    topic = _topic(bs, 1)
    with fk.Producer(bs, linger_ms=60_000) as p:
        warm = p.send(topic, b"warm")  # the metadata, then the records linger
        assert p.flush(30) == 0 and warm.result(0).offset == 0
        lingering = [p.send(topic, b"v%d" % i) for i in range(5)]
        waiting = p.send("t-" + uuid.uuid4().hex[:8], b"w", block=False)  # its metadata is unknown yet
        p.purge(in_flight=False)
        for f in lingering + [waiting]:
            with pytest.raises(fk.KafkaError) as e:
                f.result(5)
            assert e.value.code == -152, e.value
        after = p.send(topic, b"after")
        assert p.flush(30) == 0
        assert after.result(0).offset == 1, "only the warm-up record was written before"


def test_a_thread_in_result_is_woken_when_its_record_fails_without_an_answer(bs):
    """result() sleeps on the producer's network events (it applies its
    record's acknowledgement itself, docs/semantics.md §12.5); a record
    failed by something else (here purge) must wake it at once, not at its
    next 100 ms look."""
    topic = _topic(bs, 1)
    with fk.Producer(bs, linger_ms=60_000) as p:
        warm = p.send(topic, b"warm")  # lingers: sent by the flush
        assert p.flush(30) == 0 and warm.result(0).offset == 0
        woken = []
        for _ in range(5):
            f = p.send(topic, b"lingers")
            failed_at = []

            def wait(f=f, failed_at=failed_at):
                with pytest.raises(fk.KafkaError):
                    f.result(30)
                failed_at.append(time.monotonic())

            t = threading.Thread(target=wait)
            t.start()
            time.sleep(0.05)  # the waiter is asleep in result()
            purged = time.monotonic()
            p.purge(in_flight=False)
            t.join(10)
            assert failed_at, "result() did not return"
            woken.append(failed_at[0] - purged)
        woken.sort()
        # Without the wake-up the median would be ~50 ms (the 100 ms look).
        assert woken[2] < 0.03, woken


def test_poll_with_a_timeout_returns_once_a_callback_is_due(bs):
    """poll(timeout) sleeps on the producer's network events until a
    delivery callback is queued (docs/semantics.md §12.5): it returns with
    an answer's callback as soon as it is applied, and with one queued by
    something else (here purge) at once, not at its next 100 ms look."""
    topic = _topic(bs, 1)
    # The record lingers 100 ms: its callback is surely added before it
    # can be acknowledged (added to a future already done, a callback runs
    # at once and poll would have nothing to return; with linger 0 a quick
    # round trip on a loaded machine did that).
    with fk.Producer(bs, linger_ms=100) as p:
        p.send(topic, b"warm").result(30)
        got = []
        p.send(topic, b"v").add_done_callback(lambda f: got.append(f.result(0).offset))
        assert got == []
        t = time.monotonic()
        assert p.poll(30) == 1 and got == [1]
        assert time.monotonic() - t < 5
        t = time.monotonic()
        assert p.poll(0.3) == 0, "nothing pending: the whole timeout"
        assert time.monotonic() - t >= 0.29
    with fk.Producer(bs, linger_ms=60_000) as p:
        woken = []
        for _ in range(5):
            p.send(topic, b"lingers").add_done_callback(lambda f: None)
            returned = []
            t = threading.Thread(target=lambda r=returned: r.append((p.poll(30), time.monotonic())))
            t.start()
            time.sleep(0.05)  # the thread is asleep in poll
            purged = time.monotonic()
            p.purge(in_flight=False)
            t.join(10)
            assert returned and returned[0][0] == 1, returned
            woken.append(returned[0][1] - purged)
        woken.sort()
        assert woken[2] < 0.03, woken


def test_invalid_options_name_the_option():
    with pytest.raises(ValueError, match="acks"):
        fk.Producer("127.0.0.1:1", acks=2)
    with pytest.raises(ValueError, match="linger_ms"):
        fk.Producer("127.0.0.1:1", linger_ms=-1)
    with pytest.raises(ValueError, match="lingerms"):
        fk.Producer("127.0.0.1:1", lingerms=5)
    with pytest.raises(ValueError, match="compression"):
        fk.Producer({"bootstrap.servers": "127.0.0.1:1", "compression.type": "brotli"})
    with pytest.raises(ValueError, match="acks"):
        fk.Producer("127.0.0.1:1", acks=1, enable_idempotence=True)
    with pytest.raises(ValueError, match="partitioner"):
        fk.Producer("127.0.0.1:1", partitioner="fancy")
    with pytest.raises(ValueError, match="bootstrap"):
        fk.Producer("no-port")
    with pytest.raises(TypeError):
        fk.Producer("127.0.0.1:1", enable_idempotence=False).send("t", "str value")


def test_unreachable_cluster_times_out_the_record_not_the_process():
    p = fk.Producer("127.0.0.1:1", max_block_ms=300)
    t0 = time.monotonic()
    f = p.send("t", b"v")
    with pytest.raises(fk.KafkaTimeoutError):
        f.result(5)
    assert time.monotonic() - t0 < 5
    p.close(0)


def test_dotted_config_and_metrics(bs):
    topic = _topic(bs, 1)
    p = fk.Producer({"bootstrap.servers": bs, "linger.ms": 0, "acks": "1", "enable.idempotence": "false"})
    assert p.config["acks"] == "1" and p.config["linger_ms"] == 0
    p.send(topic, b"v").result(10)
    # A future resolves a moment before the record leaves the pending count;
    # flush() waits for the count.
    assert p.flush(5) == 0
    m = p.metrics()
    assert m["buffer_total_bytes"] == 33_554_432 and m["records_pending"] == 0
    assert m["records_sent"] == 1 and m["records_errored"] == 0
    assert m["requests_sent"] >= 1 and m["batches_sent"] >= 1
    assert m["bytes_out"] >= 61 + 1 and m["batch_size_avg"] >= 61, m
    assert 0 < m["request_latency_avg_ms"] <= m["request_latency_p99_ms"] < 10_000, m
    with pytest.raises(fk.KafkaError):
        p.send(topic, b"x" * 2_000_000).result(10)
    assert p.metrics()["records_errored"] == 1
    assert p.partitions_for(topic) == [0]
    p.close()
    with pytest.raises(fk.KafkaError):
        p.send(topic, b"after close")


def test_send_batch_lists_and_arrow(bs):
    topic = _topic(bs, 2)
    with fk.Producer(bs) as p:
        bf = p.send_batch(topic, [b"a", b"b", None], keys=[b"k1", b"k2", b"k3"])
        mds = bf.result(10)
        assert [m.topic for m in mds] == [topic] * 3
        pa = pytest.importorskip("pyarrow")
        arr = pa.array(["x", "y", "z", "w"])
        mds2 = p.send_batch(topic, arr, keys=pa.array([b"1", b"2", b"3", b"4"], pa.binary())).result(10)
        assert len(mds2) == 4
        with pytest.raises(ValueError, match="keys"):
            p.send_batch(topic, [b"a"], keys=[b"1", b"2"])
        with pytest.raises(ValueError, match="not binary"):
            p.send_batch(topic, pa.array([1, 2]))
        # Sliced, large and chunked Arrow columns with nulls, read in place.
        big = pa.array([b"l1", None, b"", b"l4"], pa.large_binary()).slice(1)
        assert len(p.send_batch(topic, big).result(10)) == 3
        chunked = pa.chunked_array([pa.array(["c1"], pa.large_string()), pa.array(["c2", None], pa.large_string())])
        assert len(p.send_batch(topic, chunked, keys=pa.array([b"a", b"b", b"c"])).result(10)) == 3
        # Columns without nulls are read by a path of their own: a sliced
        # one must start at its slice, with and without (dense) keys.
        dense = pa.array([b"d0", b"d1", b"", b"d333"], pa.binary()).slice(1)
        mds3 = p.send_batch(topic, dense).result(10)
        assert [m.serialized_value_size for m in mds3] == [2, 0, 4]
        mds4 = p.send_batch(topic, dense, keys=pa.array(["k0", "key1", "k", "k3"]).slice(1)).result(10)
        assert [(m.serialized_key_size, m.serialized_value_size) for m in mds4] == [(4, 2), (1, 0), (2, 4)]

        async def main():
            return await p.send_batch(topic, [b"q"])

        assert len(asyncio.run(main())) == 1
    got = _consume_all(bs, topic, 2, 20)
    values = [m.value() for m in got]
    assert sorted(v or b"" for v in values) == sorted(
        [b"a", b"b", b"", b"x", b"y", b"z", b"w", b"q", b"", b"", b"l4", b"c1", b"c2", b""]
        + [b"d1", b"", b"d333"] * 2)
    assert values.count(None) == 3, "Arrow nulls and list None become null values, not empty ones"
    assert sorted((m.key(), m.value()) for m in got if m.value() in (b"d1", b"d333") and m.key()) == [
        (b"k3", b"d333"), (b"key1", b"d1")]


def test_librdkafka_partitioners_and_a_python_callable(bs):
    import zlib

    topic = _topic(bs, 5)
    with fk.Producer(bs, partitioner="consistent") as p:
        for k in (b"a", b"bb", b"key-7"):
            assert p.send(topic, b"v", key=k).result(10).partition == zlib.crc32(k) % 5
    with fk.Producer(bs, partitioner=lambda key, parts, avail: parts[-1]) as p:
        assert p.send(topic, b"v", key=b"x").result(10).partition == 4
    with fk.Producer(bs, partitioner="round_robin") as p:
        assert [p.send(topic, b"v").result(10).partition for _ in range(5)] == [0, 1, 2, 3, 4]


def test_acks_zero_completes_with_offset_minus_one_and_records_land(bs):
    topic = _topic(bs, 1)
    with fk.Producer(bs, acks=0, enable_idempotence=False, linger_ms=0) as p:
        futs = [p.send(topic, f"z{i}".encode()) for i in range(20)]
        assert p.flush(20) == 0
        mds = [f.result(0) for f in futs]
    assert {md.offset for md in mds} == {-1}, "acks=0: the broker sends no offset"
    got = _consume_all(bs, topic, 1, 20)
    assert sorted(m.value() for m in got) == sorted(f"z{i}".encode() for i in range(20))


def test_create_time_topic_reports_the_records_own_timestamp(bs):
    # Tansu ignores message.timestamp.type=LogAppendTime (it stores CreateTime
    # and answers log_append_time_ms=-1), so the LogAppendTime half of this
    # contract is tested on the mock cluster below.
    topic = _topic(bs, 1)
    create_time = 1_000_000_000_000
    with fk.Producer(bs, linger_ms=0) as p:
        md = p.send(topic, b"v", timestamp_ms=create_time).result(20)
    (m,) = _consume_all(bs, topic, 1, 1)
    assert m.timestamp() == (1, create_time)  # TIMESTAMP_CREATE_TIME
    assert md.timestamp_ms == create_time


def test_log_append_time_from_the_broker_is_reported_not_the_create_time(mock_cluster):
    # librdkafka's mock broker answers every successful Produce with
    # LogAppendTimeMs = 1234 (as a broker does for a LogAppendTime topic).
    m = mock_cluster
    m.create_topic("lat", 1, 1)
    create_time = 1_000_000_000_000
    with fk.Producer(m.bootstrap_servers, linger_ms=20) as p:
        futs = [p.send("lat", b"v", timestamp_ms=create_time + i) for i in range(5)]
        mds = [f.result(20) for f in futs]
    assert [md.timestamp_ms for md in mds] == [1234] * 5


def _wait_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child hung")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_fork_child_makes_its_own_producer_and_the_parent_keeps_working(bs):
    topic = _topic(bs, 1)
    p = fk.Producer(bs, linger_ms=0)
    p.send(topic, b"parent-before").result(20)  # sender thread and connections live
    pid = os.fork()
    if pid == 0:  # child: only this thread exists; never return into pytest
        code = 1
        try:
            with fk.Producer(bs, linger_ms=0) as c:
                c.send(topic, b"child").result(20)
            code = 0
        finally:
            os._exit(code)
    p.send(topic, b"parent-during").result(20)
    assert _wait_child(pid, 60) == 0, "the child could not produce"
    p.send(topic, b"parent-after").result(20)
    p.close()
    got = sorted(m.value() for m in _consume_all(bs, topic, 1, 4))
    assert got == [b"child", b"parent-after", b"parent-before", b"parent-during"]


def test_send_batch_one_completion_reports_each_record(mock_cluster):
    m = mock_cluster
    m.create_topic("sb", 2, 1)
    with fk.Producer(m.bootstrap_servers, linger_ms=5, max_request_size=10_000) as p:
        values = [b"a", b"x" * 20_000, b"c"] + [b"%d" % i for i in range(3000)]
        bf = p.send_batch("sb", values, partition=1)
        seen = []
        bf.add_done_callback(seen.append)
        assert p.flush(20) == 0
        assert seen == [bf], "the callback runs once, for the whole batch"
        out = bf.results(0)
        assert len(out) == len(bf) == len(values)
        assert isinstance(out[1], fk.MessageSizeTooLargeError), "only the oversized record fails"
        ok = [r for i, r in enumerate(out) if i != 1]
        assert all(r.partition == 1 for r in ok)
        assert [r.offset for r in ok] == list(range(ok[0].offset, ok[0].offset + len(ok)))
        with pytest.raises(fk.MessageSizeTooLargeError):
            bf.result(0)
        assert p.send_batch("sb", []).result(1) == []
        with pytest.raises(ValueError, match="partition"):
            p.send_batch("sb", [b"v"], partition=7)


def test_send_batch_names_a_bad_item_and_appends_nothing(bs):
    topic = _topic(bs, 1)
    with fk.Producer(bs) as p:
        with pytest.raises(TypeError, match="values must hold bytes or None, not str"):
            p.send_batch(topic, [b"a", "b", b"c"])
        with pytest.raises(TypeError, match="keys must hold bytes or None, not int"):
            p.send_batch(topic, [b"a", b"b"], keys=[b"k", 1])
        assert p.flush(10) == 0
        assert p.metrics()["records_sent"] == 0


def test_send_batch_sends_the_items_it_was_given_while_the_caller_changes_the_list(mock_cluster):
    """The records are read with the GIL released, after the call took its own
    reference to every item: a list changed by another thread meanwhile, and
    its old items dropped, changes nothing that is sent. bytearray and bytes
    subclasses are taken too, from a tuple."""
    m = mock_cluster
    m.create_topic("sbl", 1, 1)
    m.set_partition_leader("sbl", 0, 1)
    n = 2000
    values = [b"v%05d" % i + b"." * 94 for i in range(n)]  # 100 B: 200 KB vs a 64 KiB buffer
    expected = list(values)

    class Sub(bytes):
        pass

    with fk.Producer(m.bootstrap_servers, buffer_memory=64 * 1024, batch_size=16 * 1024) as p:
        p.send("sbl", b"warm-up").result(30)
        m.set_rtt(1, 400)
        changed_at = []

        def change():
            time.sleep(0.1)
            values[:] = [b"changed"] * n
            changed_at.append(time.monotonic())

        t = threading.Thread(target=change)
        t.start()
        # Acknowledgements take 400 ms, so the call waits for memory part way
        # through, with the GIL released: the change runs inside the call.
        out = p.send_batch("sbl", values)
        returned_at = time.monotonic()
        t.join()
        assert changed_at[0] < returned_at, "the list changed only after the call"
        m.set_rtt(1, 0)
        # Exact bytes and None first (read by the fast loop), then the others.
        mixed = p.send_batch("sbl", (b"f", None, bytearray(b"ba"), Sub(b"sub"), None, b"b"))
        assert [r.serialized_value_size for r in mixed.result(30)] == [1, -1, 2, 3, -1, 1]
        # A tuple handed to the core as it is stays the cycle collector's
        # (only a tuple the core makes for itself is untracked).
        own = tuple([b"t1", b"t2"])
        assert gc.is_tracked(own)
        done, _ = p._p.send_many("sbl", own, None, None, True)
        assert gc.is_tracked(own)
        done.result(30)
        assert len(out.result(30)) == n
    got = [r.value() for r in _consume_all(m.bootstrap_servers, "sbl", 1, 1 + n + 8, timeout=60)]
    assert got[1:1 + n] == expected
    assert got[1 + n:] == [b"f", None, b"ba", b"sub", None, b"b", b"t1", b"t2"]


def test_concurrent_send_batch_calls_apply_the_answers_left_to_them_in_order(mock_cluster):
    """Answers and steps that arrive while a `send_batch` call holds the
    producer's lock are left to that call, which applies them between slices
    of its appends (producer/handover.rs); one that runs out of memory applies
    them before it waits. Two threads append long calls at once past a small
    buffer, with acknowledgements 20 ms away, while a third sends one record
    at a time: every record is delivered once, each thread's records in call
    order in the partition, and nothing is left pending."""
    m = mock_cluster
    m.create_topic("hand", 1, 1)
    m.set_partition_leader("hand", 0, 1)
    calls, per_call = 4, 3000
    with fk.Producer(m.bootstrap_servers, buffer_memory=128 * 1024, batch_size=16 * 1024) as p:
        p.send("hand", b"warm-up").result(30)
        m.set_rtt(1, 20)
        results: dict = {}

        def batches(t):
            out = []
            for c in range(calls):
                vals = [b"%d:%02d:%05d" % (t, c, i) + b"." * 40 for i in range(per_call)]
                out.append(p.send_batch("hand", vals))
            results[t] = [md for f in out for md in f.result(60)]

        def singles():
            results["s"] = [p.send("hand", b"s:%04d" % i).result(60) for i in range(200)]

        threads = [threading.Thread(target=batches, args=(t,)) for t in (1, 2)]
        threads.append(threading.Thread(target=singles))
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads)
        assert p.flush(30) == 0
        assert p.metrics()["records_errored"] == 0
    for t in (1, 2):
        offs = [md.offset for md in results[t]]
        assert len(offs) == calls * per_call
        assert offs == sorted(offs) and len(set(offs)) == len(offs), f"thread {t}"
    every = [md.offset for md in results[1] + results[2] + results["s"]]
    assert len(set(every)) == len(every) == 2 * calls * per_call + 200
    got = _consume_all(m.bootstrap_servers, "hand", 1, 1 + len(every), timeout=60)
    for t in (b"1", b"2"):
        seq = [g.value()[:8] for g in got if g.value().startswith(t + b":")]
        assert seq == sorted(seq) and len(seq) == calls * per_call


def test_keyed_send_batch_past_a_full_buffer_keeps_each_partitions_call_order(bs):
    """A keyed call is appended partition by partition; when the buffer fills
    part way (block=False hands the rest to the deferral, in call order), every
    record still lands once, and each partition holds its records in call order."""
    topic = _topic(bs, 3)
    n = 6000
    keys = [b"key-%d" % (i % 23) for i in range(n)]
    values = [b"%06d" % i + b"." * 194 for i in range(n)]  # 200 B: 1.2 MB vs a 256 KiB buffer
    with fk.Producer(bs, buffer_memory=256 * 1024, batch_size=16 * 1024, linger_ms=5) as p:
        out = p.send_batch(topic, values, keys=keys, block=False).result(60)
    assert len(out) == n
    for part in range(3):
        offs = [m.offset for m in out if m.partition == part]
        assert offs == sorted(offs) and len(set(offs)) == len(offs), part
    got = _consume_all(bs, topic, 3, n)
    assert len(got) == n
    for part in range(3):
        seq = [int(m.value()[:6]) for m in sorted(got, key=lambda m: m.offset()) if m.partition() == part]
        assert seq == sorted(seq), f"partition {part} out of call order"


def test_send_batch_reports_each_records_sizes_and_timestamp(bs):
    """Each record of a call reports its own key and value sizes (-1 for
    None; from a list or from Arrow columns) and its create timestamp, including records a full buffer left to
    the deferral thread (block=False), which are stamped when appended."""
    # Lists are read where CPython keeps their items (producer/byte_list.rs)
    # on the interpreters whose layout it knows: a probe that stopped
    # matching fails here, not only as a slower path.
    if sys.implementation.name == "cpython" and (3, 10) <= sys.version_info[:2] <= (3, 14):
        assert fk._core._test_byte_list_layout()
    topic = _topic(bs, 3)
    n = 4000
    keys = [None if i % 7 == 0 else b"k" * (i % 11) for i in range(n)]
    values = [None if i % 13 == 0 else b"v" * (50 + i % 300) for i in range(n)]
    with fk.Producer(bs, buffer_memory=128 * 1024, batch_size=16 * 1024) as p:
        before = int(time.time() * 1000)
        unkeyed = p.send_batch(topic, values, partition=1).result(60)
        keyed = p.send_batch(topic, values, keys=keys, block=False).result(60)
        # Arrow columns, nulls in both: sizes read off their offsets.
        pa = pytest.importorskip("pyarrow")
        arrow = p.send_batch(topic, pa.array(values, pa.binary()), keys=pa.array(keys, pa.binary())).result(60)
        after = int(time.time() * 1000)
    for out, ks in ((unkeyed, [None] * n), (keyed, keys), (arrow, keys)):
        assert [m.serialized_key_size for m in out] == [-1 if k is None else len(k) for k in ks]
        assert [m.serialized_value_size for m in out] == [-1 if v is None else len(v) for v in values]
        assert all(before <= m.timestamp_ms <= after for m in out), (before, after)
    assert [m.offset for m in unkeyed] == list(range(unkeyed[0].offset, unkeyed[0].offset + n))


def test_keyed_send_batch_reports_each_record_where_it_went(bs):
    """Keyed records of one call spread over partitions: each record's result
    names the partition and offset it really got (read back and compared)."""
    topic = _topic(bs, 3)
    n = 3000
    keys = [b"key-%d" % (i % 37) for i in range(n)]
    values = [b"value-%d" % i for i in range(n)]
    with fk.Producer(bs) as p:
        single = {k: p.send(topic, b"probe", key=k).result(10).partition for k in set(keys)}
        out = p.send_batch(topic, values, keys=keys).result(20)
    assert [m.partition for m in out] == [single[k] for k in keys]
    for part in range(3):
        offs = [m.offset for m in out if m.partition == part]
        assert offs == sorted(offs) and len(set(offs)) == len(offs)
    where = {(m.partition, m.offset): values[i] for i, m in enumerate(out)}
    got = _consume_all(bs, topic, 3, n + len(single))
    read = {(m.partition(), m.offset()): m.value() for m in got}
    assert all(read[k] == v for k, v in where.items())
