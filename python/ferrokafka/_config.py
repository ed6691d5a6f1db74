"""One config layer for every client class: argument parsing over the option table.

The options themselves (name, Java/librdkafka dotted names, type, default, range or
choices, which clients take them, what they fill in the core) are declared once, in
Rust (``ferrokafka_net::options``), and come here through ``_core.option_table()``;
each value is checked by the same Rust code (``_core.coerce_option``).
``resolve(table, config, **kwargs)`` accepts a dict keyed by dotted Java/librdkafka
names or snake_case names plus keyword arguments, and returns a validated dict keyed
by snake_case names with every default filled in. Anything unknown or invalid raises
ValueError naming the option and what it accepts, so a typo never silently becomes a
default. What stays in Python: merging the arguments, Python-object options
(callables), and Java's cross-option post-processing rules, which depend on what the
user set explicitly and log to the clients' Python loggers.

``python scripts/gen-options-doc.py`` writes docs/options.md from the table.
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


class _Kind:
    """The ``type`` of an option whose reading has no Python type of its own
    (``acks``, ``secret``...): calling it checks a value as the table does."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __call__(self, value: Any) -> Any:
        return _core.coerce_option(self.kind, "value", value)

    def __repr__(self) -> str:
        return f"<option kind {self.kind}>"


# kind name (Rust) <-> the ``type`` an Option carries in Python
_KIND_TYPES: dict[str, Any] = {"int": int, "float": float, "bool": bool, "str": str,
                               "servers": "servers", "str_list": "str_list"}
_KINDS: dict[str, Any] = {**_KIND_TYPES, **{k: _Kind(k) for k in (
    "acks", "upper", "secret", "check_hostname", "callable")}}


def _kind_of(t: Any) -> str | None:
    if isinstance(t, _Kind):
        return t.kind
    for name, py in _KIND_TYPES.items():
        if py is t or (isinstance(t, str) and py == t):
            return name
    return None


@dataclass(frozen=True)
class Option:
    name: str
    type: Any  # int, float, bool, str, "servers", "str_list", a table kind, or a Python normaliser
    default: Any = None
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    java: str | None = None  # dotted name; derived from name when None
    aliases: tuple[str, ...] = ()
    nullable: bool = False
    doc: str = ""
    clients: tuple[str, ...] = ()
    effect: str = "core"  # "core", "python" or "refused"
    effect_detail: Any = None  # fields filled / where used / why refused
    needs: tuple[tuple[str, str], ...] = ()

    @property
    def dotted(self) -> str:
        return self.java or self.name.replace("_", ".")

    @property
    def kind(self) -> str | None:
        """The table kind; None for a Python normaliser (a callable ``type``)."""
        return _kind_of(self.type)

    def _limits(self) -> dict:
        return dict(min=None if self.min is None else int(self.min),
                    max=None if self.max is None else int(self.max),
                    choices=None if self.choices is None else [str(c) for c in self.choices],
                    nullable=self.nullable)

    def accepted(self) -> str:
        kind = self.kind
        if kind is None:
            return "a valid value" + (" or None" if self.nullable else "")
        return _core.option_accepted(kind, **self._limits())

    def coerce(self, key: str, value: Any) -> Any:
        kind = self.kind
        if kind is None:
            # A Python-object option: its normaliser is the whole check.
            if value is None and self.nullable:
                return None
            try:
                return self.type(value)
            except (TypeError, ValueError):
                raise ValueError(f"invalid value {value!r} for option {key!r}: "
                                 f"expected {self.accepted()}") from None
        v = _core.coerce_option(kind, key, value, **self._limits())
        return Secret(v) if kind == "secret" and v is not None else v


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


