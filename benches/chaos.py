"""The long fault run of issue 8: the scenarios of tests/test_chaos.py with
bigger numbers, on a fresh 3-broker mock cluster each.

    python benches/chaos.py [--records N] [--only producer,group,outage-all,outage-coordinator] [--repeat K]

`--repeat K` runs each scenario K times (pass counts and duration ranges,
as reported for CI's bounded scenarios in docs/reliability.md).

Prints one row per run: records sent / acknowledged / consumed / lost /
duplicated (for the group: deliveries beyond the first, which at-least-once
allows) and the faults: leader moves, brokers set down, errors queued per API.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load_scenarios():
    path = os.path.join(HERE, "..", "tests", "test_chaos.py")
    spec = importlib.util.spec_from_file_location("chaos_scenarios", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000, help="records of the producer run")
    ap.add_argument("--only", default="producer,group,outage-all,outage-coordinator")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each scenario")
    args = ap.parse_args()
    from ferrokafka.testing import MockCluster

    sc = load_scenarios()
    runs = {
        "producer": lambda m: sc.run_producer_chaos(m, records=args.records, min_seconds=max(4.0, args.records / 20_000)),
        "group": lambda m: sc.run_group_chaos(m, records=max(5_000, args.records // 10), seconds=15.0),
        "outage-all": lambda m: sc.run_outage(m, "all", rate=1000, seconds=12.0),
        "outage-coordinator": lambda m: sc.run_outage(m, "coordinator", rate=1000, seconds=12.0),
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
    cols = ["sent", "acked", "consumed", "lost", "duplicated", "moves", "downs"]
    print()
    print(f"{'run':46} " + " ".join(f"{c:>10}" for c in cols) + "  errors queued per API / result")
    for f in rows:
        errs = ", ".join(f"{k} {v}" for k, v in sorted(f.get("errors", {}).items())) or "-"
        print(f"{f['name'][:46]:46} " + " ".join(f"{f.get(c, '-'):>10}" for c in cols) + f"  {errs}; {f['result']} ({f['seconds']} s)")
    return 0 if all(f["result"] == "pass" for f in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
