"""ferrokafka: a Kafka client for Python with a Rust core."""

from __future__ import annotations

from . import _core, errors, metadata, protocol, types
from ._core import DeliveryFuture, RecordMetadata, coordinator_partition_for
from .admin import Admin, NewTopic
from .consumer import Consumer, ConsumerGroupMetadata, Coordinator, Message, OffsetAndMetadata
from .errors import (
    AuthenticationError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    UnsupportedVersionError,
)
from .metadata import Metadata, ProducerMetadata
from .network import ClientResponse, NetworkClient
from .producer import Producer
from .share import ShareConsumer
from .types import Cluster, MetadataResponse, Node, PartitionMetadata, TopicMetadata, TopicPartition

__version__ = _core.__version__

__all__ = [
    "coordinator_partition_for",
    "DeliveryFuture",
    "RecordMetadata",
    "errors",
    "protocol",
    "NetworkClient",
    "Producer",
    "Consumer",
    "ShareConsumer",
    "Coordinator",
    "Message",
    "OffsetAndMetadata",
    "ConsumerGroupMetadata",
    "Admin",
    "NewTopic",
    "ClientResponse",
    "KafkaError",
    "KafkaTimeoutError",
    "UnsupportedVersionError",
    "AuthenticationError",
    "MessageSizeTooLargeError",
    # metadata and data types
    "metadata",
    "types",
    "TopicPartition",
    "Node",
    "PartitionMetadata",
    "TopicMetadata",
    "MetadataResponse",
    "Cluster",
    "Metadata",
    "ProducerMetadata",
]


def __getattr__(name: str):
    # `fk.testing` without importing the test brokers' machinery on
    # every `import ferrokafka`.
    if name in ("testing", "spark"):
        import importlib

        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'ferrokafka' has no attribute {name!r}")
