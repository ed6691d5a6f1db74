from __future__ import annotations

import pytest

from ferrokafka._config import ADMIN, CONSUMER, NETWORK_CLIENT, PRODUCER, Option, ConfigTable


def test_dotted_and_snake_names_are_equivalent():
    a = PRODUCER.resolve({"bootstrap.servers": "h1:9092,h2:9093", "linger.ms": 7})
    b = PRODUCER.resolve(bootstrap_servers=["h1:9092", "h2:9093"], linger_ms=7)
    assert a == b
    assert a["bootstrap_servers"] == ("h1:9092", "h2:9093")
    assert a["linger_ms"] == 7


def test_defaults_match_api_contract():
    p = PRODUCER.resolve(bootstrap_servers="h:1")
    assert (p["acks"], p["linger_ms"], p["batch_size"], p["enable_idempotence"]) == ("all", 5, 16384, True)
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
                seen.append(pytest.param(table, opt.name, bad, id=f"{table.name}-{opt.name}-{bad!r}"[:80]))
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
