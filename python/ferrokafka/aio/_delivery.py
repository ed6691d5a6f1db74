"""The future ``AIOProducer.send_nowait`` returns: asyncio's future
protocol over the core's ``DeliveryFuture``, with an ``asyncio.Future``
made only when something has to wait on the loop.

Why not an ``asyncio.Future`` per record: making one, registering its
completion and settling it on the loop was half of the loop's time in a
``send_nowait`` flood (py-spy; docs/asyncio.md). Most records are awaited
after they are delivered, or never: then the outcome is read straight from
the core's future (one call) and no loop machinery runs at all. A record
that is awaited, or given a callback, while still pending gets a real
``asyncio.Future`` at that moment, settled by the producer's completion
path (``AIOProducer._track``) as before.

``asyncio.isfuture()`` is true for it, so ``await``, ``asyncio.gather``,
``wait``, ``wait_for``, ``shield``, ``as_completed`` and callbacks work as
with an ``asyncio.Future``; it is not an instance of that class.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Generator, Optional


class _Relay:
    """A done callback of the real future that calls ``fn`` with the
    delivery (asyncio passes callbacks the future they were added to).
    Equal to ``fn``, so ``remove_done_callback(fn)`` finds it."""

    __slots__ = ("fn", "outer")

    def __init__(self, fn: Callable[[Any], Any], outer: "Delivery") -> None:
        self.fn = fn
        self.outer = outer

    def __call__(self, _inner: Any) -> None:
        self.fn(self.outer)

    def __eq__(self, other: object) -> bool:
        return self.fn == (other.fn if isinstance(other, _Relay) else other)

    def __hash__(self) -> int:
        return hash(self.fn)


class Delivery:
    """One record's delivery, as an asyncio future (see the module doc)."""

    __slots__ = ("_d", "_owner", "_st", "__weakref__")
    # asyncio.isfuture() looks for this class attribute; it is only ever set
    # on futures a task awaits, and a task awaits the real future (below).
    _asyncio_future_blocking = False

    def __init__(self, owner: Any, dfut: Any) -> None:
        self._owner = owner  # the AIOProducer: its loop and completion path
        self._d = dfut
        # None: nobody read the outcome yet; True: read; else the real
        # asyncio future, made on first need (one slot: this is per record).
        self._st: Any = None

    @property
    def _af(self) -> Optional["asyncio.Future[Any]"]:
        st = self._st
        return None if st is None or st is True else st

    def _future(self) -> "asyncio.Future[Any]":
        """The real asyncio future, made and tracked on first need."""
        af = self._af
        if af is None:
            o = self._owner
            af = self._st = o._track(o._waker, self._d)
        return af

    def __await__(self) -> Generator[Any, None, Any]:
        st = self._st
        if st is None or st is True:
            # The common case, delivered already: no loop machinery at all.
            # result_nowait raises the record's error, or None: pending.
            self._st = True
            md = self._d.result_nowait()
            if md is not None:
                return md
        return (yield from self._future().__await__())

    __iter__ = __await__  # as asyncio.Future

    def done(self) -> bool:
        af = self._af
        return af.done() if af is not None else self._d.done()

    def cancelled(self) -> bool:
        af = self._af
        return af is not None and af.cancelled()

    def result(self) -> Any:
        af = self._af
        if af is not None:
            return af.result()
        if not self._d.done():
            raise asyncio.InvalidStateError("Result is not set.")
        self._st = True
        return self._d.result(0)

    def exception(self) -> Optional[BaseException]:
        af = self._af
        if af is not None:
            return af.exception()
        if not self._d.done():
            raise asyncio.InvalidStateError("Exception is not set.")
        self._st = True
        return self._d.exception(0)

    def add_done_callback(self, fn: Callable[[Any], Any], *, context: Any = None) -> None:
        self._future().add_done_callback(_Relay(fn, self), context=context)

    def remove_done_callback(self, fn: Callable[[Any], Any]) -> int:
        af = self._af
        return 0 if af is None else af.remove_done_callback(fn)

    def cancel(self, msg: Any = None) -> bool:
        """Drops the outcome, not the record (it is delivered or fails
        anyway, docs/asyncio.md)."""
        if self._af is None and self._d.done():
            return False  # done: as asyncio.Future.cancel
        return self._future().cancel(msg)

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._owner._waker.loop  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        # asyncio's helpers read a few private attributes of a cancelled
        # child (gather: `_make_cancelled_error`, `_cancel_message`): those
        # of the real future, which a cancelled delivery always has.
        if name.startswith("__") or name in Delivery.__slots__:
            raise AttributeError(name)
        return getattr(self._future(), name)

    def __repr__(self) -> str:
        if self._af is not None:
            return f"<Delivery {self._af!r}>"
        d = self._d
        if not d.done():
            return "<Delivery pending>"
        exc = d.exception(0)
        return f"<Delivery exception={exc!r}>" if exc is not None else f"<Delivery result={d.result(0)!r}>"
