"""Producer throughput: ferrokafka vs confluent-kafka, same broker, same run.

    python benches/bench_producer.py [--records N] [--size BYTES] [--acks 1|all]
                                     [--compression none,lz4] [--bootstrap HOST:PORT]

Starts an embedded Tansu broker unless --bootstrap is given. For each
compression codec, each client sends N records of SIZE bytes (keyed, linger
5 ms, batch 64 KiB, the same acks for all; idempotence on only with acks=all)
and waits for every delivery report; the figure is records/s and MB/s from the
first send to the last acknowledgement, and CPU seconds per million records
(getrusage, all threads of this process). Prints the ratios to confluent-kafka.
"""

from __future__ import annotations

import argparse
import resource
import time
import uuid

import ferrokafka as fk


def _topic(bs: str, partitions: int) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    name = "bench-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(10)
    return name


def _cpu() -> float:
    """This process's user+system CPU seconds (all threads, librdkafka's too)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _fk_cfg(acks: str, codec: str) -> dict:
    return dict(linger_ms=5, batch_size=65536, acks=acks, enable_idempotence=acks == "all",
                compression_type=codec)


def bench_ferrokafka_batch(bs: str, topic: str, n: int, payload: bytes, acks: str, codec: str,
                           arrow: bool = False) -> tuple[float, float]:
    p = fk.Producer(bs, **_fk_cfg(acks, codec))
    p.send(topic, b"warm-up").result(10)
    keys = [str(i).encode() for i in range(n)]
    values = [payload] * n
    if arrow:
        import pyarrow as pa

        keys, values = pa.array(keys, pa.binary()), pa.array(values, pa.binary())
    c0, t0 = _cpu(), time.perf_counter()
    for i in range(0, n, 10_000):
        p.send_batch(topic, values[i:i + 10_000], keys=keys[i:i + 10_000])
    left = p.flush(120)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    p.close()
    assert left == 0, left
    return dt, cpu


def bench_ferrokafka(bs: str, topic: str, n: int, payload: bytes, acks: str, codec: str) -> tuple[float, float]:
    p = fk.Producer(bs, **_fk_cfg(acks, codec))
    p.send(topic, b"warm-up").result(10)
    keys = [str(i).encode() for i in range(n)]
    c0, t0 = _cpu(), time.perf_counter()
    send = p.send
    for k in keys:
        send(topic, payload, key=k)
    left = p.flush(120)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    p.close()
    assert left == 0, left
    return dt, cpu


def bench_confluent(bs: str, topic: str, n: int, payload: bytes, acks: str, codec: str) -> tuple[float, float]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 65536, "acks": acks,
                  "enable.idempotence": acks == "all", "compression.type": codec,
                  "queue.buffering.max.messages": 2_000_000})
    delivered = [0]

    def on_delivery(err, msg):
        if err is None:
            delivered[0] += 1

    p.produce(topic, b"warm-up", on_delivery=on_delivery)
    p.flush(10)
    keys = [str(i).encode() for i in range(n)]
    c0, t0 = _cpu(), time.perf_counter()
    produce = p.produce
    for k in keys:
        while True:
            try:
                produce(topic, payload, key=k, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
    p.flush(120)
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    assert delivered[0] == n + 1, delivered[0]
    return dt, cpu


def latency(bs: str, client: str, rate: int, seconds: float, payload: bytes) -> tuple[float, float]:
    """p50/p99 ms from send to delivery report at a fixed rate, linger 0.

    Both clients are polled in the same loop between sends (delivery reports
    run in the caller's thread for both), so the resolution is the send
    interval (100 µs at 10k msg/s) for both alike."""
    topic = _topic(bs, 3)
    lat: list = []
    n = int(rate * seconds)
    interval = 1.0 / rate
    if client == "ferrokafka":
        p = fk.Producer(bs, linger_ms=0, acks="all")
        p.send(topic, b"warm").result(10)

        def send(i: int) -> None:
            t = time.perf_counter()
            p.send(topic, payload, key=str(i).encode()).add_done_callback(
                lambda f, t=t: lat.append(time.perf_counter() - t))

        poll, finish = (lambda: p.poll(0)), (lambda: (p.flush(30), p.close()))
    else:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "acks": "all", "enable.idempotence": True})
        p.produce(topic, b"warm")
        p.flush(10)

        def send(i: int) -> None:
            t = time.perf_counter()
            p.produce(topic, payload, key=str(i).encode(),
                      on_delivery=lambda e, m, t=t: lat.append(time.perf_counter() - t))

        poll, finish = (lambda: p.poll(0)), (lambda: p.flush(30))
    start = time.perf_counter()
    for i in range(n):
        send(i)
        while time.perf_counter() < start + (i + 1) * interval:
            poll()
    finish()
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99) - 1] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--acks", default="1", choices=["0", "1", "all"])
    ap.add_argument("--compression", default="none,lz4", help="comma-separated codecs, one table each")
    ap.add_argument("--bootstrap")
    ap.add_argument("--latency-rate", type=int, default=10_000, help="0 to skip the latency run")
    args = ap.parse_args()
    payload = b"x" * args.size
    broker = None
    bs = args.bootstrap
    if bs is None:
        broker = fk.testing.EmbeddedBroker()
        broker.__enter__()
        bs = broker.bootstrap_servers
    try:
        for codec in args.compression.split(","):
            rows = []
            variants = (
                ("ferrokafka send()", bench_ferrokafka),
                ("confluent-kafka produce()", bench_confluent),
                ("ferrokafka send_batch(list)", bench_ferrokafka_batch),
                ("ferrokafka send_batch(arrow)", lambda *a: bench_ferrokafka_batch(*a, arrow=True)),
            )
            for name, fn in variants:
                topic = _topic(bs, 3)
                # CPU from the first send to the last acknowledgement (input
                # lists and Arrow arrays are built before the clock starts).
                dt, cpu = fn(bs, topic, args.records, payload, args.acks, codec)
                rows.append((name, args.records / dt, args.records * args.size / dt / 1e6,
                             cpu / args.records * 1e6))
            print(f"\n{args.records:,} x {args.size} B, acks={args.acks}, compression={codec}, "
                  f"linger 5 ms, batch 64 KiB")
            print(f"{'client':<30} {'records/s':>12} {'MB/s':>8} {'CPU s / 1M rec':>15}")
            for name, rps, mbs, cpu in rows:
                print(f"{name:<30} {rps:>12,.0f} {mbs:>8.1f} {cpu:>15.2f}")
            ck = rows[1]
            for name, rps, _, cpu in rows[:1] + rows[2:]:
                print(f"{name} / confluent-kafka: throughput {rps / ck[1]:.2f}x, "
                      f"CPU per record {cpu / ck[3]:.2f}x ({ck[3] / cpu:.2f}x less)")
        if args.latency_rate:
            print(f"\nacknowledgement latency at {args.latency_rate} msg/s, linger 0, acks=all (3 s):")
            for client in ("ferrokafka", "confluent-kafka"):
                p50, p99 = latency(bs, client, args.latency_rate, 3.0, payload)
                print(f"{client:<16} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    finally:
        if broker is not None:
            broker.__exit__(None, None, None)


if __name__ == "__main__":
    main()
