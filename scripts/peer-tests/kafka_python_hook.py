"""pytest plugin for scripts/peer-tests/kafka_python.sh: run kafka-python's
own tests with ``import kafka`` answered by ferrokafka's facade.

Loaded with ``-p kafka_python_hook`` before any test module is imported:

* ``kafka`` and its public submodules (``kafka.errors``, ``kafka.structs``,
  ``kafka.future``, ``kafka.serializer``, ``kafka.producer``,
  ``kafka.consumer``, ``kafka.admin``) become ferrokafka.compat.kafka's
  modules. Other ``kafka.*`` modules (kafka-python's internals, which some
  test helpers import) are found in the unpacked sdist through the facade
  package's ``__path__``, after the facade's own files;
* the integration tests' broker fixture is pointed at an embedded broker
  (Tansu) started here (``KAFKA_URI``; the script sets ``KAFKA_VERSION=4.0``
  so no ZooKeeper);
* ``test.service``, which the sdist does not ship, gets a stand-in with the
  one class the external-broker path uses (``ExternalService``).
"""

from __future__ import annotations

import os
import sys
import types

import ferrokafka.compat.kafka as facade
from ferrokafka.compat.kafka import admin, consumer, errors, future, producer, serializer, structs

SDIST = os.environ["KAFKA_PYTHON_SDIST"]

sys.modules["kafka"] = facade
for _name, _mod in (("errors", errors), ("structs", structs), ("future", future),
                    ("serializer", serializer), ("producer", producer),
                    ("consumer", consumer), ("admin", admin)):
    sys.modules[f"kafka.{_name}"] = _mod
# kafka-python's admin data classes (ACLs, configs, partitions, offsets specs)
# belong to admin methods the facade refuses; the admin test module imports
# them at the top, so for collection only they are placeholders that refuse
# to be built. The tests of the refused methods then fail, saying so.
def _placeholder(name):
    def init(self, *args, **kwargs):
        raise NotImplementedError(f"kafka.admin.{name} is not provided by ferrokafka.compat.kafka")
    return type(name, (), {"__init__": init})


for _name in ("ACLFilter", "ACLOperation", "ACLPermissionType", "ResourcePattern", "ResourceType",
              "ACL", "ConfigResource", "ConfigResourceType", "NewPartitions", "OffsetSpec"):
    if not hasattr(admin, _name):
        setattr(admin, _name, _placeholder(_name))

# kafka-python's internals (kafka.util, kafka.codec, kafka.net...) from the sdist.
facade.__path__ = list(facade.__path__) + [os.path.join(SDIST, "kafka")]


class ExternalService:
    """A broker someone else runs: nothing to start or stop."""

    def __init__(self, host, port):
        self.host, self.port = host, port

    def open(self):
        pass

    def stop(self):
        pass

    def dump_logs(self):
        pass


class SpawnedService:  # the fixtures' own broker processes: not used here
    def __init__(self, *args, **kwargs):
        raise RuntimeError("kafka-python's spawned test brokers are out of scope; KAFKA_URI is set")


# The sdist's test/ has no __init__.py: without this, ``import test`` would
# be CPython's regression-test package.
_test_pkg = types.ModuleType("test")
_test_pkg.__path__ = [os.path.join(SDIST, "test")]
sys.modules["test"] = _test_pkg

_service = types.ModuleType("test.service")
_service.ExternalService = ExternalService
_service.SpawnedService = SpawnedService
sys.modules["test.service"] = _service

_broker = None


def pytest_configure(config):
    global _broker
    if os.environ.get("KAFKA_PYTHON_PEER_BROKER") == "1":
        from ferrokafka.testing import EmbeddedBroker

        _broker = EmbeddedBroker()
        _broker.__enter__()
        host, _, port = _broker.bootstrap_servers.rpartition(":")
        os.environ["KAFKA_URI"] = f"PLAINTEXT://{host}:{port}"


def pytest_unconfigure(config):
    if _broker is not None:
        _broker.__exit__(None, None, None)
