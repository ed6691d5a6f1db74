"""Metadata traffic of an idle producer, and time to first usable metadata.

    python benches/bench_metadata_idle.py [--idle-seconds 60]

Each client talks to the embedded Tansu broker through its own counting TCP
proxy, which reads the request frames and counts those with api key 3
(Metadata). A producer sends one record (so its topic is known), then sits
idle; the figure is Metadata requests per second over the idle window (the
Java semantics: nothing but the metadata.max.age.ms refresh, 5 min by
default, so ~0). "First metadata" is the time from constructing the client
to knowing the topic's partitions (ferrokafka: partitions_for; confluent:
list_topics(topic)).
"""

from __future__ import annotations

import argparse
import socket
import struct
import threading
import time
import uuid

import ferrokafka as fk
from ferrokafka.testing._net import pump


class CountingProxy:
    """Forwards one listening port to the broker; counts requests by api key."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.counts: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def count(self, client_id: str, key: int) -> int:
        with self.lock:
            return self.counts.get((client_id, key), 0)

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            threading.Thread(target=self._up, args=(c, b), daemon=True).start()
            threading.Thread(target=self._pipe, args=(b, c), daemon=True).start()

    def _up(self, src: socket.socket, dst: socket.socket) -> None:
        buf = bytearray()

        def count(data: bytes) -> None:
            buf.extend(data)
            while len(buf) >= 14:
                (n,) = struct.unpack(">i", buf[:4])
                if len(buf) < 4 + n:
                    break
                key, _ver, _corr, clen = struct.unpack(">hhih", buf[4:14])
                cid = bytes(buf[14:14 + clen]).decode(errors="replace") if clen > 0 else ""
                with self.lock:
                    self.counts[(cid, key)] = self.counts.get((cid, key), 0) + 1
                del buf[:4 + n]

        self._pipe(src, dst, count)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, observe=None) -> None:
        try:
            pump(src, dst, observe)
        finally:
            dst.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle-seconds", type=float, default=60.0)
    args = ap.parse_args()
    import subprocess

    from confluent_kafka import Producer as CkProducer
    from confluent_kafka.admin import AdminClient, NewTopic

    from ferrokafka.testing import _broker

    real_port = _broker.free_port()
    proxy = CountingProxy(("127.0.0.1", real_port))
    # The broker advertises the proxy, so every connection (bootstrap and
    # data) goes through it and every Metadata request is counted.
    url, adv = f"tcp://127.0.0.1:{real_port}", f"tcp://127.0.0.1:{proxy.port}"
    proc = subprocess.Popen([_broker._resolve_bin(), "broker", "--listener-url", url,
                             "--advertised-listener-url", adv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                _broker.api_versions("127.0.0.1", real_port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        bs = f"127.0.0.1:{proxy.port}"
        topic = "idle-" + uuid.uuid4().hex[:8]
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(topic, 3, 1)]).values():
            f.result(10)

        t0 = time.perf_counter()
        p = fk.Producer(bs, client_id="fk-idle")
        p.partitions_for(topic)
        fk_first = time.perf_counter() - t0
        p.send(topic, b"v").result(10)

        t0 = time.perf_counter()
        c = CkProducer({"bootstrap.servers": bs, "client.id": "ck-idle"})
        c.list_topics(topic, timeout=10)
        ck_first = time.perf_counter() - t0
        c.produce(topic, b"v")
        c.flush(10)

        time.sleep(1.0)  # let start-up traffic settle
        fk_before, ck_before = proxy.count("fk-idle", 3), proxy.count("ck-idle", 3)
        time.sleep(args.idle_seconds)
        c.poll(0)
        fk_idle = (proxy.count("fk-idle", 3) - fk_before) / args.idle_seconds
        ck_idle = (proxy.count("ck-idle", 3) - ck_before) / args.idle_seconds
        p.close()
        print(f"idle window {args.idle_seconds:.0f} s; Metadata requests counted by a proxy on every connection")
        print(f"{'client':<16} {'first metadata (ms)':>20} {'idle Metadata req/s':>20}")
        print(f"{'ferrokafka':<16} {fk_first * 1000:>20.1f} {fk_idle:>20.3f}")
        print(f"{'confluent-kafka':<16} {ck_first * 1000:>20.1f} {ck_idle:>20.3f}")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
