"""confluent-kafka's value types: ``TopicPartition``, ``Message``, the metadata
classes ``list_topics`` returns, and the offset / timestamp constants."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ... import _core
from ._error import KafkaError

OFFSET_BEGINNING = -2
OFFSET_END = -1
OFFSET_STORED = -1000
OFFSET_INVALID = -1001

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2

# ferrokafka's record timestamp type (-1 none, 0 CreateTime, 1 LogAppendTime)
# -> confluent-kafka's constants.
_TS_TYPE = {-1: TIMESTAMP_NOT_AVAILABLE, 0: TIMESTAMP_CREATE_TIME, 1: TIMESTAMP_LOG_APPEND_TIME}


class TopicPartition:
    """``TopicPartition(topic, partition=-1, offset=OFFSET_INVALID,
    metadata=None, leader_epoch=None)``; ``.error`` is set on results.
    Equality, hash and order use (topic, partition) only, as confluent-kafka."""

    __slots__ = ("topic", "partition", "offset", "metadata", "leader_epoch", "error")

    def __init__(self, topic: str, partition: int = -1, offset: int = OFFSET_INVALID,
                 metadata: Optional[str] = None, leader_epoch: Optional[int] = None) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"TopicPartition topic must be a str, not {type(topic).__name__}")
        self.topic = topic
        self.partition = int(partition)
        self.offset = int(offset)
        self.metadata = metadata
        self.leader_epoch = None if leader_epoch is None or leader_epoch < 0 else int(leader_epoch)
        self.error: Optional[KafkaError] = None

    def _key(self) -> Tuple[str, int]:
        return (self.topic, self.partition)

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: "TopicPartition") -> bool:
        return self._key() < other._key()

    def __le__(self, other: "TopicPartition") -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: "TopicPartition") -> bool:
        return self._key() > other._key()

    def __ge__(self, other: "TopicPartition") -> bool:
        return self._key() >= other._key()

    def __repr__(self) -> str:
        return (f"TopicPartition{{topic={self.topic},partition={self.partition},offset={self.offset},"
                f"leader_epoch={self.leader_epoch},error={self.error}}}")

    __str__ = __repr__

    def native(self) -> _core.TopicPartition:
        if self.partition < 0:
            raise ValueError(f"{self!r}: a partition number >= 0 is needed here")
        return _core.TopicPartition(self.topic, self.partition)


def from_native_tp(tp: Any, offset: int = OFFSET_INVALID) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition, offset)


def as_bytes(v: Any, what: str) -> Optional[bytes]:
    """confluent-kafka takes str (UTF-8 encoded) or any buffer for keys,
    values and header values."""
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    try:
        return bytes(memoryview(v))
    except TypeError:
        raise TypeError(f"{what} must be str, bytes or a buffer, not {type(v).__name__}") from None


def headers_list(headers: Any) -> Optional[List[Tuple[str, Optional[bytes]]]]:
    """A dict or a list of (str, value) pairs -> list of (str, bytes|None)."""
    if headers is None:
        return None
    items = headers.items() if isinstance(headers, dict) else headers
    out = []
    for pair in items:
        try:
            k, v = pair
        except (TypeError, ValueError):
            raise TypeError(f"headers must be a dict or a list of (key, value) pairs, got {pair!r}") from None
        if not isinstance(k, str):
            raise TypeError(f"header key must be a str, not {type(k).__name__}")
        out.append((k, as_bytes(v, f"header {k!r} value")))
    return out


def _nonneg(v: Any) -> Any:
    # The C Message keeps "unset" as a negative number and answers None.
    return None if v is None or v < 0 else v


class Message:
    """A consumed or delivered message, or an event (``error()`` not None).

    Built by the clients; the constructor (all arguments optional, in
    confluent-kafka's order) is for tests, as in confluent-kafka. Negative
    partition, offset, latency, leader epoch and a delivery count below 1
    read back as None."""

    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value", "_headers", "_error",
                 "_timestamp", "_latency", "_leader_epoch", "_delivery_count")

    def __init__(self, topic: Any = None, partition: Optional[int] = None,
                 offset: Optional[int] = None, key: Any = None, value: Any = None,
                 headers: Any = None, error: Any = None,
                 timestamp: Optional[Tuple[int, int]] = None, latency: Optional[float] = None,
                 leader_epoch: Optional[int] = None, delivery_count: Optional[int] = None) -> None:
        if delivery_count is not None and not -32768 <= delivery_count <= 32767:
            raise OverflowError("delivery_count must fit in a signed 16-bit integer")
        self._topic = topic
        self._partition = _nonneg(partition)
        self._offset = _nonneg(offset)
        self._key = key
        self._value = value
        self._headers = headers
        self._error = error
        self._timestamp = timestamp if timestamp is not None else (TIMESTAMP_NOT_AVAILABLE, 0)
        self._latency = _nonneg(latency)
        self._leader_epoch = _nonneg(leader_epoch)
        self._delivery_count = None if delivery_count is None or delivery_count <= 0 else delivery_count

    def topic(self) -> Any:
        return self._topic

    def partition(self) -> Optional[int]:
        return self._partition

    def offset(self) -> Optional[int]:
        return self._offset

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value

    def headers(self) -> Any:
        return self._headers

    def error(self) -> Any:
        return self._error

    def timestamp(self) -> Tuple[int, int]:
        """(timestamp type, milliseconds since the epoch)."""
        return self._timestamp

    def latency(self) -> Optional[float]:
        return self._latency

    def leader_epoch(self) -> Optional[int]:
        return self._leader_epoch

    def delivery_count(self) -> Optional[int]:
        return self._delivery_count

    def set_key(self, key: Any) -> None:
        self._key = key

    def set_value(self, value: Any) -> None:
        self._value = value

    def set_headers(self, headers: Any) -> None:
        self._headers = headers

    def set_topic(self, topic: Any) -> None:
        self._topic = topic

    def set_error(self, error: Any) -> None:
        self._error = error

    def __len__(self) -> int:
        v = self._value
        if v is None:
            return 0
        if not isinstance(v, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"the value of a Message must be bytes or str for len(), not {type(v).__name__}")
        return len(v)

    def _args(self) -> tuple:
        def neg(v: Any, unset: Any) -> Any:
            return unset if v is None else v
        return (self._topic, neg(self._partition, -1), neg(self._offset, OFFSET_INVALID), self._key,
                self._value, self._headers, self._error, self._timestamp, neg(self._latency, -1.0),
                neg(self._leader_epoch, -1), neg(self._delivery_count, -1))

    def __reduce__(self) -> tuple:
        return (Message, self._args())

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return self._args() == other._args()

    __hash__ = None  # type: ignore[assignment]  # mutable (set_*), compared by content

    def __repr__(self) -> str:
        return (f"Message(topic={self._topic!r}, partition={self._partition}, offset={self._offset}, "
                f"error={self._error})")


def from_native_message(m: Any) -> Message:
    ts_type = _TS_TYPE.get(m.timestamp_type, TIMESTAMP_NOT_AVAILABLE)
    epoch = m.leader_epoch
    return Message(m.topic, m.partition, m.offset, m.key, m.value, m.headers or None, None,
                   (ts_type, m.timestamp_ms if ts_type != TIMESTAMP_NOT_AVAILABLE else -1),
                   None, epoch if epoch is not None and epoch >= 0 else None)


# --- metadata (``list_topics``) ---------------------------------------------------------

class BrokerMetadata:
    def __init__(self, id: int, host: str, port: int) -> None:
        self.id, self.host, self.port = id, host, port

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class PartitionMetadata:
    def __init__(self) -> None:
        self.id = -1
        self.leader = -1
        self.replicas: List[int] = []
        self.isrs: List[int] = []
        self.error: Optional[KafkaError] = None

    def __repr__(self) -> str:
        return f"PartitionMetadata({self.id})"


class TopicMetadata:
    def __init__(self) -> None:
        self.topic: Optional[str] = None
        self.partitions: Dict[int, PartitionMetadata] = {}
        self.error: Optional[KafkaError] = None

    def __repr__(self) -> str:
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"


class ClusterMetadata:
    def __init__(self) -> None:
        self.cluster_id: Optional[str] = None
        self.controller_id = -1
        self.brokers: Dict[int, BrokerMetadata] = {}
        self.topics: Dict[str, TopicMetadata] = {}
        self.orig_broker_id = -1
        self.orig_broker_name: Optional[str] = None

    def __repr__(self) -> str:
        return f"ClusterMetadata({self.cluster_id})"


def cluster_metadata(cluster: Any, topics: Any, wanted: Optional[str]) -> ClusterMetadata:
    """Shape a native ``Cluster`` snapshot (and the topic list just asked
    for) as confluent-kafka's ``ClusterMetadata``. A topic asked for by name
    that the cluster does not have gets ``UNKNOWN_TOPIC_OR_PART``."""
    md = ClusterMetadata()
    md.cluster_id = cluster.cluster_id
    ctrl = cluster.controller
    md.controller_id = ctrl.id if ctrl is not None else -1
    for n in cluster.nodes:
        md.brokers[n.id] = BrokerMetadata(n.id, n.host, n.port)
    names = [wanted] if wanted is not None else sorted(topics)
    for name in names:
        tm = TopicMetadata()
        tm.topic = name
        parts = cluster.partitions_for_topic(name)
        if not parts and name not in topics:
            tm.error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)  # type: ignore[attr-defined]
        for p in parts:
            pm = PartitionMetadata()
            pm.id, pm.leader = p.partition, p.leader_id
            pm.replicas, pm.isrs = list(p.replicas), list(p.isr)
            pm.error = KafkaError(p.error_code) if p.error_code else None
            tm.partitions[p.partition] = pm
        md.topics[name] = tm
    return md
