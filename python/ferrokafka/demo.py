"""The quick-start demo (``python -m ferrokafka demo``): check the broker is reachable,
produce a stream with the Producer, consume it back with the Consumer (checking every
byte), print the throughput of both.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid

_API_NAMES = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit",
              9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
              13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
              17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
              22: "InitProducerId", 36: "SaslAuthenticate"}


def _broker(bootstrap: str | None):
    bootstrap = bootstrap or os.environ.get("FERROKAFKA_BOOTSTRAP")
    if bootstrap:
        return contextlib.nullcontext(bootstrap)
    from .testing import EmbeddedBroker

    @contextlib.contextmanager
    def embedded():
        with EmbeddedBroker() as b:
            print(f"started embedded Tansu broker at {b.bootstrap_servers} (set FERROKAFKA_BOOTSTRAP to use yours)")
            yield b.bootstrap_servers

    return embedded()


def _rate(n: int, nbytes: int, secs: float) -> str:
    secs = max(secs, 1e-9)
    return f"{n} msgs in {secs:.2f}s = {n / secs:,.0f} msg/s, {nbytes / secs / 1e6:,.1f} MB/s"


def run(bootstrap: str | None = None, messages: int = 100_000, size: int = 100, topic: str | None = None) -> int:
    import ferrokafka as fk

    from .testing import api_versions

    print(f"ferrokafka {fk.__version__}")
    with _broker(bootstrap) as bs:
        first = bs.split(",")[0].strip()
        host, _, port = first.rpartition(":")
        try:
            versions = api_versions(host, int(port))
        except (OSError, ConnectionError) as e:
            print(f"cannot reach a Kafka broker at {first}: {e}")
            return 1
        print(f"broker {first} reachable; ApiVersions: " + ", ".join(
            f"{_API_NAMES.get(k, k)} v{lo}-{hi}" for k, (lo, hi) in sorted(versions.items()) if k in _API_NAMES))

        topic = topic or f"ferrokafka-demo-{uuid.uuid4().hex[:8]}"
        return _stream(fk, bs, topic, messages, size)


def _stream(fk, bs: str, topic: str, n: int, size: int) -> int:
    with contextlib.suppress(fk.KafkaError):  # already exists / auto-create is fine
        fk.Admin(bs).create_topics([fk.NewTopic(topic, 1, 1)])
    value = os.urandom(size)
    p = fk.Producer(bs, linger_ms=5)
    t0 = time.perf_counter()
    for _ in range(n):
        p.send(topic, value=value, partition=0)
    left = p.flush(timeout=60)
    dt = time.perf_counter() - t0
    p.close()
    if left:
        print(f"produce: {left} records not delivered")
        return 1
    print("produce: " + _rate(n, n * size, dt))

    c = fk.Consumer(bs, auto_offset_reset="earliest", enable_auto_commit=False)
    c.assign([fk.TopicPartition(topic, 0)])
    c.seek_to_beginning()
    got = 0
    t0 = time.perf_counter()
    deadline = t0 + 60
    while got < n and time.perf_counter() < deadline:
        for m in c.poll(timeout_ms=500, max_records=10_000):
            if m.value != value:
                print(f"consume: wrong bytes at offset {m.offset}")
                return 1
            got += 1
    dt = time.perf_counter() - t0
    c.close()
    print("consume: " + _rate(got, got * size, dt))
    return 0 if got == n else 1
