"""Compare builds of the extension on per-record ``send()`` to Tansu, alternating.

A diagnostic for a change that might touch ``send()``'s throughput (issue 17),
not the benchmark protocol (``benches/compare.py``): one embedded Tansu for the
whole run; each round runs every build once, in turn, in a child process of its
own, on a fresh one-partition topic: ``--records`` records of 100 B sent one by
one (futures dropped), clock from the first send to the return of ``flush()``,
CPU from ``getrusage`` of the child around the same section. Prints each run,
then the best and the median wall time and CPU a record of each build. A build
is a copy of ``python/ferrokafka/_core.abi3.so`` kept from an earlier build:

    cp python/ferrokafka/_core.abi3.so /tmp/before.so   # then change, rebuild
    python benches/ab_send.py --rounds 10 --acks all /tmp/before.so python/ferrokafka/_core.abi3.so

``--acks all`` turns idempotence on (as the protocol's acks=all rows); ``1`` off.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "python", "ferrokafka")


def child(bootstrap: str, records: int, acks: str) -> dict:
    import ferrokafka as fk

    topic = "ab-send-" + uuid.uuid4().hex[:10]
    admin = fk.Admin(bootstrap)
    admin.create_topics([fk.NewTopic(topic, 1, 1)])
    knobs = {"acks": "all", "enable_idempotence": True} if acks == "all" else {"acks": 1, "enable_idempotence": False}
    p = fk.Producer(bootstrap, **knobs)
    p.send(topic, b"w").result(30)  # connection, metadata, producer id: before the clock
    payload, send = b"x" * 100, p.send
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(records):
        send(topic, payload)
    left = p.flush(300)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    p.close()
    admin.delete_topics([topic])
    admin.close()
    if left:
        raise RuntimeError(f"{left} records not delivered")
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return {"wall": wall, "cpu_us": cpu / records * 1e6}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="paths of _core.abi3.so builds")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--acks", choices=["1", "all"], default="all")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(PACKAGE))
    import ferrokafka.testing as fkt

    runs: dict = {so: [] for so in args.builds}
    with fkt.EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        roots = {}
        for i, so in enumerate(args.builds):
            root = os.path.join(tmp, str(i))
            shutil.copytree(PACKAGE, os.path.join(root, "ferrokafka"),
                            ignore=shutil.ignore_patterns("_core*.so", "__pycache__"))
            shutil.copy(so, os.path.join(root, "ferrokafka", "_core.abi3.so"))
            roots[so] = root
        for r in range(args.rounds):
            for so in args.builds:
                out = subprocess.run(
                    [sys.executable, __file__, "--child", broker.bootstrap_servers, str(args.records), args.acks],
                    env=dict(os.environ, PYTHONPATH=roots[so]), capture_output=True, text=True, check=True)
                run = json.loads(out.stdout.strip().splitlines()[-1])
                runs[so].append(run)
                print(f"round {r}: {so}: {run['wall']:.3f} s, {run['cpu_us']:.3f} µs CPU a record", flush=True)
    for so, rs in runs.items():
        walls, cpus = [x["wall"] for x in rs], [x["cpu_us"] for x in rs]
        print(f"{so}: wall best {min(walls):.3f} median {statistics.median(walls):.3f} s; "
              f"CPU a record best {min(cpus):.3f} median {statistics.median(cpus):.3f} µs")


if __name__ == "__main__":
    main()
