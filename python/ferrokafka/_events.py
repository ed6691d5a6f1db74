"""Client error events and Rust log records, delivered in the application's
thread (librdkafka's model: ``error_cb`` runs inside ``poll``).

The Rust core queues connection errors (``_TRANSPORT``, ``_RESOLVE``,
``_AUTHENTICATION``) and ``_ALL_BROKERS_DOWN`` per client; ``take_errors``
hands them over together with any queued log records (which go to the
``ferrokafka`` logger and its children, e.g. ``ferrokafka.network``).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from . import errors

_log = logging.getLogger("ferrokafka")

def dispatch(core: Any, error_cb: Optional[Callable[[errors.KafkaError], Any]]) -> None:
    """Run ``error_cb`` for every error event ``core`` queued (and emit
    queued log records). An exception in the callback is logged, not raised:
    it must not break the poll loop it runs in."""
    events = core.take_errors()
    if error_cb is None:
        return
    for code, message in events:
        # Retriability from the core's table: a later retry may clear
        # _TRANSPORT, _RESOLVE and _ALL_BROKERS_DOWN; _AUTHENTICATION needs
        # a configuration change.
        err = errors._from_core(code, message, errors.for_code(code).retriable)
        try:
            error_cb(err)
        except Exception:
            _log.exception("error_cb %r raised", error_cb)
