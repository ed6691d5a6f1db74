"""ferrokafka vs confluent-kafka, measured by the protocol of issue 17.

    python benches/compare.py --write-docs               # full run, rewrites docs/benchmarks.md + docs/img/*.png
    python benches/compare.py --only aio --name benchmarks-aio --write-docs   # the asyncio section alone
    python benches/compare.py --quick --only producer     # smoke test: small N, one round
    python benches/compare.py --from-json docs/benchmarks.json --write-docs   # re-render only

--write-docs draws the plots with matplotlib: ``pip install -e '.[bench]'`` (or
``pip install matplotlib``) first; without it the run refuses to start rather
than leave the page without its plots.

Protocol (why each rule: see docs/benchmarks.md, "How measured"):
- one embedded Tansu broker for the whole run (or --bootstrap), started here;
- every measured run happens in a fresh child process (a fresh client, and
  getrusage then counts that client's threads only, not the broker or the
  other client), on a fresh topic created with fk.Admin and deleted after;
- both clients with their defaults except the knob under test (acks and
  idempotence, compression, and for the latency run linger 0); no batch size
  or linger is set anywhere else;
- the order of runs is rotated over --rounds rounds; per variant the best wall
  time and the lowest CPU time are kept (the least disturbed runs on a shared
  machine), and every run is kept in the JSON file.

Child processes are this same file with --child SPEC (a JSON object); they
print one JSON line with the measurement.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import resource
import subprocess
import sys
import time
import uuid
from typing import Optional

from _compare_report import (
    ACKS,
    BATCH_CHUNK,
    CODECS,
    CONSUMER_VARIANTS,
    DOCS,
    IMG,
    LAYOUTS,
    PRODUCER_VARIANTS,
    make_plots,
    print_tables,
    render_docs,
)

# --------------------------------------------------------------------------------------
# child side: one measurement per process
# --------------------------------------------------------------------------------------

def _cpu() -> float:
    """CPU seconds of this process, all threads (the client's I/O threads included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _sys() -> float:
    """The part of ``_cpu`` spent in the kernel (system time): on loopback
    mostly TCP's copies into and out of the socket, which any client pays."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def _confluent_producer_cfg(spec: dict, **extra) -> dict:
    cfg = {"bootstrap.servers": spec["bootstrap"], "compression.type": spec["codec"]}
    if spec["acks"] == "all":
        cfg.update({"acks": "all", "enable.idempotence": True})
    else:
        cfg.update({"acks": spec["acks"], "enable.idempotence": False})
    cfg.update(extra)
    return cfg


def _ferrokafka_producer_cfg(spec: dict, **extra) -> dict:
    cfg = {"compression_type": spec["codec"], "acks": spec["acks"],
           "enable_idempotence": spec["acks"] == "all"}
    cfg.update(extra)
    return cfg


def _produce_retrying(p, topic, value, key=None, on_delivery=None):
    """Only reached when librdkafka's queue is full (its default
    queue.buffering.max.messages): serve reports, retry. This is the loop
    confluent-kafka documents for BufferError."""
    while True:
        p.poll(0.005)
        try:
            if on_delivery is None:
                p.produce(topic, value, key=key)
            else:
                p.produce(topic, value, key=key, on_delivery=on_delivery)
            return
        except BufferError:
            pass


def child_producer_confluent(spec: dict) -> dict:
    from confluent_kafka import Producer

    topic, n, keyed = spec["topic"], spec["records"], spec["keyed"]
    payload = b"x" * spec["size"]
    keys = [str(i).encode() for i in range(n)] if keyed else None
    p = Producer(_confluent_producer_cfg(spec))
    # Warm-up record: connection, metadata and (idempotent) producer id are
    # set up outside the clock, as for ferrokafka below.
    p.produce(topic, b"warm-up", key=b"warm-up")
    if p.flush(30) != 0:
        raise RuntimeError("warm-up record not delivered")
    produce, poll = p.produce, p.poll
    state = {"ok": 0, "err": 0, "first_err": None}
    if spec["api"] == "produce":
        c0, k0, t0 = _cpu(), _sys(), time.perf_counter()
        for i in range(n):
            try:
                if keyed:
                    produce(topic, payload, key=keys[i])
                else:
                    produce(topic, payload)
            except BufferError:
                _produce_retrying(p, topic, payload, keys[i] if keyed else None)
            if i % 50_000 == 0:
                poll(0)
        left = p.flush(300)
        wall, cpu, sys_cpu = time.perf_counter() - t0, _cpu() - c0, _sys() - k0
        # Fire-and-forget has no per-record outcome; flush()==0 is all it offers.
        delivered = n if left == 0 else None
    else:
        def on_delivery(err, msg):
            if err is None:
                state["ok"] += 1
            else:
                state["err"] += 1
                state["first_err"] = state["first_err"] or str(err)

        c0, k0, t0 = _cpu(), _sys(), time.perf_counter()
        for i in range(n):
            try:
                if keyed:
                    produce(topic, payload, key=keys[i], on_delivery=on_delivery)
                else:
                    produce(topic, payload, on_delivery=on_delivery)
            except BufferError:
                _produce_retrying(p, topic, payload, keys[i] if keyed else None, on_delivery)
            if i % 1_000 == 0:
                poll(0)
        left = p.flush(300)
        wall, cpu, sys_cpu = time.perf_counter() - t0, _cpu() - c0, _sys() - k0
        delivered = state["ok"]
    if left or state["err"] or delivered != n:
        raise RuntimeError(f"not all delivered: left={left} ok={delivered} errors={state['err']} "
                           f"first={state['first_err']}")
    return {"wall": wall, "cpu": cpu, "sys": sys_cpu}


def child_producer_ferrokafka(spec: dict) -> dict:
    import ferrokafka as fk

    topic, n, keyed, api = spec["topic"], spec["records"], spec["keyed"], spec["api"]
    payload = b"x" * spec["size"]
    keys = [str(i).encode() for i in range(n)] if keyed else None
    p = fk.Producer(spec["bootstrap"], **_ferrokafka_producer_cfg(spec))
    p.send(topic, b"warm-up", key=b"warm-up").result(30)
    # Inputs are built before the clock for every variant (keys above; the
    # chunks and Arrow arrays here), so only the client's work is timed.
    chunks = []
    if api.startswith("send_batch"):
        for i in range(0, n, BATCH_CHUNK):
            vals = [payload] * min(BATCH_CHUNK, n - i)
            ks = keys[i:i + BATCH_CHUNK] if keyed else None
            if api == "send_batch_arrow":
                import pyarrow as pa

                vals = pa.array(vals, pa.binary())
                ks = pa.array(ks, pa.binary()) if keyed else None
            chunks.append((vals, ks))
    send = p.send
    futs: list = []
    keep = futs.append
    c0, k0, t0 = _cpu(), _sys(), time.perf_counter()
    if api == "send":
        if keyed:
            for i in range(n):
                send(topic, payload, key=keys[i])
        else:
            for _ in range(n):
                send(topic, payload)
    elif api == "send_keep":
        if keyed:
            for i in range(n):
                keep(send(topic, payload, key=keys[i]))
        else:
            for _ in range(n):
                keep(send(topic, payload))
    else:
        send_batch = p.send_batch
        for vals, ks in chunks:
            send_batch(topic, vals, keys=ks)
    left = p.flush(300)
    wall, cpu, sys_cpu = time.perf_counter() - t0, _cpu() - c0, _sys() - k0
    m = p.metrics()
    bad = [f for f in futs if f.exception() is not None]
    p.close()
    # records_sent counts the warm-up record too.
    if left or m.get("records_errored") or bad or int(m.get("records_sent", -1)) != n + 1:
        raise RuntimeError(f"not all delivered: left={left} metrics={m} failed futures={len(bad)}")
    return {"wall": wall, "cpu": cpu, "sys": sys_cpu}


def child_fill(spec: dict) -> dict:
    """Pre-produce the consumer runs' records (not timed), spread evenly over the partitions."""
    import ferrokafka as fk

    n, parts = spec["records"], spec["partitions"]
    payload = b"x" * spec["size"]
    with fk.Producer(spec["bootstrap"]) as p:
        futs = []
        for j, i in enumerate(range(0, n, BATCH_CHUNK)):
            futs.append(p.send_batch(spec["topic"], [payload] * min(BATCH_CHUNK, n - i), partition=j % parts))
        for f in futs:
            f.result(300)
    return {}


