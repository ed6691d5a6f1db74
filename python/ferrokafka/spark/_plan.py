"""Option parsing and offset-range planning for the Spark source, without
Spark: pure functions, unit-testable on their own.

Options follow Spark's built-in Kafka source (`spark-sql-kafka`) so a job
switches by changing `format("kafka")` to `format("ferrokafka")`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

EARLIEST = -2
LATEST = -1

SOURCE_OPTIONS = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets",
    "startingtimestamp", "minpartitions", "maxoffsetspertrigger",
    "includeheaders", "failondataloss",
    "path", "checkpointlocation", "queryname",
}
# Options of Spark's Kafka source that this one does not implement: refused by
# name (an option that is accepted must take effect), not silently ignored.
NOT_IMPLEMENTED_SOURCE_OPTIONS = {
    "endingtimestamp", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
    "fetchoffset.numretries", "fetchoffset.retryintervalms", "kafkaconsumer.polltimeoutms",
}
SINK_OPTIONS = {"topic", "includeheaders", "path", "checkpointlocation", "queryname"}


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


def check_options(options: Mapping[str, str], allowed: Iterable[str], what: str) -> None:
    allowed = set(allowed)
    for k in options:
        kl = k.lower()
        if kl.startswith("kafka.") or kl in allowed:
            continue
        if kl in NOT_IMPLEMENTED_SOURCE_OPTIONS:
            raise ValueError(f"option {k!r} of Spark's Kafka source is not implemented by the ferrokafka "
                             f"{what}; remove it (it would otherwise be ignored)")
        raise ValueError(f"unknown option {k!r} for the ferrokafka {what}; accepted: "
                         + ", ".join(sorted(allowed - {"path"})) + ", kafka.*")


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
    """The partitions to read, given {topic: partition count} from metadata."""
    kind, spec = strat
    if kind == "assign":
        return sorted((t, p) for t, ps in spec.items() for p in ps)  # type: ignore[union-attr]
    if kind == "subscribe":
        names = [t for t in spec if t in topics]  # type: ignore[union-attr]
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


def split_ranges(ranges: List[Range], min_partitions: Optional[int]) -> List[Range]:
    """Spark's KafkaOffsetRangeCalculator: with minPartitions above the number
    of ranges, big ranges are cut into parts in proportion to their size; the
    parts of a range tile it exactly (no gap, no overlap)."""
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(r.size for r in ranges)
    out: List[Range] = []
    for r in ranges:
        parts = max(1, round(r.size / total * min_partitions))
        parts = min(parts, r.size)
        step, extra = divmod(r.size, parts)
        at = r.start
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