class Secret(str):
    """A str that never shows itself in reprs (config dicts, error messages,
    logs of ``client.config``); ``str()`` still gives the value to the core."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'<redacted>'"


def _from_row(row: Mapping[str, Any]) -> Option:
    choices = tuple(row["choices"]) or None
    return Option(
        row["name"], _KINDS[row["kind"]], REQUIRED if row["required"] else row["default"],
        choices=choices, min=row["min"], max=row["max"], java=row["java"],
        aliases=tuple(row["aliases"]), nullable=row["nullable"], doc=row["doc"],
        clients=tuple(row["clients"]), effect=row["effect"], effect_detail=row["effect_detail"],
        needs=tuple(tuple(n) for n in row["needs"]))


# Every option, from the one table in Rust.
OPTIONS: dict[str, Option] = {row["name"]: _from_row(row) for row in _core.option_table()}


def _taken_by(client: str) -> list[Option]:
    return [o for o in OPTIONS.values() if client in o.clients]


# What every high-level client takes.
COMMON = [o for o in OPTIONS.values() if {"Producer", "Consumer", "Admin"} <= set(o.clients)]

# --- Java's post-processing rules ------------------------------------------------------
# ProducerConfig / ConsumerConfig / AdminClientConfig (and the client constructors)
# fix some values after parsing, depending on what the user set. Each rule below
# follows one of them: a conflict the user asked for explicitly is an error naming
# the option; a conflict that comes only from a default is resolved the way Java
# resolves it, and logged as Java logs it.

_LOGGERS = {"Producer": "ferrokafka.producer", "Consumer": "ferrokafka.consumer",
            "Admin": "ferrokafka.admin", "NetworkClient": "ferrokafka.network",
            "ShareConsumer": "ferrokafka.share"}

_INT_MAX = 2**31 - 1


class OptionNotSupportedError(ValueError, NotImplementedError):
    """An option ferrokafka knows but cannot honour yet. Raised instead of
    accepting it and doing something else; both a ValueError (an invalid
    option) and a NotImplementedError (what is missing is the feature)."""


def _refused_rule(table: str) -> Rule:
    def rule(out: dict, given: frozenset) -> None:
        # An option the table marks as refused is never accepted and ignored:
        # anything but its default is an error saying why.
        for name in sorted(given):
            opt = OPTIONS.get(name)
            if opt is not None and opt.effect == "refused" and table in opt.clients \
                    and out[name] != opt.default:
                raise OptionNotSupportedError(f"option {name!r} is not supported: {opt.effect_detail}")
    return rule


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
    # ProducerConfig.postProcessAndValidateIdempotenceConfigs (Kafka 3.2+):
    # idempotence is on by default only when nothing conflicts with it. An
    # explicit enable_idempotence=True with a conflict is an error; the default
    # quietly gives way.
    if out.get("transactional_id") is not None and out["enable_idempotence"]:
        # Java: a transactional id needs idempotence, so a conflict with it is
        # an error, never a quiet downgrade (docs/semantics.md §7).
        given = given | {"enable_idempotence"}
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
    # KIP-848 (docs/semantics.md §6): the coordinator
    # owns the session, the heartbeat interval and the assignment, so the
    # classic settings of them are refused when set, as Java refuses them.
    if out.get("group_protocol") == "consumer":
        for key in ("partition_assignment_strategy", "session_timeout_ms", "heartbeat_interval_ms"):
            if key in given:
                raise ValueError(
                    f"option {key!r} is not supported with group_protocol='consumer' "
                    "(the group coordinator decides it; see group_remote_assignor)")
        return
    if out.get("group_remote_assignor") is not None:
        raise ValueError("option 'group_remote_assignor' needs group_protocol='consumer'")
    # Heartbeat: the interval must be below the session timeout (only a group
    # member heartbeats, so only then).
    if group is not None and out["heartbeat_interval_ms"] >= out["session_timeout_ms"]:
        raise ValueError(
            f"invalid value {out['heartbeat_interval_ms']!r} for option 'heartbeat_interval_ms': "
            f"must be lower than session_timeout_ms ({out['session_timeout_ms']})")


def _share_rule(out: dict, given: frozenset) -> None:
    # A share consumer always belongs to a share group (KafkaShareConsumer
    # requires group.id).
    if not out["group_id"]:
        raise ValueError("invalid value None for option 'group_id': a ShareConsumer needs the "
                         "share group's id")


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


def _stats_rule(out: dict, given: frozenset) -> None:
    # librdkafka would queue the statistics as events nobody reads; here an
    # interval without a callback would do nothing, so it is refused.
    if out.get("statistics_interval_ms", 0) > 0 and out.get("stats_cb") is None:
        raise ValueError("option 'statistics_interval_ms' needs option 'stats_cb' "
                         "(the callback that gets the statistics)")


def _rules(client: str, *extra: Rule) -> list[Rule]:
    return [_refused_rule(client), _backoff_rule(client), *extra]


# The bare NetworkClient keeps no metadata of its own (it refreshes broker
# addresses only when asked, docs/semantics.md §4): the table does not give it
# the metadata refresh and retry options, which would do nothing.
NETWORK_CLIENT = ConfigTable("NetworkClient", _taken_by("NetworkClient"), rules=_rules("NetworkClient"))
PRODUCER = ConfigTable("Producer", _taken_by("Producer"), rules=_rules("Producer", _producer_rule, _stats_rule))
CONSUMER = ConfigTable("Consumer", _taken_by("Consumer"), rules=_rules("Consumer", _consumer_rule, _stats_rule))
ADMIN = ConfigTable("Admin", _taken_by("Admin"), rules=_rules("Admin", _admin_rule))
SHARE_CONSUMER = ConfigTable("ShareConsumer", _taken_by("ShareConsumer"),
                             rules=_rules("ShareConsumer", _share_rule))


# --- docs/options.md -----------------------------------------------------------------

def _md(v: Any) -> str:
    return str(v).replace("|", "\\|")


def options_markdown() -> str:
    """docs/options.md: every option of the table (a test keeps the file in step)."""
    lines = [
        "# Options",
        "",
        "<!-- Generated by `python scripts/gen-options-doc.py` from the option table",
        "     (rust/ferrokafka-net/src/options/table.rs); do not edit by hand. -->",
        "",
        "Every client takes its options as keyword arguments (`linger_ms=10`) or as a dict of",
        "the same names or their Java / librdkafka dotted spellings (`{\"linger.ms\": 10}`).",
        "An unknown option or an invalid value raises `ValueError` naming it; an option",
        "marked *refused* raises `OptionNotSupportedError` when set.",
        "",
        "Clients: P = Producer, C = Consumer, A = Admin, N = NetworkClient,",
        "M = Metadata, PM = ProducerMetadata, S = ShareConsumer.",
        "",
        "| Option | Also accepted as | Clients | Default | Accepts | Effect | Meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    short = {"Producer": "P", "Consumer": "C", "Admin": "A", "NetworkClient": "N",
             "Metadata": "M", "ProducerMetadata": "PM", "ShareConsumer": "S"}
    for o in OPTIONS.values():
        names = ", ".join(f"`{n}`" for n in dict.fromkeys((o.dotted, *o.aliases)) if n != o.name)
        default = "required" if o.default is REQUIRED else f"`{o.default!r}`"
        if o.effect == "core":
            effect = ", ".join(f"`{f}`" for f in o.effect_detail)
        elif o.effect == "python":
            effect = f"Python: {o.effect_detail}"
        else:
            effect = f"refused: {o.effect_detail}"
        meaning = o.doc
        for k, v in o.needs:
            meaning += (f" Only used when `{k}` is set." if v == "*" else
                        f" Only used when `{k}` is " + " or ".join(v.split("|")) + ".")
        row = [f"`{o.name}`", names, " ".join(short[c] for c in o.clients), default,
               o.accepted(), effect, meaning]
        lines.append("| " + " | ".join(_md(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def write_docs(path: str = "docs/options.md") -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(options_markdown())
