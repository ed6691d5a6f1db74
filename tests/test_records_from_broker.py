"""Issue 2: record batches that confluent-kafka (librdkafka) produced to the
embedded broker, fetched raw with our NetworkClient and decoded with
decode_record_batch, give back exactly what was sent, for every codec."""

from __future__ import annotations

import time

import pytest

import ferrokafka as fk
from ferrokafka.protocol import FetchRequest, MetadataRequest, decode_record_batch


def _call(nc, node, request, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not nc.ready(node):
        nc.poll(20)
        assert time.monotonic() < deadline, "node never ready"
    nc.send(nc.new_client_request(node.id, request))
    while time.monotonic() < deadline:
        for r in nc.poll(200):
            assert not r.disconnected and r.version_mismatch is None, r.error
            return r.response_body
    raise AssertionError("no answer")


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_batches_decode_exactly(embedded_broker, confluent_kafka, topic_name, codec):
    bs = embedded_broker.bootstrap_servers
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([confluent_kafka.admin.NewTopic(topic_name, 1, 1)]).values():
        f.result(10)
    p = confluent_kafka.Producer({"bootstrap.servers": bs, "compression.type": codec,
                                  "linger.ms": 20, "enable.idempotence": True})
    sent = []
    for i in range(400):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = None if i % 11 == 0 else (f"value-{i}-".encode() * (i % 9 + 1))
        headers = [("h", f"{i}".encode()), ("null", None)] if i % 3 == 0 else None
        ts = 1_700_000_000_000 + i
        p.produce(topic_name, value=value, key=key, headers=headers, timestamp=ts)
        sent.append((key, value, headers or [], ts))
    assert p.flush(20) == 0

    nc = fk.NetworkClient(bs)
    try:
        md = _call(nc, nc.least_loaded_node(), MetadataRequest([topic_name]))
        leader = md.topics[0].partitions[0].leader_id
        b = next(b for b in md.brokers if b.node_id == leader)
        node = fk.Node(b.node_id, b.host, b.port)
        got = []
        offset = 0
        while len(got) < len(sent):
            body = _call(nc, node, FetchRequest([(topic_name, [(0, offset, 1 << 20)])], max_wait_ms=100))
            part = body.responses[0].partitions[0]
            assert part.error_code == 0
            for rec in decode_record_batch(part.records or b""):
                if rec.offset >= offset:
                    got.append(rec)
                    offset = rec.offset + 1
    finally:
        nc.close()
    assert [r.offset for r in got] == list(range(len(sent)))
    for rec, (key, value, headers, ts) in zip(got, sent):
        assert rec.key == key
        assert rec.value == value
        assert rec.headers == headers
        assert rec.timestamp_ms == ts
        assert rec.compression == codec or codec == "none"
