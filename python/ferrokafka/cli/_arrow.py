"""Parquet and Arrow files for ``produce --parquet/--arrow`` and ``consume --output
parquet:FILE``: the optional ``arrow`` extra (pyarrow). Without pyarrow these fail
with a usage error saying how to get it, before any broker work."""

from __future__ import annotations

from typing import Any, Iterator

from ._common import Failure, UsageError, note


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise UsageError("Parquet/Arrow files need pyarrow: pip install 'ferrokafka[arrow]'") from None
    return pa


class TabularInput:
    """The ``key`` (optional) and ``value`` columns of a Parquet or Arrow file,
    batch by batch; other columns are named on stderr as not produced."""

    def __init__(self, path: str, kind: str) -> None:
        pa = _pyarrow()
        self.pa = pa
        self.path = path
        try:
            if kind == "parquet":
                import pyarrow.parquet as pq

                pf = pq.ParquetFile(path)
                schema = pf.schema_arrow
                self.num_rows = pf.metadata.num_rows
                self._batches = lambda cols: pf.iter_batches(columns=cols)
            else:
                import pyarrow.ipc as ipc

                table = self._read_ipc(ipc, path)
                schema = table.schema
                self.num_rows = table.num_rows
                self._batches = lambda cols: table.select(cols).to_batches()
        except (OSError, pa.ArrowException) as e:
            raise Failure(f"cannot read {path}: {e}") from None
        names = schema.names
        if "value" not in names:
            raise Failure(f"{path}: no 'value' column (columns: {', '.join(names)})")
        self.columns = ["key", "value"] if "key" in names else ["value"]
        for c in self.columns:
            t = schema.field(c).type
            if not (pa.types.is_binary(t) or pa.types.is_large_binary(t)
                    or pa.types.is_string(t) or pa.types.is_large_string(t)):
                raise Failure(f"{path}: column {c!r} has type {t}; expected binary or string")
        others = [n for n in names if n not in self.columns]
        if others:
            note(f"{path}: producing columns {', '.join(self.columns)}; not produced: {', '.join(others)}")

    @staticmethod
    def _read_ipc(ipc: Any, path: str) -> Any:
        try:
            with ipc.open_file(path) as r:
                return r.read_all()
        except Exception:  # not the file format: try the stream format
            with ipc.open_stream(path) as r:
                return r.read_all()

    def batches(self) -> Iterator[tuple[Any, Any, list]]:
        """(keys or None, values, size of each record in bytes)."""
        pc = __import__("pyarrow.compute", fromlist=["binary_length"])
        for b in self._batches(self.columns):
            values = b.column(b.schema.get_field_index("value"))
            keys = b.column(b.schema.get_field_index("key")) if "key" in self.columns else None
            sizes = pc.fill_null(pc.binary_length(values), 0)
            if keys is not None:
                sizes = pc.add(sizes, pc.fill_null(pc.binary_length(keys), 0))
            yield keys, values, sizes.to_pylist()


def open_input(parquet: str | None, arrow: str | None) -> TabularInput:
    return TabularInput(parquet, "parquet") if parquet else TabularInput(arrow, "arrow")  # type: ignore[arg-type]


class ParquetOutput:
    """Record batches from ``Consumer.poll_arrow`` into one Parquet file, with the
    columns of Spark's Kafka source (``ferrokafka.consumer.spark_schema``)."""

    def __init__(self, path: str) -> None:
        pa = _pyarrow()
        import pyarrow.parquet as pq

        from ..consumer import spark_schema

        self.pa = pa
        self.schema = spark_schema(pa)
        try:
            self.writer = pq.ParquetWriter(path, self.schema)
        except (OSError, pa.ArrowException) as e:
            raise Failure(f"cannot write {path}: {e}") from None

    def write(self, batch: Any) -> None:
        if batch.num_rows:
            self.writer.write_batch(self.pa.record_batch(batch) if not isinstance(batch, self.pa.RecordBatch) else batch)

    def close(self) -> None:
        self.writer.close()
