"""``confluent_kafka.cimpl``: confluent-kafka's C extension module; here the
same classes as the package (tests and some programs import from it)."""

from __future__ import annotations

from ._consumer import Consumer
from ._error import KafkaError, KafkaException
from ._producer import Producer
from ._types import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    TopicPartition,
)

__all__ = ["Consumer", "KafkaError", "KafkaException", "Producer", "Message", "TopicPartition",
           "OFFSET_BEGINNING", "OFFSET_END", "OFFSET_INVALID", "OFFSET_STORED",
           "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE"]
