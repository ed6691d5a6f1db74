"""Spark: ferrokafka's data source vs what PySpark users write without the
JVM Kafka connector (issue 21), measured as the whole job's CPU.

    python benches/bench_spark.py --write-docs      # full run: docs/benchmarks-spark.md (+ .json)
    python benches/bench_spark.py --quick           # smoke test: 100k rows, 1 round

Variants, each in `local[2]` on one embedded Tansu broker, 4-partition topics:
- ferrokafka: `df.write.format("ferrokafka")`, `spark.read.format("ferrokafka")`, and a
  `readStream` of 10 micro-batches (`maxOffsetsPerTrigger` = rows / 10, availableNow);
- (a) `mapInPandas` + confluent-kafka: a Producer per task producing each row; a
  Consumer per offset range (planned from ListOffsets) reading it into a pandas frame;
- (b) `mapInArrow` + confluent-kafka: the same from and into Arrow batches.
- floor: a Python data source of the same schema that does no Kafka work at all (the writer
  counts the Arrow batches Spark hands it; the reader yields one prebuilt Arrow batch
  again and again): what Spark alone spends to move the rows between the JVM and a Python
  data source, the least any Python data source can cost. Baseline CPU / floor CPU is the
  best ratio any client inside a Python data source could reach.
The baselines have no streaming source (a user would have to write one), so the stream
row is ferrokafka's alone. confluent-kafka keeps its defaults, ferrokafka too.

Protocol (the project's benchmark rules): every run is a fresh child process building
its own SparkSession, so every Spark process (driver JVM, Python workers) descends from
it and the broker does not; a warm-up job of the same variant runs first (workers
started, imports done); each timed job writes to or reads from a fresh topic (read and
stream topics are filled beforehand, untimed). CPU is the kernel's account of the
child's whole process tree (utime + stime of every living process, plus cutime +
cstime for the children each has reaped, so exited workers count), before and after
the job, split by process kind. The variants' order is rotated over the rounds; per
variant the best wall time and the lowest CPU are kept.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(os.path.dirname(HERE), "docs")
CLIENTS = ["ferrokafka", "pandas", "arrow", "floor"]
LABEL = {"ferrokafka": "ferrokafka data source", "pandas": "mapInPandas + confluent-kafka",
         "arrow": "mapInArrow + confluent-kafka", "floor": "floor: a Python data source with no Kafka client"}
PARTS = 4

# ------------------------------------------------------------------------------------------
# CPU of a process tree, from /proc
# ------------------------------------------------------------------------------------------


def _stat(pid: int):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    rest = s[s.rindex(")") + 2:].split()
    # fields after the comm: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17)
    ppid = int(rest[1])
    ticks = sum(int(x) for x in rest[11:15])
    return ppid, ticks, cmd


def tree_cpu(root: int) -> dict:
    """CPU seconds of `root` and all its descendants, by kind."""
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st:
                procs[int(d)] = st
    kids: dict = {}
    for pid, (ppid, _, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    out = {"driver": 0.0, "jvm": 0.0, "workers": 0.0}
    hz = os.sysconf("SC_CLK_TCK")
    stack = [root]
    while stack:
        pid = stack.pop()
        if pid not in procs:
            continue
        _, ticks, cmd = procs[pid]
        kind = "driver" if pid == root else "jvm" if "java" in cmd.split(" ")[0] else "workers"
        out[kind] += ticks / hz
        stack.extend(kids.get(pid, []))
    out["total"] = out["driver"] + out["jvm"] + out["workers"]
    return out


# ------------------------------------------------------------------------------------------
# child: one SparkSession, one client's jobs
# ------------------------------------------------------------------------------------------


def _ck_write_rows(bs: str, topic: str, rows):
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": bs})
    n = 0
    for k, v in rows:
        while True:
            try:
                p.produce(topic, value=v, key=k)
                break
            except BufferError:
                p.poll(0.01)
        n += 1
        if n % 1000 == 0:
            p.poll(0)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} records not delivered")
    return n


def _ck_read_range(bs: str, topic: str, part: int, start: int, end: int):
    """The values of [start, end) of one partition, in order."""
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "bench-" + uuid.uuid4().hex[:8],
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, part, start)])
    vals, pos = [], start
    while pos < end:
        for m in c.consume(10000, 1.0):
            if m.error() is not None:
                raise RuntimeError(str(m.error()))
            if m.offset() < end:
                vals.append(m.value())
            pos = max(pos, m.offset() + 1)
    c.close()
    return vals


def _floor_source():
    """The floor variant's data source: Spark's Kafka schema, no Kafka client (see the
    module's docstring). Defined in a function so cloudpickle ships it by value."""
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )

    import ferrokafka as fk

    class Count(WriterCommitMessage):
        def __init__(self, n: int) -> None:
            self.n = n

    class Writer(DataSourceArrowWriter):
        def write(self, iterator):
            return Count(sum(b.num_rows for b in iterator))

    class Reader(DataSourceReader):
        def __init__(self, options) -> None:
            self.rows, self.size = int(options["rows"]), int(options["size"])
            self.chunk = int(options.get("chunk", 100_000))

        def partitions(self):
            return [InputPartition(p) for p in range(PARTS)]

        def read(self, partition):
            import pyarrow as pa

            schema = fk.consumer.spark_schema(pa)
            schema = schema.remove(schema.get_field_index("headers"))
            left = self.rows // PARTS + (partition.value < self.rows % PARTS)
            k = min(self.chunk, left)
            cols = {"key": pa.nulls(k, pa.binary()), "value": pa.array([b"x" * self.size] * k, pa.binary()),
                    "topic": pa.array(["floor"] * k), "partition": pa.array([partition.value] * k, pa.int32()),
                    "offset": pa.array(range(k), pa.int64()),
                    "timestamp": pa.array([0] * k, pa.int64()).cast(schema.field("timestamp").type),
                    "timestampType": pa.array([0] * k, pa.int32())}
            batch = pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)
            while left > 0:
                yield batch if left >= k else batch.slice(0, left)
                left -= k

    class Floor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "kafka-floor"

        def schema(self):
            return fk.spark.KafkaDataSource({}).schema()

        def reader(self, schema):
            return Reader(self.options)

        def writer(self, schema, overwrite):
            return Writer()

    return Floor


