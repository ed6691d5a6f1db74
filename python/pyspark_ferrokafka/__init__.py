"""Spark's automatic registration of Python data sources (Spark >= 4.0).

When a session first resolves a data source, Spark imports every top-level
module whose name starts with ``pyspark_`` and registers its
``DefaultSource`` under ``DefaultSource.name()``. This module is that hook
for ferrokafka: with ferrokafka installed in the driver's Python,
``spark.read.format("ferrokafka")`` works with no ``fk.spark.register(spark)``
call. Without pyspark or pyarrow the import must not break Spark's lookup of
other sources, so nothing is offered then.
"""

try:
    from ferrokafka.spark._source import KafkaDataSource as DefaultSource
except ImportError:  # pragma: no cover - pyspark/pyarrow absent: nothing to register
    pass
else:
    __all__ = ["DefaultSource"]
