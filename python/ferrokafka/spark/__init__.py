"""ferrokafka for PySpark: a Kafka data source (format "ferrokafka": batch and
streaming reads and writes) and `produce()`, running the ferrokafka client
on the executors. No JVM Kafka jars. Needs pyspark >= 4.2 and pyarrow.

    fk.spark.register(spark)
    df = (spark.read.format("ferrokafka")
          .option("kafka.bootstrap.servers", bs).option("subscribe", "t").load())
"""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

__all__ = ["KafkaDataSource", "offsets_behind_latest", "produce", "register"]

#: The format name the source registers under. Spark 4.x refuses a Python data
#: source named "kafka" (DATA_SOURCE_ALREADY_EXISTS: the JVM connector's name is
#: taken even when its jars are absent), so ported code changes
#: `format("kafka")` to `format("ferrokafka")`; the options stay the same.
FORMAT = "ferrokafka"


def register(spark: Any) -> str:
    """Register the data source with `spark` (a SparkSession) and return its
    format name, "ferrokafka". Registering again is harmless."""
    from . import _source

    spark.dataSource.register(_source.KafkaDataSource)
    return FORMAT


def offsets_behind_latest(source_progress: Any) -> Dict[str, float]:
    """The JVM Kafka source's lag metrics, from one source's progress of a
    streaming query (``query.lastProgress["sources"][0]``, a
    ``SourceProgress``, or the dict form): ``minOffsetsBehindLatest``,
    ``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest`` over the
    partitions, comparing the micro-batch's ``endOffset`` with the log end
    the source reported as ``latestOffset``. (A Python data source cannot
    fill the progress' ``metrics`` map itself in Spark 4.x; this reads the
    same two offsets the JVM source computes them from.) Empty when the
    source did not report a latest offset yet."""

    def offsets(v: Any) -> Dict[Tuple[str, str], int]:
        if v is None:
            return {}
        if isinstance(v, str):
            v = json.loads(v)
        return {(t, p): int(o) for t, ps in v.items() for p, o in ps.items()}

    get = source_progress.get if isinstance(source_progress, dict) else (
        lambda k: getattr(source_progress, k, None))
    end, latest = offsets(get("endOffset")), offsets(get("latestOffset"))
    behind = [max(0, o - end.get(tp, 0)) for tp, o in latest.items()]
    if not behind:
        return {}
    return {"minOffsetsBehindLatest": float(min(behind)), "maxOffsetsBehindLatest": float(max(behind)),
            "avgOffsetsBehindLatest": sum(behind) / len(behind)}


def __getattr__(name: str) -> Any:
    # pyspark is imported on first use only, so `import ferrokafka.spark`
    # works (and fails clearly) without it.
    if name in ("KafkaDataSource", "produce"):
        try:
            from . import _source
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(f"ferrokafka.spark needs pyspark>=4.2 and pyarrow: {e}") from e
        return getattr(_source, name)
    raise AttributeError(f"module 'ferrokafka.spark' has no attribute {name!r}")
