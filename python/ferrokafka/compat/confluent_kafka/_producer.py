"""confluent-kafka's ``Producer`` over ferrokafka's native Producer.

``produce`` never blocks (librdkafka's model): the record is appended with
``send(block=False)``; a full local queue raises ``BufferError``. Delivery
reports are collected when the native futures complete and served, one
``(err, msg)`` callback at a time, by ``poll()`` / ``flush()`` in the calling
thread. An exception raised by a callback propagates out of that call; the
reports after it stay queued for the next one.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Deque, List, Optional

from ... import errors as _native_errors
from ...consumer import OffsetAndMetadata
from ...producer import Producer as _NativeProducer
from ._callbacks import native_client, raise_pending
from ._config import translate
from ._error import KafkaError, KafkaException, from_native, translated
from ._metadata import MetadataSource
from ._stats import Stats
from ._types import (
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    Message,
    TopicPartition,
    as_bytes,
    headers_list,
)

_Report = tuple  # (future, callback, topic, partition, key, value, headers)


def _deadline(timeout: Optional[float]) -> Optional[float]:
    """confluent-kafka's timeouts are seconds; -1 (or None) waits forever."""
    if timeout is None or timeout < 0:
        return None
    return time.monotonic() + float(timeout)


def _remaining(deadline: Optional[float], cap: float) -> float:
    if deadline is None:
        return cap
    return max(0.0, min(cap, deadline - time.monotonic()))