def child_consumer(spec: dict) -> dict:
    topic, n, parts, api = spec["topic"], spec["records"], spec["partitions"], spec["api"]
    deadline_s = max(120.0, n / 10_000)
    # Every call asks for at most the records still missing: consume(k, timeout)
    # waits until it has k records, so asking for more than are left would time
    # the last timeout instead of the client (not something a steady stream does).
    total = got = 0
    first = None  # seconds from assign() to the first records, reported apart from the rate
    if api == "consume":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        # group.id is mandatory in confluent-kafka; a fresh one, nothing else set.
        c = Consumer({"bootstrap.servers": spec["bootstrap"], "group.id": "compare-" + uuid.uuid4().hex[:8]})
        c.list_topics(topic, timeout=30)  # connection + metadata outside the clock
        consume = c.consume
        c0, k0, t0 = _cpu(), _sys(), time.perf_counter()
        c.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(parts)])
        while got < n:
            for m in consume(min(10_000, n - got), 1.0):
                if m.error() is not None:
                    raise RuntimeError(str(m.error()))
                total += len(m.value())
                got += 1
            if first is None and got:
                first = time.perf_counter() - t0
            if time.perf_counter() - t0 > deadline_s:
                break
        wall, cpu, sys_cpu = time.perf_counter() - t0, _cpu() - c0, _sys() - k0
        c.close()
    else:
        import ferrokafka as fk

        knobs = {}
        if api == "poll_arrow_rcvbuf64k":
            api, knobs = "poll_arrow", {"receive_buffer_bytes": 65536}
        if api == "poll_arrow":
            # Imported first and given time to settle: importing pyarrow loads
            # numpy, whose OpenBLAS thread pool spins ~0.1 s of CPU on start-up,
            # a one-time cost of the process, not of reading records.
            import pyarrow.compute as pc

            time.sleep(0.5)
        c = fk.Consumer(spec["bootstrap"], auto_offset_reset="earliest", **knobs)
        c.partitions_for(topic)
        c0, k0, t0 = _cpu(), _sys(), time.perf_counter()
        c.assign([fk.TopicPartition(topic, i) for i in range(parts)])
        if api == "poll":
            poll = c.poll
            while got < n:
                batch = poll(1000, max_records=min(10_000, n - got))
                for m in batch:
                    total += len(m.value)
                got += len(batch)
                if first is None and got:
                    first = time.perf_counter() - t0
                if time.perf_counter() - t0 > deadline_s:
                    break
        else:
            poll_arrow = c.poll_arrow
            while got < n:
                b = poll_arrow(1000, max_records=min(100_000, n - got))
                if b.num_rows:
                    # the value column is read (lengths summed), as len() is for the others
                    total += pc.sum(pc.binary_length(b.column("value"))).as_py()
                    got += b.num_rows
                    if first is None:
                        first = time.perf_counter() - t0
                if time.perf_counter() - t0 > deadline_s:
                    break
        wall, cpu, sys_cpu = time.perf_counter() - t0, _cpu() - c0, _sys() - k0
        c.close()
    if got != n or total != n * spec["size"]:
        raise RuntimeError(f"read {got} records / {total} value bytes, expected {n} / {n * spec['size']}")
    return {"wall": wall, "cpu": cpu, "sys": sys_cpu, "first": first}


