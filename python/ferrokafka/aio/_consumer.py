"""``AIOConsumer``: :class:`ferrokafka.Consumer` for asyncio code.

Where the waiting happens: the core's ``poll`` returns at once whatever its
fetcher (a Rust thread) already decoded, so a ``getmany`` first polls with
a zero timeout on the loop itself. Only when that finds nothing and the
caller is willing to wait does a *round* start: a blocking ``poll`` on the
client's one worker thread (the core has no file descriptor or callback to
wait on instead; see ``_worker.py``), in slices of at most ``SLICE_MS`` so
that a commit or a seek queued behind it waits no longer than that. The
round's outcome comes back through the client's waker into a buffer, and
every waiting call takes from the buffer.

Cancellation loses nothing: a round is never cancelled with its caller;
records it brings after the caller went away stay in the buffer and are
returned by the next call.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import math
import time
from time import monotonic
from typing import Any, Deque, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Union

from .. import _events
from .._core import Message, TopicPartition
from ..consumer import Consumer, _tps, spark_schema
from ..errors import IllegalStateError, KafkaClosedError
from ._waker import Waker, bound
from ._worker import Worker

__all__ = ["AIOConsumer", "AIOKafkaConsumer", "ConsumerRebalanceListener"]

#: Longest blocking poll slice of a round: the most a job queued behind a
#: waiting ``getmany`` (commit, seek, close) waits for its turn.
SLICE_MS = 100

#: Longest run of record hand-outs without giving the loop to other tasks.
#: Records already buffered are returned without suspending, so a loop
#: reading a backlog (``while ...: await getmany()``) would otherwise run
#: its reads back to back: 50-100 ms without a tick of other tasks, measured
#: (docs/asyncio.md). One extra loop turn per 0.5 ms of reading costs little.
YIELD_AFTER_S = 0.0005


class ConsumerRebalanceListener:
    """aiokafka's listener shape: override either method, plain or ``async``.

    Both run on the loop and are awaited before the rebalance goes on (the
    core holds the join until they return), so a commit in
    ``on_partitions_revoked`` still carries the old generation."""

    def on_partitions_revoked(self, revoked: List[TopicPartition]) -> Any:
        return None

    def on_partitions_assigned(self, assigned: List[TopicPartition]) -> Any:
        return None


def _flatten(partitions: Sequence[Any]) -> List[TopicPartition]:
    """``pause(tp1, tp2)`` (aiokafka) or ``pause([tp1, tp2])`` (ferrokafka)."""
    out: List[TopicPartition] = []
    for p in partitions:
        if isinstance(p, TopicPartition) or (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)):
            out.extend(_tps([p]))
        else:
            out.extend(_tps(p))
    return out


class AIOConsumer:
    """``AIOConsumer(bs, group_id="g", auto_offset_reset="earliest")``.

    Takes the options of :class:`ferrokafka.Consumer`; topics given after the
    bootstrap servers are subscribed by :meth:`start`.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[str], Mapping[str, Any], None] = None,
                 *topics: str, **config: Any) -> None:
        self._c = Consumer(bootstrap_servers, **config)
        self._core = self._c._core
        self.config = self._c.config
        self._initial_topics = list(topics)
        if self._initial_topics and self.config["group_id"] is None:
            raise ValueError("topics given to AIOConsumer need option 'group_id' (or assign() without a group)")
        self._max_poll = int(self.config["max_poll_records"])
        self._waker: Optional[Waker] = None
        self._worker: Optional[Worker] = None
        # Records taken from the core and not yet handed out, per partition
        # in arrival order; Arrow batches the same way for poll_arrow.
        self._buf: Dict[TopicPartition, Deque[Message]] = {}
        self._arrow: Deque[Any] = collections.deque()
        self._round: Optional["asyncio.Future[Any]"] = None
        self._waiters = 0
        self._yielded_at = 0.0  # time.monotonic() when a fetch last suspended
        self._events_task: Optional["asyncio.Task[None]"] = None
        self._error: Optional[BaseException] = None
        self._assigned: Set[TopicPartition] = set()
        self._paused: Set[TopicPartition] = set()
        self._seeking: Dict[TopicPartition, int] = {}
        self._seeking_all = 0
        # Next offset of each partition as handed to the application: what
        # commit() commits while records sit in the buffer.
        self._delivered: Dict[TopicPartition, int] = {}
        self._listener: Any = None
        self._closed = False
        # getone()'s lane (see `getone`): the buffered deque of the
        # partition it hands out from, and the last record taken through it,
        # whose offset is written to _delivered when the lane is settled.
        self._lane: Optional[Deque[Message]] = None
        self._lane_tp: Optional[TopicPartition] = None
        self._lane_last: Optional[Message] = None
        self._close_fut: Optional["asyncio.Future[None]"] = None

    # ----- life cycle ----------------------------------------------------------------

    def _bind(self) -> Waker:
        w = self._waker
        if not self._closed and bound(w):  # the hot path: every getone
            return w  # type: ignore[return-value]
        if self._closed:
            raise KafkaClosedError("consumer is closed")
        loop = asyncio.get_running_loop()
        w = self._waker
        if w is None:
            w = self._waker = Waker(loop)
            self._worker = Worker(w, "ferrokafka-aio-consumer")
        elif w.loop is not loop:
            raise RuntimeError("AIOConsumer is bound to another event loop")
        return w

    def _work(self) -> Worker:
        self._bind()
        assert self._worker is not None
        return self._worker

    async def start(self) -> None:
        """Bind to the running loop and subscribe the constructor's topics.
        Contacts no broker (the group is joined by the first fetch)."""
        self._bind()
        if self._initial_topics:
            self.subscribe(self._initial_topics)
            self._initial_topics = []

    async def __aenter__(self) -> "AIOConsumer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self, timeout_ms: Optional[int] = None) -> None:
        """Commit (with auto-commit), leave the group, stop; idempotent.
        Calls waiting meanwhile raise ``KafkaClosedError`` (``async for``
        ends); buffered records are dropped, uncommitted."""
        if self._close_fut is None:
            self._close_fut = asyncio.ensure_future(self._close(timeout_ms))
        await asyncio.shield(self._close_fut)

    async def _close(self, timeout_ms: Optional[int]) -> None:
        self._lane_settle()
        worker = self._work()
        self._closed = True
        self._buf.clear()
        self._arrow.clear()
        try:
            await worker.submit(self._c.close, timeout_ms)
        finally:
            await worker.stop()

    # ----- subscription ---------------------------------------------------------------

    def subscribe(self, topics: Union[str, Iterable[str], Any] = (), pattern: Optional[str] = None,
                  listener: Any = None) -> None:
        """Join the group for ``topics`` (or a regex ``pattern``, as
        ``Consumer.subscribe`` takes it). ``listener``: an object with
        ``on_partitions_revoked`` / ``on_partitions_assigned`` (and
        optionally ``on_partitions_lost``), each plain or a coroutine
        function; awaited on the loop before the rebalance completes."""
        if listener is not None and not (hasattr(listener, "on_partitions_revoked")
                                         and hasattr(listener, "on_partitions_assigned")):
            raise ValueError("listener must have on_partitions_revoked and on_partitions_assigned")
        self._lane_settle()
        if pattern is not None:
            if topics:
                raise ValueError("subscribe() takes topics or pattern, not both")
            topics = pattern if isinstance(pattern, str) and pattern.startswith("^") else _as_pattern(pattern)
        self._c.subscribe(topics)
        self._listener = listener

    def assign(self, partitions: Iterable[Any]) -> None:
        self._lane_settle()
        tps = _tps(partitions)
        self._core.assign(tps)
        self._assigned = set(tps)
        self._drop(lambda tp: tp not in self._assigned)

    def group_metadata(self) -> Any:
        """For ``AIOProducer.send_offsets_to_transaction`` (see
        ``Consumer.group_metadata``)."""
        return self._c.group_metadata()

    def assignment(self) -> Set[TopicPartition]:
        return set(self._core.assignment())

    def subscription(self) -> Set[str]:
        return set(self._core.subscription())

    def unsubscribe(self) -> None:
        """Leave the subscription; buffered records are dropped. The
        group is left by the next fetch round (the core's call may wait for
        its coordinator, so it is not made on the loop)."""
        self._lane_settle()
        self._assigned.clear()
        self._drop(lambda tp: True)
        self._work().submit(self._core.unsubscribe).add_done_callback(self._note_error)

    # ----- fetching -------------------------------------------------------------------

    async def getmany(self, *partitions: Any, timeout_ms: float = 0,
                      max_records: Optional[int] = None) -> Dict[TopicPartition, List[Message]]:
        """``{TopicPartition: [records]}`` (aiokafka's shape): what is there
        now, or the first records to arrive within ``timeout_ms``; ``{}``
        when none did. ``partitions`` limits it to those partitions."""
        n = self._max_poll if max_records is None else int(max_records)
        if n < 1:
            raise ValueError(f"invalid max_records {max_records!r}: must be >= 1")
        got = await self._fetch(_flatten(partitions), timeout_ms, n, max(n, self._max_poll), False)
        out: Dict[TopicPartition, List[Message]] = {}
        for m in got:
            out.setdefault(TopicPartition(m.topic, m.partition), []).append(m)
        return out

    async def getone(self, *partitions: Any) -> Message:
        """The next record (waits as long as it takes)."""
        # The lane: once the general path has handed out a record of a
        # partition and found nothing in the way (no error or event to
        # report, no seek, pause or Arrow buffer), later calls take that
        # partition's next buffered record with no other check, until any
        # other method of this consumer or a completion on the loop settles
        # the lane (`_lane_settle`, first thing in each of them), the deque
        # runs dry, or a yield is due. Those are the only ways the state the
        # general path checked can change: this fast path never suspends.
        q = self._lane
        if q and not partitions and monotonic() - self._yielded_at <= YIELD_AFTER_S:
            m = q.popleft()
            self._lane_last = m
            return m
        self._lane_settle()
        if not partitions:
            m = self._take_one()
            if m is not None:
                return m
        got = await self._fetch(_flatten(partitions), math.inf, 1, self._max_poll, False)
        return got[0]

    def _take_one(self) -> Optional[Message]:
        """The next buffered record when nothing else has a say (else None:
        the caller goes the general way, ``_fetch``, which decides the same
        cases slowly), and the lane opened on its partition. Same order as
        ``_take``: the first buffered partition, then it goes last."""
        buf = self._buf
        if not buf or self._closed or self._error is not None or self._events_task is not None \
                or self._seeking_all or self._arrow or not bound(self._waker):
            return None
        if monotonic() - self._yielded_at > YIELD_AFTER_S:
            return None  # the general path suspends first (loop lag, docs/asyncio.md)
        tp = next(iter(buf))
        if (self._paused and tp in self._paused) or (self._seeking and tp in self._seeking):
            return None
        q = buf.pop(tp)
        m = q.popleft()
        self._delivered[tp] = m.offset + 1
        if q:
            buf[tp] = q  # re-inserted last: partitions take turns
            self._lane, self._lane_tp = q, tp
        return m

    def _lane_settle(self) -> None:
        """Close getone()'s lane: its last record counts as delivered, and a
        deque it emptied leaves the buffer (elsewhere the buffer holds no
        empty deque). Called first by every other method and completion."""
        q = self._lane
        if q is None:
            return
        self._lane = None
        tp = self._lane_tp
        m = self._lane_last
        if m is not None:
            self._lane_last = None
            self._delivered[tp] = m.offset + 1  # type: ignore[index]
        if not q and self._buf.get(tp) is q:  # type: ignore[arg-type]
            del self._buf[tp]  # type: ignore[arg-type]

    def __aiter__(self) -> "AIOConsumer":
        return self

    async def __anext__(self) -> Message:
        if self._closed:
            raise StopAsyncIteration
        try:
            return await self.getone()
        except KafkaClosedError:
            raise StopAsyncIteration from None

    async def poll_arrow(self, timeout_ms: float = 0, max_records: int = 100_000) -> Any:
        """The records as one ``pyarrow.RecordBatch`` (see
        ``Consumer.poll_arrow``); an empty batch when none arrived in time."""
        import pyarrow as pa

        if int(max_records) < 1:
            raise ValueError(f"invalid max_records {max_records!r}: must be >= 1")
        got = await self._fetch([], timeout_ms, int(max_records), int(max_records), True)
        if not got:
            return pa.RecordBatch.from_pylist([], schema=spark_schema(pa))
        return got[0]

    async def _fetch(self, parts: List[TopicPartition], timeout_ms: float, take: int, ask: int,
                     arrow: bool) -> List[Any]:
        if timeout_ms is None or timeout_ms < 0:
            raise ValueError(f"invalid timeout_ms {timeout_ms!r}: must be >= 0")
        self._lane_settle()
        worker = self._work()
        loop = self._waker.loop  # type: ignore[union-attr]
        if monotonic() - self._yielded_at > YIELD_AFTER_S:
            # Before any record is taken: a cancellation here loses none.
            await asyncio.sleep(0)
            self._yielded_at = monotonic()
        deadline = loop.time() + timeout_ms / 1000
        self._waiters += 1
        try:
            while True:
                if self._closed:
                    raise KafkaClosedError("consumer is closed")
                self._raise_error()
                got = self._take(parts, take, arrow)
                if got:
                    return got
                if self._events_task is not None:
                    await asyncio.shield(self._events_task)
                    self._yielded_at = monotonic()
                    continue
                if self._round is None and not worker.busy:
                    # Nothing waits on the worker: the core's zero-timeout
                    # poll only takes what its fetcher decoded, so it is
                    # made here and costs no thread hop.
                    self._absorb(self._poll_now(arrow, ask))
                    got = self._take(parts, take, arrow)
                    if got:
                        return got
                    if self._events_task is not None or self._error is not None:
                        continue
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return []
                if self._round is None:
                    self._start_round(arrow, remaining, ask)
                assert self._round is not None
                await asyncio.wait((self._round,), timeout=None if math.isinf(remaining) else remaining)
                self._yielded_at = monotonic()
        finally:
            self._waiters -= 1

    def _poll_now(self, arrow: bool, ask: int) -> Any:
        try:
            return (self._core.poll_arrow if arrow else self._core.poll_runs)(0, ask)
        finally:
            _events.dispatch(self._core, self._c._error_cb)

    def _start_round(self, arrow: bool, remaining: float, ask: int) -> None:
        end = time.monotonic() + remaining
        method = self._core.poll_arrow if arrow else self._core.poll_runs
        worker = self._worker
        assert worker is not None

        def blocking_poll() -> Any:
            # Off the loop. Slices end early when another job waits (a
            # commit, a seek, close) or every caller went away.
            while True:
                left = (end - time.monotonic()) * 1000
                ms = int(max(0, min(left, SLICE_MS)))
                events, recs, commits = method(ms, ask)
                if events or recs or commits or left <= SLICE_MS or worker.pending_others() \
                        or self._waiters == 0 or self._closed:
                    return events, recs, commits

        fut = worker.submit(blocking_poll)
        self._round = fut
        fut.add_done_callback(self._round_done)

    def _round_done(self, fut: "asyncio.Future[Any]") -> None:
        self._lane_settle()
        self._round = None
        _events.dispatch(self._core, self._c._error_cb)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            if not self._closed:
                self._error = exc
            return
        self._absorb(fut.result())

    def _absorb(self, polled: Any) -> None:
        """Put what a poll returned into the buffer (on the loop)."""
        self._lane_settle()
        events, recs, commits = polled
        if recs:
            if isinstance(recs, list):  # runs of one partition (poll_runs)
                buf = self._buf
                keep = self._assigned
                for tp, run in recs:
                    if keep and tp not in keep:
                        continue  # a partition revoked while the round ran
                    if self._seeking_all or (self._seeking and tp in self._seeking):
                        continue  # fetched before a seek that is still under way
                    q = buf.get(tp)
                    if q is None:
                        buf[tp] = collections.deque(run)
                    else:
                        q.extend(run)
            elif not (self._seeking_all or self._seeking):
                self._arrow.append(recs)
        if events:
            self._events_task = asyncio.ensure_future(self._run_events(events))

    def _take(self, parts: List[TopicPartition], n: int, arrow: bool) -> List[Any]:
        self._lane_settle()
        if arrow:
            if self._arrow:
                import pyarrow as pa

                return [pa.record_batch(self._arrow.popleft())]
            if self._buf:
                return self._buffered_as_arrow(n)
            return []
        if self._arrow:
            raise IllegalStateError("records of a poll_arrow() call are buffered (its caller was cancelled): "
                                    "call poll_arrow() to take them before getmany()/getone()")
        if not self._buf or self._seeking_all:
            return []
        out: List[Message] = []
        wanted = set(parts) if parts else None
        for tp in list(self._buf):
            if len(out) >= n:
                break
            if (wanted is not None and tp not in wanted) or tp in self._paused or tp in self._seeking:
                continue
            q = self._buf.pop(tp)
            while q and len(out) < n:
                out.append(q.popleft())
            self._delivered[tp] = out[-1].offset + 1
            if q:
                self._buf[tp] = q  # re-inserted last: partitions take turns
        return out

    def _buffered_as_arrow(self, n: int) -> List[Any]:
        import pyarrow as pa

        rows = []
        for m in self._take([], n, False):
            rows.append({"key": m.key, "value": m.value, "topic": m.topic, "partition": m.partition,
                         "offset": m.offset, "timestamp": m.timestamp_ms * 1000,
                         "timestampType": m.timestamp_type,
                         "headers": [{"key": k, "value": v} for k, v in m.headers]})
        return [pa.RecordBatch.from_pylist(rows, schema=spark_schema(pa))] if rows else []

    async def _run_events(self, events: list) -> None:
        """Rebalance listeners, awaited, then the core's acknowledgement
        (which lets the join go on). An error is raised by the next call."""
        try:
            for kind, parts in events:
                parts = list(parts)
                if kind == "assigned":
                    self._assigned.update(parts)
                else:
                    self._drop(lambda tp, gone=parts: tp in gone)
                await self._call_listener(kind, parts)
                if kind != "assigned":
                    self._assigned.difference_update(parts)
                    for tp in parts:
                        self._delivered.pop(tp, None)
        except Exception as e:
            self._error = e
        finally:
            if not self._closed:
                try:
                    self._core.ack_events()
                except KafkaClosedError:
                    pass
            self._events_task = None

    async def _call_listener(self, kind: str, parts: List[TopicPartition]) -> None:
        lst = self._listener
        if lst is None:
            return
        if kind == "assigned":
            fn = lst.on_partitions_assigned
        elif kind == "lost" and hasattr(lst, "on_partitions_lost"):
            fn = lst.on_partitions_lost
        else:  # Java: without onPartitionsLost, onPartitionsRevoked runs
            fn = lst.on_partitions_revoked
        r = fn(parts)
        if inspect.isawaitable(r):
            await r

    def _drop(self, which: Any) -> None:
        self._lane_settle()
        for tp in [tp for tp in self._buf if which(tp)]:
            del self._buf[tp]

    def _raise_error(self) -> None:
        e, self._error = self._error, None
        if e is not None:
            raise e

    def _note_error(self, fut: "asyncio.Future[Any]") -> None:
        self._lane_settle()
        if not fut.cancelled() and fut.exception() is not None and not self._closed:
            self._error = fut.exception()

    # ----- offsets --------------------------------------------------------------------

    async def commit(self, offsets: Optional[Mapping[Any, Any]] = None) -> None:
        """Commit ``offsets`` ({tp: offset or OffsetAndMetadata}) or, by
        default, the position of every record handed out so far (records
        still in the buffer are not counted as consumed). Synchronous
        commit semantics (retries until ``default_api_timeout_ms``), run
        off the loop."""
        self._lane_settle()
        worker = self._work()
        if offsets is None and (self._buf or self._arrow or self._round is not None):
            # The core's positions include records not handed out yet.
            assigned = self._assigned or set(self._core.assignment())
            offsets = {tp: o for tp, o in self._delivered.items() if tp in assigned}
            if not offsets:
                return
        await worker.submit(self._c.commit, offsets)

    async def committed(self, tp: Any) -> Optional[int]:
        """The group's committed offset of ``tp`` (None if none)."""
        tp = _tps([tp])[0]
        r = await self._work().submit(self._c.committed, [tp])
        o = r.get(tp)
        return None if o is None else o.offset

    async def position(self, tp: Any) -> int:
        """The offset of the next record the application will get."""
        tp = _tps([tp])[0]
        pos = await self._work().submit(self._c.position, tp)
        self._lane_settle()
        q = self._buf.get(tp)
        return q[0].offset if q else pos

    def seek(self, tp: Any, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next (buffered records of ``tp`` are
        dropped). Made on the worker after any round in flight, so records
        it fetched from the old position are dropped too; an error shows up
        in the next call."""
        tp = _tps([tp])[0]
        if int(offset) < 0:
            raise ValueError(f"invalid offset {offset!r} for seek(): must be >= 0")
        if tp not in set(self._core.assignment()):
            raise IllegalStateError(f"seek(): partition {tp.topic}-{tp.partition} is not assigned")
        self._lane_settle()
        self._seeking[tp] = self._seeking.get(tp, 0) + 1
        self._drop(lambda t: t == tp)
        self._delivered[tp] = int(offset)
        fut = self._work().submit(self._core.seek, tp, int(offset))
        fut.add_done_callback(lambda f: self._seek_done(f, [tp], True))

    def _seek_done(self, fut: "asyncio.Future[Any]", tps: Optional[List[TopicPartition]], note: bool) -> None:
        """A seek took effect in the core: what was buffered for its
        partitions came from before it."""
        self._lane_settle()
        if tps is None:
            self._seeking_all -= 1
            self._drop(lambda t: True)
        else:
            for tp in tps:
                left = self._seeking[tp] - 1
                if left:
                    self._seeking[tp] = left
                else:
                    del self._seeking[tp]
            self._drop(lambda t: t in tps)
        if note:
            self._note_error(fut)
        elif not fut.cancelled():
            fut.exception()  # raised to the awaiting caller, if it still waits

    async def _seek_to(self, partitions: Sequence[Any], to_end: bool) -> None:
        self._lane_settle()
        tps = _flatten(partitions) if partitions else None
        for tp in tps or []:
            self._seeking[tp] = self._seeking.get(tp, 0) + 1
            self._delivered.pop(tp, None)
        if tps is None:
            self._seeking_all += 1
            self._delivered.clear()
        self._drop(lambda t: tps is None or t in tps)
        fut = self._work().submit(self._core.seek_to, tps, to_end)
        # Settled even if this call is cancelled; the error is raised here.
        fut.add_done_callback(lambda f: self._seek_done(f, tps, False))
        await asyncio.shield(fut)

    async def seek_to_beginning(self, *partitions: Any) -> None:
        await self._seek_to(partitions, False)

    async def seek_to_end(self, *partitions: Any) -> None:
        await self._seek_to(partitions, True)

    async def beginning_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        return await self._work().submit(self._c.beginning_offsets, _tps(partitions))

    async def end_offsets(self, partitions: Iterable[Any]) -> Dict[TopicPartition, int]:
        return await self._work().submit(self._c.end_offsets, _tps(partitions))

    async def offsets_for_times(self, timestamps: Mapping[Any, int]) -> Dict[TopicPartition, Any]:
        return await self._work().submit(self._c.offsets_for_times, dict(timestamps))

    def highwater(self, tp: Any) -> Optional[int]:
        """The high watermark of ``tp`` from the last fetch (None before one)."""
        w = self._core.watermarks(_tps([tp])[0])
        return None if w is None else w[1]

    async def list_topics(self, timeout_ms: Optional[int] = None) -> Dict[str, int]:
        return await self._work().submit(self._c.list_topics, timeout_ms)

    async def topics(self) -> Set[str]:
        return set(await self.list_topics())

    # ----- flow control ---------------------------------------------------------------

    def pause(self, *partitions: Any) -> None:
        """Stop handing out (and fetching) these partitions' records."""
        self._lane_settle()
        tps = _flatten(partitions)
        self._core.pause(tps)
        self._paused.update(tps)

    def resume(self, *partitions: Any) -> None:
        self._lane_settle()
        tps = _flatten(partitions)
        self._core.resume(tps)
        self._paused.difference_update(tps)

    def paused(self) -> Set[TopicPartition]:
        return set(self._core.paused())

    def __repr__(self) -> str:
        return f"AIOConsumer(group_id={self.config['group_id']!r}, closed={self._closed})"


def _as_pattern(pattern: Any) -> Any:
    import re

    return pattern if isinstance(pattern, re.Pattern) else re.compile(str(pattern))


class AIOKafkaConsumer(AIOConsumer):
    """aiokafka's call shape: ``AIOKafkaConsumer(*topics, bootstrap_servers=...,
    group_id=..., **config)``; ``stop()`` is ``close()``."""

    def __init__(self, *topics: str, bootstrap_servers: Any = "localhost", **config: Any) -> None:
        super().__init__(bootstrap_servers, *topics, **config)

    async def stop(self) -> None:
        await self.close()

