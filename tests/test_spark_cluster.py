"""Spark `local-cluster[2,1,1024]`: separate executor processes, so the data
source works where the driver's Python objects are not shared (issue 7)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from conftest import _unavailable


def test_local_cluster_round_trip():
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        _unavailable("pyspark", e)
    script = os.path.join(os.path.dirname(__file__), "_spark_local_cluster.py")
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=600)
    line = [ln for ln in r.stdout.splitlines() + r.stderr.splitlines() if "LOCALCLUSTER" in ln]
    assert r.returncode == 0 and line, r.stderr[-3000:]
    text = line[-1]
    assert "ok: True" in text, text
    pids = text.split("executor pids:")[1].split("driver pid:")
    executors = ast.literal_eval(pids[0].strip())
    driver = int(pids[1].strip())
    assert len(executors) >= 2 and driver not in executors, text
