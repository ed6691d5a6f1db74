from __future__ import annotations

import socket
import threading
import time

import pytest

import ferrokafka as fk
from ferrokafka._config import (
    ADMIN,
    CONSUMER,
    NETWORK_CLIENT,
    PRODUCER,
    ConfigTable,
    Option,
)


def test_dotted_and_snake_names_are_equivalent():
    a = PRODUCER.resolve({"bootstrap.servers": "h1:9092,h2:9093", "linger.ms": 7})
    b = PRODUCER.resolve(bootstrap_servers=["h1:9092", "h2:9093"], linger_ms=7)
    assert a == b
    assert a["bootstrap_servers"] == ("h1:9092", "h2:9093")
    assert a["linger_ms"] == 7


def test_defaults_match_api_contract():
    p = PRODUCER.resolve(bootstrap_servers="h:1")
    assert (p["acks"], p["linger_ms"], p["batch_size"], p["enable_idempotence"]) == ("all", 5, 1_000_000, True)
    assert p["retries"] == 2**31 - 1 and p["partitioner"] == "murmur2"
    c = CONSUMER.resolve(bootstrap_servers="h:1")
    assert c["auto_offset_reset"] == "latest"
    assert c["partition_assignment_strategy"] == ("range", "cooperative-sticky")
    assert c["session_timeout_ms"] == 45_000 and c["group_id"] is None
    n = NETWORK_CLIENT.resolve(bootstrap_servers="h:1")
    assert n["client_id"] == "ferrokafka" and n["reconnect_backoff_max_ms"] == 1000
    assert "default_api_timeout_ms" in ADMIN.resolve(bootstrap_servers="h:1")


def test_kwargs_override_dict():
    assert PRODUCER.resolve({"bootstrap.servers": "h:1", "linger.ms": 1}, linger_ms=9)["linger_ms"] == 9


def test_unknown_option_names_it_and_suggests():
    with pytest.raises(ValueError, match=r"'linger\.mss'.*linger\.ms"):
        PRODUCER.resolve({"bootstrap.servers": "h:1", "linger.mss": 1})
    # a consumer option is not a producer option
    with pytest.raises(ValueError, match="group_id"):
        PRODUCER.resolve(bootstrap_servers="h:1", group_id="g")


@pytest.mark.parametrize(
    "key,value,accepted",
    [
        ("acks", "2", "'all', '0', '1'"),
        ("compression_type", "brotli", "'zstd'"),
        ("linger_ms", -1, ">= 0"),
        ("linger_ms", "soon", "an integer"),
        ("linger_ms", 1.5, "an integer"),
        ("enable_idempotence", "yes", "a boolean"),
        ("bootstrap_servers", "nohostport", "host:port"),
        ("bootstrap_servers", "", "host:port"),
        ("retries", 2**31, r"\[0, 2147483647\]"),
    ],
)
def test_invalid_values_name_option_and_accepted(key, value, accepted):
    with pytest.raises(ValueError, match=rf"{key}.*{accepted}"):
        PRODUCER.resolve({"bootstrap.servers": "h:1", key: value} if key != "bootstrap_servers" else {key: value})


def test_string_values_from_properties_files_are_coerced():
    p = PRODUCER.resolve({"bootstrap.servers": "h:1", "linger.ms": "10", "enable.idempotence": "false",
                          "acks": -1})
    assert p["linger_ms"] == 10 and p["enable_idempotence"] is False and p["acks"] == "all"


def test_librdkafka_aliases():
    p = PRODUCER.resolve({"metadata.broker.list": "h:1", "compression.codec": "lz4"})
    assert p["bootstrap_servers"] == ("h:1",) and p["compression_type"] == "lz4"


def test_same_option_twice_in_dict_rejected():
    with pytest.raises(ValueError, match="given twice"):
        PRODUCER.resolve({"bootstrap.servers": "h:1", "bootstrap_servers": "h:2"})


def test_bootstrap_required():
    with pytest.raises(ValueError, match="bootstrap_servers"):
        CONSUMER.resolve({})


