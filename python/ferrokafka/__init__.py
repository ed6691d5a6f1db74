"""ferrokafka: a Kafka client for Python with a Rust core."""

from __future__ import annotations

from . import _core, errors
from ._core import DeliveryFuture, RecordMetadata
from .errors import (
    AuthenticationError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnsupportedVersionError,
)

__version__ = _core.__version__

__all__ = [
    "DeliveryFuture",
    "RecordMetadata",
    "errors",
    "KafkaError",
    "KafkaTimeoutError",
    "UnsupportedVersionError",
    "AuthenticationError",
    "MessageSizeTooLargeError",
]
