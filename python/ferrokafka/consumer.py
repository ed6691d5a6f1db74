"""The Kafka consumer (Java ``KafkaConsumer`` semantics, Rust fetch path).

A background Rust thread runs the group protocol (FindCoordinator, Join,
Sync, Heartbeat, auto-commit) and the fetcher (pipelined Fetch per leader,
decompression and CRC checks), all without the GIL. :meth:`Consumer.poll`
hands out what it decoded; rebalance callbacks (``on_assign``, ``on_revoke``,
``on_lost``) and asynchronous commit callbacks run inside ``poll``, in the
caller's thread, as in the Java client.
"""

from __future__ import annotations

import itertools
import re
import time
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _core, _events, _stats
from ._config import CONSUMER
from ._core import Message, TopicPartition
from .errors import IllegalStateError

__all__ = ["Consumer", "ConsumerGroupMetadata", "Coordinator", "Message", "OffsetAndMetadata"]

Callback = Callable[[List[TopicPartition]], Any]

EARLIEST = -2
LATEST = -1


class OffsetAndMetadata(tuple):
    """``(offset, metadata)``: what ``committed()`` returns per partition."""

    def __new__(cls, offset: int, metadata: Optional[str] = None) -> "OffsetAndMetadata":
        return super().__new__(cls, (offset, metadata))

    @property
    def offset(self) -> int:
        return self[0]

    @property
    def metadata(self) -> Optional[str]:
        return self[1]

    def __repr__(self) -> str:
        return f"OffsetAndMetadata(offset={self[0]}, metadata={self[1]!r})"


class ConsumerGroupMetadata(tuple):
    """The consumer's group membership for
    ``Producer.send_offsets_to_transaction`` (KIP-447): the group coordinator
    refuses a transactional offset commit from a member that has since left
    the generation, so a zombie's transaction cannot commit offsets."""

    def __new__(cls, group_id: str, generation_id: int = -1, member_id: str = "",
                group_instance_id: Optional[str] = None) -> "ConsumerGroupMetadata":
        return super().__new__(cls, (str(group_id), int(generation_id), str(member_id),
                                     group_instance_id))

    @property
    def group_id(self) -> str:
        return self[0]

    @property
    def generation_id(self) -> int:
        return self[1]

    @property
    def member_id(self) -> str:
        return self[2]

    @property
    def group_instance_id(self) -> Optional[str]:
        return self[3]

    def __repr__(self) -> str:
        return (f"ConsumerGroupMetadata(group_id={self[0]!r}, generation_id={self[1]}, "
                f"member_id={self[2]!r}, group_instance_id={self[3]!r})")


def _tps(partitions: Any) -> List[TopicPartition]:
    if isinstance(partitions, TopicPartition):
        return [partitions]
    out = []
    for p in partitions:
        out.append(p if isinstance(p, TopicPartition) else TopicPartition(*p))
    return out


class Coordinator:
    """The group's client side (``consumer.coordinator``): coordinator
    discovery and membership state (docs/semantics.md §2)."""

    def __init__(self, core: "_core._Consumer") -> None:
        self._core = core

    def ensure_coordinator_ready(self, timeout_ms: int) -> bool:
        """Discover the coordinator (FindCoordinator to the least-loaded
        node, retried with backoff); False when ``timeout_ms`` passed."""
        return bool(self._core.ensure_coordinator_ready(int(timeout_ms)))

    def coordinator(self) -> Optional[_core.Node]:
        return self._core.coordinator()

    def coordinator_unknown(self) -> bool:
        return self._core.coordinator() is None

    def mark_coordinator_unknown(self, reason: str = "marked by the application") -> None:
        self._core.mark_coordinator_unknown(str(reason))

    def generation(self) -> int:
        return self._core.generation()[0]

    def member_id(self) -> str:
        return self._core.generation()[1]

    def protocol(self) -> Optional[str]:
        return self._core.generation()[2]

    def state(self) -> str:
        return self._core.generation()[3]

    def __repr__(self) -> str:
        gen, member, proto, state = self._core.generation()
        return f"Coordinator(node={self.coordinator()!r}, generation={gen}, member_id={member!r}, state={state})"


