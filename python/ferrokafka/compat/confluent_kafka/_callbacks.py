"""Client-wide callbacks of the configuration: ``error_cb`` and ``logger``."""

from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, List, Optional, Tuple

from ._error import from_native


class ErrorCallback:
    """The native ``error_cb`` that hands the user's callback a
    confluent-style ``KafkaError`` instead of ferrokafka's exception.

    The native client calls it inside its poll and logs what it raises; as
    confluent-kafka lets an exception from ``error_cb`` out of ``poll()``,
    the exception is kept here and re-raised by the facade (``raise_pending``)
    once the native call has returned."""

    def __init__(self, user_cb: Callable[[Any], Any]) -> None:
        self._user_cb = user_cb
        self._pending: List[BaseException] = []

    def __call__(self, exc: BaseException) -> None:
        try:
            self._user_cb(from_native(exc))
        except Exception as e:
            self._pending.append(e)

    def raise_pending(self) -> None:
        if self._pending:
            first = self._pending[0]
            self._pending.clear()
            raise first


def error_cb(user_cb: Optional[Callable[[Any], Any]]) -> Optional[ErrorCallback]:
    return None if user_cb is None else ErrorCallback(user_cb)


def raise_pending(cb: Optional[ErrorCallback]) -> None:
    if cb is not None:
        cb.raise_pending()


class _Forward(logging.Handler):
    def __init__(self, target: logging.Logger) -> None:
        super().__init__()
        self.target = target
        # The client's log id once it exists (`bind`); until then, and for
        # records of no client, everything is forwarded.
        self.client = 0

    def emit(self, record: logging.LogRecord) -> None:
        other = getattr(record, "ferrokafka_client", 0)
        if self.client and other and other != self.client:
            return  # another client's line
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)


class _Level:
    """``debug``: the ``ferrokafka`` logger tree at DEBUG while the client is
    open (the previous level is restored on close)."""

    def __init__(self, to_stderr: bool) -> None:
        self._root = logging.getLogger("ferrokafka")
        self._was: Optional[int] = self._root.level
        self._root.setLevel(logging.DEBUG)
        self._handler: Optional[logging.Handler] = None
        if to_stderr:  # librdkafka's default log sink is stderr
            self._handler = logging.StreamHandler()
            self._handler.setFormatter(logging.Formatter("%(levelname)s|%(name)s| %(message)s"))
            self._root.addHandler(self._handler)

    def close(self) -> None:
        if self._was is not None:
            self._root.setLevel(self._was)
            self._was = None
        if self._handler is not None:
            self._root.removeHandler(self._handler)
            self._handler = None


class LoggerBridge:
    """confluent-kafka's ``logger`` property: the client's log lines go to the
    given ``logging.Logger``. ferrokafka logs to the ``ferrokafka`` logger
    tree, so the bridge forwards the records of that tree that are this
    client's (each carries its client's id as ``ferrokafka_client``; lines
    of no client, such as configuration warnings, go to every bridge) while
    the client is open."""

    def __init__(self, target: Any) -> None:
        if not isinstance(target, logging.Logger):
            raise ValueError("invalid value for configuration property 'logger': expected a logging.Logger")
        self._handler: Optional[_Forward] = _Forward(target)
        root = logging.getLogger("ferrokafka")
        if root.level == logging.NOTSET or root.level > target.getEffectiveLevel():
            root.setLevel(target.getEffectiveLevel())
        root.addHandler(self._handler)

    def bind(self, client: Any) -> None:
        """Forward only `client`'s records from now on."""
        if self._handler is not None:
            self._handler.client = getattr(client, "_log_id", 0)

    def close(self) -> None:
        if self._handler is not None:
            logging.getLogger("ferrokafka").removeHandler(self._handler)
            self._handler = None


class _Both:
    def __init__(self, *parts: Any) -> None:
        self._parts = [p for p in parts if p is not None]

    def bind(self, client: Any) -> None:
        for p in self._parts:
            if isinstance(p, LoggerBridge):
                p.bind(client)

    def close(self) -> None:
        for p in self._parts:
            p.close()


def logger_bridge(facade: dict) -> Optional[Any]:
    """What ``logger`` and ``debug`` ask for; ``.close()`` undoes it."""
    target = facade.get("logger")
    bridge = None if target is None else LoggerBridge(target)
    level = _Level(to_stderr=target is None) if facade.get("debug") is not None else None
    return _Both(bridge, level) if (bridge or level) else None


def native_client(cls: Callable[[dict], Any], native: dict, facade: dict) -> Tuple[Any, Optional[ErrorCallback], Optional[Any]]:
    """The native client for a facade client: its ``error_cb`` and
    ``logger`` set up, a refused option turned into confluent's config error
    (and the logger bridge closed again). Returns (client, error_cb, logger)."""
    from ._error import config_error, translated

    cb = error_cb(facade.get("error_cb"))
    if cb is not None:
        native["error_cb"] = cb
    logger = logger_bridge(facade)
    try:
        with translated():
            client = cls(native)
    except ValueError as e:  # an option the native table refuses
        if logger is not None:
            logger.close()
        raise config_error(str(e)) from e
    if logger is not None:
        logger.bind(client)
        # A client dropped without close() must not leave its handler (bound to
        # the stderr of that moment) or the DEBUG level on the ferrokafka tree:
        # undo them when the client is collected. close() running first makes
        # this a no-op (each part's close is idempotent).
        weakref.finalize(client, logger.close)
    return client, cb, logger
