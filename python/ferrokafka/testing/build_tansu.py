"""Build the Tansu broker that :class:`EmbeddedBroker` runs.

    python -m ferrokafka.testing.build_tansu [--id]

Runs ``build_tansu.sh`` shipped beside this module: cargo fetches tansu 0.6.0 from
crates.io, ``tansu-0.6.0.patch`` (also shipped here) is applied and the binary is
cached under ``~/.cache/ferrokafka`` (``FERROKAFKA_CACHE``), where EmbeddedBroker
looks for it. Needs cargo and a C compiler; about 11 minutes cold on 2 cores,
instant once cached. Prints the binary's path.
"""

from __future__ import annotations

import os
import subprocess
import sys


def main(argv: list[str] | None = None) -> int:
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build_tansu.sh")
    return subprocess.call(["bash", script, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
