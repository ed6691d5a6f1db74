"""Cluster administration (Java ``AdminClient`` routing and retries).

Create/delete topics go to the controller (NOT_CONTROLLER -> refresh and
retry there); retriable per-topic errors are retried until the timeout; one
bad topic never hides the outcome of the others: ``create_topics`` raises the
first failure's class (e.g. ``TopicAlreadyExistsError``) with every topic's
error in ``.errors``, or returns ``{topic: error_or_None}`` with
``raise_on_error=False``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _core, _events
from ._config import ADMIN
from ._core import Node, TopicPartition

__all__ = ["Admin", "NewTopic", "ClusterDescription", "GroupListing"]


@dataclass(frozen=True)
class NewTopic:
    """``NewTopic(name, num_partitions=-1, replication_factor=-1, config=None)``;
    -1 takes the broker's default (CreateTopics v4+)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    config: Optional[Mapping[str, str]] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"invalid topic name {self.name!r}")
        if not isinstance(self.num_partitions, int) or (self.num_partitions < 1 and self.num_partitions != -1):
            raise ValueError(f"invalid num_partitions {self.num_partitions!r} for {self.name!r}: >= 1 or -1")
        if not isinstance(self.replication_factor, int) or (self.replication_factor < 1 and self.replication_factor != -1):
            raise ValueError(f"invalid replication_factor {self.replication_factor!r} for {self.name!r}: >= 1 or -1")


@dataclass(frozen=True)
class ClusterDescription:
    nodes: List[Node]
    controller: Optional[Node]
    cluster_id: Optional[str]


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


def _raise_first(results: Dict[str, Optional[BaseException]]) -> None:
    failed = {t: e for t, e in results.items() if e is not None}
    if failed:
        first = next(iter(failed.values()))
        try:
            first.errors = failed  # type: ignore[attr-defined]
        except AttributeError:
            pass
        raise first


def _reports_errors(method):
    """Run ``error_cb`` (and emit queued logs) after each call: an admin
    client has no poll, so its calls are where events reach the application."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        finally:
            _events.dispatch(self._core, self._error_cb)

    return call


class Admin:
    """``Admin("host:9092")`` or ``Admin({"bootstrap.servers": ...})``.

    Calls raise :class:`~ferrokafka.KafkaTimeoutError` naming the last
    connection error when no broker answers in time; ``error_cb`` gets each
    connection error as it happens (run at the end of each call)."""

    def __init__(self, bootstrap_servers: Union[str, Sequence[str], Mapping[str, Any], None] = None,
                 **config: Any) -> None:
        if isinstance(bootstrap_servers, Mapping):
            cfg = dict(bootstrap_servers)
        else:
            cfg = {} if bootstrap_servers is None else {"bootstrap_servers": bootstrap_servers}
        self.config = ADMIN.resolve(cfg, **config)
        core_cfg = dict(self.config)
        self._error_cb = core_cfg.pop("error_cb", None)
        self._core = _core._Admin(core_cfg)
        self._timeout = int(self.config["default_api_timeout_ms"])

    def _t(self, timeout_ms: Optional[int]) -> int:
        return self._timeout if timeout_ms is None else int(timeout_ms)

    @_reports_errors
    def create_topics(self, topics: Iterable[NewTopic], timeout_ms: int = 30_000, validate_only: bool = False,
                      raise_on_error: bool = True) -> Dict[str, Optional[BaseException]]:
        spec = []
        for t in topics:
            if not isinstance(t, NewTopic):
                raise ValueError(f"create_topics() takes NewTopic objects, got {t!r}")
            spec.append((t.name, t.num_partitions, t.replication_factor, sorted((t.config or {}).items())))
        results = dict(self._core.create_topics(spec, int(timeout_ms), bool(validate_only)))
        if raise_on_error:
            _raise_first(results)
        return results

    @_reports_errors
    def delete_topics(self, names: Iterable[str], timeout_ms: int = 30_000,
                      raise_on_error: bool = True) -> Dict[str, Optional[BaseException]]:
        names = [names] if isinstance(names, str) else list(names)
        results = dict(self._core.delete_topics(names, int(timeout_ms)))
        if raise_on_error:
            _raise_first(results)
        return results

    @_reports_errors
    def list_topics(self, timeout_ms: Optional[int] = None) -> Dict[str, int]:
        """{topic: partition count}, internal topics left out."""
        return dict(self._core.list_topics(self._t(timeout_ms)))

    @_reports_errors
    def describe_cluster(self, timeout_ms: Optional[int] = None) -> ClusterDescription:
        nodes, controller, cluster_id = self._core.describe_cluster(self._t(timeout_ms))
        return ClusterDescription(list(nodes), controller, cluster_id)

    @_reports_errors
    def list_consumer_groups(self, timeout_ms: Optional[int] = None) -> List[GroupListing]:
        return [GroupListing(*g) for g in self._core.list_consumer_groups(self._t(timeout_ms))]

    @_reports_errors
    def list_consumer_group_offsets(self, group_id: str, timeout_ms: Optional[int] = None) -> Dict[TopicPartition, int]:
        """{TopicPartition: committed offset} of every partition the group committed."""
        return {tp: off for tp, off, _meta in self._core.list_consumer_group_offsets(str(group_id), self._t(timeout_ms))}

    def metrics(self) -> Dict[str, float]:
        """{name: value} with Java's metric names (docs/metrics.md): the
        connections and per-node request figures (``name{node-id=node-N}``)."""
        return dict(self._core.metrics())

    @property
    def _log_id(self) -> int:
        """This client's id on its log records (their ``ferrokafka_client``
        attribute), for routing them per client."""
        return self._core._log_id

    def close(self) -> None:
        self._core.close()

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
