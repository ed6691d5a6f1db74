"""One config layer for every client class.

Options are declared once (snake_case name, type, default, allowed values or range,
Java dotted name). `resolve(table, config, **kwargs)` accepts a dict keyed by dotted
Java/librdkafka names or snake_case names plus keyword arguments, and returns a
validated dict keyed by snake_case names with every default filled in. Anything
unknown or invalid raises ValueError naming the option and what it accepts, so a typo
never silently becomes a default.
"""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from . import _core

__all__ = [
    "Option", "ConfigTable", "resolve",
    "COMMON", "NETWORK_CLIENT", "PRODUCER", "CONSUMER", "ADMIN", "OptionNotSupportedError",
]

_MISSING = object()


@dataclass(frozen=True)
class Option:
    name: str
    type: Any  # int, float, bool, str, "servers", "str_list", or a callable normaliser
    default: Any = None
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    java: str | None = None  # dotted name; derived from name when None
    aliases: tuple[str, ...] = ()
    nullable: bool = False
    doc: str = ""

    @property
    def dotted(self) -> str:
        return self.java or self.name.replace("_", ".")

    def accepted(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        t = {int: "an integer", float: "a number", bool: "a boolean", str: "a string",
             "servers": "'host:port,...' or a list of 'host:port'",
             "str_list": "a comma-separated string or a list of strings"}.get(self.type, "a valid value")
        if self.min is not None and self.max is not None:
            t += f" in [{self.min}, {self.max}]"
        elif self.min is not None:
            t += f" >= {self.min}"
        if self.nullable:
            t += " or None"
        return t

    def _fail(self, key: str, value: Any) -> ValueError:
        return ValueError(f"invalid value {value!r} for option {key!r}: expected {self.accepted()}")

    def coerce(self, key: str, value: Any) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise self._fail(key, value)
        t = self.type
        try:
            if t is bool:
                if isinstance(value, bool):
                    v = value
                elif isinstance(value, str) and value.lower() in ("true", "false"):
                    # dotted-name dicts from properties files carry strings
                    v = value.lower() == "true"
                else:
                    raise TypeError
            elif t is int:
                if isinstance(value, bool):
                    raise TypeError
                if isinstance(value, str):
                    value = value.strip()
                if isinstance(value, float) and not value.is_integer():
                    raise TypeError
                v = int(value)
            elif t is float:
                if isinstance(value, bool):
                    raise TypeError
                v = float(value)
            elif t is str:
                if not isinstance(value, str):
                    raise TypeError
                v = value
            elif t == "servers":
                v = _servers(value)
            elif t == "str_list":
                v = _str_list(value)
            elif callable(t):
                v = t(value)
            else:  # pragma: no cover - table bug
                raise AssertionError(f"bad option type {t!r}")
        except (TypeError, ValueError):
            raise self._fail(key, value) from None
        if self.choices is not None:
            items = v if isinstance(v, tuple) else (v,)
            if not items or any(i not in self.choices for i in items):
                raise self._fail(key, value)
        if self.min is not None and v < self.min:
            raise self._fail(key, value)
        if self.max is not None and v > self.max:
            raise self._fail(key, value)
        return v


def _str_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [s.strip() for s in value.split(",")]
    elif isinstance(value, Iterable):
        items = list(value)
        if not all(isinstance(s, str) for s in items):
            raise TypeError
        items = [s.strip() for s in items]
    else:
        raise TypeError
    items = [s for s in items if s]
    if not items:
        raise ValueError
    return tuple(items)


def _servers(value: Any) -> tuple[str, ...]:
    out = []
    for s in _str_list(value):
        host, sep, port = s.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError
        out.append(s)
    return tuple(out)


# A rule sees the resolved options and the names the caller set explicitly
# (Java's `originals()`): Java's defaults depend on what the user did *not*
# say (e.g. idempotence is on by default only when nothing conflicts with it).
Rule = Callable[[dict, "frozenset[str]"], None]


@dataclass
class ConfigTable:
    name: str
    options: dict[str, Option] = field(default_factory=dict)

    def __init__(self, name: str, *groups: Iterable[Option], rules: Iterable[Rule] = ()) -> None:
        self.name = name
        self.options = {}
        self._lookup: dict[str, Option] = {}
        self.rules: list[Rule] = list(rules)
        for g in groups:
            for o in g:
                self.add(o)

    def add(self, opt: Option) -> None:
        """Later definitions replace earlier ones, so a class can tighten a shared option."""
        self.options[opt.name] = opt
        for k in (opt.name, opt.dotted, *opt.aliases):
            self._lookup[k] = opt

    def extend(self, name: str, *groups: Iterable[Option], rules: Iterable[Rule] = ()) -> "ConfigTable":
        return ConfigTable(name, self.options.values(), *groups, rules=[*self.rules, *rules])

    def find(self, key: str) -> Option:
        opt = self._lookup.get(key)
        if opt is None:
            close = difflib.get_close_matches(key, list(self._lookup), n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(
                f"unknown {self.name} option {key!r}.{hint} Accepted options: "
                + ", ".join(sorted(self.options))
            )
        return opt

    def resolve(self, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        given_by: dict[str, str] = {}
        for source in (config or {}, kwargs):
            if not isinstance(source, Mapping):
                raise ValueError(f"{self.name} config must be a dict, got {type(source).__name__}")
            for key, value in source.items():
                opt = self.find(key)
                prev = given_by.get(opt.name)
                # Same option twice in one call under different spellings is a bug
                # in the caller; keywords deliberately override the dict.
                if prev is not None and source is not kwargs and prev != key:
                    raise ValueError(f"option {opt.name!r} given twice, as {prev!r} and {key!r}")
                given_by[opt.name] = key
                out[opt.name] = opt.coerce(key, value)
        for name, opt in self.options.items():
            if name not in out:
                out[name] = opt.default
        missing = [n for n, o in self.options.items() if o.default is _MISSING and n not in given_by]
        if missing:
            raise ValueError(f"{self.name} requires option(s): {', '.join(missing)}")
        given = frozenset(given_by)
        for rule in self.rules:
            rule(out, given)
        return out


def resolve(table: ConfigTable, config: Mapping[str, Any] | None = None, /, **kwargs: Any) -> dict[str, Any]:
    return table.resolve(config, **kwargs)


REQUIRED = _MISSING


def _acks(v: Any) -> str:
    # Java accepts "all", "-1", "0", "1"; librdkafka users pass ints.
    if isinstance(v, bool):
        raise TypeError
    v = str(v).strip().lower()
    if v == "-1":
        return "all"
    if v not in ("all", "0", "1"):
        raise ValueError
    return v

def _upper(v: Any) -> str:
    # Java validates security.protocol with CaseInsensitiveValidString: "ssl" is SSL.
    if not isinstance(v, str):
        raise TypeError
    return v.strip().upper()


class Secret(str):
    """A str that never shows itself in reprs (config dicts, error messages,
    logs of ``client.config``); ``str()`` still gives the value to the core."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'<redacted>'"


def _secret(v: Any) -> Secret:
    if not isinstance(v, str):
        raise TypeError
    return Secret(v)


def _callable(v: Any) -> Any:
    if not callable(v):
        raise TypeError
    return v


def _check_hostname(v: Any) -> bool:
    # A boolean, or Java/librdkafka's ssl.endpoint.identification.algorithm
    # ("https" = check, "" / "none" = do not).
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in ("https", "true"):
        return True
    if isinstance(v, str) and v.strip().lower() in ("", "none", "false"):
        return False
    raise ValueError


COMMON = [
    Option("bootstrap_servers", "servers", REQUIRED, aliases=("metadata.broker.list",)),
    Option("client_id", str, "ferrokafka"),
    Option("request_timeout_ms", int, 30_000, min=1),
    Option("reconnect_backoff_ms", int, 50, min=0),
    Option("reconnect_backoff_max_ms", int, 1000, min=0),
    Option("retry_backoff_ms", int, 100, min=0),
    Option("retry_backoff_max_ms", int, 1000, min=0),
    Option("socket_connection_setup_timeout_ms", int, 10_000, min=1),
    Option("connections_max_idle_ms", int, 540_000, min=-1),
    Option("metadata_max_age_ms", int, 300_000, min=0),
    Option("max_in_flight_requests_per_connection", int, 5, min=1,
           java="max.in.flight.requests.per.connection",
           aliases=("max.in.flight",)),
    Option("security_protocol", _upper, "PLAINTEXT", choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    Option("sasl_mechanism", str, "PLAIN", choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
           aliases=("sasl.mechanisms",)),
    Option("sasl_username", str, None, nullable=True),
    Option("sasl_password", _secret, None, nullable=True),
    Option("sasl_oauth_token_provider", _callable, None, nullable=True, java="sasl.oauth.token.provider",
           aliases=("oauth_cb",)),
    Option("ssl_cafile", str, None, nullable=True, java="ssl.ca.location", aliases=("ssl.cafile",)),
    Option("ssl_certfile", str, None, nullable=True, java="ssl.certificate.location", aliases=("ssl.certfile",)),
    Option("ssl_keyfile", str, None, nullable=True, java="ssl.key.location", aliases=("ssl.keyfile",)),
    Option("ssl_check_hostname", _check_hostname, True, java="ssl.check.hostname",
           aliases=("ssl.endpoint.identification.algorithm",)),
    Option("max_response_size", int, 100 * 1024 * 1024, min=1024, java="max.response.size"),
]

# --- Java's post-processing rules ------------------------------------------------------
# ProducerConfig / ConsumerConfig / AdminClientConfig (and the client constructors)
# fix some values after parsing, depending on what the user set. Each rule below
# follows one of them: a conflict the user asked for explicitly is an error naming
# the option; a conflict that comes only from a default is resolved the way Java
# resolves it, and logged as Java logs it.

_LOGGERS = {"Producer": "ferrokafka.producer", "Consumer": "ferrokafka.consumer",
            "Admin": "ferrokafka.admin", "NetworkClient": "ferrokafka.network"}

_INT_MAX = 2**31 - 1


class OptionNotSupportedError(ValueError, NotImplementedError):
    """An option ferrokafka knows but cannot honour yet. Raised instead of
    accepting it and doing something else; both a ValueError (an invalid
    option) and a NotImplementedError (what is missing is the feature)."""


def _backoff_rule(table: str) -> Rule:
    def rule(out: dict, given: frozenset) -> None:
        log = logging.getLogger(_LOGGERS.get(table, "ferrokafka"))
        # CommonClientConfigs.postProcessReconnectBackoffConfigs: setting only the
        # base reconnect backoff means a constant backoff, not exponential up to
        # the default maximum.
        if "reconnect_backoff_ms" in given and "reconnect_backoff_max_ms" not in given:
            log.debug("Disabling exponential reconnect backoff because reconnect_backoff_ms is set, "
                      "but reconnect_backoff_max_ms is not.")
            out["reconnect_backoff_max_ms"] = out["reconnect_backoff_ms"]
        # CommonClientConfigs.warnDisablingExponentialBackoff: a maximum below the
        # base gives a constant backoff at the base.
        for base, top in (("reconnect_backoff_ms", "reconnect_backoff_max_ms"),
                          ("retry_backoff_ms", "retry_backoff_max_ms")):
            if base in out and out[base] > out[top]:
                log.warning("%s (%d) is greater than %s (%d): exponential backoff is disabled, "
                            "every backoff is %d ms", base, out[base], top, out[top], out[base])
                out[top] = out[base]
    return rule


def _producer_rule(out: dict, given: frozenset) -> None:
    log = logging.getLogger("ferrokafka.producer")
    # Transactions are not implemented: accepting transactional_id would send
    # records non-transactionally while the application believes otherwise.
    if out["transactional_id"] is not None:
        raise OptionNotSupportedError(
            "option 'transactional_id' is not supported: transactions are not implemented yet "
            "in ferrokafka; leave transactional_id unset (records would otherwise be sent "
            "outside any transaction)")
    # ProducerConfig.postProcessAndValidateIdempotenceConfigs (Kafka 3.2+):
    # idempotence is on by default only when nothing conflicts with it. An
    # explicit enable_idempotence=True with a conflict is an error; the default
    # quietly gives way.
    if out["enable_idempotence"]:
        explicit = "enable_idempotence" in given
        conflicts = []
        if out["retries"] == 0:
            conflicts.append(("retries", "must be greater than 0 when enable_idempotence is true",
                              "retries is set to 0"))
        if out["acks"] != "all":
            conflicts.append(("acks", "must be 'all' when enable_idempotence is true",
                              f"acks is set to {out['acks']}, not 'all'"))
        mif = out["max_in_flight_requests_per_connection"]
        if mif > 5:
            conflicts.append(("max_in_flight_requests_per_connection",
                              f"must be at most 5 when enable_idempotence is true, got {mif}",
                              f"max_in_flight_requests_per_connection is set to {mif}, "
                              "which is greater than 5"))
        if conflicts:
            if explicit:
                key, detail, _ = conflicts[0]
                raise ValueError(f"invalid value {out[key]!r} for option {key!r}: {detail} "
                                 "(or set enable_idempotence=False)")
            for _key, _detail, why in conflicts:
                # Java logs the acks/retries cases at INFO and the in-flight case at WARN.
                level = logging.WARNING if _key.startswith("max_in_flight") else logging.INFO
                log.log(level, "Idempotence will be disabled because %s.", why)
            out["enable_idempotence"] = False
    # KafkaProducer.configureDeliveryTimeout: delivery_timeout_ms must cover
    # linger_ms + request_timeout_ms; an explicit smaller value is an error, the
    # default is raised to the sum.
    floor = min(out["linger_ms"] + out["request_timeout_ms"], _INT_MAX)
    if out["delivery_timeout_ms"] < floor:
        if "delivery_timeout_ms" in given:
            raise ValueError(
                f"invalid value {out['delivery_timeout_ms']!r} for option 'delivery_timeout_ms': "
                f"must be >= linger_ms + request_timeout_ms ({floor})")
        log.warning("delivery_timeout_ms should be equal to or larger than linger_ms + "
                    "request_timeout_ms. Setting it to %d.", floor)
        out["delivery_timeout_ms"] = floor


def _valid_group_instance_id(v: str) -> bool:
    # JoinGroupRequest.validateGroupInstanceId: Kafka's legal topic-name characters.
    return (0 < len(v) <= 249 and v not in (".", "..")
            and all(c.isascii() and (c.isalnum() or c in "._-") for c in v))


def _consumer_rule(out: dict, given: frozenset) -> None:
    group = out["group_id"]
    gii = out["group_instance_id"]
    if gii is not None:
        if not _valid_group_instance_id(gii):
            raise ValueError(
                f"invalid value {gii!r} for option 'group_instance_id': expected 1 to 249 "
                "characters from ASCII letters, digits, '.', '_' and '-' (not '.' or '..')")
        # Java ignores group.instance.id without group.id; an option that would
        # do nothing is refused here instead.
        if group is None:
            raise ValueError("option 'group_instance_id' needs option 'group_id' "
                             "(static membership is a property of a group member)")
    # ConsumerConfig.maybeOverrideEnableAutoCommit: without a group there is
    # nowhere to commit; the default becomes False, an explicit True is an error.
    if group is None:
        if "enable_auto_commit" not in given:
            out["enable_auto_commit"] = False
        elif out["enable_auto_commit"]:
            raise ValueError("invalid value True for option 'enable_auto_commit': "
                             "it cannot be true when no group_id is set")
    # Heartbeat: the interval must be below the session timeout (only a group
    # member heartbeats, so only then).
    if group is not None and out["heartbeat_interval_ms"] >= out["session_timeout_ms"]:
        raise ValueError(
            f"invalid value {out['heartbeat_interval_ms']!r} for option 'heartbeat_interval_ms': "
            f"must be lower than session_timeout_ms ({out['session_timeout_ms']})")


def _admin_rule(out: dict, given: frozenset) -> None:
    # KafkaAdminClient.configureDefaultApiTimeoutMs: an explicit
    # default_api_timeout_ms below request_timeout_ms is an error; the default
    # is raised to request_timeout_ms.
    if out["default_api_timeout_ms"] < out["request_timeout_ms"]:
        if "default_api_timeout_ms" in given:
            raise ValueError(
                f"invalid value {out['default_api_timeout_ms']!r} for option 'default_api_timeout_ms': "
                f"must be no smaller than request_timeout_ms ({out['request_timeout_ms']})")
        logging.getLogger("ferrokafka.admin").warning(
            "Overriding the default value for default_api_timeout_ms (%d) with the explicitly "
            "configured request timeout %d", out["default_api_timeout_ms"], out["request_timeout_ms"])
        out["default_api_timeout_ms"] = out["request_timeout_ms"]


# The bare NetworkClient keeps no metadata of its own (it refreshes broker
# addresses only when asked, SEMANTICS 4): the metadata refresh and retry
# options would be accepted and do nothing, so it does not take them.
_METADATA_ONLY = ("metadata_max_age_ms", "retry_backoff_ms", "retry_backoff_max_ms")
NETWORK_CLIENT = ConfigTable("NetworkClient", [o for o in COMMON if o.name not in _METADATA_ONLY],
                             rules=[_backoff_rule("NetworkClient")])

# librdkafka's error_cb: called with a KafkaError (_TRANSPORT, _RESOLVE,
# _AUTHENTICATION, _ALL_BROKERS_DOWN) from poll/flush in the application's
# thread. Not in COMMON: the low-level NetworkClient has no poll that runs it.
_ERROR_CB = Option("error_cb", _callable, None, nullable=True, java="error_cb")

PRODUCER = ConfigTable("Producer", COMMON, [
    Option("acks", _acks, "all", choices=("all", "0", "1")),
    Option("linger_ms", int, 5, min=0),
    Option("batch_size", int, 16384, min=0),
    Option("buffer_memory", int, 33_554_432, min=0),
    Option("max_block_ms", int, 60_000, min=0),
    Option("max_request_size", int, 1_048_576, min=1),
    Option("compression_type", str, "none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
           aliases=("compression.codec",)),
    Option("enable_idempotence", bool, True),
    Option("transactional_id", str, None, nullable=True),
    Option("retries", int, 2**31 - 1, min=0, max=2**31 - 1),
    Option("delivery_timeout_ms", int, 120_000, min=1),
    # Names and behaviour: rust/ferrokafka-net/src/producer/partitioner.rs.
    Option("partitioner", str, "murmur2", choices=tuple(_core.partitioner_names())),
    Option("metadata_idle_ms", int, 300_000, min=5000, java="metadata.max.idle.ms"),
    # -1: the codec's default level.
    Option("compression_level", int, -1, min=-1, max=22),
    _ERROR_CB,
], rules=[_backoff_rule("Producer"), _producer_rule])

CONSUMER = ConfigTable("Consumer", COMMON, [
    Option("group_id", str, None, nullable=True),
    Option("group_instance_id", str, None, nullable=True),
    Option("auto_offset_reset", str, "latest", choices=("earliest", "latest", "none")),
    Option("enable_auto_commit", bool, True),
    Option("auto_commit_interval_ms", int, 5000, min=0),
    Option("session_timeout_ms", int, 45_000, min=1),
    Option("heartbeat_interval_ms", int, 3000, min=1),
    Option("max_poll_interval_ms", int, 300_000, min=1),
    Option("max_poll_records", int, 500, min=1),
    Option("partition_assignment_strategy", "str_list", ("range", "cooperative-sticky"),
           choices=("range", "roundrobin", "sticky", "cooperative-sticky")),
    Option("fetch_min_bytes", int, 1, min=0),
    Option("fetch_max_bytes", int, 52_428_800, min=0),
    Option("fetch_max_wait_ms", int, 500, min=0),
    Option("max_partition_fetch_bytes", int, 1_048_576, min=1),
    Option("isolation_level", str, "read_uncommitted", choices=("read_uncommitted", "read_committed")),
    Option("check_crcs", bool, True),
    Option("client_rack", str, None, nullable=True),
    Option("default_api_timeout_ms", int, 60_000, min=1),
    _ERROR_CB,
], rules=[_backoff_rule("Consumer"), _consumer_rule])

ADMIN = ConfigTable("Admin", COMMON, [
    Option("default_api_timeout_ms", int, 60_000, min=1),
    _ERROR_CB,
], rules=[_backoff_rule("Admin"), _admin_rule])