def test_assignment_strategy_list_validated():
    c = CONSUMER.resolve(bootstrap_servers="h:1", partition_assignment_strategy="roundrobin, sticky")
    assert c["partition_assignment_strategy"] == ("roundrobin", "sticky")
    with pytest.raises(ValueError, match="partition_assignment_strategy"):
        CONSUMER.resolve(bootstrap_servers="h:1", partition_assignment_strategy=["range", "fifo"])


def test_nullable_and_non_nullable():
    assert CONSUMER.resolve(bootstrap_servers="h:1", group_id=None)["group_id"] is None
    with pytest.raises(ValueError, match="linger_ms"):
        PRODUCER.resolve(bootstrap_servers="h:1", linger_ms=None)


def test_tables_are_extensible():
    t = NETWORK_CLIENT.extend("Custom", [Option("my_knob", int, 3, min=1, max=5)])
    assert t.resolve({"bootstrap.servers": "h:1", "my.knob": "4"})["my_knob"] == 4
    with pytest.raises(ValueError, match=r"my\.knob.*\[1, 5\]"):
        t.resolve({"bootstrap.servers": "h:1", "my.knob": 6})
    assert isinstance(t, ConfigTable) and "my_knob" not in NETWORK_CLIENT.options


def _bad_values(opt):
    """Values every option of this type must refuse."""
    t = opt.type
    if t is bool:
        return [3, "maybe"]
    if t is int:
        out = ["many", 1.5]
        if opt.min is not None:
            out.append(int(opt.min) - 1)
        if opt.max is not None:
            out.append(int(opt.max) + 1)
        return out
    if t is float:
        return ["many"]
    if opt.choices is not None:
        return ["no-such-choice"]
    if t is str:
        return [3]
    if t == "servers":
        return [3]
    if callable(t):
        return [object()]
    return []


def _every_option():
    from ferrokafka import _config

    seen = []
    for table in (_config.NETWORK_CLIENT, _config.PRODUCER, _config.CONSUMER, _config.ADMIN):
        for opt in table.options.values() if hasattr(table.options, "values") else table.options:
            for bad in _bad_values(opt):
                # object()'s repr holds its address: an id that differs between
                # processes, which pytest-xdist's workers refuse.
                shown = "object()" if type(bad) is object else repr(bad)
                seen.append(pytest.param(table, opt.name, bad, id=f"{table.name}-{opt.name}-{shown}"[:80]))
    return seen


@pytest.mark.parametrize("table,name,bad", _every_option())
def test_every_option_refuses_bad_values_naming_itself(table, name, bad):
    """Table-driven over every option of every client (issue 8): an invalid
    type or value is a ValueError that names the option."""
    kwargs = {"bootstrap_servers": "localhost:9092"} if name != "bootstrap_servers" else {}
    kwargs[name] = bad
    with pytest.raises(ValueError) as ei:
        table.resolve(**kwargs)
    msg = str(ei.value)
    assert name in msg or name.replace("_", ".") in msg, msg


# ---- Java's post-processing rules (issue 14, section 2) -----------------------------------
# Each row: table, options as the user gives them, then either the values the
# resolved config must hold or (an exception class, a regex its message matches).


BS = {"bootstrap.servers": "h:1"}

