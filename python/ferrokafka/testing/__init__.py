"""Local Kafka-protocol brokers for tests: a real Tansu process and librdkafka's mock cluster."""

from ._broker import BrokerStartError, EmbeddedBroker, api_versions, free_port
from ._mock import MockCluster

__all__ = ["EmbeddedBroker", "MockCluster", "BrokerStartError", "api_versions", "free_port"]
