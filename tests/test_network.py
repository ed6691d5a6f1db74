"""NetworkClient against a real broker (Tansu) and against hostile local servers.

Tansu is ferrokafka's build (scripts/build-tansu.sh; ``TANSU_BIN`` overrides). The
librdkafka mock-cluster cases live in test_network_mock.py.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import threading
import time

import pytest
from _hostile import Hostile
from _hostile import api_versions_answer as _api_versions_answer
from _hostile import read_request as _read_request

import ferrokafka as fk
from ferrokafka.protocol import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
)
from ferrokafka.testing._net import free_port

_free_port = free_port


def _tansu_bin() -> str | None:
    try:
        from ferrokafka.testing._broker import _resolve_bin

        return _resolve_bin()
    except Exception:
        return None


class Tansu:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Tansu":
        binary = _tansu_bin()
        if binary is None:
            # Same policy as conftest.py: never skip in CI.
            if os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("FERROKAFKA_REQUIRE_BROKERS"):
                pytest.fail("no tansu binary (run scripts/build-tansu.sh or set TANSU_BIN)", pytrace=False)
            pytest.skip("no tansu binary (run scripts/build-tansu.sh or set TANSU_BIN)")
        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("tansu did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


@pytest.fixture
def broker():
    b = Tansu().start()
    yield b
    b.stop()


def _until(pred, timeout=10.0, nc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        if nc is not None:
            nc.poll(50)
        else:
            time.sleep(0.02)
    return pred()


def _connect(nc):
    node = nc.least_loaded_node()
    assert node is not None
    assert _until(lambda: nc.ready(node), nc=nc), nc.connection_state(node.id)
    return node


def _round_trip(nc, node, request, timeout=10.0):
    assert _until(lambda: nc.ready(node), nc=nc)
    req = nc.new_client_request(node.id, request)
    nc.send(req)
    deadline = time.time() + timeout
    while time.time() < deadline:
        for r in nc.poll(200):
            if r.request_header.correlation_id == req.correlation_id:
                return r
    raise AssertionError("no response")


# --- real broker -------------------------------------------------------------------


def test_connect_negotiate_and_round_trips(broker):
    nc = fk.NetworkClient(broker.bootstrap_servers, client_id="fk-test")
    node = _connect(nc)
    assert nc.connection_state(node.id) == "READY"
    versions = nc.api_versions(node.id)
    assert versions[3][1] >= 1 and versions[18][0] == 0
    for _key, (lo, hi) in versions.items():
        assert lo <= hi

    r = _round_trip(nc, node, MetadataRequest())
    assert not r.disconnected and r.version_mismatch is None
    assert r.request_header.api_key == 3
    assert r.request_header.api_version == versions[3][1]  # highest common version
    assert r.request_header.client_id == "fk-test"
    body = r.response_body
    assert body.brokers and body.brokers[0].port == broker.port
    assert r.latency_ms >= 0 and r.received_time_ms > 0

    r = _round_trip(nc, node, ApiVersionsRequest())
    assert r.response_body.error_code == 0
    assert any(k.api_key == 3 for k in r.response_body.api_keys)

    r = _round_trip(nc, node, FindCoordinatorRequest("group-1"))
    assert r.response_body.error_code == 0
    assert r.response_body.port == broker.port

    r = _round_trip(nc, node, CreateTopicsRequest([("nt-topic", 2, 1)]))
    assert r.response_body.topics[0].name == "nt-topic"
    assert r.response_body.topics[0].error_code == 0
    r = _round_trip(nc, node, MetadataRequest(["nt-topic"]))
    (t,) = r.response_body.topics
    assert t.name == "nt-topic" and len(t.partitions) == 2
    r = _round_trip(nc, node, ListOffsetsRequest({"nt-topic": {0: -1}}))
    assert r.response_body.topics[0].partitions[0].offset == 0
    # After the first Metadata answer the client knows the real broker id.
    assert any(n.id >= 0 for n in nc.nodes())
    nc.close()


def test_callbacks_run_after_io_and_errors_are_isolated(broker, caplog):
    nc = fk.NetworkClient(broker.bootstrap_servers)
    node = _connect(nc)
    seen = []

    def bad(resp):
        raise RuntimeError("boom")

    for cb in (bad, seen.append):
        assert _until(lambda: nc.ready(node), nc=nc)
        nc.send(nc.new_client_request(node.id, MetadataRequest([]), callback=cb))
    _until(lambda: len(seen) == 1, nc=nc)
    assert len(seen) == 1 and seen[0].response_body is not None
    assert "boom" in caplog.text
    nc.close()


def test_pipelining_respects_cap_and_order(broker):
    nc = fk.NetworkClient(broker.bootstrap_servers, max_in_flight_requests_per_connection=3)
    node = _connect(nc)
    sent, got, peak = [], [], 0
    deadline = time.time() + 20
    while len(got) < 30 and time.time() < deadline:
        while len(sent) < 30 and nc.ready(node):
            req = nc.new_client_request(node.id, MetadataRequest([]))
            nc.send(req)
            sent.append(req.correlation_id)
            peak = max(peak, nc.in_flight_request_count(node.id))
        got += [r.request_header.correlation_id for r in nc.poll(100)]
    assert got == sent and len(got) == 30
    assert sent == sorted(sent)
    assert peak <= 3
    nc.close()


def test_broker_down_mid_flight_then_back(broker):
    nc = fk.NetworkClient(broker.bootstrap_servers, reconnect_backoff_ms=200, reconnect_backoff_max_ms=400,
                          request_timeout_ms=5000)
    node = _connect(nc)
    assert _until(lambda: nc.ready(node), nc=nc)
    req = nc.new_client_request(node.id, MetadataRequest([]))
    nc.send(req)
    broker.stop()
    out = []
    deadline = time.time() + 10
    while not out and time.time() < deadline:
        out = [r for r in nc.poll(100) if r.request_header.correlation_id == req.correlation_id]
    # The answer may have beaten the kill; if so, send another one on the dead socket.
    if out and not out[0].disconnected:
        assert _until(lambda: nc.connection_state(node.id) == "DISCONNECTED", nc=nc)
    else:
        assert out and out[0].disconnected and out[0].response_body is None
        assert isinstance(out[0].error, fk.KafkaError)
    assert _until(lambda: nc.connection_state(node.id) == "DISCONNECTED", nc=nc)
    assert nc.in_flight_request_count(node.id) == 0
    # Inside the backoff, ready() does not try again.
    t_down = time.time()
    assert nc.connection_delay(node) > 0 or time.time() - t_down > 0.15
    b2 = Tansu(broker.port).start()
    try:
        assert _until(lambda: nc.ready(node), timeout=15, nc=nc)
        r = _round_trip(nc, node, MetadataRequest([]))
        assert not r.disconnected
    finally:
        b2.stop()
        nc.close()


def test_poll_releases_the_gil(broker):
    nc = fk.NetworkClient(broker.bootstrap_servers)
    _connect(nc)
    assert _until(lambda: nc.in_flight_request_count() == 0, nc=nc)
    nc.poll(20)
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    t0 = time.time()
    nc.poll(500)
    stop.set()
    t.join()
    assert time.time() - t0 >= 0.45
    assert len(ticks) > 50, "another Python thread ran during poll"
    nc.close()


def test_unsupported_version_completes_locally():
    """A broker announcing only ApiVersions: a FindCoordinator completes on the next
    poll with UnsupportedVersionError (code 35) and never reaches the socket."""
    received = []

    def only_api_versions(c):
        while True:
            key, version, cid = _read_request(c)
            received.append(key)
            if key == 18:
                c.sendall(_api_versions_answer(cid, [(18, 0, 3)]))

    srv = Hostile(only_api_versions)
    nc = fk.NetworkClient(f"127.0.0.1:{srv.port}")
    node = nc.least_loaded_node()
    assert _until(lambda: nc.ready(node), nc=nc)
    assert nc.api_versions(node.id) == {18: (0, 3)}
    req = nc.new_client_request(node.id, FindCoordinatorRequest("g"))
    nc.send(req)
    (r,) = nc.poll(1000)
    assert r.request_header.correlation_id == req.correlation_id
    assert isinstance(r.version_mismatch, fk.UnsupportedVersionError)
    assert r.version_mismatch.code == 35
    assert not r.disconnected and r.response_body is None
    time.sleep(0.1)
    assert received == [18], "nothing but ApiVersions reached the broker"
    nc.close()
    srv.close()


def test_config_dict_and_validation():
    nc = fk.NetworkClient({"bootstrap.servers": "127.0.0.1:1", "client.id": "x", "request.timeout.ms": 1000})
    assert nc.config["request_timeout_ms"] == 1000 and nc.config["client_id"] == "x"
    nc.close()
    with pytest.raises(ValueError, match="max_in_flight_requests_per_connection"):
        fk.NetworkClient("127.0.0.1:1", max_in_flight_requests_per_connection=0)
    with pytest.raises(ValueError, match="request_timeout_ms"):
        fk.NetworkClient("127.0.0.1:1", request_timeout_ms="soon")
    with pytest.raises(ValueError, match="linger"):
        fk.NetworkClient({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 5})
    with pytest.raises(ValueError, match="bootstrap_servers"):
        fk.NetworkClient("nohostport")


def test_connect_refused_backs_off():
    port = _free_port()
    nc = fk.NetworkClient(f"127.0.0.1:{port}", reconnect_backoff_ms=300, reconnect_backoff_max_ms=300)
    node = nc.least_loaded_node()
    assert not nc.ready(node)
    assert _until(lambda: nc.connection_state(node.id) == "DISCONNECTED" and nc.connection_delay(node) > 0, nc=nc)
    assert not nc.ready(node)  # inside the backoff: no new attempt
    assert nc.connection_state(node.id) == "DISCONNECTED"
    assert nc.least_loaded_node() is None  # the only node is blacked out
    time.sleep(0.4)
    assert not nc.ready(node)
    assert nc.connection_state(node.id) == "CONNECTING"
    nc.close()


# --- hostile servers -----------------------------------------------------------------


def _hostile_case(behaviour, request_timeout_ms=1500):
    srv = Hostile(behaviour)
    nc = fk.NetworkClient(f"127.0.0.1:{srv.port}", request_timeout_ms=request_timeout_ms,
                          reconnect_backoff_ms=10_000, reconnect_backoff_max_ms=10_000)
    node = nc.least_loaded_node()
    nc.ready(node)
    # The connection must end up DISCONNECTED, never READY, and quickly.
    t0 = time.time()
    saw = set()
    while time.time() - t0 < request_timeout_ms / 1000 + 5:
        nc.poll(50)
        saw.add(nc.connection_state(node.id))
        if nc.connection_state(node.id) == "DISCONNECTED" and len(saw) > 1:
            break
    state = nc.connection_state(node.id)
    nc.close()
    srv.close()
    return state, saw, time.time() - t0


def test_hostile_garbage():
    def garbage(c):
        _read_request(c)
        c.sendall(b"\x00\x00\x00\x08garbage!")  # a frame whose body is not an ApiVersions answer
        time.sleep(2)

    state, saw, _ = _hostile_case(garbage)
    assert state == "DISCONNECTED" and "READY" not in saw


def test_hostile_wrong_correlation_id():
    def wrong(c):
        _, _, cid = _read_request(c)
        body = struct.pack(">ih", cid + 1000, 0) + b"\x01\x00\x00\x00\x00\x00"
        c.sendall(struct.pack(">i", len(body)) + body)
        time.sleep(2)

    state, saw, _ = _hostile_case(wrong)
    assert state == "DISCONNECTED" and "READY" not in saw


def test_hostile_truncated_frame():
    def truncated(c):
        _read_request(c)
        c.sendall(b"\x00\x00\x01\x00\x00\x00")  # promises 256 bytes, sends 2, closes
        c.close()

    state, saw, _ = _hostile_case(truncated)
    assert state == "DISCONNECTED" and "READY" not in saw


def test_hostile_two_gib_length_prefix():
    def huge(c):
        _read_request(c)
        c.sendall(b"\x7f\xff\xff\xff" + b"\x00" * 64)
        time.sleep(2)

    state, saw, _ = _hostile_case(huge)
    assert state == "DISCONNECTED" and "READY" not in saw


def test_hostile_silent_server_times_out():
    def silent(c):
        _read_request(c)
        time.sleep(5)

    state, saw, elapsed = _hostile_case(silent, request_timeout_ms=800)
    assert state == "DISCONNECTED" and "CHECKING_API_VERSIONS" in saw
    assert 0.7 < elapsed < 4


def test_hostile_user_request_gets_clear_error():
    """A broker that negotiates fine, then answers a user request with a wrong id."""

    def evil(c):
        _, _, cid = _read_request(c)
        # ApiVersions v3 answer: error 0, Metadata 0..12 and ApiVersions 0..3 (compact array of 2).
        body = struct.pack(">ih", cid, 0) + bytes([3]) + struct.pack(">hhh", 3, 0, 12) + b"\x00" \
            + struct.pack(">hhh", 18, 0, 3) + b"\x00" + struct.pack(">i", 0) + b"\x00"
        c.sendall(struct.pack(">i", len(body)) + body)
        _, _, cid = _read_request(c)
        bad = struct.pack(">i", cid + 7) + b"\x00" * 16
        c.sendall(struct.pack(">i", len(bad)) + bad)
        time.sleep(2)

    srv = Hostile(evil)
    nc = fk.NetworkClient(f"127.0.0.1:{srv.port}")
    node = nc.least_loaded_node()
    # The minimal updater's own Metadata request goes first and meets the wrong id.
    out = []
    deadline = time.time() + 5
    while time.time() < deadline and nc.connection_state(node.id) != "DISCONNECTED":
        nc.ready(node)
        out += nc.poll(50)
    assert nc.connection_state(node.id) == "DISCONNECTED"
    assert nc.in_flight_request_count() == 0
    nc.close()
    srv.close()


def test_ctrl_c_interrupts_poll(broker):
    import _thread
    import signal

    # A shell starts background jobs with SIGINT ignored, and Python then
    # keeps it ignored: interrupt_main() would do nothing. Give the test the
    # handler an interactive Python has.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    nc = fk.NetworkClient(broker.bootstrap_servers)
    try:
        _connect(nc)
        assert _until(lambda: nc.in_flight_request_count() == 0, nc=nc)
        timer = threading.Timer(0.2, _thread.interrupt_main)
        timer.start()
        t0 = time.time()
        with pytest.raises(KeyboardInterrupt):
            # poll returns after any I/O (as Java's does), e.g. the updater's
            # own Metadata answer: poll again until the Ctrl-C lands in one.
            while time.time() - t0 < 10:
                nc.poll(10_000)
        assert time.time() - t0 < 2
    finally:
        signal.signal(signal.SIGINT, previous)
        nc.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_runtime_survives_fork(broker):
    """Spark forks Python workers: a child must get its own runtime."""
    nc = fk.NetworkClient(broker.bootstrap_servers)
    node = _connect(nc)  # the parent's runtime is running now
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            c = fk.NetworkClient(broker.bootstrap_servers)
            n = _connect(c)
            r = _round_trip(c, n, MetadataRequest([]), timeout=5)
            code = 0 if not r.disconnected else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    r = _round_trip(nc, node, MetadataRequest([]))  # the parent is unaffected
    assert not r.disconnected
    nc.close()