RULES = [
    # ProducerConfig.postProcessAndValidateIdempotenceConfigs: a default
    # enable_idempotence gives way to a conflicting option...
    ("idempotence-off-acks-1", PRODUCER, {"acks": 1}, {"enable_idempotence": False, "acks": "1"}),
    ("idempotence-off-acks-str-1", PRODUCER, {"acks": "1"}, {"enable_idempotence": False}),
    ("idempotence-off-acks-0", PRODUCER, {"acks": 0}, {"enable_idempotence": False, "acks": "0"}),
    ("idempotence-off-acks-dotted", PRODUCER, {"acks": "0", "linger.ms": 1}, {"enable_idempotence": False}),
    ("idempotence-off-retries-0", PRODUCER, {"retries": 0}, {"enable_idempotence": False}),
    ("idempotence-off-in-flight-6", PRODUCER, {"max_in_flight_requests_per_connection": 6},
     {"enable_idempotence": False}),
    ("idempotence-kept-acks-all", PRODUCER, {"acks": -1, "max.in.flight": 5}, {"enable_idempotence": True}),
    ("idempotence-explicit-false", PRODUCER, {"enable_idempotence": False, "acks": 1}, {"enable_idempotence": False}),
    # ...but an explicit enable_idempotence=True with one is an error naming it.
    ("idempotence-explicit-acks", PRODUCER, {"enable_idempotence": True, "acks": 1}, (ValueError, r"'acks'.*'all'")),
    ("idempotence-explicit-dotted", PRODUCER, {"enable.idempotence": "true", "acks": "0"}, (ValueError, "'acks'")),
    ("idempotence-explicit-retries", PRODUCER, {"enable_idempotence": True, "retries": 0}, (ValueError, "'retries'")),
    ("idempotence-explicit-in-flight", PRODUCER, {"enable_idempotence": True, "max_in_flight_requests_per_connection": 6},
     (ValueError, "'max_in_flight_requests_per_connection'.*at most 5")),
    # transactional_id needs idempotence: a conflict is an error, never a
    # quiet downgrade (Java: "Cannot set a transactional.id without also
    # enabling idempotence").
    ("transactional-id", PRODUCER, {"transactional_id": "app-1"},
     {"transactional_id": "app-1", "enable_idempotence": True, "transaction_timeout_ms": 60_000}),
    ("transactional-id-dotted", PRODUCER, {"transactional.id": "app-1", "transaction.timeout.ms": "9000"},
     {"transactional_id": "app-1", "transaction_timeout_ms": 9000}),
    ("transactional-id-acks-1", PRODUCER, {"transactional_id": "app-1", "acks": 1},
     (ValueError, r"'acks'.*'all'")),
    ("transactional-id-none-ok", PRODUCER, {"transactional_id": None}, {"transactional_id": None}),
    # KafkaProducer.configureDeliveryTimeout: the default grows to linger + request
    # timeout; an explicit smaller value is an error.
    ("delivery-timeout-default-raised", PRODUCER, {"request_timeout_ms": 200_000, "linger_ms": 5},
     {"delivery_timeout_ms": 200_005}),
    ("delivery-timeout-explicit-too-small", PRODUCER, {"delivery_timeout_ms": 1000},
     (ValueError, r"'delivery_timeout_ms'.*linger_ms \+ request_timeout_ms \(30005\)")),
    ("delivery-timeout-explicit-ok", PRODUCER, {"delivery_timeout_ms": 30_005}, {"delivery_timeout_ms": 30_005}),
    # batch.size=0 is valid in Java (no batching).
    ("batch-size-zero", PRODUCER, {"batch_size": 0}, {"batch_size": 0}),
    # CommonClientConfigs.postProcessReconnectBackoffConfigs: only the base set
    # means a constant backoff.
    ("reconnect-base-only-producer", PRODUCER, {"reconnect_backoff_ms": 200}, {"reconnect_backoff_max_ms": 200}),
    ("reconnect-base-only-consumer", CONSUMER, {"reconnect.backoff.ms": 2000}, {"reconnect_backoff_max_ms": 2000}),
    ("reconnect-base-only-admin", ADMIN, {"reconnect_backoff_ms": 10}, {"reconnect_backoff_max_ms": 10}),
    ("reconnect-base-only-network", NETWORK_CLIENT, {"reconnect_backoff_ms": 70}, {"reconnect_backoff_max_ms": 70}),
    ("reconnect-both-set", PRODUCER, {"reconnect_backoff_ms": 200, "reconnect_backoff_max_ms": 5000},
     {"reconnect_backoff_ms": 200, "reconnect_backoff_max_ms": 5000}),
    ("reconnect-max-below-base", PRODUCER, {"reconnect_backoff_ms": 200, "reconnect_backoff_max_ms": 100},
     {"reconnect_backoff_max_ms": 200}),
    ("retry-max-below-base", CONSUMER, {"retry_backoff_ms": 2000}, {"retry_backoff_max_ms": 2000}),
    # ConsumerConfig.maybeOverrideEnableAutoCommit.
    ("auto-commit-off-without-group", CONSUMER, {}, {"enable_auto_commit": False}),
    ("auto-commit-on-with-group", CONSUMER, {"group_id": "g"}, {"enable_auto_commit": True}),
    ("auto-commit-explicit-false-without-group", CONSUMER, {"enable_auto_commit": False}, {"enable_auto_commit": False}),
    ("auto-commit-explicit-true-without-group", CONSUMER, {"enable.auto.commit": True},
     (ValueError, "'enable_auto_commit'.*group_id")),
    # GroupRebalanceConfig: group.instance.id is validated as JoinGroupRequest does.
    ("group-instance-id-ok", CONSUMER, {"group_id": "g", "group_instance_id": "a-1._b"}, {"group_instance_id": "a-1._b"}),
    ("group-instance-id-space", CONSUMER, {"group_id": "g", "group_instance_id": "foo bar"},
     (ValueError, "'group_instance_id'")),
    ("group-instance-id-dotdot", CONSUMER, {"group_id": "g", "group_instance_id": ".."}, (ValueError, "'group_instance_id'")),
    ("group-instance-id-empty", CONSUMER, {"group_id": "g", "group_instance_id": ""}, (ValueError, "'group_instance_id'")),
    ("group-instance-id-too-long", CONSUMER, {"group_id": "g", "group_instance_id": "a" * 250},
     (ValueError, "'group_instance_id'")),
    ("group-instance-id-without-group", CONSUMER, {"group_instance_id": "a"}, (ValueError, "'group_instance_id'.*'group_id'")),
    # Heartbeat: interval below session timeout, for a group member only.
    ("heartbeat-not-below-session-in-group", CONSUMER,
     {"group_id": "g", "session_timeout_ms": 3000, "heartbeat_interval_ms": 3000},
     (ValueError, "'heartbeat_interval_ms'.*session_timeout_ms")),
    ("heartbeat-without-group-unchecked", CONSUMER, {"session_timeout_ms": 3000}, {"session_timeout_ms": 3000}),
    # CommonClientConfigs: security.protocol is case-insensitive.
    ("security-protocol-any-case", CONSUMER, {"security.protocol": "sasl_ssl"}, {"security_protocol": "SASL_SSL"}),
    ("security-protocol-unknown", PRODUCER, {"security_protocol": "tls"}, (ValueError, "'security_protocol'.*'SSL'")),
    # KafkaAdminClient.configureDefaultApiTimeoutMs.
    ("admin-api-timeout-default-raised", ADMIN, {"request_timeout_ms": 90_000}, {"default_api_timeout_ms": 90_000}),
    ("admin-api-timeout-explicit-too-small", ADMIN, {"default_api_timeout_ms": 1000},
     (ValueError, r"'default_api_timeout_ms'.*request_timeout_ms \(30000\)")),
]


