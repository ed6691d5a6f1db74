"""``AIOProducer``: :class:`ferrokafka.Producer` for asyncio code.

No call blocks the loop. A record goes through the core's non-blocking send
(``send(..., block=False)``): appended at once when the topic's metadata is
known and the buffer has room; otherwise copied and appended by the
producer's one deferral thread, in call order, so records to a partition
keep their order (its future fails with ``KafkaTimeoutError`` after
``max_block_ms``).

How completions reach the loop. Two hooks of the core's DeliveryFuture:
``add_done_callback`` queues the callback at completion *without* the GIL
(run later by ``Producer.poll`` in the polling thread), and ``__await__``
makes the completing thread take the GIL to hand the result to a loop.
Taking the GIL once per record on the sender thread, while the loop's
thread holds it, costs the sender a GIL switch interval each: measured,
a flood of 100k awaited records ran at 26k records/s that way against
260k records/s without. So ``send_nowait`` returns a
:class:`~ferrokafka.aio._delivery.Delivery`, which reads a delivered
record's outcome from the core directly and asks for an asyncio future
(``_track``) only when something waits on a pending record; each tracked
record gets a queued callback, and only one pending tracked record at a
time, the *sentinel*, is watched through the client's
:class:`~ferrokafka.aio._waker.Waker`. When the sentinel
completes, the loop runs ``Producer.poll(0)``, which runs every queued
callback (each only appends its record to a deque), settles the records'
asyncio futures ``SETTLE_CHUNK`` at a time (one loop iteration each, so a
burst of 10k completions never stalls the loop for long), then watches the
oldest record still pending as the next sentinel. Whenever a record is
pending, a pending record is watched or a settling step is scheduled, so
no callback waits unrun; a record that completes before the sentinel is
settled when the sentinel completes (within about one produce round trip).
"""

from __future__ import annotations

import asyncio
import collections
import sys
import weakref
from threading import get_ident
from typing import Any, Dict, Mapping, Optional, Sequence, Set, Union

from .. import _events
from ..errors import KafkaClosedError
from ..producer import BatchFuture, HeaderList, Producer
from ._delivery import Delivery
from ._waker import Waker, bound, watch
from ._worker import Worker

__all__ = ["AIOProducer", "AIOKafkaProducer"]

#: Records settled per loop iteration (about 1 ms of work).
SETTLE_CHUNK = 256


