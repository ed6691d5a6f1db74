"""``stats_cb`` with ``statistics.interval.ms``: a JSON document every
interval, emitted from poll()/flush()/consume() in the calling thread, as
librdkafka does. The document has librdkafka's top-level identity fields
(``name``, ``client_id``, ``type``, ``ts``, ``time``, ``msg_cnt``) and an
empty ``brokers``/``topics``; ferrokafka's own metrics (Java names) are under
``ferrokafka``. librdkafka's per-broker and per-partition trees are not
produced (docs/compat-confluent.md)."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, Optional


class Stats:
    def __init__(self, facade: Dict[str, Any], kind: str, client_id: str,
                 metrics: Callable[[], Dict[str, Any]], msg_cnt: Callable[[], int]) -> None:
        self._cb: Optional[Callable[[str], Any]] = facade.get("stats_cb")
        interval = int(facade.get("statistics.interval.ms", 0) or 0)
        self._interval = interval / 1000
        self._kind, self._client_id = kind, client_id
        self._metrics, self._msg_cnt = metrics, msg_cnt
        self._next = time.monotonic() + self._interval
        self._n = 0

    @property
    def active(self) -> bool:
        # librdkafka: statistics are off unless both a callback and an
        # interval are set (interval 0, the default, disables them).
        return self._cb is not None and self._interval > 0

    def maybe_emit(self) -> None:
        if not self.active or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self._interval
        now = time.time()
        try:
            metrics = {k: v for k, v in dict(self._metrics()).items() if isinstance(v, (int, float, str))}
        except Exception:  # a client being closed has no metrics to give
            metrics = {}
        self._n += 1
        doc = {"name": f"{self._client_id}#{self._kind}-{id(self):x}", "client_id": self._client_id,
               "type": self._kind, "ts": int(time.monotonic() * 1_000_000), "time": int(now),
               "msg_cnt": int(self._msg_cnt()), "brokers": {}, "topics": {}, "ferrokafka": metrics}
        self._cb(json.dumps(doc))  # type: ignore[misc]
