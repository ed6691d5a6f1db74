"""Socket helpers shared by the test kit's brokers, fronts and proxies."""

from __future__ import annotations

import socket
from typing import Callable, Optional


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes, or ConnectionError if the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed mid-frame")
        buf += chunk
    return bytes(buf)


def pump(src: socket.socket, dst: socket.socket,
         observe: Optional[Callable[[bytes], None]] = None) -> None:
    """Copy `src` to `dst` until either side fails or `src` ends; `observe` sees
    each chunk after it is forwarded. Returns without closing either socket."""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
            if observe is not None:
                observe(data)
    except OSError:
        pass


class Closing:
    """`with` support and a best-effort close at garbage collection for
    objects that own a process or a native handle and have `close()`."""

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
