"""``stats_cb`` / ``statistics_interval_ms`` (librdkafka's statistics
callback): every interval, the callback gets a JSON string of the client's
``metrics()`` snapshot. It runs from ``poll``/``flush`` in the application's
thread, never from a Rust thread (as ``error_cb``, see ``_events``): an
application that does not poll gets no statistics, as with librdkafka.

The JSON object: ``{"type": "producer"|"consumer", "client_id": ...,
"ts": unix seconds, "metrics": {metric: value}}``
with the same keys and values as ``metrics()`` (docs/metrics.md).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Callable, Dict, Optional

_log = logging.getLogger("ferrokafka")


class StatsEmitter:
    """Calls ``cb`` with a JSON snapshot of ``metrics()`` at most once per
    ``interval_ms``, when ``maybe_emit`` is called after it is due."""

    def __init__(self, interval_ms: int, cb: Optional[Callable[[str], Any]],
                 metrics: Callable[[], Dict[str, float]], kind: str, client_id: str) -> None:
        # 0 = off (the default); the config rules refuse an interval without
        # a callback, so an interval here always has one.
        self._interval = interval_ms / 1000.0 if cb is not None else 0.0
        self._cb = cb
        self._metrics = metrics
        self._kind = kind
        self._client_id = client_id
        self._next = time.monotonic() + self._interval

    def maybe_emit(self) -> None:
        if self._interval <= 0:
            return
        now = time.monotonic()
        if now < self._next:
            return
        # Next one an interval after this one; a late poll does not cause a burst.
        self._next = now + self._interval
        snapshot = {"type": self._kind, "client_id": self._client_id, "ts": time.time(),
                    "metrics": self._metrics()}
        try:
            self._cb(json.dumps(snapshot))  # type: ignore[misc]
        except Exception:
            # Like error_cb: a failing callback must not break the poll loop.
            _log.exception("stats_cb %r raised", self._cb)
