"""KIP-714 client metrics push (enable_metrics_push, on by default as in
Java), against librdkafka's mock cluster, which serves
GetTelemetrySubscriptions (71) and PushTelemetry (72)."""

from __future__ import annotations

import time

import pytest

import ferrokafka as fk

GET_SUBSCRIPTIONS, PUSH = 71, 72


@pytest.fixture
def mock():
    from ferrokafka.testing import MockCluster

    with MockCluster(num_brokers=1) as m:
        m.create_topic("tel", 1, 1)
        m.start_request_tracking()
        yield m


def _wait_for(pred, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_every_client_pushes_its_metrics_by_default(mock, kind):
    mock.set_telemetry([""], push_interval_ms=300)
    bs = mock.bootstrap_servers
    client = {"producer": lambda: fk.Producer(bs), "consumer": lambda: fk.Consumer(bs, group_id="tel-g"),
              "admin": lambda: fk.Admin(bs)}[kind]()
    try:
        if kind == "producer":
            client.send("tel", b"v").result(10)
        assert _wait_for(lambda: mock.requests().count(PUSH) >= 2), mock.requests()
        assert mock.requests().count(GET_SUBSCRIPTIONS) >= 1
    finally:
        client.close()
    # close sends the terminating push
    pushes = mock.requests().count(PUSH)
    assert pushes >= 3, pushes


def test_no_push_when_nothing_is_subscribed_or_when_turned_off(mock):
    mock.set_telemetry([], push_interval_ms=200)
    with fk.Producer(mock.bootstrap_servers) as p:
        p.send("tel", b"v").result(10)
        assert _wait_for(lambda: mock.requests().count(GET_SUBSCRIPTIONS) >= 2), "asks again each interval"
        assert PUSH not in mock.requests()
    mock.set_telemetry([""], push_interval_ms=200)
    before = len(mock.requests())
    with fk.Producer(mock.bootstrap_servers, enable_metrics_push=False) as p:
        p.send("tel", b"v").result(10)
        time.sleep(0.8)
    sent = mock.requests()[before:]
    assert GET_SUBSCRIPTIONS not in sent and PUSH not in sent, sent


def test_option_is_checked():
    with pytest.raises(ValueError, match="enable_metrics_push"):
        fk.Producer("127.0.0.1:1", enable_metrics_push="sometimes")
    assert fk.Consumer("127.0.0.1:1", **{"enable.metrics.push": False}).config["enable_metrics_push"] is False


def test_a_broker_without_telemetry_costs_nothing(embedded_broker, topic_name):
    """Tansu serves neither API: the client turns telemetry off at the first
    answer and close does not wait for a terminating push."""
    with fk.Producer(embedded_broker.bootstrap_servers) as p:
        p.send(topic_name, b"v").result(30)
    t0 = time.time()
    p.close()
    assert time.time() - t0 < 1.0
