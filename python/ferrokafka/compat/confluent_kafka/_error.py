"""confluent-kafka's ``KafkaError`` / ``KafkaException`` over ferrokafka's error table.

The broker error codes come from the table compiled into the core
(``_core.error_codes()``, Kafka's protocol codes); librdkafka spells a few of
them differently (``UNKNOWN_TOPIC_OR_PART`` for Kafka's
``UNKNOWN_TOPIC_OR_PARTITION``...), and has many local (negative) codes the
core never produces. Both are listed here so that code comparing
``err.code()`` with ``KafkaError.<NAME>`` keeps working after the switch.
"""

from __future__ import annotations

import builtins
from typing import Any, Dict, Literal, Optional

from ... import _core
from ... import errors as _native

# librdkafka's names for broker codes whose Kafka (Java) name differs.
_RDKAFKA_NAMES = {
    -1: "UNKNOWN",
    0: "NO_ERROR",
    2: "INVALID_MSG",
    3: "UNKNOWN_TOPIC_OR_PART",
    4: "INVALID_MSG_SIZE",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MSG_SIZE_TOO_LARGE",
    11: "STALE_CTRL_EPOCH",
    17: "TOPIC_EXCEPTION",
}

# librdkafka's local error codes (rdkafka.h, ``RD_KAFKA_RESP_ERR__*``) with
# the text librdkafka gives them; a name without text gets its name spelt out.
_LOCAL: Dict[int, tuple] = {
    -199: ("_BAD_MSG", "Bad message format"),
    -198: ("_BAD_COMPRESSION", "Invalid compressed data"),
    -197: ("_DESTROY", "Broker handle destroyed"),
    -196: ("_FAIL", "Communication failure with broker"),
    -195: ("_TRANSPORT", "Broker transport failure"),
    -194: ("_CRIT_SYS_RESOURCE", "Critical system resource failure"),
    -193: ("_RESOLVE", "Host resolution failure"),
    -192: ("_MSG_TIMED_OUT", "Message timed out"),
    -191: ("_PARTITION_EOF", "Broker: No more messages"),
    -190: ("_UNKNOWN_PARTITION", "Unknown partition"),
    -189: ("_FS", "File or filesystem error"),
    -188: ("_UNKNOWN_TOPIC", "Unknown topic"),
    -187: ("_ALL_BROKERS_DOWN", "All broker connections are down"),
    -186: ("_INVALID_ARG", "Invalid argument or configuration"),
    -185: ("_TIMED_OUT", "Timed out"),
    -184: ("_QUEUE_FULL", "Queue full"),
    -183: ("_ISR_INSUFF", "ISR count insufficient"),
    -182: ("_NODE_UPDATE", "Broker node update"),
    -181: ("_SSL", "SSL error"),
    -180: ("_WAIT_COORD", "Waiting for coordinator"),
    -179: ("_UNKNOWN_GROUP", "Unknown group"),
    -178: ("_IN_PROGRESS", "Operation in progress"),
    -177: ("_PREV_IN_PROGRESS", "Previous operation in progress"),
    -176: ("_EXISTING_SUBSCRIPTION", "Existing subscription"),
    -175: ("_ASSIGN_PARTITIONS", "Assign partitions"),
    -174: ("_REVOKE_PARTITIONS", "Revoke partitions"),
    -173: ("_CONFLICT", "Conflicting use"),
    -172: ("_STATE", "Erroneous state"),
    -171: ("_UNKNOWN_PROTOCOL", "Unknown protocol"),
    -170: ("_NOT_IMPLEMENTED", "Not implemented"),
    -169: ("_AUTHENTICATION", "Authentication failure"),
    -168: ("_NO_OFFSET", "No offset stored"),
    -167: ("_OUTDATED", "Outdated"),
    -166: ("_TIMED_OUT_QUEUE", "Timed out in queue"),
    -165: ("_UNSUPPORTED_FEATURE", "Required feature not supported by broker"),
    -164: ("_WAIT_CACHE", "Awaiting cache update"),
    -163: ("_INTR", "Operation interrupted"),
    -162: ("_KEY_SERIALIZATION", "Key serialization error"),
    -161: ("_VALUE_SERIALIZATION", "Value serialization error"),
    -160: ("_KEY_DESERIALIZATION", "Key deserialization error"),
    -159: ("_VALUE_DESERIALIZATION", "Value deserialization error"),
    -158: ("_PARTIAL", "Partial response"),
    -157: ("_READ_ONLY", "Read-only object"),
    -156: ("_NOENT", "No such entry"),
    -155: ("_UNDERFLOW", "Read underflow"),
    -154: ("_INVALID_TYPE", "Invalid type"),
    -153: ("_RETRY", "Retry operation"),
    -152: ("_PURGE_QUEUE", "Purged in queue"),
    -151: ("_PURGE_INFLIGHT", "Purged in flight"),
    -150: ("_FATAL", "Fatal error"),
    -149: ("_INCONSISTENT", "Inconsistent state"),
    -148: ("_GAPLESS_GUARANTEE", "Gap-less ordering would not be guaranteed"),
    -147: ("_MAX_POLL_EXCEEDED", "Maximum application poll interval (max.poll.interval.ms) exceeded"),
    -146: ("_UNKNOWN_BROKER", "Unknown broker"),
    -145: ("_NOT_CONFIGURED", "Functionality not configured"),
    -144: ("_FENCED", "This instance has been fenced by a newer instance"),
    -143: ("_APPLICATION", "Application generated error"),
    -142: ("_ASSIGNMENT_LOST", "Group partition assignment lost"),
    -141: ("_NOOP", "No operation performed"),
    -140: ("_AUTO_OFFSET_RESET", "No offset to automatically reset to"),
    -139: ("_LOG_TRUNCATION", "Partition log truncation detected"),
    -138: ("_INVALID_DIFFERENT_RECORD", "Invalid different record"),
    -137: ("_DESTROY_BROKER", "Broker handle destroyed without termination"),
}

