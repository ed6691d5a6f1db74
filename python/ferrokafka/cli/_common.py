"""What every command shares: the broker to talk to (given, from the environment, or an
embedded one), client options from ``-X name=value`` checked by the native option table,
the clients built from them, and output helpers (JSON, key/value text).

Exit codes (docs/cli.md): 0 ok, 1 a failure (broker unreachable, a record not
delivered, ...), 2 a usage error (argparse, an unknown or invalid option).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import logging
import os
import sys
from typing import Any, Iterator

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

# How long a command waits for the cluster by default (seconds); ``--timeout`` changes it.
DEFAULT_TIMEOUT_S = 30.0


class UsageError(Exception):
    """Bad input from the command line: reported on stderr, exit code 2."""


class Failure(Exception):
    """A command that ran but failed (not a KafkaError): reported, exit code 1."""


def note(msg: str) -> None:
    """A message for the person at the terminal: always stderr, never mixed with data."""
    print(msg, file=sys.stderr, flush=True)


def describe(e: object) -> str:
    """An error for that message: a KafkaError with its class name (which
    says the kind: timeout, authorization...), anything else as it prints."""
    from ..errors import KafkaError

    if isinstance(e, KafkaError):
        return f"{e} ({type(e).__name__})"
    return str(e)


def add_common(p: argparse.ArgumentParser, *, suppress: bool = False) -> None:
    """``--bootstrap``, ``-X`` and ``--timeout`` on a command parser. With
    ``suppress`` (a nested sub-command), an option not given leaves the value the
    enclosing parser set, so ``topics --bootstrap BS describe T`` and
    ``topics describe T --bootstrap BS`` mean the same."""
    d = argparse.SUPPRESS if suppress else None
    p.add_argument("--bootstrap", "-b", default=d, metavar="HOST:PORT",
                   help="brokers (default: $FERROKAFKA_BOOTSTRAP, else an embedded broker for this command)")
    p.add_argument("--embedded", action="store_true", default=argparse.SUPPRESS if suppress else False,
                   help="run against an embedded broker started for this command (the default when "
                        "neither --bootstrap nor $FERROKAFKA_BOOTSTRAP is given)")
    p.add_argument("-X", dest="options", action="append", default=d, metavar="NAME=VALUE",
                   help="client option, Java/librdkafka dotted or snake_case name (repeatable)")
    p.add_argument("--timeout", type=float, default=argparse.SUPPRESS if suppress else DEFAULT_TIMEOUT_S,
                   metavar="SECONDS", help=f"how long to wait for the cluster (default {DEFAULT_TIMEOUT_S:g})")


def action_command(sub: Any, name: str, help: str, description: str, list_help: str,
                   run_list: Any) -> Any:
    """A command whose actions are sub-commands and whose bare form lists
    (``topics``, ``groups``): the command parser, its ``list`` action, and the
    action sub-parsers object the caller adds the other actions to."""
    p = sub.add_parser(name, help=help, description=description)
    add_common(p)
    p.add_argument("--json", action="store_true", help="machine output")
    p.set_defaults(run=run_list)
    acts = p.add_subparsers(dest="action", metavar="ACTION")
    lst = acts.add_parser("list", help=list_help)
    action_common(lst)
    lst.set_defaults(run=run_list)
    return acts


def action_common(p: argparse.ArgumentParser) -> None:
    """The common options on an action, also accepted before it (``topics
    --bootstrap BS describe T`` and ``topics describe T --bootstrap BS``)."""
    add_common(p, suppress=True)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine output")


def parse_pairs(items: list[str] | None, what: str) -> list[tuple[str, str]]:
    out = []
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise UsageError(f"invalid {what} {item!r}: expected NAME=VALUE")
        out.append((name, value))
    return out


def _table(client: str) -> Any:
    from .. import _config

    return {"Producer": _config.PRODUCER, "Consumer": _config.CONSUMER, "Admin": _config.ADMIN}[client]


class Options:
    """``-X`` options, each checked at once by the option table of the clients a
    command builds (the native table: ``_core.option_table``). An option no client
    of the command takes is a usage error naming it, never dropped."""

    def __init__(self, raw: list[str] | None, clients: tuple[str, ...], timeout_s: float) -> None:
        if not timeout_s >= 1:  # also NaN
            raise UsageError(f"invalid --timeout {timeout_s:g}: at least 1 second")
        self.timeout_ms = int(timeout_s * 1000)
        self._per_client: dict[str, dict[str, Any]] = {c: {} for c in clients}
        for name, value in parse_pairs(raw, "-X option"):
            if name in ("bootstrap.servers", "bootstrap_servers"):
                raise UsageError(f"invalid -X option {name!r}: use --bootstrap")
            if name in ("group.id", "group_id"):
                # the commands decide how they use a group (subscribe, commit)
                raise UsageError(f"invalid -X option {name!r}: use --group where a command takes one")
            taken = False
            last_error: ValueError | None = None
            for client in clients:
                table = _table(client)
                try:
                    opt = table.find(name)
                except ValueError as e:
                    last_error = e
                    continue
                try:
                    self._per_client[client][opt.name] = opt.coerce(name, value)
                except ValueError as e:
                    raise UsageError(str(e)) from None
                taken = True
            if not taken:
                raise UsageError(f"-X {name}: {last_error}")

    def config(self, client: str, bootstrap: str, **defaults: Any) -> dict[str, Any]:
        """The client's options: ``defaults`` (what the command needs, the timeout)
        under the user's ``-X`` options, which win."""
        cfg: dict[str, Any] = {"bootstrap_servers": bootstrap}
        t = self.timeout_ms
        if client in ("Admin", "Consumer"):
            # 30 s is the clients' own request timeout; a shorter --timeout bounds it too
            cfg.update(request_timeout_ms=min(t, 30_000), default_api_timeout_ms=t)
        elif client == "Producer":
            cfg.update(max_block_ms=t)
        cfg.update(defaults)
        mine = self._per_client[client]
        cfg.update(mine)
        if "default_api_timeout_ms" in cfg and "default_api_timeout_ms" not in mine:
            # A longer -X request.timeout.ms stretches the --timeout default to
            # fit (the Admin refuses an API timeout below the request timeout).
            cfg["default_api_timeout_ms"] = max(cfg["default_api_timeout_ms"], cfg["request_timeout_ms"])
        try:
            _table(client).resolve(cfg)
        except ValueError as e:
            raise UsageError(str(e)) from None
        return cfg


