"""Option tables: snake_case keywords, Java/librdkafka dotted names, checks.

Every client class declares its options as a tuple of :class:`Option`; this
module turns ``(positional, kwargs)`` into one validated dict keyed by the
snake_case name, raising ``ValueError`` that names the option and what is
accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Option:
    name: str
    dotted: str
    default: Any
    kind: Any = None  # int, str, bool, "servers"
    minimum: Optional[int] = None
    maximum: Optional[int] = None
    choices: Tuple[str, ...] = ()
    convert: Optional[Callable[[Any], Any]] = None
    accepted: str = ""
    required: bool = False
    extra_names: Tuple[str, ...] = field(default=())


def _describe(o: Option) -> str:
    if o.accepted:
        return o.accepted
    if o.choices:
        return "one of " + ", ".join(repr(c) for c in o.choices)
    if o.kind is bool:
        return "a bool"
    if o.kind is int:
        lo = "" if o.minimum is None else f" >= {o.minimum}"
        hi = "" if o.maximum is None else f" <= {o.maximum}"
        return f"an integer{lo}{hi}"
    if o.kind == "servers":
        return "'host:port[,host:port...]' or a list of 'host:port'"
    return "a string"


def _servers(v: Any) -> list:
    if isinstance(v, str):
        items = [s.strip() for s in v.split(",")]
    elif isinstance(v, (list, tuple)):
        items = [str(s).strip() for s in v]
    else:
        raise ValueError
    items = [s for s in items if s]
    if not items:
        raise ValueError
    for s in items:
        host, _, port = s.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError
    return items


def _check(o: Option, v: Any) -> Any:
    if o.convert is not None:
        return o.convert(v)
    if o.kind == "servers":
        return _servers(v)
    if o.kind is bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        raise ValueError
    if o.kind is int:
        if isinstance(v, bool):
            raise ValueError
        if isinstance(v, str):
            v = int(v.strip())
        if not isinstance(v, int):
            raise ValueError
        if o.minimum is not None and v < o.minimum:
            raise ValueError
        if o.maximum is not None and v > o.maximum:
            raise ValueError
        return v
    if o.kind is str:
        if not isinstance(v, str):
            raise ValueError
        if o.choices and v.lower() not in o.choices:
            raise ValueError
        return v.lower() if o.choices else v
    return v


def resolve_options(options: Sequence[Option], positional: Any, kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """Merge a positional bootstrap string/list or config dict with keywords."""
    by_name: Dict[str, Option] = {}
    for o in options:
        by_name[o.name] = o
        by_name[o.dotted] = o
        for n in o.extra_names:
            by_name[n] = o
    given: Dict[str, Any] = {}

    def put(key: str, value: Any) -> None:
        o = by_name.get(key)
        if o is None:
            known = ", ".join(sorted(x.name for x in options))
            raise ValueError(f"unknown option {key!r}; accepted options: {known}")
        given[o.name] = (key, value)

    if isinstance(positional, Mapping):
        for k, v in positional.items():
            put(k, v)
    elif positional is not None:
        put("bootstrap_servers", positional)
    for k, v in kwargs.items():
        put(k, v)
    out: Dict[str, Any] = {}
    for o in options:
        if o.name in given:
            key, value = given[o.name]
            try:
                out[o.name] = _check(o, value)
            except (ValueError, TypeError):
                raise ValueError(f"invalid value for {key}: {value!r}; expected {_describe(o)}") from None
        elif o.required:
            raise ValueError(f"missing option {o.name} ({o.dotted}); expected {_describe(o)}")
        else:
            # Defaults go through the same conversion ("all" -> -1).
            out[o.name] = o.default if o.convert is None else o.convert(o.default)
    return out
