"""The one table of the Spark source's and sink's options.

Every option of Spark 4.x's "Structured Streaming + Kafka Integration Guide"
is a row here, with what ferrokafka does with it: implemented with Spark's
meaning, or refused when the query is analysed, with why and what to use
instead. ``check_options`` (the only gate) and ``docs/spark.md``'s table
(``scripts/gen-spark-doc.py``) both read it, so the two cannot disagree.
No option is accepted and then ignored (docs/semantics.md §9.1).

Pure Python, no Spark import: planning code and its tests use it without a
Spark session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional

SOURCE = "source"
SINK = "sink"


@dataclass(frozen=True)
class SparkOption:
    name: str  # as Spark's guide spells it; options are case-insensitive
    where: str  # "source", "sink" or "source, sink"
    modes: str  # "batch", "streaming" or "batch, streaming"
    default: str
    meaning: str
    refused: Optional[str] = None  # why not, and what to use instead
    ours: bool = False  # a ferrokafka option, not Spark's

    def applies(self, where: str, streaming: bool) -> bool:
        return where in self.where and ("streaming" if streaming else "batch") in self.modes


_BOTH = "batch, streaming"
_NO_GROUP = ("ferrokafka's source reads planned offset ranges by position and never joins a consumer "
             "group, so there is no group id to name or authorize; to make the query's progress "
             "visible to lag tools use the option commitOffsetsToGroup")

OPTIONS: List[SparkOption] = [
    # --- which partitions ---------------------------------------------------------------
    SparkOption("assign", SOURCE, _BOTH, "", 'JSON `{"t": [0, 1]}`: these partitions (one of assign, '
                "subscribe, subscribePattern)"),
    SparkOption("subscribe", SOURCE, _BOTH, "", "comma-separated topics"),
    SparkOption("subscribePattern", SOURCE, _BOTH, "", "a Java-style regex: every topic it matches "
                "(new matching topics are picked up by streaming queries)"),
    SparkOption("kafka.bootstrap.servers", "source, sink", _BOTH, "", "brokers (required)"),
    # --- where to start and stop ----------------------------------------------------------
    SparkOption("startingTimestamp", SOURCE, _BOTH, "", "ms since the epoch: every partition starts "
                "at its first record at or after it (ListOffsets by time); takes precedence over "
                "startingOffsetsByTimestamp and startingOffsets"),
    SparkOption("startingOffsetsByTimestamp", SOURCE, _BOTH, "", 'JSON `{"t": {"0": 1700000000000}}`: a '
                "timestamp per partition; partitions left out start as startingOffsets says"),
    SparkOption("startingOffsetsByTimestampStrategy", SOURCE, _BOTH, "error", "when no record is at or "
                "after a starting timestamp: `error` fails the query, `latest` starts at the end"),
    SparkOption("startingOffsets", SOURCE, _BOTH, "batch `earliest`, streaming `latest`",
                '`earliest`, `latest` or JSON `{"t": {"0": 23, "1": -2}}` (-2 earliest, -1 latest); '
                "streaming: only for a new query (a checkpoint wins)"),
    SparkOption("endingTimestamp", SOURCE, "batch", "", "ms since the epoch: every partition ends at its "
                "first record at or after it (the end of the log if none)"),
    SparkOption("endingOffsetsByTimestamp", SOURCE, "batch", "", "JSON timestamp per partition for the "
                "end; partitions left out end as endingOffsets says"),
    SparkOption("endingOffsets", SOURCE, "batch", "latest", '`latest` or JSON `{"t": {"0": 23, "1": -1}}` '
                "(exclusive ends)"),
    SparkOption("failOnDataLoss", SOURCE, _BOTH, "true", "a planned offset no longer in the log (deleted "
                "by retention, topic recreated) fails the query; `false` skips to what is there"),
    # --- how the executors read -------------------------------------------------------------
    SparkOption("kafkaConsumer.pollTimeoutMs", SOURCE, _BOTH, "120000", "a task fails with "
                "KafkaTimeoutError when its range makes no progress for this long"),
    SparkOption("fetchOffset.numRetries", SOURCE, _BOTH, "3", "the driver's offset lookups (metadata, "
                "ListOffsets) are retried this many times on a Kafka error before the query fails"),
    SparkOption("fetchOffset.retryIntervalMs", SOURCE, _BOTH, "10", "ms between those retries"),
    SparkOption("minPartitions", SOURCE, _BOTH, "one task per partition", "split big ranges so there are "
                "at least this many tasks (in proportion to each range's size; parts tile a range exactly)"),
    SparkOption("maxRecordsPerPartition", SOURCE, _BOTH, "", "split ranges so no task reads more than this "
                "many offsets (applied after minPartitions)"),
    SparkOption("includeHeaders", "source, sink", _BOTH, "source `false`; sink: unset",
                "source: add the `headers` column; sink: `true` requires a `headers` column and writes "
                "it, `false` writes no headers even when the column is there, unset writes the column "
                "when there is one (Spark's sink rule)"),
    # --- how much per micro-batch ---------------------------------------------------------------
    SparkOption("maxOffsetsPerTrigger", SOURCE, "streaming", "", "at most this many offsets per "
                "micro-batch, shared in proportion to each partition's backlog"),
    SparkOption("minOffsetsPerTrigger", SOURCE, "streaming", "", "skip a trigger while fewer offsets than "
                "this are available, unless maxTriggerDelay has passed since the last batch (ignored by "
                "Trigger.AvailableNow, as Spark does, so it cannot wait forever)"),
    SparkOption("maxTriggerDelay", SOURCE, "streaming", "15m", "with minOffsetsPerTrigger: the longest a "
                "trigger waits for enough offsets (`500ms`, `30s`, `15m`, `1h`, or ms)"),
    # --- groups ------------------------------------------------------------------------------------
    SparkOption("groupIdPrefix", SOURCE, _BOTH, "", "", refused=_NO_GROUP),
    SparkOption("kafka.group.id", SOURCE, _BOTH, "", "", refused=_NO_GROUP),
    SparkOption("commitOffsetsToGroup", SOURCE, "streaming", "", "a group id: after each committed "
                "micro-batch the source commits its end offsets to Kafka under this group, so "
                "`ferrokafka groups`, Admin, confluent-kafka `committed()` and lag dashboards see the "
                "query; never read back for planning (the checkpoint is the truth)", ours=True),
    # --- sink ---------------------------------------------------------------------------------------
    SparkOption("topic", SINK, _BOTH, "", "the topic of rows without a `topic` column (a row's own "
                "`topic` wins)"),
    SparkOption("transactional.id.prefix", SINK, _BOTH, "", "opt-in transactional write: each task "
                "writes its rows in one Kafka transaction under the transactional id "
                "`<prefix>-<task partition>`, committed when the task's rows are all written and "
                "aborted when the task fails; a retried or speculative attempt takes the same id, "
                "which fences the earlier attempt and aborts its open transaction. So a failed and "
                "retried task leaves no duplicates visible to read_committed readers. Not atomic "
                "across tasks: a job that fails after some tasks committed leaves their rows "
                "visible, and a streaming micro-batch re-run after a driver failure writes its "
                "rows again (docs/spark.md)", ours=True),
]

# `kafka.*` options Spark itself forbids, with its reasons, refused the same way.
FORBIDDEN_CLIENT = {
    "auto.offset.reset": "set the option startingOffsets instead (ranges are planned by the driver)",
    "key.deserializer": "keys are always bytes; convert the `key` column with DataFrame functions "
                        "(e.g. `CAST(key AS STRING)`)",
    "value.deserializer": "values are always bytes; convert the `value` column with DataFrame functions "
                          "(e.g. `CAST(value AS STRING)`, `from_json`)",
    "key.serializer": "write a binary or string `key` column; convert it with DataFrame functions first",
    "value.serializer": "write a binary or string `value` column; convert it with DataFrame functions first",
    "enable.auto.commit": "the source never commits as a consumer; use commitOffsetsToGroup for lag "
                          "visibility",
    "interceptor.classes": "JVM interceptors cannot run in the Python client",
}

_BY_NAME: Dict[str, SparkOption] = {o.name.lower(): o for o in OPTIONS}
# Spark passes these to every data source itself.
_SPARK_INTERNAL = {"path", "checkpointlocation", "queryname"}


def check_options(options: Mapping[str, str], where: str, streaming: bool, what: str) -> None:
    """Refuse, with a ValueError naming it, every option the ``where`` side
    (``SOURCE``/``SINK``) in this mode does not implement."""
    for k in options:
        kl = k.lower()
        if kl in _SPARK_INTERNAL:
            continue
        opt = _BY_NAME.get(kl)
        if opt is None and kl.startswith("kafka."):
            bare = kl[len("kafka."):]
            if bare in FORBIDDEN_CLIENT:
                raise ValueError(f"option {k!r} is not supported by the ferrokafka {what} (nor by "
                                 f"Spark's Kafka connector): {FORBIDDEN_CLIENT[bare]}")
            continue  # any other client option: the client's own table checks it
        if opt is None:
            raise ValueError(f"unknown option {k!r} for the ferrokafka {what}; accepted: "
                             + ", ".join(o.name for o in accepted(where, streaming)) + ", kafka.*")
        # Spark lower-cases option names: say them as the guide spells them.
        name = opt.name
        if opt.refused:
            raise ValueError(f"option {name!r} is not supported by the ferrokafka {what}: {opt.refused}")
        if not opt.applies(where, streaming):
            if where not in opt.where:
                raise ValueError(f"option {name!r} is a {opt.where} option; it has no meaning for the "
                                 f"ferrokafka {what}")
            raise ValueError(f"option {name!r} is for {opt.modes} queries only; it has no meaning for the "
                             f"ferrokafka {what}")


def accepted(where: str, streaming: bool) -> Iterable[SparkOption]:
    return [o for o in OPTIONS if o.applies(where, streaming) and not o.refused]


def markdown() -> str:
    """docs/spark.md's option table (written by scripts/gen-spark-doc.py)."""
    rows = ["| option | source / sink | batch / streaming | default | ferrokafka |",
            "|---|---|---|---|---|"]
    for o in OPTIONS:
        what = f"**refused**: {o.refused}" if o.refused else o.meaning
        if o.ours:
            what = "*(ferrokafka's own)* " + what
        rows.append(f"| `{o.name}` | {o.where} | {o.modes} | {o.default} | {what} |")
    for k, why in FORBIDDEN_CLIENT.items():
        rows.append(f"| `kafka.{k}` | source, sink | {_BOTH} | | **refused** (Spark refuses it too): {why} |")
    rows.append(f"| `kafka.*` (others) | source, sink | {_BOTH} | | any client option by its Java / "
                "librdkafka name (`kafka.security.protocol`, `kafka.sasl.mechanism`, ...), checked "
                "against the client's option table when the query is analysed |")
    return "\n".join(rows) + "\n"
