"""``list_topics()`` for every client: the cluster as confluent-kafka shapes it.

The native Consumer can refresh metadata for all topics and hand out the
full snapshot (leaders, replicas, ISRs). The producer and admin facades have
no such call natively, so they ask through a group-less native consumer made
with their own connection options on first use.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Optional

from ... import _core
from ..._config import CONSUMER
from ._config import metadata_options
from ._error import translated
from ._types import ClusterMetadata, cluster_metadata


def timeout_ms(timeout: Optional[float], default_ms: int) -> int:
    """confluent-kafka's seconds (-1 or None: the client's default) -> ms."""
    if timeout is None or timeout < 0:
        return default_ms
    return int(timeout * 1000)


def list_topics(core: Any, topic: Optional[str], timeout_ms: int) -> ClusterMetadata:
    """Refresh metadata through the native consumer ``core`` and shape it.
    Raises KafkaException(_TIMED_OUT) when no broker answers in time."""
    if topic is not None and not isinstance(topic, str):
        raise TypeError(f"topic must be a str, not {type(topic).__name__}")
    with translated():
        core.watch_all_topics()
        _, topics = core.topics(refresh=True, timeout_ms=int(timeout_ms), strict=True)
        return cluster_metadata(core.metadata().fetch(), dict(topics), topic)


class MetadataSource:
    """A lazily made group-less native consumer for metadata questions."""

    def __init__(self, native_config: Dict[str, Any]) -> None:
        self._cfg = metadata_options(native_config)
        self._core: Optional[Any] = None
        self._lock = threading.Lock()

    def core(self) -> Any:
        with self._lock:
            if self._core is None:
                cfg = dict(CONSUMER.resolve(self._cfg))
                cfg.pop("error_cb", None)
                self._core = _core._Consumer(cfg)
            return self._core

    def list_topics(self, topic: Optional[str], timeout: Optional[float]) -> ClusterMetadata:
        return list_topics(self.core(), topic, timeout_ms(timeout, 30_000))

    def close(self) -> None:
        with self._lock:
            if self._core is not None:
                self._core.close(0)
                self._core = None