class Producer:
    """``Producer(conf)`` with librdkafka property names (docs/compat-confluent.md)."""

    def __init__(self, conf: Optional[dict] = None, **kwargs: Any) -> None:
        if conf is None and not kwargs:
            raise TypeError("expected configuration dict")
        conf = dict(conf or {})
        conf.update(kwargs)  # confluent-kafka takes e.g. logger= as a keyword
        native, facade = translate(conf, "Producer")
        self._default_cb: Optional[Callable] = (facade.get("on_delivery") or facade.get("dr_cb")
                                                 or facade.get("dr_msg_cb"))
        self._only_errors = bool(facade["delivery.report.only.error"])
        self._max_messages = int(facade["queue.buffering.max.messages"])
        self._p, self._error_cb, self._logger = native_client(_NativeProducer, native, facade)
        self._reports: Deque[_Report] = collections.deque()
        self._lock = threading.Lock()
        self._outstanding = 0  # produced, report not yet served (librdkafka's len())
        self._meta = MetadataSource(native)
        self._stats = Stats(facade, "producer", self._p.config["client_id"], self._p.metrics, self.__len__)
        self._closed = False

    def _check(self) -> None:
        # A subclass that skipped __init__, or a closed producer.
        if getattr(self, "_p", None) is None or self._closed:
            raise RuntimeError("Producer has been closed")

    # -- producing -------------------------------------------------------------------------

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                on_delivery: Optional[Callable] = None, callback: Optional[Callable] = None,
                timestamp: int = 0, headers: Any = None) -> None:
        """Queue one message; its delivery report is served by poll()/flush()."""
        self._check()
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        cb = on_delivery or callback or self._default_cb
        if cb is not None and not callable(cb):
            raise TypeError("on_delivery must be callable")
        # The hot path: bytes and None go through untouched.
        v = value if value is None or type(value) is bytes else as_bytes(value, "value")
        k = key if key is None or type(key) is bytes else as_bytes(key, "key")
        hdrs = None if headers is None else headers_list(headers)
        part = None if partition is None or partition < 0 else int(partition)
        ts = None if not timestamp else int(timestamp)
        with self._lock:
            if self._outstanding >= self._max_messages:
                raise BufferError(KafkaError(KafkaError._QUEUE_FULL).str())  # type: ignore[attr-defined]
            self._outstanding += 1
        try:
            fut = self._p.send(topic, v, k, part, ts, hdrs, False)
        except _native_errors.KafkaError as e:
            self._forget()
            raise KafkaException(from_native(e)) from e
        except BaseException:
            self._forget()
            raise
        if fut.done():
            exc = fut.exception()
            if isinstance(exc, _native_errors.KafkaTimeoutError):
                # send(block=False) fails at once only when the byte buffer
                # (queue.buffering.max.kbytes) and its overflow are full.
                self._forget()
                raise BufferError(KafkaError(KafkaError._QUEUE_FULL).str())  # type: ignore[attr-defined]
        report = (fut, cb, topic, part, k, v, hdrs)
        # Runs in the thread of the native poll/flush (or here, when already
        # done): the report only queues; the user callback runs in _serve.
        fut.add_done_callback(lambda _f: self._reports.append(report))

    def produce_batch(self, topic: str, messages: List[dict], partition: int = -1,
                      on_delivery: Optional[Callable] = None, callback: Optional[Callable] = None) -> int:
        """Queue each message dict (``value``, ``key``, ``partition``,
        ``timestamp``, ``headers``, ``callback``); the number queued. A
        message that could not be queued gets an ``_error`` (KafkaError) key."""
        self._check()
        if not isinstance(messages, list):
            raise TypeError("messages must be a list of dicts")
        for i, m in enumerate(messages):
            # Checked before anything is queued, so a bad list queues nothing.
            if not isinstance(m, dict):
                raise TypeError(f"Message at index {i} must be a dict")
            for field in ("value", "key"):
                if m.get(field) is not None and not isinstance(m[field], (bytes, str)):
                    raise TypeError(f"Message {field} at index {i} must be bytes or str")
            if "partition" in m and not isinstance(m["partition"], int):
                raise TypeError(f"Message partition at index {i} must be int")
        default_cb = on_delivery or callback
        queued = 0
        for m in messages:
            try:
                self.produce(topic, m.get("value"), m.get("key"), m.get("partition", partition),
                             on_delivery=m.get("callback") or m.get("on_delivery") or default_cb,
                             timestamp=m.get("timestamp", 0) or 0, headers=m.get("headers"))
                queued += 1
            except BufferError as e:
                m["_error"] = KafkaError(KafkaError._QUEUE_FULL, str(e))  # type: ignore[attr-defined]
            except KafkaException as e:
                m["_error"] = e.args[0]
        return queued

    def _forget(self) -> None:
        with self._lock:
            self._outstanding -= 1

    def _serve(self) -> int:
        raise_pending(self._error_cb)  # runs after every native poll/flush
        n = 0
        while True:
            try:  # several threads may poll at once: pop, do not test then pop
                fut, cb, topic, part, key, value, hdrs = self._reports.popleft()
            except IndexError:
                break
            self._forget()
            n += 1
            exc = fut.exception()
            if cb is None or (exc is None and self._only_errors):
                continue
            if exc is None:
                rm = fut.result()
                msg = Message(rm.topic, rm.partition, rm.offset, key, value, hdrs, None,
                              (TIMESTAMP_CREATE_TIME, rm.timestamp_ms))
                cb(None, msg)
            else:
                err = from_native(exc)
                if err.code() == KafkaError._TIMED_OUT:  # type: ignore[attr-defined]
                    # Not appended within max_block_ms (= the message timeout,
                    # _config.translate): librdkafka calls that a timed-out message.
                    err = KafkaError(KafkaError._MSG_TIMED_OUT, err.str())  # type: ignore[attr-defined]
                msg = Message(topic, -1 if part is None else part, OFFSET_INVALID, key, value, hdrs, err)
                cb(err, msg)  # an exception here leaves the remaining reports queued
        return n

    def poll(self, timeout: Optional[float] = -1) -> int:
        """Serve delivery reports (and error_cb), waiting up to ``timeout``
        seconds (-1: forever) for one; the number of reports served."""
        self._check()
        deadline = _deadline(timeout)
        while True:
            wait = 0.0 if self._reports else _remaining(deadline, 1.0)
            with translated():
                self._p.poll(wait)
            n = self._serve()
            self._stats.maybe_emit()
            if n or (deadline is not None and time.monotonic() >= deadline):
                return n

    def flush(self, timeout: Optional[float] = -1) -> int:
        """Wait until every message is delivered or failed and its report
        served, up to ``timeout`` seconds (-1: forever); the number of
        messages still waiting."""
        self._check()
        deadline = _deadline(timeout)
        while True:
            with translated():
                self._p.flush(None if deadline is None else _remaining(deadline, float("inf")))
            self._serve()
            self._stats.maybe_emit()
            if len(self) == 0 or (deadline is not None and time.monotonic() >= deadline):
                return len(self)
            with translated():
                self._p.poll(_remaining(deadline, 0.1))

    def __len__(self) -> int:
        return getattr(self, "_outstanding", 0)

    def __bool__(self) -> bool:
        return True  # a producer is truthy even when its queue is empty

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """confluent-kafka's purge: records not yet sent (`in_queue`) fail with
        `_PURGE_QUEUE`, records in flight (`in_flight`) with `_PURGE_INFLIGHT`
        (they may or may not be written); their delivery callbacks run at the
        next poll() or flush()."""
        self._check()
        self._p.purge(in_queue, in_flight, blocking)

    # -- metadata ------------------------------------------------------------------------

    def list_topics(self, topic: Optional[str] = None, timeout: Optional[float] = -1) -> Any:
        return self._meta.list_topics(topic, timeout)

    def cluster_id(self, timeout: Optional[float] = -1) -> Optional[str]:
        return self._meta.list_topics(None, timeout).cluster_id

    # -- transactions (the native producer's; docs/semantics.md §7) --------------------------

    def _native(self, name: str) -> Callable:
        self._check()
        return getattr(self._p, name)

    @staticmethod
    def _secs(timeout: Optional[float]) -> Optional[float]:
        return None if timeout is None or timeout < 0 else float(timeout)

    def init_transactions(self, timeout: Optional[float] = -1) -> None:
        with translated():
            self._native("init_transactions")(self._secs(timeout))

    def begin_transaction(self) -> None:
        with translated():
            self._native("begin_transaction")()

    def send_offsets_to_transaction(self, positions: Any, group_metadata: Any,
                                    timeout: Optional[float] = -1) -> None:
        offsets = {tp.native(): OffsetAndMetadata(tp.offset, tp.metadata) for tp in positions
                   if isinstance(tp, TopicPartition)}
        with translated():
            self._native("send_offsets_to_transaction")(offsets, group_metadata, self._secs(timeout))

    def commit_transaction(self, timeout: Optional[float] = -1) -> None:
        self.flush(timeout)
        with translated():
            self._native("commit_transaction")(self._secs(timeout))

    def abort_transaction(self, timeout: Optional[float] = -1) -> None:
        with translated():
            self._native("abort_transaction")(self._secs(timeout))

    def set_sasl_credentials(self, username: str, password: str) -> None:
        raise NotImplementedError("Producer.set_sasl_credentials(): credentials are fixed when the "
                                  "client is made; make a new Producer")

    # -- lifetime --------------------------------------------------------------------------

    def close(self, timeout: Optional[float] = -1) -> bool:
        """Flush up to ``timeout`` seconds and release the client; True
        (confluent-kafka 2.x returns whether it closed)."""
        if getattr(self, "_p", None) is None or self._closed:
            return True
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            self._p.close(0)
            self._meta.close()
            if self._logger is not None:
                self._logger.close()
        return True

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
