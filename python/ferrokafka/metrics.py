"""Export of the clients' ``metrics()`` for Prometheus, with no dependency.

``prometheus_text(*clients)`` returns the Prometheus text exposition format
(version 0.0.4) of every client given (Producer, Consumer, Admin)::

    ferrokafka_consumer_records_lag_max{client_id="app"} 0.0
    ferrokafka_consumer_records_lag{client_id="app",topic="t",partition="0"} 12.0

Names: ``ferrokafka_<producer|consumer|admin>_`` + the Java metric name with
``-`` as ``_``. Labels: ``client_id`` and the key's own labels
(``name{topic=T,partition=P}`` -> ``topic="T",partition="P"``; ``node-id``
becomes ``node_id``). Names ending ``-total`` are counters, the rest gauges.
The producer's pre-Java aliases (``records_sent``, ...) are left out: their
values are exported under the Java names. docs/metrics.md lists the metrics.

``serve(port, *clients)`` answers ``GET /metrics`` with that text from a
daemon thread (standard library ``http.server``). With ``prometheus_client``
installed (extra ``ferrokafka[prometheus]``), register a collector that
parses the text instead; see docs/metrics.md.
"""

from __future__ import annotations

import http.server
import re
import threading
from typing import Any, Dict, List, Tuple

__all__ = ["prometheus_text", "serve", "samples"]

_KEY = re.compile(r"^([^{]+)(?:\{(.*)\})?$")
_BAD = re.compile(r"[^a-zA-Z0-9_]")


def _kind(client: Any) -> str:
    # Imported here: this module is imported by nothing in the core path.
    from .admin import Admin
    from .consumer import Consumer
    from .producer import Producer

    for cls, kind in ((Producer, "producer"), (Consumer, "consumer"), (Admin, "admin")):
        if isinstance(client, cls):
            return kind
    raise TypeError(f"prometheus_text() takes ferrokafka Producer, Consumer or Admin objects, got {client!r}")


def _split(key: str) -> Tuple[str, List[Tuple[str, str]]]:
    m = _KEY.match(key)
    if m is None:  # pragma: no cover - every key has a name
        return key, []
    name, inner = m.group(1), m.group(2)
    labels = []
    if inner:
        # Label values (topic names) never hold ',' or '=' (Kafka's legal
        # topic characters are letters, digits, '.', '_' and '-').
        for part in inner.split(","):
            k, _, v = part.partition("=")
            labels.append((_BAD.sub("_", k), v))
    return name, labels


def samples(*clients: Any) -> Dict[str, List[Tuple[List[Tuple[str, str]], float]]]:
    """{prometheus metric name: [(labels, value)]} of every client, in name order."""
    out: Dict[str, List[Tuple[List[Tuple[str, str]], float]]] = {}
    for c in clients:
        kind = _kind(c)
        client_id = str(c.config.get("client_id", ""))
        for key, value in c.metrics().items():
            name, labels = _split(key)
            if "_" in name:
                continue  # a pre-Java alias: its value is under the Java name
            full = f"ferrokafka_{kind}_" + _BAD.sub("_", name)
            out.setdefault(full, []).append(([("client_id", client_id), *labels], float(value)))
    return dict(sorted(out.items()))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v: float) -> str:
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def prometheus_text(*clients: Any) -> str:
    """The Prometheus text format of the clients' metrics (one ``# TYPE`` line
    per metric, its samples grouped under it)."""
    lines = []
    for name, rows in samples(*clients).items():
        lines.append(f"# TYPE {name} {'counter' if name.endswith('_total') else 'gauge'}")
        for labels, value in rows:
            lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            lines.append(f"{name}{{{lab}}} {_number(value)}")
    return "\n".join(lines) + "\n"


def serve(port: int, *clients: Any, host: str = "127.0.0.1") -> http.server.ThreadingHTTPServer:
    """Answer ``GET /metrics`` on ``host:port`` with ``prometheus_text(*clients)``
    from a daemon thread; ``shutdown()`` the returned server to stop. Port 0
    picks a free port (``server.server_address[1]``)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's method name
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = prometheus_text(*clients).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass  # scrapes are not worth a stderr line each

    server = http.server.ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="ferrokafka-metrics", daemon=True).start()
    return server
