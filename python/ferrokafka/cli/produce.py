"""``ferrokafka produce``: records from stdin or files (one per line, JSON lines, or the
rows of a Parquet / Arrow file) to a topic, with a summary on stderr."""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import sys
import time
from typing import Any, BinaryIO, Iterator

from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Failure,
    UsageError,
    add_common,
    cluster,
    note,
    options_of,
    parse_pairs,
    print_json,
)
from ._progress import Progress, human_bytes

_JSONL_FIELDS = {"key", "value", "key_base64", "value_base64", "headers", "partition", "timestamp"}


def register(sub: Any) -> None:
    p = sub.add_parser("produce", help="produce records from stdin or files",
                       description="Produce one record per input line (or JSON line, or Parquet/Arrow row).")
    add_common(p)
    p.add_argument("topic")
    p.add_argument("--file", "-f", action="append", metavar="PATH",
                   help="read this file instead of stdin (repeatable; '-' is stdin)")
    p.add_argument("--format", choices=("lines", "jsonl"), default="lines",
                   help="lines: each line is a value; jsonl: each line an object with "
                        "key/value/headers/partition/timestamp (key_base64/value_base64 for bytes)")
    p.add_argument("--key-delimiter", metavar="D", help="lines: split each line at the first D into key and value")
    p.add_argument("--header", action="append", metavar="K=V", help="a header on every record (repeatable)")
    p.add_argument("--partition", type=int, metavar="N", help="produce to this partition (default: the partitioner's)")
    p.add_argument("--acks", help="0, 1 or all")
    p.add_argument("--compression", help="none, gzip, snappy, lz4 or zstd")
    p.add_argument("--linger-ms", type=int, metavar="MS")
    p.add_argument("--parquet", metavar="FILE", help="produce the rows of a Parquet file (needs pyarrow)")
    p.add_argument("--arrow", metavar="FILE", help="produce the rows of an Arrow IPC file or stream (needs pyarrow)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.set_defaults(run=run)


def _producer_defaults(args: argparse.Namespace) -> dict:
    d: dict[str, Any] = {}
    if args.acks is not None:
        d["acks"] = args.acks
    if args.compression is not None:
        d["compression_type"] = args.compression
    if args.linger_ms is not None:
        d["linger_ms"] = args.linger_ms
    return d


def _check_usage(args: argparse.Namespace) -> None:
    tabular = [x for x in (args.parquet, args.arrow) if x]
    if len(tabular) > 1 or (tabular and args.file):
        raise UsageError("give one input: --file, --parquet or --arrow")
    if tabular and (args.format != "lines" or args.key_delimiter is not None or args.header):
        raise UsageError("--parquet/--arrow take the key and value columns; "
                         "--format, --key-delimiter and --header do not apply to them")
    if args.key_delimiter is not None and args.format == "jsonl":
        raise UsageError("--key-delimiter applies to --format lines, not jsonl (jsonl has a key field)")
    if args.key_delimiter == "":
        raise UsageError("--key-delimiter must not be empty")
    if args.partition is not None and args.partition < 0:
        raise UsageError(f"invalid --partition {args.partition}: must be >= 0")


def _lines(paths: list[str] | None) -> Iterator[tuple[str, int, bytes, int]]:
    """(source, line number, line without its end-of-line, bytes read) for every input line."""
    for path in paths or ["-"]:
        if path == "-":
            yield from _read(sys.stdin.buffer, "<stdin>")
            continue
        try:
            f = open(path, "rb")
        except OSError as e:
            raise Failure(f"cannot read {path}: {e.strerror}") from None
        with f:
            yield from _read(f, path)


def _read(f: BinaryIO, name: str) -> Iterator[tuple[str, int, bytes, int]]:
    for n, raw in enumerate(f, 1):
        line = raw
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield name, n, line, len(raw)


def _input_size(paths: list[str] | None) -> int | None:
    """The bytes the files hold, for the progress bar; None when one is a pipe."""
    if not paths or "-" in paths:
        return None
    try:
        return sum(os.path.getsize(p) for p in paths) or None
    except OSError:
        return None  # unreadable: reported when the file is opened


def _bytes_of(obj: dict, name: str, where: str) -> bytes | None:
    if name + "_base64" in obj:
        if name in obj:
            raise Failure(f"{where}: give {name!r} or {name + '_base64'!r}, not both")
        try:
            return base64.b64decode(obj[name + "_base64"], validate=True)
        except (ValueError, TypeError):
            raise Failure(f"{where}: {name + '_base64'!r} is not valid base64") from None
    v = obj.get(name)
    if v is None:
        return None
    if not isinstance(v, str):
        # a number or an object is written as its JSON text
        return json.dumps(v, separators=(",", ":")).encode()
    return v.encode("utf-8")


def _jsonl_record(line: bytes, where: str) -> tuple:
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise Failure(f"{where}: not a JSON object: {e}") from None
    if not isinstance(obj, dict):
        raise Failure(f"{where}: not a JSON object")
    unknown = sorted(set(obj) - _JSONL_FIELDS)
    if unknown:
        raise Failure(f"{where}: unknown field(s) {', '.join(unknown)}; accepted: {', '.join(sorted(_JSONL_FIELDS))}")
    headers = obj.get("headers") or []
    if isinstance(headers, dict):
        headers = list(headers.items())
    try:
        hdrs = [(str(k), None if v is None else str(v).encode()) for k, v in headers]
    except (TypeError, ValueError):
        raise Failure(f"{where}: headers must be an object or a list of [name, value] pairs") from None
    part = obj.get("partition")
    ts = obj.get("timestamp")
    for name, v in (("partition", part), ("timestamp", ts)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise Failure(f"{where}: {name} must be an integer >= 0")
    return _bytes_of(obj, "key", where), _bytes_of(obj, "value", where), hdrs, part, ts


class _Tally:
    """Delivery outcomes, counted as futures complete (oldest first), so memory
    holds only the records still in flight. An entry is one record's future, or
    a ``send_batch`` future with the size of each of its records."""

    def __init__(self) -> None:
        self.pending: collections.deque = collections.deque()
        self.delivered = 0
        self.delivered_bytes = 0
        self.failed = 0
        self.first_error: BaseException | None = None

    def add(self, fut: Any, nbytes: int) -> None:
        self.pending.append((fut, nbytes, None))

    def add_batch(self, fut: Any, sizes: list) -> None:
        self.pending.append((fut, 0, sizes))

    def _failed(self, err: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = err

    def drain(self, all_: bool = False) -> None:
        q = self.pending
        while q and (all_ or q[0][0].done()):
            fut, nbytes, sizes = q.popleft()
            if not fut.done():
                # only after close(): the producer failed or dropped what it held
                n = 1 if sizes is None else len(sizes)
                for _ in range(n):
                    self._failed(TimeoutError("not delivered before the producer closed"))
            elif sizes is None:
                err = fut.exception(0)
                if err is None:
                    self.delivered += 1
                    self.delivered_bytes += nbytes
                else:
                    self._failed(err)
            else:
                for r, size in zip(fut.results(0), sizes):
                    if isinstance(r, BaseException):
                        self._failed(r)
                    else:
                        self.delivered += 1
                        self.delivered_bytes += size


def run(args: argparse.Namespace) -> int:
    _check_usage(args)
    opts = options_of(args, ("Producer",))
    header_pairs = [(k, v.encode()) for k, v in parse_pairs(args.header, "--header")]
    tabular = None
    if args.parquet or args.arrow:
        from . import _arrow

        tabular = _arrow.open_input(args.parquet, args.arrow)  # fails before any broker work
    with cluster(args) as bs:
        import ferrokafka as fk

        cfg = opts.config("Producer", bs, **_producer_defaults(args))
        t0 = time.monotonic()
        tally = _Tally()
        progress = Progress(f"produce {args.topic}", total=tabular.num_rows if tabular else None,
                            total_input=None if tabular else _input_size(args.file),
                            enabled=bool(args.file or tabular) or (sys.stderr.isatty() and not sys.stdin.isatty()))
        p = fk.Producer(cfg)
        sent = 0
        failure: Failure | None = None
        try:
            if tabular is not None:
                sent = _produce_tabular(p, args, tabular, tally, progress)
            else:
                sent = _produce_lines(p, args, header_pairs, tally, progress)
            p.flush()
        except Failure as e:
            # Bad input (or the first record failing at once) stops the input;
            # what was already sent is still delivered and counted.
            failure = e
        finally:
            progress.close()
            p.close(args.timeout)
            tally.drain(all_=True)
        if failure is not None:
            _summary(args, tally.delivered + tally.failed, tally, time.monotonic() - t0, quiet_error=True)
            raise failure
        secs = time.monotonic() - t0
    return _summary(args, sent, tally, secs)


def _produce_lines(p: Any, args: argparse.Namespace, header_pairs: list, tally: _Tally,
                   progress: Progress) -> int:
    sent = sent_bytes = 0
    delim = args.key_delimiter.encode() if args.key_delimiter is not None else None
    read = 0
    for source, n, line, raw_len in _lines(args.file):
        read += raw_len
        where = f"{source}:{n}"
        key, value, hdrs, part, ts = None, line, list(header_pairs), args.partition, None
        if args.format == "jsonl":
            if not line.strip():
                continue  # blank lines between JSON objects carry no record
            key, value, jh, jpart, ts = _jsonl_record(line, where)
            hdrs += jh
            part = jpart if jpart is not None else part
        elif delim is not None:
            key, sep, value = line.partition(delim)
            if not sep:
                raise Failure(f"{where}: no key delimiter {args.key_delimiter!r} in the line")
        nbytes = len(value or b"") + len(key or b"")
        try:
            fut = p.send(args.topic, value=value, key=key, partition=part, timestamp_ms=ts, headers=hdrs or None)
        except (ValueError, TypeError) as e:  # e.g. a partition the topic does not have
            raise Failure(f"{where}: {e}") from None
        tally.add(fut, nbytes)
        sent += 1
        sent_bytes += nbytes
        if fut.done() and isinstance(fut.exception(0), TimeoutError):
            # Failed before leaving the client: no metadata for the topic within
            # --timeout (a dead or wrong broker). Every later line would wait as
            # long and fail the same way, so stop reading here. Other failures
            # (a record too large...) are the record's own: counted, and the
            # input goes on.
            raise Failure(f"{where}: {fut.exception(0)}")
        if sent % 1024 == 0:
            tally.drain()
            p.poll(0)
            progress.update(sent, sent_bytes, input_done=read)
    return sent


def _produce_tabular(p: Any, args: argparse.Namespace, src: Any, tally: _Tally, progress: Progress) -> int:
    sent = sent_bytes = 0
    for keys, values, sizes in src.batches():
        try:
            fut = p.send_batch(args.topic, values, keys, partition=args.partition)
        except (ValueError, TypeError) as e:
            raise Failure(f"{src.path}: {e}") from None
        tally.add_batch(fut, sizes)
        sent += len(sizes)
        sent_bytes += sum(sizes)
        tally.drain()
        progress.update(sent, sent_bytes)
    return sent


def _summary(args: argparse.Namespace, sent: int, tally: _Tally, secs: float, quiet_error: bool = False) -> int:
    delivered, failed = tally.delivered, tally.failed
    rate = delivered / secs if secs > 0 else 0.0
    summary = {"topic": args.topic, "records": delivered, "failed": failed,
               "bytes": tally.delivered_bytes, "seconds": round(secs, 3), "records_per_second": round(rate, 1)}
    note(f"produced {delivered:,} record{'' if delivered == 1 else 's'} ({human_bytes(tally.delivered_bytes)}) to {args.topic} "
         f"in {secs:.2f} s ({rate:,.0f} records/s)" + (f"; {failed:,} FAILED" if failed else ""))
    if tally.first_error is not None and not quiet_error:
        note(f"first error: {tally.first_error}")
    if args.json:
        print_json(summary)
    return EXIT_FAILURE if failed or delivered != sent else EXIT_OK
