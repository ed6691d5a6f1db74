"""Fake Kafka servers for the hostile-input tests (test_network.py, test_hostile.py).

Everything is framed by hand with ``struct`` on purpose: a fake broker must be
able to send what the codec under test would refuse to produce.
"""

from __future__ import annotations

import socket
import struct
import threading

from ferrokafka.testing._net import pump


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


GARBAGE_FRAME = b"\x00\x00\x00\x08garbage!"  # a frame, but not an answer to anything
HTTP_ANSWER = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"  # prefix "HTTP" = 1.2 GB


class SwitchProxy:
    """A TCP proxy on a fixed port in front of a real broker, switchable at run
    time between hostile modes and pass-through.

    Modes (what a connection accepted in that mode gets):
    ``"garbage"``: every request answered with :data:`GARBAGE_FRAME`;
    ``"http"``: every request answered with :data:`HTTP_ANSWER`, then closed;
    ``"close"``: closed at once; ``"pass"``: forwarded both ways to the broker.
    Leaving ``"pass"`` cuts the forwarded connections, so established clients
    meet the hostile mode on their next connection.
    """

    def __init__(self, target_port: int, port: int = 0, mode: str = "garbage"):
        self.target_port = target_port
        self.mode = mode
        self.lock = threading.Lock()
        self.piped: list[socket.socket] = []
        self.accepted: dict[str, int] = {}
        self.server = Hostile(self._serve, port=port)
        self.port = self.server.port

    def set_mode(self, mode: str) -> None:
        with self.lock:
            self.mode = mode
            piped, self.piped = self.piped, []
        if mode != "pass":
            for s in piped:
                _hard_close(s)

    def _serve(self, c):
        with self.lock:
            mode = self.mode
            self.accepted[mode] = self.accepted.get(mode, 0) + 1
        if mode == "close":
            c.close()
        elif mode == "garbage":
            while True:
                read_request(c)
                c.sendall(GARBAGE_FRAME)
        elif mode == "http":
            read_request(c)
            c.sendall(HTTP_ANSWER)
            c.close()
        else:
            up = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                if self.mode != "pass":  # switched while we connected
                    _hard_close(c)
                    _hard_close(up)
                    return
                self.piped += [c, up]
            threading.Thread(target=_pump, args=(up, c), daemon=True).start()
            _pump(c, up)

    def close(self):
        self.set_mode("close")
        self.server.close()


def _pump(src, dst):
    pump(src, dst)
    _hard_close(src)
    _hard_close(dst)


def _hard_close(s):
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass


def read_request_body(c):
    """One request frame: (api_key, api_version, correlation_id, body), body
    being what follows a v1 request header (client id read past)."""
    (n,) = struct.unpack(">i", recv_exact(c, 4))
    data = recv_exact(c, n)
    api_key, api_version, cid, client_id_len = struct.unpack(">hhih", data[:10])
    return api_key, api_version, cid, data[10 + max(client_id_len, 0):]


def metadata_v4_answer(cid, port, topics):
    """Metadata v4 answer (the newest non-flexible shape with every field a
    client needs): one broker (id 0, 127.0.0.1:port, the controller), each of
    ``topics`` with one partition led by it."""
    host = b"127.0.0.1"
    body = struct.pack(">iii", cid, 0, 1) + struct.pack(">ih", 0, len(host)) + host + struct.pack(">ih", port, -1)
    body += struct.pack(">hii", -1, 0, len(topics))  # no cluster id, controller 0
    for t in topics:
        name = t.encode()
        body += struct.pack(">hh", 0, len(name)) + name + b"\x00" + struct.pack(">i", 1)
        body += struct.pack(">hiiiiii", 0, 0, 0, 1, 0, 1, 0)
    return frame(body)


def metadata_v4_topics(body):
    """The topic names of a Metadata v1-v8 request body ([] for "all topics")."""
    (n,) = struct.unpack(">i", body[:4])
    out, pos = [], 4
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack(">h", body[pos:pos + 2])
        out.append(body[pos + 2:pos + 2 + ln].decode())
        pos += 2 + ln
    return out
