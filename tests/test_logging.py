"""The client's own log lines reach Python `logging` under `ferrokafka.*`, at the
levels docs/metrics.md lists: connection lifecycle at INFO, failures at WARNING,
protocol detail at DEBUG; nothing formatted when the level is off."""

from __future__ import annotations

import logging
import time
import uuid

import ferrokafka as fk
from ferrokafka.testing import free_port

PREFIX = "[Producer clientId=ferrokafka] "


def _messages(caplog, level):
    """The lines of the producers of these tests, without their prefix."""
    return [r.getMessage().removeprefix(PREFIX) for r in caplog.records
            if r.name == "ferrokafka.network" and r.levelno == level and r.getMessage().startswith(PREFIX)]


def test_connection_lifecycle_at_info_and_requests_at_debug(embedded_broker, caplog):
    # The session's broker: "connected to node -1 (host:port)" is the same
    # words for every client of it, and each client's lines are its own, so
    # one logged by an earlier test does not hold this client's back.
    topic = "log-" + uuid.uuid4().hex[:8]
    caplog.set_level(logging.DEBUG, logger="ferrokafka")
    with fk.Producer(embedded_broker.bootstrap_servers) as p:
        p.send(topic, b"v").result(30)
        p.flush(10)
    info = _messages(caplog, logging.INFO)
    debug = _messages(caplog, logging.DEBUG)
    assert any(m.startswith("connected to node") and "APIs" in m for m in info), info
    assert any(m.startswith("request Produce v") for m in debug), debug[:20]
    assert any(m.startswith("connecting to node") for m in debug), debug[:20]


def test_nothing_below_the_level_is_logged(embedded_broker, caplog):
    caplog.set_level(logging.WARNING, logger="ferrokafka")
    topic = "log-" + uuid.uuid4().hex[:8]
    with fk.Producer(embedded_broker.bootstrap_servers) as p:
        p.send(topic, b"v").result(30)
    assert not [r for r in caplog.records if r.name.startswith("ferrokafka") and r.levelno < logging.WARNING]


def _lines(caplog, words):
    return [r.getMessage() for r in caplog.records if r.name.startswith("ferrokafka") and words in r.getMessage()]


def test_each_client_logs_its_own_failure_with_javas_prefix(caplog):
    """Two producers with the same client id and a consumer reach one dead
    broker: each says so in its own line, prefixed as the Java client's are.
    An identical line is held back for 10 s, but only against the same
    client's: before, the second client's line counted as a repeat of the
    first's and nothing said that client was failing."""
    caplog.set_level(logging.WARNING, logger="ferrokafka")
    dead = f"127.0.0.1:{free_port()}"
    clients = [fk.Producer(dead, client_id="app"), fk.Producer(dead, client_id="app"),
               fk.Consumer(dead, client_id="app", group_id="g")]
    try:
        clients[2].subscribe(["t"])
        for p in clients[:2]:
            p.send("t", b"x", block=False)
        deadline = time.time() + 20
        while time.time() < deadline:
            clients[2].poll(100)
            # A first line each (a client's later ones, 10 s on, say how
            # many they stand for).
            down = [m for m in _lines(caplog, "brokers are down") if "repeated" not in m]
            producers = [m for m in down if m.startswith("[Producer clientId=app] ")]
            consumers = [m for m in down if m.startswith("[Consumer clientId=app, groupId=g] ")]
            if len(producers) >= 2 and consumers:
                break
        assert len(producers) == 2 and len(consumers) == 1, _lines(caplog, "brokers are down")
    finally:
        for c in clients:
            c.close(0)
