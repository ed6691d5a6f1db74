"""confluent-kafka's ``confluent_kafka.admin`` over ferrokafka's native Admin.

Each request returns, as in confluent-kafka, a dict of
``concurrent.futures.Future`` (one per topic); the native call runs on one
worker thread per client and the futures are settled from it. A per-topic
failure is a ``KafkaException`` whose ``args[0]`` is the ``KafkaError``.
Operations the native Admin does not have raise ``NotImplementedError``
naming the method.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Dict, List, Optional

from ....admin import Admin as _NativeAdmin
from ....admin import NewTopic as _NativeNewTopic
from .._callbacks import native_client, raise_pending
from .._config import translate
from .._error import KafkaError, KafkaException, from_native, translated
from .._metadata import MetadataSource, timeout_ms
from .._types import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata

__all__ = ["AdminClient", "NewTopic", "NewPartitions", "ConfigResource", "ClusterMetadata",
           "TopicMetadata", "PartitionMetadata", "BrokerMetadata", "KafkaError", "KafkaException"]


class NewTopic:
    """``NewTopic(topic, num_partitions=-1, replication_factor=-1,
    replica_assignment=None, config=None)``; -1 takes the broker's default."""

    def __init__(self, topic: str, num_partitions: int = -1, replication_factor: int = -1,
                 replica_assignment: Optional[list] = None, config: Optional[Dict[str, str]] = None) -> None:
        if not isinstance(topic, str):
            raise TypeError("NewTopic topic must be a str")
        if replica_assignment is not None:
            raise NotImplementedError("NewTopic(replica_assignment=...): the native Admin creates topics "
                                      "with a partition count and replication factor only")
        self.topic = topic
        self.num_partitions = int(num_partitions)
        self.replication_factor = int(replication_factor)
        self.replica_assignment = None
        self.config = dict(config or {})

    def __repr__(self) -> str:
        return f"NewTopic(topic={self.topic},num_partitions={self.num_partitions})"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, NewTopic) and (self.topic, self.num_partitions) == (other.topic, other.num_partitions)

    def __hash__(self) -> int:
        return hash((self.topic, self.num_partitions))


class NewPartitions:
    """Accepted as a value; ``create_partitions`` is not available natively."""

    def __init__(self, topic: str, new_total_count: int, replica_assignment: Optional[list] = None) -> None:
        self.topic = topic
        self.new_total_count = int(new_total_count)
        self.replica_assignment = replica_assignment


class ConfigResource:
    """Accepted as a value; ``describe_configs``/``alter_configs`` are not available natively."""

    def __init__(self, restype: Any, name: str, set_config: Optional[dict] = None,
                 described_configs: Any = None, error: Any = None) -> None:
        self.restype = restype
        self.name = name
        self.set_config_dict = dict(set_config or {})
        self.configs = described_configs
        self.error = error


def _missing(method: str, why: str) -> NotImplementedError:
    return NotImplementedError(f"AdminClient.{method}(): {why}")


