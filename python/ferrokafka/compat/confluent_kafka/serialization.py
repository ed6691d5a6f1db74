"""confluent-kafka's ``confluent_kafka.serialization``: the built-in
serializers, ``SerializationContext`` and ``MessageField``."""

from __future__ import annotations

import struct
from typing import Any, List, Optional, Tuple

from ._error import KafkaException

__all__ = ["Serializer", "Deserializer", "SerializationContext", "MessageField", "SerializationError",
           "StringSerializer", "StringDeserializer", "IntegerSerializer", "IntegerDeserializer",
           "DoubleSerializer", "DoubleDeserializer"]


class SerializationError(KafkaException):
    """A serializer or deserializer failed."""


class MessageField:
    NONE = "none"
    KEY = "key"
    VALUE = "value"


class SerializationContext:
    """What is being (de)serialized: ``topic``, ``field`` (MessageField), ``headers``."""

    __slots__ = ("topic", "field", "headers")

    def __init__(self, topic: str, field: str, headers: Optional[List[Tuple[str, Any]]] = None) -> None:
        self.topic = topic
        self.field = field
        self.headers = headers


class Serializer:
    """Base class: ``serializer(obj, ctx=None) -> bytes | None``."""

    __slots__: Tuple[str, ...] = ()

    def __call__(self, obj: Any, ctx: Optional[SerializationContext] = None) -> Optional[bytes]:
        raise NotImplementedError


class Deserializer:
    """Base class: ``deserializer(value, ctx=None) -> object``."""

    __slots__: Tuple[str, ...] = ()

    def __call__(self, value: Optional[bytes], ctx: Optional[SerializationContext] = None) -> Any:
        raise NotImplementedError


class _Struct(Serializer):
    __slots__ = ()
    _fmt = ""

    def __call__(self, obj: Any, ctx: Optional[SerializationContext] = None) -> Optional[bytes]:
        if obj is None:
            return None
        try:
            return struct.pack(self._fmt, obj)
        except struct.error as e:
            raise SerializationError(str(e)) from None


class _Unstruct(Deserializer):
    __slots__ = ()
    _fmt = ""

    def __call__(self, value: Optional[bytes], ctx: Optional[SerializationContext] = None) -> Any:
        if value is None:
            return None
        try:
            return struct.unpack(self._fmt, value)[0]
        except struct.error as e:
            raise SerializationError(str(e)) from None


class IntegerSerializer(_Struct):
    """A 32-bit big-endian signed int (Java's IntegerSerializer)."""
    __slots__ = ()
    _fmt = ">i"


class IntegerDeserializer(_Unstruct):
    __slots__ = ()
    _fmt = ">i"


class DoubleSerializer(_Struct):
    """An IEEE 754 binary64, big-endian (Java's DoubleSerializer)."""
    __slots__ = ()
    _fmt = ">d"


class DoubleDeserializer(_Unstruct):
    __slots__ = ()
    _fmt = ">d"


class StringSerializer(Serializer):
    """``str`` -> bytes in ``codec`` (default UTF-8)."""

    __slots__ = ("codec",)

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, obj: Any, ctx: Optional[SerializationContext] = None) -> Optional[bytes]:
        if obj is None:
            return None
        try:
            return obj.encode(self.codec)
        except (AttributeError, UnicodeError, LookupError) as e:
            raise SerializationError(str(e)) from None


class StringDeserializer(Deserializer):
    __slots__ = ("codec",)

    def __init__(self, codec: str = "utf_8") -> None:
        self.codec = codec

    def __call__(self, value: Optional[bytes], ctx: Optional[SerializationContext] = None) -> Any:
        if value is None:
            return None
        try:
            return value.decode(self.codec)
        except (UnicodeError, LookupError) as e:
            raise SerializationError(str(e)) from None