class Consumer:
    """Consume records from Kafka.

    ``Consumer("host:9092", group_id="g", auto_offset_reset="earliest")`` or,
    confluent-kafka style, ``Consumer({"bootstrap.servers": ..., "group.id": "g"})``.
    Invalid or unknown options raise ``ValueError`` naming the option.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[str], Mapping[str, Any], None] = None,
                 **config: Any) -> None:
        if isinstance(bootstrap_servers, Mapping):
            cfg = dict(bootstrap_servers)
        else:
            cfg = {} if bootstrap_servers is None else {"bootstrap_servers": bootstrap_servers}
        self.config = CONSUMER.resolve(cfg, **config)
        core_cfg = dict(self.config)
        self._error_cb = core_cfg.pop("error_cb", None)
        stats_cb = core_cfg.pop("stats_cb", None)
        self._core = _core._Consumer(core_cfg)
        # poll_arrow's batches as one Arrow stream (made on first use):
        # pyarrow imports its schema once, not with every batch.
        self._arrow_reader: Any = None
        self._stats = _stats.StatsEmitter(int(self.config["statistics_interval_ms"]), stats_cb,
                                          self.metrics, "consumer", str(self.config["client_id"]))
        self.coordinator = Coordinator(self._core)
        self._on_assign: Optional[Callback] = None
        self._on_revoke: Optional[Callback] = None
        self._on_lost: Optional[Callback] = None
        self._commit_callbacks: Dict[int, Callable] = {}
        self._tokens = itertools.count(1)
        self._closed = False
        self._timeout_ms = int(self.config["default_api_timeout_ms"])

    # ----- subscription -------------------------------------------------------------

    def subscribe(self, topics: Union[str, Iterable[str], "re.Pattern[str]"],
                  on_assign: Optional[Callback] = None, on_revoke: Optional[Callback] = None,
                  on_lost: Optional[Callback] = None) -> None:
        """Join the group for these topics (a list, or a regex: a
        ``re.Pattern`` or a string starting with ``^`` as in librdkafka).

        A regex subscribes to every topic whose whole name matches it (Java's
        ``subscribe(Pattern)``; librdkafka searches instead, so write
        ``"^orders-.*"``, not ``"^orders-"``), internal topics excluded. The
        Rust core matches it again after every metadata update (every
        ``metadata_max_age_ms``), so topics created or deleted later join or
        leave the subscription. The regex is compiled by Rust's ``regex``
        crate: look-around and backreferences are refused (ValueError);
        ``re.IGNORECASE``, ``re.DOTALL`` and ``re.MULTILINE`` carry over."""
        if self.config["group_id"] is None:
            raise ValueError("subscribe() needs option 'group_id'; use assign() without a group")
        if isinstance(topics, re.Pattern) or (isinstance(topics, str) and topics.startswith("^")):
            self._core.subscribe_pattern(_pattern_source(topics))
            self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
            return
        if isinstance(topics, str):
            topics = [topics]
        names = [str(t) for t in topics]
        if not names or any(not t for t in names):
            raise ValueError(f"invalid topics for subscribe(): {names!r}")
        self._core.subscribe(names)
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost

    def assign(self, partitions: Iterable[Any]) -> None:
        """Take these partitions, without a group rebalance."""
        self._core.assign(_tps(partitions))

    def unassign(self) -> None:
        """Drop every manually assigned partition (``assign([])``)."""
        self._core.assign([])

    def incremental_assign(self, partitions: Iterable[Any]) -> None:
        """Add partitions to the manual assignment; the partitions already
        assigned keep their positions (librdkafka's incremental_assign)."""
        current = self._core.assignment()
        self._core.assign(list(dict.fromkeys([*current, *_tps(partitions)])))

    def incremental_unassign(self, partitions: Iterable[Any]) -> None:
        """Remove partitions from the manual assignment; the others keep
        their positions."""
        gone = set(_tps(partitions))
        self._core.assign([tp for tp in self._core.assignment() if tp not in gone])

    def assignment(self) -> List[TopicPartition]:
        return self._core.assignment()

    def subscription(self) -> List[str]:
        return self._core.subscription()

    def unsubscribe(self) -> None:
        self._core.unsubscribe()

    # ----- poll ----------------------------------------------------------------------

    def _run_events(self, events: list, commits: list) -> None:
        try:
            for kind, parts in events:
                cb = {"assigned": self._on_assign, "revoked": self._on_revoke, "lost": self._on_lost}[kind]
                if kind == "lost" and cb is None:
                    # Java: without onPartitionsLost, onPartitionsRevoked runs.
                    cb = self._on_revoke
                if cb is not None:
                    cb(list(parts))
        finally:
            if events:
                self._core.ack_events()
            for token, err in commits:
                fn = self._commit_callbacks.pop(token, None)
                if fn is not None:
                    fn(err)

    def _poll(self, method: Callable, timeout_ms: Optional[float], max_records: int) -> Any:
        timeout_ms = 0 if timeout_ms is None else max(0, int(timeout_ms))
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                events, records, commits = method(timeout_ms, max_records)
            finally:
                # Transient errors do not raise from poll: they reach
                # error_cb and the `ferrokafka` loggers (as librdkafka).
                _events.dispatch(self._core, self._error_cb)
                self._stats.maybe_emit()
            if events or commits:
                self._run_events(events, commits)
            if records or not events:
                return records
            timeout_ms = max(0, int((deadline - time.monotonic()) * 1000))

    def poll(self, timeout_ms: Optional[float] = 0, max_records: Optional[int] = None) -> List[Message]:
        """Up to ``max_records`` records (default ``max_poll_records``),
        waiting up to ``timeout_ms`` for the first. Runs rebalance and commit
        callbacks first."""
        n = self.config["max_poll_records"] if max_records is None else int(max_records)
        return self._poll(self._core.poll, timeout_ms, n)

    def poll_arrow(self, timeout_ms: Optional[float] = 0, max_records: int = 100_000) -> Any:
        """The records as one ``pyarrow.RecordBatch`` with the columns of
        Spark's Kafka source (key, value, topic, partition, offset,
        timestamp, timestampType, headers), built in Rust: no Python object
        per record. An empty batch when nothing arrived in time. A fetched
        run of one partition of 1,024 records or more comes in a batch of
        its own (its buffers become the batch without a copy; call again for
        the next); smaller runs are merged up to ``max_records``."""
        reader = self._arrow_reader
        if reader is None:
            import pyarrow as pa

            reader = self._arrow_reader = _arrow_reader(pa, self._core)
        # The poll leaves its batch (or none: then an empty one) for the
        # stream, whose next batch it is.
        self._poll(self._core.poll_arrow_next, timeout_ms, int(max_records))
        return reader.read_next_batch()

    def __iter__(self) -> Iterator[Message]:
        while not self._closed:
            for m in self.poll(timeout_ms=100):
                yield m

    # ----- offsets ---------------------------------------------------------------------

    def commit(self, offsets: Optional[Mapping[Any, Any]] = None, asynchronous: bool = False,
               callback: Optional[Callable[[Optional[BaseException]], Any]] = None,
               timeout_ms: Optional[int] = None) -> None:
        """Commit ``offsets`` ({tp: offset or OffsetAndMetadata}) or, by
        default, the positions of everything consumed. Synchronous commits
        retry retriable errors until ``timeout_ms`` (default
        ``default_api_timeout_ms``); an
        asynchronous commit's ``callback(error_or_None)`` runs in a later ``poll``.
        Ctrl-C interrupts a synchronous commit at once: the offsets are then
        committed or not (a request in flight may still be applied), and
        committing them again is harmless."""
        core_offsets = None
        if offsets is not None:
            core_offsets = {}
            for tp, o in offsets.items():
                tp = tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)
                if isinstance(o, tuple):
                    core_offsets[tp] = (int(o[0]), o[1])
                else:
                    core_offsets[tp] = int(o)
        if asynchronous:
            token = next(self._tokens)
            if callback is not None:
                self._commit_callbacks[token] = callback
            self._core.commit(core_offsets, True, token)
        else:
            t = self._timeout_ms if timeout_ms is None else int(timeout_ms)
            self._core.commit(core_offsets, False, 0, t)

    def committed(self, partitions: Iterable[Any], timeout_ms: Optional[int] = None) -> Dict[TopicPartition, Optional[OffsetAndMetadata]]:
        """The group's committed offsets ({tp: OffsetAndMetadata or None})."""
        t = self._timeout_ms if timeout_ms is None else int(timeout_ms)
        return {tp: (None if o is None else OffsetAndMetadata(*o))
                for tp, o in self._core.committed(_tps(partitions), t)}

    def position(self, tp: Any, timeout_ms: Optional[int] = None) -> int:
        """The offset of the next record to be returned for ``tp``."""
        t = self._timeout_ms if timeout_ms is None else int(timeout_ms)
        tp = tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)
        return self._core.position(tp, t)

    def seek(self, tp: Any, offset: int) -> None:
        tp = tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)
        if int(offset) < 0:
            raise ValueError(f"invalid offset {offset!r} for seek(): must be >= 0")
        self._core.seek(tp, int(offset))

    def seek_to_beginning(self, tps: Optional[Iterable[Any]] = None) -> None:
        self._core.seek_to(None if tps is None else _tps(tps), False)

    def seek_to_end(self, tps: Optional[Iterable[Any]] = None) -> None:
        self._core.seek_to(None if tps is None else _tps(tps), True)

    def _list(self, query: List[Tuple[TopicPartition, int]], timeout_ms: Optional[int]) -> Dict[TopicPartition, Any]:
        t = self._timeout_ms if timeout_ms is None else int(timeout_ms)
        return dict(self._core.list_offsets(query, t))

    def beginning_offsets(self, tps: Iterable[Any], timeout_ms: Optional[int] = None) -> Dict[TopicPartition, int]:
        # The core asks again until earliest and latest have an offset
        # (docs/semantics.md §8.8), so every answer here is one.
        return {tp: o[0] for tp, o in self._list([(tp, EARLIEST) for tp in _tps(tps)], timeout_ms).items()}

    def end_offsets(self, tps: Iterable[Any], timeout_ms: Optional[int] = None) -> Dict[TopicPartition, int]:
        """The log end offset (the high watermark; the last stable offset
        under read_committed) of each partition."""
        return {tp: o[0] for tp, o in self._list([(tp, LATEST) for tp in _tps(tps)], timeout_ms).items()}

    def offsets_for_times(self, timestamps: Mapping[Any, int], timeout_ms: Optional[int] = None) -> Dict[TopicPartition, Optional[Tuple[int, int]]]:
        """{tp: (offset, timestamp)} of the first record with a timestamp at
        or after the given one, or None when there is none."""
        q = []
        for tp, ts in timestamps.items():
            tp = tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)
            if int(ts) < 0:
                raise ValueError(f"invalid timestamp {ts!r} for {tp}: must be >= 0")
            q.append((tp, int(ts)))
        return self._list(q, timeout_ms)

    def get_watermark_offsets(self, tp: Any, timeout_ms: Optional[int] = None, cached: bool = False) -> Tuple[int, int]:
        """(low, high) like confluent-kafka's: cached from the last fetch, or asked."""
        tp = tp if isinstance(tp, TopicPartition) else TopicPartition(*tp)
        if cached:
            w = self._core.watermarks(tp)
            return w if w is not None else (-1, -1)
        return self.beginning_offsets([tp], timeout_ms)[tp], self.end_offsets([tp], timeout_ms)[tp]

    # ----- metrics ---------------------------------------------------------------------

    def metrics(self) -> Dict[str, float]:
        """{name: value} with Java's consumer metric names (docs/metrics.md);
        per-partition figures are keyed ``name{topic=T,partition=P}``."""
        return dict(self._core.metrics())

    def lag(self) -> Dict[TopicPartition, int]:
        """{tp: records behind} per assigned partition: the high watermark of
        its last fetch minus the position. Sends no request, so a partition
        not fetched yet is absent."""
        return dict(self._core.lag())

    # ----- flow control --------------------------------------------------------------

    def pause(self, tps: Iterable[Any]) -> None:
        self._core.pause(_tps(tps))

    def resume(self, tps: Iterable[Any]) -> None:
        self._core.resume(_tps(tps))

    def paused(self) -> List[TopicPartition]:
        return self._core.paused()

    # ----- metadata ----------------------------------------------------------------------

    def list_topics(self, timeout_ms: Optional[int] = None) -> Dict[str, int]:
        """{topic: partition count}, freshly asked of the cluster.

        Raises :class:`~ferrokafka.KafkaTimeoutError` naming the last
        connection error when no broker answers within ``timeout_ms``
        (default ``default_api_timeout_ms``)."""
        self._core.watch_all_topics()
        t = self._timeout_ms if timeout_ms is None else int(timeout_ms)
        _, topics = self._core.topics(refresh=True, timeout_ms=t, strict=True)
        return dict(topics)

    def partitions_for(self, topic: str) -> List[int]:
        topics = self.list_topics()
        return list(range(topics[topic])) if topic in topics else []

    @property
    def metadata(self) -> Any:
        return self._core.metadata()

    # ----- close -------------------------------------------------------------------------

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group id, generation (the member epoch under
        ``group_protocol="consumer"``), member id and group instance id, for
        ``Producer.send_offsets_to_transaction``."""
        if self.config["group_id"] is None:
            raise IllegalStateError("group_metadata() needs a consumer with a group_id")
        gen, member, _proto, _state = self._core.generation()
        return ConsumerGroupMetadata(self.config["group_id"], gen, member,
                                     self.config.get("group_instance_id"))

    @property
    def _log_id(self) -> int:
        """This client's id on its log records (their ``ferrokafka_client``
        attribute), for routing them per client."""
        return self._core._log_id

    def close(self, timeout_ms: Optional[int] = None) -> None:
        """Commit (with auto-commit), leave the group, stop. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._arrow_reader = None
        t = 30_000 if timeout_ms is None else int(timeout_ms)
        self._core.close(t)

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Consumer(group_id={self.config['group_id']!r}, assignment={self.assignment() if not self._closed else []!r})"


