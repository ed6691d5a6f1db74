"""The future ``AIOProducer.send_nowait`` returns (``Delivery``, a class of
the Rust core: ``rust/ferrokafka-py/src/aio_delivery.rs``): asyncio's future
protocol over the record's outcome in the core, with an ``asyncio.Future``
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

from typing import Any, Callable

from .. import _core


class _Relay:
    """A done callback of the real future that calls ``fn`` with the
    delivery (asyncio passes callbacks the future they were added to).
    Equal to ``fn``, so ``remove_done_callback(fn)`` finds it."""

    __slots__ = ("fn", "outer")

    def __init__(self, fn: Callable[[Any], Any], outer: Any) -> None:
        self.fn = fn
        self.outer = outer

    def __call__(self, _inner: Any) -> None:
        self.fn(self.outer)

    def __eq__(self, other: object) -> bool:
        return self.fn == (other.fn if isinstance(other, _Relay) else other)

    def __hash__(self) -> int:
        return hash(self.fn)


# The class itself is in Rust (rust/ferrokafka-py/src/aio_delivery.rs, which
# says why); `_Relay` above is what its `add_done_callback` wraps callbacks in.
Delivery = _core.Delivery
