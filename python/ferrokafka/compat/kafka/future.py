"""kafka-python's futures: ``kafka.future.Future`` and the producer's
``FutureRecordMetadata`` / ``RecordMetadata``.

``FutureRecordMetadata`` is a view of the native ``DeliveryFuture``: its
state is read from the native future when asked (``is_done``, ``value``,
``exception``, ``get()``), and it settles once, running kafka-python's
callbacks / errbacks in whichever thread sees the completion first: the
producer's callback thread (started by the first ``add_callback``), a
``flush()``, or the thread calling ``get()``.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import namedtuple
from typing import Any, Callable, List, Optional

from .errors import KafkaTimeoutError, RetriableError, translate
from .structs import TopicPartition

__all__ = ["Future", "FutureRecordMetadata", "RecordMetadata"]

log = logging.getLogger("ferrokafka.compat.kafka")

RecordMetadata = namedtuple("RecordMetadata", [
    "topic", "partition", "topic_partition", "offset", "timestamp", "checksum",
    "serialized_key_size", "serialized_value_size", "serialized_header_size"])


class Future:
    """A result that arrives later, with callbacks (``kafka.future.Future``).

    ``success(value)`` / ``failure(exc)`` settle it once; callbacks added
    before run then, callbacks added after run at once. A callback's
    exception is logged, not raised (unless ``error_on_callbacks``)."""

    error_on_callbacks = False

    def __init__(self) -> None:
        self._done = False
        self._value: Any = None
        self._exception: Optional[BaseException] = None
        self._callbacks: List[Callable] = []
        self._errbacks: List[Callable] = []
        self._lock = threading.Lock()

    # State is exposed as attributes, as in kafka-python; properties so a
    # subclass can settle lazily on first look.
    @property
    def is_done(self) -> bool:
        return self._done

    @property
    def value(self) -> Any:
        return self._value

    @property
    def exception(self) -> Optional[BaseException]:
        return self._exception

    def succeeded(self) -> bool:
        return self.is_done and self._exception is None

    def failed(self) -> bool:
        return self.is_done and self._exception is not None

    def retriable(self) -> bool:
        return self.is_done and isinstance(self._exception, RetriableError)

    def success(self, value: Any) -> "Future":
        with self._lock:
            if self._done:
                raise RuntimeError("future already completed")
            self._value, self._done = value, True
            todo, self._callbacks, self._errbacks = self._callbacks, [], []
        self._run(todo, value, "callback")
        return self

    def failure(self, e: Any) -> "Future":
        exc = e() if isinstance(e, type) else e
        if not isinstance(exc, BaseException):
            raise TypeError("future failed without an exception")
        with self._lock:
            if self._done:
                raise RuntimeError("future already completed")
            self._exception, self._done = exc, True
            todo, self._callbacks, self._errbacks = self._errbacks, [], []
        self._run(todo, exc, "errback")
        return self

    def _run(self, fns: List[Callable], arg: Any, what: str) -> None:
        for fn in fns:
            try:
                fn(arg)
            except Exception:
                log.exception("Error processing %s", what)
                if self.error_on_callbacks:
                    raise

    def _add(self, fn: Callable, args: tuple, kwargs: dict, on_success: bool) -> "Future":
        if args or kwargs:
            fn = functools.partial(fn, *args, **kwargs)
        self._will_wait()
        if not self.is_done:  # (looking may settle a lazy future)
            with self._lock:
                if not self._done:
                    (self._callbacks if on_success else self._errbacks).append(fn)
                    return self
        if on_success and self._exception is None:
            self._run([fn], self._value, "callback")
        elif not on_success and self._exception is not None:
            self._run([fn], self._exception, "errback")
        return self

    def _will_wait(self) -> None:
        """Hook: a callback is about to be registered."""

    def add_callback(self, f: Callable, *args: Any, **kwargs: Any) -> "Future":
        return self._add(f, args, kwargs, True)

    def add_errback(self, f: Callable, *args: Any, **kwargs: Any) -> "Future":
        return self._add(f, args, kwargs, False)

    def add_both(self, f: Callable, *args: Any, **kwargs: Any) -> "Future":
        self.add_callback(f, *args, **kwargs)
        return self.add_errback(f, *args, **kwargs)

    def chain(self, future: "Future") -> "Future":
        self.add_callback(future.success)
        return self.add_errback(future.failure)

    def __await__(self):
        if not self.is_done:
            yield self
        if self._exception is not None:
            raise self._exception
        return self._value


class FutureRecordMetadata(Future):
    """The future of one ``KafkaProducer.send``: resolves to RecordMetadata."""

    # One lock for every record future: its critical sections are a few
    # assignments, and a lock per record costs more than sharing one.
    _shared_lock = threading.Lock()

    def __init__(self, native: Any, producer: Any, key_size: int, value_size: int,
                 header_size: int, timestamp_ms: Optional[int]) -> None:
        self._done = False
        self._value = None
        self._exception = None
        self._callbacks = []
        self._errbacks = []
        self._lock = self._shared_lock
        self._native = native
        self._producer = producer
        self._sizes = (key_size, value_size, header_size)
        self._timestamp_ms = timestamp_ms
        self._hooked = False

    def _settle(self) -> None:
        """Take the native outcome once it is there (idempotent)."""
        if self._done or not self._native.done():
            return
        exc = self._native.exception(0)
        with self._lock:
            if self._done:
                return
        if exc is not None:
            try:
                self.failure(translate(exc))
            except RuntimeError:  # another thread settled it first
                pass
            return
        md = self._native.result(0)
        ts = md.timestamp_ms
        if ts is None or ts < 0:
            # CreateTime: the broker echoes -1; kafka-python reports the
            # record's own timestamp.
            ts = self._timestamp_ms if self._timestamp_ms is not None else ts
        k, v, h = self._sizes
        try:
            self.success(RecordMetadata(md.topic, md.partition, TopicPartition(md.topic, md.partition),
                                        md.offset, ts, None, k, v, h))
        except RuntimeError:
            pass

    @property
    def is_done(self) -> bool:
        self._settle()
        return self._done

    @property
    def value(self) -> Any:
        self._settle()
        return self._value

    @property
    def exception(self) -> Optional[BaseException]:
        self._settle()
        return self._exception

    def succeeded(self) -> bool:
        return self.is_done and self._exception is None

    def failed(self) -> bool:
        return self.is_done and self._exception is not None

    def _will_wait(self) -> None:
        # Callbacks must run without the application calling get(): the
        # native future's completion callback settles this one, and the
        # producer's callback thread runs native completion callbacks.
        if not self._hooked:
            self._hooked = True
            self._native.add_done_callback(lambda _f: self._settle())
            self._producer._ensure_callback_thread()

    def get(self, timeout: Optional[float] = None) -> Any:
        """Wait up to ``timeout`` seconds; the RecordMetadata, or raise the
        record's error (KafkaTimeoutError if it is not done in time)."""
        if not self.is_done:
            try:
                self._native.exception(timeout)
            except Exception as e:
                if not self._native.done():
                    raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.") from e
        self._settle()
        if not self._done:
            raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.")
        if self._exception is not None:
            raise self._exception
        return self._value

    def __await__(self):
        if not self.is_done:
            try:
                yield from self._native.__await__()
            except Exception:
                pass
        self._settle()
        if self._exception is not None:
            raise self._exception
        return self._value
