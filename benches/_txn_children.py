"""The transactions section of benches/compare.py (issue 18): ferrokafka's
transactional producer vs confluent-kafka's, each with its defaults plus a
``transactional_id``.

Each run is one child process on a fresh topic (one partition): records of
SIZE bytes are sent as fast as the client's per-record call takes them
(confluent ``produce()`` fire-and-forget with ``poll(0)`` every 10,000 records,
ferrokafka ``send()`` dropping its futures), and the transaction is committed
whenever 1/RATE s have passed since it began, for SECONDS seconds; the last
transaction is committed before the clock stops. So RATE is the commit rate
asked for (1, 10, 100 per second); the achieved one is reported (a commit
waits for every record of the transaction to be acknowledged, so at high
rates it is the broker's round trips that set the pace). Throughput is
records committed per second of wall time; CPU is getrusage(RUSAGE_SELF) of
the child (every thread) around the timed section.
"""

from __future__ import annotations

import resource
import time
import uuid

RATES = (1, 10, 100)
TXN_VARIANTS = [(client, rate) for rate in RATES for client in ("confluent", "ferrokafka")]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child_txn(spec: dict) -> dict:
    bs, topic, size = spec["bootstrap"], spec["topic"], spec["size"]
    period, seconds = 1.0 / spec["rate"], spec["seconds"]
    payload = b"x" * size
    tid = f"bench-{uuid.uuid4().hex[:8]}"
    if spec["client"] == "confluent":
        import confluent_kafka

        p = confluent_kafka.Producer({"bootstrap.servers": bs, "transactional.id": tid})

        def send() -> None:
            while True:
                try:
                    p.produce(topic, payload)
                    return
                except BufferError:
                    p.poll(0.001)

        def tick(i: int) -> None:
            if i % 10_000 == 0:
                p.poll(0)
    else:
        import ferrokafka as fk

        p = fk.Producer(bs, transactional_id=tid)
        psend = p.send

        def send() -> None:
            psend(topic, payload)

        def tick(i: int) -> None:
            pass
    p.init_transactions(30)
    # Warm-up transaction (connection, metadata, coordinator): not timed.
    p.begin_transaction()
    send()
    p.commit_transaction(30)
    records = txns = 0
    c0, t0 = _cpu(), time.perf_counter()
    end = t0 + seconds
    while True:
        p.begin_transaction()
        started = time.perf_counter()
        n = 0
        while True:
            send()
            n += 1
            tick(n)
            if n % 100 == 0:
                now = time.perf_counter()
                if now - started >= period or now >= end:
                    break
        p.commit_transaction(60)
        records += n
        txns += 1
        if time.perf_counter() >= end:
            break
    wall, cpu = time.perf_counter() - t0, _cpu() - c0
    if spec["client"] != "confluent":
        p.close()
    return {"wall": wall, "cpu": cpu, "records": records, "txns": txns}
