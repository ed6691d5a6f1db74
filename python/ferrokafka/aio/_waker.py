"""The one path by which a client's completions reach its event loop.

Completions happen on other threads: the producer's sender (a delivered
record), the client's worker thread (a blocking call that returned). Each
one could call ``loop.call_soon_threadsafe`` itself, but that is a write to
the loop's self-pipe and a loop wake-up per completion: at 100k records/s the
loop would spend its time waking. A :class:`Waker` queues completions and
schedules *one* drain while any are queued; the drain runs them all in one
loop iteration. So a burst of N completions costs one wake-up, not N.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Callable, Deque, Optional, Tuple

from .._future_helpers import settle

_Item = Tuple[Callable[..., Any], Tuple[Any, ...]]


class Waker:
    """Queue of callables to run on ``loop``'s thread, drained in batches.

    Lock-free on purpose (the GIL makes ``deque.append`` and the flag
    accesses atomic): a poster appends *before* it reads the flag, and the
    drain clears the flag *before* it pops. Any item appended after the
    drain's last pop therefore sees the flag clear and schedules the next
    drain; at worst two drains are scheduled and the second finds nothing.
    """

    __slots__ = ("loop", "thread", "_items", "_scheduled", "drains", "posted", "closed")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # The thread the loop runs in (made on it): see `bound`.
        self.thread = threading.get_ident()
        self._items: Deque[_Item] = collections.deque()
        self._scheduled = False
        # Counters for tests and the docs' figures: how many completions
        # arrived and in how many loop wake-ups (both counted on the loop's
        # thread, so exact).
        self.drains = 0
        self.posted = 0
        self.closed = False

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop's thread soon. Any thread may call."""
        self._items.append((fn, args))
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._drain)
            except RuntimeError:
                # The loop is closed: nobody is left to await the result.
                # The item stays queued and is dropped with the waker.
                self.closed = True

    # The core's DeliveryFuture.__await__ hands a completion to
    # ``loop.call_soon_threadsafe``; see ``watch`` for how it lands here.
    call_soon_threadsafe = post

    def _drain(self) -> None:
        self._scheduled = False
        self.drains += 1
        items = self._items
        while items:
            fn, args = items.popleft()
            self.posted += 1
            try:
                fn(*args)
            except Exception as e:  # a callback's error must not lose the rest
                self.loop.call_exception_handler(
                    {"message": "ferrokafka.aio completion callback raised", "exception": e})

    def resolve(self, fut: "asyncio.Future[Any]", value: Any) -> None:
        """From any thread: set ``fut``'s result on the loop's thread."""
        self.post(settle, fut, fut.set_result, value)

    def fail(self, fut: "asyncio.Future[Any]", exc: BaseException) -> None:
        """From any thread: set ``fut``'s exception on the loop's thread."""
        self.post(settle, fut, fut.set_exception, exc)


class _LoopStandIn:
    """What ``DeliveryFuture.__await__`` sees as the running loop while
    :func:`watch` registers a future: futures are made on the real loop,
    and the completion's ``call_soon_threadsafe`` goes to the waker."""

    __slots__ = ("_waker", "made")

    def __init__(self, waker: Waker) -> None:
        self._waker = waker
        self.made: Any = None

    def create_future(self) -> "asyncio.Future[Any]":
        self.made = self._waker.loop.create_future()
        return self.made

    def call_soon_threadsafe(self, fn: Callable[..., Any], *args: Any) -> None:
        self._waker.post(fn, *args)


def watch(waker: Waker, dfut: Any) -> "asyncio.Future[Any]":
    """An asyncio future (on the waker's loop) of a core ``DeliveryFuture``,
    completed through ``waker``.

    The core offers one loop-facing hook: ``DeliveryFuture.__await__`` asks
    ``asyncio.get_running_loop()`` for a future and, when the record
    completes, calls that loop's ``call_soon_threadsafe`` from the sender
    thread (rust/ferrokafka-py/src/future.rs). For the length of that one
    synchronous call the running loop is the waker's stand-in, so the
    completion is queued on the waker instead of waking the loop itself.
    Nothing else can run on this thread meanwhile (no ``await`` inside).
    (Needs from the core: a completion hook that takes a callable, which
    would make the stand-in unnecessary.)
    """
    loop = waker.loop
    stand_in = _LoopStandIn(waker)
    asyncio.events._set_running_loop(stand_in)  # type: ignore[arg-type]
    try:
        dfut.__await__()
    finally:
        asyncio.events._set_running_loop(loop)
    fut = stand_in.made
    if fut is None:  # the core's hook changed: refuse rather than never complete
        raise RuntimeError("DeliveryFuture.__await__ did not ask the loop for a future")
    return fut


def bound(w: Optional[Waker]) -> bool:
    """Whether ``w``'s loop is the one running in this thread, without
    ``asyncio.get_running_loop()``: on CPython 3.11 that makes a getpid()
    system call per call (its fork check), a quarter of the loop thread's
    time in a ``send_nowait`` flood. A thread runs at most one loop at a
    time, so the bound loop running on this thread is the same answer."""
    return w is not None and w.thread == threading.get_ident() and w.loop.is_running()
