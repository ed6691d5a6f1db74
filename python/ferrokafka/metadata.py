"""Cluster metadata with the Java client's semantics (docs/semantics.md §3).

``Metadata`` keeps every topic; ``ProducerMetadata`` (a subclass) keeps only
the topics a producer uses, asks for new ones in partial updates and forgets
topics idle for ``metadata_idle_ms``. The state lives in Rust, where the
network client's selector reads it without the GIL; ``await_update`` releases
the GIL while it waits.

Every ``now_ms`` argument is optional (default: the wall clock in ms), so
tests can inject time.
"""

from __future__ import annotations

from ._core import Metadata, ProducerMetadata
from .types import Cluster, MetadataResponse, Node, PartitionMetadata, TopicMetadata, TopicPartition

__all__ = [
    "Metadata",
    "ProducerMetadata",
    "Cluster",
    "MetadataResponse",
    "TopicMetadata",
    "PartitionMetadata",
    "Node",
    "TopicPartition",
]
