"""Making the native client behind a kafka-python facade client: errors and
refused options in kafka-python's terms, and kafka-python's bootstrap in the
constructor."""

from __future__ import annotations

from typing import Any, Callable

from ... import errors as _native_errors
from .errors import KafkaConfigurationError, NoBrokersAvailable, translate


def make_native(cls: Callable[..., Any], native_cfg: dict) -> Any:
    """``cls(**native_cfg)``, a refused option as KafkaConfigurationError."""
    try:
        return cls(**native_cfg)
    except _native_errors.KafkaError as e:
        raise translate(e) from e
    except ValueError as e:
        raise KafkaConfigurationError(str(e)) from e


def start_bootstrap(native: Any, timeout_ms: int, servers: Any) -> None:
    """kafka-python bootstraps in the constructor: wait for the first
    metadata answer, or NoBrokersAvailable."""
    md = native.metadata
    if any(n.id >= 0 for n in md.fetch().nodes):
        return
    try:
        md.await_update(md.request_update(), int(timeout_ms))
    except _native_errors.KafkaTimeoutError as e:
        raise NoBrokersAvailable(f"Unable to bootstrap from {servers}") from e


def bootstrapped(cls: Callable[..., Any], native_cfg: dict, timeout_ms: int) -> Any:
    """``make_native``, then the first metadata answer within ``timeout_ms``
    (closing the client again when none comes)."""
    native = make_native(cls, native_cfg)
    try:
        start_bootstrap(native, timeout_ms, native_cfg["bootstrap_servers"])
    except BaseException:
        native.close(0)
        raise
    return native
