"""EmbeddedBroker: a Tansu broker process on a free loopback port.

The binary is ferrokafka's own build of Tansu 0.6.0 from crates.io with the fixes
of ``tansu-0.6.0.patch`` (beside this module; ListOffsets answers the high
watermark, a new group's first join is not held up by the session timeout), made by
``python -m ferrokafka.testing.build_tansu`` (``scripts/build-tansu.sh`` in a
checkout). ``TANSU_BIN`` overrides it. Other Tansu builds are
never picked silently: the stock 0.6.0 answers ListOffsets(latest) with a stale
offset, which makes end offsets and Spark batch reads wrong without any error.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import weakref

__all__ = ["EmbeddedBroker", "BrokerStartError", "TansuBinaryNotFound", "api_versions", "free_port",
           "default_binary"]

from ._net import Closing, free_port, recv_exact

TANSU_VERSION = "0.6.0"
# Identifies the patch the default binary must be built with: the first 12 hex
# digits of sha256(patch file + "features=" + cargo features), as computed by
# build_tansu.sh beside this module (--id prints it; tests/test_testing_smoke.py checks that
# both agree). A binary built from another patch lives in another directory and
# is never picked up by mistake.
TANSU_BUILD_ID = "ac68b913f9d5"


class BrokerStartError(RuntimeError):
    pass


class TansuBinaryNotFound(BrokerStartError):
    """ferrokafka's Tansu build is missing (build it or set TANSU_BIN)."""


