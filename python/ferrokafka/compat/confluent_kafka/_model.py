"""confluent-kafka's small model types (``Node``, ``TopicCollection``, the
group/isolation enums...): plain values, usable wherever a program builds or
compares them. The admin calls that take them are listed in
docs/compat-confluent.md with what the native Admin offers."""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import Any, List, Optional


class Node:
    """A broker: ``id``, ``host``, ``port``, ``rack``."""

    def __init__(self, id: int, host: str, port: int, rack: Optional[str] = None) -> None:
        self.id = id
        self.id_string = str(id)
        self.host = host
        self.port = port
        self.rack = rack

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.host}:{self.port}, rack={self.rack})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Node) and (self.id, self.host, self.port, self.rack) == \
            (other.id, other.host, other.port, other.rack)

    def __hash__(self) -> int:
        return hash((self.id, self.host, self.port))


class ConsumerGroupTopicPartitions:
    def __init__(self, group_id: str, topic_partitions: Optional[List[Any]] = None) -> None:
        self.group_id = group_id
        self.topic_partitions = topic_partitions


class ConsumerGroupState(Enum):
    UNKNOWN = 0
    PREPARING_REBALANCING = 1
    COMPLETING_REBALANCING = 2
    STABLE = 3
    DEAD = 4
    EMPTY = 5

    def __lt__(self, other: "ConsumerGroupState") -> bool:
        return self.value < other.value


class ConsumerGroupType(Enum):
    UNKNOWN = 0
    CONSUMER = 1
    CLASSIC = 2

    def __lt__(self, other: "ConsumerGroupType") -> bool:
        return self.value < other.value


class TopicCollection:
    def __init__(self, topic_names: List[str]) -> None:
        self.topic_names = list(topic_names)


class TopicPartitionInfo:
    def __init__(self, id: int, leader: Optional[Node], replicas: List[Node], isr: List[Node]) -> None:
        self.id = id
        self.leader = leader
        self.replicas = replicas
        self.isr = isr


class IsolationLevel(Enum):
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    def __lt__(self, other: "IsolationLevel") -> bool:
        return self.value < other.value


class ElectionType(Enum):
    PREFERRED = 0
    UNCLEAN = 1

    def __lt__(self, other: "ElectionType") -> bool:
        return self.value < other.value


class AcknowledgeType(IntEnum):
    """KIP-932 share-group acknowledgement types."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
