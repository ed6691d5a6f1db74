"""Low-level network client (docs/semantics.md §4; API.md "low-level network client").

The engine is Rust (``ferrokafka._core._NetworkClient``): connections, ApiVersions,
the in-flight deque, timeouts and backoff all run there, and ``poll`` waits with
the GIL released. This wrapper adds what belongs to Python: accepting ``Node``
objects or node ids, the dict-of-dotted-names configuration form, and running
callbacks (with the GIL, after the I/O work; one raising does not stop the others).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from . import _core

__all__ = ["NetworkClient", "ClientResponse", "ClientRequest", "RequestHeader"]

log = logging.getLogger("ferrokafka.network")

ClientResponse = _core.ClientResponse
ClientRequest = _core.ClientRequest
RequestHeader = _core.RequestHeader


class _Node:
    """Minimal stand-in for ``ferrokafka.Node`` when the metadata bindings are absent."""

    __slots__ = ("id", "host", "port", "rack")

    def __init__(self, id: int, host: str, port: int, rack: str | None = None) -> None:
        self.id, self.host, self.port, self.rack = id, host, port, rack

    def __repr__(self) -> str:
        return f"Node(id={self.id}, host={self.host!r}, port={self.port}, rack={self.rack!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Node) and (self.id, self.host, self.port, self.rack) == (
            other.id, other.host, other.port, other.rack)

    def __hash__(self) -> int:
        return hash((self.id, self.host, self.port, self.rack))


def _make_node(t: tuple[int, str, int, str | None]) -> Any:
    cls = getattr(_core, "Node", None) or _Node
    try:
        return cls(t[0], t[1], t[2], t[3])
    except TypeError:  # a Node type with another signature: fall back
        return _Node(*t)


class NetworkClient:
    """``NetworkClient(bootstrap_servers, client_id="ferrokafka", max_in_flight_requests_per_connection=5,
    request_timeout_ms=30_000, reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000, ...)``

    Also accepts a dict of dotted names: ``NetworkClient({"bootstrap.servers": bs})``.
    """

    def __init__(self, bootstrap_servers: Any = None, client_id: str | None = None, /, **kwargs: Any) -> None:
        from . import _config

        if client_id is not None:
            kwargs["client_id"] = client_id
        config: Mapping[str, Any] | None = None
        if isinstance(bootstrap_servers, Mapping):
            config = bootstrap_servers
        elif bootstrap_servers is not None:
            kwargs["bootstrap_servers"] = bootstrap_servers
        opts = _config.resolve(_config.NETWORK_CLIENT, config, **kwargs)
        self._client = _core._NetworkClient(opts)
        self._callbacks: dict[int, Callable[[Any], Any]] = {}
        self.client_id = opts["client_id"]
        self.config = opts

    # --- nodes and connections -------------------------------------------------

    @staticmethod
    def _node_args(node: Any) -> tuple[int, str | None, int | None, str | None]:
        if isinstance(node, int):
            return node, None, None, None
        return node.id, node.host, node.port, getattr(node, "rack", None)

    def least_loaded_node(self, now_ms: int | None = None) -> Any:
        t = self._client.least_loaded_node(now_ms)
        return None if t is None else _make_node(t)

    def nodes(self) -> list[Any]:
        return [_make_node(t) for t in self._client.nodes()]

    def ready(self, node: Any, now_ms: int | None = None) -> bool:
        """True if a request can be sent to ``node`` now; else starts connecting (if allowed)."""
        node_id, host, port, rack = self._node_args(node)
        if host is None:
            t = self._client.node_by_id(node_id)
            if t is None:
                raise ValueError(f"unknown node id {node_id}: pass a Node")
            _, host, port, rack = t
        return self._client.ready(node_id, host, port, rack, now_ms)

    def is_ready(self, node: Any, now_ms: int | None = None) -> bool:
        return self._client.is_ready(self._node_args(node)[0], now_ms)

    def connection_state(self, node_id: Any) -> str:
        return self._client.connection_state(self._node_args(node_id)[0])

    def connection_delay(self, node: Any, now_ms: int | None = None) -> int:
        return self._client.connection_delay(self._node_args(node)[0], now_ms)

    def api_versions(self, node_id: Any) -> dict[int, tuple[int, int]]:
        """api_key -> (min, max) versions both the broker and ferrokafka accept."""
        return self._client.api_versions(self._node_args(node_id)[0])

    # --- requests ------------------------------------------------------------------

    def new_client_request(self, node_id: Any, request: Any, expect_response: bool = True,
                           callback: Callable[[Any], Any] | None = None,
                           now_ms: int | None = None) -> Any:
        raw = request._build() if hasattr(request, "_build") else request
        req = self._client.new_client_request(self._node_args(node_id)[0], raw, expect_response, now_ms)
        if callback is not None:
            self._callbacks[req.correlation_id] = callback
        return req

    def send(self, request: Any, now_ms: int | None = None) -> None:
        try:
            self._client.send(request, now_ms)
        except BaseException:
            self._callbacks.pop(request.correlation_id, None)
            raise

    def poll(self, timeout_ms: int, now_ms: int | None = None) -> list[Any]:
        """Waits up to ``timeout_ms`` (GIL released) for I/O; returns completed responses
        after running their callbacks."""
        responses = self._client.poll(int(timeout_ms), now_ms)
        self._run_callbacks(responses)
        return responses

    def _run_callbacks(self, responses: list[Any]) -> None:
        if not self._callbacks:
            return
        for r in responses:
            cb = self._callbacks.pop(r.request_header.correlation_id, None)
            if cb is None:
                continue
            try:
                cb(r)
            except Exception:
                log.exception("callback for %r raised", r)

    def in_flight_request_count(self, node_id: Any = None) -> int:
        return self._client.in_flight_request_count(None if node_id is None else self._node_args(node_id)[0])

    def close_node(self, node_id: Any) -> list[Any]:
        rs = self._client.close_node(self._node_args(node_id)[0])
        self._run_callbacks(rs)
        return rs

    def close(self) -> None:
        rs = self._client.close()
        self._run_callbacks(rs)

    def __enter__(self) -> "NetworkClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
