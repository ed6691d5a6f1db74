"""``KafkaAdminClient`` with kafka-python's signature over ``ferrokafka.Admin``.

The calls the native Admin has (topics, cluster, consumer groups and their
offsets) come back in kafka-python 3's shapes (dicts of the response
fields); kafka-python 2.x's ``list_consumer_groups`` /
``list_consumer_group_offsets`` are kept too. Every other method of
kafka-python's admin client raises ``NotImplementedError`` naming it.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

from ... import errors as _native_errors
from ...admin import Admin as _NativeAdmin
from ...admin import NewTopic as _NativeNewTopic
from . import _config
from ._native import make_native
from .errors import (
    KafkaTimeoutError,
    NoBrokersAvailable,
    translate,
    translated,
)
from .structs import OffsetAndMetadata, TopicPartition, from_native

__all__ = ["KafkaAdminClient", "NewTopic"]


class NewTopic:
    """A topic to create: ``NewTopic(name, num_partitions=-1,
    replication_factor=-1, replica_assignments=None, topic_configs=None)``
    (-1: the broker's default)."""

    def __init__(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                 replica_assignments: Optional[Dict[int, List[int]]] = None,
                 topic_configs: Optional[Dict[str, str]] = None) -> None:
        self.name = name
        self.num_partitions = num_partitions
        self.replication_factor = replication_factor
        self.replica_assignments = replica_assignments or {}
        self.topic_configs = topic_configs or {}

    def __repr__(self) -> str:
        return (f"NewTopic(name={self.name!r}, num_partitions={self.num_partitions}, "
                f"replication_factor={self.replication_factor})")


def _native_topics(new_topics: Any) -> List[_NativeNewTopic]:
    """kafka-python 3 takes names, {name: {num_partitions, replication_factor,
    assignments, configs}}, or (deprecated) NewTopic objects."""
    specs = []
    if isinstance(new_topics, dict):
        for name, d in new_topics.items():
            specs.append((name, d.get("num_partitions", -1), d.get("replication_factor", -1),
                          d.get("assignments"), d.get("configs")))
    else:
        for t in new_topics:
            if isinstance(t, str):
                specs.append((t, -1, -1, None, None))
            elif isinstance(t, NewTopic):
                specs.append((t.name, t.num_partitions, t.replication_factor, t.replica_assignments, t.topic_configs))
            else:
                raise ValueError(f"No valid topics found in new_topics: {new_topics}")
    if not specs:
        raise ValueError(f"No valid topics found in new_topics: {new_topics}")
    out = []
    for name, n, rf, assignments, configs in specs:
        if assignments:
            raise NotImplementedError(f"create_topics: replica assignments (topic {name!r}) are not "
                                      "supported by ferrokafka's Admin")
        out.append(_NativeNewTopic(name, n, rf, dict(configs) if configs else None))
    return out


def _results(results: Dict[str, Optional[BaseException]]) -> Dict[str, Any]:
    topics = []
    for name, err in results.items():
        code = 0 if err is None else getattr(err, "code", -1)
        topics.append({"name": name, "error_code": code,
                       "error_message": None if err is None else str(getattr(err, "message", err))})
    return {"topics": topics}


def _raise_first(results: Dict[str, Optional[BaseException]]) -> None:
    for err in results.values():
        if err is not None:
            raise translate(err)


class KafkaAdminClient:
    """``KafkaAdminClient(**configs)``, kafka-python's admin client."""

    DEFAULT_CONFIG: Dict[str, Any] = {e.name: e.default for (n, c), e in _config.TABLE.items() if c == "A"}

    def __init__(self, **configs: Any) -> None:
        native_cfg, facade = _config.split_config("A", configs)
        self.config = {**self.DEFAULT_CONFIG, **configs, "client_id": facade["client_id"]}
        self._a = make_native(_NativeAdmin, native_cfg)
        try:
            # kafka-python bootstraps in the constructor.
            self._a.describe_cluster(timeout_ms=int(facade["bootstrap_timeout_ms"]))
        except _native_errors.KafkaTimeoutError as e:
            self._a.close()
            raise NoBrokersAvailable(f"Unable to bootstrap from {native_cfg['bootstrap_servers']}") from e
        except BaseException:
            self._a.close()
            raise

    def _timeout(self, timeout_ms: Optional[int]) -> int:
        return int(self.config["request_timeout_ms"] if timeout_ms is None else timeout_ms)

    # -- topics --------------------------------------------------------------------
    def create_topics(self, new_topics: Any, timeout_ms: Optional[int] = None, validate_only: bool = False,
                      raise_errors: bool = True, wait_for_metadata: bool = False) -> Dict[str, Any]:
        """Create topics; ``{"topics": [{"name", "error_code", "error_message"}]}``.
        Raises the first topic's error (e.g. TopicAlreadyExistsError) unless
        ``raise_errors=False``."""
        if validate_only and wait_for_metadata:
            raise ValueError("validate_only and wait_for_metadata are mutually exclusive")
        topics = _native_topics(new_topics)
        with translated():
            results = self._a.create_topics(topics, self._timeout(timeout_ms), validate_only, raise_on_error=False)
        if raise_errors:
            _raise_first(results)
        if wait_for_metadata:
            self.wait_for_topics([t.name for t in topics])
        return _results(results)

    def wait_for_topics(self, topic_names: List[str], timeout_ms: int = 10000) -> None:
        """Block until every topic shows in the cluster's metadata."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            with translated():
                known = self._a.list_topics()
            missing = [t for t in topic_names if t not in known]
            if not missing:
                return
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"Timed out waiting for topics {missing}")
            time.sleep(0.05)

    def delete_topics(self, topics: List[str], timeout_ms: Optional[int] = None,
                      raise_errors: bool = True) -> Dict[str, Any]:
        with translated():
            results = self._a.delete_topics(list(topics), self._timeout(timeout_ms), raise_on_error=False)
        if raise_errors:
            _raise_first(results)
        return _results(results)

    def list_topics(self) -> List[str]:
        """The names of the cluster's topics (internal topics left out)."""
        with translated():
            return list(self._a.list_topics())

    # -- cluster -------------------------------------------------------------------
    def describe_cluster(self) -> Dict[str, Any]:
        """``{"brokers": [{"broker_id", "host", "port", "rack"}], "controller_id", "cluster_id"}``."""
        with translated():
            d = self._a.describe_cluster()
        return {"brokers": [{"broker_id": n.id, "host": n.host, "port": n.port, "rack": n.rack} for n in d.nodes],
                "controller_id": -1 if d.controller is None else d.controller.id,
                "cluster_id": d.cluster_id}

    # -- groups ----------------------------------------------------------------------
    def list_groups(self, broker_ids: Optional[List[int]] = None, states_filter: Optional[List[str]] = None,
                    types_filter: Optional[List[str]] = None) -> List[Dict[str, Any]]:
        """``[{"group_id", "protocol_type", "group_state"}]``; ``states_filter``
        is applied to the listing."""
        if broker_ids is not None:
            raise NotImplementedError("list_groups(broker_ids=...): ferrokafka's Admin asks every broker")
        if types_filter is not None:
            raise NotImplementedError("list_groups(types_filter=...): ferrokafka's Admin does not "
                                      "report group types")
        with translated():
            groups = self._a.list_consumer_groups()
        wanted = None if states_filter is None else {str(s).replace("-", "").replace("_", "").lower()
                                                      for s in states_filter}
        return [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state}
                for g in groups
                if wanted is None or g.state.replace("-", "").replace("_", "").lower() in wanted]

    def list_consumer_groups(self, broker_ids: Optional[List[int]] = None) -> List[tuple]:
        """kafka-python 2.x: ``[(group_id, protocol_type)]``."""
        return [(g["group_id"], g["protocol_type"]) for g in self.list_groups(broker_ids)]

    def _group_offsets(self, group_id: str, partitions: Optional[List[Any]]) -> Dict[TopicPartition, OffsetAndMetadata]:
        with translated():
            got = self._a.list_consumer_group_offsets(group_id)
        out = {from_native(tp): OffsetAndMetadata(off, "", -1) for tp, off in got.items()}
        if partitions is not None:
            keep = {TopicPartition(*p) for p in partitions}
            out = {tp: o for tp, o in out.items() if tp in keep}
        return out

    def list_group_offsets(self, group_specs: Any) -> Dict[str, Dict[TopicPartition, OffsetAndMetadata]]:
        """``{group_id: {TopicPartition: OffsetAndMetadata}}``; ``group_specs``
        is a group id, a list of them, or ``{group_id: [TopicPartition] or None}``."""
        if isinstance(group_specs, str):
            group_specs = {group_specs: None}
        elif not isinstance(group_specs, dict):
            group_specs = {g: None for g in group_specs}
        if not group_specs:
            raise ValueError("Empty group_specs!")
        return {g: self._group_offsets(g, parts) for g, parts in group_specs.items()}

    def list_consumer_group_offsets(self, group_id: str, group_coordinator_id: Optional[int] = None,
                                    partitions: Optional[List[TopicPartition]] = None) -> Dict[TopicPartition, OffsetAndMetadata]:
        """kafka-python 2.x: ``{TopicPartition: OffsetAndMetadata}`` of one group."""
        if group_coordinator_id is not None:
            raise NotImplementedError("list_consumer_group_offsets(group_coordinator_id=...): "
                                      "ferrokafka's Admin finds the coordinator itself")
        return self._group_offsets(group_id, partitions)

    def close(self) -> None:
        self._a.close()

    def __enter__(self) -> "KafkaAdminClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# kafka-python 3's admin methods the native Admin has no counterpart for.
