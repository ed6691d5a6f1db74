"""The one Python exception tree of ferrokafka.

Every failure the client reports is a :class:`KafkaError` (or a subclass):

* one class per Kafka protocol error code (``NotLeaderOrFollowerError`` for
  code 6, ...), generated from the table compiled into the Rust core, so the
  names and retriability match the Java client's ``Errors`` enum;
* client-side conditions use librdkafka's negative local codes (``-185``
  ``_TIMED_OUT``, ``-195`` ``_TRANSPORT``, ...), so code that checks
  ``err.code`` after switching from confluent-kafka keeps working.

Look a class up with :func:`for_code` / :func:`for_name`, or by attribute:
``ferrokafka.errors.NotLeaderOrFollowerError``.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

from . import _core

__all__ = [
    "KafkaError",
    "KafkaTimeoutError",
    "KafkaConnectionError",
    "CorruptMessageError",
    "UnsupportedVersionError",
    "AuthenticationError",
    "MessageSizeTooLargeError",
    "IllegalStateError",
    "TransactionAbortedError",
    "ProducerFencedError",
    "KafkaClosedError",
    "for_code",
    "for_name",
]


class KafkaError(Exception):
    """Base of every ferrokafka error.

    ``code`` is the Kafka error code (or a negative local code), ``name`` its
    upper-snake name, ``retriable`` whether retrying may succeed.
    """

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False

    def __init__(self, message: str = "", *, code: Optional[int] = None,
                 retriable: Optional[bool] = None) -> None:
        super().__init__(message or self.name)
        if code is not None:
            self.code = code
            if type(self) is KafkaError:
                self.name = _NAMES.get(code, self.name)
        if retriable is not None:
            self.retriable = retriable

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.name

    def __reduce__(self):  # keep code/retriable across pickling (Spark ships errors)
        return (_rebuild, (type(self), self.message, self.code, self.retriable))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, name={self.name!r}, message={self.message!r})"


def _rebuild(cls, message, code, retriable):
    return cls(message, code=code, retriable=retriable)


_NAMES: Dict[int, str] = {}
_BY_CODE: Dict[int, Type[KafkaError]] = {}
_BY_NAME: Dict[str, Type[KafkaError]] = {}


def _class_name(name: str) -> str:
    base = "".join(part.capitalize() for part in name.strip("_").split("_"))
    return base if base.endswith(("Error", "Exception")) else base + "Error"


def _register(cls: Type[KafkaError]) -> Type[KafkaError]:
    _BY_CODE[cls.code] = cls
    _BY_NAME[cls.name] = cls
    globals()[cls.__name__] = cls
    return cls


def _define(code: int, name: str, retriable: bool, *bases: type) -> Type[KafkaError]:
    cls = type(_class_name(name), bases or (KafkaError,),
               {"code": code, "name": name, "retriable": retriable,
                "__module__": __name__,
                "__doc__": f"Kafka error {name} (code {code})."})
    return _register(cls)


class KafkaTimeoutError(KafkaError, TimeoutError):
    """A deadline passed (local code -185, ``_TIMED_OUT``). Also a ``TimeoutError``."""

    code = -185
    name = "_TIMED_OUT"
    retriable = True


class KafkaConnectionError(KafkaError, ConnectionError):
    """The connection to a broker failed or closed (local code -195, ``_TRANSPORT``)."""

    code = -195
    name = "_TRANSPORT"
    retriable = True


class KafkaClosedError(KafkaError):
    """The client was closed while the call waited (local code -197, ``_DESTROY``)."""

    code = -197
    name = "_DESTROY"


class IllegalStateError(KafkaError):
    """A call made in a state that does not allow it (local code -172, ``_STATE``)."""

    code = -172
    name = "_STATE"


for _cls in (KafkaTimeoutError, KafkaConnectionError, KafkaClosedError, IllegalStateError):
    _register(_cls)

# Kafka's codes and the core's local ones, names and retriability: one table,
# compiled into the Rust core (rust/ferrokafka-py/src/errors.rs).
for _code, _name, _retriable in _core.error_codes():
    _NAMES[_code] = _name
    if _code not in _BY_CODE:
        _define(_code, _name, _retriable)

# Friendly aliases matching the Java/kafka-python class names.
UnsupportedVersionError = _BY_CODE[35]
CorruptMessageError = _BY_CODE[2]
MessageSizeTooLargeError = _BY_CODE[10]
AuthenticationError = _BY_CODE[-169]
globals()["MessageTooLargeError"] = MessageSizeTooLargeError
# A record of an aborted transaction that was never sent (Java's
# TransactionAbortedException; librdkafka's _PURGE_QUEUE).
TransactionAbortedError = _BY_CODE[-152]
# Another producer with the same transactional id took over (code 90; Java's
# ProducerFencedException). Named here so it can be imported statically.
ProducerFencedError = _BY_CODE[90]


def for_code(code: int) -> Type[KafkaError]:
    """The exception class of a Kafka error code or local code (KafkaError if unknown)."""
    return _BY_CODE.get(code, KafkaError)


def for_name(name: str) -> Type[KafkaError]:
    """The exception class of an error name, e.g. ``"NOT_LEADER_OR_FOLLOWER"``."""
    try:
        return _BY_NAME[name.upper()]
    except KeyError:
        raise KeyError(f"unknown Kafka error name {name!r}") from None


def _from_core(code: int, message: str, retriable: bool) -> KafkaError:
    """Called by the Rust core to build the exception for a core error."""
    cls = for_code(code)
    return cls(message, code=code, retriable=retriable)
