"""NetworkClient against librdkafka's mock cluster (from the confluent-kafka wheel).

Uses ``ferrokafka.testing.MockCluster`` when the testing work provides it, else a
small ctypes binding of the same C API (kept local to this file).
"""

from __future__ import annotations

import ctypes
import glob
import os
import time

import pytest

import ferrokafka as fk
from ferrokafka.protocol import MetadataRequest


class _CtypesMock:
    def __init__(self, num_brokers: int = 3) -> None:
        ck = pytest.importorskip("confluent_kafka")
        libdir = os.path.join(os.path.dirname(os.path.dirname(ck.__file__)), "confluent_kafka.libs")
        libs = glob.glob(os.path.join(libdir, "librdkafka*.so*"))
        if not libs:
            pytest.skip("librdkafka not found in the confluent-kafka wheel")
        lib = ctypes.CDLL(libs[0])
        lib.rd_kafka_conf_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.restype = ctypes.c_void_p
        lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
        lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
        lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
        for f in ("rd_kafka_mock_broker_set_down", "rd_kafka_mock_broker_set_up"):
            getattr(lib, f).argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.rd_kafka_mock_broker_set_rtt.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_int]
        lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
        errstr = ctypes.create_string_buffer(512)
        self.lib = lib
        self.rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, 512)
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, num_brokers)
        self.bootstrap_servers = lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def set_rtt(self, broker_id: int, ms: int) -> None:
        self.lib.rd_kafka_mock_broker_set_rtt(self.mc, broker_id, ms)

    def set_broker_down(self, broker_id: int) -> None:
        self.lib.rd_kafka_mock_broker_set_down(self.mc, broker_id)

    def set_broker_up(self, broker_id: int) -> None:
        self.lib.rd_kafka_mock_broker_set_up(self.mc, broker_id)

    def close(self) -> None:
        self.lib.rd_kafka_mock_cluster_destroy(self.mc)
        self.lib.rd_kafka_destroy(self.rk)


@pytest.fixture
def mock():
    try:
        from ferrokafka.testing import MockCluster  # type: ignore[attr-defined]

        m = MockCluster(num_brokers=3)
        m.__enter__()
        yield m
        m.__exit__(None, None, None)
    except ImportError:
        m = _CtypesMock(3)
        yield m
        m.close()


def _until(pred, nc, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        nc.poll(50)
    return pred()


def _broker_node(nc):
    """Connect through bootstrap, wait for the first Metadata, return broker 1's Node."""
    boot = nc.least_loaded_node()
    assert _until(lambda: nc.ready(boot), nc)
    assert _until(lambda: any(n.id == 1 for n in nc.nodes()), nc)
    return next(n for n in nc.nodes() if n.id == 1)


def test_mock_negotiates_and_reports_versions(mock):
    nc = fk.NetworkClient(mock.bootstrap_servers)
    node = _broker_node(nc)
    assert _until(lambda: nc.ready(node), nc)
    versions = nc.api_versions(node.id)
    assert 3 in versions and 18 in versions
    assert versions[1][1] <= 16  # the mock stops at Fetch v16
    nc.close()


def test_high_rtt_queue_of_30_respects_cap_and_order(mock):
    nc = fk.NetworkClient(mock.bootstrap_servers, max_in_flight_requests_per_connection=5)
    node = _broker_node(nc)
    assert _until(lambda: nc.ready(node), nc)
    mock.set_rtt(1, 100)
    queue = [MetadataRequest([]) for _ in range(30)]
    sent, got, peak = [], [], 0
    deadline = time.time() + 30
    while len(got) < 30 and time.time() < deadline:
        while queue and nc.ready(node):
            req = nc.new_client_request(node.id, queue.pop(0))
            nc.send(req)
            sent.append(req.correlation_id)
            peak = max(peak, nc.in_flight_request_count(node.id))
            assert nc.in_flight_request_count(node.id) <= 5
        for r in nc.poll(50):
            assert not r.disconnected
            got.append(r.request_header.correlation_id)
    assert got == sent and len(got) == 30
    assert all(a < b for a, b in zip(got, got[1:]))
    assert peak == 5
    nc.close()


def test_broker_down_mid_flight_completes_disconnected(mock):
    nc = fk.NetworkClient(mock.bootstrap_servers, reconnect_backoff_ms=300, reconnect_backoff_max_ms=300,
                          request_timeout_ms=5000)
    node = _broker_node(nc)
    assert _until(lambda: nc.ready(node), nc)
    mock.set_rtt(1, 1000)
    sent = []
    while len(sent) < 3 and _until(lambda: nc.ready(node), nc, timeout=2):
        req = nc.new_client_request(node.id, MetadataRequest([]))
        nc.send(req)
        sent.append(req.correlation_id)
    assert len(sent) == 3
    mock.set_broker_down(1)
    out = []
    deadline = time.time() + 10
    while len(out) < 3 and time.time() < deadline:
        out += [r for r in nc.poll(50) if r.request_header.correlation_id in sent]
    assert [r.request_header.correlation_id for r in out] == sent
    assert all(r.disconnected for r in out)
    assert nc.connection_state(node.id) == "DISCONNECTED"
    assert nc.in_flight_request_count(node.id) == 0
    # Reconnect waits the backoff; with the broker down, attempts fail.
    t0 = time.time()
    assert not nc.ready(node)
    mock.set_rtt(1, 0)
    mock.set_broker_up(1)
    assert _until(lambda: nc.ready(node), nc, timeout=15)
    assert time.time() - t0 >= 0.2  # the backoff (300 ms +-20%) was honoured
    nc.close()
