"""The ``ferrokafka`` command line (also ``python -m ferrokafka``); docs/cli.md.

One module per command group registers its parser and a ``run(args) -> int``;
``main`` turns every failure into a message on stderr and an exit code:
0 ok, 1 failure (a ``KafkaError``: broker unreachable, record not delivered...),
2 usage error (argparse, an unknown or invalid option), 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ._common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Failure, UsageError, describe, setup_logging

__all__ = ["main", "build_parser"]


def _version(args: argparse.Namespace) -> int:
    import ferrokafka

    print(ferrokafka.__version__)
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    from ..demo import run

    return run(bootstrap=args.bootstrap, messages=args.messages, size=args.size, topic=args.topic)


def build_parser(prog: str = "ferrokafka") -> argparse.ArgumentParser:
    from . import consume, groups, metadata, perf, produce, topics

    ap = argparse.ArgumentParser(
        prog=prog, description="Kafka from the command line, with ferrokafka's Rust client.",
        epilog="Exit codes: 0 ok, 1 failure, 2 usage error. Without --bootstrap (and "
               "$FERROKAFKA_BOOTSTRAP) a command starts an embedded broker for itself. See docs/cli.md.")
    ap.add_argument("-v", "--verbose", action="count", default=0, help="client logs on stderr (-vv: debug)")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for mod in (produce, consume, topics, groups, metadata, perf):
        mod.register(sub)
    d = sub.add_parser("demo", help="produce and consume a stream, print throughput")
    d.add_argument("--bootstrap", default=None,
                   help="broker to use (default: $FERROKAFKA_BOOTSTRAP, else an embedded Tansu broker)")
    d.add_argument("--messages", type=int, default=100_000)
    d.add_argument("--size", type=int, default=100, help="value size in bytes")
    d.add_argument("--topic", default=None)
    d.set_defaults(run=_demo)
    sub.add_parser("version", help="print the version").set_defaults(run=_version)
    return ap


def _prog() -> str:
    base = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return "python -m ferrokafka" if base in ("__main__.py", "-m", "") else "ferrokafka"


def main(argv: list[str] | None = None) -> int:
    ap = build_parser(_prog())
    args = ap.parse_args(argv)  # exits 2 on a usage error
    setup_logging(args.verbose)
    from ..errors import KafkaError

    try:
        return int(args.run(args))
    except UsageError as e:
        print(f"{ap.prog} {args.cmd}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (Failure, KafkaError) as e:
        print(f"{ap.prog} {args.cmd}: error: {describe(e)}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print(f"{ap.prog} {args.cmd}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, as cat does.
        _quiet_stdout()
        return EXIT_OK


def _quiet_stdout() -> None:
    # Python flushes stdout at exit; with the pipe closed that would print a
    # second BrokenPipeError. Point stdout at /dev/null instead.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def entry_point() -> Any:
    """The console script (pyproject.toml ``[project.scripts]``)."""
    sys.exit(main())