def child_latency(spec: dict) -> dict:
    """send -> delivery report at a paced rate; both clients busy-poll(0) between
    sends in this one thread, so reports are timed the same way for both
    (resolution: the send interval)."""
    topic, rate, seconds = spec["topic"], spec["rate"], spec["seconds"]
    payload = b"x" * spec["size"]
    n = int(rate * seconds)
    lat: list = []
    clock = time.perf_counter
    if spec["client"] == "confluent":
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": spec["bootstrap"], "linger.ms": 0, "acks": "all",
                      "enable.idempotence": True})
        p.produce(topic, b"warm-up")
        p.flush(30)

        def send():
            t = clock()
            p.produce(topic, payload, on_delivery=lambda err, msg: lat.append(clock() - t))

        poll = p.poll
        finish = p.flush
    else:
        import ferrokafka as fk

        p = fk.Producer(spec["bootstrap"], linger_ms=0, acks="all", enable_idempotence=True)
        p.send(topic, b"warm-up").result(30)

        def send():
            t = clock()
            p.send(topic, payload).add_done_callback(lambda f: lat.append(clock() - t))

        poll = p.poll
        finish = p.flush
    interval = 1.0 / rate
    start = clock()
    for i in range(n):
        send()
        due = start + (i + 1) * interval
        while clock() < due:
            poll(0)
    finish(30)
    elapsed = clock() - start
    if spec["client"] == "ferrokafka":
        p.close()
    if len(lat) != n:
        raise RuntimeError(f"{len(lat)} delivery reports for {n} records")
    lat.sort()
    q = [round(lat[min(n - 1, int(i / 1000 * n))] * 1000, 4) for i in range(1001)]  # CDF points, ms
    return {"p50": q[500], "p99": q[990], "p999": q[999], "max": lat[-1] * 1000, "cdf_ms": q,
            "records": n, "achieved_rate": n / elapsed}


