"""``KafkaProducer`` with kafka-python's signature over ``ferrokafka.Producer``.

What the facade adds to the native producer: kafka-python's options and
units (one table, ``_config.py``), serializers, its argument checks
(``send`` refuses a record without key and value, headers that are not a
list of ``(str, bytes)``), ``FutureRecordMetadata`` with callbacks that run
without the application polling, eager bootstrap (the constructor fails with
``NoBrokersAvailable`` when no broker answers), and kafka-python's error
classes.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Dict, List, Optional, Tuple

from ... import errors as _native_errors
from ...producer import Producer as _NativeProducer
from . import _config
from ._native import bootstrapped
from .errors import (
    IllegalStateError,
    KafkaConfigurationError,
    KafkaTimeoutError,
    translated,
)
from .future import FutureRecordMetadata
from .structs import to_native

__all__ = ["KafkaProducer"]

log = logging.getLogger("ferrokafka.compat.kafka")


def serializer_fn(obj: Any):
    """kafka-python takes a ``Serializer`` (``serialize(topic, headers, data)``)
    or a plain callable ``f(data)``; None passes bytes through."""
    if obj is None:
        return None
    if callable(getattr(obj, "serialize", None)):
        return obj.serialize
    if callable(obj):
        return lambda _topic, _headers, data: obj(data)
    raise KafkaConfigurationError(f"invalid serializer {obj!r}: expected a callable or a Serializer")


def _as_bytes(v: Any, what: str) -> Optional[bytes]:
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"Unsupported type for serialized {what}: {type(v)}")


_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def check_topic(topic: Any) -> None:
    """kafka-python refuses an illegal topic name in send() (ValueError)."""
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, not {type(topic).__name__}")
    if not topic:
        raise ValueError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise ValueError('Topic name cannot be "." or ".."')
    if len(topic) > 249:
        raise ValueError(f'Topic name is illegal, it can\'t be longer than 249 characters, topic: "{topic}"')
    if not set(topic) <= _LEGAL_TOPIC_CHARS:
        raise ValueError(f'Topic name "{topic}" is illegal, it contains a character other than '
                         'ASCII alphanumerics, ".", "_" and "-"')


class KafkaProducer:
    """``KafkaProducer(**configs)``, kafka-python's producer."""

    DEFAULT_CONFIG: Dict[str, Any] = {e.name: e.default for (n, c), e in _config.TABLE.items() if c == "P"}

    def __init__(self, **configs: Any) -> None:
        native_cfg, facade = _config.split_config("P", configs)
        self.config = {**self.DEFAULT_CONFIG, **configs, "client_id": facade["client_id"]}
        self._key_ser = serializer_fn(facade["key_serializer"])
        self._value_ser = serializer_fn(facade["value_serializer"])
        self._metrics_enabled = bool(facade["metrics_enabled"])
        self._closed = False
        self._valid_topics: set = set()
        self._cb_lock = threading.Lock()
        self._cb_thread: Optional[threading.Thread] = None
        self._cb_stop = threading.Event()
        self._p = bootstrapped(_NativeProducer, native_cfg, facade["bootstrap_timeout_ms"])

    @classmethod
    def max_usable_produce_magic(cls, api_version: Any = None) -> int:
        """The record format version sent: always 2 (record batches, Kafka
        0.11+); ferrokafka writes no older format."""
        return 2

    def bootstrap_connected(self) -> bool:
        return any(n.id >= 0 for n in self._p.metadata.fetch().nodes)

    # -- sending ---------------------------------------------------------------
    def send(self, topic: str, value: Any = None, key: Any = None, headers: Optional[List[Tuple[str, bytes]]] = None,
             partition: Optional[int] = None, timestamp_ms: Optional[int] = None) -> FutureRecordMetadata:
        """Append a record; a FutureRecordMetadata of its RecordMetadata.
        Raises KafkaTimeoutError when the topic's metadata or buffer space
        does not come within max_block_ms."""
        if self._closed:
            raise IllegalStateError("KafkaProducer already closed!")
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        if topic not in self._valid_topics:
            check_topic(topic)
            if len(self._valid_topics) < 10_000:  # bounded: names seen before skip the check
                self._valid_topics.add(topic)
        if headers is None:
            headers = []
        if not isinstance(headers, list):
            raise TypeError("headers must be list-type")
        if not all(isinstance(h, tuple) and len(h) == 2 and isinstance(h[0], str) and isinstance(h[1], bytes)
                   for h in headers):
            raise TypeError("All headers items must be (str, bytes) tuples")
        key_bytes = _as_bytes(self._key_ser(topic, headers, key) if self._key_ser else key, "key")
        value_bytes = _as_bytes(self._value_ser(topic, headers, value) if self._value_ser else value, "value")
        with translated():
            if partition is not None:
                # kafka-python checks an explicit partition before appending.
                if partition < 0:
                    raise ValueError("partition must be >= 0")
                if partition not in self._p.partitions_for(topic):
                    raise ValueError(f"Unrecognized partition {partition} for topic {topic}")
            fut = self._p.send(topic, value_bytes, key_bytes, partition, timestamp_ms, headers or None)
            # kafka-python raises from send() when the metadata or the buffer
            # space did not come within max_block_ms; the native send hands
            # back a future that failed while it waited.
            if fut.done():
                exc = fut.exception(0)
                if isinstance(exc, _native_errors.KafkaTimeoutError):
                    raise exc
        header_size = sum(len(k.encode("utf-8")) + len(v) for k, v in headers) if headers else -1
        return FutureRecordMetadata(fut, self,
                                    -1 if key_bytes is None else len(key_bytes),
                                    -1 if value_bytes is None else len(value_bytes),
                                    header_size, timestamp_ms)

    def _ensure_callback_thread(self) -> None:
        # kafka-python runs callbacks in its sender thread, with no call from
        # the application; the native producer runs them in poll()/flush(),
        # so a helper thread polls once a callback is registered.
        with self._cb_lock:
            if self._cb_thread is not None or self._closed:
                return
            self._cb_thread = threading.Thread(target=self._run_callbacks, daemon=True,
                                               name=f"kafka-python-callbacks-{self.config['client_id']}")
            self._cb_thread.start()

    def _run_callbacks(self) -> None:
        while not self._cb_stop.is_set():
            try:
                self._p.poll(0.1)
            except Exception:  # a callback's error is the callback's; keep serving the others
                log.exception("Error running producer callbacks")

    def flush(self, timeout: Optional[float] = None) -> None:
        """Send everything buffered and wait (``timeout`` seconds);
        KafkaTimeoutError when records are left undelivered."""
        with translated():
            left = self._p.flush(timeout)
        if left:
            raise KafkaTimeoutError(f"Timeout after {timeout} secs: {left} records not delivered")

    def close(self, timeout: Optional[float] = None, null_logger: bool = False) -> None:
        """Flush up to ``timeout`` seconds (None: until done), then stop."""
        if timeout is not None and timeout < 0:
            raise ValueError(f"Invalid timeout: {timeout}")
        if self._closed:
            return
        self._closed = True
        with translated():
            self._p.close(timeout)
        self._cb_stop.set()
        t = self._cb_thread
        if t is not None and t is not threading.current_thread():
            t.join()
        # Callbacks of records failed by close run now, in this thread.
        try:
            self._p.poll(0)
        except Exception:
            log.exception("Error running producer callbacks")
        for ser in (self.config.get("key_serializer"), self.config.get("value_serializer")):
            close = getattr(ser, "close", None)
            if callable(close):
                close()

    def __enter__(self) -> "KafkaProducer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def partitions_for(self, topic: str) -> set:
        """The partition ids of ``topic`` (waits up to max_block_ms for its metadata)."""
        with translated():
            return set(self._p.partitions_for(topic))

    def metrics(self, raw: bool = False) -> Optional[Dict[str, Dict[str, float]]]:
        """``{"producer-metrics": {name: value}}`` with ferrokafka's metric
        names; None with ``metrics_enabled=False``."""
        if raw:
            raise NotImplementedError("metrics(raw=True): ferrokafka keeps no KafkaMetric objects")
        if not self._metrics_enabled:
            return None
        return {"producer-metrics": self._p.metrics()}

    # -- transactions (the native producer's; docs/semantics.md §7) ---------------
    def _txn(self, name: str, *args: Any) -> Any:
        if self.config.get("transactional_id") is None:
            raise IllegalStateError(f"Cannot call {name} without setting a transactional_id.")
        with translated():
            return getattr(self._p, name)(*args)

    def init_transactions(self) -> None:
        self._txn("init_transactions")

    def begin_transaction(self) -> None:
        self._txn("begin_transaction")

    def send_offsets_to_transaction(self, offsets: Dict[Any, Any], consumer_group_id: Any) -> None:
        # (offset, metadata, leader epoch) tuples: the native call takes them as is.
        native = {to_native(tp): tuple(o) if isinstance(o, tuple) else int(o)
                  for tp, o in offsets.items()}
        group = getattr(consumer_group_id, "_native", None) or consumer_group_id
        self._txn("send_offsets_to_transaction", native, group)

    def commit_transaction(self) -> None:
        self._txn("commit_transaction")

    def abort_transaction(self) -> None:
        self._txn("abort_transaction")

    def __str__(self) -> str:
        return f"<KafkaProducer client_id={self.config['client_id']}>"