def child(spec: dict) -> dict:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import ferrokafka as fk

    bs, client, n, size = spec["bootstrap"], spec["client"], spec["rows"], spec["size"]
    spark = (SparkSession.builder.master("local[2]").appName("bench-spark")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(PARTS))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    fk.spark.register(spark)
    if spec["client"] == "floor":
        spark.dataSource.register(_floor_source())

    def frame(rows: int):
        return spark.range(rows, numPartitions=PARTS).selectExpr(
            "cast(cast(id as string) as binary) as key", f"cast(repeat('x', {size}) as binary) as value")

    def ends(topic: str) -> dict:
        c = fk.Consumer(bs)
        try:
            tps = [fk.TopicPartition(topic, p) for p in range(PARTS)]
            lo, hi = c.beginning_offsets(tps), c.end_offsets(tps)
            return {tp.partition: (lo[tp], hi[tp]) for tp in tps}
        finally:
            c.close()

    def write(topic: str, rows: int) -> None:
        df = frame(rows)
        if client == "ferrokafka":
            df.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", topic) \
                .mode("append").save()
            return
        if client == "floor":
            df.write.format("kafka-floor").mode("append").save()
            return

        if client == "pandas":
            def run(it):
                import pandas as pd

                for pdf in it:
                    yield pd.DataFrame({"n": [_ck_write_rows(bs, topic, zip(pdf["key"], pdf["value"]))]})

            got = df.mapInPandas(run, "n long").collect()
        else:
            def run(it):
                import pyarrow as pa

                for b in it:
                    rows_ = zip(b.column("key").to_pylist(), b.column("value").to_pylist())
                    yield pa.RecordBatch.from_pydict({"n": [_ck_write_rows(bs, topic, rows_)]})

            got = df.mapInArrow(run, "n long").collect()
        assert sum(r.n for r in got) == rows

    def read(topic: str, rows: int) -> None:
        if client == "ferrokafka":
            got = spark.read.format("ferrokafka").option("kafka.bootstrap.servers", bs) \
                .option("subscribe", topic).option("startingOffsets", "earliest").load() \
                .selectExpr("sum(length(value)) as b").collect()
        elif client == "floor":
            got = spark.read.format("kafka-floor").option("rows", rows).option("size", size).load() \
                .selectExpr("sum(length(value)) as b").collect()
        else:
            bounds = ends(topic)
            ranges = spark.createDataFrame([(p, lo, hi) for p, (lo, hi) in bounds.items()],
                                           "p int, s long, e long").repartition(PARTS)
            if client == "pandas":
                def run(it):
                    import pandas as pd

                    for pdf in it:
                        for p, s, e in zip(pdf["p"], pdf["s"], pdf["e"]):
                            yield pd.DataFrame({"value": _ck_read_range(bs, topic, int(p), int(s), int(e))})

                out = ranges.mapInPandas(run, "value binary")
            else:
                def run(it):
                    import pyarrow as pa

                    for b in it:
                        for p, s, e in zip(*(b.column(c).to_pylist() for c in ("p", "s", "e"))):
                            vals = _ck_read_range(bs, topic, p, s, e)
                            yield pa.RecordBatch.from_arrays([pa.array(vals, pa.binary())], ["value"])

                out = ranges.mapInArrow(run, "value binary")
            got = out.selectExpr("sum(length(value)) as b").collect()
        assert got[0].b == rows * size, (got[0].b, rows * size)

    def stream(topic: str, rows: int) -> None:
        q = (spark.readStream.format("ferrokafka").option("kafka.bootstrap.servers", bs)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(rows // 10)).load()
             .writeStream.format("noop").option("checkpointLocation", f"/tmp/bench-spark-chk-{uuid.uuid4().hex}")
             .trigger(availableNow=True).start())
        q.awaitTermination(600)
        if q.exception() is not None:
            raise RuntimeError(str(q.exception()))
        batches = [p for p in q.recentProgress if p.numInputRows]
        assert sum(p.numInputRows for p in batches) == rows, [p.numInputRows for p in batches]
        assert len(batches) == 10, len(batches)

    # warm-up: the same variant on the warm-up topic (workers started, imports done)
    write(spec["warm"], 20_000)
    read(spec["warm"], 20_000)
    out = {}
    me = os.getpid()
    jobs = [("write", spec["topics"]["write"], write), ("read", spec["topics"]["read"], read)]
    if client == "ferrokafka":
        jobs.append(("stream", spec["topics"]["stream"], stream))
    for job, topic, fn in jobs:
        c0, t0 = tree_cpu(me), time.perf_counter()
        fn(topic, n)
        wall, c1 = time.perf_counter() - t0, tree_cpu(me)
        out[job] = {"wall": wall, **{k: c1[k] - c0[k] for k in c0}}
        if job == "write" and client != "floor":
            got = sum(hi - lo for lo, hi in ends(topic).values())
            assert got == n, f"wrote {got} of {n}"
    spark.stop()
    return out


# ------------------------------------------------------------------------------------------
# parent: broker, topics, rotation, report
# ------------------------------------------------------------------------------------------


def fill(bs: str, topic: str, n: int, size: int) -> None:
    import ferrokafka as fk

    with fk.Producer(bs) as p:
        futs = [p.send_batch(topic, [b"x" * size] * min(10_000, n - i), partition=(i // 10_000) % PARTS)
                for i in range(0, n, 10_000)]
        for f in futs:
            f.result(300)


def run_child(spec: dict, timeout: float = 1800) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", json.dumps(spec)],
                          capture_output=True, text=True, timeout=timeout)
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()][-3:]
        return {"error": f"exit {proc.returncode}: {' | '.join(tail)[:400]}"}
    return json.loads(lines[-1])


def summarize(runs: dict, rows: int) -> dict:
    out = {}
    for client, rs in runs.items():
        ok = [r for r in rs if "error" not in r]
        for job in ("write", "read", "stream"):
            xs = [r[job] for r in ok if job in r]
            if not xs:
                continue
            best = min(xs, key=lambda x: x["total"])
            out[f"{job}/{client}"] = {
                "best_wall": min(x["wall"] for x in xs), "worst_wall": max(x["wall"] for x in xs),
                "cpu_per_m": best["total"] / rows * 1e6, "split_per_m": {k: best[k] / rows * 1e6 for k in
                                                                         ("driver", "jvm", "workers")},
                "rate": rows / min(x["wall"] for x in xs), "runs": len(xs),
            }
        errs = [r["error"] for r in rs if "error" in r]
        if errs:
            out[f"errors/{client}"] = errs
    return out


def tables(summary: dict) -> list:
    rows = ["| job | variant | rows/s | wall (best) | CPU s per 1M rows (whole tree) | driver / JVM / Python workers "
            "| CPU vs this variant: ferrokafka | wall vs this variant: ferrokafka |",
            "|---|---|---|---|---|---|---|---|"]
    for job in ("write", "read", "stream"):
        ours = summary.get(f"{job}/ferrokafka")
        for client in CLIENTS:
            s = summary.get(f"{job}/{client}")
            if not s:
                continue
            sp = s["split_per_m"]
            vs_cpu = vs_wall = "-"
            if ours and client not in ("ferrokafka", "floor"):
                vs_cpu = f"{s['cpu_per_m'] / ours['cpu_per_m']:.2f}x less"
                vs_wall = f"{s['best_wall'] / ours['best_wall']:.2f}x faster"
            rows.append(f"| {job} | {LABEL[client]} | {s['rate']:,.0f} | {s['best_wall']:.2f} s | "
                        f"{s['cpu_per_m']:.2f} | {sp['driver']:.2f} / {sp['jvm']:.2f} / {sp['workers']:.2f} | "
                        f"{vs_cpu} | {vs_wall} |")
    return rows


def goals(summary: dict) -> list:
    rows = ["| goal | job | figure | met | most any Python data source could reach (baseline CPU / floor CPU) |",
            "|---|---|---|---|---|"]
    for job in ("write", "read"):
        ours = summary.get(f"{job}/ferrokafka")
        floor = summary.get(f"{job}/floor")
        for client in ("pandas", "arrow"):
            s = summary.get(f"{job}/{client}")
            if not (ours and s):
                continue
            c = s["cpu_per_m"] / ours["cpu_per_m"]
            w = s["best_wall"] / ours["best_wall"]
            bound = f"{s['cpu_per_m'] / floor['cpu_per_m']:.2f}x" if floor else "not measured"
            rows.append(f"| ≥ 2x less CPU per row than {LABEL[client]}, wall no worse | {job} | "
                        f"{c:.2f}x less CPU, {w:.2f}x its wall speed | {'yes' if c >= 2 and w >= 1 else '**no**'} "
                        f"| {bound} |")
    return rows


def render(data: dict) -> str:
    env, s = data["environment"], data["summary"]
    out = ["# Spark benchmark: the ferrokafka data source vs mapInPandas / mapInArrow + confluent-kafka", ""]
    if data["smoke"]:
        out += ["> **Smoke run, not evidence** (small N or fewer than 3 rounds).", ""]
    out += [f"Generated by `{data['command']}` on {env['date_utc']}; do not edit by hand. "
            "JSON with every run: `docs/benchmarks-spark.json`.", "",
            "## How measured", "",
            f"{data['rows']:,} rows of {data['size']} B, {PARTS}-partition topics on one embedded Tansu broker "
            f"(loopback); Spark {env['pyspark']} `local[2]`, Java {env['java']}; confluent-kafka "
            f"{env['confluent_kafka']}; {env['nproc']} CPUs, load average {env['loadavg_start'][0]:.1f} at the "
            f"start and {env['loadavg_end'][0]:.1f} at the end (a shared machine). {data['rounds']} round(s), "
            "order of variants rotated; per variant the best wall time and the lowest CPU.", "",
            "CPU is the kernel's account (`/proc/<pid>/stat` utime + stime, plus cutime + cstime of "
            "reaped children) of the whole process tree of the run's child process: its Python driver, "
            "the Spark JVM and every Python worker, and not the broker; taken before and after each job, "
            "after a warm-up job of the same variant (Python workers started). Each timed job uses a "
            "fresh topic; read and stream topics are filled beforehand, untimed. Both clients keep their "
            "defaults. The write job produces a generated DataFrame (`spark.range` + casts) and checks "
            "the topic holds every row; the read job reads the whole topic and sums the value lengths "
            "(every value materialised); the stream is 10 micro-batches (`maxOffsetsPerTrigger` = rows / "
            "10, `Trigger.AvailableNow`, `noop` sink). The baselines have no streaming source.", "",
            "The floor variant is a Python data source with Spark's Kafka schema that does no Kafka "
            "work at all: its writer counts the Arrow batches Spark hands it, its reader yields one "
            "prebuilt Arrow batch of the same rows again and again. It measures what Spark itself "
            "spends to move the rows between the JVM and any Python data source (Python workers, "
            "Arrow transfer, the JVM's side); a baseline's CPU over the floor's is the most any "
            "client inside a Python data source could reach against that baseline. It is not a "
            "strict bound: Spark's share moves by a few tenths of a CPU-second between runs.", "",
            "## Figures", ""] + tables(s) + ["", "## Goals of issue 21", ""] + goals(s) + [""]
    errs = {k: v for k, v in s.items() if k.startswith("errors/")}
    if errs:
        out += ["## Failed runs", ""] + [f"- {k[7:]}: {e}" for k, v in errs.items() for e in v] + [""]
    return "\n".join(out)


def environment() -> dict:
    import confluent_kafka
    import pyspark

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return {"date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "nproc": os.cpu_count(), "loadavg_start": os.getloadavg(), "pyspark": pyspark.__version__,
            "java": java[0] if java else "?", "confluent_kafka": _version(confluent_kafka.version())}


def _version(v) -> str:
    # confluent_kafka.version() is a (str, int) tuple in some releases, a str in others
    return v[0] if isinstance(v, tuple) else str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="100k rows, 1 round")
    ap.add_argument("--write-docs", action="store_true", help="write docs/benchmarks-spark.md and .json")
    ap.add_argument("--from-json", help="skip measuring; render this results file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            data = json.load(f)
        data["environment"]["confluent_kafka"] = _version(data["environment"]["confluent_kafka"])
        if args.write_docs:
            with open(os.path.join(DOCS, "benchmarks-spark.md"), "w") as f:
                f.write(render(data))
        print(render(data))
        return
    if args.child:
        print(json.dumps(child(json.loads(args.child))), flush=True)
        return
    if args.quick:
        args.rows, args.rounds = 100_000, 1
    import ferrokafka as fk
    from ferrokafka.testing import EmbeddedBroker

    env = environment()
    runs: dict = {c: [] for c in CLIENTS}
    with EmbeddedBroker() as broker:
        bs = broker.bootstrap_servers
        admin = fk.Admin(bs)

        def topic() -> str:
            name = "bench-spark-" + uuid.uuid4().hex[:10]
            admin.create_topics([fk.NewTopic(name, PARTS, 1)])
            return name

        for r in range(args.rounds):
            order = CLIENTS[r % len(CLIENTS):] + CLIENTS[:r % len(CLIENTS)]
            for client in order:
                topics = {"write": topic(), "read": topic(), "stream": topic()}
                if client != "floor":
                    fill(bs, topics["read"], args.rows, args.size)
                if client == "ferrokafka":
                    fill(bs, topics["stream"], args.rows, args.size)
                spec = {"bootstrap": bs, "client": client, "rows": args.rows, "size": args.size,
                        "topics": topics, "warm": topic()}
                out = run_child(spec)
                runs[client].append(out)
                brief = out.get("error") or ", ".join(f"{j} {v['wall']:.1f} s / {v['total']:.1f} cpu-s"
                                                       for j, v in out.items())
                print(f"round {r + 1} {client:<10} {brief}", flush=True)
                try:
                    admin.delete_topics(list(topics.values()) + [spec["warm"]])
                except Exception:
                    pass
        admin.close()
    env["loadavg_end"] = os.getloadavg()
    data = {"command": "python benches/bench_spark.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else ""),
            "rows": args.rows, "size": args.size, "rounds": args.rounds,
            "smoke": args.quick or args.rounds < 3 or args.rows < 1_000_000,
            "environment": env, "runs": runs, "summary": summarize(runs, args.rows)}
    print("\n".join(tables(data["summary"])))
    print("\n".join(goals(data["summary"])))
    if args.write_docs:
        with open(os.path.join(DOCS, "benchmarks-spark.json"), "w") as f:
            json.dump(data, f, indent=1)
        with open(os.path.join(DOCS, "benchmarks-spark.md"), "w") as f:
            f.write(render(data))
        print("wrote docs/benchmarks-spark.md and docs/benchmarks-spark.json")


if __name__ == "__main__":
    main()