def run_child(spec: dict) -> dict:
    kind = spec["kind"]
    if kind == "producer":
        return (child_producer_confluent if spec["client"] == "confluent" else child_producer_ferrokafka)(spec)
    if kind == "fill":
        return child_fill(spec)
    if kind == "consumer":
        return child_consumer(spec)
    if kind == "latency":
        return child_latency(spec)
    if kind == "aio":
        from _aio_children import child_aio

        return child_aio(spec)
    if kind == "txn":
        from _txn_children import child_txn

        return child_txn(spec)
    raise ValueError(kind)


# --------------------------------------------------------------------------------------
# parent side: broker, topics, schedule, aggregation
# --------------------------------------------------------------------------------------

class Runner:
    def __init__(self, bootstrap: str) -> None:
        import ferrokafka as fk

        self.fk = fk
        self.bootstrap = bootstrap
        self.admin = fk.Admin(bootstrap)

    def topic(self, partitions: int) -> str:
        name = "compare-" + uuid.uuid4().hex[:10]
        self.admin.create_topics([self.fk.NewTopic(name, partitions, 1)])
        return name

    def drop(self, topic: str) -> None:
        # Tansu keeps topics in memory: without this a full run would hold GBs.
        try:
            self.admin.delete_topics([topic])
        except Exception as e:  # a leak only costs memory; the run goes on
            print(f"  (could not delete {topic}: {e})", file=sys.stderr)

    def child(self, spec: dict, timeout: float = 900) -> dict:
        spec = dict(spec, bootstrap=self.bootstrap)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                              capture_output=True, text=True, timeout=timeout)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"exit {proc.returncode}: {tail[:300]}"}
        return json.loads(lines[-1])


def producer_cells(args) -> list:
    import importlib.util

    has_arrow = importlib.util.find_spec("pyarrow") is not None
    cells = []
    for layout, parts, keyed in LAYOUTS:
        for acks in ACKS:
            for codec in CODECS:
                for client, api, _ in PRODUCER_VARIANTS:
                    if api == "send_batch_arrow" and not has_arrow:
                        continue
                    cells.append({"kind": "producer", "client": client, "api": api, "layout": layout,
                                  "partitions": parts, "keyed": keyed, "acks": acks, "codec": codec,
                                  "records": args.records, "size": args.size})
    return cells


