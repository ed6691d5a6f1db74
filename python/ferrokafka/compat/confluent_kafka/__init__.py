"""confluent-kafka's API over ferrokafka: change the import line only.

    import ferrokafka.compat.confluent_kafka as confluent_kafka

What is supported, what differs and what is refused: docs/compat-confluent.md.
"""

from __future__ import annotations

from ... import _core
from . import admin, error, serialization
from ._consumer import Consumer
from ._error import KafkaError, KafkaException
from ._model import (
    AcknowledgeType,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    ElectionType,
    IsolationLevel,
    Node,
    TopicCollection,
    TopicPartitionInfo,
)
from ._producer import Producer
from ._serializing import DeserializingConsumer, SerializingProducer
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

__all__ = [
    "Producer", "Consumer", "Message", "KafkaError", "KafkaException", "TopicPartition",
    "SerializingProducer", "DeserializingConsumer", "admin", "error", "serialization",
    "OFFSET_BEGINNING", "OFFSET_END", "OFFSET_INVALID", "OFFSET_STORED",
    "TIMESTAMP_NOT_AVAILABLE", "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME",
    "version", "libversion", "Node", "ConsumerGroupTopicPartitions", "ConsumerGroupState",
    "ConsumerGroupType", "TopicCollection", "TopicPartitionInfo", "IsolationLevel", "ElectionType",
    "AcknowledgeType",
]

# confluent-kafka names the facade does not provide: importable (a program
# that imports but never uses them still runs), refused when used.
_NOT_PROVIDED = {
    "ShareConsumer": "KIP-932 share groups: use ferrokafka.ShareConsumer",
    "DeserializingShareConsumer": "KIP-932 share groups: use ferrokafka.ShareConsumer",
    "Messages": "the share consumer's batch type is not provided",
    "ThrottleEvent": "throttle events are not reported (throttle_cb is refused)",
    "IllegalStateException": "raised only by the share consumer, which is not provided",
    "ConcurrentModificationException": "raised only by the share consumer, which is not provided",
    "murmur2": "the partitioner functions are not provided; the partitioner property takes their names",
    "consistent": "the partitioner functions are not provided; the partitioner property takes their names",
    "fnv1a": "the partitioner functions are not provided; the partitioner property takes their names",
}


def __getattr__(name: str):
    why = _NOT_PROVIDED.get(name)
    if why is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def refuse(*args, **kwargs):
        raise NotImplementedError(f"confluent_kafka.{name} is not provided by ferrokafka's facade: {why}")

    return type(name, (Exception,) if name.endswith("Exception") else (), {
        "__init__": refuse, "__doc__": f"Not provided: {why}.", "__module__": __name__})

__version__ = _core.__version__


def _version_int(v: str) -> int:
    nums = [int("".join(c for c in part if c.isdigit()) or 0) for part in v.split(".")[:3]]
    nums += [0] * (3 - len(nums))
    return (nums[0] << 24) | (nums[1] << 16) | (nums[2] << 8) | 0xFF


def version() -> str:
    """The facade's version, as confluent-kafka 2.16 gives its own (a str):
    ferrokafka's."""
    return "ferrokafka-" + __version__


def libversion():
    """(version string, version int) of the client library underneath: ferrokafka's
    Rust core, not librdkafka."""
    return ("ferrokafka-core-" + _core.__version__, _version_int(_core.__version__))