@pytest.mark.parametrize("table,given,expected", [pytest.param(t, g, e, id=i) for i, t, g, e in RULES])
def test_java_config_rules(table, given, expected):
    if isinstance(expected, tuple):
        cls, pattern = expected
        with pytest.raises(cls, match=pattern):
            table.resolve(BS, **given)
        # the dict form (dotted or snake names, as confluent-kafka users pass) behaves the same
        with pytest.raises(cls, match=pattern):
            table.resolve({**BS, **given})
        return
    for cfg in (table.resolve(BS, **given), table.resolve({**BS, **given})):
        assert {k: cfg[k] for k in expected} == expected


def test_idempotence_quietly_disabled_is_logged_like_java(caplog):
    with caplog.at_level("INFO", logger="ferrokafka.producer"):
        PRODUCER.resolve(BS, acks=1)
    (rec,) = [r for r in caplog.records if r.name == "ferrokafka.producer"]
    assert rec.levelname == "INFO" and "Idempotence will be disabled because acks" in rec.getMessage()
    caplog.clear()
    with caplog.at_level("INFO", logger="ferrokafka.producer"):
        PRODUCER.resolve(BS)  # no conflict: nothing to say
    assert not [r for r in caplog.records if r.name == "ferrokafka.producer"]


def test_transactional_id_without_idempotence_is_refused():
    # _config.py accepts enable_idempotence=False alone; the core refuses the pair.
    with pytest.raises(ValueError, match="enable_idempotence"):
        fk.Producer("127.0.0.1:1", transactional_id="t", enable_idempotence=False)


