"""Spark: ferrokafka's data source vs what PySpark users do without the JVM
Kafka connector (mapInPandas + confluent-kafka), same run, local[2].

    python benches/bench_spark.py [--rows N] [--size BYTES]

Uses librdkafka's mock cluster (in memory; Tansu 0.6.0's stale
ListOffsets(latest) would cut batch reads short). Write: a DataFrame of N
rows x SIZE-byte values into a 4-partition topic. Read: all of it back,
ferrokafka `spark.read.format("ferrokafka")` vs a partition-range reader
running confluent-kafka consumers in mapInPandas. Prints rows/s and ratios
(issue 7 goal: >= 2x both ways).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import ferrokafka as fk


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--broker", choices=("tansu", "mock"), default="tansu",
                    help="tansu: the embedded broker (end offsets from Fetch high watermarks, its "
                         "ListOffsets(latest) is stale); mock: librdkafka's mock (bounded log, small fetches)")
    args = ap.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(fk.spark.KafkaDataSource)
    n, size = args.rows, args.size
    import contextlib

    with contextlib.ExitStack() as stack:
        if args.broker == "mock":
            m = stack.enter_context(fk.testing.MockCluster(num_brokers=1))
            bs = m.bootstrap_servers
            create = lambda t: m.create_topic(t, 4, 1)  # noqa: E731
        else:
            b = stack.enter_context(fk.testing.EmbeddedBroker())
            bs = b.bootstrap_servers
            admin = fk.Admin(bs)
            create = lambda t: admin.create_topics([fk.NewTopic(t, 4, 1)])  # noqa: E731
        for t in ("fk", "ck"):
            create(t)
        df = (spark.range(n, numPartitions=4)
              .selectExpr("cast(cast(id as string) as binary) as key",
                          f"cast(repeat('x', {size}) as binary) as value").cache())
        df.count()

        # Warm both paths up first (Python workers, JIT, imports), so the
        # first timed job does not pay Spark's start-up for both.
        create("warm")
        small = df.limit(20_000)
        small.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "warm").mode("append").save()

        t0 = time.perf_counter()
        df.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "fk") \
            .mode("append").save()
        w_fk = time.perf_counter() - t0

        def ck_write_warm(it):
            import confluent_kafka  # noqa: F401
            import pandas as pd

            for _ in it:
                pass
            yield pd.DataFrame({"n": [0]})

        def ck_write(it):
            import confluent_kafka
            import pandas as pd

            p = confluent_kafka.Producer({"bootstrap.servers": bs, "linger.ms": 10})
            c = 0
            for pdf in it:
                for k, v in zip(pdf["key"], pdf["value"]):
                    while True:
                        try:
                            p.produce("ck", value=v, key=k)
                            break
                        except BufferError:
                            p.poll(0.01)
                    c += 1
                p.poll(0)
            p.flush(120)
            yield pd.DataFrame({"n": [c]})

        small.mapInPandas(ck_write_warm, "n long").collect()
        t0 = time.perf_counter()
        written = df.mapInPandas(ck_write, "n long").collect()
        w_ck = time.perf_counter() - t0
        assert sum(r.n for r in written) == n

        # The mock keeps a bounded log per partition (old segments go), so
        # compare with what it still holds, not with n.
        def held(topic):
            c = fk.Consumer(bs, auto_offset_reset="earliest")
            tps = [fk.TopicPartition(topic, p) for p in range(4)]
            lo = c.beginning_offsets(tps)
            if args.broker == "mock":
                hi = c.end_offsets(tps)
            else:
                # the high watermark of a Fetch answer (Tansu's ListOffsets(latest) is stale)
                c.assign(tps)
                hi = {}
                while len(hi) < 4:
                    c.poll(200)
                    for tp in tps:
                        w = c.get_watermark_offsets(tp, cached=True)
                        if w[1] >= 0:
                            hi[tp] = w[1]
            c.close()
            return {tp.partition: (lo[tp], hi[tp]) for tp in tps}

        fk_held = held("fk")
        n_fk = sum(h - lo for lo, h in fk_held.values())
        t0 = time.perf_counter()
        ending = json.dumps({"fk": {str(p): h for p, (_, h) in fk_held.items()}})
        got = spark.read.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("subscribe", "fk") \
            .option("startingOffsets", "earliest").option("endingOffsets", ending).load() \
            .selectExpr("sum(length(value)) as b").collect()
        r_fk = time.perf_counter() - t0
        assert got[0].b == n_fk * size, (got[0].b, n_fk * size)

        ck_held = held("ck")
        n_ck = sum(h - lo for lo, h in ck_held.values())
        ranges = spark.createDataFrame([(p, lo, h) for p, (lo, h) in ck_held.items()], "p int, s long, e long").repartition(4)

        def ck_read(it):
            import confluent_kafka
            import pandas as pd

            for pdf in it:
                for p, s, e in zip(pdf["p"], pdf["s"], pdf["e"]):
                    co = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": "bench", "enable.auto.commit": False})
                    co.assign([confluent_kafka.TopicPartition("ck", int(p), int(s))])
                    keys, vals, offs = [], [], []
                    pos = s
                    while pos < e:
                        for msg in co.consume(10000, 1.0):
                            if msg.error() is None and msg.offset() < e:
                                keys.append(msg.key())
                                vals.append(msg.value())
                                offs.append(msg.offset())
                                pos = msg.offset() + 1
                    co.close()
                    yield pd.DataFrame({"key": keys, "value": vals, "offset": offs})

        t0 = time.perf_counter()
        got = ranges.mapInPandas(ck_read, "key binary, value binary, offset long").selectExpr("sum(length(value)) as b").collect()
        r_ck = time.perf_counter() - t0
        assert got[0].b == n_ck * size, (got[0].b, n_ck * size)
    spark.stop()
    print(f"write: ferrokafka {n / w_fk:,.0f} rows/s, mapInPandas+confluent {n / w_ck:,.0f} rows/s -> {w_ck / w_fk:.2f}x")
    a, b = n_fk / r_fk, n_ck / r_ck
    print(f"read:  ferrokafka {a:,.0f} rows/s ({n_fk} rows), mapInPandas+confluent {b:,.0f} rows/s ({n_ck} rows) -> {a / b:.2f}x")


if __name__ == "__main__":
    main()