# Python regex flags with the same meaning as the inline flags of Rust's
# `regex` crate (re.UNICODE is the default of str patterns in both).
# re.VERBOSE is not among them: a trailing comment would swallow the anchors
# the core wraps the pattern in.
_INLINE_FLAGS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"))


def _pattern_source(topics: Any) -> str:
    """The regex source for the Rust core, with ``re.Pattern`` flags inlined."""
    if not isinstance(topics, re.Pattern):
        return str(topics)
    if not isinstance(topics.pattern, str):
        raise TypeError("subscribe() needs a str pattern, not bytes")
    flags = topics.flags & ~re.UNICODE
    inline = "".join(c for f, c in _INLINE_FLAGS if flags & f)
    unsupported = flags & ~sum(f for f, _ in _INLINE_FLAGS)
    if unsupported:
        raise ValueError(f"invalid pattern for subscribe(): flags {re.RegexFlag(unsupported)!r} are not supported")
    return f"(?{inline}){topics.pattern}" if inline else topics.pattern


class _ArrowStream:
    """The consumer's Arrow stream (rust/ferrokafka-py/src/arrow_stream.rs)
    through the Arrow PyCapsule protocol."""

    __slots__ = ("_core",)

    def __init__(self, core: Any) -> None:
        self._core = core

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._core.arrow_stream()


def _arrow_reader(pa: Any, core: Any) -> Any:
    """A pyarrow reader of ``core``'s Arrow stream: ``from_stream`` since
    pyarrow 15, the capsule import before (pyarrow 14)."""
    from_stream = getattr(pa.RecordBatchReader, "from_stream", None)
    if from_stream is not None:
        return from_stream(_ArrowStream(core))
    return pa.RecordBatchReader._import_from_c_capsule(core.arrow_stream())


class _RecordBatchSchema:
    """The schema ``poll_arrow`` batches are built with in Rust
    (rust/ferrokafka-py/src/arrow.rs), through the Arrow PyCapsule protocol."""

    def __arrow_c_schema__(self) -> Any:
        return _core.record_batch_schema()


def spark_schema(pa: Any) -> Any:
    """The Arrow schema of ``poll_arrow`` batches (Spark's Kafka source)."""
    return pa.schema(_RecordBatchSchema())