# ---- every accepted option takes effect (issue 14, section 2) ------------------------------
# These need the extension (not a broker): a hand-framed fake broker shows what
# the client does on the wire.



class _MetadataBroker:
    """Answers ApiVersions and Metadata v4 (itself as broker 0, each asked
    topic with one partition); counts accepted and client-closed connections."""

    def __init__(self, all_topics=()):
        from _hostile import Hostile

        self.all_topics = list(all_topics)  # the answer to "all topics"
        self.lock = threading.Lock()
        self.closed = 0
        self.server = Hostile(self._serve)
        self.port = self.server.port
        self.bootstrap = f"127.0.0.1:{self.port}"

    def _serve(self, c):
        from _hostile import (
            api_versions_answer,
            metadata_v4_answer,
            metadata_v4_topics,
            read_request_body,
        )

        try:
            while True:
                key, _ver, cid, body = read_request_body(c)
                if key == 18:
                    c.sendall(api_versions_answer(cid, [(18, 0, 3), (3, 4, 4)]))
                elif key == 3:
                    c.sendall(metadata_v4_answer(cid, self.port, metadata_v4_topics(body) or self.all_topics))
        except OSError:  # the client closed the connection (or the test ended)
            with self.lock:
                self.closed += 1

    def all_closed(self) -> bool:
        with self.lock:
            return self.server.accepted > 0 and self.closed >= self.server.accepted

    def close(self):
        self.server.close()


def _use(kind, bs, **cfg):
    """Make a client of this kind, make it talk to the broker once, return it."""
    if kind == "Producer":
        cl = fk.Producer(bs, max_block_ms=5000, **cfg)
        assert cl.partitions_for("t") == [0]
    elif kind == "Consumer":
        cl = fk.Consumer(bs, **cfg)
        cl.list_topics(timeout_ms=5000)
    else:
        cl = fk.Admin(bs, **cfg)
        cl.list_topics(timeout_ms=5000)
    return cl


def _close(cl):
    cl.close(0) if isinstance(cl, fk.Producer) else cl.close()


@pytest.mark.parametrize("kind", ["Producer", "Consumer", "Admin"])
def test_connections_max_idle_ms_closes_idle_connections(kind):
    """connections_max_idle_ms reached the core: once nothing is in flight,
    the client closes its connections after that long (it was dropped on the
    way to Rust, leaving Java's 9 minutes)."""
    broker = _MetadataBroker()
    cl = _use(kind, broker.bootstrap, connections_max_idle_ms=200)
    try:
        deadline = time.monotonic() + 10
        while not broker.all_closed() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert broker.all_closed(), f"{broker.server.accepted} accepted, {broker.closed} closed by the client"
    finally:
        _close(cl)
        broker.close()


def _black_hole():
    """A listener whose accept queue is full: the kernel drops further SYNs,
    so a connect() to it neither succeeds nor fails until its own timeout."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(s)
    time.sleep(0.1)
    return srv, fillers, f"127.0.0.1:{port}"


@pytest.mark.parametrize("kind", ["Producer", "Consumer", "Admin"])
def test_socket_connection_setup_timeout_ms_fails_a_hanging_connect(kind):
    """socket_connection_setup_timeout_ms reached the core: a connect that
    hangs is given up after that long, and the caller's error says so (with
    the default 10 s it was still pending when the 2 s call ended)."""
    srv, fillers, bs = _black_hole()
    cfg = dict(socket_connection_setup_timeout_ms=300)
    cl = {"Producer": lambda: fk.Producer(bs, max_block_ms=2000, **cfg),
          "Consumer": lambda: fk.Consumer(bs, **cfg),
          "Admin": lambda: fk.Admin(bs, **cfg)}[kind]()
    call = {"Producer": lambda: cl.partitions_for("t"),
            "Consumer": lambda: cl.end_offsets([fk.TopicPartition("t", 0)], timeout_ms=2000),
            "Admin": lambda: cl.list_topics(timeout_ms=2000)}[kind]
    try:
        with pytest.raises(fk.KafkaTimeoutError, match="connection setup timed out after 300 ms"):
            call()
    finally:
        _close(cl)
        for s in fillers + [srv]:
            s.close()


def test_producer_defaults_give_way_like_java():
    """`Producer(bs, acks=1)` used to raise 'must be all when enable_idempotence
    is true' although the user never asked for idempotence."""
    for extra in ({"acks": 1}, {"acks": "0"}, {"retries": 0}, {"max_in_flight_requests_per_connection": 10}):
        p = fk.Producer("127.0.0.1:1", **extra)
        assert p.config["enable_idempotence"] is False
        p.close(0)
    with pytest.raises(ValueError, match="'acks'"):
        fk.Producer("127.0.0.1:1", acks=1, enable_idempotence=True)
    # delivery_timeout_ms default raised to linger + request timeout, as Java does
    p = fk.Producer("127.0.0.1:1", request_timeout_ms=150_000)
    assert p.config["delivery_timeout_ms"] == 150_005
    p.close(0)
    # batch_size=0 (Java: no batching) is accepted by the core too
    fk.Producer("127.0.0.1:1", batch_size=0).close(0)


