"""MockCluster: librdkafka's in-process mock Kafka cluster, loaded from the confluent-kafka wheel.

Signatures follow librdkafka's rdkafka_mock.h. A wrong ctypes signature corrupts the
process silently, so every function used is declared in _SIGNATURES and nothing is
called without one.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from ctypes import POINTER, c_char_p, c_int, c_int16, c_int32, c_int64, c_size_t, c_void_p
from typing import Iterable

from ._net import Closing

__all__ = ["MockCluster"]

_INSTALL_HINT = "MockCluster needs confluent-kafka's librdkafka: pip install ferrokafka[testing]"

_err = c_int  # rd_kafka_resp_err_t is a C enum

_SIGNATURES = {
    "rd_kafka_conf_new": (c_void_p, []),
    "rd_kafka_conf_set": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_size_t]),
    "rd_kafka_conf_destroy": (None, [c_void_p]),
    "rd_kafka_new": (c_void_p, [c_int, c_void_p, c_char_p, c_size_t]),
    "rd_kafka_destroy": (None, [c_void_p]),
    "rd_kafka_err2name": (c_char_p, [_err]),
    "rd_kafka_version_str": (c_char_p, []),
    "rd_kafka_mock_cluster_new": (c_void_p, [c_void_p, c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (c_char_p, [c_void_p]),
    "rd_kafka_mock_topic_create": (_err, [c_void_p, c_char_p, c_int, c_int]),
    "rd_kafka_mock_topic_set_error": (None, [c_void_p, c_char_p, _err]),
    "rd_kafka_mock_partition_set_leader": (_err, [c_void_p, c_char_p, c_int32, c_int32]),
    "rd_kafka_mock_partition_set_follower": (_err, [c_void_p, c_char_p, c_int32, c_int32]),
    "rd_kafka_mock_broker_set_down": (_err, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_set_up": (_err, [c_void_p, c_int32]),
    "rd_kafka_mock_broker_set_rtt": (_err, [c_void_p, c_int32, c_int]),
    "rd_kafka_mock_broker_set_rack": (_err, [c_void_p, c_int32, c_char_p]),
    "rd_kafka_mock_coordinator_set": (_err, [c_void_p, c_char_p, c_char_p, c_int32]),
    "rd_kafka_mock_push_request_errors_array": (None, [c_void_p, c_int16, c_size_t, POINTER(_err)]),
    "rd_kafka_mock_clear_request_errors": (None, [c_void_p, c_int16]),
    "rd_kafka_mock_set_apiversion": (_err, [c_void_p, c_int16, c_int16, c_int16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [c_void_p, c_int32]),
    # KIP-714 telemetry knobs and the request log (which API keys arrived)
    "rd_kafka_mock_telemetry_set_requested_metrics": (_err, [c_void_p, POINTER(c_char_p), c_size_t]),
    "rd_kafka_mock_telemetry_set_push_interval": (_err, [c_void_p, c_int64]),
    "rd_kafka_mock_start_request_tracking": (None, [c_void_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [c_void_p]),
    "rd_kafka_mock_get_requests": (POINTER(c_void_p), [c_void_p, POINTER(c_size_t)]),
    "rd_kafka_mock_request_api_key": (c_int16, [c_void_p]),
    "rd_kafka_mock_request_destroy_array": (None, [POINTER(c_void_p), c_size_t]),
    "rd_kafka_mock_clear_requests": (None, [c_void_p]),
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": (None, [c_void_p, c_int]),
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": (None, [c_void_p, c_int]),
    "rd_kafka_mock_sharegroup_set_auto_offset_reset": (None, [c_void_p, c_int]),
    "rd_kafka_mock_sharegroup_set_record_lock_duration": (None, [c_void_p, c_int]),
    "rd_kafka_mock_sharegroup_set_session_timeout": (None, [c_void_p, c_int]),
    "rd_kafka_mock_sharegroup_set_heartbeat_interval": (None, [c_void_p, c_int]),
}

_lib = None
_lib_lock = threading.Lock()


def _find_librdkafka() -> str:
    override = os.environ.get("FERROKAFKA_LIBRDKAFKA")
    if override:
        return override
    try:
        import confluent_kafka
    except ImportError as e:
        raise ImportError(_INSTALL_HINT) from e
    pkg = os.path.dirname(confluent_kafka.__file__)
    # manylinux wheels vendor it in confluent_kafka.libs/, macOS wheels in .dylibs/
    pats = [
        os.path.join(os.path.dirname(pkg), "confluent_kafka.libs", "librdkafka*.so*"),
        os.path.join(pkg, ".dylibs", "librdkafka*.dylib"),
        os.path.join(pkg, "librdkafka*"),
    ]
    for pat in pats:
        hits = sorted(glob.glob(pat))
        if hits:
            return hits[0]
    raise ImportError(f"confluent-kafka is installed but its bundled librdkafka was not found. {_INSTALL_HINT}")


def _load():
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(_find_librdkafka())
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = lib
        return _lib


class MockClusterError(RuntimeError):
    pass


class MockCluster(Closing):
    """librdkafka's mock cluster: brokers with ids 1..num_brokers on loopback ports.

    It runs inside an rd_kafka_t handle that this object owns; the handle is never used
    as a client.
    """

    def __init__(self, num_brokers: int = 3, *, initial_rebalance_delay_ms: int | None = 0) -> None:
        self._lib = _load()
        self._rk = None
        self._mc = None
        errstr = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        # FERROKAFKA_MOCK_DEBUG=mock,protocol shows what the mock parsed and why it refused.
        settings = [("log_level", "3"), ("client.id", "ferrokafka-mock-host")]
        if os.environ.get("FERROKAFKA_MOCK_DEBUG"):
            settings += [("log_level", "7"), ("debug", os.environ["FERROKAFKA_MOCK_DEBUG"])]
        for k, v in settings:
            if self._lib.rd_kafka_conf_set(conf, k.encode(), v.encode(), errstr, len(errstr)) != 0:
                self._lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError(errstr.value.decode())
        # rd_kafka_new takes ownership of conf only on success.
        rk = self._lib.rd_kafka_new(0, conf, errstr, len(errstr))  # 0 = RD_KAFKA_PRODUCER
        if not rk:
            self._lib.rd_kafka_conf_destroy(conf)
            raise MockClusterError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._rk = rk
        mc = self._lib.rd_kafka_mock_cluster_new(rk, int(num_brokers))
        if not mc:
            self.close()
            raise MockClusterError("rd_kafka_mock_cluster_new failed")
        self._mc = mc
        self.num_brokers = int(num_brokers)
        self.bootstrap_servers: str = self._lib.rd_kafka_mock_cluster_bootstraps(mc).decode()
        # librdkafka's mock advertises the flexible versions of the group
        # APIs (JoinGroup v6, Heartbeat/LeaveGroup/SyncGroup v4) but parses
        # their bodies as the previous version ("ProtocolCnt 50754145 > max
        # allowed", "read buffer underflow for SyncGroup v4"), then drops the
        # connection; librdkafka itself never sends them. Advertise what it
        # really parses, so clients that negotiate properly can use groups.
        for api_key, max_version in ((11, 5), (12, 3), (13, 3), (14, 3)):
            self._lib.rd_kafka_mock_set_apiversion(mc, api_key, 0, max_version)
        if initial_rebalance_delay_ms is not None:
            # Default 3s initial delay would make every group test wait for nothing.
            self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mc, int(initial_rebalance_delay_ms))

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.num_brokers + 1))

    def _h(self):
        if not self._mc:
            raise MockClusterError("MockCluster is closed")
        return self._mc

    def _check(self, err: int, what: str) -> None:
        if err:
            name = self._lib.rd_kafka_err2name(err).decode()
            raise MockClusterError(f"{what} failed: {name} ({err})")

    def create_topic(self, name: str, partitions: int = 1, replication: int = 1) -> None:
        self._check(
            self._lib.rd_kafka_mock_topic_create(self._h(), name.encode(), partitions, replication),
            f"create_topic({name!r})",
        )

    def set_topic_error(self, topic: str, code: int) -> None:
        """Metadata for `topic` reports error `code` until set back to 0."""
        self._lib.rd_kafka_mock_topic_set_error(self._h(), topic.encode(), code)

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """broker_id -1 makes the partition leaderless."""
        self._check(
            self._lib.rd_kafka_mock_partition_set_leader(self._h(), topic.encode(), partition, broker_id),
            "set_partition_leader",
        )

    def set_partition_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """The broker consumers are told to fetch from (KIP-392)."""
        self._check(
            self._lib.rd_kafka_mock_partition_set_follower(self._h(), topic.encode(), partition, broker_id),
            "set_partition_follower",
        )

    def set_broker_down(self, broker_id: int) -> None:
        """Closes its connections and refuses new ones; it stays in metadata."""
        self._check(self._lib.rd_kafka_mock_broker_set_down(self._h(), broker_id), "set_broker_down")

    def set_broker_up(self, broker_id: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_up(self._h(), broker_id), "set_broker_up")

    def set_rtt(self, broker_id: int, ms: int) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_rtt(self._h(), broker_id, ms), "set_rtt")

    def set_rack(self, broker_id: int, rack: str) -> None:
        self._check(self._lib.rd_kafka_mock_broker_set_rack(self._h(), broker_id, rack.encode()), "set_rack")

    def set_coordinator(self, group_id: str, broker_id: int, key_type: str = "group") -> None:
        """key_type "group" or "transaction"."""
        self._check(
            self._lib.rd_kafka_mock_coordinator_set(self._h(), key_type.encode(), group_id.encode(), broker_id),
            "set_coordinator",
        )

    def push_request_errors(self, api_key: int, codes: Iterable[int]) -> None:
        """The next len(codes) requests of api_key, to any broker, fail with these codes in order."""
        codes = list(codes)
        arr = (_err * len(codes))(*codes)
        self._lib.rd_kafka_mock_push_request_errors_array(self._h(), api_key, len(codes), arr)

    def clear_request_errors(self, api_key: int) -> None:
        self._lib.rd_kafka_mock_clear_request_errors(self._h(), api_key)

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Narrow what ApiVersions advertises; (-1, -1) disables the API."""
        self._check(
            self._lib.rd_kafka_mock_set_apiversion(self._h(), api_key, min_version, max_version),
            "set_apiversion",
        )

    def set_telemetry(self, requested_metrics: Iterable[str], push_interval_ms: int) -> None:
        """KIP-714: the metric-name prefixes the brokers ask clients for
        (``[""]``: all, ``[]``: none) and how often they ask for them."""
        names = [m.encode() for m in requested_metrics]
        arr = (c_char_p * max(1, len(names)))(*names)
        self._check(self._lib.rd_kafka_mock_telemetry_set_requested_metrics(self._h(), arr, len(names)),
                    "telemetry_set_requested_metrics")
        self._check(self._lib.rd_kafka_mock_telemetry_set_push_interval(self._h(), int(push_interval_ms)),
                    "telemetry_set_push_interval")

    def start_request_tracking(self) -> None:
        """Record every request the brokers receive (see ``requests``)."""
        self._lib.rd_kafka_mock_start_request_tracking(self._h())

    def requests(self) -> list[int]:
        """The API keys of the requests received since tracking started, in order."""
        n = c_size_t(0)
        reqs = self._lib.rd_kafka_mock_get_requests(self._h(), ctypes.byref(n))
        try:
            return [self._lib.rd_kafka_mock_request_api_key(reqs[i]) for i in range(n.value)]
        finally:
            if reqs:
                self._lib.rd_kafka_mock_request_destroy_array(reqs, n.value)

    def set_group_initial_rebalance_delay_ms(self, ms: int) -> None:
        self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._h(), ms)

    def set_group_consumer_heartbeat_interval_ms(self, ms: int) -> None:
        """KIP-848 groups: the heartbeat interval the coordinator hands out (default 3000)."""
        self._lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(self._h(), ms)

    def set_group_consumer_session_timeout_ms(self, ms: int) -> None:
        """KIP-848 groups: members silent this long are fenced (default 30000)."""
        self._lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(self._h(), ms)
    def enable_share_groups(self, *, earliest: bool = True) -> None:
        """Ready the mock for share-group tests: it serves KIP-932's APIs
        (ShareGroupHeartbeat 76, ShareFetch 78, ShareAcknowledge 79) as is, but
        starts share groups at the latest offset like Kafka; ``earliest`` makes
        records produced before the first member joined visible."""
        self.set_share_auto_offset_reset(earliest)

    def set_share_auto_offset_reset(self, earliest: bool) -> None:
        """Where share groups start reading (Kafka's share.auto.offset.reset; latest by default)."""
        self._lib.rd_kafka_mock_sharegroup_set_auto_offset_reset(self._h(), 1 if earliest else 0)

    def set_share_record_lock_duration(self, ms: int) -> None:
        """How long a share group's acquired record stays locked to its member."""
        self._lib.rd_kafka_mock_sharegroup_set_record_lock_duration(self._h(), int(ms))

    def set_share_session_timeout(self, ms: int) -> None:
        self._lib.rd_kafka_mock_sharegroup_set_session_timeout(self._h(), int(ms))

    def set_share_heartbeat_interval(self, ms: int) -> None:
        self._lib.rd_kafka_mock_sharegroup_set_heartbeat_interval(self._h(), int(ms))

    def close(self) -> None:
        # The cluster runs on the handle's threads: destroy it before the handle.
        mc, self._mc = self._mc, None
        rk, self._rk = self._rk, None
        if mc:
            self._lib.rd_kafka_mock_cluster_destroy(mc)
        if rk:
            self._lib.rd_kafka_destroy(rk)

    def __enter__(self) -> "MockCluster":
        return self

    def __repr__(self) -> str:
        return f"MockCluster({self.num_brokers}, bootstrap_servers={getattr(self, 'bootstrap_servers', None)!r})"
