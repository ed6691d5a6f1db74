"""kafka-python's exception classes (``kafka.errors``), over ferrokafka's.

Every class here is *also* a subclass of the matching native class
(``ferrokafka.errors``), so code written against either tree catches what the
facade raises: ``except kafka.errors.NotLeaderForPartitionError`` and
``except ferrokafka.errors.NotLeaderOrFollowerError`` both see the same error.

The broker error classes (one per Kafka error code, with ``errno``,
``message``, ``description``, ``retriable``, ``invalid_metadata``) are
generated from the error table compiled into the Rust core; only the class
names kafka-python spells differently from the Kafka protocol name, and the
two codes whose retriability kafka-python judges differently, are listed here.

:func:`translate` turns a native error into its kafka-python class; the
facade's clients raise only these.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Optional, Type

from ... import _core
from ... import errors as _native

__all__ = [
    "KafkaError", "RetriableError", "InvalidMetadataError", "Cancelled", "CommitFailedError",
    "IllegalArgumentError", "IllegalStateError", "KafkaConfigurationError", "KafkaConnectionError",
    "KafkaProtocolError", "CorrelationIdError", "InvalidReceiveError", "KafkaTimeoutError",
    "MetadataEmptyBrokerList", "NoOffsetForPartitionError", "LogTruncationError",
    "NodeNotReadyError", "UnknownBrokerIdError", "QuotaViolationError", "StaleMetadata",
    "TooManyInFlightRequests", "UnrecognizedBrokerVersion", "UnsupportedCodecError",
    "TransactionAbortedError", "BrokerResponseError", "AuthorizationError", "NoError",
    "NoBrokersAvailable", "IncompatibleBrokerVersion", "kafka_errors", "for_code", "translate",
]


class KafkaError(_native.KafkaError):
    """Base of kafka-python's errors: any positional args, ``str()`` is
    ``"ClassName: message"``."""

    retriable = False
    invalid_metadata = False

    def __init__(self, *args: object, code: Optional[int] = None,
                 retriable: Optional[bool] = None) -> None:
        # kafka-python errors take any positional arguments (as Exception
        # does); the native base takes one message.
        Exception.__init__(self, *args)
        if code is not None:
            self.code = code
        if retriable is not None:
            self.retriable = retriable

    def __str__(self) -> str:
        if not self.args:
            return type(self).__name__
        return f"{type(self).__name__}: {Exception.__str__(self)}"

    def __reduce__(self):
        return (type(self), self.args)


class RetriableError(KafkaError):
    retriable = True


class InvalidMetadataError(RetriableError):
    invalid_metadata = True


class Cancelled(RetriableError):
    pass


class CommitFailedError(KafkaError):
    """A synchronous commit failed because the group rebalanced (the member's
    generation is gone): the partitions may belong to another member now."""

    def __init__(self, *args: object, **kw) -> None:
        super().__init__(*(args or ("Commit cannot be completed since the group has already "
                                    "rebalanced and assigned the partitions to another member.",)), **kw)


class IllegalArgumentError(KafkaError):
    pass


class IllegalStateError(KafkaError, _native.IllegalStateError):
    pass


class KafkaConfigurationError(KafkaError, ValueError):
    """An unknown or invalid option. Also a ``ValueError``, as every option
    error of ferrokafka is."""


class KafkaConnectionError(InvalidMetadataError, _native.KafkaConnectionError):
    pass


class KafkaProtocolError(KafkaError):
    pass


class CorrelationIdError(RetriableError, KafkaProtocolError):
    pass


class InvalidReceiveError(KafkaProtocolError):
    pass


class KafkaTimeoutError(RetriableError, _native.KafkaTimeoutError):
    pass


class NoBrokersAvailable(KafkaTimeoutError):
    """No broker answered while bootstrapping. kafka-python 2.x raised this
    class; 3.x raises ``KafkaTimeoutError``: it is both."""

    invalid_metadata = True


class MetadataEmptyBrokerList(RetriableError):
    pass


class NoOffsetForPartitionError(KafkaError):
    pass


class LogTruncationError(KafkaError):
    def __init__(self, divergent_offsets=None, *args: object) -> None:
        self.divergent_offsets = divergent_offsets
        super().__init__(*(args or (f"Detected truncated partitions: {divergent_offsets}",)))


class NodeNotReadyError(RetriableError):
    pass


class UnknownBrokerIdError(KafkaError):
    pass


class QuotaViolationError(KafkaError):
    pass


class StaleMetadata(InvalidMetadataError):
    pass


class TooManyInFlightRequests(RetriableError):
    pass


class UnrecognizedBrokerVersion(KafkaError):
    pass


class UnsupportedCodecError(KafkaError):
    pass


class TransactionAbortedError(KafkaError):
    pass


class BrokerResponseError(KafkaError):
    """An error code in a broker's response: ``errno`` (the code),
    ``message`` (its protocol name), ``description``."""

    errno: Optional[int] = None
    message: Optional[str] = None  # type: ignore[assignment]  # kafka-python: the protocol name, a class attribute
    description: Optional[str] = None

    def __str__(self) -> str:
        return f"[Error {self.errno}] {super().__str__()}"


class AuthorizationError(BrokerResponseError):
    pass


class NoError(BrokerResponseError):
    errno = 0
    code = 0
    message = "NO_ERROR"
    description = "No error--it worked!"


# kafka-python's class names where they differ from the protocol name's
# CamelCase (the native tree's names).
_KP_NAMES: Dict[int, str] = {
    -1: "UnknownError", 2: "CorruptRecordError", 4: "InvalidFetchRequestError",
    6: "NotLeaderForPartitionError", 10: "MessageSizeTooLargeError", 13: "NetworkExceptionError",
    17: "InvalidTopicError", 39: "InvalidReplicationAssignmentError", 40: "InvalidConfigurationError",
}
# kafka-python judges these two codes' retriability unlike the Java client.
_KP_RETRIABLE: Dict[int, bool] = {2: False, 51: True}
# Codes after which kafka-python refreshes metadata (its InvalidMetadataError).
_INVALID_METADATA = frozenset({3, 5, 6, 9, 13, 56, 72, 74, 75, 80, 83, 84, 100, 103})
_AUTHORIZATION = frozenset({29, 30, 31, 53, 65})

kafka_errors: Dict[int, Type[BrokerResponseError]] = {0: NoError}


def _define(code: int, name: str, retriable: bool) -> Type[BrokerResponseError]:
    retriable = _KP_RETRIABLE.get(code, retriable)
    bases: tuple = (AuthorizationError,) if code in _AUTHORIZATION else (BrokerResponseError,)
    if code in _INVALID_METADATA:
        bases = (InvalidMetadataError,) + bases
    elif retriable:
        bases = (RetriableError,) + bases
    native = _native.for_code(code)
    if native is not _native.KafkaError:
        bases = bases + (native,)
    cls_name = _KP_NAMES.get(code) or _native._class_name(name)
    cls = type(cls_name, bases, {
        "errno": code, "code": code, "name": name, "message": name, "retriable": retriable,
        "description": f"Kafka error {name} (code {code}).", "__module__": __name__,
        "__doc__": f"Kafka error {name} (code {code}).",
    })
    globals()[cls_name] = cls
    __all__.append(cls_name)
    return cls


for _code, _name, _retriable in _core.error_codes():
    if _code >= -1 and _code not in kafka_errors:
        kafka_errors[_code] = _define(_code, _name, _retriable)

UnknownError = kafka_errors[-1]
CorruptRecordException = kafka_errors[2]
UnsupportedVersionError = kafka_errors[35]


class IncompatibleBrokerVersion(UnsupportedVersionError):  # type: ignore[misc, valid-type]
    pass


def for_code(error_code: int) -> Type[BrokerResponseError]:
    """The class of a broker error code; an ``UnknownError`` subclass with
    that ``errno`` for a code this table does not know."""
    if error_code in kafka_errors:
        return kafka_errors[error_code]
    return type("UnrecognizedBrokerError", (UnknownError,), {"errno": error_code, "code": error_code})


# Client-side (negative, librdkafka-style) codes of the native tree and the
# kafka-python class that means the same thing.
_LOCAL: Dict[int, type] = {
    -185: KafkaTimeoutError,          # _TIMED_OUT
    -192: KafkaTimeoutError,          # _MSG_TIMED_OUT: delivery_timeout_ms expired
    -184: KafkaTimeoutError,          # _QUEUE_FULL: buffer full for max_block_ms
    -187: NoBrokersAvailable,         # _ALL_BROKERS_DOWN
    -195: KafkaConnectionError,       # _TRANSPORT
    -193: KafkaConnectionError,       # _RESOLVE
    -181: KafkaConnectionError,       # _SSL
    -172: IllegalStateError,          # _STATE
    -197: IllegalStateError,          # _DESTROY: the client was closed
    -186: IllegalArgumentError,       # _INVALID_ARG
    -188: kafka_errors[3],            # _UNKNOWN_TOPIC
    -190: kafka_errors[3],            # _UNKNOWN_PARTITION
    -169: kafka_errors[58],           # _AUTHENTICATION: SaslAuthenticationFailedError
    -199: kafka_errors[2],            # _BAD_MSG
    -198: UnsupportedCodecError,      # _BAD_COMPRESSION
    -170: IncompatibleBrokerVersion,  # _NOT_IMPLEMENTED
    -165: IncompatibleBrokerVersion,  # _UNSUPPORTED_FEATURE
}


def translate(exc: BaseException) -> BaseException:
    """The kafka-python error for a native one (anything else unchanged)."""
    if isinstance(exc, KafkaError) or not isinstance(exc, _native.KafkaError):
        return exc
    code = exc.code
    cls = kafka_errors.get(code) if code >= -1 else _LOCAL.get(code)
    if cls is None:
        out: BaseException = KafkaError(exc.message, code=code, retriable=exc.retriable)
    else:
        out = cls(exc.message)
    out.__cause__ = exc
    # A per-topic error map (admin calls) travels with the error.
    errors = getattr(exc, "errors", None)
    if errors is not None:
        out.errors = {k: (None if v is None else translate(v)) for k, v in errors.items()}  # type: ignore[attr-defined]
    return out


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise native errors as their kafka-python classes."""
    try:
        yield
    except _native.KafkaError as e:
        out = translate(e)
        if out is e:
            raise
        raise out from e