def test_producer_takes_transactional_id():
    p = fk.Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": "app-1"})
    assert p.transaction_state == "UNINITIALIZED"
    p.close(0)


def test_consumer_without_group_takes_java_defaults():
    # heartbeat (3000) is not below session_timeout_ms: irrelevant without a group
    c = fk.Consumer("127.0.0.1:1", session_timeout_ms=3000)
    assert c.config["enable_auto_commit"] is False
    c.close()
    with pytest.raises(ValueError, match="enable_auto_commit"):
        fk.Consumer("127.0.0.1:1", enable_auto_commit=True)


def test_batch_size_zero_delivers_each_record(mock_cluster):
    mock_cluster.create_topic("bz", 1, 1)
    with fk.Producer(mock_cluster.bootstrap_servers, batch_size=0, linger_ms=50) as p:
        futs = [p.send("bz", b"v%d" % i) for i in range(5)]
        offsets = sorted(f.result(10).offset for f in futs)
    assert offsets == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("name", ["metadata_max_age_ms", "retry_backoff_ms", "retry_backoff_max_ms"])
def test_network_client_refuses_metadata_options_it_would_ignore(name):
    """The bare NetworkClient has no metadata refresh and no request retries:
    these options used to be accepted and do nothing."""
    with pytest.raises(ValueError, match=f"unknown NetworkClient option '{name}'"):
        NETWORK_CLIENT.resolve(BS, **{name: 100})


def test_max_response_size_reaches_the_core():
    """max_response_size was dropped on the way to Rust for Producer, Consumer
    and Admin (only NetworkClient had it): a 1 KiB cap must refuse a ~3 KiB answer."""
    broker = _MetadataBroker(all_topics=[f"topic-{i:04d}" for i in range(100)])
    try:
        with fk.Admin(broker.bootstrap) as a:
            assert len(a.list_topics(timeout_ms=5000)) == 100
        with fk.Admin(broker.bootstrap, max_response_size=1024, request_timeout_ms=1000) as a:
            with pytest.raises(fk.KafkaError, match="exceeds the maximum of 1024"):
                a.list_topics(timeout_ms=3000)
    finally:
        broker.close()


@pytest.mark.parametrize("extra", [{"acks": 1}, {"acks": "0"}, {"retries": 0},
                                   {"max_in_flight_requests_per_connection": 10}])
def test_producer_with_idempotence_given_way_delivers(mock_cluster, extra):
    """The user never asked for idempotence: the producer is built (it raised
    before) and delivers, non-idempotently, as Java's would."""
    mock_cluster.create_topic("nonidem", 1, 1)
    with fk.Producer(mock_cluster.bootstrap_servers, linger_ms=1, **extra) as p:
        assert p.config["enable_idempotence"] is False
        md = [p.send("nonidem", b"v%d" % i).result(10) for i in range(3)]
    assert [m.partition for m in md] == [0, 0, 0]
    if extra.get("acks") != "0":  # acks=0: no offsets come back
        assert [m.offset for m in md] == [0, 1, 2]
