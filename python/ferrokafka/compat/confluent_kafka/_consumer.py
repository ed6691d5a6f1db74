"""confluent-kafka's ``Consumer`` over ferrokafka's native Consumer.

Timeouts are seconds (-1 or None: forever), as in confluent-kafka; the native
API takes milliseconds. Rebalance callbacks get ``(consumer, [TopicPartition])``
and run inside ``poll()``/``consume()`` in the calling thread. Calling
``assign()`` / ``incremental_assign()`` inside ``on_assign`` (librdkafka's way
to choose start offsets) seeks to the offsets given; ``unassign()`` inside
``on_revoke`` is what the native consumer does after the callback anyway.

What librdkafka does that the native consumer does not is done here:
``enable.partition.eof`` (a ``_PARTITION_EOF`` event when the position reaches
the high watermark the last fetch reported), ``store_offsets`` with
``enable.auto.offset.store=false`` and ``on_commit`` (the facade then runs
auto-commit itself, from poll/consume/close, and before ``on_revoke``).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ... import _core
from ... import errors as _native_errors
from ...consumer import Consumer as _NativeConsumer
from ...consumer import OffsetAndMetadata
from ._callbacks import native_client, raise_pending
from ._config import translate
from ._error import KafkaError, KafkaException, config_error, from_native, translated
from ._metadata import list_topics, timeout_ms
from ._stats import Stats
from ._types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    Message,
    TopicPartition,
    from_native_message,
    from_native_tp,
)

_log = logging.getLogger("ferrokafka.compat")
_NTP = _core.TopicPartition
_FOREVER_SLICE = 1.0  # an infinite wait is a loop of waits this long (Ctrl-C stays responsive)
_EOF_SLICE = 0.1      # with enable.partition.eof, how often a wait looks for partition ends


def _ntp(tp: Any) -> _core.TopicPartition:
    if isinstance(tp, TopicPartition):
        return tp.native()
    if isinstance(tp, _NTP):
        return tp
    raise TypeError(f"expected a TopicPartition, not {type(tp).__name__}")


def _parts(partitions: Any, what: str) -> List[Any]:
    if not isinstance(partitions, (list, tuple)):
        raise TypeError(f"{what}() takes a list of TopicPartition")
    return list(partitions)


class Consumer:
    """``Consumer(conf)`` with librdkafka property names (docs/compat-confluent.md)."""

    def __init__(self, conf: Optional[dict] = None, **kwargs: Any) -> None:
        if conf is None and not kwargs:
            raise TypeError("expected configuration dict")
        conf = dict(conf or {})
        conf.update(kwargs)
        native, facade = translate(conf, "Consumer")
        if not native.get("group_id"):
            raise config_error("Failed to create consumer: group.id must be set "
                               "(configuration property 'group.id')")
        self._eof = bool(facade["enable.partition.eof"])
        self._auto_store = bool(facade["enable.auto.offset.store"])
        self._on_commit: Optional[Callable] = facade.get("on_commit")
        # The facade commits by itself when what is committed (stored
        # offsets) or who is told (on_commit) is not what the core does.
        self._py_autocommit = bool(native.get("enable_auto_commit", True)) and (
            not self._auto_store or self._on_commit is not None)
        self._autocommit_ms = int(native.get("auto_commit_interval_ms", 5000))
        if self._py_autocommit:
            native["enable_auto_commit"] = False
        self._c, self._error_cb, self._logger = native_client(_NativeConsumer, native, facade)
        self._stats = Stats(facade, "consumer", self._c.config["client_id"],
                            getattr(self._c, "metrics", dict), lambda: 0)
        self._pos: Dict[Any, int] = {}          # next offset after the last message returned
        self._stored: Dict[Any, Tuple[int, Optional[str]]] = {}
        self._eof_at: Dict[Any, int] = {}
        self._in_rebalance = False
        self._next_autocommit = time.monotonic() + self._autocommit_ms / 1000
        self._closed = False

    # -- subscription and assignment -----------------------------------------------------

    def subscribe(self, topics: List[str], on_assign: Optional[Callable] = None,
                  on_revoke: Optional[Callable] = None, on_lost: Optional[Callable] = None) -> None:
        """Join the group for ``topics`` (names starting with ``^`` are regexes)."""
        self._check_open()
        if not isinstance(topics, list):
            raise TypeError("subscribe() takes a list of topic names")
        for name, fn in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable")
        assign_cb = self._rebalance_cb(on_assign, revoking=False)
        revoke_cb = self._rebalance_cb(on_revoke, revoking=True)
        lost_cb = self._rebalance_cb(on_lost, revoking=True) if on_lost is not None else None
        with translated():
            if len(topics) == 1 or any(t.startswith("^") for t in topics):
                patterns = [t for t in topics if t.startswith("^")]
                if patterns and len(topics) > 1:
                    # librdkafka takes lists mixing names and regexes; the
                    # native consumer takes one regex: join them into one.
                    import re
                    alts = [t[1:] if t.startswith("^") else re.escape(t) for t in topics]
                    topics = ["^(?:" + "|".join(alts) + ")"]
                self._c.subscribe(topics[0], on_assign=assign_cb, on_revoke=revoke_cb, on_lost=lost_cb)
            else:
                self._c.subscribe(topics, on_assign=assign_cb, on_revoke=revoke_cb, on_lost=lost_cb)

    def _rebalance_cb(self, user: Optional[Callable], revoking: bool) -> Callable:
        def cb(parts: List[Any]) -> None:
            if revoking:
                if self._py_autocommit:
                    self._commit_stored([p for p in parts], quiet=True)
                for p in parts:
                    self._pos.pop(p, None)
                    self._stored.pop(p, None)
                    self._eof_at.pop(p, None)
            if user is None:
                return
            self._in_rebalance = True
            try:
                user(self, [from_native_tp(p) for p in parts])
            finally:
                self._in_rebalance = False
        return cb

    def unsubscribe(self) -> None:
        self._check_open()
        with translated():
            self._c.unsubscribe()

    def _apply_offsets(self, partitions: List[Any]) -> None:
        for tp in partitions:
            off = tp.offset if isinstance(tp, TopicPartition) else OFFSET_INVALID
            n = _ntp(tp)
            self._eof_at.pop(n, None)
            self._pos.pop(n, None)
            if off >= 0:
                self._c.seek(n, off)
            elif off == OFFSET_BEGINNING:
                self._c.seek_to_beginning([n])
            elif off == OFFSET_END:
                self._c.seek_to_end([n])
            elif off not in (OFFSET_STORED, OFFSET_INVALID):
                raise KafkaException(KafkaError(KafkaError._INVALID_ARG,  # type: ignore[attr-defined]
                                                f"unsupported logical offset {off} for {tp}"))

    def assign(self, partitions: List[Any]) -> None:
        """Consume these partitions (from ``.offset`` when set)."""
        self._check_open()
        parts = _parts(partitions, "assign")
        with translated():
            if not self._in_rebalance:
                self._c.assign([_ntp(p) for p in parts])
            self._apply_offsets(parts)

    def unassign(self) -> None:
        self._check_open()
        if self._in_rebalance:
            return  # the native consumer drops the revoked partitions after on_revoke
        with translated():
            self._c.unassign()
        self._pos.clear()
        self._eof_at.clear()

    def incremental_assign(self, partitions: List[Any]) -> None:
        self._check_open()
        parts = _parts(partitions, "incremental_assign")
        with translated():
            if not self._in_rebalance:
                self._c.incremental_assign([_ntp(p) for p in parts])
            self._apply_offsets(parts)

    def incremental_unassign(self, partitions: List[Any]) -> None:
        self._check_open()
        gone = {_ntp(p) for p in _parts(partitions, "incremental_unassign")}
        if self._in_rebalance:
            return
        with translated():
            self._c.incremental_unassign(list(gone))
        for p in gone:
            self._pos.pop(p, None)
            self._eof_at.pop(p, None)

    def assignment(self) -> List[TopicPartition]:
        self._check_open()
        return [from_native_tp(p) for p in self._c.assignment()]

    # -- consuming ------------------------------------------------------------------------

    def _deliver(self, m: Any) -> Message:
        n = _NTP(m.topic, m.partition)
        self._pos[n] = m.offset + 1
        if self._auto_store and self._py_autocommit:
            self._stored[n] = (m.offset + 1, None)
        msg = from_native_message(m)
        err = m.error()
        if err is not None:
            msg.set_error(from_native(err))
        return msg

    def _partition_eof(self) -> Optional[Message]:
        """A ``_PARTITION_EOF`` event for the first assigned partition whose
        position reached the high watermark of its last fetch, once per
        offset it is reached at (librdkafka's rule)."""
        for n in self._c.assignment():
            low, high = self._c.get_watermark_offsets(n, cached=True)
            if high < 0:
                continue
            pos = self._pos.get(n)
            if pos is None:
                try:
                    pos = self._c.position(n, timeout_ms=0)
                except _native_errors.KafkaError:
                    continue
            if pos >= high and self._eof_at.get(n) != pos:
                self._eof_at[n] = pos
                return Message(n.topic, n.partition, pos,
                               error=KafkaError(KafkaError._PARTITION_EOF))  # type: ignore[attr-defined]
        return None

    def _slice(self, deadline: Optional[float]) -> int:
        cap = _EOF_SLICE if self._eof else _FOREVER_SLICE
        if deadline is None:
            return int(cap * 1000)
        return int(max(0.0, min(cap if self._eof else float("inf"), deadline - time.monotonic())) * 1000)

    def poll(self, timeout: Optional[float] = -1) -> Optional[Message]:
        """One message or event, waiting up to ``timeout`` seconds (-1:
        forever); None when nothing came in time."""
        self._check_open()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + float(timeout)
        while True:
            if self._eof:
                with translated():
                    ev = self._partition_eof()
                if ev is not None:
                    return ev
            with translated():
                got = self._c.poll(self._slice(deadline), max_records=1)
            self._maybe_autocommit()
            if got:
                return self._deliver(got[0])
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def consume(self, num_messages: int = 1, timeout: Optional[float] = -1) -> List[Message]:
        """Up to ``num_messages`` messages/events, waiting up to ``timeout``
        seconds (-1: forever) for all of them."""
        self._check_open()
        if not isinstance(num_messages, int) or not 0 <= num_messages <= 1_000_000:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + float(timeout)
        out: List[Message] = []
        while len(out) < num_messages:
            if self._eof:
                with translated():
                    ev = self._partition_eof()
                if ev is not None:
                    out.append(ev)
                    continue
            with translated():
                got = self._c.poll(self._slice(deadline), max_records=num_messages - len(out))
            self._maybe_autocommit()
            out.extend(self._deliver(m) for m in got)
            if deadline is not None and time.monotonic() >= deadline:
                break
        return out

    # -- offsets --------------------------------------------------------------------------

    def _offsets_arg(self, message: Any, offsets: Any) -> Optional[Dict[Any, Tuple[int, Optional[str]]]]:
        if message is not None and offsets is not None:
            raise ValueError("commit()/store_offsets() take message or offsets, not both")
        if message is not None:
            if message.error() is not None:
                raise KafkaException(KafkaError(KafkaError._INVALID_ARG,  # type: ignore[attr-defined]
                                                "cannot commit or store the offset of an error event"))
            return {_NTP(message.topic(), message.partition()): (message.offset() + 1, None)}
        if offsets is not None:
            return {_ntp(tp): (tp.offset, tp.metadata) for tp in _parts(offsets, "offsets")}
        return None

    def commit(self, message: Any = None, offsets: Any = None,
               asynchronous: bool = True) -> Optional[List[TopicPartition]]:
        """Commit ``message``'s offset + 1, the ``offsets`` given, or the
        stored offsets. Synchronous: the committed partitions; asynchronous:
        None (``on_commit`` tells the outcome from a later poll)."""
        self._check_open()
        want = self._offsets_arg(message, offsets)
        if want is None:
            want = dict(self._stored) if (self._py_autocommit or not self._auto_store) else \
                {n: (p, None) for n, p in self._pos.items()}
            if not want:
                raise KafkaException(KafkaError(KafkaError._NO_OFFSET))  # type: ignore[attr-defined]
        return self._commit(want, bool(asynchronous))

    def _commit(self, want: Dict[Any, Tuple[int, Optional[str]]], asynchronous: bool) -> Optional[List[TopicPartition]]:
        result = [TopicPartition(n.topic, n.partition, off, meta) for n, (off, meta) in want.items()]
        native = {n: OffsetAndMetadata(off, meta) for n, (off, meta) in want.items()}
        if asynchronous:
            with translated():
                self._c.commit(native, asynchronous=True,
                               callback=lambda exc: self._committed(exc, result))
            return None
        try:
            with translated():
                self._c.commit(native, asynchronous=False)
        except KafkaException as e:
            self._committed(e, result)
            raise
        self._committed(None, result)
        return result

    def _committed(self, exc: Optional[BaseException], parts: List[TopicPartition]) -> None:
        if self._on_commit is not None:
            self._on_commit(None if exc is None else from_native(exc), parts)

    def _commit_stored(self, only: Optional[List[Any]] = None, quiet: bool = False) -> None:
        want = {n: v for n, v in self._stored.items() if only is None or n in only}
        if not want:
            return
        try:
            self._commit(want, asynchronous=False)
        except KafkaException as e:
            if not quiet:
                raise
            _log.warning("auto-commit of %s failed: %s", sorted(want), e)
        for n, v in want.items():
            if self._stored.get(n) == v:
                del self._stored[n]

    def _maybe_autocommit(self) -> None:
        # Runs after every native poll: error_cb's exceptions, statistics, auto-commit.
        raise_pending(self._error_cb)
        self._stats.maybe_emit()
        if self._py_autocommit and time.monotonic() >= self._next_autocommit:
            self._next_autocommit = time.monotonic() + self._autocommit_ms / 1000
            self._commit_stored(quiet=True)

    def store_offsets(self, message: Any = None, offsets: Any = None) -> None:
        """Store ``message``'s offset + 1 (or ``offsets``) for the next
        commit; needs ``enable.auto.offset.store=false``."""
        self._check_open()
        if self._auto_store:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG,  # type: ignore[attr-defined]
                                            "store_offsets() needs enable.auto.offset.store=false"))
        want = self._offsets_arg(message, offsets)
        if want is None:
            raise ValueError("store_offsets() takes message or offsets")
        self._stored.update(want)

    def committed(self, partitions: List[Any], timeout: Optional[float] = -1) -> List[TopicPartition]:
        self._check_open()
        parts = _parts(partitions, "committed")
        with translated():
            got = self._c.committed([_ntp(p) for p in parts], timeout_ms(timeout, self._c._timeout_ms))
        out = []
        for p in parts:
            o = got.get(_ntp(p))
            out.append(TopicPartition(p.topic, p.partition, OFFSET_INVALID if o is None else o.offset,
                                      None if o is None else o.metadata))
        return out

    def position(self, partitions: List[Any]) -> List[TopicPartition]:
        """The offset of the next message per partition (OFFSET_INVALID while unknown)."""
        self._check_open()
        out = []
        for p in _parts(partitions, "position"):
            n = _ntp(p)
            try:
                off = self._c.position(n, timeout_ms=0)
            except _native_errors.KafkaError:
                off = self._pos.get(n, OFFSET_INVALID)
            out.append(TopicPartition(n.topic, n.partition, off))
        return out

    def seek(self, partition: TopicPartition) -> None:
        self._check_open()
        with translated():
            self._apply_offsets([partition])

    def pause(self, partitions: List[Any]) -> None:
        self._check_open()
        with translated():
            self._c.pause([_ntp(p) for p in _parts(partitions, "pause")])

    def resume(self, partitions: List[Any]) -> None:
        self._check_open()
        with translated():
            self._c.resume([_ntp(p) for p in _parts(partitions, "resume")])

    def get_watermark_offsets(self, partition: TopicPartition, timeout: Optional[float] = None,
                              cached: bool = False) -> Tuple[int, int]:
        """(low, high) offsets; ``cached`` reads what the last fetch reported."""
        self._check_open()
        with translated():
            low, high = self._c.get_watermark_offsets(_ntp(partition), timeout_ms(timeout, self._c._timeout_ms),
                                                      cached=bool(cached))
        if cached and high < 0:
            return (OFFSET_INVALID, OFFSET_INVALID)
        return (low, high)

    def offsets_for_times(self, partitions: List[Any], timeout: Optional[float] = -1) -> List[TopicPartition]:
        """Per partition, the first offset with a timestamp >= ``.offset``
        (a timestamp in ms); OFFSET_END when there is none."""
        self._check_open()
        parts = _parts(partitions, "offsets_for_times")
        with translated():
            got = self._c.offsets_for_times({_ntp(p): p.offset for p in parts},
                                            timeout_ms(timeout, self._c._timeout_ms))
        out = []
        for p in parts:
            o = got.get(_ntp(p))
            out.append(TopicPartition(p.topic, p.partition, OFFSET_END if o is None else o[0]))
        return out

    # -- metadata and group ------------------------------------------------------------------

    def list_topics(self, topic: Optional[str] = None, timeout: Optional[float] = -1) -> Any:
        if getattr(self, "_c", None) is None or self._closed:
            raise RuntimeError("Handle has been closed")  # confluent-kafka's text for this one
        return list_topics(self._c._core, topic, timeout_ms(timeout, self._c._timeout_ms))

    def cluster_id(self, timeout: Optional[float] = -1) -> Optional[str]:
        self._check_open()
        return self.list_topics(None, timeout).cluster_id

    def memberid(self) -> Optional[str]:
        self._check_open()
        member = self._c.coordinator.member_id()
        return member or None

    def consumer_group_metadata(self) -> Any:
        self._check_open()
        return self._c.group_metadata()

    def set_sasl_credentials(self, username: str, password: str) -> None:
        raise NotImplementedError("Consumer.set_sasl_credentials(): credentials are fixed when the "
                                  "client is made; make a new Consumer")

    # -- lifetime ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        # A subclass that skipped __init__, or a closed consumer.
        if getattr(self, "_c", None) is None or self._closed:
            raise RuntimeError("Consumer closed")

    def close(self) -> None:
        """Commit (with auto-commit), leave the group, stop."""
        if getattr(self, "_c", None) is None or self._closed:
            return
        try:
            if self._py_autocommit:
                self._commit_stored(quiet=True)
        finally:
            self._closed = True
            with translated():
                self._c.close()
            if self._logger is not None:
                self._logger.close()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