def consumer_cells(args) -> list:
    import importlib.util

    has_arrow = importlib.util.find_spec("pyarrow") is not None
    return [{"kind": "consumer", "client": client, "api": api, "partitions": parts,
             "records": args.records, "size": args.size}
            for parts in (1, 6) for client, api, _ in CONSUMER_VARIANTS
            if not api.startswith("poll_arrow") or has_arrow]


# The ceiling run: the client's own cost against the sink broker (benches/_sink.py),
# one partition, acks=1, no compression, defaults otherwise.
CEILING_PRODUCER = ["produce", "send", "send_batch_list", "send_batch_arrow"]
CEILING_CONSUMER = ["consume", "poll", "poll_arrow", "poll_arrow_rcvbuf64k"]


def ceiling_cells(args) -> list:
    import importlib.util

    has_arrow = importlib.util.find_spec("pyarrow") is not None
    cells = [{"kind": "producer", "client": client, "api": api, "layout": "single", "partitions": 1,
              "keyed": False, "acks": "1", "codec": "none", "records": args.ceiling_records,
              "size": args.size, "ceiling": True}
             for client, api, _ in PRODUCER_VARIANTS
             if api in CEILING_PRODUCER and (api != "send_batch_arrow" or has_arrow)]
    cells += [{"kind": "consumer", "client": client, "api": api, "partitions": 1,
               "records": args.ceiling_records, "size": args.size, "ceiling": True}
              for client, api, _ in CONSUMER_VARIANTS
              if api in CEILING_CONSUMER and (not api.startswith("poll_arrow") or has_arrow)]
    return cells


def latency_cells(args) -> list:
    return [{"kind": "latency", "client": c, "rate": args.latency_rate, "seconds": args.latency_seconds,
             "size": args.size} for c in ("confluent", "ferrokafka")]


def aio_cells(args) -> list:
    import importlib.util

    from _aio_children import AIO_VARIANTS

    have = {"ferrokafka": True, "confluent": importlib.util.find_spec("confluent_kafka.aio") is not None,
            "aiokafka": importlib.util.find_spec("aiokafka") is not None}
    return [{"kind": "aio", "client": client, "mode": mode, "partitions": 1, "records": args.records,
             "size": args.size} for client, mode, _ in AIO_VARIANTS if have[client]]


def txn_cells(args) -> list:
    from _txn_children import TXN_VARIANTS

    return [{"kind": "txn", "client": client, "rate": rate, "partitions": 1, "size": args.size,
             "seconds": args.txn_seconds} for client, rate in TXN_VARIANTS]


def cell_key(c: dict) -> str:
    if c["kind"] == "txn":
        return f"txn/{c['rate']}/{c['client']}"
    if c["kind"] == "aio":
        return f"aio/{c['mode']}/{c['client']}"
    if c.get("ceiling"):
        return f"ceiling/{c['kind']}/{c['client']}.{c['api']}"
    if c["kind"] == "producer":
        return f"producer/{c['layout']}/{c['acks']}/{c['codec']}/{c['client']}.{c['api']}"
    if c["kind"] == "consumer":
        return f"consumer/{c['partitions']}/{c['client']}.{c['api']}"
    return f"latency/{c['client']}"


def run_one(r: Runner, cell: dict) -> dict:
    if (cell["kind"] == "consumer" and not cell.get("ceiling")) or cell.get("mode", "").startswith("consume"):
        topic = r.topic(cell["partitions"])
        try:
            fill = r.child({"kind": "fill", "topic": topic, "records": cell["records"],
                            "size": cell["size"], "partitions": cell["partitions"]})
            out = fill if "error" in fill else r.child(dict(cell, topic=topic))
        finally:
            r.drop(topic)
        return out
    topic = r.topic(cell.get("partitions", 1))
    try:
        return r.child(dict(cell, topic=topic))
    finally:
        r.drop(topic)


