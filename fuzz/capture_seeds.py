"""Record real broker answers as seeds for the `response` fuzz target.

A recording TCP proxy sits in front of an embedded Tansu broker (which
advertises the proxy's port, so every connection goes through it) and in
front of each broker of a librdkafka mock cluster (bootstrap only: the mock
advertises its own ports). ferrokafka and confluent-kafka clients then
produce, consume in a group, commit and run admin calls. Each response frame
is written to OUT/<api key>-<version>-<n> (header and body, no length prefix);
`cargo run --example seeds -- OUT` turns them into `seeds/response/`.

    python fuzz/capture_seeds.py /tmp/captured
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import threading
import time
from collections import Counter

import ferrokafka as fk
from ferrokafka.testing import EmbeddedBroker
from ferrokafka.testing._broker import free_port

PER_KIND = 4  # frames kept per (key, version)


class RecordingProxy:
    def __init__(self, port: int, upstream: tuple[str, int], out: str) -> None:
        self.upstream, self.out = upstream, out
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.counts: Counter = Counter()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.upstream)
            pending: dict[int, tuple[int, int]] = {}
            threading.Thread(target=self._pump, args=(c, u, pending, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, pending, False), daemon=True).start()

    @staticmethod
    def _read_exact(s: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise OSError("eof")
            buf += chunk
        return buf

    def _pump(self, src, dst, pending, is_request) -> None:
        try:
            while True:
                (n,) = struct.unpack(">i", self._read_exact(src, 4))
                frame = self._read_exact(src, n)
                if is_request:
                    key, ver, cid = struct.unpack(">hhi", frame[:8])
                    pending[cid] = (key, ver)
                else:
                    (cid,) = struct.unpack(">i", frame[:4])
                    kv = pending.pop(cid, None)
                    if kv is not None:
                        self._save(kv, frame)
                dst.sendall(struct.pack(">i", n) + frame)
        except OSError:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    def _save(self, kv, frame) -> None:
        with self.lock:
            k = self.counts[kv]
            if k >= PER_KIND:
                return
            self.counts[kv] += 1
        with open(os.path.join(self.out, f"{kv[0]}-{kv[1]}-{k}"), "wb") as f:
            f.write(frame)

    def close(self) -> None:
        self.sock.close()


def workload(bs: str, tag: str, mock: bool) -> None:
    topic = f"seed-{tag}"
    a = fk.Admin(bs)
    if not mock:
        a.create_topics([fk.NewTopic(topic, 2, 1)])
    a.list_topics()
    a.describe_cluster()
    with fk.Producer(bs, enable_idempotence=True, acks="all", compression_type="gzip", linger_ms=5) as p:
        for i in range(200):
            p.send(topic, key=b"k%d" % (i % 7), value=b"v" * (i % 50), headers=[("h", b"x")], partition=i % 2)
        p.flush(30)
    with fk.Producer(bs, compression_type="lz4", acks=1, enable_idempotence=False) as p:
        p.send(topic, value=b"plain", partition=0).result(10)
    c = fk.Consumer(bs, group_id=f"g-{tag}", auto_offset_reset="earliest", enable_auto_commit=False,
                    session_timeout_ms=6000, heartbeat_interval_ms=200)
    c.subscribe([topic])
    got, deadline = 0, time.time() + 30
    while got < 201 and time.time() < deadline:
        got += len(c.poll(200))
    c.commit()
    c.committed([fk.TopicPartition(topic, 0)])
    c.end_offsets([fk.TopicPartition(topic, 0)])
    c.offsets_for_times({fk.TopicPartition(topic, 0): 0})
    c.close()
    try:
        a.list_consumer_groups()
        a.list_consumer_group_offsets(f"g-{tag}")
    except fk.KafkaError:
        pass
    if not mock:
        a.delete_topics([topic])
    a.close()


def confluent_workload(bs: str, tag: str) -> None:
    import confluent_kafka as ck

    topic = f"seed-{tag}"
    p = ck.Producer({"bootstrap.servers": bs, "compression.type": "zstd", "linger.ms": 5})
    for i in range(50):
        p.produce(topic, value=b"ck-%d" % i, partition=0)
    p.flush(30)
    c = ck.Consumer({"bootstrap.servers": bs, "group.id": f"ck-{tag}", "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 200})
    c.subscribe([topic])
    deadline, n = time.time() + 20, 0
    while n < 50 and time.time() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            n += 1
    c.commit(asynchronous=False)
    c.close()


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/captured"
    os.makedirs(out, exist_ok=True)
    pport, bport = free_port(), free_port()
    broker = EmbeddedBroker(port=bport, advertised_port=pport)
    proxy = RecordingProxy(pport, ("127.0.0.1", bport), out)
    try:
        workload(f"127.0.0.1:{pport}", "tansu", mock=False)
        confluent_workload(f"127.0.0.1:{pport}", "tansu-ck")
    finally:
        proxy.close()
        broker.close()
    from ferrokafka.testing import MockCluster

    with MockCluster(num_brokers=1) as m:
        m.create_topic("seed-mock", 2, 1)
        host, port = m.bootstrap_servers.split(",")[0].rsplit(":", 1)
        mport = free_port()
        mproxy = RecordingProxy(mport, (host, int(port)), out)
        try:
            workload(f"127.0.0.1:{mport}", "mock", mock=True)
        finally:
            mproxy.close()
    kinds = sorted({tuple(map(int, f.split("-")[:2])) for f in os.listdir(out)})
    print(f"{len(os.listdir(out))} frames, {len(kinds)} (key, version) kinds: {kinds}")


if __name__ == "__main__":
    main()
