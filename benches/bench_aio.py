"""Event-loop lag and throughput of ferrokafka.aio against aiokafka.

    python benches/bench_aio.py [--records 200000] [--rounds 3] [--size 100]
                                [--bootstrap HOST:PORT] [--clients ferrokafka,aiokafka]
                                [--window N] [--uvloop]

One run: a producer floods ``--records`` records of ``--size`` bytes to a
fresh single-partition topic (yielding to the loop every 100 sends, as an
application would) while a consumer in the same loop reads them with
``getmany``; a 1 ms ticker task records how late each tick ran (the loop's
lag). Prints p50/p99/max lag and the end-to-end rate (records consumed per
second of the run). ``--window N`` keeps at most N records' futures
pending (the application awaits the oldest beyond that, as one bounding
its memory would); 0, the default, never awaits them. Each round runs every client once, the order rotated
from round to round so neither always runs on a warmer broker. Without
``--bootstrap`` an embedded broker (Tansu) is started. aiokafka is skipped
(with a note) when it is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import time
import uuid

YIELD_EVERY = 100


class Ticker:
    def __init__(self) -> None:
        self.lags: list = []

    async def run(self) -> None:
        # perf_counter, not loop.time(): uvloop's clock has 1 ms steps.
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            self.lags.append(max(0.0, time.perf_counter() - t - 0.001))


async def _flood_and_read(send, flush, getmany, topic: str, n: int, size: int, window: int) -> tuple:
    value = b"x" * size
    ticker = Ticker()

    async def produce() -> None:
        inflight: collections.deque = collections.deque()
        for i in range(n):
            fut = await send(topic, value)
            if window:
                inflight.append(fut)
                if len(inflight) > window:
                    await inflight.popleft()
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                await asyncio.sleep(0)
        await flush()

    async def consume() -> None:
        got = 0
        while got < n:
            got += sum(map(len, (await getmany()).values()))

    tick = asyncio.ensure_future(ticker.run())
    t0 = time.monotonic()
    await asyncio.gather(produce(), consume())
    elapsed = time.monotonic() - t0
    tick.cancel()
    return ticker.lags, elapsed


async def run_ferrokafka(bs: str, topic: str, n: int, size: int, window: int) -> tuple:
    import ferrokafka as fk
    from ferrokafka.aio import AIOConsumer, AIOProducer

    async with AIOProducer(bs, linger_ms=5) as p, AIOConsumer(bs, auto_offset_reset="earliest") as c:
        await p.send(topic, b"warm-up", partition=0)
        c.assign([fk.TopicPartition(topic, 0)])
        await c.getmany(timeout_ms=5000)

        async def send(t, v):
            return p.send_nowait(t, v, partition=0)

        return await _flood_and_read(send, p.flush, lambda: c.getmany(timeout_ms=1000), topic, n, size,
                                     window)


async def run_aiokafka(bs: str, topic: str, n: int, size: int, window: int) -> tuple:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    p = AIOKafkaProducer(bootstrap_servers=bs, linger_ms=5)
    c = AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False)
    await p.start()
    await c.start()
    try:
        await p.send_and_wait(topic, b"warm-up", partition=0)
        c.assign([TopicPartition(topic, 0)])
        await c.getmany(timeout_ms=5000)

        async def send(t, v):
            return await p.send(t, v, partition=0)  # waits while its buffer is full

        return await _flood_and_read(send, p.flush, lambda: c.getmany(timeout_ms=1000), topic, n, size,
                                     window)
    finally:
        await c.stop()
        await p.stop()


RUNNERS = {"ferrokafka": run_ferrokafka, "aiokafka": run_aiokafka}


def _q(xs: list, q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--bootstrap")
    ap.add_argument("--clients", default="ferrokafka,aiokafka")
    ap.add_argument("--window", type=int, default=0)
    ap.add_argument("--uvloop", action="store_true", help="run each loop with uvloop")
    args = ap.parse_args()
    clients = [c for c in args.clients.split(",") if c]
    for c in clients:
        if c not in RUNNERS:
            sys.exit(f"unknown client {c!r}: choose from {', '.join(RUNNERS)}")
    if "aiokafka" in clients:
        try:
            import aiokafka  # noqa: F401
        except ImportError:
            print("aiokafka is not installed: skipped (pip install aiokafka)")
            clients.remove("aiokafka")
    runner = asyncio.run
    if args.uvloop:
        import uvloop

        runner = uvloop.run

    broker = None
    bs = args.bootstrap
    if bs is None:
        from ferrokafka.testing import EmbeddedBroker

        broker = EmbeddedBroker()
        bs = broker.bootstrap_servers
    results: dict = {c: [] for c in clients}
    try:
        for r in range(args.rounds):
            order = clients[r % len(clients):] + clients[:r % len(clients)]
            for client in order:
                topic = f"bench-aio-{client}-{uuid.uuid4().hex[:8]}"
                lags, elapsed = runner(RUNNERS[client](bs, topic, args.records, args.size, args.window))
                rate = args.records / elapsed
                results[client].append((lags, rate))
                print(f"round {r + 1} {client:<10} lag p50 {statistics.median(lags) * 1e3:6.2f} ms  "
                      f"p99 {_q(lags, 0.99) * 1e3:6.2f} ms  max {max(lags) * 1e3:7.2f} ms  "
                      f"{rate:10,.0f} records/s", flush=True)
    finally:
        if broker is not None:
            broker.close()
    print(f"\n{args.records:,} records of {args.size} B, {args.rounds} rounds, window "
          f"{args.window or 'none'} ({'uvloop' if args.uvloop else 'asyncio'}); median over rounds:")
    print(f"{'client':<11} {'lag p50':>9} {'lag p99':>9} {'lag max':>9} {'records/s':>11}")
    for client, runs in results.items():
        if not runs:
            continue
        p50 = statistics.median(statistics.median(lg) for lg, _ in runs)
        p99 = statistics.median(_q(lg, 0.99) for lg, _ in runs)
        mx = statistics.median(max(lg) for lg, _ in runs)
        rate = statistics.median(rt for _, rt in runs)
        print(f"{client:<11} {p50 * 1e3:7.2f}ms {p99 * 1e3:7.2f}ms {mx * 1e3:7.2f}ms {rate:11,.0f}")


if __name__ == "__main__":
    main()