def rotated(cells: list, rnd: int, rounds: int) -> list:
    # Each round starts at a different point of the list, so a slow stretch of the
    # shared machine (someone's build) lands on different variants each round.
    if not cells:
        return cells
    shift = (rnd * len(cells)) // max(1, rounds)
    return cells[shift:] + cells[:shift]


def run_all(args, bootstrap: str, sink: Optional[str] = None, floors: Optional[list] = None,
            tcps: Optional[list] = None) -> dict:
    """Every cell, round by round. With the ceiling section, the floor and
    the kernel's TCP cost are sampled again at each of its rounds into
    `floors` and `tcps` (see `main`)."""
    r = Runner(bootstrap)
    # The sink serves every fetch from memory: its consumer runs need no fill.
    r_sink = Runner(sink) if sink else None
    sections = {"producer": producer_cells, "consumer": consumer_cells, "latency": latency_cells,
                "ceiling": ceiling_cells, "aio": aio_cells, "txn": txn_cells}
    cells = {s: sections[s](args) for s in args.only}
    runs: dict = {}
    total = sum(len(v) for v in cells.values()) * args.rounds
    done = 0
    for rnd in range(args.rounds):
        for s in args.only:
            if s == "ceiling" and floors is not None:
                import _sink

                floors.append(_sink.floor(size=args.size))
                if tcps is not None:
                    tcps.append(_sink.tcp_cost(size=args.size))
            for cell in rotated(cells[s], rnd, args.rounds):
                done += 1
                out = run_one(r_sink if cell.get("ceiling") else r, cell)
                out["round"] = rnd
                runs.setdefault(cell_key(cell), {"cell": cell, "runs": []})["runs"].append(out)
                print(f"[{done}/{total}] round {rnd + 1} {cell_key(cell)}: {_brief(out)}", flush=True)
    return runs


def _brief(out: dict) -> str:
    if "error" in out:
        return "FAILED " + out["error"]
    if "p50" in out:
        return f"p50 {out['p50']:.2f} ms p99 {out['p99']:.2f} ms"
    return f"wall {out['wall']:.3f} s cpu {out['cpu']:.3f} s"


def summarize(runs: dict) -> dict:
    """Per cell: best wall and lowest CPU over the rounds (independently: both
    are lower bounds of what the client needs, disturbed upwards by the machine)."""
    out = {}
    for key, v in runs.items():
        cell, ok = v["cell"], [x for x in v["runs"] if "error" not in x]
        s = {"cell": cell, "runs_ok": len(ok), "runs": len(v["runs"]),
             "errors": [x["error"] for x in v["runs"] if "error" in x]}
        if ok and cell["kind"] == "txn":
            # Records per run vary (a fixed duration): rates per run, then the best.
            s.update(rate=max(x["records"] / x["wall"] for x in ok),
                     cpu_us=min(x["cpu"] / x["records"] * 1e6 for x in ok),
                     txn_rate=max(x["txns"] / x["wall"] for x in ok),
                     best_wall=min(x["wall"] for x in ok), worst_wall=max(x["wall"] for x in ok))
        elif ok and cell["kind"] in ("producer", "consumer", "aio"):
            n = cell["records"]
            walls = [x["wall"] for x in ok]
            lowest = min(ok, key=lambda x: x["cpu"])
            s.update(best_wall=min(walls), worst_wall=max(walls), lowest_cpu=lowest["cpu"],
                     rate=n / min(walls), cpu_us=lowest["cpu"] / n * 1e6)
            if "sys" in lowest:
                # the kernel's part of that same run's CPU
                s["sys_us"] = lowest["sys"] / n * 1e6
            if cell["kind"] == "consumer":
                s["first_ms"] = min(x["first"] for x in ok) * 1000
        elif ok:
            # the round with the lowest p50 is reported whole (its p99 and CDF too),
            # so the figures of one row come from one distribution
            best = min(ok, key=lambda x: x["p50"])
            s.update({k: best[k] for k in ("p50", "p99", "p999", "max", "cdf_ms", "achieved_rate", "records")},
                     p50_all=[x["p50"] for x in ok], p99_all=[x["p99"] for x in ok])
        out[key] = s
    return out


