"""The README's main command: ``python -m ferrokafka demo`` produces and consumes a stream."""

from __future__ import annotations

import os
import subprocess
import sys


def _demo(env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "ferrokafka", "demo", "--messages", "2000"],
        capture_output=True, text=True, timeout=120, env=env,
    )


def test_demo_against_given_broker(embedded_broker):
    r = _demo({"FERROKAFKA_BOOTSTRAP": embedded_broker.bootstrap_servers})
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"broker {embedded_broker.bootstrap_servers} reachable" in r.stdout
    assert "embedded" not in r.stdout


def test_demo_starts_embedded_broker(embedded_broker):
    # embedded_broker only proves the binary is available (and fails in CI if not).
    env = {k: v for k, v in os.environ.items() if k != "FERROKAFKA_BOOTSTRAP"}
    r = subprocess.run([sys.executable, "-m", "ferrokafka", "demo", "--messages", "2000"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "started embedded Tansu broker" in r.stdout
    assert "reachable" in r.stdout
    # The stream went out and came back byte-checked.
    assert "produce: 2000 msgs" in r.stdout, r.stdout
    assert "consume: 2000 msgs" in r.stdout, r.stdout  # read back by the Consumer, byte-checked


def test_demo_fails_on_unreachable_broker():
    from ferrokafka.testing import free_port

    r = _demo({"FERROKAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}"})
    assert r.returncode == 1
    assert "cannot reach a Kafka broker" in r.stdout
