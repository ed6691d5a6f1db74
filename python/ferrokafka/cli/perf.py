"""``ferrokafka perf produce|consume``: throughput and latency like Kafka's
kafka-producer-perf-test / kafka-consumer-perf-test: a line per second while it
runs, a table at the end. ``--compare confluent`` runs confluent-kafka with the
same parameters (a fresh topic for each client) and puts both in the table.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
import uuid
from typing import Any, Callable

from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Failure,
    UsageError,
    add_common,
    cluster,
    describe,
    note,
    options_of,
    print_json,
    table,
)
from ._progress import Progress

_PCTS = (50, 95, 99, 99.9)


def register(sub: Any) -> None:
    p = sub.add_parser("perf", help="producer/consumer throughput and latency tests")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")

    pp = acts.add_parser("produce", help="produce N records of B bytes; latency from send to ack")
    _common(pp)
    pp.add_argument("--throughput", type=float, default=-1, metavar="R", help="records/s cap (-1: none)")
    pp.add_argument("--record-size", type=int, required=True, metavar="B")
    pp.add_argument("--acks", help="0, 1 or all")
    pp.add_argument("--compression", help="none, gzip, snappy, lz4 or zstd")
    pp.set_defaults(run=run_produce)

    pc = acts.add_parser("consume", help="consume N records from the beginning of a topic")
    _common(pc)
    pc.add_argument("--record-size", type=int, default=100, metavar="B",
                    help="without --topic: the size of the records it first produces (default 100)")
    pc.set_defaults(run=run_consume)


def _common(p: argparse.ArgumentParser) -> None:
    add_common(p)
    p.add_argument("--topic", "-t", help="default: a fresh topic (perf consume fills it first)")
    p.add_argument("--num-records", type=int, required=True, metavar="N")
    p.add_argument("--compare", choices=("confluent",), help="also run confluent-kafka, same parameters")
    p.add_argument("--json", action="store_true", help="the final results as JSON on stdout")


class _Stats:
    """Latencies (ms) of acknowledged records, and a live line per second."""

    def __init__(self, label: str, total: int, size: int) -> None:
        self.label, self.size = label, size
        self.lat: list[float] = []
        self.errors = 0
        self.first_error: Any = None
        self.start = time.monotonic()
        self._win_n, self._win_lat, self._win_max = 0, 0.0, 0.0
        self._win_start = self.start
        self.progress = Progress(label, total=total, interval=1.0)

    def ack(self, sent_at: float, err: Any) -> None:
        if err is not None:
            self.errors += 1
            self.first_error = self.first_error or err
            return
        ms = (time.monotonic() - sent_at) * 1000
        self.lat.append(ms)
        self._win_n += 1
        self._win_lat += ms
        self._win_max = max(self._win_max, ms)

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._win_start < 1.0:
            return
        secs = max(now - self._win_start, 1e-9)
        if self._win_n:
            # Kafka's perf-test line for the last second; on a terminal it is
            # printed above the progress bar.
            avg = self._win_lat / self._win_n
            self.progress.message(
                f"{self.label}: {self._win_n:,} records, {self._win_n / secs:,.1f} records/s "
                f"({self._win_n * self.size / secs / 1e6:.2f} MB/s), {avg:.1f} ms avg latency, "
                f"{self._win_max:.1f} ms max latency")
        if self.progress.tty:
            self.progress.update(len(self.lat), len(self.lat) * self.size, force=True)
        self._win_n, self._win_lat, self._win_max = 0, 0.0, 0.0
        self._win_start = now

    def result(self, client: str, n: int) -> dict:
        self.progress.close()
        secs = max(time.monotonic() - self.start, 1e-9)
        lat = sorted(self.lat)
        ok = len(lat)
        # a record neither acknowledged nor failed by the end counts as failed
        out = {"client": client, "records": ok, "failed": n - ok,
               "seconds": round(secs, 3), "records_per_second": round(ok / secs, 1),
               "mb_per_second": round(ok * self.size / secs / 1e6, 2),
               "avg_latency_ms": round(sum(lat) / ok, 2) if ok else None,
               "max_latency_ms": round(lat[-1], 2) if ok else None}
        for p in _PCTS:
            out[f"p{p:g}_ms"] = round(lat[min(ok - 1, int(ok * p / 100))], 2) if ok else None
        if n - ok:
            out["first_error"] = ("no delivery report by the end of the run" if self.first_error is None
                                  else describe(self.first_error))
        return out


def _pacer(rate: float, idle: Callable[[float], Any]) -> Callable[[int], None]:
    """Wait so that record i is sent no sooner than i / rate seconds after the
    start; ``idle(seconds)`` waits while running delivery callbacks, so acks are
    timed when they arrive, not when the pacing sleep ends."""
    if rate <= 0:
        return lambda i: None
    start = time.monotonic()

    def wait(i: int) -> None:
        while True:
            ahead = start + i / rate - time.monotonic()
            if ahead <= 0:
                return
            idle(ahead)
    return wait


# Delivery callbacks run in poll(); an ack is timed when its callback runs, so
# both clients are polled at least this often (seconds) while sending.
_POLL_EVERY = 0.002


def _ferrokafka_produce(bs: str, topic: str, args: argparse.Namespace, cfg: dict) -> dict:
    import ferrokafka as fk

    value = os.urandom(args.record_size)
    stats = _Stats("ferrokafka", args.num_records, args.record_size)
    p = fk.Producer(cfg)
    pace = _pacer(args.throughput, p.poll)

    def done(sent_at: float, f: Any) -> None:
        stats.ack(sent_at, f.exception(0))

    try:
        last_poll = time.monotonic()
        for i in range(args.num_records):
            pace(i)
            t = time.monotonic()
            fut = p.send(topic, value)
            fut.add_done_callback(functools.partial(done, t))
            if i == 0 and fut.done():
                err = fut.exception(0)
                if err is not None:
                    raise err  # no metadata within --timeout: a dead or wrong broker
            if t - last_poll > _POLL_EVERY:
                last_poll = t
                p.poll(0)
                stats.tick()
        p.flush()
    finally:
        p.close(args.timeout)
    stats.tick(force=True)
    return stats.result("ferrokafka", args.num_records)


def _confluent_produce(bs: str, topic: str, args: argparse.Namespace, cfg: dict) -> dict:
    import confluent_kafka

    from .._config import PRODUCER

    value = os.urandom(args.record_size)
    stats = _Stats("confluent-kafka", args.num_records, args.record_size)
    # The settings that shape a perf run, as ferrokafka resolved them (its
    # defaults are Java's: idempotence on, acks=all), so both clients do the same work.
    mine = PRODUCER.resolve(cfg)
    conf: dict[str, Any] = {"bootstrap.servers": bs, "acks": str(mine["acks"]),
                            "compression.type": mine["compression_type"], "linger.ms": mine["linger_ms"],
                            "enable.idempotence": bool(mine["enable_idempotence"])}

    def ack(sent_at: float, err: Any, _msg: Any) -> None:
        stats.ack(sent_at, err)

    p = confluent_kafka.Producer(conf)
    pace = _pacer(args.throughput, p.poll)
    last_poll = time.monotonic()
    for i in range(args.num_records):
        pace(i)
        t = time.monotonic()
        while True:
            try:
                p.produce(topic, value, on_delivery=functools.partial(ack, t))
                break
            except BufferError:
                p.poll(0.01)
        if t - last_poll > _POLL_EVERY:
            last_poll = t
            p.poll(0)
            stats.tick()
    left = p.flush(args.timeout)
    stats.errors += left
    stats.tick(force=True)
    return stats.result("confluent-kafka", args.num_records)


def _check(args: argparse.Namespace) -> None:
    if args.num_records < 1:
        raise UsageError(f"invalid --num-records {args.num_records}: must be >= 1")
    if getattr(args, "record_size", 1) < 0:
        raise UsageError(f"invalid --record-size {args.record_size}: must be >= 0")
    if args.compare == "confluent":
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            raise UsageError("--compare confluent needs confluent-kafka installed") from None


def _fresh_topic(fk: Any, bs: str, opts: Any, name: str) -> str:
    with fk.Admin(opts.config("Admin", bs)) as a:
        a.create_topics([fk.NewTopic(name, 1, 1)], timeout_ms=opts.timeout_ms)
    return name


def run_produce(args: argparse.Namespace) -> int:
    _check(args)
    # The admin creates the fresh topics: its options only count without --topic
    # or with --compare.
    opts = options_of(args, ("Producer",) if args.topic and not args.compare else ("Producer", "Admin"))
    extra: dict[str, Any] = {}
    if args.acks is not None:
        extra["acks"] = args.acks
    if args.compression is not None:
        extra["compression_type"] = args.compression
    results = []
    with cluster(args) as bs:
        import ferrokafka as fk

        cfg = opts.config("Producer", bs, **extra)
        base = args.topic or f"ferrokafka-perf-{uuid.uuid4().hex[:8]}"
        topic = args.topic or _fresh_topic(fk, bs, opts, base)
        results.append(_ferrokafka_produce(bs, topic, args, cfg))
        if args.compare:
            results.append(_confluent_produce(bs, _fresh_topic(fk, bs, opts, f"{base}-confluent"), args, cfg))
    return _report(args, results, "produce")


def _report(args: argparse.Namespace, results: list[dict], what: str) -> int:
    if args.json:
        print_json(results)
    else:
        cols = ["client", "records", "failed", "seconds", "records_per_second", "mb_per_second"]
        if what == "produce":
            cols += ["avg_latency_ms", "max_latency_ms"] + [f"p{p:g}_ms" for p in _PCTS]
        print(table([[r.get(c) for c in cols] for r in results], [c.upper().replace("_", "-") for c in cols]))
    failed = False
    for r in results:
        if r["failed"] or r["records"] < args.num_records:
            failed = True
            # why, on stderr: a failed count alone leaves the user guessing
            why = (f"{r['failed']:,} of {args.num_records:,} records failed, the first with: {r['first_error']}"
                   if r.get("first_error") else f"only {r['records']:,} of {args.num_records:,} records")
            note(f"{r['client']}: {why}")
    return EXIT_FAILURE if failed else EXIT_OK


# ----- consume ---------------------------------------------------------------------------

def _ferrokafka_consume(bs: str, topic: str, args: argparse.Namespace, cfg: dict) -> dict:
    import ferrokafka as fk

    stats = _Stats("ferrokafka", args.num_records, 0)
    nbytes = 0
    got = 0
    with fk.Consumer(cfg) as c:
        c.assign([fk.TopicPartition(topic, p) for p in range(c.list_topics()[topic])])
        c.seek_to_beginning()
        idle_since = time.monotonic()
        while got < args.num_records:
            msgs = c.poll(timeout_ms=200, max_records=min(10_000, args.num_records - got))
            for m in msgs:
                nbytes += len(m.value or b"")
            got += len(msgs)
            stats.progress.update(got, nbytes)
            if msgs:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > args.timeout:
                break
    return _consume_result(stats, "ferrokafka", got, nbytes, args)


def _confluent_consume(bs: str, topic: str, args: argparse.Namespace, parts: int) -> dict:
    import confluent_kafka

    stats = _Stats("confluent-kafka", args.num_records, 0)
    nbytes = got = 0
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": f"perf-{uuid.uuid4().hex[:8]}",
                                  "enable.auto.commit": False})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(parts)])
        idle_since = time.monotonic()
        while got < args.num_records:
            msgs = c.consume(min(10_000, args.num_records - got), 0.2)
            for m in msgs:
                if m.error() is None:
                    nbytes += len(m.value() or b"")
                    got += 1
            stats.progress.update(got, nbytes)
            if msgs:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > args.timeout:
                break
    finally:
        c.close()
    return _consume_result(stats, "confluent-kafka", got, nbytes, args)


def _consume_result(stats: _Stats, client: str, got: int, nbytes: int, args: argparse.Namespace) -> dict:
    stats.progress.close()
    secs = max(time.monotonic() - stats.start, 1e-9)
    return {"client": client, "records": got, "failed": 0, "seconds": round(secs, 3),
            "records_per_second": round(got / secs, 1), "mb_per_second": round(nbytes / secs / 1e6, 2),
            "bytes": nbytes}


def _fill(fk: Any, bs: str, opts: Any, args: argparse.Namespace) -> str:
    """A fresh topic with --num-records records of --record-size bytes, for a
    consume test without --topic (an embedded broker starts empty)."""
    topic = _fresh_topic(fk, bs, opts, f"ferrokafka-perf-{uuid.uuid4().hex[:8]}")
    note(f"perf consume: filling {topic} with {args.num_records:,} records of {args.record_size} bytes")
    value = os.urandom(args.record_size)
    with fk.Producer(opts.config("Producer", bs)) as p:
        left = args.num_records
        while left:
            n = min(left, 10_000)
            p.send_batch(topic, [value] * n).result(args.timeout)
            left -= n
    return topic


def run_consume(args: argparse.Namespace) -> int:
    _check(args)
    # The producer and admin options only mean something when the command fills a topic.
    opts = options_of(args, ("Consumer",) if args.topic else ("Consumer", "Producer", "Admin"))
    with cluster(args) as bs:
        import ferrokafka as fk

        cfg = opts.config("Consumer", bs)
        topic = args.topic or _fill(fk, bs, opts, args)
        with fk.Consumer(cfg) as c:
            topics = c.list_topics()
            if topic not in topics:
                raise Failure(f"topic {topic!r} does not exist")
            parts = topics[topic]
            tps = [fk.TopicPartition(topic, p) for p in range(parts)]
            first, end = c.beginning_offsets(tps), c.end_offsets(tps)
        available = sum(end[tp] - first[tp] for tp in tps)
        if available < args.num_records:
            raise Failure(f"topic {topic!r} holds {available} records, fewer than --num-records {args.num_records}")
        results = [_ferrokafka_consume(bs, topic, args, cfg)]
        if args.compare:
            results.append(_confluent_consume(bs, topic, args, parts))
    return _report(args, results, "consume")