class AIOProducer:
    """``async with AIOProducer(bs, linger_ms=5) as p: await p.send(t, b"v")``.

    Takes the options of :class:`ferrokafka.Producer` (invalid or unknown
    ones raise ``ValueError`` here, before any ``await``).
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[str], Mapping[str, Any], None] = None,
                 **config: Any) -> None:
        self._producer = Producer(bootstrap_servers, **config)
        self.config = self._producer.config
        # Read once per record by send_nowait: looked up here, once.
        self._partitioner = self._producer._partitioner
        self._core_send_nowait = self._producer._p.send_nowait
        self._waker: Optional[Waker] = None
        # Only for a Python partitioner, which may wait for the partition
        # count in the calling thread (see _send_partitioned).
        self._worker: Optional[Worker] = None
        self._known: Set[str] = set()
        self._queued_sends = 0  # records waiting on the worker (flush does not count)
        self._closed = False
        self._close_fut: Optional["asyncio.Future[None]"] = None
        # Records sent and not settled, oldest first (DeliveryFuture ->
        # asyncio future), and the watched one among them (see the module doc).
        self._pending: Dict[Any, "asyncio.Future[Any]"] = {}
        self._sentinel: Any = None
        self._completed: "collections.deque[Any]" = collections.deque()
        # One callable shared by every record: a bound method made per
        # record would be one more object per pending record for the
        # cyclic GC to walk (full collections over 100k pending records
        # were the loop's worst stalls, 20-50 ms, when made per record).
        self._on_done = self._completed.append
        self._settling = False

    # -- life cycle -----------------------------------------------------------
    async def start(self) -> None:
        """Bind the client to the running loop. Contacts no broker: an
        unreachable cluster shows up as the first records' futures failing
        with ``KafkaTimeoutError`` after ``max_block_ms``. Optional (the
        first call binds the loop too); calling it again does nothing."""
        self._bind()

    def _bind(self) -> Waker:
        w = self._waker
        if not self._closed and bound(w):  # the hot path: every send_nowait
            return w  # type: ignore[return-value]
        if self._closed:
            raise KafkaClosedError("producer is closed")
        loop = asyncio.get_running_loop()
        w = self._waker
        if w is None:
            w = self._waker = Waker(loop)
            # A failed record whose Delivery is dropped unread goes to the
            # loop's exception handler, as an asyncio.Future's would; the
            # core's future reports it when freed. Through a weak reference:
            # the core holding this producer would be a cycle the GC cannot see.
            self._producer._p.report_unretrieved(_unretrieved_reporter(weakref.ref(self)))
        elif w.loop is not loop:
            raise RuntimeError("AIOProducer is bound to another event loop")
        return w

    async def __aenter__(self) -> "AIOProducer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- sending --------------------------------------------------------------
    def send_nowait(self, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None,
                    partition: Optional[int] = None, timestamp_ms: Optional[int] = None,
                    headers: Optional[Union[HeaderList, Mapping[str, Optional[bytes]]]] = None,
                    ) -> "asyncio.Future[Any]":
        """Append one record without waiting; an asyncio future of its
        :class:`~ferrokafka.RecordMetadata` (``asyncio.isfuture()`` is true:
        await it, gather it, give it callbacks; see ``_delivery.py``).

        Never blocks the loop. Bad arguments raise here (``TypeError``,
        ``ValueError``); a closed producer raises ``KafkaClosedError``.
        Cancelling the returned future does not withdraw the record: once
        this returns, the record is delivered or fails like any other (the
        cancellation only drops the outcome)."""
        waker = self._waker
        # `_bind()` inlined for the common case (this runs once per record;
        # not asyncio's running-loop lookup: see `bound`).
        if waker is None or self._closed or waker.thread != get_ident() or not waker.loop.is_running():
            waker = self._bind()
        if self._partitioner is not None and partition is None:
            return self._send_partitioned(waker, topic, value, key, timestamp_ms, headers)
        if self._queued_sends:
            # Records wait on the worker for a partitioner: keep call order.
            return self._worker_send(topic, value, key, partition, timestamp_ms, headers)
        # The core makes the Delivery (the asyncio future protocol) itself.
        return self._core_send_nowait(self, topic, value, key, partition, timestamp_ms, headers)  # type: ignore[no-any-return]

    def _track(self, waker: Waker, dfut: Any) -> "asyncio.Future[Any]":
        """The asyncio future of a core DeliveryFuture (on the loop)."""
        afut = waker.loop.create_future()
        self._pending[dfut] = afut
        # Run by Producer.poll on the loop's thread (at once if done).
        dfut.add_done_callback(self._on_done)
        if self._sentinel is None:
            self._watch(waker, dfut)
        return afut

    def _watch(self, waker: Waker, dfut: Any) -> None:
        self._sentinel = dfut
        watch(waker, dfut).add_done_callback(self._sentinel_done)

    def _sentinel_done(self, f: "asyncio.Future[Any]") -> None:
        if not f.cancelled():
            f.exception()  # the record's own future reports it; mark it seen
        self._sentinel = None
        self._collect()

    def _collect(self) -> None:
        self._producer.poll(0)  # every record completed so far -> _completed
        if self._settling:
            return  # the running settle steps pick the next sentinel
        if self._completed:
            self._settling = True
            self._waker.loop.call_soon(self._settle_some)  # type: ignore[union-attr]
        else:
            self._pick()

    def _settle_some(self) -> None:
        done, pending = self._completed, self._pending
        for _ in range(min(SETTLE_CHUNK, len(done))):
            dfut = done.popleft()
            afut = pending.pop(dfut, None)
            if afut is None or afut.done():  # cancelled: the record went anyway
                continue
            exc = dfut.exception(0)
            if exc is None:
                afut.set_result(dfut.result(0))
            else:
                afut.set_exception(exc)
        if done:
            self._waker.loop.call_soon(self._settle_some)  # type: ignore[union-attr]
            return
        self._settling = False
        self._pick()

    def _pick(self) -> None:
        if self._sentinel is not None or not self._pending:
            return
        oldest = next(iter(self._pending))
        if oldest.done():
            self._collect()  # its callback is queued: collect it, pick after
        else:
            self._watch(self._waker, oldest)  # type: ignore[arg-type]

    async def send(self, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None,
                   partition: Optional[int] = None, timestamp_ms: Optional[int] = None,
                   headers: Optional[Union[HeaderList, Mapping[str, Optional[bytes]]]] = None) -> Any:
        """Append one record and wait for its delivery; the RecordMetadata,
        or the ``KafkaError`` it failed with.

        Cancelling the ``await`` does not withdraw the record (see
        :meth:`send_nowait`): it is still delivered, or fails, unobserved."""
        return await self.send_nowait(topic, value, key, partition, timestamp_ms, headers)

    # aiokafka's name for the same call
    send_and_wait = send

    def _send_partitioned(self, waker: Waker, topic: str, value: Any, key: Any,
                          timestamp_ms: Any, headers: Any) -> "asyncio.Future[Any]":
        """A Python partitioner needs the partition count, which may mean
        waiting for metadata: known topics are partitioned here (the count
        is cached, no wait), unknown ones on the worker thread, and every
        record after them too while any wait, so their order holds."""
        if topic in self._known and not self._queued_sends:
            dfut = self._producer.send(topic, value, key, None, timestamp_ms, headers, False)
            return Delivery(self, dfut)  # type: ignore[return-value]
        if isinstance(key, str):
            raise TypeError("value and key must be bytes (encode str first), not str")
        return self._worker_send(topic, value, key, None, timestamp_ms, headers)

    def _worker_send(self, topic: str, value: Any, key: Any, partition: Any,
                     timestamp_ms: Any, headers: Any) -> "asyncio.Future[Any]":
        waker = self._bind()
        if self._worker is None:
            self._worker = Worker(waker, "ferrokafka-aio-producer")
        out = waker.loop.create_future()
        producer = self._producer

        def append() -> Any:
            # Blocks here, off the loop, up to max_block_ms when the
            # partition count is unknown; `block=False` for the append.
            return producer.send(topic, value, key, partition, timestamp_ms, headers, False)

        def appended(f: "asyncio.Future[Any]") -> None:
            self._queued_sends -= 1
            if f.cancelled():
                return
            exc = f.exception()
            if exc is not None:
                if not out.done():
                    out.set_exception(exc)
                return
            self._known.add(topic)
            inner = self._track(waker, f.result())
            inner.add_done_callback(lambda i: _chain(i, out))

        self._worker.submit(append).add_done_callback(appended)
        self._queued_sends += 1
        return out

    async def send_batch(self, topic: str, values: Any, keys: Any = None,
                         partition: Optional[int] = None) -> list:
        """Append many records in one call (see ``Producer.send_batch``)
        and wait for all; ``list[RecordMetadata]`` in input order, or the
        first record's error. One completion for the whole batch."""
        bf: BatchFuture = self._producer.send_batch(topic, values, keys, partition, False)  # type: ignore[attr-defined]
        await watch(self._bind(), bf._done)
        return bf.result(0)

    async def flush(self, timeout: Optional[float] = None) -> int:
        """Send everything buffered and wait for it (off the loop); the
        number of records still not delivered when ``timeout`` s passed."""
        self._bind()
        try:
            # The core's flush, not Producer.flush: that one would run
            # error_cb on the worker thread; here it runs on the loop's.
            return await self._off_loop(self._producer._p.flush, timeout)
        finally:
            _events.dispatch(self._producer._p, self._producer._error_cb)

    async def _off_loop(self, fn: Any, *args: Any) -> Any:
        w = self._bind()
        if self._worker is None:
            self._worker = Worker(w, "ferrokafka-aio-producer")
        return await self._worker.submit(fn, *args)

    async def partitions_for(self, topic: str) -> list:
        """The topic's partition ids (waits for metadata off the loop)."""
        parts = await self._off_loop(self._producer.partitions_for, topic)
        self._known.add(topic)
        return parts

    def metrics(self) -> dict:
        return self._producer.metrics()

    # -- transactions (docs/semantics.md §7): the waits run off the loop ------
    async def init_transactions(self, timeout: Optional[float] = None) -> None:
        await self._off_loop(self._producer.init_transactions, timeout)

    async def begin_transaction(self) -> None:
        """No I/O (the coordinator learns of the transaction with its first
        partition); async for symmetry with confluent-kafka's AIOProducer."""
        self._producer.begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: Any,
                                          timeout: Optional[float] = None) -> None:
        await self._off_loop(self._producer.send_offsets_to_transaction, offsets,
                             group_metadata, timeout)

    async def commit_transaction(self, timeout: Optional[float] = None) -> None:
        await self._off_loop(self._producer.commit_transaction, timeout)

    async def abort_transaction(self, timeout: Optional[float] = None) -> None:
        await self._off_loop(self._producer.abort_transaction, timeout)

    @property
    def transaction_state(self) -> Optional[str]:
        return self._producer.transaction_state

    def transaction(self) -> "_Transaction":
        """``async with p.transaction(): ...``: begins; commits when the block
        ends normally, aborts when it raises (the exception propagates)."""
        return _Transaction(self)

    async def close(self, timeout: Optional[float] = None) -> None:
        """Flush up to ``timeout`` s, fail what is left, stop. Idempotent;
        concurrent calls wait for the same close."""
        if self._close_fut is None:
            self._close_fut = asyncio.ensure_future(self._close(timeout))
        await asyncio.shield(self._close_fut)

    async def _close(self, timeout: Optional[float]) -> None:
        w = self._bind()
        worker = self._worker or Worker(w, "ferrokafka-aio-producer")
        self._worker = worker
        self._closed = True
        try:
            await worker.submit(self._producer.close, timeout)
        finally:
            await worker.stop()


