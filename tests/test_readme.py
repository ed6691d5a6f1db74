"""README.md's Python blocks run verbatim, in order, against the embedded broker.

The README says its examples assume a broker at localhost:9092, so the broker
listens there. If another process holds port 9092 (a shared CI machine), the
blocks run against a broker on a free port with "localhost:9092" replaced by its
address, which the README's own wording allows; the run says which happened.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def _blocks() -> list[str]:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_readme_has_python_blocks():
    blocks = _blocks()
    assert len(blocks) >= 3
    assert any("fk.Consumer(" in b for b in blocks) and any("EmbeddedBroker" in b for b in blocks)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_readme_blocks_run_in_order(tmp_path):
    from ferrokafka.testing import EmbeddedBroker, TansuBinaryNotFound

    # Checked before starting: a broker already on 9092 would answer our
    # readiness probe for a Tansu that failed to bind.
    substituted = not _port_free(9092)
    try:
        broker = EmbeddedBroker() if substituted else EmbeddedBroker(port=9092)
    except TansuBinaryNotFound as e:
        from conftest import _unavailable

        _unavailable("Tansu broker", e)
    with broker:
        script = "\n\n".join(_blocks())
        if substituted:
            script = script.replace("localhost:9092", broker.bootstrap_servers)
        path = tmp_path / "readme_blocks.py"
        path.write_text(script)
        # A fresh interpreter, as a reader pasting the blocks would have.
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    print(f"port 9092 {'busy: ran on ' + broker.bootstrap_servers if substituted else 'used as written'}")
    print(proc.stdout)
    assert proc.returncode == 0, f"README blocks failed:\n{proc.stdout}\n{proc.stderr}"
    out = proc.stdout
    assert "RecordMetadata(" in out
    # The consumer example printed the four records the producer example sent.
    printed = re.findall(r"^\d+ \d+ (b'user-42'|None) b'(payload|a|b|c)'$", out, flags=re.M)
    assert sorted(v for _, v in printed) == ["a", "b", "c", "payload"], out
