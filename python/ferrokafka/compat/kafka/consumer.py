"""``KafkaConsumer`` with kafka-python's signature over ``ferrokafka.Consumer``.

The facade translates names, units and shapes: ``poll`` returns
``{TopicPartition: [ConsumerRecord]}``, partitions are kafka-python's named
tuples, errors are kafka-python's classes. Three behaviours of kafka-python
are built here because the native consumer has no counterpart:

* iteration stops after ``consumer_timeout_ms`` without a record, and takes
  one record at a time from the native buffer, so the position (and what
  auto-commit commits) never runs ahead of what the loop was given;
* ``subscribe`` without a ``group_id`` assigns every partition of the topics
  to this consumer and follows partitions added later, as kafka-python does;
* a ``ConsumerRebalanceListener`` is called through the native
  ``on_assign`` / ``on_revoke`` / ``on_lost`` callbacks (inside ``poll``).
"""

from __future__ import annotations

import logging
import re
import time
from abc import ABC, abstractmethod
from collections import namedtuple
from typing import Any, Dict, List, Optional

from ... import errors as _native_errors
from ...consumer import Consumer as _NativeConsumer
from . import _config
from ._native import bootstrapped, start_bootstrap
from .errors import (
    CommitFailedError,
    IllegalStateError,
    translate,
    translated,
)
from .future import Future
from .serializer import deserializer_fn
from .structs import (
    ConsumerGroupMetadata,
    MemberState,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
    check_tp,
    from_native,
    to_native,
)

__all__ = ["KafkaConsumer", "ConsumerRecord", "ConsumerRebalanceListener"]

log = logging.getLogger("ferrokafka.compat.kafka")

ConsumerRecord = namedtuple("ConsumerRecord", [
    "topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type",
    "key", "value", "headers", "checksum", "serialized_key_size", "serialized_value_size",
    "serialized_header_size"])

# Error codes of a commit refused because the group moved on: kafka-python
# raises CommitFailedError for them.
_REBALANCED = frozenset({22, 25, 27, 82})  # ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, FENCED_INSTANCE_ID
_GROUPLESS_REFRESH_S = 1.0


class ConsumerRebalanceListener(ABC):
    """Called when the group gives this consumer partitions or takes them."""

    @abstractmethod
    def on_partitions_revoked(self, revoked):
        """Before the partitions go (and at close): commit their offsets here."""

    @abstractmethod
    def on_partitions_assigned(self, assigned):
        """After a rebalance gave these partitions, before fetching from them."""

    def on_partitions_lost(self, lost):
        """The member was evicted: the partitions are gone without a clean
        hand-over. By default the same as a revocation."""
        return self.on_partitions_revoked(lost)


class _GroupMetadata(ConsumerGroupMetadata):
    """kafka-python's ConsumerGroupMetadata, carrying the native consumer's
    snapshot (``_native``) for the native transactional producer."""

    _native: Any = None


def _commit_error(e: BaseException) -> BaseException:
    if isinstance(e, _native_errors.KafkaError) and e.code in _REBALANCED:
        out = CommitFailedError()
        out.__cause__ = e
        return out
    return translate(e)


