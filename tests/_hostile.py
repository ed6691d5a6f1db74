"""Fake Kafka servers for the hostile-input tests (test_network.py, test_hostile.py).

Everything is framed by hand with ``struct`` on purpose: a fake broker must be
able to send what the codec under test would refuse to produce.
"""

from __future__ import annotations

import socket
import struct
import threading


class Hostile:
    """TCP server on a loopback port; ``behaviour(conn)`` decides what each
    accepted connection gets. ``port`` pins the port (a proxy that must keep
    its address); by default a free one is taken."""

    def __init__(self, behaviour, port: int = 0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.behaviour = behaviour
        self.conns: list[socket.socket] = []
        self.accepted = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            self.behaviour(c)
        except OSError:
            pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


def recv_exact(c, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = c.recv(n - len(buf))
        if not chunk:
            raise OSError("eof")
        buf += chunk
    return buf


def read_request(c):
    """One request frame: returns (api_key, api_version, correlation_id)."""
    (n,) = struct.unpack(">i", recv_exact(c, 4))
    body = recv_exact(c, n)
    api_key, api_version, cid = struct.unpack(">hhi", body[:8])
    return api_key, api_version, cid


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def api_versions_answer(cid, keys, error_code=0):
    """ApiVersions v3 answer (response header v0): error code, keys as a
    compact array of (api_key, min, max), throttle 0, no tagged fields."""
    body = struct.pack(">ih", cid, error_code) + bytes([len(keys) + 1])
    for k, lo, hi in keys:
        body += struct.pack(">hhh", k, lo, hi) + b"\x00"
    body += struct.pack(">i", 0) + b"\x00"
    return frame(body)


def api_versions_v0_answer(cid, keys, error_code):
    """The KIP-511 shape of an UNSUPPORTED_VERSION answer: v0 body (int32 array)."""
    body = struct.pack(">ihi", cid, error_code, len(keys))
    for k, lo, hi in keys:
        body += struct.pack(">hhh", k, lo, hi)
    return frame(body)
