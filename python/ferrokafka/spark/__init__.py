"""ferrokafka for PySpark: a Kafka data source (format "ferrokafka": batch and
streaming reads and writes) and `produce()`, running the ferrokafka client
on the executors. No JVM Kafka jars. Needs pyspark >= 4.2 and pyarrow.

    spark.dataSource.register(fk.spark.KafkaDataSource)
    df = (spark.read.format("ferrokafka")
          .option("kafka.bootstrap.servers", bs).option("subscribe", "t").load())
"""

from __future__ import annotations

from typing import Any

__all__ = ["KafkaDataSource", "produce"]


def __getattr__(name: str) -> Any:
    # pyspark is imported on first use only, so `import ferrokafka.spark`
    # works (and fails clearly) without it.
    if name in __all__:
        try:
            from . import _source
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError(f"ferrokafka.spark needs pyspark>=4.2 and pyarrow: {e}") from e
        return getattr(_source, name)
    raise AttributeError(f"module 'ferrokafka.spark' has no attribute {name!r}")
