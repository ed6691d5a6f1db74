"""librdkafka configuration names -> ferrokafka options: ONE table.

Every property a confluent-kafka program may pass is a row of ``TABLE``:
mapped to a ferrokafka option (with a converter for librdkafka's values and
units), handled by the facade itself, or refused with the reason. A key that
is not in the table is refused too: nothing is accepted and ignored.
``scripts/gen-compat-doc.py`` writes the table into docs/compat-confluent.md.

Values may be strings, as librdkafka takes them (``{"linger.ms": "5"}``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

from ..._config import CONSUMER
from ._error import config_error

_log = logging.getLogger("ferrokafka.compat")

_INT_MAX = 2**31 - 1


def _int(v: Any) -> int:
    if isinstance(v, bool):
        raise ValueError("expected an integer, not a bool")
    return int(v)


def _ms(v: Any) -> int:
    # librdkafka takes fractional milliseconds for linger.ms; ferrokafka's
    # unit is the whole millisecond.
    f = float(v)
    return int(round(f))


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("true", "1", "t", "yes", "on"):
        return True
    if s in ("false", "0", "f", "no", "off"):
        return False
    raise ValueError("expected true or false")


def _str(v: Any) -> str:
    return str(v)


def _servers(v: Any) -> str:
    # librdkafka takes "host" without a port and uses 9092, and a list in
    # a str separated by commas (spaces allowed).
    items = v if isinstance(v, (list, tuple)) else str(v).split(",")
    out = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        has_port = item.rsplit(":", 1)[-1].isdigit() and (":" in item) and not item.endswith("]")
        out.append(item if has_port else f"{item}:9092")
    if not out:
        raise ValueError("expected host[:port][,host[:port]...]")
    return ",".join(out)


def _partitioner(v: Any) -> str:
    from ..._config import PRODUCER

    s = str(v).strip()
    choices = PRODUCER.options["partitioner"].choices or ()
    if s not in choices:
        raise ValueError(f"expected one of {', '.join(choices)}")
    return s


def _acks(v: Any) -> str:
    s = str(v).strip().lower()
    if s in ("all", "-1"):
        return "all"
    if s in ("0", "1"):
        return s
    raise ValueError("expected all, -1, 0 or 1 (ferrokafka waits for one or all replicas, not a count)")


_RESET = {"smallest": "earliest", "earliest": "earliest", "beginning": "earliest",
          "largest": "latest", "latest": "latest", "end": "latest", "error": "none"}


def _reset(v: Any) -> str:
    s = str(v).strip().lower()
    if s not in _RESET:
        raise ValueError(f"expected one of {', '.join(_RESET)}")
    return _RESET[s]


def _upper(v: Any) -> str:
    return str(v).strip().upper()


def _endpoint_check(v: Any) -> bool:
    s = str(v).strip().lower()
    if s == "https":
        return True
    if s == "none":
        return False
    raise ValueError("expected https or none")


def _strategies(v: Any) -> Tuple[str, ...]:
    parts = v if isinstance(v, (list, tuple)) else str(v).split(",")
    return tuple(p.strip() for p in parts if p.strip())


def _kbytes(v: Any) -> int:
    return _int(v) * 1024


def _timeout_ms(v: Any) -> int:
    # librdkafka: message.timeout.ms = 0 means no limit.
    n = _int(v)
    return _INT_MAX if n == 0 else n


def _positive_ms(v: Any) -> int:
    n = _int(v)
    if n < 0:
        raise ValueError("a negative value (disabled refresh) is not supported: ferrokafka always refreshes metadata")
    return n


def _callable(v: Any) -> Any:
    if not callable(v):
        raise ValueError("expected a callable")
    return v


def _only(value: Any, why: str) -> Callable[[Any], Any]:
    """Accept only the value that is ferrokafka's behaviour anyway."""
    def conv(v: Any) -> Any:
        if str(v).strip().lower() != str(value).lower():
            raise ValueError(f"only {value!r} is supported: {why}")
        return None
    return conv


@dataclass(frozen=True)
class Row:
    clients: str            # "P", "C", "A": which clients the property applies to
    native: Optional[str]   # ferrokafka option name; None when handled by the facade / refused
    convert: Optional[Callable[[Any], Any]] = None
    note: str = ""
    refused: bool = False

    @property
    def kind(self) -> str:
        return "refused" if self.refused else ("native" if self.native else "facade")


