"""The `ferrokafka` Spark data source (batch and streaming, read and write)
and `produce()`. Everything here runs the ferrokafka client inside Spark's
Python workers: the driver plans offset ranges, each task reads its range
with `Consumer.poll_arrow` (Arrow batches built in Rust) or produces an
Arrow batch with `Producer.send_batch` (no Python object per row).
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

import ferrokafka as fk

from . import _plan
from ._plan import EARLIEST, LATEST, Range

POLL_TIMEOUT_MS = 1000


def _schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema, derived from the Arrow schema the Rust
    core builds ``poll_arrow`` batches with (one definition of the columns)."""
    arrow = fk.consumer.spark_schema(pa)
    if not include_headers:
        arrow = arrow.remove(arrow.get_field_index("headers"))
    return from_arrow_schema(arrow)


@dataclass(frozen=True)
class KafkaPartition(InputPartition):
    topic: str
    partition: int
    start: int
    end: int


# ----- client helpers ---------------------------------------------------------------


def _consumer(cfg: Dict[str, str]) -> fk.Consumer:
    c = dict(cfg)
    # Ranges are read by position: no group, no commits, errors (not resets)
    # when a range start fell off the log.
    for k in ("group.id", "enable.auto.commit", "auto.offset.reset"):
        c.pop(k, None)
    return fk.Consumer(c, enable_auto_commit=False, auto_offset_reset="none")


def _topics(cfg: Dict[str, str]) -> Dict[str, int]:
    c = _consumer(cfg)
    try:
        return c.list_topics()
    finally:
        c.close()


def _bounds(cfg: Dict[str, str], tps: List[Tuple[str, int]]) -> Tuple[Dict, Dict]:
    c = _consumer(cfg)
    try:
        ftps = [fk.TopicPartition(t, p) for t, p in tps]
        lo = c.beginning_offsets(ftps)
        hi = c.end_offsets(ftps)
        return ({(tp.topic, tp.partition): o for tp, o in lo.items()},
                {(tp.topic, tp.partition): o for tp, o in hi.items()})
    finally:
        c.close()


def _by_timestamp(cfg: Dict[str, str], tps: List[Tuple[str, int]], ts: int, fallback: Dict) -> Dict:
    c = _consumer(cfg)
    try:
        r = c.offsets_for_times({fk.TopicPartition(t, p): ts for t, p in tps})
        return {(tp.topic, tp.partition): (o[0] if o else fallback[(tp.topic, tp.partition)]) for tp, o in r.items()}
    finally:
        c.close()


