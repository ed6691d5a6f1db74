"""``ferrokafka consume``: a topic's records to stdout (values one a line, hex, or a
JSON object each) or to a Parquet file.

Without ``--follow`` the command stops at the end offsets it read when it started,
so an empty topic ends at once instead of waiting; ``--count N`` stops after N
records. With ``--group`` it joins the group (subscribe) and commits what it
printed when it stops (auto-commit, committed again on close as in Java).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ._common import (
    EXIT_OK,
    Failure,
    UsageError,
    add_common,
    bytes_field,
    cluster,
    note,
    options_of,
)
from ._progress import Progress


def register(sub: Any) -> None:
    p = sub.add_parser("consume", help="print a topic's records",
                       description="Print a topic's records, one per line (stops at the end unless --follow).")
    add_common(p)
    p.add_argument("topic")
    p.add_argument("--from", dest="start", metavar="WHERE",
                   help="beginning, end, offset:N or timestamp:MS (default: beginning; "
                        "with --group the group's committed offsets)")
    p.add_argument("--count", "-n", type=int, metavar="N", help="stop after N records")
    p.add_argument("--group", "-g", metavar="G", help="consume as a member of this group and commit")
    p.add_argument("--follow", action="store_true", help="keep waiting for new records (Ctrl-C stops)")
    p.add_argument("--partition", "-p", type=int, metavar="N", help="only this partition (not with --group)")
    p.add_argument("--format", choices=("text", "json", "hex"), default=None,
                   help="text: the value as is; hex: the value in hex; json: an object per record "
                        "(topic, partition, offset, timestamp, key, value, headers)")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--output", "-o", metavar="parquet:FILE", help="write the records to a Parquet file (needs pyarrow)")
    p.set_defaults(run=run)


def parse_from(spec: str | None) -> tuple[str, int]:
    if spec is None:
        return "default", 0
    if spec in ("beginning", "end"):
        return spec, 0
    kind, sep, num = spec.partition(":")
    if sep and kind in ("offset", "timestamp"):
        try:
            n = int(num)
        except ValueError:
            n = -1
        if n >= 0:
            return kind, n
    raise UsageError(f"invalid --from {spec!r}: expected beginning, end, offset:N or timestamp:MS (N, MS >= 0)")


def _check_usage(args: argparse.Namespace) -> tuple[tuple[str, int], str, str | None]:
    start = parse_from(args.start)
    if args.count is not None and args.count < 1:
        raise UsageError(f"invalid --count {args.count}: must be >= 1")
    if args.partition is not None and args.partition < 0:
        raise UsageError(f"invalid --partition {args.partition}: must be >= 0")
    if args.group and args.partition is not None:
        raise UsageError("--partition cannot be used with --group (the group assigns partitions)")
    if args.json and args.format not in (None, "json"):
        raise UsageError(f"--json and --format {args.format} disagree")
    fmt = "json" if args.json else (args.format or "text")
    out = None
    if args.output is not None:
        kind, sep, path = args.output.partition(":")
        if kind != "parquet" or not sep or not path:
            raise UsageError(f"invalid --output {args.output!r}: expected parquet:FILE")
        if args.format is not None or args.json:
            raise UsageError("--format/--json choose how stdout looks; --output writes a file instead")
        out = path
    return start, fmt, out


class _Printer:
    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.out = sys.stdout.buffer

    def write(self, msgs: list) -> None:
        w = self.out.write
        if self.fmt == "text":
            for m in msgs:
                w((m.value or b"") + b"\n")
        elif self.fmt == "hex":
            for m in msgs:
                w((m.value or b"").hex().encode() + b"\n")
        else:
            for m in msgs:
                w(json.dumps(record_json(m)).encode() + b"\n")
        self.out.flush()


def record_json(m: Any) -> dict:
    obj: dict[str, Any] = {"topic": m.topic, "partition": m.partition, "offset": m.offset,
                           "timestamp": m.timestamp_ms}
    bytes_field(obj, "key", m.key)
    bytes_field(obj, "value", m.value)
    hdrs = []
    for k, v in m.headers or ():
        h: dict[str, Any] = {"key": k}
        bytes_field(h, "value", v)
        hdrs.append(h)
    obj["headers"] = hdrs
    return obj


def run(args: argparse.Namespace) -> int:
    start, fmt, out_path = _check_usage(args)
    opts = options_of(args, ("Consumer",))
    writer = None
    if out_path is not None:
        from ._arrow import ParquetOutput

        writer = ParquetOutput(out_path)
    try:
        with cluster(args) as bs:
            import ferrokafka as fk

            cfg = opts.config("Consumer", bs, auto_offset_reset="earliest",
                              **({"group_id": args.group} if args.group else {}))
            with fk.Consumer(cfg) as c:
                n = _Consume(fk, c, args, start, fmt, writer).run()
    finally:
        if writer is not None:
            writer.close()
    note(f"consumed {n:,} record{'' if n == 1 else 's'} from {args.topic}" + (f" to {out_path}" if out_path else ""))
    return EXIT_OK


class _Consume:
    def __init__(self, fk: Any, c: Any, args: argparse.Namespace, start: tuple[str, int], fmt: str,
                 writer: Any) -> None:
        self.fk, self.c, self.args, self.start, self.writer = fk, c, args, start, writer
        self.printer = None if writer is not None else _Printer(fmt)
        self.timeout_s = args.timeout
        self.next: dict[Any, int] = {}
        self.placed: set = set()
        self.nbytes = 0  # of values, for the progress line

    def _partitions(self) -> list:
        topics = self.c.list_topics()  # KafkaTimeoutError when no broker answers
        count = topics.get(self.args.topic)
        if count is None:
            raise Failure(f"topic {self.args.topic!r} does not exist")
        if self.args.partition is not None:
            if self.args.partition >= count:
                raise Failure(f"topic {self.args.topic!r} has {count} partitions; no partition {self.args.partition}")
            return [self.fk.TopicPartition(self.args.topic, self.args.partition)]
        return [self.fk.TopicPartition(self.args.topic, p) for p in range(count)]

    def _seek(self, tps: list) -> None:
        kind, n = self.start
        c = self.c
        if kind == "beginning" or (kind == "default" and not self.args.group):
            c.seek_to_beginning(tps)
        elif kind == "end":
            c.seek_to_end(tps)
        elif kind == "offset":
            for tp in tps:
                c.seek(tp, n)
        elif kind == "timestamp":
            found = c.offsets_for_times({tp: n for tp in tps})
            for tp in tps:
                hit = found.get(tp)
                if hit is None:
                    c.seek_to_end([tp])  # nothing at or after the timestamp yet
                else:
                    c.seek(tp, hit[0])
        # "default" with a group: the committed offsets (earliest where none)

    def _on_assign(self, parts: list) -> None:
        # --from places a partition the first time this member gets it; after a
        # rebalance gives it back, the consumer resumes from what it committed
        # instead of reading the partition again from the start.
        fresh = [tp for tp in parts if tp not in self.placed]
        self.placed.update(fresh)
        if fresh:
            self._seek(fresh)

    def run(self) -> int:
        c, args = self.c, self.args
        tps = self._partitions()
        # The stop line for a run without --follow (docs/cli.md "consume").
        self.ends = {} if args.follow else c.end_offsets(tps)
        if args.group:
            c.subscribe([args.topic], on_assign=self._on_assign)
        else:
            c.assign(tps)
            self._seek(tps)
        total = got = 0
        limit = args.count
        progress = Progress(f"consume {args.topic}", total=limit, enabled=limit is not None)
        started = last_progress = time.monotonic()
        try:
            while limit is None or total < limit:
                if not args.follow and self._at_end(ask=got == 0):
                    break
                want = 10_000 if limit is None else min(10_000, limit - total)
                got = self._poll(want)
                now = time.monotonic()
                if got:
                    total += got
                    last_progress = now
                    progress.update(total, self.nbytes)
                elif args.follow:
                    continue
                elif not c.assignment():
                    # A group member waiting for its first assignment: not a
                    # stall yet, but not forever either.
                    last_progress = now
                    if now - started > self.timeout_s:
                        raise Failure(f"no partitions assigned to this member of group {args.group!r} "
                                      f"within {self.timeout_s:g} s")
                elif now - last_progress > self.timeout_s:
                    raise Failure(f"no records for {self.timeout_s:g} s before the end offsets read at the "
                                  f"start ({total} records printed)")
        finally:
            progress.close()
        return total

    def _poll(self, want: int) -> int:
        if self.writer is not None:
            batch = self.c.poll_arrow(timeout_ms=200, max_records=want)
            if batch.num_rows:
                self.writer.write(batch)
                self.nbytes += batch.column("value").nbytes  # with its offsets: near enough for a rate
                parts = batch.column("partition").to_pylist()
                offs = batch.column("offset").to_pylist()
                for p, o in zip(parts, offs):
                    self.next[self.fk.TopicPartition(self.args.topic, p)] = o + 1
            return batch.num_rows
        msgs = self.c.poll(timeout_ms=200, max_records=want)
        if msgs:
            self.printer.write(msgs)  # type: ignore[union-attr]
            for m in msgs:
                self.next[self.fk.TopicPartition(m.topic, m.partition)] = m.offset + 1
                self.nbytes += len(m.value or b"")
        return len(msgs)

    def _at_end(self, ask: bool) -> bool:
        mine = self.c.assignment()
        if not mine:
            return False  # a group member before its first assignment
        for tp in mine:
            end = self.ends.get(tp, 0)
            pos = self.next.get(tp)
            if pos is not None and pos >= end:
                continue
            if pos is not None and not ask:
                return False
            # Nothing read here yet, or the last poll gave nothing (a gap before
            # the end: control records, compaction): the consumer's own position.
            pos = self.c.position(tp)
            self.next[tp] = pos
            if pos < end:
                return False
        return True