def options_of(args: argparse.Namespace, clients: tuple[str, ...]) -> Options:
    return Options(getattr(args, "options", None), clients, getattr(args, "timeout", DEFAULT_TIMEOUT_S))


@contextlib.contextmanager
def cluster(args: argparse.Namespace) -> Iterator[str]:
    """The bootstrap servers: ``--bootstrap``, else ``$FERROKAFKA_BOOTSTRAP``, else an
    embedded broker started for this command (said on stderr: its data goes with it)."""
    if getattr(args, "embedded", False):
        if getattr(args, "bootstrap", None):
            raise UsageError("--embedded and --bootstrap exclude each other")
        bs = None
    else:
        bs = getattr(args, "bootstrap", None) or os.environ.get("FERROKAFKA_BOOTSTRAP")
    if bs:
        yield bs
        return
    from ..testing import EmbeddedBroker

    try:
        broker = EmbeddedBroker()
    except Exception as e:  # the binary missing, no free port...: say what and how to fix
        raise Failure(f"no --bootstrap given and the embedded broker cannot start: {e}") from None
    with broker:
        note(f"ferrokafka: no --bootstrap given: started an embedded broker at "
             f"{broker.bootstrap_servers} for this command (its data is gone when it exits)")
        yield broker.bootstrap_servers


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at each record (as logging's own
    last-resort handler), not the stream of the moment it was made: a CLI
    run in-process (tests, notebooks) must not leave a handler on a stream
    that is later replaced or closed."""

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging(verbose: int) -> None:
    """The client's own warnings (a broker down, ...) on stderr, one line each."""
    log = logging.getLogger("ferrokafka")
    if any(getattr(h, "_ferrokafka_cli", False) for h in log.handlers):
        return
    h = _Stderr()
    h.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
    h._ferrokafka_cli = True  # type: ignore[attr-defined]
    log.addHandler(h)
    log.setLevel(logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING)
    log.propagate = False


# ----- output -------------------------------------------------------------------------

def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, sort_keys=False) + "\n")
    sys.stdout.flush()


def bytes_field(out: dict, name: str, data: bytes | None) -> None:
    """``name``: the UTF-8 text, or None; bytes that are not UTF-8 go to
    ``name_base64`` instead, so JSON output never loses or mangles a byte."""
    if data is None:
        out[name] = None
        return
    try:
        out[name] = bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        out[name] = None
        out[name + "_base64"] = base64.b64encode(data).decode("ascii")


def table(rows: list[list[Any]], headers: list[str]) -> str:
    """A plain fixed-width text table."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)