def read_range(cfg: Dict[str, str], r: Range, include_headers: bool, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches."""
    if r.end <= r.start:
        return
    c = _consumer(cfg)
    tp = fk.TopicPartition(r.topic, r.partition)
    try:
        c.assign([tp])
        c.seek(tp, r.start)
        while True:
            try:
                b = c.poll_arrow(POLL_TIMEOUT_MS, max_records=100_000)
            except fk.KafkaError as e:
                if getattr(e, "code", None) == 1 and not fail_on_data_loss:  # OFFSET_OUT_OF_RANGE
                    c.seek_to_beginning([tp])
                    continue
                raise
            if b.num_rows:
                offsets = b.column("offset")
                if offsets[b.num_rows - 1].as_py() >= r.end:
                    k = int(pc.sum(pc.less(offsets, r.end)).as_py() or 0)
                    b = b.slice(0, k)
                if not include_headers:
                    b = b.drop_columns(["headers"])
                if b.num_rows:
                    yield b
            if c.position(tp) >= r.end:
                return
    finally:
        c.close()


# Producers are reused by every task of an executor's Python worker, per
# config; a forked worker (Spark forks them) must not reuse its parent's.
_PRODUCERS: Dict[Tuple[int, Tuple], fk.Producer] = {}
_LOCK = threading.Lock()


# Bulk writes, not latency: bigger batches than the client's 16 KB default
# (librdkafka batches up to 1 MB), unless the job says otherwise.
_BULK_DEFAULTS = {"batch.size": 524_288, "linger.ms": 10}


def _with_bulk_defaults(cfg: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(cfg)
    given = {k.replace("_", ".").lower() for k in cfg}
    for k, v in _BULK_DEFAULTS.items():
        if k not in given:
            out[k] = v
    return out


def _producer(cfg: Dict[str, Any]) -> fk.Producer:
    cfg = _with_bulk_defaults(cfg)
    key = (os.getpid(), tuple(sorted((k, str(v)) for k, v in cfg.items())))
    with _LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            p = _PRODUCERS[key] = fk.Producer(dict(cfg))
        return p


@atexit.register
def _close_producers() -> None:
    for (pid, _), p in list(_PRODUCERS.items()):
        if pid == os.getpid():
            try:
                p.close(10)
            except Exception:
                pass


def _column(batch: pa.RecordBatch, name: str) -> Optional[pa.Array]:
    i = batch.schema.get_field_index(name)
    return None if i < 0 else batch.column(i)


def _check_types(batch: pa.RecordBatch, topic: Optional[str]) -> None:
    names = batch.schema.names
    if "value" not in names:
        raise ValueError(f"the DataFrame has no 'value' column (columns: {names})")
    for col in ("key", "value"):
        if col in names and not (pa.types.is_binary(batch.schema.field(col).type)
                                 or pa.types.is_string(batch.schema.field(col).type)
                                 or pa.types.is_large_binary(batch.schema.field(col).type)
                                 or pa.types.is_large_string(batch.schema.field(col).type)):
            raise ValueError(f"column {col!r} must be binary or string, not {batch.schema.field(col).type}")
    if topic is None and "topic" not in names:
        raise ValueError("no topic: set the option 'topic' or add a 'topic' column")


def write_batches(batches: Iterator[pa.RecordBatch], cfg: Dict[str, Any], topic: Optional[str],
                  key: str = "key", value: str = "value") -> int:
    """Produce every row; raises the first delivery error (failing the task)."""
    p = _producer(cfg)
    pending = []
    n = 0
    for b in batches:
        if value != "value" or key != "key":
            cols = {"value": _column(b, value)}
            if _column(b, key) is not None:
                cols["key"] = _column(b, key)
            for extra in ("topic", "partition", "headers"):
                if _column(b, extra) is not None:
                    cols[extra] = _column(b, extra)
            if cols["value"] is None:
                raise ValueError(f"the DataFrame has no {value!r} column (columns: {b.schema.names})")
            b = pa.RecordBatch.from_pydict(cols)
        _check_types(b, topic)
        if b.num_rows == 0:
            continue
        keys, values = _column(b, "key"), _column(b, "value")
        topics, parts, headers = _column(b, "topic"), _column(b, "partition"), _column(b, "headers")
        n += b.num_rows
        if topics is None and parts is None and headers is None:
            # The fast path: whole columns, read in Rust from the Arrow buffers.
            pending.append(p.send_batch(topic, values, keys=keys))
            continue
        # Per-row topic, partition or headers: one send per row.
        tl = topics.to_pylist() if topics is not None else None
        pl = parts.to_pylist() if parts is not None else None
        hl = headers.to_pylist() if headers is not None else None
        kl = keys.to_pylist() if keys is not None else None
        vl = values.to_pylist()
        for i in range(b.num_rows):
            t = (tl[i] if tl is not None and tl[i] is not None else topic)
            if t is None:
                raise ValueError(f"row {i}: null topic and no option 'topic'")
            k, v = (kl[i] if kl is not None else None), vl[i]
            hs = [(h["key"], h["value"]) for h in hl[i]] if hl is not None and hl[i] else None
            pending.append(p.send(t, value=v.encode() if isinstance(v, str) else v,
                                  key=k.encode() if isinstance(k, str) else k,
                                  partition=pl[i] if pl is not None else None, headers=hs))
    left = p.flush(300)
    if left:
        raise fk.KafkaTimeoutError(f"{left} records not delivered within 300 s")
    for f in pending:
        e = f.exception(0)
        if e is not None:
            raise e
    return n


# ----- the data source --------------------------------------------------------------------


class KafkaDataSource(DataSource):
    """`spark.read.format("ferrokafka")`, `readStream`, `write`, `writeStream`:
    Spark's Kafka source options and schema (see docs/spark.md)."""

    @classmethod
    def name(cls) -> str:
        return "ferrokafka"

    def _include_headers(self) -> bool:
        return _plan.parse_bool(self.options, "includeHeaders", False)

    def schema(self) -> StructType:
        return _schema(self._include_headers())

    def reader(self, schema: Any) -> "KafkaBatchReader":
        return KafkaBatchReader(dict(self.options))

    def streamReader(self, schema: Any) -> "KafkaStreamReader":
        return KafkaStreamReader(dict(self.options))

    def writer(self, schema: Any, overwrite: bool) -> "KafkaWriter":
        return KafkaWriter(dict(self.options))

    def streamWriter(self, schema: Any, overwrite: bool) -> "KafkaStreamWriter":
        return KafkaStreamWriter(dict(self.options))


class _ReaderBase:
    def __init__(self, options: Dict[str, str], what: str) -> None:
        _plan.check_options(options, _plan.SOURCE_OPTIONS, what)
        self.options = options
        self.cfg = _plan.client_config(options)
        self.strategy = _plan.strategy(options)
        self.include_headers = _plan.parse_bool(options, "includeHeaders", False)
        self.fail_on_data_loss = _plan.parse_bool(options, "failOnDataLoss", True)
        self.min_partitions = _plan.parse_int(options, "minPartitions", None)

    def _tps(self) -> List[Tuple[str, int]]:
        return _plan.topic_partitions(self.strategy, _topics(self.cfg))

    def _start(self, tps, lo, hi, default: int) -> Dict:
        o = _plan.lower(self.options)
        if "startingtimestamp" in o:
            ts = _plan.parse_int(self.options, "startingTimestamp", None, minimum=0)
            return _by_timestamp(self.cfg, tps, ts, hi)
        spec = _plan.parse_offsets(o.get("startingoffsets"), "startingOffsets", default, tps)
        return _plan.resolve(spec, lo, hi)

    def read(self, partition: KafkaPartition) -> Iterator[pa.RecordBatch]:
        r = Range(partition.topic, partition.partition, partition.start, partition.end)
        yield from read_range(self.cfg, r, self.include_headers, self.fail_on_data_loss)


class KafkaBatchReader(_ReaderBase, DataSourceReader):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, "batch source")
        if "maxoffsetspertrigger" in _plan.lower(options):
            raise ValueError("option 'maxOffsetsPerTrigger' is for streaming reads only")

    def partitions(self) -> List[KafkaPartition]:
        tps = self._tps()
        if not tps:
            return []
        lo, hi = _bounds(self.cfg, tps)
        start = self._start(tps, lo, hi, EARLIEST)
        o = _plan.lower(self.options)
        end = _plan.resolve(_plan.parse_offsets(o.get("endingoffsets"), "endingOffsets", LATEST, tps,
                                                allow_earliest=False), lo, hi)
        ranges = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s < lo[tp]:
                if self.fail_on_data_loss:
                    raise fk.KafkaError(f"{tp[0]}-{tp[1]}: starting offset {s} is before the log start {lo[tp]} "
                                        "(data lost; set failOnDataLoss=false to skip it)")
                s = lo[tp]
            ranges.append(Range(tp[0], tp[1], s, e))
        return [KafkaPartition(r.topic, r.partition, r.start, r.end)
                for r in _plan.split_ranges(ranges, self.min_partitions)]


class KafkaStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, "streaming source")
        if "endingoffsets" in _plan.lower(options):
            raise ValueError("option 'endingOffsets' is for batch reads only")
        self.max_per_trigger = _plan.parse_int(options, "maxOffsetsPerTrigger", None)
        # Trigger.AvailableNow: the end offsets when the query started; later
        # records wait for the next run (and still respect the read limit).
        self.target: Optional[Dict] = None

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._tps()
        _, hi = _bounds(self.cfg, tps)
        self.target = dict(hi)

    def initialOffset(self) -> dict:
        tps = self._tps()
        lo, hi = _bounds(self.cfg, tps)
        return _plan.offsets_json(self._start(tps, lo, hi, LATEST))

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: Any) -> dict:
        tps = self._tps()
        lo, hi = _bounds(self.cfg, tps)
        begin = _plan.offsets_from_json(start)
        # partitions that appeared since the start read from their beginning
        for tp in tps:
            begin.setdefault(tp, lo[tp])
        rows = getattr(limit, "max_rows", None)
        top = {tp: hi[tp] for tp in tps}
        if self.target is not None:
            top = {tp: min(o, self.target.get(tp, begin[tp])) for tp, o in top.items()}
        end = _plan.cap_ranges(begin, top, rows)
        return _plan.offsets_json(end)

    def partitions(self, start: dict, end: dict) -> List[KafkaPartition]:
        s, e = _plan.offsets_from_json(start), _plan.offsets_from_json(end)
        ranges = [Range(t, p, s.get((t, p), 0), o) for (t, p), o in e.items()]
        return [KafkaPartition(r.topic, r.partition, r.start, r.end)
                for r in _plan.split_ranges(ranges, self.min_partitions)]

    def commit(self, end: dict) -> None:
        pass


