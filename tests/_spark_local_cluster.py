"""Run by tests/test_spark_cluster.py in its own process: Spark in
local-cluster mode (2 executor JVMs, each with its own Python workers) writes
and reads through the ferrokafka data source; prints one result line."""

import os
import sys
import time

os.environ["PYSPARK_PYTHON"] = sys.executable
from pyspark.sql import SparkSession

import ferrokafka as fk

spark = (SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
         .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable).getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
fk.spark.register(spark)
with fk.testing.MockCluster(num_brokers=1) as m:
    bs = m.bootstrap_servers
    m.create_topic("lc", 4, 1)
    n = 50000
    df = spark.range(n, numPartitions=4).selectExpr("cast(cast(id as string) as binary) as key", "cast(concat('v', id) as binary) as value")
    t0 = time.perf_counter()
    df.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "lc").mode("append").save()
    w = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = spark.read.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("subscribe", "lc").option("startingOffsets", "earliest").load()
    vals = sorted(int(r.value[1:]) for r in back.select("value").collect())
    r = time.perf_counter() - t0
    pids = spark.sparkContext.parallelize(range(4), 4).map(lambda _: os.getpid()).distinct().collect()
    print("LOCALCLUSTER ok:", vals == list(range(n)), f"write {w:.1f}s read {r:.1f}s", "executor pids:", sorted(pids), "driver pid:", os.getpid())
spark.stop()
