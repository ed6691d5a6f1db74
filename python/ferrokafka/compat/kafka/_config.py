"""kafka-python's options and how ferrokafka honours each: ONE table.

Every option kafka-python 3.0 accepts for ``KafkaProducer`` (P),
``KafkaConsumer`` (C) or ``KafkaAdminClient`` (A) has one row:

* ``native``: passed to the native client under its ferrokafka name, through
  a converter for kafka-python's units and spellings;
* ``facade``: implemented by the facade itself (serializers, consumer_timeout_ms...);
* ``only``: accepted only with the listed values (those that describe what
  ferrokafka does anyway); any other value is refused with the reason;
* ``refused``: accepted only at kafka-python's default; anything else is
  refused with the reason. Never accepted and ignored.

An option kafka-python does not know for that client raises
``KafkaConfigurationError("Unrecognized configs: ...")`` as kafka-python does
(it is also a ``ValueError``). Where kafka-python's default differs from
ferrokafka's (``linger_ms`` 0 against 5...), kafka-python's is passed, so a
program behaves as it did. ``scripts/gen-compat-kafka-doc.py`` renders this
table into docs/compat-kafka-python.md.
"""

from __future__ import annotations

import itertools
import logging
import selectors
import socket
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from ..._config import OPTIONS as NATIVE_OPTIONS
from .errors import KafkaConfigurationError

__all__ = ["Entry", "TABLE", "split_config", "KAFKA_PYTHON_VERSION"]

# The kafka-python release whose public API this facade follows.
KAFKA_PYTHON_VERSION = "3.0.12"

_INT_MAX = 2**31 - 1
OMIT = object()  # a converter's answer: pass nothing, keep ferrokafka's default

log = logging.getLogger("ferrokafka.compat.kafka")


@dataclass(frozen=True)
class Entry:
    name: str
    clients: str                    # subset of "PCA"
    default: Any                    # kafka-python's default
    how: str                        # "native", "facade", "only", "refused"
    target: Optional[str] = None    # ferrokafka option (native)
    convert: Optional[Callable[[Any], Any]] = None
    note: str = ""                  # what it does / why refused
    allowed: Tuple[Any, ...] = ()   # "only": accepted values
    accepts: Optional[Callable[[Any], bool]] = None  # "only": or a test of the value


def _bad(key: str, value: Any, why: str) -> KafkaConfigurationError:
    return KafkaConfigurationError(f"invalid value {value!r} for option {key!r}: {why}")


