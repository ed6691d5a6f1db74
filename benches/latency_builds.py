"""Acknowledgement latency of builds of the extension, alternating, against the
embedded broker.

A diagnostic for changes to the path a single record takes (issue 17), not the
benchmark protocol (``benches/compare.py``, whose latency section is the
figure of record). Two measures:

* ``paced`` (default): ``compare.py``'s own latency child (10k records a
  second for 3 s, ``linger_ms=0``, ``acks=all`` with idempotence, busy
  ``poll(0)`` between sends, a fresh topic each run), once per build per
  round; ``--confluent`` adds confluent-kafka's run to each round.
* ``sequential``: one record at a time, its delivery callback awaited with
  ``poll(0)``, then 5 ms of polling before the next: the round trip with every
  thread idle when the record is sent.
* ``result`` / ``flush`` / ``poll``: one record at a time, waited for as
  synchronous code waits: ``send(...).result()`` (kafka-python's
  ``send(...).get()``), ``send`` then ``flush()``, or ``send`` with a delivery
  callback then ``poll(1)`` until it ran (with ``--confluent``,
  confluent-kafka's ``produce`` then ``flush()`` or ``poll(1)`` too); defaults but ``linger_ms=0``, the calling
  thread blocked, not polling, until the acknowledgement. These also print
  the client process's CPU a record (``getrusage``, all its threads; the
  broker is another process).

Builds run in turn, round after round, each from a copy of the package, so
the VM's drifting noise falls on all of them alike; p50 and p99 (paced) or p50
and p90 (sequential) per run are printed, in ms:

    cp python/ferrokafka/_core.abi3.so /tmp/before.so   # then change, rebuild
    python benches/latency_builds.py --rounds 3 --confluent /tmp/before.so python/ferrokafka/_core.abi3.so
    python benches/latency_builds.py --mode sequential --records 1000 /tmp/before.so python/ferrokafka/_core.abi3.so
    python benches/latency_builds.py --mode flush --confluent /tmp/before.so python/ferrokafka/_core.abi3.so
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(os.path.dirname(HERE), "python", "ferrokafka")


def sequential(bootstrap: str, records: int) -> dict:
    """The measured child of ``--mode sequential`` (this process)."""
    import ferrokafka as fk

    topic = "latency-" + os.urandom(5).hex()
    fk.Admin(bootstrap).create_topics([fk.NewTopic(topic, 1, 1)])
    lat = []
    with fk.Producer(bootstrap, linger_ms=0, acks="all", enable_idempotence=True) as p:
        p.send(topic, b"warm-up").result(30)
        for _ in range(records):
            done: list = []
            t = time.perf_counter()
            p.send(topic, b"x" * 100).add_done_callback(
                lambda f, done=done, t=t: done.append(time.perf_counter() - t))
            while not done:
                p.poll(0)
            lat.append(done[0])
            due = time.perf_counter() + 0.005
            while time.perf_counter() < due:
                p.poll(0)
    lat.sort()
    return {"p50": round(lat[len(lat) // 2] * 1000, 4), "p90": round(lat[int(len(lat) * 0.9)] * 1000, 4)}


def blocking(bootstrap: str, records: int, mode: str, client: str) -> dict:
    """The measured child of ``--mode result``, ``flush`` and ``poll``."""
    import ferrokafka as fk
    topic = "latency-" + os.urandom(5).hex()
    fk.Admin(bootstrap).create_topics([fk.NewTopic(topic, 1, 1)])
    payload = b"x" * 100
    if client == "confluent":
        from confluent_kafka import Producer
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        p.produce(topic, b"warm-up")
        p.flush(30)

        def send_with_callback(done: list) -> None:
            p.produce(topic, payload, on_delivery=lambda err, msg: done.append(err))

        def send() -> None:
            p.produce(topic, payload)
    else:
        p = fk.Producer(bootstrap, linger_ms=0)
        p.send(topic, b"warm-up").result(30)

        def send_with_callback(done: list) -> None:
            p.send(topic, payload).add_done_callback(done.append)

        def send() -> None:
            p.send(topic, payload)

    def one() -> None:
        if mode == "result":
            p.send(topic, payload).result(5)
        elif mode == "poll":
            done: list = []
            send_with_callback(done)
            while not done:
                p.poll(1)
        else:
            send()
            p.flush(5)
    lat = []
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(records):
        t = time.perf_counter()
        one()
        lat.append(time.perf_counter() - t)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    if client != "confluent":
        p.close()
    lat.sort()
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return {"p50": round(lat[len(lat) // 2] * 1000, 4), "p90": round(lat[int(len(lat) * 0.9)] * 1000, 4),
            "cpu_us": round(cpu / records * 1e6, 1)}


def run(build: str, spec: dict) -> dict:
    """One run of `spec` with `build` (None: the confluent-kafka client), in
    a child process with the build's package first on its path."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if build is not None:
            shutil.copytree(PACKAGE, os.path.join(tmp, "ferrokafka"),
                            ignore=shutil.ignore_patterns("_core*.so", "__pycache__"))
            shutil.copy(build, os.path.join(tmp, "ferrokafka", "_core.abi3.so"))
            env["PYTHONPATH"] = tmp + os.pathsep + env.get("PYTHONPATH", "")
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                             env=env, capture_output=True, text=True, timeout=600)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            raise SystemExit(f"run failed ({build}): {out.stderr.strip()[-500:]}")
        return json.loads(lines[-1])


def child(spec: dict) -> None:
    if spec["mode"] == "sequential":
        print(json.dumps(sequential(spec["bootstrap"], spec["records"])))
        return
    if spec["mode"] in ("result", "flush", "poll"):
        print(json.dumps(blocking(spec["bootstrap"], spec["records"], spec["mode"], spec["client"])))
        return
    sys.path.insert(0, HERE)
    import compare

    import ferrokafka as fk

    topic = "latency-" + os.urandom(5).hex()
    fk.Admin(spec["bootstrap"]).create_topics([fk.NewTopic(topic, 1, 1)])
    cell = {"kind": "latency", "client": spec["client"], "rate": 10_000, "seconds": 3.0, "size": 100,
            "topic": topic, "bootstrap": spec["bootstrap"]}
    print(json.dumps(compare.child_latency(cell)))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="paths of _core.abi3.so builds")
    ap.add_argument("--mode", default="paced", choices=["paced", "sequential", "result", "flush", "poll"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=1000, help="records a sequential, result or flush run")
    ap.add_argument("--confluent", action="store_true",
                    help="paced, flush, poll: confluent-kafka's run in each round too")
    args = ap.parse_args()
    from ferrokafka.testing import EmbeddedBroker

    variants = list(args.builds) + ([None] if args.confluent and args.mode in ("paced", "flush", "poll") else [])
    with EmbeddedBroker() as broker:
        for r in range(args.rounds):
            # Rotated, so no variant always runs first.
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for build in order:
                spec = {"mode": args.mode, "bootstrap": broker.bootstrap_servers, "records": args.records,
                        "client": "confluent" if build is None else "ferrokafka"}
                out = run(build, spec)
                name = build or "confluent-kafka"
                second = ("p99", out["p99"]) if args.mode == "paced" else ("p90", out["p90"])
                cpu = f", {out['cpu_us']:.1f} µs CPU a record" if "cpu_us" in out else ""
                print(f"round {r + 1} {name}: p50 {out['p50']:.3f} {second[0]} {second[1]:.3f} ms{cpu}",
                      flush=True)


if __name__ == "__main__":
    main()
