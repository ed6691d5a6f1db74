"""confluent-kafka's ``confluent_kafka.error``: the exception classes."""

from __future__ import annotations

from typing import Any, Optional

from ._error import KafkaError, KafkaException
from ._types import Message
from .serialization import SerializationError

__all__ = ["KafkaError", "KafkaException", "ConsumeError", "ProduceError", "SerializationError",
           "KeySerializationError", "ValueSerializationError", "KeyDeserializationError",
           "ValueDeserializationError"]


class _WithError(KafkaException):
    def __init__(self, kafka_error: Any = None, exception: Optional[BaseException] = None,
                 kafka_message: Optional[Message] = None) -> None:
        super().__init__(kafka_error)
        self.exception = exception
        self.kafka_message = kafka_message

    @property
    def code(self) -> int:
        return self.args[0].code()

    @property
    def name(self) -> str:
        return self.args[0].name()


class ConsumeError(_WithError):
    """Consuming a message failed; ``kafka_message`` is the message."""


class ProduceError(_WithError):
    """Producing a message failed."""


def _error(code: int, exception: Optional[BaseException]) -> KafkaError:
    return KafkaError(code, str(exception) if exception is not None else None)


class KeyDeserializationError(ConsumeError, SerializationError):
    def __init__(self, exception: Optional[BaseException] = None, kafka_message: Optional[Message] = None) -> None:
        super().__init__(_error(KafkaError._KEY_DESERIALIZATION, exception),  # type: ignore[attr-defined]
                         exception=exception, kafka_message=kafka_message)


class ValueDeserializationError(ConsumeError, SerializationError):
    def __init__(self, exception: Optional[BaseException] = None, kafka_message: Optional[Message] = None) -> None:
        super().__init__(_error(KafkaError._VALUE_DESERIALIZATION, exception),  # type: ignore[attr-defined]
                         exception=exception, kafka_message=kafka_message)


class KeySerializationError(ProduceError, SerializationError):
    def __init__(self, exception: Optional[BaseException] = None) -> None:
        super().__init__(_error(KafkaError._KEY_SERIALIZATION, exception),  # type: ignore[attr-defined]
                         exception=exception)


class ValueSerializationError(ProduceError, SerializationError):
    def __init__(self, exception: Optional[BaseException] = None) -> None:
        super().__init__(_error(KafkaError._VALUE_SERIALIZATION, exception),  # type: ignore[attr-defined]
                         exception=exception)
