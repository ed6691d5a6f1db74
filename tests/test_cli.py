"""The ``ferrokafka`` command line (docs/cli.md), run as ``python -m ferrokafka`` in a
subprocess against the session's embedded broker, as a user would run it."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import time
import uuid

import pytest

import ferrokafka

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ferrokafka.__file__)))


def cli(*args: str, stdin: bytes | None = None, bootstrap: str | None = None, timeout: float = 60,
        env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FERROKAFKA_BOOTSTRAP"}
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    argv = [sys.executable, "-m", "ferrokafka", *args]
    if bootstrap is not None:
        argv += ["--bootstrap", bootstrap]
    return subprocess.run(argv, input=stdin if stdin is not None else b"", capture_output=True,
                          timeout=timeout, env=env)


def ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout: {r.stdout!r}\nstderr: {r.stderr.decode()}"
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    return r


@pytest.fixture
def bs(embedded_broker):
    return embedded_broker.bootstrap_servers


@pytest.fixture
def topic(bs, topic_name):
    ok(cli("topics", "create", topic_name, "--partitions", "1", bootstrap=bs))
    return topic_name


# ----- produce / consume -------------------------------------------------------------------

def test_produce_lines_then_consume_them_back(bs, topic):
    lines = ["one", "two words", "ünïcode", "", "last"]
    r = ok(cli("produce", topic, stdin=("\n".join(lines) + "\n").encode(), bootstrap=bs))
    assert b"produced 5 records" in r.stderr
    r = ok(cli("consume", topic, "--from", "beginning", "--count", "5", bootstrap=bs))
    assert r.stdout.decode() == "\n".join(lines) + "\n"
    # Without --count it stops at the end offsets read at the start.
    r = ok(cli("consume", topic, "--from", "beginning", bootstrap=bs))
    assert r.stdout.decode() == "\n".join(lines) + "\n"
    r = ok(cli("consume", topic, "--from", "offset:3", "--format", "hex", bootstrap=bs))
    assert r.stdout == b"\n" + b"last".hex().encode() + b"\n"


def test_consume_empty_topic_ends_at_once(bs, topic):
    t0 = time.monotonic()
    r = ok(cli("consume", topic, "--from", "beginning", bootstrap=bs))
    assert r.stdout == b""
    assert time.monotonic() - t0 < 10
    r = ok(cli("consume", topic, "--from", "end", bootstrap=bs))
    assert r.stdout == b""


def test_files_keys_headers_and_json_output(bs, topic, tmp_path):
    f1, f2 = tmp_path / "a.txt", tmp_path / "b.txt"
    f1.write_bytes(b"k1=v1\r\nk2=v2\n")
    f2.write_bytes(b"k3=v=3")  # no final newline: still a line; split at the first '='
    ok(cli("produce", topic, "--file", str(f1), "--file", str(f2), "--key-delimiter", "=",
           "--header", "src=cli", "--header", "n=1", bootstrap=bs))
    r = ok(cli("consume", topic, "--from", "beginning", "--json", bootstrap=bs))
    recs = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [(m["key"], m["value"]) for m in recs] == [("k1", "v1"), ("k2", "v2"), ("k3", "v=3")]
    assert [m["offset"] for m in recs] == [0, 1, 2]
    assert all(m["topic"] == topic and m["partition"] == 0 and m["timestamp"] > 0 for m in recs)
    assert recs[0]["headers"] == [{"key": "src", "value": "cli"}, {"key": "n", "value": "1"}]


def test_jsonl_input_keeps_every_byte(bs, topic):
    raw = b"\xff\x00\xfe"
    lines = [{"key": "k", "value": "text", "headers": {"h": "x"}, "timestamp": 1234},
             {"value_base64": base64.b64encode(raw).decode()},
             {"value": None}]
    stdin = "\n".join(json.dumps(x) for x in lines).encode() + b"\n"
    ok(cli("produce", topic, "--format", "jsonl", stdin=stdin, bootstrap=bs))
    r = ok(cli("consume", topic, "--from", "beginning", "--format", "json", bootstrap=bs))
    recs = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert recs[0]["key"] == "k" and recs[0]["value"] == "text" and recs[0]["timestamp"] == 1234
    assert recs[0]["headers"] == [{"key": "h", "value": "x"}]
    assert recs[1]["value"] is None and base64.b64decode(recs[1]["value_base64"]) == raw
    assert recs[2]["value"] is None and "value_base64" not in recs[2]
    # A misspelt field is refused, naming it; nothing is produced from that line.
    r = cli("produce", topic, "--format", "jsonl", stdin=b'{"vaule": "x"}\n', bootstrap=bs)
    assert r.returncode == 1 and b"vaule" in r.stderr


def test_bad_record_input_is_reported_not_a_traceback(bs, topic):
    r = cli("produce", topic, "--partition", "5", stdin=b"x\n", bootstrap=bs)
    assert r.returncode == 1 and b"<stdin>:1" in r.stderr and b"partition" in r.stderr
    assert b"Traceback" not in r.stderr
    # A record too large fails alone; the next line is still produced.
    big = b"x" * 1_100_000
    r = cli("produce", topic, stdin=big + b"\nsmall\n", bootstrap=bs)
    assert r.returncode == 1 and b"1 FAILED" in r.stderr and b"produced 1 record " in r.stderr
    assert ok(cli("consume", topic, "--from", "beginning", bootstrap=bs)).stdout == b"small\n"
    r = cli("produce", topic, "--key-delimiter", ":", stdin=b"k:v\nno-delimiter\n", bootstrap=bs)
    assert r.returncode == 1 and b"<stdin>:2: no key delimiter" in r.stderr


def test_consume_from_timestamp(bs, topic):
    stdin = b"\n".join(json.dumps({"value": v, "timestamp": ts}).encode()
                       for v, ts in (("a", 1000), ("b", 2000), ("c", 3000))) + b"\n"
    ok(cli("produce", topic, "--format", "jsonl", stdin=stdin, bootstrap=bs))
    r = ok(cli("consume", topic, "--from", "timestamp:1500", bootstrap=bs))
    assert r.stdout == b"b\nc\n"


def test_parquet_out_and_in(bs, topic, tmp_path):
    pytest.importorskip("pyarrow")
    ok(cli("produce", topic, stdin=b"x\ny\nz\n", bootstrap=bs))
    path = tmp_path / "out.parquet"
    ok(cli("consume", topic, "--from", "beginning", "--output", f"parquet:{path}", bootstrap=bs))
    import pyarrow.parquet as pq

    assert pq.read_table(path).column("value").to_pylist() == [b"x", b"y", b"z"]
    copy = f"{topic}-copy"
    ok(cli("topics", "create", copy, "--partitions", "1", bootstrap=bs))
    r = ok(cli("produce", copy, "--parquet", str(path), bootstrap=bs))
    assert b"produced 3 records" in r.stderr
    assert ok(cli("consume", copy, "--from", "beginning", bootstrap=bs)).stdout == b"x\ny\nz\n"


# ----- topics, metadata, groups -------------------------------------------------------------

def test_topics_create_list_describe_delete(bs, topic_name):
    typo = cli("topics", "create", topic_name, "--config", "retention.msx=1", bootstrap=bs)
    assert typo.returncode == 2 and b"'retention.msx'" in typo.stderr and b"'retention.ms'" in typo.stderr
    ok(cli("topics", "create", topic_name, "--partitions", "3", "--replication-factor", "1",
           "--config", "retention.ms=600000", bootstrap=bs))
    listed = json.loads(ok(cli("topics", "--json", bootstrap=bs)).stdout)
    assert {"name": topic_name, "partitions": 3} in listed
    assert topic_name in ok(cli("topics", bootstrap=bs)).stdout.decode()
    d = json.loads(ok(cli("topics", "describe", topic_name, "--json", bootstrap=bs)).stdout)
    assert [p["partition"] for p in d["partitions"]] == [0, 1, 2]
    for p in d["partitions"]:
        assert p["leader"] >= 0 and p["leader"] in p["replicas"] and p["isr"]
        assert p["first_offset"] == 0 and p["end_offset"] == 0
    again = cli("topics", "create", topic_name, "--partitions", "3", bootstrap=bs)
    assert again.returncode == 1 and b"TopicAlreadyExists" in again.stderr
    ok(cli("topics", "create", topic_name, "--if-not-exists", bootstrap=bs))
    ok(cli("topics", "delete", topic_name, bootstrap=bs))
    listed = json.loads(ok(cli("topics", "--json", bootstrap=bs)).stdout)
    assert topic_name not in [t["name"] for t in listed]
    missing = cli("topics", "describe", topic_name, bootstrap=bs)
    assert missing.returncode == 1 and b"does not exist" in missing.stderr


def test_topics_alter_is_refused_clearly(bs, topic):
    r = cli("topics", "alter", topic, "--partitions", "4", bootstrap=bs)
    assert r.returncode == 1 and b"CreatePartitions" in r.stderr


def test_metadata(bs, topic):
    md = json.loads(ok(cli("metadata", "--json", "--topic", topic, bootstrap=bs)).stdout)
    assert md["brokers"] and md["controller"] in [b["id"] for b in md["brokers"]]
    (t,) = md["topics"]
    assert t["name"] == topic and len(t["partitions"]) == 1
    p = t["partitions"][0]
    assert p["leader"] in [b["id"] for b in md["brokers"]] and p["replicas"] and p["isr"]
    text = ok(cli("metadata", bootstrap=bs)).stdout.decode()
    assert "LEADER" in text and topic in text


def test_groups_lag_and_reset_offsets(bs, topic):
    group = f"g-{uuid.uuid4().hex[:8]}"
    ok(cli("produce", topic, stdin=b"a\nb\nc\nd\ne\n", bootstrap=bs))
    r = ok(cli("consume", topic, "--group", group, "--count", "2", bootstrap=bs))
    assert r.stdout == b"a\nb\n"
    assert group in [g["group"] for g in json.loads(ok(cli("groups", "--json", bootstrap=bs)).stdout)]

    def describe() -> dict:
        d = json.loads(ok(cli("groups", "describe", group, "--json", bootstrap=bs)).stdout)
        (p,) = d["partitions"]
        return p

    assert describe() == {"topic": topic, "partition": 0, "committed_offset": 2, "end_offset": 5, "lag": 3}
    r = ok(cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--dry-run",
               "--json", bootstrap=bs))
    plan = json.loads(r.stdout)
    assert plan["dry_run"] and plan["partitions"][0]["new_offset"] == 0
    assert describe()["committed_offset"] == 2  # a dry run changes nothing
    ok(cli("groups", "reset-offsets", "--group", group, "--topic", topic, "--to-offset", "4", bootstrap=bs))
    assert describe() == {"topic": topic, "partition": 0, "committed_offset": 4, "end_offset": 5, "lag": 1}
    # The group resumes from the new offset; --from overrides it.
    assert ok(cli("consume", topic, "--group", group, bootstrap=bs)).stdout == b"e\n"
    assert ok(cli("consume", topic, "--group", group, "--from", "offset:1", "--count", "2",
                  bootstrap=bs)).stdout == b"b\nc\n"
    missing = cli("groups", "describe", f"no-such-{group}", bootstrap=bs)
    assert missing.returncode == 1 and b"does not exist" in missing.stderr


# ----- perf -------------------------------------------------------------------------------

def test_perf_produce_prints_a_final_table(bs):
    r = ok(cli("perf", "produce", "--num-records", "3000", "--record-size", "64", bootstrap=bs))
    head, row = r.stdout.decode().splitlines()
    assert head.split()[:3] == ["CLIENT", "RECORDS", "FAILED"] and "P99-MS" in head
    assert row.split()[:3] == ["ferrokafka", "3000", "0"]
    res = json.loads(ok(cli("perf", "produce", "--num-records", "500", "--record-size", "10", "--acks", "1",
                            "--json", bootstrap=bs)).stdout)
    assert res[0]["records"] == 500 and res[0]["avg_latency_ms"] > 0 and res[0]["max_latency_ms"] >= res[0]["p50_ms"]


def test_perf_says_why_records_failed(capsys):
    """A failed count alone leaves the user guessing: the report names the
    first error, or says no delivery report came."""
    import argparse

    from ferrokafka.cli import perf
    from ferrokafka.errors import KafkaError

    args = argparse.Namespace(json=True, num_records=3)
    stats = perf._Stats("ferrokafka", 3, 10)
    stats.ack(time.monotonic(), None)
    stats.ack(time.monotonic(), KafkaError("broker said no"))
    res = stats.result("ferrokafka", 3)  # the third: no report at all
    assert perf._report(args, [res], "produce") == 1
    err = capsys.readouterr().err
    assert "2 of 3 records failed, the first with: broker said no (KafkaError)" in err, err
    args.num_records = 2
    stats = perf._Stats("ferrokafka", 2, 10)
    stats.ack(time.monotonic(), None)
    assert perf._report(args, [stats.result("ferrokafka", 2)], "produce") == 1
    assert "1 of 2 records failed, the first with: no delivery report by the end of the run" in capsys.readouterr().err


def test_perf_consume(bs, topic):
    ok(cli("produce", topic, stdin=b"r\n" * 1000, bootstrap=bs))
    res = json.loads(ok(cli("perf", "consume", "--topic", topic, "--num-records", "1000", "--json",
                            bootstrap=bs)).stdout)
    assert res[0]["records"] == 1000 and res[0]["bytes"] == 1000
    short = cli("perf", "consume", "--topic", topic, "--num-records", "5000", bootstrap=bs)
    assert short.returncode == 1 and b"fewer than --num-records" in short.stderr
    # Without --topic it fills a fresh topic first (an embedded broker starts empty).
    r = ok(cli("perf", "consume", "--num-records", "800", "--record-size", "10", "--json", bootstrap=bs))
    assert b"filling" in r.stderr
    assert json.loads(r.stdout)[0]["records"] == 800 and json.loads(r.stdout)[0]["bytes"] == 8000
    # A producer option is refused when no producer runs (--topic given): never ignored.
    r = cli("perf", "consume", "--topic", topic, "--num-records", "1", "-X", "linger.ms=5", bootstrap=bs)
    assert r.returncode == 2 and b"linger.ms" in r.stderr


# ----- failures and exit codes ---------------------------------------------------------------

@pytest.mark.parametrize("args", [("topics",), ("consume", "t", "--from", "beginning"), ("groups",),
                                  ("produce", "t")])
def test_dead_broker_exits_1_with_a_message(args):
    from ferrokafka.testing import free_port

    t0 = time.monotonic()
    r = cli(*args, "--timeout", "2", stdin=b"x\n", bootstrap=f"127.0.0.1:{free_port()}", timeout=30)
    assert r.returncode == 1, r.stderr.decode()
    assert b"error:" in r.stderr and b"Connection refused" in r.stderr
    assert b"Traceback" not in r.stderr
    assert time.monotonic() - t0 < 15


def test_unknown_option_exits_2_naming_it(bs):
    r = cli("produce", "t", "-X", "lingr.ms=5", bootstrap=bs)
    assert r.returncode == 2 and b"'lingr.ms'" in r.stderr and b"linger.ms" in r.stderr
    r = cli("consume", "t", "-X", "linger.ms=5", bootstrap=bs)  # a producer option
    assert r.returncode == 2 and b"linger.ms" in r.stderr
    r = cli("produce", "t", "-X", "linger.ms=soon", bootstrap=bs)
    assert r.returncode == 2 and b"linger.ms" in r.stderr
    r = cli("consume", "t", "--from", "yesterday", bootstrap=bs)
    assert r.returncode == 2 and b"--from" in r.stderr
    assert cli("produce").returncode == 2  # argparse: the topic is missing
    r = cli("topics", "--timeout", "0", bootstrap=bs)
    assert r.returncode == 2 and b"--timeout" in r.stderr
    assert b"Traceback" not in r.stderr


def test_parquet_without_pyarrow_is_a_clear_usage_error(bs, tmp_path):
    fake = tmp_path / "site" / "pyarrow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no pyarrow here')\n")
    env = {"PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{PYTHON_DIR}"}
    for args in (("produce", "t", "--parquet", "x.parquet"), ("consume", "t", "--output", "parquet:x.parquet")):
        r = cli(*args, bootstrap=bs, env_extra=env)
        assert r.returncode == 2 and b"ferrokafka[arrow]" in r.stderr, r.stderr


def test_without_bootstrap_an_embedded_broker_is_used(embedded_broker):
    r = ok(cli("produce", "solo", stdin=b"1\n2\n"))
    assert b"embedded broker" in r.stderr and b"produced 2 records" in r.stderr


def test_version():
    assert ok(cli("version")).stdout.decode().strip() == ferrokafka.__version__


# ----- in-process pieces --------------------------------------------------------------------

def test_progress_bar_on_a_terminal_and_lines_on_a_pipe():
    from ferrokafka.cli._progress import Progress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    p = Progress("produce t", total=200, stream=tty)
    p.update(50, 5000, force=True)
    p.close()
    out = tty.getvalue()
    assert out.startswith("\r\x1b[K") and "[#######" in out and "25.0% 50/200" in out
    assert out.endswith("\r\x1b[K")  # erased when done
    tty.seek(0)
    tty.truncate()
    p = Progress("perf", total=10, stream=tty)
    p.update(5, force=True)
    p.message("a line of its own")
    assert tty.getvalue().endswith("\r\x1b[Ka line of its own\n")  # the bar erased first

    pipe = io.StringIO()
    p = Progress("produce t", total=200, stream=pipe)
    p.update(10, 100)  # before the first interval: nothing
    p.update(50, 5000, force=True)
    assert "\x1b" not in pipe.getvalue() and pipe.getvalue().count("\n") == 1
    assert "50/200 records" in pipe.getvalue()


def test_from_spec_parsing():
    from ferrokafka.cli._common import UsageError
    from ferrokafka.cli.consume import parse_from

    assert parse_from("beginning") == ("beginning", 0)
    assert parse_from("offset:7") == ("offset", 7)
    assert parse_from("timestamp:1700000000000") == ("timestamp", 1700000000000)
    for bad in ("offset:", "offset:-1", "start", "timestamp:x"):
        with pytest.raises(UsageError):
            parse_from(bad)


def test_console_script_entry_point(capsys, monkeypatch):
    tomllib = pytest.importorskip("tomllib")
    pyproject = os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")
    with open(pyproject, "rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert scripts["ferrokafka"] == "ferrokafka.cli:entry_point"
    import logging

    from ferrokafka.cli import entry_point

    monkeypatch.setattr(sys, "argv", ["ferrokafka", "version"])
    log = logging.getLogger("ferrokafka")
    saved = (list(log.handlers), log.level, log.propagate)
    try:
        with pytest.raises(SystemExit) as exit_:
            entry_point()
    finally:
        # The CLI configures the ferrokafka logger for its process; this one
        # is pytest's, whose later tests read records through propagation.
        log.handlers[:], log.level, log.propagate = saved[0], saved[1], saved[2]
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == ferrokafka.__version__


def test_embedded_is_explicit_and_excludes_bootstrap(embedded_broker):
    # --embedded wins over $FERROKAFKA_BOOTSTRAP (here a dead address).
    r = ok(cli("produce", "solo2", "--embedded", stdin=b"a\n",
               env_extra={"FERROKAFKA_BOOTSTRAP": "127.0.0.1:1"}))
    assert b"embedded broker" in r.stderr and b"produced 1 record" in r.stderr
    r = cli("topics", "--embedded", bootstrap="127.0.0.1:1")
    assert r.returncode == 2 and b"--embedded and --bootstrap" in r.stderr, r.stderr


def test_progress_is_drawn_on_a_real_terminal(bs):
    """Through a pty (the real entry point, as a user's terminal sees it): the
    bar is redrawn in place with carriage returns and erase-to-end-of-line."""
    import pty

    env = {k: v for k, v in os.environ.items() if k != "FERROKAFKA_BOOTSTRAP"}
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    argv = [sys.executable, "-m", "ferrokafka", "perf", "produce", "--bootstrap", bs,
            "--num-records", "300000", "--record-size", "100", "--throughput", "150000"]
    out = bytearray()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the CLI with the pty as its terminal
        os.execvpe(argv[0], argv, env)
    try:
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, bytes(out[-500:])
    assert b"\r" in out and b"\x1b[K" in out, bytes(out[-500:])