UNSUPPORTED = (
    "abort_transaction", "alter_configs", "alter_group_offsets", "alter_partition_reassignments",
    "alter_replica_log_dirs", "alter_user_scram_credentials", "api_versions", "create_acls",
    "create_partitions", "delete_acls", "delete_group_offsets", "delete_groups", "delete_records",
    "describe_acls", "describe_configs", "describe_features", "describe_groups", "describe_log_dirs",
    "describe_metadata_quorum", "describe_producers", "describe_topic_partitions", "describe_topics",
    "describe_transactions", "describe_user_scram_credentials", "elect_leaders",
    "find_hanging_transactions", "get_broker_version_data", "list_config_resources",
    "list_partition_offsets", "list_partition_reassignments", "list_transactions",
    "remove_group_members", "reset_configs", "reset_group_offsets", "update_features",
)


def _refuse(name: str):
    def method(self: KafkaAdminClient, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"KafkaAdminClient.{name}() is not supported: ferrokafka's Admin "
                                  "has no counterpart (docs/compat-kafka-python.md)")
    method.__name__ = name
    method.__doc__ = f"Not supported: raises NotImplementedError ({name} has no native counterpart)."
    return method


for _name in UNSUPPORTED:
    setattr(KafkaAdminClient, _name, _refuse(_name))
