"""Value types shared by the client: topic-partitions, brokers, metadata.

All are immutable, hashable and repr-able classes implemented in Rust
(``ferrokafka._core``); ``TopicPartition`` and ``Node`` are also ordered and
picklable.
"""

from __future__ import annotations

from ._core import Cluster, MetadataResponse, Node, PartitionMetadata, TopicMetadata, TopicPartition

__all__ = [
    "TopicPartition",
    "Node",
    "PartitionMetadata",
    "TopicMetadata",
    "MetadataResponse",
    "Cluster",
]
