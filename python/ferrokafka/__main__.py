"""python -m ferrokafka <command>"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ferrokafka")
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="produce and consume a stream, print throughput")
    d.add_argument("--bootstrap", default=None,
                   help="broker to use (default: $FERROKAFKA_BOOTSTRAP, else an embedded Tansu broker)")
    d.add_argument("--messages", type=int, default=100_000)
    d.add_argument("--size", type=int, default=100, help="value size in bytes")
    d.add_argument("--topic", default=None)
    sub.add_parser("version", help="print the version")
    args = ap.parse_args(argv)
    if args.cmd == "version":
        import ferrokafka

        print(ferrokafka.__version__)
        return 0
    from .demo import run

    return run(bootstrap=args.bootstrap, messages=args.messages, size=args.size, topic=args.topic)


if __name__ == "__main__":
    sys.exit(main())
