"""Observability (issue #23): metrics() of every client with Java's names,
Consumer.lag(), stats_cb, and the Prometheus text export, against the
embedded Tansu broker."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest

import ferrokafka as fk

TP = fk.TopicPartition


@pytest.fixture
def bs(embedded_broker):
    return embedded_broker.bootstrap_servers


def _topic(bs: str, partitions: int = 2) -> str:
    name = f"m-{uuid.uuid4().hex[:10]}"
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(name, partitions, 1)])
    return name


def _produce(bs, topic, n, partitions):
    with fk.Producer(bs, linger_ms=5) as p:
        for i in range(n):
            p.send(topic, value=b"v%d" % i, partition=i % partitions)
        assert p.flush(30) == 0


def _poll_until(c, pred, timeout=20.0, max_records=None):
    got = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        got.extend(c.poll(100, max_records=max_records))
        if pred(got):
            break
    return got


def test_consumer_metrics_count_records_and_lag(bs):
    topic = _topic(bs)
    _produce(bs, topic, 200, 2)
    # Small fetches so the consumer is behind after its first polls.
    c = fk.Consumer(bs, auto_offset_reset="earliest", max_partition_fetch_bytes=1024,
                    fetch_max_bytes=1024)
    tps = [TP(topic, 0), TP(topic, 1)]
    c.assign(tps)
    # A few records per poll: whatever a fetch brought, positions stay short of it.
    got = _poll_until(c, lambda g: len(g) >= 10, max_records=5)
    # Behind: the fetch saw the high watermark (100 per partition) while the
    # positions are short of it.
    lag = c.lag()
    assert set(lag) <= set(tps) and lag, lag
    m = c.metrics()
    assert m["records-lag-max"] > 0
    assert m["records-lag-max"] == max(lag.values())
    for tp, n in lag.items():
        key = f"records-lag{{topic={topic},partition={tp.partition}}}"
        assert m[key] == n == 100 - c.position(tp)
    assert m["records-consumed-total"] == len(got)

    got += _poll_until(c, lambda g: len(got) + len(g) >= 200)
    assert len(got) == 200
    # Stays behind until a fetch at the end brings the last watermark.
    deadline = time.time() + 10
    while c.metrics()["records-lag-max"] != 0 and time.time() < deadline:
        c.poll(100)
    m = c.metrics()
    assert m["records-consumed-total"] == 200
    assert m["records-lag-max"] == 0
    assert c.lag() == {tp: 0 for tp in tps}
    assert m["fetch-total"] >= 2 and m["fetch-latency-avg"] >= 0
    assert m["fetch-latency-max"] >= m["fetch-latency-avg"]
    assert m["bytes-consumed-total"] > 200
    assert m["records-per-request-avg"] == pytest.approx(200 / m["fetch-total"], rel=0.5)
    assert m["assigned-partitions"] == 2
    assert m["connection-count"] >= 1
    assert any(k.startswith("request-latency-avg{node-id=node-") for k in m)
    assert 0 <= m["io-wait-ratio"]
    c.close()


def test_consumer_commit_and_rebalance_metrics(bs):
    topic = _topic(bs, 1)
    _produce(bs, topic, 20, 1)
    c = fk.Consumer(bs, group_id=f"g-{topic}", enable_auto_commit=False, auto_offset_reset="earliest",
                    session_timeout_ms=6000, heartbeat_interval_ms=300)
    c.subscribe([topic])
    got = _poll_until(c, lambda g: len(g) >= 20)
    assert len(got) == 20
    m = c.metrics()
    assert m["commit-total"] == 0
    assert m["rebalance-total"] == 1
    assert m["rebalance-rate-per-hour"] > 0
    assert 0 <= m["last-rebalance-seconds-ago"] < 60
    c.commit()
    m = c.metrics()
    assert m["commit-total"] == 1
    assert m["commit-latency-avg"] > 0
    assert m["commit-latency-max"] >= m["commit-latency-avg"]
    c.close()


def test_producer_java_names_match_the_old_keys(bs):
    topic = _topic(bs, 2)
    with fk.Producer(bs, linger_ms=5) as p:
        for i in range(50):
            p.send(topic, value=b"x" * 10, partition=i % 2)
        assert p.flush(30) == 0
        m = p.metrics()
    assert m["record-send-total"] == m["records_sent"] == 50
    assert m["record-error-total"] == m["records_errored"] == 0
    assert m["request-total"] == m["requests_sent"] >= 1
    assert m["batch-size-avg"] == m["batch_size_avg"] > 0
    assert m["request-latency-avg"] == m["request_latency_avg_ms"] > 0
    assert m["request-latency-max"] >= m["request-latency-avg"]
    assert m["outgoing-byte-total"] == m["bytes_out"] > 500
    assert m["buffer-total-bytes"] == m["buffer_total_bytes"]
    assert m["buffer-available-bytes"] == m["buffer-total-bytes"]  # all delivered
    assert 0 < m["record-send-rate"] <= 50
    assert m["records-per-request-avg"] == pytest.approx(50 / m["request-total"])
    assert m[f"record-send-total{{topic={topic}}}"] == 50
    assert m[f"byte-total{{topic={topic}}}"] == m["outgoing-byte-total"]
    assert m["connection-count"] >= 1
    node_totals = [v for k, v in m.items() if k.startswith("request-total{node-id=")]
    assert sum(node_totals) == m["network-request-total"] >= m["request-total"]


def test_admin_metrics_count_requests_per_node(bs):
    with fk.Admin(bs) as a:
        before = a.metrics()
        a.list_topics()
        a.describe_cluster()
        m = a.metrics()
    assert m["network-request-total"] >= before.get("network-request-total", 0) + 2
    assert m["connection-count"] >= 1
    lat = {k: v for k, v in m.items() if k.startswith("request-latency-avg{node-id=node-")}
    assert lat and all(v >= 0 for v in lat.values())


def test_stats_cb_gets_json_snapshots_every_interval(bs):
    topic = _topic(bs, 1)
    got = []
    with fk.Producer(bs, linger_ms=5, statistics_interval_ms=100, stats_cb=got.append) as p:
        p.send(topic, value=b"x", partition=0)
        assert p.flush(30) == 0
        deadline = time.time() + 5
        while len(got) < 2 and time.time() < deadline:
            p.poll(0.05)
    assert len(got) >= 2
    snap = json.loads(got[-1])
    assert snap["type"] == "producer"
    assert snap["metrics"]["record-send-total"] == 1
    assert set(snap["metrics"]) >= {"record-send-rate", "request-latency-avg", "records_sent"}

    got_c = []
    c = fk.Consumer(bs, auto_offset_reset="earliest", statistics_interval_ms=100, stats_cb=got_c.append)
    c.assign([TP(topic, 0)])
    t0 = time.time()
    assert len(_poll_until(c, lambda g: len(g) >= 1, timeout=10)) == 1
    n = len(got_c)
    _poll_until(c, lambda g: len(got_c) > n and len(got_c) >= 2, timeout=10)
    assert len(got_c) >= 2
    # Not more often than the interval (polls every ~100 ms or faster).
    assert len(got_c) <= (time.time() - t0) / 0.1 + 1
    snap = json.loads(got_c[-1])
    assert snap["type"] == "consumer" and snap["metrics"]["records-consumed-total"] == 1
    assert f"records-lag{{topic={topic},partition=0}}" in snap["metrics"]
    c.close()


def test_stats_cb_never_called_when_interval_is_zero(bs):
    topic = _topic(bs, 1)
    got = []
    with fk.Producer(bs, stats_cb=got.append) as p:
        p.send(topic, value=b"x", partition=0)
        p.flush(30)
        end = time.time() + 0.5
        while time.time() < end:
            p.poll(0.05)
    assert got == []


def test_statistics_interval_without_stats_cb_is_refused():
    with pytest.raises(ValueError, match="stats_cb"):
        fk.Producer("localhost:1", statistics_interval_ms=1000)
    with pytest.raises(ValueError, match="stats_cb"):
        fk.Consumer("localhost:1", statistics_interval_ms=1000)


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*)\} (\S+)$')


def _parse_prometheus(text):
    """{(name, frozenset(labels)): value}; fails on any line that is not a
    TYPE line or a `name{labels} value` sample, or on a TYPE after its samples."""
    out, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge") and name not in typed
            typed.add(name)
            continue
        m = _SAMPLE.match(line)
        assert m, line
        name, labels, value = m.groups()
        assert name in typed, line
        out[(name, frozenset(re.findall(r'([a-zA-Z_]\w*)="([^"]*)"', labels)))] = float(value)
    return out


def test_prometheus_text_of_every_client(bs):
    from urllib.request import urlopen

    from ferrokafka.metrics import prometheus_text, serve

    topic = _topic(bs, 1)
    _produce(bs, topic, 5, 1)
    with fk.Producer(bs, client_id="prod-1") as p, fk.Admin(bs, client_id="adm") as a:
        p.send(topic, value=b"x", partition=0).result(30)
        c = fk.Consumer(bs, client_id="cons-1", auto_offset_reset="earliest")
        c.assign([TP(topic, 0)])
        assert len(_poll_until(c, lambda g: len(g) >= 6)) == 6
        a.list_topics()
        parsed = _parse_prometheus(prometheus_text(p, c, a))
        consumer = {("client_id", "cons-1")}
        assert parsed[("ferrokafka_consumer_records_consumed_total", frozenset(consumer))] == 6
        lag_key = frozenset(consumer | {("topic", topic), ("partition", "0")})
        assert parsed[("ferrokafka_consumer_records_lag", lag_key)] == c.lag()[TP(topic, 0)]
        assert parsed[("ferrokafka_producer_record_send_total", frozenset({("client_id", "prod-1")}))] == 1
        assert ("ferrokafka_producer_record_send_total",
                frozenset({("client_id", "prod-1"), ("topic", topic)})) in parsed
        assert not any("records_sent" in name for name, _ in parsed)  # aliases left out
        assert any(name == "ferrokafka_admin_request_total" and dict(labels).get("client_id") == "adm"
                   and dict(labels).get("node_id", "").startswith("node-") and v >= 1
                   for (name, labels), v in parsed.items())
        server = serve(0, c)
        try:
            with urlopen(f"http://127.0.0.1:{server.server_address[1]}/metrics", timeout=10) as r:
                scraped = _parse_prometheus(r.read().decode())
            assert ("ferrokafka_consumer_records_lag_max", frozenset(consumer)) in scraped
        finally:
            server.shutdown()
        c.close()
    with pytest.raises(TypeError):
        prometheus_text(object())
