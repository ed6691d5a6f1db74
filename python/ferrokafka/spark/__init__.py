"""ferrokafka for PySpark: a Kafka data source (format "ferrokafka": batch and
streaming reads and writes) and `produce()`, running the ferrokafka client
on the executors. No JVM Kafka jars. Needs pyspark >= 4.2 and pyarrow.

    fk.spark.register(spark)
    df = (spark.read.format("ferrokafka")
          .option("kafka.bootstrap.servers", bs).option("subscribe", "t").load())
"""

from __future__ import annotations

from typing import Any

__all__ = ["KafkaDataSource", "produce", "register"]

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
