"""The option table (rust/ferrokafka-net/src/options/table.rs) as Python sees it:
every option either reaches the core or is refused, docs/options.md is generated
from it, and the names that existed before the table still work."""

from __future__ import annotations

import pathlib
import re

import pytest

import ferrokafka as fk
from ferrokafka import _config, _core
from ferrokafka._config import OPTIONS, REQUIRED, OptionNotSupportedError

ROOT = pathlib.Path(__file__).resolve().parent.parent
TABLES = {"Producer": _config.PRODUCER, "Consumer": _config.CONSUMER, "Admin": _config.ADMIN,
          "NetworkClient": _config.NETWORK_CLIENT, "ShareConsumer": _config.SHARE_CONSUMER}
BS = {"bootstrap_servers": "h:1"}


def _bs(client: str) -> dict:
    """The options every `client` needs (a share consumer also names its group)."""
    return {**BS, "group_id": "sg"} if client == "ShareConsumer" else BS


def test_docs_page_is_generated_from_the_table():
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert page == _config.options_markdown(), (
        "docs/options.md is out of date: run python scripts/gen-options-doc.py")
    for name in OPTIONS:
        assert f"| `{name}` |" in page


def test_tables_are_the_rust_table():
    rows = {r["name"]: r for r in _core.option_table()}
    assert set(rows) == set(OPTIONS)
    for client, table in TABLES.items():
        assert set(table.options) == {n for n, r in rows.items() if client in r["clients"]}, client
    for name, r in rows.items():
        opt = OPTIONS[name]
        assert (opt.min, opt.max, opt.choices or (), opt.nullable) == (
            r["min"], r["max"], tuple(r["choices"]), r["nullable"]), name
        assert opt.default is REQUIRED if r["required"] else opt.default == r["default"], name


def _needed(values: str) -> str:
    first = values.split("|")[0]
    return "some-group" if first == "*" else first


def _other_value(opt):
    """A value other than the default that passes the option's checks."""
    if opt.choices:
        default = opt.default if isinstance(opt.default, tuple) else (opt.default,)
        pick = next(c for c in opt.choices if c not in default)
        return [pick] if opt.kind == "str_list" else pick
    kind = opt.kind
    if kind == "int":
        return opt.default - 1 if opt.max is not None and opt.default + 1 > opt.max else opt.default + 1
    if kind in ("bool", "check_hostname"):
        return not opt.default
    if kind == "servers":
        return "elsewhere:1"
    if kind == "callable":
        return lambda *a: "token"
    return f"{opt.default}-other" if isinstance(opt.default, str) else "other"


def _core_options():
    out = []
    for client, table in TABLES.items():
        for opt in table.options.values():
            if opt.effect == "core":
                out.append(pytest.param(client, opt, id=f"{client}-{opt.name}"))
    return out


@pytest.mark.parametrize("client,opt", _core_options())
def test_every_option_reaches_the_core(client, opt):
    """No option is accepted and ignored: a non-default value, resolved as the
    client resolves it (Java's rules included), changes every core field the
    table says it fills, as the client's bindings build them."""
    table = TABLES[client]
    base = {k: _needed(v) for k, v in opt.needs}
    bs = _bs(client)
    before = _core.effective_config(client, table.resolve(bs, **base))
    after = _core.effective_config(client, table.resolve(bs, **base, **{opt.name: _other_value(opt)}))
    filled = [f for f in opt.effect_detail if f in after]
    assert filled, f"{opt.name} fills none of {opt.effect_detail} for {client}"
    for f in filled:
        assert before.get(f) != after[f], f"{client}: {opt.name} did not change {f} ({after[f]})"


@pytest.mark.parametrize("client,option,value", [
    ("Metadata", "retry_backoff_ms", 7),
    ("Metadata", "refresh_backoff_max_ms", 7000),
    ("Metadata", "metadata.max.age.ms", 70),
    ("ProducerMetadata", "metadata_idle_ms", 700),
])
def test_metadata_classes_take_table_options(client, option, value):
    before = _core.effective_config(client, {})
    after = _core.effective_config(client, {option: value})
    assert before != after
    assert str(value) in after.values()


