"""One thread per client for the calls that block, run in call order.

The core's blocking calls (a consumer's ``poll`` with a timeout, a
synchronous ``commit``, an admin request, a custom partitioner waiting for
the partition count) release the GIL while they wait, but they do wait: on
the loop's thread they would stall every other task. The core offers no
file descriptor or callback to wait on instead, so they run here, on one
thread per client (not one per call): jobs run one at a time in the order
they were submitted, which keeps per-partition order for records and makes
a commit follow the poll before it. Results go back through the client's
:class:`~ferrokafka.aio._waker.Waker`.

The thread starts with the first job and ends when the client closes.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Any, Callable, Deque, Optional, Tuple

from ._waker import Waker

_Job = Tuple[Optional["asyncio.Future[Any]"], Callable[..., Any], Tuple[Any, ...]]
_STOP = object()


class Worker:
    def __init__(self, waker: Waker, name: str) -> None:
        self._waker = waker
        self._name = name
        self._jobs: Deque[Any] = collections.deque()
        self._cv = threading.Condition(threading.Lock())
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        self.busy = 0  # jobs submitted and not finished (read on the loop)

    def submit(self, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any]":
        """Run ``fn(*args)`` on the worker; an asyncio future of its result.

        Cancelling the future does not stop the call (a blocking core call
        cannot be interrupted); its result is then dropped."""
        fut = self._waker.loop.create_future()
        self._put((fut, fn, args))
        return fut

    def _put(self, job: Any) -> None:
        with self._cv:
            if self._stopping:
                raise RuntimeError(f"{self._name}: worker stopped")
            self._jobs.append(job)
            self.busy += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cv.notify()

    def pending_others(self) -> bool:
        """True when jobs wait behind the running one (a long poll yields)."""
        return bool(self._jobs)

    def stop(self) -> "asyncio.Future[Any]":
        """Let queued jobs finish, then end the thread; a future of that."""
        fut = self._waker.loop.create_future()
        with self._cv:
            if self._stopping or self._thread is None:
                self._stopping = True
                fut.set_result(None)
                return fut
            self._stopping = True
            self._jobs.append((fut, _STOP, ()))
            self.busy += 1
            self._cv.notify()
        return fut

    def _run(self) -> None:
        waker = self._waker
        while True:
            with self._cv:
                while not self._jobs:
                    self._cv.wait()
                fut, fn, args = self._jobs.popleft()
            if fn is _STOP:
                waker.post(self._done, fut, None, None)
                return
            try:
                value = fn(*args)
            except BaseException as e:  # handed to the awaiting task
                waker.post(self._done, fut, None, e)
            else:
                waker.post(self._done, fut, value, None)

    def _done(self, fut: "asyncio.Future[Any]", value: Any, exc: Optional[BaseException]) -> None:
        self.busy -= 1
        if fut.done():  # cancelled by its awaiter; the outcome goes nowhere
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)