_NAMES: Dict[int, str] = {}
_TEXT: Dict[int, str] = {}
_RETRIABLE: Dict[int, bool] = {}


def _spelt_out(name: str) -> str:
    return name.strip("_").replace("_", " ").capitalize()


for _code, _name, _retriable in _core.error_codes():
    _RETRIABLE[_code] = bool(_retriable)
    if _code < 0 and _code != -1:
        continue  # local codes: librdkafka's table below
    _NAMES[_code] = _RDKAFKA_NAMES.get(_code, _name)
    _TEXT[_code] = "Broker: " + _spelt_out(_name)
_NAMES[0] = "NO_ERROR"
_TEXT[0] = "Success"
for _code, (_name, _text) in _LOCAL.items():
    _NAMES[_code] = _name
    _TEXT[_code] = _text if _text.startswith("Broker:") else "Local: " + _text


class KafkaError:
    """An error code with its name and description (confluent-kafka's
    ``KafkaError``): ``code() name() str() fatal() retriable()
    txn_requires_abort()``; compares equal to its code."""

    __slots__ = ("_code", "_str", "_fatal", "_retriable", "_txn_requires_abort")

    def __init__(self, error: Any, reason: Optional[str] = None, fatal: bool = False,
                 retriable: bool = False, txn_requires_abort: bool = False) -> None:
        if isinstance(error, KafkaError):
            error = error.code()
        if not isinstance(error, int):
            raise TypeError(f"KafkaError() needs an int error code, not {type(error).__name__}")
        self._code = int(error)
        self._str = reason if reason is not None else _TEXT.get(self._code, f"Err-{self._code}?")
        self._fatal = bool(fatal)
        self._retriable = bool(retriable)
        self._txn_requires_abort = bool(txn_requires_abort)

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return _NAMES.get(self._code, f"ERR_{self._code}?")

    def str(self) -> str:
        return self._str

    def fatal(self) -> bool:
        return self._fatal

    def retriable(self) -> bool:
        return self._retriable

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __str__(self) -> builtins.str:
        return f'KafkaError{{code={self.name()},val={self._code},str="{self._str}"}}'

    __repr__ = __str__

    def __hash__(self) -> int:
        return hash(self._code)

    @staticmethod
    def _other(other: Any) -> Any:
        return other.code() if isinstance(other, KafkaError) else other

    def __eq__(self, other: Any) -> bool:
        return self._code == self._other(other)

    def __ne__(self, other: Any) -> bool:
        return self._code != self._other(other)

    def __lt__(self, other: Any) -> bool:
        return self._code < self._other(other)

    def __le__(self, other: Any) -> bool:
        return self._code <= self._other(other)

    def __gt__(self, other: Any) -> bool:
        return self._code > self._other(other)

    def __ge__(self, other: Any) -> bool:
        return self._code >= self._other(other)


for _code, _name in _NAMES.items():
    setattr(KafkaError, _name, _code)
# Kafka's own spelling of the renamed codes works too (NOT_LEADER_OR_FOLLOWER...).
for _code, _name, _ in _core.error_codes():
    if _code >= 0 and not hasattr(KafkaError, _name):
        setattr(KafkaError, _name, _code)


class KafkaException(Exception):
    """Raised by the clients; ``args[0]`` is the :class:`KafkaError`."""

    def __init__(self, *args: Any) -> None:
        if args and isinstance(args[0], int) and not isinstance(args[0], bool):
            args = (KafkaError(args[0], *args[1:2]),) + tuple(args[2:])
        super().__init__(*args)

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ConfigException(KafkaException, ValueError):
    """A configuration property the facade does not know or cannot honour:
    a ``KafkaException`` (``_INVALID_ARG``) as confluent-kafka raises, and a
    ``ValueError`` as ferrokafka raises for bad options."""


def config_error(message: str) -> ConfigException:
    return ConfigException(KafkaError(KafkaError._INVALID_ARG, message))  # type: ignore[attr-defined]


def from_native(exc: BaseException) -> KafkaError:
    """The confluent-style error of a ferrokafka exception."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, _native.KafkaError):
        code = int(exc.code)
        return KafkaError(code, str(exc.message), retriable=bool(exc.retriable),
                          fatal=code in _FATAL_CODES)
    if isinstance(exc, TimeoutError):
        return KafkaError(KafkaError._TIMED_OUT, str(exc), retriable=True)  # type: ignore[attr-defined]
    return KafkaError(KafkaError._FAIL, f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


# Errors after which the producer instance is unusable (docs/semantics.md §5.6).
_FATAL_CODES = frozenset({47, 90, 31})  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, CLUSTER_AUTHORIZATION_FAILED


class translated:
    """``with translated():`` turns ferrokafka errors into ``KafkaException``
    (confluent-kafka raises nothing else from a client call)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc is not None and isinstance(exc, _native.KafkaError):
            raise KafkaException(from_native(exc)) from exc
        return False
