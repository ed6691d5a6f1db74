"""Resource bounds and broker restarts (issue 8)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

import ferrokafka as fk
from ferrokafka.testing import EmbeddedBroker
from ferrokafka.testing._broker import free_port

TP = fk.TopicPartition


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_no_fd_or_thread_leak_over_open_close_cycles(embedded_broker, topic_name):
    bs = embedded_broker.bootstrap_servers
    with fk.Producer(bs) as p:  # warm up: runtime threads, the topic
        p.send(topic_name, b"x").result(10)
    fds0, threads0 = _fds(), threading.active_count()
    native0 = len(os.listdir("/proc/self/task"))
    # 334 rounds of producer + consumer + admin: 1,002 client open/close
    # cycles, each with a real round trip (benches/soak.py runs 3,000).
    cycles = int(os.environ.get("FERROKAFKA_LEAK_CYCLES", "334"))
    for i in range(cycles):
        p = fk.Producer(bs, linger_ms=0)
        p.send(topic_name, b"%d" % i).result(10)
        p.close()
        c = fk.Consumer(bs, auto_offset_reset="earliest")
        c.assign([TP(topic_name, 0)])
        c.poll(50)
        c.close()
        a = fk.Admin(bs)
        a.list_topics()
        a.close()
    time.sleep(0.5)
    assert _fds() - fds0 <= 5, (fds0, _fds())
    assert threading.active_count() - threads0 <= 2
    native = len(os.listdir("/proc/self/task"))
    assert native - native0 <= 8, f"native threads {native0} -> {native} over {cycles} cycles"


def test_broker_killed_and_restarted_on_same_port():
    """SIGKILL the broker, start it again on the same port: the producer
    reconnects by itself; records sent during the outage are delivered after
    the restart; nothing reported delivered that the broker did not take."""
    port = free_port()
    b = EmbeddedBroker(port=port)
    try:
        p = fk.Producer(b.bootstrap_servers, linger_ms=0, reconnect_backoff_ms=50, reconnect_backoff_max_ms=500,
                        request_timeout_ms=3000, delivery_timeout_ms=60_000, max_block_ms=30_000)
        assert p.send("restart", b"before").result(10).offset == 0
        os.killpg(os.getpgid(b._proc.pid), signal.SIGKILL)
        b._proc.wait(5)
        futs = [p.send("restart", b"during-%d" % i) for i in range(20)]
        time.sleep(1.0)
        assert not any(f.done() and f.exception(0) is None for f in futs), "acknowledged while the broker was dead"
        t0 = time.time()
        b2 = EmbeddedBroker(port=port)
        try:
            for f in futs:
                f.result(30)
            recovered = time.time() - t0
            # memory storage: the restarted broker holds exactly what it acknowledged after restart
            c = fk.Consumer(b2.bootstrap_servers, auto_offset_reset="earliest")
            parts = c.list_topics()["restart"]  # auto-created again, broker default partitions
            c.assign([TP("restart", q) for q in range(parts)])
            got = []
            deadline = time.time() + 15
            while len(got) < 20 and time.time() < deadline:
                got += c.poll(200)
            c.close()
            assert sorted(m.value for m in got) == sorted(b"during-%d" % i for i in range(20))
            print(f"restart recovery: {recovered * 1000:.0f} ms from broker start to all 20 delivered")
        finally:
            p.close()
            b2.close()
    finally:
        b.close()


def test_group_consumer_survives_broker_restart():
    """A consumer in a group, mid-stream, when the broker is SIGKILLed and
    restarted on the same port (memory storage: the group, its offsets and
    the log are gone): it reconnects, rejoins and consumes what is produced
    after the restart, without user action. Its position (1) is still inside
    the new log, so it resumes there (as the Java consumer does) unless the
    rejoin revoked the partition and reset it to earliest: either way it
    gets every record from offset 1 on, and nothing from before."""
    port = free_port()
    b = EmbeddedBroker(port=port)
    b2 = None
    topic = "restart-group"
    c = None
    try:
        with fk.Producer(b.bootstrap_servers, linger_ms=0) as p:
            p.send(topic, b"before", partition=0).result(10)
        c = fk.Consumer(b.bootstrap_servers, group_id="restart-g", auto_offset_reset="earliest",
                        session_timeout_ms=6000, heartbeat_interval_ms=300, reconnect_backoff_ms=50,
                        reconnect_backoff_max_ms=500, request_timeout_ms=3000, enable_auto_commit=False)
        c.subscribe([topic])
        got = []
        deadline = time.time() + 30
        while not got and time.time() < deadline:
            got = c.poll(200)
        assert [m.value for m in got] == [b"before"]
        c.commit()
        os.killpg(os.getpgid(b._proc.pid), signal.SIGKILL)
        b._proc.wait(5)
        for _ in range(5):  # polls while the broker is dead: empty or a KafkaError, never a crash
            try:
                assert c.poll(200) == []
            except fk.KafkaError:
                pass
        b2 = EmbeddedBroker(port=port)
        with fk.Producer(b2.bootstrap_servers, linger_ms=0) as p:
            for i in range(20):
                p.send(topic, b"after-%d" % i, partition=0).result(10)
        after = []
        deadline = time.time() + 45
        while len({m.value for m in after}) < 19 and time.time() < deadline:
            try:
                after += c.poll(200)
            except fk.KafkaError:
                pass  # the rejoin may surface one retriable group error
        values = {m.value for m in after}
        assert {b"after-%d" % i for i in range(1, 20)} <= values <= {b"after-%d" % i for i in range(20)}, sorted(values)
        assert all(m.partition == 0 for m in after)
    finally:
        if c is not None:
            c.close()
        if b2 is not None:
            b2.close()
        b.close()


def test_interpreter_exit_with_open_clients_does_not_hang(embedded_broker, tmp_path):
    """A script that leaves a producer with undelivered records, a consumer in
    a group and an admin client open, and just ends: the process exits."""
    import subprocess
    import sys

    script = tmp_path / "leave_open.py"
    script.write_text(
        "import ferrokafka as fk\n"
        f"bs = {embedded_broker.bootstrap_servers!r}\n"
        "p = fk.Producer(bs, linger_ms=60_000)\n"
        "p.send('exit-test', b'x')\n"
        "c = fk.Consumer(bs, group_id='exit-g', session_timeout_ms=6000, heartbeat_interval_ms=300)\n"
        "c.subscribe(['exit-test'])\n"
        "c.poll(500)\n"
        "a = fk.Admin(bs)\n"
        "a.list_topics()\n"
        "print('done', flush=True)\n"
    )
    t0 = time.time()
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert "done" in r.stdout, r.stderr[-2000:]
    assert time.time() - t0 < 30


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_rss_flat_over_a_produce_consume_soak(embedded_broker, topic_name):
    """RSS after a warm-up round vs after 5 more rounds of 20k records through
    a producer and a consumer: growth stays under 40 MB (buffers are reused,
    decoded fetches are released)."""
    bs = embedded_broker.bootstrap_servers
    page = os.sysconf("SC_PAGE_SIZE")

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    p = fk.Producer(bs, linger_ms=5)
    c = fk.Consumer(bs, auto_offset_reset="earliest")
    c.assign([TP(topic_name, 0)])

    def round_(k):
        for i in range(20_000):
            p.send(topic_name, value=b"%d-%d" % (k, i) * 8, partition=0)
        assert p.flush(60) == 0
        got = 0
        deadline = time.time() + 60
        while got < 20_000 and time.time() < deadline:
            got += len(c.poll(200, max_records=5000))
        assert got == 20_000

    round_(0)
    base = rss()
    for k in range(1, 6):
        round_(k)
    growth = rss() - base
    p.close()
    c.close()
    print(f"RSS growth over 5 x 20k records: {growth / 1e6:.1f} MB")
    assert growth < 40e6, f"RSS grew {growth / 1e6:.1f} MB"
