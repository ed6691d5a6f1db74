"""Option parsing and offset-range planning for the Spark source, without
Spark: pure functions, unit-testable on their own.

Options follow Spark's built-in Kafka source (`spark-sql-kafka`) so a job
switches by changing `format("kafka")` to `format("ferrokafka")`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

# Which options are taken, refused or unknown: the one table in _options.py.
from ._options import SINK, SOURCE, check_options

__all__ = ["SINK", "SOURCE", "check_options"]  # re-exported for the source and its tests

EARLIEST = -2
LATEST = -1

@dataclass(frozen=True)
class Range:
    topic: str
    partition: int
    start: int  # inclusive
    end: int  # exclusive

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def lower(options: Mapping[str, str]) -> Dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def client_config(options: Mapping[str, str]) -> Dict[str, str]:
    """`kafka.*` options without the prefix (dotted names: the client
    accepts Java/librdkafka names). `kafka.bootstrap.servers` is required."""
    out = {}
    for k, v in options.items():
        if k.lower().startswith("kafka."):
            out[k[len("kafka."):]] = v
    if "bootstrap.servers" not in {k.lower() for k in out}:
        raise ValueError("option 'kafka.bootstrap.servers' is required")
    return out


def strategy(options: Mapping[str, str]) -> Tuple[str, object]:
    """('subscribe', [topics]) | ('subscribepattern', regex) | ('assign', {topic: [partitions]})."""
    o = lower(options)
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in o]
    if len(given) != 1:
        raise ValueError("exactly one of the options 'subscribe', 'subscribePattern', 'assign' is required"
                         + (f" (got {given})" if given else ""))
    k = given[0]
    if k == "subscribe":
        topics = [t.strip() for t in o[k].split(",") if t.strip()]
        if not topics:
            raise ValueError("option 'subscribe' names no topic")
        return k, topics
    if k == "subscribepattern":
        try:
            return k, re.compile(o[k])
        except re.error as e:
            raise ValueError(f"invalid option 'subscribePattern' {o[k]!r}: {e}") from None
    try:
        spec = json.loads(o[k])
        return k, {str(t): [int(p) for p in ps] for t, ps in spec.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"invalid option 'assign' {o[k]!r}: expected JSON like {{\"topic\": [0, 1]}}") from None


def topic_partitions(strat: Tuple[str, object], topics: Mapping[str, int]) -> List[Tuple[str, int]]:
    """The partitions to read, given {topic: partition count} from metadata.
    Every subscribed topic must be in `topics` (the source checks first and
    raises a KafkaError naming those missing, docs/semantics.md §9.3)."""
    kind, spec = strat
    if kind == "assign":
        return sorted((t, p) for t, ps in spec.items() for p in ps)  # type: ignore[union-attr]
    if kind == "subscribe":
        names = list(spec)  # type: ignore[call-overload]
    else:
        names = [t for t in topics if spec.match(t)]  # type: ignore[union-attr]
    return sorted((t, p) for t in names for p in range(topics[t]))


def parse_offsets(value: Optional[str], option: str, default: int, tps: List[Tuple[str, int]],
                  allow_latest: bool = True, allow_earliest: bool = True) -> Dict[Tuple[str, int], int]:
    """'earliest' | 'latest' | JSON {topic: {partition: offset}} (-2 earliest,
    -1 latest) -> {tp: offset or EARLIEST/LATEST}; partitions the JSON leaves
    out take `default`."""
    if value is None:
        return {tp: default for tp in tps}
    v = value.strip()
    if v.lower() == "earliest":
        if not allow_earliest:
            raise ValueError(f"option {option!r} cannot be 'earliest'")
        return {tp: EARLIEST for tp in tps}
    if v.lower() == "latest":
        if not allow_latest:
            raise ValueError(f"option {option!r} cannot be 'latest'")
        return {tp: LATEST for tp in tps}
    try:
        spec = json.loads(v)
        given = {(str(t), int(p)): int(o) for t, ps in spec.items() for p, o in ps.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"invalid option {option!r} {value!r}: expected 'earliest', 'latest' or JSON like "
                         "{\"topic\": {\"0\": 23, \"1\": -2}}") from None
    for tp, o in given.items():
        if o < LATEST - 1:
            raise ValueError(f"invalid offset {o} for {tp[0]}-{tp[1]} in option {option!r}")
    return {tp: given.get(tp, default) for tp in tps}


def resolve(spec: Dict[Tuple[str, int], int], earliest: Mapping[Tuple[str, int], int],
            latest: Mapping[Tuple[str, int], int]) -> Dict[Tuple[str, int], int]:
    out = {}
    for tp, o in spec.items():
        out[tp] = earliest[tp] if o == EARLIEST else latest[tp] if o == LATEST else o
    return out


def split_ranges(ranges: List[Range], min_partitions: Optional[int],
                 max_records: Optional[int] = None) -> List[Range]:
    """Spark's KafkaOffsetRangeCalculator: with minPartitions above the number
    of ranges, big ranges are cut into parts in proportion to their size;
    then, with maxRecordsPerPartition, any part still longer is cut into
    equal parts of at most that many offsets. The parts of a range tile it
    exactly (no gap, no overlap)."""
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions and min_partitions > len(ranges):
        total = sum(r.size for r in ranges)
        ranges = [part for r in ranges
                  for part in _cut(r, min(r.size, max(1, round(r.size / total * min_partitions))))]
    if max_records:
        ranges = [part for r in ranges for part in _cut(r, -(-r.size // max_records))]
    return ranges


def _cut(r: Range, parts: int) -> List[Range]:
    """``r`` in ``parts`` consecutive ranges whose sizes differ by at most one."""
    step, extra = divmod(r.size, parts)
    out, at = [], r.start
    for i in range(parts):
        n = step + (1 if i < extra else 0)
        out.append(Range(r.topic, r.partition, at, at + n))
        at += n
    assert at == r.end
    return out


def cap_ranges(start: Mapping[Tuple[str, int], int], end: Mapping[Tuple[str, int], int],
               max_rows: Optional[int]) -> Dict[Tuple[str, int], int]:
    """Streaming rate limit: move `end` back so at most `max_rows` offsets are
    taken, shared in proportion to each partition's backlog (Spark's rule)."""
    if not max_rows:
        return dict(end)
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(end)
    out = {}
    for tp, e in end.items():
        s = start.get(tp, e)
        share = int(backlog[tp] * max_rows / total)
        out[tp] = s + share
    return out


def offsets_json(offsets: Mapping[Tuple[str, int], int]) -> Dict[str, Dict[str, int]]:
    out: Dict[str, Dict[str, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def offsets_from_json(d: Mapping[str, Mapping[str, int]]) -> Dict[Tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, ps in d.items() for p, o in ps.items()}


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    v = lower(options).get(name.lower())
    if v is None:
        return default
    if v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true"
    raise ValueError(f"invalid option {name!r} {v!r}: expected true or false")


def parse_int(options: Mapping[str, str], name: str, default: Optional[int], minimum: int = 1) -> Optional[int]:
    v = lower(options).get(name.lower())
    if v is None:
        return default
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"invalid option {name!r} {v!r}: expected an integer") from None
    if n < minimum:
        raise ValueError(f"invalid option {name!r} {n}: must be >= {minimum}")
    return n


def parse_timestamps(value: str, option: str) -> Dict[Tuple[str, int], int]:
    """JSON ``{topic: {partition: ms}}`` -> {tp: ms}."""
    try:
        spec = json.loads(value)
        out = {(str(t), int(p)): int(ts) for t, ps in spec.items() for p, ts in ps.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(f"invalid option {option!r} {value!r}: expected JSON like "
                         "{\"topic\": {\"0\": 1700000000000}}") from None
    for tp, ts in out.items():
        if ts < 0:
            raise ValueError(f"invalid timestamp {ts} for {tp[0]}-{tp[1]} in option {option!r}")
    return out


def parse_choice(options: Mapping[str, str], name: str, choices: Tuple[str, ...], default: str) -> str:
    v = lower(options).get(name.lower())
    if v is None:
        return default
    if v.strip().lower() not in choices:
        raise ValueError(f"invalid option {name!r} {v!r}: expected one of {', '.join(choices)}")
    return v.strip().lower()


_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(options: Mapping[str, str], name: str, default_ms: int) -> int:
    """Spark's time strings (``500ms``, ``30s``, ``15m``, ``1h``; a bare
    number is ms) -> ms."""
    v = lower(options).get(name.lower())
    if v is None:
        return default_ms
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", v.lower())
    if not m or (m.group(2) or "ms") not in _UNITS_MS:
        raise ValueError(f"invalid option {name!r} {v!r}: expected a duration like 500ms, 30s, 15m or 1h")
    return int(m.group(1)) * _UNITS_MS[m.group(2) or "ms"]


def available(start: Mapping[Tuple[str, int], int], end: Mapping[Tuple[str, int], int]) -> int:
    """Offsets between ``start`` and ``end`` over all partitions."""
    return sum(max(0, e - start.get(tp, e)) for tp, e in end.items())
