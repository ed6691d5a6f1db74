"""NetworkClient against librdkafka's mock cluster (``ferrokafka.testing.MockCluster``)."""

from __future__ import annotations

import time

import pytest

import ferrokafka as fk
from ferrokafka.protocol import MetadataRequest


@pytest.fixture
def mock(mock_cluster):
    """conftest.py's MockCluster (librdkafka mock, 3 brokers)."""
    return mock_cluster


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


def test_mock_unsupported_version_completes_locally(mock):
    """The broker's FindCoordinator range made disjoint from ours: the request
    completes on the next poll with UnsupportedVersionError, nothing is sent."""
    from ferrokafka.protocol import FindCoordinatorRequest

    mock.set_apiversion(10, -1, -1)  # librdkafka: -1/-1 = API not supported
    nc = fk.NetworkClient(mock.bootstrap_servers)
    node = _broker_node(nc)
    assert _until(lambda: nc.ready(node), nc)
    assert 10 not in nc.api_versions(node.id)
    req = nc.new_client_request(node.id, FindCoordinatorRequest("g"))
    nc.send(req)
    assert nc.in_flight_request_count(node.id) == 0
    (r,) = [r for r in nc.poll(1000) if r.request_header.correlation_id == req.correlation_id]
    assert isinstance(r.version_mismatch, fk.UnsupportedVersionError)
    assert r.version_mismatch.code == 35
    nc.close()