def test_refused_options_are_refused_when_set():
    # None today (transactional_id was, until transactions landed); the rule
    # stays for the next option that cannot be honoured.
    refused = [o for o in OPTIONS.values() if o.effect == "refused"]
    for opt in refused:
        for client in opt.clients:
            with pytest.raises(OptionNotSupportedError, match=re.escape(repr(opt.name))):
                TABLES[client].resolve(BS, **{opt.name: _other_value(opt)})
            assert TABLES[client].resolve(BS, **{opt.name: opt.default})[opt.name] == opt.default


def test_python_side_options_name_a_place_that_uses_them():
    """Options used in Python (callbacks, partitioner, poll size) name the
    module that reads them; that module must read them."""
    pkg = ROOT / "python" / "ferrokafka"
    for opt in OPTIONS.values():
        if opt.effect != "python":
            continue
        modules = re.findall(r"(\w+)\.py", opt.effect_detail) or [
            m.split(".")[0] for m in re.findall(r"_\w+\.\w+", opt.effect_detail)]
        assert modules, (opt.name, opt.effect_detail)
        sources = [(pkg / f"{m}.py").read_text(encoding="utf-8") for m in modules]
        assert any(opt.name in s for s in sources), (opt.name, modules)


def test_effective_config_names_bad_keys():
    with pytest.raises(ValueError, match="'linger_ms'.*an integer >= 0"):
        _core.effective_config("Producer", {**BS, "linger_ms": -1})
    with pytest.raises(ValueError, match="group_id.*unknown Producer option"):
        _core.effective_config("Producer", {**BS, "group_id": "g"})
    with pytest.raises(ValueError, match="'<redacted>' for option 'sasl_password'"):
        _core.effective_config("Producer", {**BS, "sasl_password": 3})
    with pytest.raises(ValueError, match="bootstrap_servers"):
        _core.effective_config("Consumer", {})
    with pytest.raises(ValueError, match="unknown client"):
        _core.effective_config("Streams", BS)


def test_old_names_are_aliases():
    """Metadata's names (refresh_backoff_ms, metadata_expire_ms) and the
    NetworkClient's socket option spellings are aliases of the one name."""
    md = fk.ProducerMetadata(retry_backoff_ms=7, metadata_expire_ms=70, metadata_idle_ms=700)
    assert (md.refresh_backoff_ms, md.metadata_expire_ms, md.metadata_idle_ms) == (7, 70, 700)
    cfg = _config.PRODUCER.resolve({"bootstrap.servers": "h:1", "refresh_backoff_ms": 7,
                                    "metadata_expire_ms": 70})
    assert (cfg["retry_backoff_ms"], cfg["metadata_max_age_ms"]) == (7, 70)
    with fk.NetworkClient({"bootstrap.servers": "h:1", "socket.send.buffer.bytes": 1000,
                           "receive.buffer.bytes": -1}) as nc:
        assert (nc.config["send_buffer_bytes"], nc.config["receive_buffer_bytes"]) == (1000, -1)
    with pytest.raises(ValueError, match="send_buffer_bytes"):
        fk.NetworkClient("h:1", send_buffer_bytes=-2)


def test_socket_buffers_reach_every_client():
    """send/receive buffer sizes were NetworkClient-only; the high-level
    clients now take them too (Java's producer and consumer do)."""
    for client, table in TABLES.items():
        eff = _core.effective_config(client, table.resolve(_bs(client), send_buffer_bytes=4096))
        assert eff["ClientConfig.send_buffer_bytes"] == "4096", client


def test_any_iterable_is_a_list_and_index_types_are_ints():
    """As the Python checks did before the table: a set or generator of
    servers, and integer types that are not int (they have __index__)."""
    class Five:
        def __index__(self):
            return 5

    cfg = _config.PRODUCER.resolve(bootstrap_servers=(s for s in ["h:1", "h:2"]), linger_ms=Five())
    assert cfg["bootstrap_servers"] == ("h:1", "h:2") and cfg["linger_ms"] == 5
    assert _config.CONSUMER.resolve(bootstrap_servers={"h:1"})["bootstrap_servers"] == ("h:1",)