class _Transaction:
    def __init__(self, producer: AIOProducer) -> None:
        self._p = producer

    async def __aenter__(self) -> "_Transaction":
        self._p._producer.begin_transaction()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            await self._p.commit_transaction()
        elif self._p.transaction_state in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
            await self._p.abort_transaction()


def _chain(src: "asyncio.Future[Any]", dst: "asyncio.Future[Any]") -> None:
    if dst.done():
        return
    if src.cancelled():
        dst.cancel()
    elif src.exception() is not None:
        dst.set_exception(src.exception())  # type: ignore[arg-type]
    else:
        dst.set_result(src.result())


class AIOKafkaProducer(AIOProducer):
    """aiokafka's name and call shape: ``AIOKafkaProducer(bootstrap_servers=...,
    **config)``; ``await send(...)`` there returns a future once the record
    is queued, here :meth:`send_nowait` is that and ``send`` waits for the
    delivery like ``send_and_wait``."""

    async def send(self, topic: str, value: Optional[bytes] = None, key: Optional[bytes] = None,  # type: ignore[override]
                   partition: Optional[int] = None, timestamp_ms: Optional[int] = None,
                   headers: Optional[Union[HeaderList, Mapping[str, Optional[bytes]]]] = None,
                   ) -> "asyncio.Future[Any]":
        """aiokafka's ``send``: the future of the queued record."""
        return self.send_nowait(topic, value, key, partition, timestamp_ms, headers)

    async def start(self) -> None:
        """As aiokafka: a transactional producer registers its
        ``transactional_id`` here (``init_transactions``)."""
        await super().start()
        if self.config.get("transactional_id") is not None and \
                self.transaction_state == "UNINITIALIZED":
            await self.init_transactions()

    def begin_transaction(self) -> None:  # type: ignore[override]
        """aiokafka's ``begin_transaction`` is not a coroutine."""
        self._producer.begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any],  # type: ignore[override]
                                          group_id: Any, timeout: Optional[float] = None) -> None:
        """aiokafka passes the group id (no KIP-447 generation check); a
        ``consumer.group_metadata()`` works too."""
        await super().send_offsets_to_transaction(offsets, group_id, timeout)

    async def stop(self) -> None:
        await self.close()


def _unretrieved_reporter(ref: "weakref.ref[AIOProducer]") -> Any:
    def report(exc: BaseException) -> None:
        p = ref()
        w = p._waker if p is not None else None
        if w is None or sys.is_finalizing() or w.loop.is_closed():
            return  # nobody is left to tell
        w.loop.call_exception_handler({
            "message": "ferrokafka.aio delivery exception was never retrieved",
            "exception": exc,
        })
    return report
