"""``AIOAdmin``: :class:`ferrokafka.Admin` with every request awaited.

Each admin call is one blocking request/response exchange in the core, so
each runs on the client's one worker thread (in call order) and its result
comes back through the client's waker; the loop never waits.
"""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .. import _events
from ..admin import Admin, ClusterDescription, GroupListing, NewTopic
from ..errors import KafkaClosedError
from ._waker import Waker
from ._worker import Worker

__all__ = ["AIOAdmin", "NewTopic"]


class AIOAdmin:
    """``async with AIOAdmin(bs) as a: await a.create_topics([NewTopic(t, 3)])``.

    Same options and methods as :class:`ferrokafka.Admin`, each a coroutine;
    a dead cluster raises ``KafkaTimeoutError`` after the call's timeout
    (``default_api_timeout_ms`` unless given)."""

    def __init__(self, bootstrap_servers: Union[str, Sequence[str], Mapping[str, Any], None] = None,
                 **config: Any) -> None:
        self._admin = Admin(bootstrap_servers, **config)
        self.config = self._admin.config
        self._worker: Optional[Worker] = None
        self._closed = False
        self._close_fut: Optional["asyncio.Future[None]"] = None

    def _work(self) -> Worker:
        if self._closed:
            raise KafkaClosedError("admin client is closed")
        loop = asyncio.get_running_loop()
        if self._worker is None:
            self._worker = Worker(Waker(loop), "ferrokafka-aio-admin")
        elif self._worker._waker.loop is not loop:
            raise RuntimeError("AIOAdmin is bound to another event loop")
        return self._worker

    async def _call(self, name: str, *args: Any) -> Any:
        # A cancelled call's request still completes on the worker (a
        # request on the wire cannot be taken back); its result is dropped.
        # Admin's methods run error_cb after each call (in the calling
        # thread): the undecorated method runs on the worker and error_cb
        # here, on the loop's thread.
        method = getattr(Admin, name)
        raw = getattr(method, "__wrapped__", method)
        admin = self._admin
        try:
            return await self._work().submit(lambda: raw(admin, *args))
        finally:
            _events.dispatch(admin._core, admin._error_cb)

    async def start(self) -> None:
        """Bind to the running loop (contacts no broker)."""
        self._work()

    async def __aenter__(self) -> "AIOAdmin":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def create_topics(self, topics: Iterable[NewTopic], timeout_ms: int = 30_000,
                            validate_only: bool = False, raise_on_error: bool = True,
                            ) -> Dict[str, Optional[BaseException]]:
        return await self._call("create_topics", list(topics), timeout_ms, validate_only,
                                raise_on_error)

    async def delete_topics(self, names: Iterable[str], timeout_ms: int = 30_000,
                            raise_on_error: bool = True) -> Dict[str, Optional[BaseException]]:
        names = [names] if isinstance(names, str) else list(names)
        return await self._call("delete_topics", names, timeout_ms, raise_on_error)

    async def list_topics(self, timeout_ms: Optional[int] = None) -> Dict[str, int]:
        return await self._call("list_topics", timeout_ms)

    async def describe_cluster(self, timeout_ms: Optional[int] = None) -> ClusterDescription:
        return await self._call("describe_cluster", timeout_ms)

    async def list_consumer_groups(self, timeout_ms: Optional[int] = None) -> List[GroupListing]:
        return await self._call("list_consumer_groups", timeout_ms)

    async def list_consumer_group_offsets(self, group_id: str, timeout_ms: Optional[int] = None) -> Dict[Any, int]:
        return await self._call("list_consumer_group_offsets", group_id, timeout_ms)

    async def close(self) -> None:
        """Idempotent; waits for calls already made, then stops."""
        if self._close_fut is None:
            self._close_fut = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_fut)

    async def _close(self) -> None:
        worker = self._work()
        self._closed = True
        try:
            await worker.submit(self._admin.close)
        finally:
            await worker.stop()
