"""kafka-python's public API over ferrokafka (docs/compat-kafka-python.md).

``from ferrokafka.compat.kafka import KafkaProducer, KafkaConsumer,
KafkaAdminClient`` in place of ``from kafka import ...``; the rest of a
kafka-python 3.0 program runs unchanged. Options ferrokafka cannot honour
are refused (``KafkaConfigurationError``, a ``ValueError``), never ignored.
"""

from __future__ import annotations

from . import errors, structs
from .admin import KafkaAdminClient, NewTopic
from .consumer import ConsumerRebalanceListener, ConsumerRecord, KafkaConsumer
from .future import FutureRecordMetadata, RecordMetadata
from .producer import KafkaProducer
from .serializer import DefaultSerializer, Deserializer, JsonSerializer, Serializer
from .structs import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
    TopicPartitionReplica,
)

__version__ = "3.0.12"  # the kafka-python API level this facade follows

__all__ = [
    "KafkaAdminClient", "KafkaConsumer", "KafkaProducer", "ConsumerRebalanceListener",
    "ConsumerRecord", "FutureRecordMetadata", "RecordMetadata", "NewTopic",
    "Serializer", "Deserializer", "DefaultSerializer", "JsonSerializer", "ConsumerGroupMetadata", "OffsetAndMetadata",
    "OffsetAndTimestamp", "TopicPartition", "TopicPartitionReplica", "errors", "structs",
]
