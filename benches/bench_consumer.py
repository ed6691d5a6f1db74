"""Consumer throughput and CPU: ferrokafka poll / poll_arrow vs confluent-kafka, same run.

    python benches/bench_consumer.py [--records N] [--size BYTES] [--bootstrap HOST:PORT]

Starts an embedded Tansu broker unless --bootstrap is given, fills one
partition with N records of SIZE bytes (confluent-kafka's producer, lz4 off),
then reads them all back three ways, each from offset 0 with a fresh client:
confluent-kafka ``consume(10000)``, ferrokafka ``poll(max_records=10000)``
and ferrokafka ``poll_arrow(max_records=100000)``. For each: records/s and
client CPU seconds per million records (getrusage of this process: every
thread, librdkafka's and ours). Also the time from ``subscribe`` to the first
record for a new group, same timeouts for both clients. Prints ratios.
Goals (issue 6): poll >= confluent's throughput at <= 0.7x its CPU/record;
poll_arrow <= 0.2x its CPU/record; first record no later than confluent's.
"""

from __future__ import annotations

import argparse
import resource
import time
import uuid

import ferrokafka as fk


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _fill(bs: str, n: int, size: int) -> str:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "bench-c-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": bs})  # must outlive the futures
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(10)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000})
    payload = b"x" * size
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=0)
                break
            except BufferError:
                p.poll(0.01)
    assert p.flush(120) == 0
    return topic


def read_confluent(bs: str, topic: str, n: int):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-" + uuid.uuid4().hex[:6],
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    t0, c0 = time.perf_counter(), _cpu()
    while got < n:
        for m in c.consume(10_000, 1.0):
            if m.error() is None:
                got += 1
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    c.close()
    return dt, cpu


def read_ferrokafka(bs: str, topic: str, n: int, arrow: bool):
    c = fk.Consumer(bs, auto_offset_reset="earliest", fetch_max_wait_ms=100)
    c.assign([fk.TopicPartition(topic, 0)])
    got = 0
    t0, c0 = time.perf_counter(), _cpu()
    while got < n:
        if arrow:
            got += c.poll_arrow(1000, max_records=100_000).num_rows
        else:
            got += len(c.poll(1000, max_records=10_000))
    dt, cpu = time.perf_counter() - t0, _cpu() - c0
    c.close()
    return dt, cpu


def first_record(bs: str, topic: str, which: str) -> float:
    group = "first-" + uuid.uuid4().hex[:6]
    t0 = time.perf_counter()
    if which == "confluent":
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 300})
        c.subscribe([topic])
        while True:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                break
    else:
        c = fk.Consumer(bs, group_id=group, auto_offset_reset="earliest", session_timeout_ms=6000,
                        heartbeat_interval_ms=300)
        c.subscribe([topic])
        while not c.poll(50, max_records=1):
            pass
    dt = time.perf_counter() - t0
    c.close()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--bootstrap")
    args = ap.parse_args()
    broker = None
    bs = args.bootstrap
    if bs is None:
        broker = fk.testing.EmbeddedBroker()
        bs = broker.bootstrap_servers
    try:
        topic = _fill(bs, args.records, args.size)
        n = args.records
        rows = {}
        for name, fn in (("confluent consume(10000)", lambda: read_confluent(bs, topic, n)),
                         ("ferrokafka poll", lambda: read_ferrokafka(bs, topic, n, False)),
                         ("ferrokafka poll_arrow", lambda: read_ferrokafka(bs, topic, n, True))):
            dt, cpu = fn()
            rows[name] = (n / dt, cpu / n * 1e6)
            print(f"{name:28s} {n / dt:12,.0f} rec/s   {cpu / n * 1e6:6.2f} CPU s per million")
        base_rate, base_cpu = rows["confluent consume(10000)"]
        for name in ("ferrokafka poll", "ferrokafka poll_arrow"):
            rate, cpu = rows[name]
            print(f"{name}: {rate / base_rate:.2f}x confluent's throughput, {cpu / base_cpu:.2f}x its CPU per record")
        fc = min(first_record(bs, topic, "confluent") for _ in range(2))
        ff = min(first_record(bs, topic, "ferrokafka") for _ in range(2))
        print(f"subscribe -> first record (new group, best of 2): confluent {fc * 1000:.0f} ms, "
              f"ferrokafka {ff * 1000:.0f} ms ({ff / fc:.2f}x)")
    finally:
        if broker is not None:
            broker.close()


if __name__ == "__main__":
    main()