def N(native: str, clients: str = "PCA", convert: Optional[Callable[[Any], Any]] = None, note: str = "") -> Row:
    return Row(clients, native, convert, note)


def F(clients: str, convert: Optional[Callable[[Any], Any]], note: str) -> Row:
    return Row(clients, None, convert, note)


def R(why: str, clients: str = "PCA") -> Row:
    return Row(clients, None, None, why, refused=True)


# librdkafka name -> row. The order is the order of the generated doc.
TABLE: Dict[str, Row] = {
    # --- connection -------------------------------------------------------------------
    "bootstrap.servers": N("bootstrap_servers", convert=_servers, note="required; port 9092 when none is given"),
    "metadata.broker.list": N("bootstrap_servers", convert=_servers, note="alias of bootstrap.servers"),
    "client.id": N("client_id", convert=_str),
    "request.timeout.ms": N("request_timeout_ms", convert=_int),
    "socket.connection.setup.timeout.ms": N("socket_connection_setup_timeout_ms", convert=_int),
    "connections.max.idle.ms": N("connections_max_idle_ms", convert=_int),
    "reconnect.backoff.ms": N("reconnect_backoff_ms", convert=_int),
    "reconnect.backoff.max.ms": N("reconnect_backoff_max_ms", convert=_int),
    "retry.backoff.ms": N("retry_backoff_ms", convert=_int),
    "retry.backoff.max.ms": N("retry_backoff_max_ms", convert=_int),
    "metadata.max.age.ms": N("metadata_max_age_ms", convert=_positive_ms),
    "topic.metadata.refresh.interval.ms": N("metadata_max_age_ms", convert=_positive_ms,
                                            note="ferrokafka refreshes all known topics at this interval"),
    "max.in.flight.requests.per.connection": N("max_in_flight_requests_per_connection", convert=_int),
    "max.in.flight": N("max_in_flight_requests_per_connection", convert=_int),
    "receive.message.max.bytes": N("max_response_size", convert=_int),
    "socket.send.buffer.bytes": N("send_buffer_bytes", convert=_int),
    "socket.receive.buffer.bytes": N("receive_buffer_bytes", convert=_int),
    "api.version.request": F("PCA", _only("true", "ferrokafka always asks brokers for their API versions"),
                             "only `true` (ferrokafka always negotiates versions)"),
    "socket.timeout.ms": N("request_timeout_ms", convert=_int,
                           note="librdkafka's default timeout of network requests"),
    "socket.keepalive.enable": R("ferrokafka does not set SO_KEEPALIVE"),
    "broker.version.fallback": R("ferrokafka always negotiates API versions (KIP-35 brokers only)"),
    "api.version.fallback.ms": R("ferrokafka always negotiates API versions (KIP-35 brokers only)"),
    "client.dns.lookup": R("ferrokafka resolves each address as given"),
    # --- security ---------------------------------------------------------------------
    "security.protocol": N("security_protocol", convert=_upper, note="case-insensitive as in librdkafka"),
    "sasl.mechanism": N("sasl_mechanism", convert=_upper),
    "sasl.mechanisms": N("sasl_mechanism", convert=_upper),
    "sasl.username": N("sasl_username", convert=_str),
    "sasl.password": N("sasl_password", convert=_str),
    "ssl.ca.location": N("ssl_cafile", convert=_str),
    "ssl.certificate.location": N("ssl_certfile", convert=_str),
    "ssl.key.location": N("ssl_keyfile", convert=_str),
    "ssl.endpoint.identification.algorithm": N("ssl_check_hostname", convert=_endpoint_check,
                                               note="`https` -> check, `none` -> no check"),
    "ssl.key.password": R("encrypted private keys are not supported; decrypt the key file"),
    "ssl.ca.pem": R("give the CA as a file (ssl.ca.location)"),
    "ssl.certificate.pem": R("give the certificate as a file (ssl.certificate.location)"),
    "ssl.key.pem": R("give the key as a file (ssl.key.location)"),
    "ssl.keystore.location": R("PKCS#12 keystores are not supported; use PEM files"),
    "enable.ssl.certificate.verification": R("certificate verification cannot be turned off"),
    "sasl.kerberos.service.name": R("GSSAPI (Kerberos) is not supported"),
    "oauth_cb": R("the token callback has a different signature in ferrokafka: "
                  "use ferrokafka.Producer(..., sasl_oauth_token_provider=...)"),
    "sasl.oauthbearer.config": R("unsecured JWT tokens are not supported"),
    # --- callbacks and logging --------------------------------------------------------
    "error_cb": F("PCA", _callable, "called from poll()/flush() with a KafkaError for connection "
                  "errors (`_TRANSPORT`, `_RESOLVE`, `_ALL_BROKERS_DOWN`, `_AUTHENTICATION`)"),
    "logger": F("PCA", None, "a `logging.Logger`: gets this client's `ferrokafka` log records while it is open "
                "(each record carries its client's id as `ferrokafka_client`; lines of no client, such as "
                "configuration warnings, go to every client's logger)"),
    "debug": F("PCA", _str, "any value: the `ferrokafka` loggers log at DEBUG while the client is open "
               "(to `logger`, else to stderr); librdkafka's contexts are not told apart"),
    "log_level": R("use logging.getLogger('ferrokafka').setLevel(...)"),
    "log.connection.close": R("connection closes are logged at DEBUG on the `ferrokafka.network` logger"),
    "stats_cb": F("PCA", _callable, "called from poll() every statistics.interval.ms with a JSON str: "
                  "librdkafka's identity fields, ferrokafka's metrics under `ferrokafka`, no broker/topic trees"),
    "statistics.interval.ms": F("PCA", _int, "0 (the default) disables stats_cb, as in librdkafka"),
    "throttle_cb": R("throttle events are not reported"),
    "default.topic.config": F("PCA", None, "flattened into the top-level configuration"),
    # --- producer ---------------------------------------------------------------------
    "acks": N("acks", "P", _acks, "-1/all, 0, 1"),
    "request.required.acks": N("acks", "P", _acks, "-1/all, 0, 1"),
    "linger.ms": N("linger_ms", "P", _ms, "fractions rounded to whole ms"),
    "queue.buffering.max.ms": N("linger_ms", "P", _ms, "fractions rounded to whole ms"),
    "batch.size": N("batch_size", "P", _int, "default 1000000, as librdkafka's"),
    "batch.num.messages": R("ferrokafka bounds batches by bytes only (batch.size)", "P"),
    "queue.buffering.max.kbytes": N("buffer_memory", "P", _kbytes,
                                    "kbytes x 1024; produce() raises BufferError when full"),
    "queue.buffering.max.messages": F("P", _int, "produce() raises BufferError when this many messages "
                                      "await delivery or their callback (default 100000)"),
    "compression.type": N("compression_type", "P", _str),
    "compression.codec": N("compression_type", "P", _str),
    "compression.level": N("compression_level", "P", _int),
    "enable.idempotence": N("enable_idempotence", "P", _bool,
                            "default true (Java's default; librdkafka's is false)"),
    "message.timeout.ms": N("delivery_timeout_ms", "P", _timeout_ms,
                            "0 = no limit; lowers request.timeout.ms to fit when that is not set"),
    "delivery.timeout.ms": N("delivery_timeout_ms", "P", _timeout_ms,
                             "0 = no limit; lowers request.timeout.ms to fit when that is not set"),
    "message.send.max.retries": N("retries", "P", _int),
    "retries": N("retries", "P", _int),
    "message.max.bytes": N("max_request_size", "P", _int),
    "partitioner": N("partitioner", "P", _partitioner, "default consistent_random, as librdkafka"),
    "transactional.id": N("transactional_id", "P", _str),
    "on_delivery": F("P", _callable, "default delivery callback `(err, msg)`, run from poll()/flush()"),
    "dr_cb": F("P", _callable, "same as on_delivery"),
    "dr_msg_cb": F("P", _callable, "same as on_delivery"),
    "delivery.report.only.error": F("P", _bool, "callbacks run only for failed deliveries"),
    "sticky.partitioning.linger.ms": R("keyless records go to partitions as the partitioner says", "P"),
    "transaction.timeout.ms": N("transaction_timeout_ms", "P", _int),
    "enable.gapless.guarantee": R("not supported", "P"),
    # --- consumer ---------------------------------------------------------------------
    "group.id": N("group_id", "C", _str),
    "group.instance.id": N("group_instance_id", "C", _str),
    "auto.offset.reset": N("auto_offset_reset", "C", _reset,
                           "smallest/earliest/beginning, largest/latest/end, error"),
    "enable.auto.commit": N("enable_auto_commit", "C", _bool),
    "auto.commit.interval.ms": N("auto_commit_interval_ms", "C", _int),
    "enable.auto.offset.store": F("C", _bool, "false: the facade commits only what store_offsets() stored "
                                  "(auto-commit then runs in poll()/consume()/close())"),
    "enable.partition.eof": F("C", _bool, "poll() returns a `_PARTITION_EOF` event when a partition "
                              "reaches its end"),
    "on_commit": F("C", _callable, "`(err, [TopicPartition])` after each commit, run from poll(); "
                   "auto-commit then runs in poll()/consume()/close()"),
    "session.timeout.ms": N("session_timeout_ms", "C", _int),
    "heartbeat.interval.ms": N("heartbeat_interval_ms", "C", _int),
    "max.poll.interval.ms": N("max_poll_interval_ms", "C", _int),
    "partition.assignment.strategy": N("partition_assignment_strategy", "C", _strategies,
                                       "comma-separated list"),
    "group.protocol": F("C", _only("classic", "the KIP-848 protocol is not in this build"),
                        "only `classic`"),
    "isolation.level": N("isolation_level", "C", _str),
    "fetch.min.bytes": N("fetch_min_bytes", "C", _int),
    "fetch.max.bytes": N("fetch_max_bytes", "C", _int),
    "fetch.wait.max.ms": N("fetch_max_wait_ms", "C", _int),
    "max.partition.fetch.bytes": N("max_partition_fetch_bytes", "C", _int),
    "fetch.message.max.bytes": N("max_partition_fetch_bytes", "C", _int),
    "check.crcs": N("check_crcs", "C", _bool),
    "client.rack": N("client_rack", "C", _str),
    "allow.auto.create.topics": R("subscribing never creates topics", "C"),
    "queued.min.messages": R("prefetching is bounded by fetch.max.bytes", "C"),
    "queued.max.messages.kbytes": R("prefetching is bounded by fetch.max.bytes", "C"),
    "fetch.error.backoff.ms": R("fetch errors back off by retry.backoff.ms", "C"),
    "group.remote.assignor": R("the KIP-848 protocol is not in this build", "C"),
}