class AdminClient:
    """``AdminClient(conf)`` with librdkafka property names."""

    def __init__(self, conf: Optional[dict] = None, **kwargs: Any) -> None:
        if conf is None and not kwargs:
            raise TypeError("expected configuration dict")
        conf = dict(conf or {})
        conf.update(kwargs)
        native, facade = translate(conf, "AdminClient")
        self._a, self._error_cb, self._logger = native_client(_NativeAdmin, native, facade)
        self._meta = MetadataSource(native)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ferrokafka-admin")

    def _check(self) -> None:
        if getattr(self, "_a", None) is None:
            raise RuntimeError("AdminClient has been closed")

    def _per_topic(self, names: List[str], call: Any) -> Dict[str, concurrent.futures.Future]:
        futs: Dict[str, concurrent.futures.Future] = {n: concurrent.futures.Future() for n in names}
        for f in futs.values():
            f.set_running_or_notify_cancel()

        def run() -> None:
            try:
                results = call()
            except BaseException as e:  # the whole request failed: every topic's future says so
                err = KafkaException(from_native(e))
                for f in futs.values():
                    f.set_exception(err)
                return
            for name, f in futs.items():
                exc = results.get(name)
                if exc is None:
                    f.set_result(None)
                else:
                    f.set_exception(KafkaException(from_native(exc)))

        self._pool.submit(run)
        return futs

    @staticmethod
    def _request_ms(operation_timeout: float, request_timeout: float) -> int:
        # confluent-kafka: operation_timeout (s) is how long the broker waits
        # for the operation; 0 returns at once. ferrokafka has one timeout
        # for the whole call: the larger of the two.
        return int(max(float(operation_timeout or 0), float(request_timeout or 30.0)) * 1000)

    def create_topics(self, new_topics: List[NewTopic], operation_timeout: float = 0,
                      request_timeout: float = 30.0, validate_only: bool = False) -> Dict[str, concurrent.futures.Future]:
        """{topic: Future} resolved to None, or to KafkaException (e.g. TOPIC_ALREADY_EXISTS)."""
        self._check()
        if not isinstance(new_topics, list) or not new_topics:
            raise ValueError("Expected non-empty list of NewTopic objects")
        specs = []
        for t in new_topics:
            if not isinstance(t, NewTopic):
                raise TypeError("Expected list of NewTopic objects")
            with translated():
                specs.append(_NativeNewTopic(t.topic, t.num_partitions, t.replication_factor,
                                             {str(k): str(v) for k, v in t.config.items()} or None))
        ms = self._request_ms(operation_timeout, request_timeout)
        return self._per_topic([t.topic for t in new_topics],
                               lambda: self._a.create_topics(specs, timeout_ms=ms, validate_only=bool(validate_only),
                                                             raise_on_error=False))

    def delete_topics(self, topics: List[str], operation_timeout: float = 0,
                      request_timeout: float = 30.0) -> Dict[str, concurrent.futures.Future]:
        self._check()
        if not isinstance(topics, list) or not topics:
            raise ValueError("Expected non-empty list of topic names")
        names = [str(t) for t in topics]
        ms = self._request_ms(operation_timeout, request_timeout)
        return self._per_topic(names, lambda: self._a.delete_topics(names, timeout_ms=ms, raise_on_error=False))

    def list_topics(self, topic: Optional[str] = None, timeout: Optional[float] = -1) -> ClusterMetadata:
        self._check()
        return self._meta.list_topics(topic, timeout)

    def describe_cluster(self, request_timeout: Optional[float] = None, **kwargs: Any) -> concurrent.futures.Future:
        """A Future of an object with ``cluster_id``, ``controller`` and ``nodes``."""
        if kwargs:
            raise ValueError(f"describe_cluster(): unsupported option(s) {sorted(kwargs)}")
        ms = timeout_ms(request_timeout, 30_000)

        def run() -> Any:
            with translated():
                return self._a.describe_cluster(timeout_ms=ms)
        return self._pool.submit(run)

    def poll(self, timeout: Optional[float] = -1) -> int:
        """Serve error_cb; admin results arrive on their futures."""
        self._check()
        from .... import _events
        _events.dispatch(self._a._core, self._a._error_cb)
        raise_pending(self._error_cb)
        return 0

    def create_partitions(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        raise _missing("create_partitions", "the native Admin has no CreatePartitions request yet")

    def describe_configs(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        raise _missing("describe_configs", "the native Admin has no DescribeConfigs request yet")

    def alter_configs(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        raise _missing("alter_configs", "the native Admin has no AlterConfigs request yet")

    def incremental_alter_configs(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        raise _missing("incremental_alter_configs", "the native Admin has no IncrementalAlterConfigs request yet")

    def create_acls(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        raise _missing("create_acls", "the native Admin has no ACL requests yet")

    def describe_acls(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        raise _missing("describe_acls", "the native Admin has no ACL requests yet")

    def delete_acls(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        raise _missing("delete_acls", "the native Admin has no ACL requests yet")

    def close(self) -> None:
        if getattr(self, "_a", None) is None:
            return
        self._pool.shutdown(wait=True)
        self._meta.close()
        self._a.close()
        if self._logger is not None:
            self._logger.close()

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# confluent-kafka admin names whose operations the native Admin does not have:
# importable, refused when used (docs/compat-confluent.md).
_NOT_PROVIDED = (
    "AclBinding", "AclBindingFilter", "AclOperation", "AclPermissionType", "AlterConfigOpType",
    "ConfigEntry", "ConfigSource", "ConsumerGroupDescription", "ConsumerGroupListing", "DeletedRecords",
    "DescribeClusterResult", "GroupMember", "GroupMetadata", "ListConsumerGroupsResult",
    "ListOffsetsResultInfo", "MemberAssignment", "MemberDescription", "OffsetSpec", "ResourcePatternType",
    "ResourceType", "ScramCredentialInfo", "ScramMechanism", "UserScramCredentialAlteration",
    "UserScramCredentialDeletion", "UserScramCredentialUpsertion", "UserScramCredentialsDescription",
    "TopicDescription", "_ElectionType",
)


def __getattr__(name: str) -> Any:
    if name not in _NOT_PROVIDED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"confluent_kafka.admin.{name} is not provided by ferrokafka's facade: "
                                  "the native Admin has no operation that takes or returns it")

    return type(name, (), {"__init__": refuse, "__module__": __name__})

