"""The Kafka producer (Java ``KafkaProducer`` semantics, Rust record path).

``send`` appends to a per-partition batch in the Rust accumulator and returns
a :class:`~ferrokafka.DeliveryFuture`; a sender thread drains batches into
Produce requests. Delivery callbacks (``fut.add_done_callback``) run in the
thread that calls :meth:`Producer.poll` or :meth:`Producer.flush`.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core, _events, _stats
from ._config import PRODUCER
from ._core import DeliveryFuture, RecordMetadata

__all__ = ["Producer", "DeliveryFuture", "RecordMetadata"]


class _CallablePartitioner:
    """A user's ``fn(key, all_partitions, available_partitions) -> int``.

    The named partitioners (``murmur2_random``, ``consistent``, ...) run in
    Rust where the record is appended; only a Python callable is called here,
    with the topic's partitions as the producer's metadata has them now (a
    partition added to the topic shows up once the metadata is refreshed).
    ``available_partitions`` is the same list: the leaders are the sender's
    business, and a record queued for a partition without one waits for it.
    """

    def __init__(self, fn: Callable[[Optional[bytes], List[int], List[int]], int],
                 producer: "Producer") -> None:
        self._fn = fn
        self._producer = producer

    def __call__(self, topic: str, key: Optional[bytes]) -> int:
        parts = self._producer.partitions_for(topic)
        return int(self._fn(key, parts, list(parts)))


HeaderList = Sequence[Tuple[str, Optional[bytes]]]


class Producer:
    """Produce records to Kafka.

    ``Producer("host:9092", linger_ms=10)`` or, confluent-kafka style,
    ``Producer({"bootstrap.servers": "host:9092", "linger.ms": 10})``.
    Invalid or unknown options raise ``ValueError`` naming the option.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[str], Mapping[str, Any], None] = None,
                 **config: Any) -> None:
        partitioner = config.pop("partitioner", None)
        if isinstance(bootstrap_servers, Mapping):
            cfg = dict(bootstrap_servers)
            if callable(cfg.get("partitioner")):
                partitioner = cfg.pop("partitioner")
        else:
            cfg = {} if bootstrap_servers is None else {"bootstrap_servers": bootstrap_servers}
        if partitioner is not None and not callable(partitioner):
            config["partitioner"] = partitioner
        self.config = PRODUCER.resolve(cfg, **config)
        core_cfg = dict(self.config)
        self._error_cb = core_cfg.pop("error_cb", None)
        stats_cb = core_cfg.pop("stats_cb", None)
        self._p = _core._Producer(core_cfg)
        self._stats = _stats.StatsEmitter(int(self.config["statistics_interval_ms"]), stats_cb,
                                          self.metrics, "producer", str(self.config["client_id"]))
        self._partitioner = _CallablePartitioner(partitioner, self) if callable(partitioner) else None
        if self._partitioner is None and type(self).send is Producer.send:
            # The hot path: with no Python partitioner to call, ``send`` has
            # nothing to do in Python (the core makes the same argument
            # checks and takes the same arguments), so the core's method is
            # bound in its place and a record costs no Python frame.
            # A subclass that overrides ``send`` keeps its override.
            self.send = self._p.send  # type: ignore[method-assign]

    # -- sending -------------------------------------------------------------
    def send(self, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None,
             partition: Optional[int] = None, timestamp_ms: Optional[int] = None,
             headers: Optional[Union[HeaderList, Mapping[str, Optional[bytes]]]] = None,
             block: bool = True) -> DeliveryFuture:
        """Append one record; returns a future of its :class:`RecordMetadata`.

        Blocks up to ``max_block_ms`` when the topic's metadata is unknown or
        the buffer is full (Ctrl-C interrupts the wait). A record that cannot
        be delivered fails its own future (``fut.result()`` raises the
        ``KafkaError``).

        ``block=False`` never waits, for asyncio code (``await
        p.send(t, v, block=False)``): a record that cannot be appended at
        once (metadata unknown, buffer full) is copied and appended by a
        helper thread as soon as it can be, in the order of the
        ``block=False`` calls; its future fails with ``KafkaTimeoutError``
        when that takes longer than ``max_block_ms``. Records waiting this way
        may hold up to ``buffer_memory`` bytes besides the buffer; past that
        their futures fail at once. With a custom ``partitioner`` the
        partition is still chosen in the caller's thread, which may wait for
        the partition count.

        A pending future keeps its producer alive: ``Producer(bs).send(...)
        .result()`` delivers even with no other reference to the producer.
        """
        # Without a callable partitioner this method is replaced by the
        # core's ``send`` (see ``__init__``); the core checks the arguments
        # (str refused, headers as a mapping or a list of pairs).
        if partition is None and self._partitioner is not None:
            if isinstance(key, str):
                raise TypeError("value and key must be bytes (encode str first), not str")
            partition = self._partitioner(topic, key)
        return self._p.send(topic, value, key, partition, timestamp_ms, headers, block)

    # confluent-kafka spelling
    def produce(self, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None,
                partition: Optional[int] = None, on_delivery=None, timestamp: Optional[int] = None,
                headers=None, callback=None) -> DeliveryFuture:
        fut = self.send(topic, value, key, partition, timestamp, headers)
        cb = on_delivery or callback
        if cb is not None:
            fut.add_done_callback(lambda f: cb(f.exception(), f))
        return fut

    def poll(self, timeout: float = 0.0) -> int:
        """Run due delivery callbacks (waiting up to ``timeout`` s for one)
        and ``error_cb`` for connection errors since the last poll; ``stats_cb``
        when ``statistics_interval_ms`` has passed since its last call."""
        try:
            return self._p.poll(timeout)
        finally:
            _events.dispatch(self._p, self._error_cb)
            self._stats.maybe_emit()

    def flush(self, timeout: Optional[float] = None) -> int:
        """Send everything buffered and wait; returns records not yet
        delivered. Runs delivery callbacks, ``error_cb`` and ``stats_cb`` like ``poll``."""
        try:
            return self._p.flush(timeout)
        finally:
            _events.dispatch(self._p, self._error_cb)
            self._stats.maybe_emit()

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail records without waiting for them, as librdkafka's purge:
        those not yet sent (``in_queue``, including ``block=False`` sends
        still waiting for metadata or memory) with code -152
        (``_PURGE_QUEUE``), those whose request is in flight (``in_flight``)
        with -151 (``_PURGE_INFLIGHT``; they may or may not be written, and
        their answers are ignored). Their futures fail at once; callbacks run
        at the next ``poll``/``flush``. An idempotent producer whose purged
        records had been sent bumps its epoch (docs/semantics.md §5.5); a
        transaction with purged records must be aborted. ``blocking``: wait
        (at most a second) for the ``block=False`` sends to be failed too."""
        self._p.purge(bool(in_queue), bool(in_flight), bool(blocking))

    # -- transactions (docs/semantics.md §7) ----------------------------------
    # Timeouts are seconds; None means max_block_ms, as in Java. A call that
    # times out keeps running: calling the same method again waits for it.
    def init_transactions(self, timeout: Optional[float] = None) -> None:
        """Register ``transactional_id`` with its coordinator: fences older
        producers with the same id and finishes (aborts) their open
        transaction. Once, before the first ``begin_transaction``."""
        self._p.init_transactions(_seconds(timeout))

    def begin_transaction(self) -> None:
        """Start a transaction; ``send``/``send_batch`` are allowed only inside one."""
        self._p.begin_transaction()

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: Any,
                                    timeout: Optional[float] = None) -> None:
        """Commit a consumer group's offsets ({tp: next offset or
        OffsetAndMetadata}) as part of this transaction: they become visible
        exactly when the transaction commits. ``group_metadata`` is
        ``consumer.group_metadata()`` (a group id string alone is accepted,
        without the zombie fencing of KIP-447)."""
        from .consumer import ConsumerGroupMetadata

        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError("group_metadata must be consumer.group_metadata(), "
                            f"not {type(group_metadata).__name__}")
        items = []
        for tp, o in (offsets.items() if isinstance(offsets, Mapping) else
                      ((tp, tp.offset) for tp in offsets)):
            topic, partition = (tp.topic, tp.partition) if hasattr(tp, "topic") else tp
            # An offset, or (offset, metadata[, leader epoch]) as
            # OffsetAndMetadata and kafka-python's 3-field form give it.
            off, meta, epoch = (int(o[0]), o[1] if len(o) > 1 else None,
                                int(o[2]) if len(o) > 2 and o[2] is not None else -1) \
                if isinstance(o, tuple) else (int(o), None, -1)
            if off < 0:
                raise ValueError(f"invalid value for offsets: {topic}-{partition} has offset {off}")
            items.append((str(topic), int(partition), off, meta, epoch))
        self._p.send_offsets_to_transaction(items, tuple(group_metadata), _seconds(timeout))

    def commit_transaction(self, timeout: Optional[float] = None) -> None:
        """Send what is buffered, then commit. After an abortable error this
        raises; call ``abort_transaction`` and start again."""
        try:
            self._p.commit_transaction(_seconds(timeout))
        finally:
            _events.dispatch(self._p, self._error_cb)

    def abort_transaction(self, timeout: Optional[float] = None) -> None:
        """Abort: buffered records fail with ``TransactionAbortedError``,
        records already sent are never shown to read_committed consumers."""
        try:
            self._p.abort_transaction(_seconds(timeout))
        finally:
            _events.dispatch(self._p, self._error_cb)

    @property
    def transaction_state(self) -> Optional[str]:
        """Java's state name (``READY``, ``IN_TRANSACTION``, ``ABORTABLE_ERROR``, ...);
        None for a producer without ``transactional_id``."""
        return self._p.transaction_state()

    def partitions_for(self, topic: str) -> list:
        return self._p.partitions_for(topic)

    @property
    def metadata(self):
        """The live :class:`~ferrokafka.ProducerMetadata` the sender routes by."""
        return self._p.metadata()

    def metrics(self) -> Dict[str, float]:
        """{name: value} with Java's producer metric names (docs/metrics.md);
        per-topic figures are keyed ``name{topic=T}``, per-node ones
        ``name{node-id=node-N}``. The names from before (``records_sent``,
        ``batch_size_avg``, ...) stay as aliases."""
        return dict(self._p.metrics())

    @property
    def _log_id(self) -> int:
        """This client's id on its log records (their ``ferrokafka_client``
        attribute), for routing them per client."""
        return self._p._log_id

    def close(self, timeout: Optional[float] = None) -> None:
        """Flush up to ``timeout`` seconds, then fail what is left."""
        self._p.close(timeout)

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return int(self.metrics().get("records_pending", 0))


def _seconds(timeout: Optional[float]) -> Optional[float]:
    """confluent-kafka passes -1 for "no limit"; None keeps max_block_ms."""
    if timeout is None:
        return None
    t = float(timeout)
    return 1e9 if t < 0 else t


class BatchFuture:
    """The future of :meth:`Producer.send_batch`: a list of RecordMetadata in
    input order. ``result()`` raises the first record's error, if any;
    ``results()`` gives every record's metadata or exception.

    One completion for the whole call (``_done`` resolves when the last
    record is acknowledged or failed), not a future per record; the
    per-record outcomes are read from ``_core._BatchResult`` on demand."""

    def __init__(self, done: Any, outcomes: Any) -> None:
        self._done = done
        self._outcomes = outcomes

    def done(self) -> bool:
        return bool(self._done.done())

    def results(self, timeout: Optional[float] = None) -> list:
        self._done.result(timeout)  # raises KafkaTimeoutError when not done in time
        return list(self._outcomes.outcomes())

    def result(self, timeout: Optional[float] = None) -> list:
        out = self.results(timeout)
        for r in out:
            if isinstance(r, BaseException):
                raise r
        return out

    def add_done_callback(self, fn) -> None:
        self._done.add_done_callback(lambda _f: fn(self))

    def __await__(self):
        async def wait():
            await self._done
            return self.result(0)

        return wait().__await__()

    def __len__(self) -> int:
        return len(self._outcomes)

    def exception(self, timeout: Optional[float] = None) -> Optional[BaseException]:
        """The first record's error once done (None if every record was
        delivered), without building a result object per record."""
        self._done.result(timeout)
        first = self._outcomes.first_error()
        return None if first is None else first[1]


def _as_bytes_list(obj: Any, what: str) -> list:
    """list[bytes|None], or an Arrow binary/string array (PyCapsule protocol)."""
    if obj is None:
        return None
    if hasattr(obj, "__arrow_c_array__") or hasattr(obj, "__arrow_c_stream__"):
        try:
            import pyarrow as pa
        except ImportError:  # pragma: no cover - exercised only without pyarrow
            raise ValueError(f"invalid value for {what}: Arrow input needs pyarrow installed") from None
        arr = pa.array(obj) if not isinstance(obj, (pa.Array, pa.ChunkedArray)) else obj
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
        if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
            raise ValueError(f"invalid value for {what}: Arrow type {arr.type} is not binary, large_binary, string or large_string")
        return arr.to_pylist()
    # A list goes as it is: the core checks every item's type while it reads
    # it (a loop here cost more than the append itself, docs/benchmarks.md).
    return obj if type(obj) is list else list(obj)


def _check_bytes(items: Any, what: str) -> None:
    """The clear message for a list the core refused."""
    for v in items or ():
        if v is not None and not isinstance(v, (bytes, bytearray)):
            raise TypeError(f"{what} must hold bytes or None, not {type(v).__name__}")


def _arrow_array(obj: Any) -> Any:
    """An object exposing ``__arrow_c_array__``, or None if ``obj`` is not Arrow.

    A chunked array (only ``__arrow_c_stream__``) is combined into one chunk
    with pyarrow, the one case that needs it."""
    if obj is None:
        return None
    if hasattr(obj, "__arrow_c_array__"):
        return obj
    if hasattr(obj, "__arrow_c_stream__"):
        import pyarrow as pa

        return pa.chunked_array(obj).combine_chunks()
    return None


def _send_batch(self: Producer, topic: str, values: Any, keys: Any = None,
                partition: Optional[int] = None, block: bool = True) -> BatchFuture:
    """Append many records in one call (one GIL release for all of them).

    ``block=False`` never waits, as in :meth:`Producer.send`: records that
    cannot be appended at once (and every record after them, to keep their
    order) are appended later by a helper thread.

    ``values``/``keys``: ``list[bytes]`` or Arrow binary/large_binary/string
    arrays. Arrow columns are read in place through the Arrow PyCapsule
    interface (no Python object per record, no pyarrow needed).
    Returns a :class:`BatchFuture` of ``list[RecordMetadata]`` in input order.
    """
    av, ak = _arrow_array(values), _arrow_array(keys)
    if av is not None and (keys is None or ak is not None):
        return BatchFuture(*self._p.send_many_arrow(topic, av, ak, partition, block))
    vals = _as_bytes_list(values, "values")
    ks = _as_bytes_list(keys, "keys")
    try:
        return BatchFuture(*self._p.send_many(topic, vals, ks, partition, block))
    except TypeError:
        # Refused while reading the arguments: nothing was appended.
        _check_bytes(vals, "values")
        _check_bytes(ks, "keys")
        raise


Producer.send_batch = _send_batch  # type: ignore[attr-defined]
