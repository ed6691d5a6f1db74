"""kafka-python's serializer interfaces (``kafka.serializer``).

``key_serializer`` / ``value_serializer`` (and the deserializers) take either
one of these objects (called with ``(topic, headers, data)``) or a plain
callable (called with ``data``), as in kafka-python 3.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, List, Optional, Tuple

__all__ = ["Serializer", "Deserializer", "DefaultSerializer", "JsonSerializer"]

Headers = List[Tuple[str, bytes]]


class Serializer(ABC):
    @abstractmethod
    def serialize(self, topic: str, headers: Headers, data: Any) -> Optional[bytes]:
        """The bytes for ``data`` (None stays None for a tombstone)."""

    def close(self) -> None:  # noqa: B027 - an optional hook, deliberately not abstract
        """Called when the client closes."""


class Deserializer(ABC):
    @abstractmethod
    def deserialize(self, topic: str, headers: Headers, data: Optional[bytes]) -> Any:
        """The object for ``data``."""

    def close(self) -> None:  # noqa: B027 - an optional hook, deliberately not abstract
        """Called when the client closes."""


class DefaultSerializer(Serializer, Deserializer):
    """str <-> bytes in ``encoding``; bytes-like and None pass through."""

    def __init__(self, encoding: str = "utf-8") -> None:
        self.encoding = encoding

    def serialize(self, topic: str, headers: Headers, data: Any) -> Any:
        if data is None or isinstance(data, (bytes, bytearray, memoryview)):
            return data
        return data.encode(self.encoding)

    def deserialize(self, topic: str, headers: Headers, data: Optional[bytes]) -> Any:
        return None if data is None else data.decode(self.encoding)


class JsonSerializer(DefaultSerializer):
    """JSON documents, encoded in ``encoding``; None stays None."""

    def serialize(self, topic: str, headers: Headers, data: Any) -> Optional[bytes]:
        return None if data is None else super().serialize(topic, headers, json.dumps(data))

    def deserialize(self, topic: str, headers: Headers, data: Optional[bytes]) -> Any:
        return None if data is None else json.loads(super().deserialize(topic, headers, data))


def deserializer_fn(obj: Any):
    """A function ``(topic, headers, data) -> object``, or None for none."""
    if obj is None:
        return None
    if callable(getattr(obj, "deserialize", None)):
        return obj.deserialize
    if callable(obj):
        return lambda _topic, _headers, data: obj(data)
    raise ValueError(f"invalid deserializer {obj!r}: expected a callable or a Deserializer")
