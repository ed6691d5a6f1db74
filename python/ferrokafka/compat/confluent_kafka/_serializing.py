"""``SerializingProducer`` / ``DeserializingConsumer``: the clients with
``key.serializer``/``value.serializer`` (``key.deserializer``/...) in the config."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from ._consumer import Consumer
from ._producer import Producer
from ._types import Message
from .error import (
    ConsumeError,
    KeyDeserializationError,
    KeySerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from .serialization import MessageField, SerializationContext


def _take(conf: dict, key: str) -> Optional[Callable]:
    fn = conf.pop(key, None)
    if fn is not None and not callable(fn):
        raise ValueError(f"invalid value for configuration property {key!r}: expected a callable")
    return fn


class SerializingProducer(Producer):
    """A Producer whose ``produce`` runs ``key.serializer`` / ``value.serializer``."""

    def __init__(self, conf: dict) -> None:
        conf = dict(conf)
        self._key_serializer = _take(conf, "key.serializer")
        self._value_serializer = _take(conf, "value.serializer")
        super().__init__(conf)

    def produce(self, topic: str, key: Any = None, value: Any = None, partition: int = -1,  # type: ignore[override]
                on_delivery: Optional[Callable] = None, timestamp: int = 0, headers: Any = None) -> None:
        ctx = SerializationContext(topic, MessageField.KEY, headers)
        if self._key_serializer is not None:
            try:
                key = self._key_serializer(key, ctx)
            except Exception as se:
                raise KeySerializationError(se) from se
        ctx.field = MessageField.VALUE
        if self._value_serializer is not None:
            try:
                value = self._value_serializer(value, ctx)
            except Exception as se:
                raise ValueSerializationError(se) from se
        super().produce(topic, value, key, partition, on_delivery=on_delivery, timestamp=timestamp,
                        headers=headers)


class DeserializingConsumer(Consumer):
    """A Consumer whose ``poll`` runs ``key.deserializer`` / ``value.deserializer``."""

    def __init__(self, conf: dict) -> None:
        conf = dict(conf)
        self._key_deserializer = _take(conf, "key.deserializer")
        self._value_deserializer = _take(conf, "value.deserializer")
        super().__init__(conf)

    def poll(self, timeout: Optional[float] = -1) -> Optional[Message]:
        msg = super().poll(timeout)
        if msg is None:
            return None
        if msg.error() is not None:
            raise ConsumeError(msg.error(), kafka_message=msg)
        ctx = SerializationContext(msg.topic(), MessageField.VALUE, msg.headers())
        value = msg.value()
        if self._value_deserializer is not None:
            try:
                value = self._value_deserializer(value, ctx)
            except Exception as se:
                raise ValueDeserializationError(exception=se, kafka_message=msg) from se
        key = msg.key()
        ctx.field = MessageField.KEY
        if self._key_deserializer is not None:
            try:
                key = self._key_deserializer(key, ctx)
            except Exception as se:
                raise KeyDeserializationError(exception=se, kafka_message=msg) from se
        msg.set_key(key)
        msg.set_value(value)
        return msg

    def consume(self, num_messages: int = 1, timeout: Optional[float] = -1) -> List[Message]:
        raise NotImplementedError("DeserializingConsumer.consume(): batch consumption does not "
                                  "support deserialization (as in confluent-kafka); use poll()")