# What the facade does when the user says nothing (librdkafka's choice where
# it differs from ferrokafka's and matters to a program switching over).
PRODUCER_DEFAULTS = {"partitioner": "consistent_random"}
FACADE_DEFAULTS = {"queue.buffering.max.messages": 100_000, "enable.auto.offset.store": True,
                   "enable.partition.eof": False, "delivery.report.only.error": False}

_CLIENT = {"Producer": "P", "Consumer": "C", "AdminClient": "A"}


def translate(conf: Any, client: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """``conf`` (librdkafka names) -> (ferrokafka options, facade settings).

    Raises a ``ConfigException`` (a KafkaException and a ValueError) naming
    the key for an unknown, refused or invalid property."""
    if not isinstance(conf, dict):
        raise TypeError(f"expected configuration dict, not {type(conf).__name__}")
    items = [(k, v, False) for k, v in conf.items() if k != "default.topic.config"]
    topic_conf = conf.get("default.topic.config")
    if topic_conf is not None:
        if not isinstance(topic_conf, dict):
            raise config_error("invalid value for 'default.topic.config': expected a dict")
        # Topic-level defaults; a top-level property (any spelling) wins.
        items += [(k, v, True) for k, v in topic_conf.items()]
    letter = _CLIENT[client]
    native: Dict[str, Any] = {}
    given_by: Dict[str, str] = {}
    facade: Dict[str, Any] = dict(FACADE_DEFAULTS)
    for key, value, topic_level in items:
        if value is None:
            continue  # None leaves a property unset (confluent-kafka issue #133)
        row = TABLE.get(key)
        if row is None:
            raise config_error(f'No such configuration property: "{key}" (not a librdkafka property '
                               "ferrokafka's confluent-kafka facade knows, docs/compat-confluent.md)")
        if row.refused:
            raise config_error(f'Configuration property "{key}" is not supported by ferrokafka: {row.note}')
        if letter not in row.clients:
            # librdkafka's behaviour: a property of another client type is
            # ignored with a warning, so one dict can serve both clients.
            _log.warning("configuration property %r is a %s property and will be ignored by this %s",
                         key, "/".join(n for n, c in _CLIENT.items() if c in row.clients), client)
            continue
        try:
            v = row.convert(value) if row.convert is not None and value is not None else value
        except (TypeError, ValueError) as e:
            raise config_error(f'Invalid value for configuration property "{key}": {value} ({e})') from None
        if row.native is None:
            facade[key] = value if row.convert is None else v
            continue
        if topic_level and row.native in given_by:
            continue
        if row.native in given_by and given_by[row.native] != key:
            raise config_error(f"configuration properties {given_by[row.native]!r} and {key!r} "
                               "set the same thing; give one")
        given_by[row.native] = key
        native[row.native] = v
    if client == "Consumer":
        _fit_heartbeat(native)
    if client == "Producer":
        for k, v in PRODUCER_DEFAULTS.items():
            native.setdefault(k, v)
        _fit_request_timeout(native)
        # librdkafka's message timeout runs from produce(), waiting for the
        # topic's metadata included; produce() appends with block=False, whose
        # wait for metadata is bounded by max_block_ms.
        native["max_block_ms"] = native.get("delivery_timeout_ms", 120_000)
    return native, facade


def _fit_heartbeat(native: Dict[str, Any]) -> None:
    # librdkafka does not tie heartbeat.interval.ms (default 3000) to
    # session.timeout.ms; ferrokafka, as Java, needs heartbeats more often
    # than the session times out. With only a short session timeout given,
    # the heartbeat default becomes a third of it (Java's recommendation).
    session = native.get("session_timeout_ms")
    if session is not None and "heartbeat_interval_ms" not in native and session <= 3000:
        native["heartbeat_interval_ms"] = max(1, session // 3)


def _fit_request_timeout(native: Dict[str, Any]) -> None:
    # librdkafka bounds a produce request by the smaller of socket.timeout.ms
    # and what is left of message.timeout.ms, so a message timeout shorter
    # than the request timeout is valid there. ferrokafka, as Java, needs
    # delivery_timeout_ms >= linger_ms + request_timeout_ms: when a delivery
    # timeout is given, the request timeout (and the default linger) are
    # lowered to fit, which is librdkafka's effective behaviour.
    if "delivery_timeout_ms" not in native:
        return
    total = native["delivery_timeout_ms"]
    linger = native.get("linger_ms", 5)
    if "linger_ms" not in native and linger >= total:
        linger = native["linger_ms"] = max(0, total // 2)
    if linger >= total:
        raise config_error(f"invalid value {linger!r} for configuration property 'linger.ms': it must be "
                           f"shorter than message.timeout.ms ({total})")
    if linger + native.get("request_timeout_ms", 30_000) > total:
        native["request_timeout_ms"] = max(1, total - linger)


def metadata_options(native: Dict[str, Any]) -> Dict[str, Any]:
    """The connection options of ``native`` a group-less consumer takes (the
    producer and admin facades ask metadata through one)."""
    return {k: v for k, v in native.items() if k in CONSUMER.options and k not in ("group_id",)}


def doc_rows() -> list:
    """(librdkafka name, clients, what happens) for docs/compat-confluent.md."""
    rows = []
    for key, row in TABLE.items():
        if row.refused:
            what = f"refused: {row.note}"
        elif row.native:
            what = f"`{row.native}`" + (f" ({row.note})" if row.note else "")
        else:
            what = f"facade: {row.note}"
        rows.append((key, " ".join(row.clients), what))
    return rows


BEGIN = "<!-- BEGIN config table: generated by scripts/gen-compat-doc.py from TABLE in " \
        "python/ferrokafka/compat/confluent_kafka/_config.py; do not edit by hand -->"
END = "<!-- END config table -->"


def config_markdown() -> str:
    """The config section of docs/compat-confluent.md (between BEGIN and END)."""
    lines = [BEGIN, "", "| librdkafka property | Clients | ferrokafka |", "|---|---|---|"]
    for key, clients, what in doc_rows():
        lines.append(f"| `{key}` | {clients} | {what.replace('|', chr(92) + '|')} |")
    lines += ["", END]
    return "\n".join(lines)


def splice_doc(page: str) -> str:
    """``page`` with its config section replaced by the current table."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ValueError("docs/compat-confluent.md has no generated config section (BEGIN/END markers)")
    return page[:start] + config_markdown() + page[end + len(END):]

