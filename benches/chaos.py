"""The long fault run of issue 8: tests/test_chaos.py with 200k records.

    python benches/chaos.py [--records N]

Prints, per run, records sent/acknowledged/consumed/lost/duplicated and the
faults injected (the CI run of the same tests uses 20k records).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args()
    env = dict(os.environ, FERROKAFKA_CHAOS_RECORDS=str(args.records))
    here = os.path.dirname(os.path.abspath(__file__))
    sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-s", "--timeout", "1800",
                              os.path.join(here, "..", "tests", "test_chaos.py")], env=env))