def servers(value: Any) -> list:
    """kafka-python takes "host[:port]" strings (comma separated) or a list;
    the port defaults to 9092."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for raw in items:
        s = str(raw).strip()
        if not s:
            continue
        if s.startswith("["):
            has_port = "]:" in s
        elif s.count(":") > 1:  # a bare IPv6 address
            s, has_port = f"[{s}]", False
        else:
            has_port = ":" in s
        out.append(s if has_port else f"{s}:9092")
    if not out:
        raise _bad("bootstrap_servers", value, "expected 'host[:port]' strings")
    return out


def _acks(v: Any) -> str:
    m = {0: "0", 1: "1", -1: "all", "all": "all", "0": "0", "1": "1", "-1": "all"}
    if isinstance(v, bool) or v not in m:
        raise _bad("acks", v, "expected 0, 1, -1 or 'all'")
    return m[v]


def _retries(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        raise _bad("retries", v, "expected a number >= 0 (float('inf') for no limit)")
    return _INT_MAX if v >= _INT_MAX else int(v)


def _compression(v: Any) -> str:
    return "none" if v is None else v


def _offset_reset(v: Any) -> str:
    # kafka-python still accepts the 0.8 names (with a deprecation warning).
    return {"smallest": "earliest", "largest": "latest"}.get(v, v)


def _assignors(v: Any) -> tuple:
    """kafka-python assignor classes (or instances) by their ``name``, or names."""
    names = []
    for a in (v if isinstance(v, (list, tuple)) else [v]):
        name = a if isinstance(a, str) else getattr(a, "name", None)
        if name not in ("range", "roundrobin", "sticky", "cooperative-sticky"):
            raise _bad("partition_assignment_strategy", a,
                       "ferrokafka runs the range, roundrobin, sticky and cooperative-sticky "
                       "assignors in Rust; a custom Python assignor is not supported")
        names.append(name)
    return tuple(names)


def _none_omits(v: Any) -> Any:
    return OMIT if v is None else v


def _rack(v: Any) -> Any:
    return None if v in ("", None) else v


def _sasl_mechanism(v: Any) -> Any:
    if v is None:
        return OMIT
    if v == "GSSAPI":
        raise _bad("sasl_mechanism", v, "Kerberos (GSSAPI) is not supported by ferrokafka; "
                   "use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER")
    return v


def _token_provider(v: Any) -> Any:
    # kafka-python's AbstractTokenProvider has token() -> str; the native
    # option takes a zero-argument callable returning the token.
    if v is None:
        return None
    if callable(getattr(v, "token", None)):
        return v.token
    if callable(v):
        return v
    raise _bad("sasl_oauth_token_provider", v, "expected an object with a token() method")


def _partitioner(v: Any) -> Any:
    if v is None or type(v).__name__ == "DefaultPartitioner":
        return OMIT  # ferrokafka's default is the same murmur2 partitioning
    if hasattr(v, "partition"):
        raise _bad("partitioner", v, "a kafka.partitioner.Partitioner object needs kafka-python's "
                   "cluster metadata; pass a callable fn(key_bytes, all_partitions, "
                   "available_partitions) -> int instead")
    if callable(v):
        return v
    raise _bad("partitioner", v, "expected a callable fn(key_bytes, all_partitions, available_partitions)")


def _modern_broker(v: Any) -> bool:
    """api_version naming a broker of 0.11 or later: what ferrokafka's
    ApiVersions negotiation finds on such a broker. Older versions ask for
    the pre-0.11 message formats, which ferrokafka does not write."""
    if v is None:
        return True
    try:
        t = tuple(int(x) for x in (v.split(".") if isinstance(v, str) else v))
    except (TypeError, ValueError):
        return False
    return t >= (0, 11)


_NODELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]


def _n(name: str, clients: str, default: Any, target: Optional[str] = None,
       convert: Optional[Callable] = None, note: str = "") -> Entry:
    return Entry(name, clients, default, "native", target or name, convert, note)


def _f(name: str, clients: str, default: Any, note: str) -> Entry:
    return Entry(name, clients, default, "facade", note=note)


def _only(name: str, clients: str, default: Any, allowed: tuple, note: str) -> Entry:
    return Entry(name, clients, default, "only", note=note, allowed=allowed)


def _r(name: str, clients: str, default: Any, note: str) -> Entry:
    return Entry(name, clients, default, "refused", note=note, allowed=(default,))


_ROWS = [
    # --- connections, common to the three clients ---
    _n("bootstrap_servers", "PCA", "localhost", convert=servers,
       note="'host[:port]' or a list; port 9092 when left out"),
    _f("client_id", "PCA", None, "passed as client_id; kafka-python's default names "
       "(kafka-python-producer-N, kafka-python-3.0.12) when None"),
    _n("request_timeout_ms", "PCA", 30000),
    _n("connections_max_idle_ms", "PCA", 540000),
    _n("reconnect_backoff_ms", "PCA", 50),
    _n("reconnect_backoff_max_ms", "PCA", 30000),
    _n("max_in_flight_requests_per_connection", "PCA", 5),
    _n("receive_message_max_bytes", "PCA", 100_000_000, "max_response_size"),
    _n("receive_buffer_bytes", "PCA", None, convert=_none_omits,
       note="None keeps ferrokafka's default (-1: the OS default)"),
    _n("send_buffer_bytes", "PCA", None, convert=_none_omits,
       note="None keeps ferrokafka's default (1048576; -1 is the OS default)"),
    _only("socket_options", "PCA", _NODELAY, (_NODELAY,),
          "ferrokafka's sockets (in Rust) always set TCP_NODELAY, and nothing else can be set"),
    _n("retry_backoff_ms", "PCA", 100),
    _n("metadata_max_age_ms", "PCA", 300000),
    _only("client_dns_lookup", "PCA", "use_all_dns_ips", ("use_all_dns_ips",),
          "ferrokafka tries every address a name resolves to; "
          "'resolve_canonical_bootstrap_servers_only' is not supported"),
    _n("security_protocol", "PCA", "PLAINTEXT"),
    _r("ssl_context", "PCA", None, "a Python ssl.SSLContext cannot be handed to ferrokafka's Rust "
       "TLS stack; use ssl_cafile, ssl_certfile, ssl_keyfile"),
    _n("ssl_check_hostname", "PCA", True),
    _n("ssl_cafile", "PCA", None),
    _n("ssl_certfile", "PCA", None),
    _n("ssl_keyfile", "PCA", None),
    _r("ssl_password", "PCA", None, "encrypted private keys are not supported: decrypt the key file"),
    _r("ssl_crlfile", "PCA", None, "certificate revocation lists are not supported"),
    _r("ssl_ciphers", "PC", None, "the cipher suites are those of ferrokafka's TLS stack (rustls)"),
    Entry("api_version", "PCA", None, "only", note="ferrokafka negotiates API versions with "
          "ApiVersions on every connection and writes message format v2 only: a broker version "
          "of 0.11 or later is accepted (the negotiation finds what it names), an older one is refused",
          allowed=(None,), accepts=_modern_broker),
    _f("bootstrap_timeout_ms", "PCA", 30000, "the constructor waits this long for a broker "
       "and raises NoBrokersAvailable (a KafkaTimeoutError) if none answers"),
    _only("selector", "PCA", selectors.DefaultSelector, (selectors.DefaultSelector,),
          "ferrokafka's network loop runs in Rust, not on a Python selector"),
    _n("sasl_mechanism", "PCA", None, convert=_sasl_mechanism, note="GSSAPI refused"),
    _n("sasl_plain_username", "PCA", None, "sasl_username"),
    _n("sasl_plain_password", "PCA", None, "sasl_password"),
    _r("sasl_kerberos_name", "PCA", None, "Kerberos (GSSAPI) is not supported"),
    _r("sasl_kerberos_service_name", "PCA", "kafka", "Kerberos (GSSAPI) is not supported"),
    _r("sasl_kerberos_domain_name", "PCA", None, "Kerberos (GSSAPI) is not supported"),
    _n("sasl_oauth_token_provider", "PCA", None, convert=_token_provider,
       note="its token() is called before each authentication"),
    _r("proxy_url", "PCA", None, "connecting through a proxy is not supported"),
    _r("socks5_proxy", "PCA", None, "connecting through a proxy is not supported"),
    _r("metric_reporters", "PCA", [], "metrics are read with metrics(); reporters are not supported"),
    _r("metrics_num_samples", "PCA", 2, "ferrokafka's metrics are kept by the Rust core, not sampled"),
    _r("metrics_sample_window_ms", "PCA", 30000, "ferrokafka's metrics are kept by the Rust core, not sampled"),
    _f("metrics_enabled", "PC", True, "False makes metrics() return None, as in kafka-python"),
    _r("kafka_client", "PCA", None, "kafka-python's internal network client class has no "
       "counterpart: the network client is ferrokafka's Rust core"),
    # --- producer ---
    _f("key_serializer", "P", None, "called on the key in send()"),
    _f("value_serializer", "P", None, "called on the value in send()"),
    _n("enable_idempotence", "P", True),
    _n("transactional_id", "P", None),
    _n("transaction_timeout_ms", "P", 60000),
    _n("delivery_timeout_ms", "P", 120000),
    _n("acks", "P", -1, convert=_acks, note="0, 1, -1 or 'all'"),
    _n("compression_type", "P", None, convert=_compression, note="None is 'none'"),
    _n("retries", "P", float("inf"), convert=_retries, note="inf is 2**31-1"),
    _n("batch_size", "P", 16384),
    _n("linger_ms", "P", 0),
    _n("partitioner", "P", None, convert=_partitioner,
       note="a callable fn(key_bytes, all_partitions, available_partitions); "
       "kafka.partitioner.Partitioner objects refused"),
    _n("max_block_ms", "P", 60000),
    _n("max_request_size", "P", 1048576),
    _only("allow_auto_create_topics", "P", True, (True,),
          "ferrokafka's producer always lets the broker create a topic on first use"),
    # --- consumer ---
    _n("client_rack", "C", "", convert=_rack),
    _n("group_id", "C", None),
    _n("group_instance_id", "C", None),
    _f("key_deserializer", "C", None, "called on each record's key"),
    _f("value_deserializer", "C", None, "called on each record's value"),
    _only("enable_incremental_fetch_sessions", "C", True, (False,),
          "ferrokafka sends full fetch requests (no KIP-227 fetch sessions); only False is accepted"),
    _n("fetch_max_wait_ms", "C", 500),
    _n("fetch_min_bytes", "C", 1),
    _n("fetch_max_bytes", "C", 52428800),
    _n("max_partition_fetch_bytes", "C", 1048576),
    _n("auto_offset_reset", "C", "latest", convert=_offset_reset,
       note="'smallest'/'largest' read as 'earliest'/'latest'"),
    _f("enable_auto_commit", "C", True, "passed as enable_auto_commit; dropped (with a warning, "
       "as kafka-python) when group_id is None"),
    _n("auto_commit_interval_ms", "C", 5000),
    _f("default_offset_commit_callback", "C", None, "called as callback(offsets, response_or_error) "
       "for commit_async() without a callback"),
    _n("check_crcs", "C", True),
    _n("isolation_level", "C", "read_uncommitted"),
    _only("allow_auto_create_topics", "C", True, (False,),
          "ferrokafka's consumer never creates topics (metadata requests do not ask for it); "
          "only False is accepted"),
    _n("partition_assignment_strategy", "C", ("range", "roundrobin"), convert=_assignors,
       note="assignor classes or names: range, roundrobin, sticky, cooperative-sticky"),
    _n("max_poll_records", "C", 500),
    _n("max_poll_interval_ms", "C", 300000),
    _n("session_timeout_ms", "C", 45000),
    _n("heartbeat_interval_ms", "C", 3000),
    _f("consumer_timeout_ms", "C", float("inf"), "iteration stops after this long without a record"),
    _r("metric_group_prefix", "C", "consumer", "ferrokafka's metric names are fixed"),
    _only("exclude_internal_topics", "C", True, (True,),
          "pattern subscriptions never match internal topics in ferrokafka"),
]

# (name, client) -> entry: the same name may be handled differently per client.
TABLE: Dict[Tuple[str, str], Entry] = {}
for _e in _ROWS:
    for _c in _e.clients:
        TABLE[(_e.name, _c)] = _e

_CLIENT_NAMES = {"P": "KafkaProducer", "C": "KafkaConsumer", "A": "KafkaAdminClient"}
_NATIVE_CLIENT = {"P": "Producer", "C": "Consumer", "A": "Admin"}
_SEQ = {"P": itertools.count(1), "C": itertools.count(1), "A": itertools.count(1)}


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


def split_config(client: str, configs: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """kafka-python ``configs`` of ``client`` ("P", "C" or "A") ->
    (native options, facade settings with kafka-python's defaults filled in).
    Raises KafkaConfigurationError (a ValueError) naming the key."""
    unknown = {k: v for k, v in configs.items() if (k, client) not in TABLE}
    if unknown:
        raise KafkaConfigurationError(f"Unrecognized configs: {unknown}")
    native: Dict[str, Any] = {}
    facade: Dict[str, Any] = {}
    for (name, c), e in TABLE.items():
        if c != client:
            continue
        given = name in configs
        value = configs[name] if given else e.default
        if e.how == "facade":
            facade[name] = value
        elif e.how in ("only", "refused"):
            ok = any(_same(value, a) for a in e.allowed) or (e.accepts is not None and e.accepts(value))
            if given and not ok:
                raise KafkaConfigurationError(
                    f"option {name!r} = {value!r} is not supported by ferrokafka: {e.note}")
        else:
            out = e.convert(value) if e.convert else value
            if out is OMIT:
                continue
            target = str(e.target)
            native_opt = NATIVE_OPTIONS[target]
            # kafka-python's own defaults where they differ from ferrokafka's,
            # so a program behaves as it did (linger_ms 0, reconnect backoff up to 30 s).
            if given or not _same(out, native_opt.default):
                native[target] = out
    if facade.get("client_id") is None:
        facade["client_id"] = (f"kafka-python-producer-{next(_SEQ['P'])}" if client == "P"
                               else f"kafka-python-{KAFKA_PYTHON_VERSION}")
    native["client_id"] = facade["client_id"]
    if client == "C":
        _consumer_rules(configs, native, facade)
    return native, facade


def _consumer_rules(configs: Dict[str, Any], native: Dict[str, Any], facade: Dict[str, Any]) -> None:
    # kafka-python checks these three against each other at construction.
    wait = configs.get("fetch_max_wait_ms", 500)
    req = configs.get("request_timeout_ms", 30000)
    idle = configs.get("connections_max_idle_ms", 540000)
    if not (wait < req < idle):
        raise KafkaConfigurationError(
            f"connections_max_idle_ms ({idle}) must be larger than request_timeout_ms ({req}) "
            f"which must be larger than fetch_max_wait_ms ({wait}).")
    if native.get("group_id") is None:
        if configs.get("enable_auto_commit"):
            log.warning("group_id is None: disabling auto-commit.")
    else:
        native["enable_auto_commit"] = bool(facade["enable_auto_commit"])
    if native.get("group_instance_id") is not None and native.get("group_id") is None:
        raise KafkaConfigurationError("group_instance_id requires group_id")


def rows() -> list:
    """The table's rows in order (for the generated doc)."""
    return list(_ROWS)


def client_name(c: str) -> str:
    return _CLIENT_NAMES[c]


def native_client(c: str) -> str:
    return _NATIVE_CLIENT[c]
