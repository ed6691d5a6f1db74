"""Shared fixtures: a session Tansu broker and a fresh librdkafka mock cluster per test.

Outside CI a missing broker binary or confluent-kafka skips the tests that need them.
With CI=true or FERROKAFKA_REQUIRE_BROKERS set (scripts/test.sh sets it) it fails them,
so CI can never pass by testing nothing.
"""

from __future__ import annotations

import os
import uuid

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes") or bool(
    os.environ.get("FERROKAFKA_REQUIRE_BROKERS")
)


def _unavailable(what: str, err: object):
    """A missing test dependency: a failure where the suite must be complete
    (CI, FERROKAFKA_REQUIRE_BROKERS), a skip elsewhere."""
    msg = f"{what} unavailable: {err} (scripts/install-test-deps.sh installs the test dependencies)"
    if IN_CI:
        pytest.fail(msg, pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def embedded_broker():
    from ferrokafka.testing import EmbeddedBroker

    try:
        broker = EmbeddedBroker()
    except ImportError as e:
        _unavailable("Tansu broker", e)
    except Exception as e:
        if "TansuBinaryNotFound" in type(e).__name__:
            _unavailable("Tansu broker binary", e)
        raise
    with broker:
        yield broker


@pytest.fixture
def mock_cluster():
    from ferrokafka.testing import MockCluster

    try:
        cluster = MockCluster(num_brokers=3)
    except ImportError as e:
        _unavailable("librdkafka mock cluster (confluent-kafka)", e)
    with cluster:
        yield cluster


@pytest.fixture
def topic_name(request):
    """A topic name no other test uses, since the session broker is shared."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def confluent_kafka():
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError as e:
        _unavailable("confluent-kafka", e)
    return confluent_kafka
