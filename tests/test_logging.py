"""The client's own log lines reach Python `logging` under `ferrokafka.*`, at the
levels docs/metrics.md lists: connection lifecycle at INFO, failures at WARNING,
protocol detail at DEBUG; nothing formatted when the level is off."""

from __future__ import annotations

import logging
import uuid

import ferrokafka as fk


def _messages(caplog, level):
    return [r.getMessage() for r in caplog.records if r.name == "ferrokafka.network" and r.levelno == level]


def test_connection_lifecycle_at_info_and_requests_at_debug(caplog):
    # A broker of this test's own: an identical line is logged once per 10 s
    # (logbridge.rs), and "connected to node -1 (host:port)" is identical for
    # every client of the session's broker, so a test run just before this one
    # (same worker) would have taken this test's line.
    from ferrokafka.testing import EmbeddedBroker

    topic = "log-" + uuid.uuid4().hex[:8]
    caplog.set_level(logging.DEBUG, logger="ferrokafka")
    with EmbeddedBroker() as broker, fk.Producer(broker.bootstrap_servers) as p:
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