class _WriterBase:
    def __init__(self, options: Dict[str, str], what: str) -> None:
        _plan.check_options(options, _plan.SINK_OPTIONS, what)
        self.cfg = _plan.client_config(options)
        self.topic = _plan.lower(options).get("topic")
        # Validate the producer settings here, on the driver, so a typo fails
        # the query before any task starts.
        fk.Producer(dict(self.cfg)).close(0)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        n = write_batches(iterator, self.cfg, self.topic)
        return KafkaCommitMessage(n)


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


class KafkaWriter(_WriterBase, DataSourceArrowWriter):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, "sink")


class KafkaStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, "streaming sink")

    def commit(self, messages: list, batchId: int) -> None:
        pass

    def abort(self, messages: list, batchId: int) -> None:
        pass


# ----- produce() ---------------------------------------------------------------------------


def produce(df: Any, topic: str, bootstrap_servers: str, key: Optional[str] = "key", value: str = "value",
            **producer_config: Any) -> Any:
    """Produce `df` to `topic` from the executors (mapInArrow: the Arrow
    batch goes to `Producer.send_batch` as is). Returns a DataFrame of
    (task, records, errors, error) per task; call `.collect()` to run it."""
    cols = df.columns
    if value not in cols:
        raise ValueError(f"the DataFrame has no {value!r} column (columns: {cols})")
    if key is not None and key not in cols:
        raise ValueError(f"the DataFrame has no {key!r} column (columns: {cols}); pass key=None for unkeyed records")
    cfg = dict(producer_config)
    cfg["bootstrap_servers"] = bootstrap_servers
    fk.Producer(dict(cfg)).close(0)  # validate options on the driver
    selected = df.select(*([key] if key else []), value)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task = ctx.partitionId() if ctx else -1
        try:
            n = write_batches(batches, cfg, topic, key=key or "__no_key__", value=value)
            out = {"task": [task], "records": [n], "errors": [0], "error": [None]}
        except fk.KafkaError as e:
            out = {"task": [task], "records": [0], "errors": [1], "error": [f"{type(e).__name__}: {e}"]}
        yield pa.RecordBatch.from_pydict(out, schema=pa.schema([
            ("task", pa.int32()), ("records", pa.int64()), ("errors", pa.int64()), ("error", pa.string())]))

    return selected.mapInArrow(run, "task int, records long, errors long, error string")
