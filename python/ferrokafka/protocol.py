"""Wire-protocol pieces exposed for tests and tools.

Request classes (for ``NetworkClient``) and the record batch codec
(``encode_record_batch`` / ``decode_record_batch``), all implemented in Rust.
"""

from __future__ import annotations

from . import _core

__all__: list[str] = []

# --- record batch codec (section owned by the codec work) ---

from ._core import Record, decode_record_batch, encode_record_batch

#: ``compression=`` names accepted by :func:`encode_record_batch` (Java's
#: ``compression.type`` values).
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")

__all__ += ["Record", "decode_record_batch", "encode_record_batch", "COMPRESSION_TYPES"]

# --- request classes (section owned by the network work) ---

import types as _types  # noqa: E402 (the request section follows the record section)
from typing import Any as _Any  # noqa: E402 (the request section follows the record section)
from typing import Iterable as _Iterable  # noqa: E402 (the request section follows the record section)


class Struct(_types.SimpleNamespace):
    """A decoded response (or part of one): fields as attributes, snake_case."""

    __slots__ = ("_type",)

    def __init__(self, _type: str, **fields: _Any) -> None:
        super().__init__(**fields)
        object.__setattr__(self, "_type", _type)

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{self._type}({inner})"

    def to_dict(self) -> dict[str, _Any]:
        def conv(v: _Any) -> _Any:
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v
        return {k: conv(v) for k, v in self.__dict__.items()}


def _make(name: str, fields: dict[str, _Any]) -> Struct:
    return Struct(name, **fields)


class Request:
    """Base of the request classes; ``_build()`` gives the Rust request value."""

    API_KEY: int = -1

    def _build(self) -> _core.RawRequest:  # pragma: no cover - overridden
        raise NotImplementedError

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class MetadataRequest(Request):
    API_KEY = 3

    def __init__(self, topics: _Iterable[str] | None = None, allow_auto_topic_creation: bool = False) -> None:
        self.topics = None if topics is None else [str(t) for t in topics]
        self.allow_auto_topic_creation = bool(allow_auto_topic_creation)

    def _build(self) -> _core.RawRequest:
        return _core._metadata_request(self.topics, self.allow_auto_topic_creation)


class ApiVersionsRequest(Request):
    API_KEY = 18

    def _build(self) -> _core.RawRequest:
        return _core._api_versions_request()


class FindCoordinatorRequest(Request):
    API_KEY = 10

    def __init__(self, key: str, key_type: int = 0) -> None:
        if key_type not in (0, 1):
            raise ValueError(f"key_type must be 0 (GROUP) or 1 (TRANSACTION), got {key_type!r}")
        self.key, self.key_type = str(key), int(key_type)

    def _build(self) -> _core.RawRequest:
        return _core._find_coordinator_request(self.key, self.key_type)


class ListOffsetsRequest(Request):
    """``topics``: ``{topic: {partition: timestamp}}`` or ``[(topic, [(partition, timestamp)])]``;
    timestamp -1 = latest, -2 = earliest."""

    API_KEY = 2

    def __init__(self, topics: _Any, isolation_level: int = 0, replica_id: int = -1) -> None:
        if isinstance(topics, dict):
            topics = [(t, list(p.items())) for t, p in topics.items()]
        self.topics = [(str(t), [(int(p), int(ts)) for p, ts in ps]) for t, ps in topics]
        self.isolation_level, self.replica_id = int(isolation_level), int(replica_id)

    def _build(self) -> _core.RawRequest:
        return _core._list_offsets_request(self.topics, self.isolation_level, self.replica_id)


class CreateTopicsRequest(Request):
    """``topics``: ``[(name, num_partitions, replication_factor)]`` or objects with those attributes."""

    API_KEY = 19

    def __init__(self, topics: _Any, timeout_ms: int = 30_000, validate_only: bool = False) -> None:
        out = []
        for t in topics:
            if isinstance(t, (tuple, list)):
                name, parts, rf = t
            else:
                name, parts, rf = t.name, t.num_partitions, t.replication_factor
            out.append((str(name), int(parts), int(rf)))
        self.topics, self.timeout_ms, self.validate_only = out, int(timeout_ms), bool(validate_only)

    def _build(self) -> _core.RawRequest:
        return _core._create_topics_request(self.topics, self.timeout_ms, self.validate_only)


class DeleteTopicsRequest(Request):
    API_KEY = 20

    def __init__(self, topics: _Iterable[str], timeout_ms: int = 30_000) -> None:
        self.topics, self.timeout_ms = [str(t) for t in topics], int(timeout_ms)

    def _build(self) -> _core.RawRequest:
        return _core._delete_topics_request(self.topics, self.timeout_ms)


class FetchRequest(Request):
    """``topics``: ``[(topic, [(partition, fetch_offset, partition_max_bytes)])]``."""

    API_KEY = 1

    def __init__(self, topics: _Any, max_wait_ms: int = 500, min_bytes: int = 1,
                 max_bytes: int = 52_428_800, isolation_level: int = 0) -> None:
        self.topics = [(str(t), [(int(p), int(o), int(m)) for p, o, m in ps]) for t, ps in topics]
        self.max_wait_ms, self.min_bytes, self.max_bytes = int(max_wait_ms), int(min_bytes), int(max_bytes)
        self.isolation_level = int(isolation_level)

    def _build(self) -> _core.RawRequest:
        return _core._fetch_request(self.topics, self.max_wait_ms, self.min_bytes, self.max_bytes,
                                    self.isolation_level)


class ProduceRequest(Request):
    """``topic_data``: ``[(topic, [(partition, record_batch_bytes)])]``; ``acks`` 0, 1 or -1."""

    API_KEY = 0

    def __init__(self, topic_data: _Any, acks: int = -1, timeout_ms: int = 30_000,
                 transactional_id: str | None = None) -> None:
        if acks not in (0, 1, -1):
            raise ValueError(f"acks must be 0, 1 or -1, got {acks!r}")
        self.topic_data = [(str(t), [(int(p), bytes(r)) for p, r in ps]) for t, ps in topic_data]
        self.acks, self.timeout_ms, self.transactional_id = int(acks), int(timeout_ms), transactional_id

    def _build(self) -> _core.RawRequest:
        return _core._produce_request(self.topic_data, self.acks, self.timeout_ms, self.transactional_id)


__all__ += [
    "Struct", "Request", "MetadataRequest", "ApiVersionsRequest", "FindCoordinatorRequest",
    "ListOffsetsRequest", "CreateTopicsRequest", "DeleteTopicsRequest", "FetchRequest", "ProduceRequest",
]