def default_binary() -> str:
    """Where build_tansu.sh puts the binary for this ferrokafka."""
    cache = os.environ.get("FERROKAFKA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "ferrokafka")
    return os.path.join(cache, f"tansu-{TANSU_VERSION}-{TANSU_BUILD_ID}", "tansu")


def api_versions(host: str, port: int, timeout: float = 2.0) -> dict[int, tuple[int, int]]:
    """One ApiVersions v0 round trip, framed by hand.

    Hand-framed on purpose: readiness must not depend on the codec under test.
    v0 is used because every broker answers it and its response is not flexible.
    """
    client_id = b"ferrokafka-probe"
    # header v1: api_key=18, api_version=0, correlation_id, client_id (int16 string)
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        if not 6 <= size <= 1 << 20:
            raise ConnectionError(f"implausible ApiVersions response size {size}")
        resp = recv_exact(s, size)
    corr, err, n = struct.unpack_from(">ihi", resp, 0)
    if corr != 7:
        raise ConnectionError(f"correlation id mismatch: {corr}")
    if err != 0:
        raise ConnectionError(f"ApiVersions error code {err}")
    out = {}
    off = 10
    for _ in range(n):
        k, lo, hi = struct.unpack_from(">hhh", resp, off)
        off += 6
        out[k] = (lo, hi)
    return out


def _resolve_bin() -> str:
    override = os.environ.get("TANSU_BIN")
    if override:
        if not (os.path.isfile(override) and os.access(override, os.X_OK)):
            raise BrokerStartError(f"TANSU_BIN={override!r} is not an executable file")
        return override
    path = default_binary()
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    raise TansuBinaryNotFound(
        f"EmbeddedBroker needs ferrokafka's patched Tansu {TANSU_VERSION} build, expected at {path}.\n"
        "Build it with `python -m ferrokafka.testing.build_tansu` (needs cargo: it fetches tansu from "
        "crates.io and applies the patch shipped with ferrokafka; about 11 minutes cold on 2 cores, "
        "cached afterwards; ./scripts/install-test-deps.sh runs it in a checkout), or point TANSU_BIN "
        "at a Tansu binary you trust. "
        "Stock Tansu 0.6.0 builds are not used by default: they answer ListOffsets(latest) with a "
        "stale offset, so end offsets and Spark reads come out wrong."
    )


_live: "weakref.WeakSet[EmbeddedBroker]" = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for b in list(_live):
        b.close()


class EmbeddedBroker(Closing):
    """A Tansu broker with in-memory storage, started on construction.

    >>> with EmbeddedBroker() as b: b.bootstrap_servers

    ``tls=True``: clients reach it over TLS (server authentication; a CA and a
    certificate for 127.0.0.1/localhost are made in the broker's temporary
    directory, ``b.certs``). ``sasl="SCRAM-SHA-256"`` (or -512) with
    ``users={"alice": "secret"}``: clients must log in. Tansu 0.6.0 has no
    usable TLS listener and cannot provision SCRAM users while requiring
    them, so these are fronts on the advertised port: stunnel (OpenSSL) for
    TLS, ferrokafka.testing's ScramFront (the ``scramp`` SCRAM server) for
    SASL; the broker itself listens on a loopback port clients never see.
    ``b.client_config(user)`` gives the matching client options.
    """

    def __init__(
        self,
        port: int | None = None,
        *,
        host: str = "127.0.0.1",
        cluster_id: str = "ferrokafka",
        storage_engine: str = "memory://tansu/",
        startup_timeout: float = 30.0,
        binary: str | None = None,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        advertised_port: int | None = None,
        tls: bool = False,
        sasl: str | None = None,
        users: dict[str, str] | None = None,
        initial_rebalance_delay_ms: int | None = None,
    ) -> None:
        # advertised_port: what metadata tells clients (a TLS terminator or
        # proxy in front of the broker); the broker itself listens on `port`.
        if sasl is not None and sasl not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ValueError(f"sasl={sasl!r}: SCRAM-SHA-256 or SCRAM-SHA-512")
        if sasl is not None and not users:
            raise ValueError("sasl needs users={name: password}")
        self.tls, self.sasl, self.users = bool(tls), sasl, dict(users or {})
        self._fronts: list = []
        self.certs = None
        self.advertised_port = advertised_port
        self.host = host
        self.binary = binary or _resolve_bin()
        self._proc: subprocess.Popen | None = None
        env = dict(env or {})
        if initial_rebalance_delay_ms is not None:
            # Kafka's group.initial.rebalance.delay.ms (3000 by default; our patch).
            env["TANSU_GROUP_INITIAL_REBALANCE_DELAY_MS"] = str(int(initial_rebalance_delay_ms))
        front_port = None
        if (self.tls or self.sasl) and advertised_port is None:
            # Clients only ever see the front's port: the broker advertises it.
            front_port = port if port is not None else free_port()
            self.advertised_port = advertised_port = front_port
            port = None
        # The log lives in a directory of its own that close() removes; it is
        # kept (and its path given in the error) only when start-up fails.
        self._dir: str | None = tempfile.mkdtemp(prefix="ferrokafka-broker-")
        self.log_path = os.path.join(self._dir, "tansu.log")
        self._log = open(self.log_path, "wb")
        # A free port can be taken between probe and bind; retry on a fresh one
        # unless the caller pinned the port.
        attempts = 1 if port is not None else 3
        last: Exception | None = None
        for _ in range(attempts):
            self.port = port if port is not None else free_port()
            try:
                self._start(cluster_id, storage_engine, startup_timeout, extra_args or [], env)
                _live.add(self)
                if front_port is not None:
                    self._start_fronts(front_port)
                return
            except BrokerStartError as e:
                last = e
                self._kill()
            except BaseException:
                self.close()
                raise
        self._log.close()
        self._dir = None  # keep the log for the post-mortem
        raise BrokerStartError(f"{last}\n(broker log kept at {self.log_path})")

    @property
    def bootstrap_servers(self) -> str:
        if self._fronts:
            return f"{self.host}:{self._fronts[-1].port}"
        return f"{self.host}:{self.port}"

    def _start_fronts(self, front_port: int) -> None:
        from ._security import ScramFront, StunnelTLS, make_certs

        backend = self.port
        if self.sasl:
            # Behind TLS the SCRAM front gets its own loopback port.
            scram_port = free_port() if self.tls else front_port
            self._fronts.append(ScramFront(backend, self.users, port=scram_port, host=self.host))
            backend = scram_port
        if self.tls:
            assert self._dir is not None
            tls_dir = os.path.join(self._dir, "tls")
            os.makedirs(tls_dir)
            self.certs = make_certs(tls_dir)
            self._fronts.append(StunnelTLS(backend, self.certs.server_cert, self.certs.server_key,
                                           port=front_port, host=self.host))

    def client_config(self, user: str | None = None) -> dict:
        """ferrokafka client options for this broker (bootstrap, TLS, SASL)."""
        cfg: dict = {"bootstrap_servers": self.bootstrap_servers}
        if self.tls:
            cfg["ssl_cafile"] = self.certs.ca
        if self.sasl:
            name = user if user is not None else next(iter(self.users))
            cfg.update(sasl_mechanism=self.sasl, sasl_username=name, sasl_password=self.users[name])
        cfg["security_protocol"] = {(False, False): "PLAINTEXT", (True, False): "SSL",
                                    (False, True): "SASL_PLAINTEXT", (True, True): "SASL_SSL"}[(self.tls, bool(self.sasl))]
        return cfg

    def _start(self, cluster_id, storage_engine, timeout, extra_args, env) -> None:
        url = f"tcp://{self.host}:{self.port}"
        advertised = f"tcp://{self.host}:{self.advertised_port}" if self.advertised_port else url
        cmd = [
            self.binary, "broker",
            "--cluster-id", cluster_id,
            "--listener-url", url,
            "--advertised-listener-url", advertised,
            "--storage-engine", storage_engine,
            *extra_args,
        ]
        penv = dict(os.environ)
        penv.setdefault("RUST_LOG", "warn")
        penv.update(env or {})
        self._log.seek(0)
        self._log.truncate()
        self._proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=penv,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        err: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerStartError(
                    f"tansu exited with code {self._proc.returncode} during start-up\n{self.log_tail()}"
                )
            try:
                self.api_versions_result = api_versions(self.host, self.port, timeout=1.0)
                return
            except (OSError, ConnectionError, struct.error) as e:
                err = e
                time.sleep(0.05)
        raise BrokerStartError(
            f"tansu did not answer ApiVersions on {self.bootstrap_servers} within {timeout}s "
            f"(last error: {err!r})\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()[-16384:]
        except OSError:
            return ""
        tail = data.decode("utf-8", "replace").splitlines()[-lines:]
        return "--- tansu log tail ---\n" + "\n".join(tail)

    def api_versions(self) -> dict[int, tuple[int, int]]:
        return api_versions(self.host, self.port)

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self) -> None:
        p, self._proc = self._proc, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)

    def close(self) -> None:
        for front in reversed(getattr(self, "_fronts", [])):
            try:
                front.close()
            except Exception:
                pass
        self._fronts = []
        self._kill()
        _live.discard(self)
        try:
            self._log.close()
        except Exception:
            pass
        d, self._dir = getattr(self, "_dir", None), None
        if d:
            shutil.rmtree(d, ignore_errors=True)

    stop = close

    def __enter__(self) -> "EmbeddedBroker":
        return self

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"EmbeddedBroker({self.bootstrap_servers!r}, {state})"
