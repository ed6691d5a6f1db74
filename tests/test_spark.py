"""PySpark layer (issue 7): pyspark local[2], one SparkSession for the module.

Most reads run on librdkafka's mock cluster; the embedded broker's exact counts
are checked at the end (issue 15: stock Tansu 0.6.0 answered ListOffsets(latest)
with a stale offset and a batch read of 1,000 records counted 2; our build is
fixed, and test_broker_conformance.py checks every broker's offsets).
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter

import pytest
from conftest import _unavailable

import ferrokafka as fk
from ferrokafka.spark import _plan
from ferrokafka.spark._plan import Range

# ----- planning, no Spark ----------------------------------------------------------------


def test_split_ranges_tile_exactly():
    ranges = [Range("t", 0, 0, 1000), Range("t", 1, 10, 20), Range("u", 0, 5, 5)]
    parts = _plan.split_ranges(ranges, 8)
    assert len(parts) >= 8 - 1
    for src in ranges[:2]:
        mine = sorted((r.start, r.end) for r in parts if (r.topic, r.partition) == (src.topic, src.partition))
        assert mine[0][0] == src.start and mine[-1][1] == src.end
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:])), "gap or overlap"
    assert not [r for r in parts if r.topic == "u"], "empty ranges are dropped"
    assert _plan.split_ranges(ranges, None) == ranges[:2]


def test_offsets_options_and_caps():
    tps = [("t", 0), ("t", 1)]
    assert _plan.parse_offsets("earliest", "startingOffsets", -1, tps) == {("t", 0): -2, ("t", 1): -2}
    assert _plan.parse_offsets('{"t": {"0": 5}}', "startingOffsets", -1, tps) == {("t", 0): 5, ("t", 1): -1}
    with pytest.raises(ValueError, match="startingOffsets"):
        _plan.parse_offsets("soon", "startingOffsets", -1, tps)
    with pytest.raises(ValueError, match="endingOffsets"):
        _plan.parse_offsets("earliest", "endingOffsets", -1, tps, allow_earliest=False)
    assert _plan.cap_ranges({("t", 0): 0, ("t", 1): 0}, {("t", 0): 300, ("t", 1): 100}, 100) == {("t", 0): 75, ("t", 1): 25}
    with pytest.raises(ValueError, match="exactly one"):
        _plan.strategy({"subscribe": "a", "assign": "{}"})
    with pytest.raises(ValueError, match="unknown option 'subscrbe'"):
        _plan.check_options({"subscrbe": "t"}, _plan.SOURCE, False, "batch source")
    with pytest.raises(ValueError, match="kafka.bootstrap.servers"):
        _plan.client_config({"subscribe": "t"})


# Every option of Spark 4.x's "Structured Streaming + Kafka Integration Guide"
# (source and sink), as the guide spells them: each is in the table, and each
# is either taken or refused with a reason (issue 21).
SPARK_GUIDE_OPTIONS = [
    "assign", "subscribe", "subscribePattern", "kafka.bootstrap.servers", "startingTimestamp",
    "startingOffsetsByTimestamp", "startingOffsets", "endingTimestamp", "endingOffsetsByTimestamp",
    "endingOffsets", "failOnDataLoss", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay",
    "minPartitions", "groupIdPrefix", "kafka.group.id", "includeHeaders",
    "startingOffsetsByTimestampStrategy", "maxRecordsPerPartition", "topic",
]


def test_every_spark_option_is_in_the_one_table():
    from ferrokafka.spark import _options

    names = {o.name for o in _options.OPTIONS}
    assert set(SPARK_GUIDE_OPTIONS) <= names
    for o in _options.OPTIONS:
        assert bool(o.refused) != bool(o.meaning), f"{o.name}: either a meaning or a reason to refuse"


@pytest.mark.parametrize("name,why", [("groupIdPrefix", "never joins a consumer group"),
                                      ("kafka.group.id", "commitOffsetsToGroup"),
                                      ("kafka.key.deserializer", "CAST\\(key AS STRING\\)"),
                                      ("kafka.value.deserializer", "from_json"),
                                      ("kafka.auto.offset.reset", "startingOffsets"),
                                      ("kafka.enable.auto.commit", "commitOffsetsToGroup")])
def test_refused_options_say_why_and_what_instead(name, why):
    with pytest.raises(ValueError, match=f"'{name}' is not supported.*{why}"):
        _plan.check_options({"subscribe": "t", name: "x"}, _plan.SOURCE, True, "streaming source")


def test_options_of_the_other_side_or_mode_are_refused():
    with pytest.raises(ValueError, match="'endingOffsets' is for batch queries only"):
        _plan.check_options({"endingOffsets": "latest"}, _plan.SOURCE, True, "streaming source")
    with pytest.raises(ValueError, match="'minOffsetsPerTrigger' is for streaming"):
        _plan.check_options({"minOffsetsPerTrigger": "5"}, _plan.SOURCE, False, "batch source")
    with pytest.raises(ValueError, match="'topic' is a sink option"):
        _plan.check_options({"topic": "t"}, _plan.SOURCE, False, "batch source")
    with pytest.raises(ValueError, match="'subscribe' is a source option"):
        _plan.check_options({"subscribe": "t"}, _plan.SINK, False, "sink")
    with pytest.raises(ValueError, match="kafka.value.serializer"):
        _plan.check_options({"kafka.value.serializer": "x"}, _plan.SINK, False, "sink")
    _plan.check_options({"kafka.linger.ms": "5", "topic": "t", "includeHeaders": "true"}, _plan.SINK, True, "sink")


def test_max_records_per_partition_splits_after_min_partitions():
    ranges = [Range("t", 0, 0, 1000), Range("t", 1, 0, 10)]
    parts = _plan.split_ranges(ranges, 4, 300)
    assert max(r.size for r in parts) <= 300
    for src in ranges:
        mine = sorted((r.start, r.end) for r in parts if r.partition == src.partition)
        assert mine[0][0] == src.start and mine[-1][1] == src.end
        assert all(a[1] == b[0] for a, b in zip(mine, mine[1:])), "gap or overlap"
    assert len(_plan.split_ranges([Range("t", 0, 0, 1000)], None, 1000)) == 1
    assert len(_plan.split_ranges([Range("t", 0, 0, 1001)], None, 1000)) == 2


def test_durations_and_choices():
    assert _plan.parse_duration_ms({"maxTriggerDelay": "15m"}, "maxTriggerDelay", 0) == 900_000
    assert _plan.parse_duration_ms({"maxTriggerDelay": "250"}, "maxTriggerDelay", 0) == 250
    assert _plan.parse_duration_ms({}, "maxTriggerDelay", 7) == 7
    with pytest.raises(ValueError, match="maxTriggerDelay"):
        _plan.parse_duration_ms({"maxTriggerDelay": "soon"}, "maxTriggerDelay", 0)
    with pytest.raises(ValueError, match="startingOffsetsByTimestampStrategy"):
        _plan.parse_choice({"startingOffsetsByTimestampStrategy": "earliest"},
                           "startingOffsetsByTimestampStrategy", ("error", "latest"), "error")
    with pytest.raises(ValueError, match="startingOffsetsByTimestamp"):
        _plan.parse_timestamps('{"t": {"0": -5}}', "startingOffsetsByTimestamp")


def test_spark_doc_table_is_generated_from_the_table():
    from ferrokafka.spark import _options

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "docs", "spark.md")) as f:
        assert _options.markdown() in f.read(), "docs/spark.md is stale: run python scripts/gen-spark-doc.py"


def test_offsets_behind_latest_from_progress():
    got = fk.spark.offsets_behind_latest({"endOffset": '{"t": {"0": 5, "1": 3}}',
                                          "latestOffset": {"t": {"0": 10, "1": 3}}})
    assert got == {"minOffsetsBehindLatest": 0.0, "maxOffsetsBehindLatest": 5.0, "avgOffsetsBehindLatest": 2.5}
    assert fk.spark.offsets_behind_latest({"endOffset": "{}", "latestOffset": None}) == {}


# ----- Spark --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        _unavailable("pyspark", e)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    s = (SparkSession.builder.master("local[2]").appName("ferrokafka-tests")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
         .config("spark.driver.memory", "1g").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    assert fk.spark.register(s) == "ferrokafka"
    assert fk.spark.register(s) == "ferrokafka"  # again: harmless
    yield s
    s.stop()


def _read(spark, bs, **opts):
    r = spark.read.format("ferrokafka").option("kafka.bootstrap.servers", bs)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def test_round_trip_100k_with_keys_nulls_and_headers(spark, mock_cluster):
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("rt", 4, 1)
    n = 100_000
    df = spark.range(n).selectExpr(
        "case when id % 7 = 0 then null else cast(concat('k', id) as binary) end as key",
        "case when id % 11 = 0 then null else cast(concat('v', id) as binary) end as value")
    df.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "rt").mode("append").save()
    # headers go through the per-row path
    hdf = spark.range(2000).selectExpr("cast(concat('hk', id) as binary) as key", "cast('hv' as binary) as value",
                                       "array(named_struct('key', 'h', 'value', cast(id as string)), "
                                       "named_struct('key', 'n', 'value', cast(null as binary))) as headers")
    hdf.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "rt").mode("append").save()
    back = _read(spark, bs, subscribe="rt", startingOffsets="earliest", includeHeaders="true")
    assert back.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    rows = back.select("key", "value", "headers").collect()
    want = Counter((None if i % 7 == 0 else b"k%d" % i, None if i % 11 == 0 else b"v%d" % i, ()) for i in range(n))
    want.update((b"hk%d" % i, b"hv", (("h", str(i).encode()), ("n", None))) for i in range(2000))
    got = Counter((r.key, r.value, tuple((h.key, h.value) for h in (r.headers or []))) for r in rows)
    assert got == want
    without = _read(spark, bs, subscribe="rt", startingOffsets="earliest")
    assert "headers" not in without.columns and without.count() == n + 2000


def test_subscribing_to_a_missing_topic_fails_the_read_instead_of_reading_nothing(spark, mock_cluster):
    """As Spark's connector (its admin's describeTopics fails): a plan with no
    partitions would count 0 with no error (docs/semantics.md §9.3)."""
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("present", 1, 1)
    df = _read(spark, bs, subscribe="present,absent", startingOffsets="earliest",
               **{"fetchOffset.numRetries": "1", "fetchOffset.retryIntervalMs": "10"})
    with pytest.raises(Exception, match="not in the cluster: absent"):
        df.count()
    assert _read(spark, bs, subscribe="present", startingOffsets="earliest").count() == 0


def test_min_partitions_split_without_gap_or_overlap(spark, mock_cluster):
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("mp", 2, 1)
    with fk.Producer(bs, linger_ms=5) as p:
        for i in range(3000):
            p.send("mp", value=b"%d" % i, partition=0 if i < 2500 else 1)
        assert p.flush(30) == 0
    df = _read(spark, bs, subscribe="mp", startingOffsets="earliest", minPartitions="7")
    assert df.rdd.getNumPartitions() >= 6
    offsets = df.select("partition", "offset").collect()
    by_p = Counter(r.partition for r in offsets)
    assert by_p == {0: 2500, 1: 500}
    assert len({(r.partition, r.offset) for r in offsets}) == 3000
    # explicit ranges
    df = _read(spark, bs, assign='{"mp": [0]}', startingOffsets='{"mp": {"0": 100}}', endingOffsets='{"mp": {"0": 200}}')
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(100, 200))


def test_streaming_available_now_resumes_from_checkpoint(spark, mock_cluster, tmp_path):
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("st", 2, 1)

    def produce(lo, hi):
        with fk.Producer(bs, linger_ms=2) as p:
            for i in range(lo, hi):
                p.send("st", value=b"%d" % i)
            assert p.flush(30) == 0

    produce(0, 500)
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")

    def run():
        q = (spark.readStream.format("ferrokafka").option("kafka.bootstrap.servers", bs)
             .option("subscribe", "st").option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200")
             .load().selectExpr("cast(value as string) as v")
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", chk)
             .trigger(availableNow=True).start())
        q.awaitTermination(120)
        return q

    q = run()
    assert q.exception() is None
    first = sorted(int(r.v) for r in spark.read.parquet(out).collect())
    assert first == list(range(500))
    assert len(q.recentProgress) >= 3, "maxOffsetsPerTrigger=200 splits 500 records into batches"
    produce(500, 800)
    run()
    allv = [int(r.v) for r in spark.read.parquet(out).collect()]
    assert sorted(allv) == list(range(800)), "exactly the new records, once"


def test_streaming_write(spark, mock_cluster, tmp_path):
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("sw-in", 1, 1)
    mock_cluster.create_topic("sw-out", 1, 1)
    with fk.Producer(bs) as p:
        for i in range(100):
            p.send("sw-in", value=b"%d" % i)
        p.flush()
    q = (spark.readStream.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("subscribe", "sw-in")
         .option("startingOffsets", "earliest").load().selectExpr("key", "concat(value, cast('!' as binary)) as value")
         .writeStream.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "sw-out")
         .option("checkpointLocation", str(tmp_path / "c")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = sorted(r.value for r in _read(spark, bs, subscribe="sw-out", startingOffsets="earliest").collect())
    assert got == sorted(b"%d!" % i for i in range(100))


def test_produce_returns_per_task_counts(spark, mock_cluster):
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("pr", 2, 1)
    df = spark.range(10_000).repartition(3).selectExpr("cast(id as string) as key", "cast(cast(id as string) as binary) as value")
    res = fk.spark.produce(df, "pr", bs, linger_ms=5).collect()
    assert sum(r.records for r in res) == 10_000 and all(r.errors == 0 for r in res)
    assert _read(spark, bs, subscribe="pr", startingOffsets="earliest").count() == 10_000


def test_clear_errors(spark, mock_cluster):
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("er", 1, 1)
    df = spark.range(3).selectExpr("cast(cast(id as string) as binary) as notvalue")
    with pytest.raises(ValueError, match="'value'"):
        fk.spark.produce(df, "er", bs)
    with pytest.raises(Exception, match="'value' column"):
        df.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "er").mode("append").save()
    bad = spark.range(3).selectExpr("id as value")
    with pytest.raises(Exception, match="must be binary or string"):
        bad.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "er").mode("append").save()
    with pytest.raises(Exception, match="unknown option 'subscrbe'"):
        _read(spark, bs, subscrbe="er").count()
    with pytest.raises(Exception, match="linger"):
        fk.spark.produce(spark.range(1).selectExpr("cast(cast(id as string) as binary) as value"), "er", bs, key=None, linger_ms="x")


def test_exact_counts_on_embedded_broker(spark, embedded_broker, topic_name, tmp_path):
    """>= 10,000 records in 4 partitions, produced as batches of 1, 10, 250 and
    2,000 records in different codecs: end_offsets, a batch read and an
    availableNow stream all count exactly what was produced."""
    bs = embedded_broker.bootstrap_servers
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(topic_name, 4, 1)])
    plan = {0: (1, 600, "none"), 1: (10, 2_400, "lz4"), 2: (250, 3_500, "zstd"), 3: (2_000, 4_000, "gzip")}
    for part, (per_batch, n, codec) in plan.items():
        # linger 0: each send_batch (waited for) goes out as its own produce batch
        with fk.Producer(bs, linger_ms=0, batch_size=1 << 20, compression_type=codec) as p:
            for start in range(0, n, per_batch):
                p.send_batch(topic_name, [b"%d-%d" % (part, i) for i in range(start, min(n, start + per_batch))],
                             partition=part).result(30)
    want = {part: n for part, (_, n, _) in plan.items()}
    total = sum(want.values())
    assert total >= 10_000
    c = fk.Consumer(bs)
    try:
        ends = c.end_offsets([fk.TopicPartition(topic_name, q) for q in range(4)])
    finally:
        c.close()
    assert {tp.partition: o for tp, o in ends.items()} == want
    df = _read(spark, bs, subscribe=topic_name, startingOffsets="earliest")
    assert df.count() == total
    assert {r.partition: r["count"] for r in df.groupBy("partition").count().collect()} == want
    out, chk = str(tmp_path / "out"), str(tmp_path / "chk")
    q = (spark.readStream.format("ferrokafka").option("kafka.bootstrap.servers", bs)
         .option("subscribe", topic_name).option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", "4000").load().selectExpr("partition", "offset")
         .writeStream.format("parquet").option("path", out).option("checkpointLocation", chk)
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    rows = spark.read.parquet(out).collect()
    assert len(rows) == total and len({(r.partition, r.offset) for r in rows}) == total


# ----- the options of issue 21 ---------------------------------------------------------------


def test_timestamp_options_and_max_records(spark, embedded_broker, topic_name):
    """startingTimestamp / startingOffsetsByTimestamp / endingTimestamp with
    Spark's precedence and strategy, and maxRecordsPerPartition splitting,
    on the broker that answers ListOffsets by time exactly."""
    bs = embedded_broker.bootstrap_servers
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(topic_name, 1, 1)])
    base = 1_700_000_000_000
    with fk.Producer(bs, linger_ms=5) as p:
        for i in range(250):
            p.send(topic_name, value=b"%d" % i, partition=0, timestamp_ms=base + 1000 * i)
        assert p.flush(30) == 0

    def offsets(**opts):
        return sorted(r.offset for r in _read(spark, bs, subscribe=topic_name, **opts).select("offset").collect())

    assert offsets(startingTimestamp=str(base + 50_000), endingTimestamp=str(base + 60_000)) == list(range(50, 60))
    assert offsets(startingOffsetsByTimestamp=f'{{"{topic_name}": {{"0": {base + 200_500}}}}}') == list(range(201, 250))
    # startingTimestamp wins over startingOffsets
    assert offsets(startingTimestamp=str(base + 240_000), startingOffsets="earliest") == list(range(240, 250))
    late = str(base + 10_000_000)
    with pytest.raises(Exception, match="no record at or after timestamp"):
        offsets(startingTimestamp=late)
    assert offsets(startingTimestamp=late, startingOffsetsByTimestampStrategy="latest") == []
    df = _read(spark, bs, subscribe=topic_name, startingOffsets="earliest", maxRecordsPerPartition="100")
    assert df.rdd.getNumPartitions() == 3
    assert sorted(r.offset for r in df.select("offset").collect()) == list(range(250))


def test_client_options_are_checked_at_analysis(spark, mock_cluster):
    bs = mock_cluster.bootstrap_servers
    with pytest.raises(Exception, match="kafka.key.deserializer.*CAST"):
        _read(spark, bs, subscribe="t", **{"kafka.key.deserializer": "org.apache.kafka.StringDeserializer"}).count()
    with pytest.raises(Exception, match="fetch_max_wait_ms|fetch.max.wait.ms"):
        _read(spark, bs, subscribe="t", **{"kafka.fetch.max.wait.ms": "soon"}).count()
    with pytest.raises(Exception, match="groupIdPrefix.*never joins"):
        _read(spark, bs, subscribe="t", groupIdPrefix="team-a").count()


def test_poll_timeout_fails_a_range_that_makes_no_progress(mock_cluster):
    from ferrokafka.spark._source import read_range

    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("pt", 1, 1)
    with fk.Producer(bs) as p:
        for i in range(10):
            p.send("pt", value=b"%d" % i)
        assert p.flush(30) == 0
    got = []
    with pytest.raises(fk.KafkaTimeoutError, match="no progress at offset 10.*pollTimeoutMs"):
        for b in read_range({"bootstrap.servers": bs}, Range("pt", 0, 0, 1000), False, True, poll_timeout_ms=1500):
            got.extend(b.column("offset").to_pylist())
    assert got == list(range(10))


def test_offset_lookups_are_retried():
    from ferrokafka.spark._source import Retry

    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise fk.KafkaError("not yet")
        return "ok"

    assert Retry(3, 1).call(flaky) == "ok" and len(calls) == 3
    calls.clear()
    with pytest.raises(fk.KafkaError, match="not yet"):
        Retry(1, 1).call(flaky)
    assert len(calls) == 2


def test_min_offsets_per_trigger_waits_at_most_max_trigger_delay(spark, mock_cluster):
    """latestOffset skips triggers while fewer than minOffsetsPerTrigger
    offsets wait, until maxTriggerDelay has passed (driven directly: a
    processing-time query would take the delay in wall time per check)."""
    import time

    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from ferrokafka.spark._source import KafkaStreamReader

    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("mo", 1, 1)
    r = KafkaStreamReader({"kafka.bootstrap.servers": bs, "subscribe": "mo", "startingOffsets": "earliest",
                           "minOffsetsPerTrigger": "100", "maxTriggerDelay": "1s"})
    start = r.initialOffset()
    with fk.Producer(bs) as p:
        for i in range(40):
            p.send("mo", value=b"%d" % i)
        assert p.flush(30) == 0
    assert r.latestOffset(start, ReadAllAvailable()) == start, "40 < 100 offsets: no batch yet"
    time.sleep(1.1)
    assert r.latestOffset(start, ReadAllAvailable()) == {"mo": {"0": 40}}, "the delay passed: take what there is"
    assert r.reportLatestOffset() == {"mo": {"0": 40}}
    with pytest.raises(ValueError, match="minOffsetsPerTrigger"):
        KafkaStreamReader({"kafka.bootstrap.servers": bs, "subscribe": "mo", "minOffsetsPerTrigger": "10",
                           "maxOffsetsPerTrigger": "5"})


def test_commit_offsets_to_group_makes_lag_visible(spark, embedded_broker, topic_name, tmp_path, confluent_kafka):
    # The embedded broker: the mock cluster cannot answer a whole-group
    # OffsetFetch (test_broker_conformance.py), which Admin needs here.
    bs = embedded_broker.bootstrap_servers
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(topic_name, 2, 1)])
    with fk.Producer(bs) as p:
        for i in range(300):
            p.send(topic_name, value=b"%d" % i, partition=i % 2)
        assert p.flush(30) == 0
    group = f"lag-{topic_name}"
    q = (spark.readStream.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("subscribe", topic_name)
         .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "200")
         .option("commitOffsetsToGroup", group).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "c"))
         .trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    # Spark commits the source after each batch; the last commit may trail
    # the query's end by a moment.
    c = confluent_kafka.Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        want = {0: 150, 1: 150}
        got = {}
        for _ in range(50):
            tps = c.committed([confluent_kafka.TopicPartition(topic_name, p) for p in (0, 1)], timeout=10)
            got = {tp.partition: tp.offset for tp in tps}
            if got == want:
                break
            import time

            time.sleep(0.2)
        assert got == want
    finally:
        c.close()
    with fk.Admin(bs) as a:
        offs = a.list_consumer_group_offsets(group)
    assert {tp.partition: (o.offset if hasattr(o, "offset") else o) for tp, o in offs.items()} == {0: 150, 1: 150}
    first = q.recentProgress[0]["sources"][0]
    assert fk.spark.offsets_behind_latest(first)["maxOffsetsBehindLatest"] > 0, first


def test_sink_include_headers(spark, mock_cluster):
    bs = mock_cluster.bootstrap_servers
    mock_cluster.create_topic("hd", 1, 1)
    df = spark.range(3).selectExpr("cast(cast(id as string) as binary) as value",
                                   "array(named_struct('key', 'h', 'value', cast('x' as binary))) as headers")
    w = df.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "hd").mode("append")
    w.option("includeHeaders", "false").save()
    back = _read(spark, bs, subscribe="hd", startingOffsets="earliest", includeHeaders="true").collect()
    assert [list(r.headers or []) for r in back] == [[], [], []]
    with pytest.raises(Exception, match="includeHeaders=true but the DataFrame has no 'headers'"):
        (df.select("value").write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", "hd")
         .option("includeHeaders", "true").mode("append").save())


def test_spark_finds_the_source_without_register():
    """Spark's own lookup of Python data sources (run by the driver when a
    session first resolves a format) finds format "ferrokafka" through the
    `pyspark_ferrokafka` module, so no register() call is needed."""
    import io

    from pyspark.serializers import UTF8Deserializer, read_int
    from pyspark.sql.worker.lookup_data_sources import _main

    out = io.BytesIO()
    _main(io.BytesIO(), out)
    out.seek(0)
    names = []
    for _ in range(read_int(out)):
        names.append(UTF8Deserializer().loads(out))
        out.read(read_int(out))  # the pickled class
    assert "ferrokafka" in names


# ----- transactions (issue 18) and aborted-transaction gaps (issue 21) -------------------------


def test_transactional_write_hides_a_failed_task(spark, embedded_broker, topic_name):
    """transactional.id.prefix: one transaction per task. A task that fails
    mid-write is aborted, so read_committed readers see only the tasks that
    succeeded; the read itself stops exactly at the planned end offsets across
    the commit/abort markers and aborted records (gaps in the offsets)."""
    from pyspark.sql import functions as F

    bs = embedded_broker.bootstrap_servers
    with fk.Admin(bs) as a:
        a.create_topics([fk.NewTopic(topic_name, 2, 1)])
    # Two tasks; the second writes 500 good rows, then one row for a partition
    # that does not exist, which fails the task (and the job: local mode does
    # not retry).
    good = spark.range(0, 1000, numPartitions=2).select(
        F.col("id").cast("string").alias("value"),
        F.when(F.col("id") == 999, F.lit(7)).otherwise(F.col("id") % 2).cast("int").alias("partition"))
    w = (good.write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", topic_name)
         .option("transactional.id.prefix", f"tx-{topic_name}").mode("append"))
    with pytest.raises(Exception, match="invalid value for partition: 7"):  # Spark wraps it
        w.save()
    ok = (spark.range(0, 200, numPartitions=2).select(F.col("id").cast("string").alias("value"))
          .write.format("ferrokafka").option("kafka.bootstrap.servers", bs).option("topic", topic_name)
          .option("transactional.id.prefix", f"tx-{topic_name}").mode("append"))
    ok.save()
    # read_committed (ferrokafka's consumer): the 500 rows of the first job's
    # good task and all 200 of the second; never the failed task's rows.
    c = fk.Consumer(bs, isolation_level="read_committed", auto_offset_reset="earliest")
    tps = [fk.TopicPartition(topic_name, p) for p in range(2)]
    c.assign(tps)
    seen: list = []
    deadline = time.monotonic() + 20
    while len(seen) < 700 and time.monotonic() < deadline:
        seen += [m.value for m in c.poll(timeout_ms=200)]
    ends = c.end_offsets(tps)
    c.close()
    assert len(seen) == 700, len(seen)
    # The failed task held ids 500-999: none of them is visible.
    assert max(int(v) for v in seen) < 500, "rows of the failed task are visible"
    # Spark's batch read (read_uncommitted, like Spark's own source by
    # default) stops exactly at the end offsets, markers included in them.
    df = _read(spark, bs, subscribe=topic_name, startingOffsets="earliest")
    rows = df.select("partition", "offset").collect()
    assert len({(r.partition, r.offset) for r in rows}) == len(rows)
    assert all(r.offset < ends[fk.TopicPartition(topic_name, r.partition)] for r in rows)
    assert len(rows) >= 700
    # And with kafka.isolation.level=read_committed: the 700 committed rows,
    # planned up to the last stable offsets, the aborted ones skipped.
    rc = _read(spark, bs, subscribe=topic_name, startingOffsets="earliest",
               **{"kafka.isolation.level": "read_committed"})
    values = [int(r.value) for r in rc.selectExpr("CAST(value AS STRING) AS value").collect()]
    assert len(values) == 700 and max(values) < 500
