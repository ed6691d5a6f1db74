"""ferrokafka: a Kafka client for Python with a Rust core."""

from __future__ import annotations

from . import _core, errors
from .errors import (
    AuthenticationError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnsupportedVersionError,
)

__version__ = _core.__version__

__all__ = [
    "errors",
    "KafkaError",
    "KafkaTimeoutError",
    "UnsupportedVersionError",
    "AuthenticationError",
    "MessageSizeTooLargeError",
]
