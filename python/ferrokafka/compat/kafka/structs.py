"""kafka-python's plain data types (``kafka.structs``): named tuples.

kafka-python's ``TopicPartition`` is a named tuple, and code relies on that
(``isinstance(tp, TopicPartition)`` checks, tuple unpacking, sorting, use as a
dict key next to plain tuples), so the facade keeps the named tuple and
converts to the native ``ferrokafka.TopicPartition`` at the native API's
boundary (:func:`to_native`, :func:`from_native`).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from ... import _core

__all__ = [
    "TopicPartition", "TopicPartitionReplica", "OffsetAndMetadata", "OffsetAndTimestamp",
    "BrokerMetadata", "PartitionMetadata", "MemberState", "ConsumerGroupMetadata",
]

TopicPartition = namedtuple("TopicPartition", ["topic", "partition"])

TopicPartitionReplica = namedtuple("TopicPartitionReplica", ["topic", "partition", "broker_id"])

# kafka-python 3: metadata defaults to '' and leader_epoch to -1 (unknown).
OffsetAndMetadata = namedtuple("OffsetAndMetadata", ["offset", "metadata", "leader_epoch"],
                               defaults=[None, "", -1])

OffsetAndTimestamp = namedtuple("OffsetAndTimestamp", ["offset", "timestamp", "leader_epoch"],
                                defaults=[None])

# kafka-python 2.x names, kept for programs written against 2.x.
BrokerMetadata = namedtuple("BrokerMetadata", ["nodeId", "host", "port", "rack"])

PartitionMetadata = namedtuple("PartitionMetadata",
                               ["topic", "partition", "leader", "leader_epoch", "replicas", "isr",
                                "offline_replicas", "error"])


class MemberState:
    UNJOINED = "<unjoined>"
    REBALANCING = "<rebalancing>"
    STABLE = "<stable>"


ConsumerGroupMetadata = namedtuple("ConsumerGroupMetadata",
                                   ["group_id", "generation_id", "member_id", "group_instance_id", "state"],
                                   defaults=[None, -1, "", None, MemberState.UNJOINED])


def to_native(tp: Any) -> _core.TopicPartition:
    """A native TopicPartition from the facade's (or any (topic, partition) pair)."""
    if isinstance(tp, _core.TopicPartition):
        return tp
    topic, partition = tp
    return _core.TopicPartition(topic, partition)


def from_native(tp: Any) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)


def check_tp(tp: Any, what: str = "partition") -> TopicPartition:
    """kafka-python's methods refuse anything but its TopicPartition (TypeError)."""
    if not isinstance(tp, TopicPartition):
        raise TypeError(f"{what} must be a TopicPartition namedtuple, not {type(tp).__name__}")
    return tp
