"""ferrokafka: a Kafka client for Python with a Rust core."""

from __future__ import annotations

from . import _core, errors, protocol
from .errors import (
    AuthenticationError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnsupportedVersionError,
)

from .network import ClientResponse, NetworkClient

__version__ = _core.__version__

__all__ = [
    "errors",
    "protocol",
    "NetworkClient",
    "ClientResponse",
    "KafkaError",
    "KafkaTimeoutError",
    "UnsupportedVersionError",
    "AuthenticationError",
    "MessageSizeTooLargeError",
]
