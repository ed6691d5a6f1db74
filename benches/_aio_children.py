"""The asyncio section of benches/compare.py (issue 20): ferrokafka.aio vs
aiokafka vs confluent-kafka's AIOProducer/AIOConsumer, each with its defaults.

Modes, each one child process and one fresh topic (one partition):
- ``produce_each``: every record through the client's per-record call, the
  returned delivery futures kept and awaited once more than WINDOW are
  pending (the same window for every client), then all of them; clock from
  the first send to the last delivery.
  ferrokafka ``send_nowait()``, aiokafka ``await send()``, confluent
  ``await produce()``.
- ``produce_batch``: the batched form where the client has one: ferrokafka
  ``await send_batch(list of 10k)``, aiokafka ``create_batch()`` +
  ``await send_batch()`` (filled to its batch size), confluent has no batch
  call (its ``produce()`` already buffers ``batch_size`` records), so none.
- ``consume_each``: one record per await: ferrokafka / aiokafka
  ``await getone()``, confluent ``await poll(1.0)``.
- ``consume_batch``: ferrokafka / aiokafka ``await getmany(max_records=10000)``,
  confluent ``await consume(10000, 1.0)``.
CPU is getrusage(RUSAGE_SELF) of the child around the timed section (every
thread: the event loop, the client's threads and executors).
"""

from __future__ import annotations

import asyncio
import collections
import resource
import time
import uuid

WINDOW = 10_000
CHUNK = 10_000
AIO_VARIANTS = [  # client, mode, label
    ("confluent", "produce_each", "confluent `AIOProducer`: `await produce()`"),
    ("aiokafka", "produce_each", "aiokafka: `await send()`"),
    ("ferrokafka", "produce_each", "ferrokafka.aio: `send_nowait()`"),
    ("aiokafka", "produce_batch", "aiokafka: `create_batch()` + `await send_batch()`"),
    ("ferrokafka", "produce_batch", "ferrokafka.aio: `await send_batch(10k)`"),
    ("confluent", "consume_each", "confluent `AIOConsumer`: `await poll()`"),
    ("aiokafka", "consume_each", "aiokafka: `await getone()`"),
    ("ferrokafka", "consume_each", "ferrokafka.aio: `await getone()`"),
    ("confluent", "consume_batch", "confluent `AIOConsumer`: `await consume(10000)`"),
    ("aiokafka", "consume_batch", "aiokafka: `await getmany(max_records=10000)`"),
    ("ferrokafka", "consume_batch", "ferrokafka.aio: `await getmany(max_records=10000)`"),
]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _windowed(send, topic: str, n: int, payload: bytes) -> None:
    pending: collections.deque = collections.deque()
    for _ in range(n):
        pending.append(await send(topic, payload))
        if len(pending) > WINDOW:
            await pending.popleft()
    for f in pending:
        await f


async def _produce(spec: dict) -> dict:
    client, mode, topic, n = spec["client"], spec["mode"], spec["topic"], spec["records"]
    bs, payload = spec["bootstrap"], b"x" * spec["size"]
    if client == "ferrokafka":
        from ferrokafka.aio import AIOProducer

        async with AIOProducer(bs) as p:
            await p.send(topic, b"warm-up")
            values = [payload] * CHUNK

            async def send(t, v):
                return p.send_nowait(t, v)

            c0, t0 = _cpu(), time.perf_counter()
            if mode == "produce_each":
                await _windowed(send, topic, n, payload)
            else:
                for i in range(0, n, CHUNK):
                    await p.send_batch(topic, values if n - i >= CHUNK else values[: n - i])
            await p.flush()
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
    elif client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=bs)
        await p.start()
        try:
            await p.send_and_wait(topic, b"warm-up", partition=0)
            c0, t0 = _cpu(), time.perf_counter()
            if mode == "produce_each":
                await _windowed(lambda t, v: p.send(t, v), topic, n, payload)
            else:
                left, futs = n, []
                while left:
                    batch = p.create_batch()
                    while left and batch.append(key=None, value=payload, timestamp=None) is not None:
                        left -= 1
                    futs.append(await p.send_batch(batch, topic, partition=0))
                for f in futs:
                    await f
            await p.flush()
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
        finally:
            await p.stop()
    else:
        from confluent_kafka.aio import AIOProducer as CAIOProducer

        p = CAIOProducer({"bootstrap.servers": bs})
        try:
            await (await p.produce(topic, value=b"warm-up"))
            c0, t0 = _cpu(), time.perf_counter()
            await _windowed(lambda t, v: p.produce(t, value=v), topic, n, payload)
            await p.flush()
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
        finally:
            await p.close()
    return {"wall": wall, "cpu": cpu}


async def _consume(spec: dict) -> dict:
    client, mode, topic, n = spec["client"], spec["mode"], spec["topic"], spec["records"]
    bs, size = spec["bootstrap"], spec["size"]
    got = total = 0
    deadline = max(120.0, n / 5_000)
    if client == "ferrokafka":
        import ferrokafka as fk
        from ferrokafka.aio import AIOConsumer

        async with AIOConsumer(bs, auto_offset_reset="earliest") as c:
            c._c.partitions_for(topic)  # metadata outside the clock, as the others
            c0, t0 = _cpu(), time.perf_counter()
            c.assign([fk.TopicPartition(topic, 0)])
            while got < n and time.perf_counter() - t0 < deadline:
                if mode == "consume_each":
                    m = await c.getone()
                    total += len(m.value)
                    got += 1
                else:
                    for recs in (await c.getmany(timeout_ms=1000, max_records=min(10_000, n - got))).values():
                        for m in recs:
                            total += len(m.value)
                        got += len(recs)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
    elif client == "aiokafka":
        from aiokafka import AIOKafkaConsumer, TopicPartition

        c = AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            c0, t0 = _cpu(), time.perf_counter()
            c.assign([TopicPartition(topic, 0)])
            while got < n and time.perf_counter() - t0 < deadline:
                if mode == "consume_each":
                    m = await c.getone()
                    total += len(m.value)
                    got += 1
                else:
                    for recs in (await c.getmany(timeout_ms=1000, max_records=min(10_000, n - got))).values():
                        for m in recs:
                            total += len(m.value)
                        got += len(recs)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
        finally:
            await c.stop()
    else:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        from confluent_kafka.aio import AIOConsumer as CAIOConsumer

        c = CAIOConsumer({"bootstrap.servers": bs, "group.id": "compare-" + uuid.uuid4().hex[:8]})
        try:
            await c.list_topics(topic, timeout=30)
            c0, t0 = _cpu(), time.perf_counter()
            await c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            while got < n and time.perf_counter() - t0 < deadline:
                if mode == "consume_each":
                    m = await c.poll(1.0)
                    if m is None:
                        continue
                    if m.error() is not None:
                        raise RuntimeError(str(m.error()))
                    total += len(m.value())
                    got += 1
                else:
                    for m in await c.consume(min(10_000, n - got), 1.0):
                        if m.error() is not None:
                            raise RuntimeError(str(m.error()))
                        total += len(m.value())
                        got += 1
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
        finally:
            await c.close()
    if got != n or total != n * size:
        raise RuntimeError(f"read {got} records / {total} value bytes, expected {n} / {n * size}")
    return {"wall": wall, "cpu": cpu, "first": 0.0}


def child_aio(spec: dict) -> dict:
    run = _produce if spec["mode"].startswith("produce") else _consume
    return asyncio.run(run(spec))