class KafkaConsumer:
    """``KafkaConsumer(*topics, **configs)``, kafka-python's consumer."""

    DEFAULT_CONFIG: Dict[str, Any] = {e.name: e.default for (n, c), e in _config.TABLE.items() if c == "C"}

    def __init__(self, *topics: str, **configs: Any) -> None:
        native_cfg, facade = _config.split_config("C", configs)
        self.config = {**self.DEFAULT_CONFIG, **configs, "client_id": facade["client_id"]}
        self._key_de = deserializer_fn(facade["key_deserializer"])
        self._value_de = deserializer_fn(facade["value_deserializer"])
        # kafka-python: a negative consumer_timeout_ms means no timeout, like inf.
        cto = float(facade["consumer_timeout_ms"])
        self._consumer_timeout_ms = float("inf") if cto < 0 else cto
        self._default_commit_cb = facade["default_offset_commit_callback"]
        self._metrics_enabled = bool(facade["metrics_enabled"])
        self._group_id = native_cfg.get("group_id")
        self._auto_commit = self._group_id is not None and bool(native_cfg.get("enable_auto_commit", True))
        self._closed = False
        # kafka-python's subscription state: topics or a pattern (group or
        # not), or a manual assignment.
        self._topics: Optional[set] = None
        self._pattern: Optional["re.Pattern[str]"] = None
        self._manual = False
        self._groupless_next = 0.0
        self._c = bootstrapped(_NativeConsumer, native_cfg, facade["bootstrap_timeout_ms"])
        if topics:
            self.subscribe(topics)

    # -- connection ------------------------------------------------------------
    def bootstrap_connected(self) -> bool:
        return any(n.id >= 0 for n in self._c.metadata.fetch().nodes)

    def bootstrap(self, timeout_ms: Optional[int] = None, refresh: bool = False) -> None:
        if refresh or not self.bootstrap_connected():
            start_bootstrap(self._c, 2**31 - 1 if timeout_ms is None else timeout_ms, self.config["bootstrap_servers"])

    # -- subscription ----------------------------------------------------------
    def subscribe(self, topics=(), pattern: Optional[str] = None, listener: Optional[ConsumerRebalanceListener] = None) -> None:
        """Subscribe to topics, or to every topic a regex matches (kafka-python
        matches from the start of the name: ``re.match``)."""
        if self._manual:
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        if isinstance(topics, str):
            topics = [topics]
        if topics and pattern:
            raise IllegalStateError("You must choose topics or pattern, but not both")
        if not topics and not pattern:
            raise ValueError("You must choose topics or pattern")
        if listener is not None and not isinstance(listener, ConsumerRebalanceListener):
            raise TypeError("listener must be a ConsumerRebalanceListener")
        if pattern is not None:
            self._pattern, self._topics = re.compile(pattern), None
        else:
            self._topics, self._pattern = {str(t) for t in topics}, None
        if self._group_id is None:
            self._groupless_next = 0.0
            self._refresh_groupless()
            return
        cbs: Dict[str, Any] = {}
        if listener is not None:
            cbs = {"on_assign": lambda parts: listener.on_partitions_assigned([from_native(p) for p in parts]),
                   "on_revoke": lambda parts: listener.on_partitions_revoked([from_native(p) for p in parts]),
                   "on_lost": lambda parts: listener.on_partitions_lost({from_native(p) for p in parts})}
        # kafka-python's re.match is anchored at the start only; the native
        # consumer matches whole names, hence the trailing ".*".
        what: Any = re.compile(f"(?:{pattern}).*") if pattern is not None else sorted(self._topics or ())
        with translated():
            self._c.subscribe(what, **cbs)

    def _refresh_groupless(self) -> None:
        """Without a group, kafka-python assigns every partition of the
        subscribed topics to this consumer and follows metadata changes."""
        now = time.monotonic()
        if now < self._groupless_next:
            return
        with translated():
            counts = self._c.list_topics()
        if self._pattern is not None:
            # exclude_internal_topics (only True is accepted): never match them.
            internal = self._c.metadata.fetch().internal_topics
            names = [t for t in counts if self._pattern.match(t) and t not in internal and not t.startswith("__")]
            complete = bool(names)
        else:
            names = [t for t in (self._topics or ()) if t in counts]
            complete = len(names) == len(self._topics or ())
        # Look again soon while a subscribed topic is missing; then at the
        # metadata refresh interval, as kafka-python follows metadata updates.
        self._groupless_next = now + (self.config["metadata_max_age_ms"] / 1000 if complete
                                      else _GROUPLESS_REFRESH_S)
        wanted = {to_native((t, p)) for t in names for p in range(counts[t])}
        if wanted != set(self._c.assignment()):
            with translated():
                self._c.assign(sorted(wanted))

    def subscription(self) -> Optional[set]:
        if self._pattern is not None:
            if self._group_id is None:
                return {tp.topic for tp in self._c.assignment()}
            return set(self._c.subscription())
        return None if self._topics is None else set(self._topics)

    def unsubscribe(self) -> None:
        with translated():
            self._c.unsubscribe()
        self._topics, self._pattern, self._manual = None, None, False

    def assign(self, partitions) -> None:
        """Take these partitions (no group rebalance); an empty list unsubscribes."""
        if self._topics is not None or self._pattern is not None:
            raise IllegalStateError("Subscription to topics, partitions and pattern are mutually exclusive")
        if not partitions:
            self.unsubscribe()
            return
        with translated():
            self._c.assign([to_native(check_tp(tp)) for tp in partitions])
        self._manual = True

    def assignment(self) -> set:
        return {from_native(tp) for tp in self._c.assignment()}

    # -- records -----------------------------------------------------------------
    def _record(self, m: Any) -> ConsumerRecord:
        err = m.error()
        if err is not None:
            raise translate(err)
        headers = list(m.headers)
        key, value = m.key, m.value
        return ConsumerRecord(
            m.topic, m.partition, -1 if m.leader_epoch is None else m.leader_epoch, m.offset,
            m.timestamp_ms, m.timestamp_type,
            self._key_de(m.topic, headers, key) if self._key_de else key,
            self._value_de(m.topic, headers, value) if self._value_de else value,
            headers, None,
            -1 if key is None else len(key), -1 if value is None else len(value),
            sum(len(k.encode("utf-8")) + (0 if v is None else len(v)) for k, v in headers) if headers else -1)

    def _native_poll(self, timeout_ms: float, max_records: int) -> list:
        if self._group_id is None and (self._topics is not None or self._pattern is not None):
            self._refresh_groupless()
        with translated():
            return self._c.poll(timeout_ms, max_records)

    def poll(self, timeout_ms: float = 0, max_records: Optional[int] = None,
             update_offsets: bool = True) -> Dict[TopicPartition, List[ConsumerRecord]]:
        """Records since the last poll, ``{TopicPartition: [ConsumerRecord]}``,
        waiting up to ``timeout_ms`` for some. ``update_offsets=False`` leaves
        the positions where they were (the records come again)."""
        if timeout_ms < 0:
            raise ValueError("Timeout must not be negative")
        if max_records is None:
            max_records = self.config["max_poll_records"]
        if not isinstance(max_records, int):
            raise TypeError("max_records must be an integer")
        if max_records <= 0:
            raise ValueError("max_records must be positive")
        if self._closed:
            raise IllegalStateError("KafkaConsumer is closed")
        out: Dict[TopicPartition, List[ConsumerRecord]] = {}
        for m in self._native_poll(timeout_ms, max_records):
            out.setdefault(TopicPartition(m.topic, m.partition), []).append(self._record(m))
        if not update_offsets:
            with translated():
                for tp, recs in out.items():
                    self._c.seek(to_native(tp), recs[0].offset)
        return out

    def __iter__(self) -> "KafkaConsumer":
        return self

    def __next__(self) -> ConsumerRecord:
        if self._closed:
            raise StopIteration("KafkaConsumer closed")
        # consumer_timeout_ms bounds the wait for each record, as in kafka-python.
        deadline = time.monotonic() + self._consumer_timeout_ms / 1000 \
            if self._consumer_timeout_ms != float("inf") else None
        while not self._closed:
            wait = 1000.0 if deadline is None else min(1000.0, max(0.0, (deadline - time.monotonic()) * 1000))
            # One record per native call: the position advances only past
            # records handed to the loop (what auto-commit may commit).
            recs = self._native_poll(int(wait), 1)
            if recs:
                return self._record(recs[0])
            if deadline is not None and time.monotonic() >= deadline:
                break
        raise StopIteration()

    # -- positions -----------------------------------------------------------------
    def _assigned(self, tp: Any) -> bool:
        return to_native(tp) in set(self._c.assignment())

    def seek(self, partition: TopicPartition, offset: int) -> None:
        check_tp(partition)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError("Offset must be int >= 0")
        if not self._assigned(partition):
            raise ValueError("Unassigned partition")
        with translated():
            self._c.seek(to_native(partition), offset)

    def _seek_to(self, partitions: tuple, end: bool) -> None:
        for p in partitions:
            check_tp(p, "partitions")
        assigned = set(self._c.assignment())
        if not partitions:
            if not assigned:
                raise ValueError("No partitions are currently assigned")
            tps = sorted(assigned)
        else:
            tps = [to_native(p) for p in partitions]
            for p, n in zip(partitions, tps):
                if n not in assigned:
                    raise ValueError(f"Unassigned partition: {p}")
        with translated():
            (self._c.seek_to_end if end else self._c.seek_to_beginning)(tps)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, False)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._seek_to(partitions, True)

    def position(self, partition: TopicPartition, timeout_ms: Optional[int] = None) -> Optional[int]:
        check_tp(partition)
        if not self._assigned(partition):
            raise IllegalStateError("Partition is not assigned")
        with translated():
            return self._c.position(to_native(partition), timeout_ms)

    def highwater(self, partition: TopicPartition) -> Optional[int]:
        """The high watermark the last fetch of ``partition`` saw (None before one)."""
        check_tp(partition)
        if not self._assigned(partition):
            raise IllegalStateError("Partition is not assigned")
        low, high = self._c.get_watermark_offsets(to_native(partition), cached=True)
        return None if high < 0 else high

    # -- commits -------------------------------------------------------------------
    def _needs_group(self) -> None:
        if self._group_id is None:
            raise IllegalStateError("Requires group_id")

    @staticmethod
    def _native_offsets(offsets: Optional[Dict[Any, Any]]) -> Optional[Dict[Any, Any]]:
        if offsets is None:
            return None
        out: Dict[Any, Any] = {}
        for tp, o in offsets.items():
            if isinstance(o, tuple):  # OffsetAndMetadata (offset, metadata, leader_epoch)
                out[to_native(tp)] = (int(o[0]), o[1] if len(o) > 1 and o[1] != "" else None)
            else:
                out[to_native(tp)] = int(o)
        return out

    def commit(self, offsets: Optional[Dict[TopicPartition, OffsetAndMetadata]] = None,
               timeout_ms: Optional[int] = None) -> None:
        """Commit ``offsets`` (default: the positions consumed) and wait.
        CommitFailedError when the group rebalanced meanwhile."""
        self._needs_group()
        try:
            self._c.commit(self._native_offsets(offsets), timeout_ms=timeout_ms)
        except _native_errors.KafkaError as e:
            raise _commit_error(e) from e

    def commit_async(self, offsets: Optional[Dict[TopicPartition, OffsetAndMetadata]] = None,
                     callback=None) -> Future:
        """Commit without waiting. ``callback(offsets, error_or_None)`` (or
        ``default_offset_commit_callback``) runs in a later ``poll``; the
        returned Future settles then too."""
        self._needs_group()
        cb = callback or self._default_commit_cb
        future = Future()

        def done(err: Optional[BaseException]) -> None:
            err = None if err is None else _commit_error(err)
            if cb is not None:
                try:
                    cb(offsets, err)
                except Exception:  # kafka-python logs a failing commit callback
                    log.exception("Error in the offset commit callback")
            if err is None:
                future.success(None)
            else:
                future.failure(err)

        with translated():
            self._c.commit(self._native_offsets(offsets), asynchronous=True, callback=done)
        return future

    def committed(self, partition: TopicPartition, metadata: bool = False,
                  timeout_ms: Optional[int] = None) -> Any:
        """The group's committed offset of ``partition`` (an OffsetAndMetadata
        with ``metadata=True``), or None."""
        self._needs_group()
        check_tp(partition)
        with translated():
            got = self._c.committed([to_native(partition)], timeout_ms).get(to_native(partition))
        if got is None:
            return None
        return OffsetAndMetadata(got.offset, got.metadata, -1) if metadata else got.offset

    def group_metadata(self) -> ConsumerGroupMetadata:
        if self._group_id is None:
            return ConsumerGroupMetadata(group_id=None)
        coord = self._c.coordinator
        st = {"STABLE": MemberState.STABLE, "UNJOINED": MemberState.UNJOINED}.get(
            str(coord.state()).upper(), MemberState.REBALANCING)
        md = _GroupMetadata(self._group_id, coord.generation(), coord.member_id(),
                            self.config.get("group_instance_id"), st)
        native = getattr(self._c, "group_metadata", None)
        # The native snapshot rides along for KafkaProducer.send_offsets_to_transaction.
        md._native = native() if callable(native) else None
        return md

    # -- offsets lookup --------------------------------------------------------------
    def _api_timeout(self, timeout_ms: Optional[int]) -> int:
        # kafka-python bounds offset lookups by request_timeout_ms by default
        # (ferrokafka's native default is default_api_timeout_ms).
        return int(self.config["request_timeout_ms"] if timeout_ms is None else timeout_ms)

    def beginning_offsets(self, partitions, timeout_ms: Optional[int] = None) -> Dict[TopicPartition, int]:
        with translated():
            got = self._c.beginning_offsets([to_native(p) for p in partitions], self._api_timeout(timeout_ms))
        return {from_native(tp): o for tp, o in got.items()}

    def end_offsets(self, partitions, timeout_ms: Optional[int] = None) -> Dict[TopicPartition, int]:
        with translated():
            got = self._c.end_offsets([to_native(p) for p in partitions], self._api_timeout(timeout_ms))
        return {from_native(tp): o for tp, o in got.items()}

    def offsets_for_times(self, timestamps: Dict[TopicPartition, int],
                          timeout_ms: Optional[int] = None) -> Dict[TopicPartition, Optional[OffsetAndTimestamp]]:
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ValueError(f"The target time for partition {tp} is {ts}. The target time cannot be negative.")
        with translated():
            got = self._c.offsets_for_times({to_native(tp): int(ts) for tp, ts in timestamps.items()},
                                            self._api_timeout(timeout_ms))
        return {from_native(tp): (None if r is None else OffsetAndTimestamp(r[0], r[1], -1))
                for tp, r in got.items()}

    # -- metadata --------------------------------------------------------------------
    def topics(self) -> set:
        with translated():
            return set(self._c.list_topics())

    def partitions_for_topic(self, topic: str) -> set:
        with translated():
            return set(self._c.partitions_for(topic))

    # -- flow control ------------------------------------------------------------------
    def pause(self, *partitions: TopicPartition) -> None:
        with translated():
            self._c.pause([to_native(check_tp(p, "partitions")) for p in partitions])

    def resume(self, *partitions: TopicPartition) -> None:
        with translated():
            self._c.resume([to_native(check_tp(p, "partitions")) for p in partitions])

    def paused(self) -> set:
        return {from_native(tp) for tp in self._c.paused()}

    def metrics(self, raw: bool = False) -> Optional[Dict[str, Dict[str, float]]]:
        """``{"consumer-metrics": {name: value}}`` with ferrokafka's metric
        names; None with ``metrics_enabled=False``."""
        if raw:
            raise NotImplementedError("metrics(raw=True): ferrokafka keeps no KafkaMetric objects")
        if not self._metrics_enabled:
            return None
        return {"consumer-metrics": dict(self._c.metrics())}

    # -- close -------------------------------------------------------------------------
    def close(self, autocommit: bool = True, timeout_ms: Optional[int] = None) -> None:
        """Commit (with auto-commit), leave the group, stop; within
        ``timeout_ms`` (default request_timeout_ms)."""
        if self._closed:
            return
        if not autocommit and self._auto_commit:
            # The native consumer commits on close whenever auto-commit is on.
            raise NotImplementedError(
                "close(autocommit=False) with enable_auto_commit=True: ferrokafka's consumer "
                "always commits on close when auto-commit is on")
        self._closed = True
        t = self.config["request_timeout_ms"] if timeout_ms is None else timeout_ms
        with translated():
            self._c.close(int(t))
        for de in (self.config.get("key_deserializer"), self.config.get("value_deserializer")):
            close = getattr(de, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> "KafkaConsumer":
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        # kafka-python skips the close commit when the block raised; the
        # native consumer cannot skip it with auto-commit on (logged).
        if exc_type is not None and self._auto_commit:
            log.warning("KafkaConsumer closed by an exception: ferrokafka commits the consumed "
                        "offsets on close anyway (auto-commit is on)")
            self.close()
        else:
            self.close(autocommit=exc_type is None)

    def __str__(self) -> str:
        return f"<KafkaConsumer client_id={self.config['client_id']}, group_id={self._group_id}>"
