"""Compare builds of the extension on one ``thread_cpu.py`` mode, alternating.

A diagnostic for changes to a hot path (issue 17), not the benchmark protocol
(``benches/compare.py``): each build is run in turn, round after round, so the
VM's drifting noise falls on all of them alike, and the best and the median of
each build's client CPU a record (``getrusage``, all threads) and of its
calling thread inside ``send_batch`` are printed. A build is a copy of
``python/ferrokafka/_core.abi3.so`` kept from an earlier ``./scripts/build.sh``;
the working tree is not touched (each build runs from a copy of the package):

    cp python/ferrokafka/_core.abi3.so /tmp/before.so   # then change, rebuild
    python benches/ab_builds.py --rounds 6 /tmp/before.so python/ferrokafka/_core.abi3.so

``--knobs`` runs each build once per option set instead (``thread_cpu.py
--set``, comma-separated; an empty set is the defaults), to weigh a default
against another value on one build:

    python benches/ab_builds.py python/ferrokafka/_core.abi3.so --knobs "" --knobs send_buffer_bytes=131072
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "python", "ferrokafka")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="paths of _core.abi3.so builds")
    ap.add_argument("--mode", default="send_batch_list",
                    choices=["send_batch_list", "send_batch_arrow", "poll_arrow"])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--knobs", action="append", default=None,
                    help="comma-separated KEY=VALUE options; repeat for each set")
    args = ap.parse_args()
    knob_sets = args.knobs if args.knobs is not None else [""]
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, so in enumerate(args.builds):
            root = os.path.join(tmp, str(i))
            shutil.copytree(PACKAGE, os.path.join(root, "ferrokafka"),
                            ignore=shutil.ignore_patterns("_core*.so", "__pycache__"))
            shutil.copy(so, os.path.join(root, "ferrokafka", "_core.abi3.so"))
            paths.append(root)
        # A variant: one build with one option set, named by both.
        variants = [(so, root, knobs) for so, root in zip(args.builds, paths) for knobs in knob_sets]
        name = {v: v[0] + (f" [{v[2] or 'defaults'}]" if len(knob_sets) > 1 else "") for v in variants}
        total = {v: [] for v in variants}
        calling = {v: [] for v in variants}
        for r in range(args.rounds):
            for v in variants:
                so, root, knobs = v
                sets = [a for kv in knobs.split(",") if kv for a in ("--set", kv)]
                env = dict(os.environ, PYTHONPATH=root)
                out = subprocess.run(
                    [sys.executable, os.path.join(HERE, "thread_cpu.py"), args.mode,
                     "--records", str(args.records), *sets],
                    env=env, capture_output=True, text=True, check=True).stdout
                total[v].append(float(re.search(r"([0-9.]+) µs CPU a record", out).group(1)))
                m = re.search(r"inside send_batch: ([0-9.]+) ns", out)
                if m:
                    calling[v].append(float(m.group(1)))
                print(f"round {r + 1} {name[v]}: {total[v][-1]:.3f} µs", flush=True)
    for v in variants:
        line = f"{name[v]}: best {min(total[v]):.3f} median {statistics.median(total[v]):.3f} µs a record"
        if calling[v]:
            line += (f"; calling thread best {min(calling[v]):.1f}"
                     f" median {statistics.median(calling[v]):.1f} ns")
        print(line)

if __name__ == "__main__":
    main()
