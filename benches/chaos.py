"""The long fault run of issue 8: the scenarios of tests/test_chaos.py with
bigger numbers, on a fresh 3-broker mock cluster each.

    python benches/chaos.py [--records N] [--repeat K]
        [--only producer,group,outage-all,outage-coordinator,order-bursts,order-moves,order-down]

`--repeat K` runs each scenario K times (pass counts and duration ranges,
as reported for CI's bounded scenarios in docs/reliability.md).

Prints one row per run: records sent / acknowledged / consumed / lost /
duplicated (for the group: deliveries beyond the first, which at-least-once
allows), re-appended (copies of a retried batch that the mock cluster appended
twice, as it does not check an idempotent producer's sequences: see
check_exactly_once_in_order) and the faults: leader moves, brokers set down,
errors queued per API.
The `order-*` runs (tests/test_chaos_order.py: the issue-14 reordering
scenario) add `inversions`: records followed in their partition's log by an
earlier record, for in-flight 1 and 5 and every codec.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load_scenarios(name="test_chaos"):
    path = os.path.join(HERE, "..", "tests", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"chaos_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000, help="records of the producer run")
    ap.add_argument("--only", default="producer,group,outage-all,outage-coordinator,order-bursts,order-moves,order-down")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each scenario")
    args = ap.parse_args()
    from ferrokafka.testing import MockCluster

    sc = load_scenarios()
    order = load_scenarios("test_chaos_order")

    def order_run(faults):
        def run(m):
            rows = []
            variants = [(f, c) for f in (1, 5) for c in ("none", "gzip", "snappy", "lz4", "zstd")] \
                if faults == "bursts" else [(5, "none")]
            for k, (in_flight, codec) in enumerate(variants):
                f = order.run_order_scenario(m, records=max(12_000, args.records // 10), in_flight=in_flight,
                                             codec=codec, faults=faults, topic=f"order-{faults}-{k}")
                rows.append(f)
            total = {c: sum(f[c] for f in rows) for c in ("sent", "lost", "duplicated", "inversions")}
            ok = all(f["unflushed"] == 0 and not f["failed"] for f in rows) and \
                total["lost"] == total["duplicated"] == total["inversions"] == 0
            assert ok, f"order broken: {[(f['in_flight'], f['codec'], f['partitions']) for f in rows if f['inversions']]}"
            return sc.figures(f"order {faults} ({len(rows)} variants)", acked=total["sent"], **total)
        return run

    runs = {
        "producer": lambda m: sc.run_producer_chaos(m, records=args.records, min_seconds=max(4.0, args.records / 20_000)),
        "group": lambda m: sc.run_group_chaos(m, records=max(5_000, args.records // 10), seconds=15.0),
        "outage-all": lambda m: sc.run_outage(m, "all", rate=1000, seconds=12.0),
        "outage-coordinator": lambda m: sc.run_outage(m, "coordinator", rate=1000, seconds=12.0),
        "order-bursts": order_run("bursts"),
        "order-moves": order_run("moves_during_retries"),
        "order-down": order_run("broker_down"),
    }
    rows = []
    for name in [n for n in args.only.split(",") for _ in range(max(1, args.repeat))]:
        t0 = time.time()
        with MockCluster(3) as m:
            try:
                f = runs[name](m)
                f["result"] = "pass"
            except AssertionError as e:
                f = {"name": name, "result": f"FAIL: {str(e)[:200]}"}
        f.setdefault("seconds", round(time.time() - t0, 1))
        rows.append(f)
        print(f, flush=True)
    cols = ["sent", "acked", "consumed", "lost", "duplicated", "reappended", "inversions", "moves", "downs"]
    print()
    print(f"{'run':46} " + " ".join(f"{c:>10}" for c in cols) + "  errors queued per API / result")
    for f in rows:
        errs = ", ".join(f"{k} {v}" for k, v in sorted(f.get("errors", {}).items())) or "-"
        print(f"{f['name'][:46]:46} " + " ".join(f"{f.get(c, '-'):>10}" for c in cols) + f"  {errs}; {f['result']} ({f['seconds']} s)")
    return 0 if all(f["result"] == "pass" for f in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
