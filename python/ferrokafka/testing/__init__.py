"""Local Kafka-protocol brokers for tests: a real Tansu process (ferrokafka's patched build) and librdkafka's mock cluster."""

from ._broker import BrokerStartError, EmbeddedBroker, TansuBinaryNotFound, api_versions, free_port
from ._mock import MockCluster

__all__ = ["EmbeddedBroker", "MockCluster", "BrokerStartError", "TansuBinaryNotFound", "api_versions", "free_port"]