# --------------------------------------------------------------------------------------
# environment, tables, plots, docs
# --------------------------------------------------------------------------------------

def _cmd(args: list) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return ""


def environment(bootstrap_note: str) -> dict:
    import confluent_kafka

    import ferrokafka as fk

    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    src = os.path.dirname(os.path.abspath(fk.__file__))
    commit = _cmd(["git", "-C", src, "rev-parse", "--short", "HEAD"])
    dirty = bool(_cmd(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"]))
    try:
        import pyarrow

        arrow = pyarrow.__version__
    except ImportError:
        arrow = None
    cv = confluent_kafka.version()  # a (str, int) tuple in some releases, a str in others
    core = getattr(fk, "_core", None)
    core_file = getattr(core, "__file__", None)
    built = (_dt.datetime.fromtimestamp(os.path.getmtime(core_file), _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
             if core_file else None)
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(), "cpu_model": model or platform.processor(),
        "loadavg_start": os.getloadavg(), "kernel": platform.release(),
        "python": platform.python_version(),
        "ferrokafka": getattr(fk, "__version__", "?"), "ferrokafka_source": src,
        "ferrokafka_commit": commit + ("-dirty" if dirty else "") if commit else None,
        # The commit is of the source tree the package is imported from; the
        # extension is whatever was last built there, hence its build time too.
        "ferrokafka_core_built": built,
        "confluent_kafka": cv[0] if isinstance(cv, tuple) else cv, "librdkafka": confluent_kafka.libversion()[0],
        "pyarrow": arrow, "broker": bootstrap_note,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000, help="records per producer/consumer run")
    # The ceiling measures the client's steady per-record cost against a sink
    # that never slows down: at 300k records a run lasts ~30 ms, of which ~3 ms
    # is one-time start-up (the first answer's buffers touched for the first
    # time, the first fetch) and scheduler noise is as large as the effect.
    # 3M records amortize both as a stream does (the floor is taken over 2M).
    ap.add_argument("--ceiling-records", type=int, default=3_000_000,
                    help="records per ceiling run (sink broker)")
    ap.add_argument("--size", type=int, default=100, help="value size in bytes")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the order rotated in each")
    ap.add_argument("--only", default="producer,consumer,latency,ceiling,aio,txn", help="comma-separated sections")
    ap.add_argument("--txn-seconds", type=float, default=5.0, help="seconds of each transactional run")
    ap.add_argument("--quick", action="store_true", help="smoke test: 20k records, 1 round, 1 s of latency")
    ap.add_argument("--latency-rate", type=int, default=10_000)
    ap.add_argument("--latency-seconds", type=float, default=3.0)
    ap.add_argument("--bootstrap", help="use this broker instead of starting an embedded Tansu")
    ap.add_argument("--json", help="results file (default: docs/benchmarks.json with --write-docs, "
                                   "else compare-results.json in the current directory)")
    ap.add_argument("--write-docs", action="store_true", help="rewrite docs/NAME.md and docs/img/*.png")
    ap.add_argument("--name", default="benchmarks",
                    help="docs/NAME.md and docs/NAME.json (a run of some sections only, e.g. "
                         "--only aio --name benchmarks-aio, must not overwrite the full run's page)")
    ap.add_argument("--from-json", help="skip measuring; render this results file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        print(json.dumps(run_child(json.loads(args.child))), flush=True)
        return

    if args.write_docs:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise SystemExit("--write-docs draws the page's plots with matplotlib, which is not installed: "
                             "pip install -e '.[bench]' (or pip install matplotlib)") from None

    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
    else:
        if args.quick:
            args.records, args.rounds, args.latency_seconds, args.txn_seconds = 20_000, 1, 1.0, 1.0
            args.ceiling_records = 20_000
        args.only = [s.strip() for s in args.only.split(",") if s.strip()]
        bad = set(args.only) - {"producer", "consumer", "latency", "ceiling", "aio", "txn"}
        if bad:
            ap.error(f"unknown section(s) in --only: {', '.join(sorted(bad))}")
        broker = None
        if args.bootstrap:
            bootstrap, note = args.bootstrap, f"given with --bootstrap ({args.bootstrap})"
        else:
            import ferrokafka.testing as fkt

            broker = fkt.EmbeddedBroker()
            bootstrap = broker.bootstrap_servers
            note = "embedded " + (_cmd([broker.binary, "--version"]) or "Tansu") + ", in-memory storage"
        sink = None
        try:
            env = environment(note)
            floors: list = []
            tcps: list = []
            if "ceiling" in args.only:
                import _sink

                # The floor, like every client's figure, is the least of
                # several samples spread over the run (here, before each
                # ceiling round and once at the start): taken once, a busy
                # moment of the VM raised it by 40% and flattered every ratio.
                floors.append(_sink.floor(size=args.size))
                tcps.append(_sink.tcp_cost(size=args.size))
                sink = _sink.Sink(args.size)
            t0 = time.time()
            runs = run_all(args, bootstrap, sink.bootstrap if sink else None, floors, tcps)
            if floors:
                env["floor_us"], env["floor_samples_us"] = min(floors), floors
            if tcps:
                env["tcp_send_us"] = min(t[0] for t in tcps)
                env["tcp_recv_us"] = min(t[1] for t in tcps)
        finally:
            if broker is not None:
                broker.close()
            if sink is not None:
                sink.close()
        env["loadavg_end"] = os.getloadavg()
        # ferrokafka is imported from a source tree others may rebuild: a run that
        # straddles a rebuild mixes two builds, and the docs must say so.
        after = environment(note)
        env["ferrokafka_commit_end"] = after.get("ferrokafka_commit")
        env["changed_during_run"] = [k for k in ("ferrokafka_commit", "ferrokafka_core_built")
                                     if after.get(k) != env.get(k)]
        env["duration_s"] = round(time.time() - t0, 1)
        argv = " ".join(a for a in sys.argv[1:])
        data = {
            "command": "python benches/compare.py" + (" " + argv if argv else ""),
            "args": {"records": args.records, "ceiling_records": args.ceiling_records, "size": args.size,
                     "rounds": args.rounds, "only": args.only,
                     "latency_rate": args.latency_rate, "latency_seconds": args.latency_seconds,
                     "txn_seconds": args.txn_seconds},
            "smoke": args.quick or args.rounds < 3 or args.records < 300_000,
            "environment": env, "runs": runs, "summary": summarize(runs),
        }
    path = args.json or (os.path.join(DOCS, f"{args.name}.json") if args.write_docs else "compare-results.json")
    if not args.from_json or args.json:
        with open(path, "w") as f:
            json.dump(data, f, indent=1)
        print(f"\nresults: {path}")
    if data["smoke"]:
        print("SMOKE RUN (small N or < 3 rounds): not evidence")
    print_tables(data["summary"], data["environment"].get("floor_us"))
    if args.write_docs:
        images = make_plots(data["summary"], IMG, data["smoke"])
        with open(os.path.join(DOCS, f"{args.name}.md"), "w") as f:
            # Written above, or read from --from-json when not rewritten.
            runs_json = path if (not args.from_json or args.json) else args.from_json
            f.write(render_docs(data, images, os.path.abspath(runs_json)))
        print(f"wrote docs/{args.name}.md and {len(images)} plot(s) in docs/img/")


if __name__ == "__main__":
    main()
