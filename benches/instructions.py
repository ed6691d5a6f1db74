"""Instructions a record on ``send_batch``'s calling thread, counted by callgrind.

A diagnostic for changes to the batch path's hot loop (issue 17), not the
benchmark protocol (``benches/compare.py``): on a shared VM the CPU time of one
build varies by 10-30% from run to run (``benches/ab_builds.py`` rounds), which
hides a change of a few percent; an instruction count does not vary. Each build
runs ``send_batch`` against the sink broker under valgrind's callgrind, which
counts only inside the ``send_many`` (or ``send_many_arrow``) calls, so the
figure is the calling thread's work for the call: reading the list or the Arrow
columns, appending and encoding every record, making its completion. Fewer
instructions is not the same as less time (cache misses, page faults and
stalls are not counted), so a change is kept on both this and the CPU time.

    python benches/instructions.py python/ferrokafka/_core.abi3.so /tmp/before.so [--mode arrow]

Needs valgrind (Debian: ``apt-get install valgrind``). A build is a copy of
``python/ferrokafka/_core.abi3.so``, run from a copy of the package.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "python", "ferrokafka")
BATCH = 10_000


def child(mode: str, n: int) -> None:
    """The measured process: ``n`` records in calls of 10,000, defaults, one
    partition, as the ceiling run (acks=1, idempotence off)."""
    sys.path.insert(0, HERE)
    from _sink import Sink

    import ferrokafka as fk

    with Sink(100) as sink:
        p = fk.Producer(sink.bootstrap, acks=1, enable_idempotence=False)
        p.send("t", b"w").result(30)
        chunks = [[b"x" * 100] * BATCH for _ in range(0, n, BATCH)]
        if mode == "arrow":
            import pyarrow as pa

            chunks = [pa.array(v, pa.binary()) for v in chunks]
        for v in chunks:
            p.send_batch("t", v)
        if p.flush(300):
            raise SystemExit("not all delivered")
        p.close()


def callgrind(argv: list, toggle: str, tmp: str, **run) -> str:
    """The text of callgrind's output for ``argv``, counting only inside
    functions matching ``toggle``; ``run`` goes to ``subprocess.run``. Shared
    with ``decode_instructions.py``."""
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    out = os.path.join(tmp, "callgrind.out")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    f"--toggle-collect={toggle}", *argv], check=True, **run)
    with open(out) as f:
        return f.read()


def total(text: str) -> int:
    """The instructions counted, from callgrind's output."""
    totals = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
    if not totals:
        raise RuntimeError("no totals in callgrind's output")
    return int(totals.group(1))


def count(so: str, mode: str, n: int) -> int:
    """Instructions callgrind counted inside the calls, for build `so`."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(PACKAGE, os.path.join(tmp, "ferrokafka"),
                        ignore=shutil.ignore_patterns("_core*.so", "__pycache__"))
        shutil.copy(so, os.path.join(tmp, "ferrokafka", "_core.abi3.so"))
        fn = "send_many_arrow" if mode == "arrow" else "send_many"
        env = dict(os.environ, PYTHONPATH=tmp)
        return total(callgrind([sys.executable, os.path.abspath(__file__), "--child", mode, str(n)],
                               f"*__pymethod_{fn}__*", tmp, env=env, capture_output=True, cwd=tmp))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="paths of _core.abi3.so builds")
    ap.add_argument("--mode", default="list", choices=["list", "arrow"])
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args()
    for so in args.builds:
        ir = count(so, args.mode, args.records)
        print(f"{so} [{args.mode}]: {ir / args.records:.1f} instructions a record on the calling thread")


if __name__ == "__main__":
    main()
