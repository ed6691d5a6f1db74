"""The `ferrokafka` Spark data source (batch and streaming, read and write)
and `produce()`. Everything here runs the ferrokafka client inside Spark's
Python workers: the driver plans offset ranges, each task reads its range
with `Consumer.poll_arrow` (Arrow batches built in Rust) or produces an
Arrow batch with `Producer.send_batch` (no Python object per row).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
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


def _consumer_config(cfg: Dict[str, str], **extra: Any) -> Dict[str, Any]:
    c: Dict[str, Any] = dict(cfg)
    # Ranges are read by position: no group, no commits, errors (not resets)
    # when a range start fell off the log. (The kafka.* options that would
    # change this are refused when the query is analysed: _options.py.)
    c.update(enable_auto_commit=False, auto_offset_reset="none")
    c.update(extra)
    return c


def _consumer(cfg: Dict[str, str], **extra: Any) -> fk.Consumer:
    return fk.Consumer(_consumer_config(cfg, **extra))


def check_client_options(cfg: Dict[str, str]) -> None:
    """The kafka.* options against the client's own option table, on the
    driver and without connecting, so a typo fails the query at analysis
    and not in the first task."""
    from .._config import CONSUMER

    CONSUMER.resolve(_consumer_config(cfg))


@dataclass(frozen=True)
class Retry:
    """fetchOffset.numRetries / fetchOffset.retryIntervalMs (docs/semantics.md
    §9.3): the driver's
    offset lookups are retried on a Kafka error, as Spark's
    KafkaOffsetReader does, before the query fails with the last error."""

    retries: int = 3
    interval_ms: int = 10

    def call(self, fn: Any, *args: Any) -> Any:
        for attempt in range(self.retries + 1):
            try:
                return fn(*args)
            except fk.KafkaError:
                if attempt == self.retries:
                    raise
                time.sleep(self.interval_ms / 1000)


def _topics(cfg: Dict[str, str]) -> Dict[str, int]:
    c = _consumer(cfg)
    try:
        return c.list_topics()
    finally:
        c.close()


def _planned_partitions(cfg: Dict[str, str], strategy: Tuple[str, object]) -> List[Tuple[str, int]]:
    """The partitions a query reads. A subscribed topic the cluster does
    not have is an error, as in Spark (its admin's describeTopics fails),
    never a plan with no partitions (docs/semantics.md §9.3); raised as a
    KafkaError so the driver's lookup retries cover a topic being made."""
    topics = _topics(cfg)
    kind, spec = strategy
    if kind == "subscribe":
        missing = sorted(t for t in spec if t not in topics)  # type: ignore[union-attr]
        if missing:
            raise fk.KafkaError(f"subscribed topic(s) not in the cluster: {', '.join(missing)} "
                                "(UNKNOWN_TOPIC_OR_PARTITION)")
    return _plan.topic_partitions(strategy, topics)


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


def _by_timestamp(cfg: Dict[str, str], stamps: Dict[Tuple[str, int], int]) -> Dict[Tuple[str, int], Optional[int]]:
    """{tp: the first offset at or after its timestamp, or None (no such record)}."""
    c = _consumer(cfg)
    try:
        r = c.offsets_for_times({fk.TopicPartition(t, p): ts for (t, p), ts in stamps.items()})
        return {(tp.topic, tp.partition): (o[0] if o else None) for tp, o in r.items()}
    finally:
        c.close()


def read_range(cfg: Dict[str, str], r: Range, include_headers: bool, fail_on_data_loss: bool,
               poll_timeout_ms: int = 120_000) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches
    (docs/semantics.md §9.2).

    Stops at ``end`` exactly, by position, not by counting records: under
    read_committed, aborted records and control markers leave gaps in the
    offsets, and the position still passes them. ``poll_timeout_ms``
    (kafkaConsumer.pollTimeoutMs) bounds how long the range may make no
    progress: a partition whose leader never answers fails the task
    instead of hanging it."""
    if r.end <= r.start:
        return
    c = _consumer(cfg)
    tp = fk.TopicPartition(r.topic, r.partition)
    try:
        c.assign([tp])
        c.seek(tp, r.start)
        last, since = r.start, time.monotonic()
        while True:
            try:
                b = c.poll_arrow(min(POLL_TIMEOUT_MS, poll_timeout_ms), max_records=100_000)
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
            pos = c.position(tp)
            if pos >= r.end:
                return
            if pos != last:
                last, since = pos, time.monotonic()
            elif (time.monotonic() - since) * 1000 >= poll_timeout_ms:
                raise fk.KafkaTimeoutError(
                    f"{r.topic}-{r.partition}: no progress at offset {pos} for {poll_timeout_ms} ms while "
                    f"reading up to {r.end} (kafkaConsumer.pollTimeoutMs)")
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
                  key: str = "key", value: str = "value", txn_prefix: Optional[str] = None) -> int:
    """Produce every row; raises the first delivery error (failing the task).
    With ``txn_prefix`` the task's rows go in one transaction (the option
    transactional.id.prefix): committed at the end, aborted on any error."""
    if txn_prefix is None:
        return _write(batches, _producer(cfg), topic, key, value)
    from pyspark import TaskContext

    ctx = TaskContext.get()
    tid = f"{txn_prefix}-{ctx.partitionId() if ctx is not None else 0}"
    p = _txn_producer(cfg, tid)
    p.begin_transaction()
    try:
        n = _write(batches, p, topic, key, value)
        p.commit_transaction(300)
        return n
    except BaseException:
        # Abort what the task wrote (a fatal error, e.g. fenced by a newer
        # attempt, cannot abort: that attempt's init already did).
        _discard_txn_producer(tid, p)
        raise


def _txn_producer(cfg: Dict[str, Any], tid: str) -> fk.Producer:
    """A transactional producer per transactional id and worker process,
    reused by the next task of the same partition (init_transactions once)."""
    cfg = dict(_with_bulk_defaults(cfg), transactional_id=tid)
    key = (os.getpid(), tuple(sorted((k, str(v)) for k, v in cfg.items())))
    with _LOCK:
        p = _PRODUCERS.get(key)
        if p is not None and p.transaction_state != "READY":
            _PRODUCERS.pop(key)
            p.close(0)
            p = None
        if p is None:
            p = fk.Producer(dict(cfg))
            p.init_transactions(60)
            _PRODUCERS[key] = p
        return p


def _discard_txn_producer(tid: str, p: fk.Producer) -> None:
    try:
        if p.transaction_state in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
            p.abort_transaction(60)
    except fk.KafkaError as e:
        logging.getLogger("ferrokafka.spark").warning("aborting transaction %s failed: %s", tid, e)
    with _LOCK:
        for k, v in list(_PRODUCERS.items()):
            if v is p:
                _PRODUCERS.pop(k)
    p.close(0)


def _write(batches: Iterator[pa.RecordBatch], p: fk.Producer, topic: Optional[str],
           key: str, value: str) -> int:
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
    def __init__(self, options: Dict[str, str], streaming: bool, what: str) -> None:
        _plan.check_options(options, _plan.SOURCE, streaming, what)
        self.options = options
        self.cfg = _plan.client_config(options)
        check_client_options(self.cfg)
        self.strategy = _plan.strategy(options)
        self.include_headers = _plan.parse_bool(options, "includeHeaders", False)
        self.fail_on_data_loss = _plan.parse_bool(options, "failOnDataLoss", True)
        self.min_partitions = _plan.parse_int(options, "minPartitions", None)
        self.max_records = _plan.parse_int(options, "maxRecordsPerPartition", None)
        self.poll_timeout_ms = _plan.parse_int(options, "kafkaConsumer.pollTimeoutMs", 120_000)
        self.retry = Retry(_plan.parse_int(options, "fetchOffset.numRetries", 3, minimum=0),
                           _plan.parse_int(options, "fetchOffset.retryIntervalMs", 10, minimum=0))
        self.ts_strategy = _plan.parse_choice(options, "startingOffsetsByTimestampStrategy",
                                              ("error", "latest"), "error")
        # Parse every offset option now (analysis), not at the first plan.
        o = _plan.lower(options)
        self.starting_ts = _plan.parse_int(options, "startingTimestamp", None, minimum=0)
        self.starting_by_ts = (_plan.parse_timestamps(o["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
                               if "startingoffsetsbytimestamp" in o else None)
        _plan.parse_offsets(o.get("startingoffsets"), "startingOffsets", LATEST, [])

    def _tps(self) -> List[Tuple[str, int]]:
        return self.retry.call(_planned_partitions, self.cfg, self.strategy)

    def _bounds(self, tps: List[Tuple[str, int]]) -> Tuple[Dict, Dict]:
        return self.retry.call(_bounds, self.cfg, tps)

    def _start(self, tps, lo, hi, default: int) -> Dict:
        """Starting offsets: startingTimestamp, else startingOffsetsByTimestamp
        (its partitions), else startingOffsets (Spark's precedence)."""
        o = _plan.lower(self.options)
        start = _plan.resolve(_plan.parse_offsets(o.get("startingoffsets"), "startingOffsets", default, tps), lo, hi)
        stamps: Dict[Tuple[str, int], int] = {}
        if self.starting_ts is not None:
            stamps = {tp: self.starting_ts for tp in tps}
        elif self.starting_by_ts is not None:
            stamps = {tp: ts for tp, ts in self.starting_by_ts.items() if tp in start}
        if stamps:
            found = self.retry.call(_by_timestamp, self.cfg, stamps)
            for tp, off in found.items():
                if off is None and self.ts_strategy == "error":
                    raise fk.KafkaError(
                        f"{tp[0]}-{tp[1]}: no record at or after timestamp {stamps[tp]} to start from "
                        "(set startingOffsetsByTimestampStrategy=latest to start at the end instead)")
                start[tp] = hi[tp] if off is None else off
        return start

    def _ranges(self, ranges: List[Range]) -> List[KafkaPartition]:
        return [KafkaPartition(r.topic, r.partition, r.start, r.end)
                for r in _plan.split_ranges(ranges, self.min_partitions, self.max_records)]

    def read(self, partition: KafkaPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaPartition):
            # Nothing to read: for an empty plan Spark still runs one task
            # with a bare InputPartition.
            return
        r = Range(partition.topic, partition.partition, partition.start, partition.end)
        yield from read_range(self.cfg, r, self.include_headers, self.fail_on_data_loss, self.poll_timeout_ms)


class KafkaBatchReader(_ReaderBase, DataSourceReader):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, False, "batch source")
        o = _plan.lower(options)
        self.ending_ts = _plan.parse_int(options, "endingTimestamp", None, minimum=0)
        self.ending_by_ts = (_plan.parse_timestamps(o["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp")
                             if "endingoffsetsbytimestamp" in o else None)
        _plan.parse_offsets(o.get("endingoffsets"), "endingOffsets", LATEST, [], allow_earliest=False)

    def _end(self, tps, lo, hi) -> Dict:
        """Ending offsets: endingTimestamp, else endingOffsetsByTimestamp (its
        partitions), else endingOffsets; a timestamp after every record ends
        at the end of the log."""
        o = _plan.lower(self.options)
        end = _plan.resolve(_plan.parse_offsets(o.get("endingoffsets"), "endingOffsets", LATEST, tps,
                                                allow_earliest=False), lo, hi)
        stamps: Dict[Tuple[str, int], int] = {}
        if self.ending_ts is not None:
            stamps = {tp: self.ending_ts for tp in tps}
        elif self.ending_by_ts is not None:
            stamps = {tp: ts for tp, ts in self.ending_by_ts.items() if tp in end}
        if stamps:
            for tp, off in self.retry.call(_by_timestamp, self.cfg, stamps).items():
                end[tp] = hi[tp] if off is None else off
        return end

    def partitions(self) -> List[KafkaPartition]:
        tps = self._tps()
        if not tps:
            return []
        lo, hi = self._bounds(tps)
        start = self._start(tps, lo, hi, EARLIEST)
        end = self._end(tps, lo, hi)
        ranges = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s < lo[tp]:
                if self.fail_on_data_loss:
                    raise fk.KafkaError(f"{tp[0]}-{tp[1]}: starting offset {s} is before the log start {lo[tp]} "
                                        "(data lost; set failOnDataLoss=false to skip it)")
                s = lo[tp]
            ranges.append(Range(tp[0], tp[1], s, e))
        return self._ranges(ranges)


class KafkaStreamReader(_ReaderBase, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, True, "streaming source")
        self.max_per_trigger = _plan.parse_int(options, "maxOffsetsPerTrigger", None)
        self.min_per_trigger = _plan.parse_int(options, "minOffsetsPerTrigger", None)
        self.max_trigger_delay_ms = _plan.parse_duration_ms(options, "maxTriggerDelay", 15 * 60_000)
        if self.min_per_trigger and self.max_per_trigger and self.min_per_trigger > self.max_per_trigger:
            raise ValueError(f"option 'minOffsetsPerTrigger' ({self.min_per_trigger}) is above "
                             f"'maxOffsetsPerTrigger' ({self.max_per_trigger})")
        self.lag_group = _plan.lower(options).get("commitoffsetstogroup")
        if self.lag_group is not None and not self.lag_group.strip():
            raise ValueError("option 'commitOffsetsToGroup' is empty: give the group id to commit to")
        # Trigger.AvailableNow: the end offsets when the query started; later
        # records wait for the next run (and still respect the read limit).
        self.target: Optional[Dict] = None
        # minOffsetsPerTrigger waits at most maxTriggerDelay since the last (§9.4)
        # micro-batch (or since the query started) before taking what there is.
        self.last_batch = time.monotonic()
        self.latest: Optional[Dict] = None
        self.published: Dict[Tuple[str, int], int] = {}

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._tps()
        _, hi = self._bounds(tps)
        self.target = dict(hi)

    def initialOffset(self) -> dict:
        tps = self._tps()
        lo, hi = self._bounds(tps)
        return _plan.offsets_json(self._start(tps, lo, hi, LATEST))

    def getDefaultReadLimit(self) -> Any:
        from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

        return ReadMaxRows(self.max_per_trigger) if self.max_per_trigger else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: Any) -> dict:
        self._publish(start)  # the end of the last completed micro-batch
        tps = self._tps()
        lo, hi = self._bounds(tps)
        self.latest = {tp: hi[tp] for tp in tps}
        begin = _plan.offsets_from_json(start)
        # partitions that appeared since the start read from their beginning
        for tp in tps:
            begin.setdefault(tp, lo[tp])
        rows = getattr(limit, "max_rows", None)
        top = {tp: hi[tp] for tp in tps}
        if self.target is not None:
            top = {tp: min(o, self.target.get(tp, begin[tp])) for tp, o in top.items()}
        elif self.min_per_trigger:
            waited_ms = (time.monotonic() - self.last_batch) * 1000
            if _plan.available(begin, top) < self.min_per_trigger and waited_ms < self.max_trigger_delay_ms:
                return start  # not enough yet: no micro-batch this trigger
        end = _plan.cap_ranges(begin, top, rows)
        if _plan.available(begin, end):
            self.last_batch = time.monotonic()
        return _plan.offsets_json(end)

    def reportLatestOffset(self) -> Optional[dict]:
        """The log end offsets seen by the last latestOffset: Spark shows them
        as the source's `latestOffset` in the query's progress, next to its
        `endOffset` (``offsets_behind_latest`` computes the lag from both)."""
        return None if self.latest is None else _plan.offsets_json(self.latest)

    def partitions(self, start: dict, end: dict) -> List[KafkaPartition]:
        s, e = _plan.offsets_from_json(start), _plan.offsets_from_json(end)
        return self._ranges([Range(t, p, s.get((t, p), 0), o) for (t, p), o in e.items()])

    def commit(self, end: dict) -> None:
        self._publish(end)

    def _publish(self, end: dict) -> None:
        """commitOffsetsToGroup (docs/semantics.md §9.5): publish processed offsets under that group
        for lag tools. Spark calls ``commit`` for a batch only once the
        *next* batch has data, so the last batch of a query would never be
        published; ``latestOffset``'s ``start`` is the end of the last
        completed batch, so it publishes that too. Offsets only move
        forward; never read back (the checkpoint drives planning); a failure
        is logged, not raised, so lag reporting cannot stop the query."""
        if self.lag_group is None:
            return
        new = {tp: o for tp, o in _plan.offsets_from_json(end).items() if self.published.get(tp, -1) < o}
        if not new:
            return
        offsets = {fk.TopicPartition(t, p): fk.OffsetAndMetadata(o) for (t, p), o in new.items()}
        try:
            c = _consumer(self.cfg, group_id=self.lag_group)
            try:
                c.commit(offsets)
            finally:
                c.close()
            self.published.update(new)
        except fk.KafkaError as e:
            logging.getLogger("ferrokafka.spark").warning(
                "commitOffsetsToGroup %r: committing %d offsets failed: %s", self.lag_group, len(offsets), e)


class _WriterBase:
    def __init__(self, options: Dict[str, str], streaming: bool, what: str) -> None:
        _plan.check_options(options, _plan.SINK, streaming, what)
        self.cfg = _plan.client_config(options)
        self.topic = _plan.lower(options).get("topic")
        o = _plan.lower(options)
        self.headers: Optional[bool] = (_plan.parse_bool(options, "includeHeaders", False)
                                        if "includeheaders" in o else None)
        self.txn_prefix = o.get("transactional.id.prefix")
        if any(k.lower().replace("_", ".") == "transactional.id" for k in self.cfg):
            raise ValueError("option 'kafka.transactional.id' is not supported by the ferrokafka "
                             f"{what}: tasks write concurrently and need an id each; set the option "
                             "transactional.id.prefix instead")
        if self.txn_prefix is not None and not self.txn_prefix.strip():
            raise ValueError("option 'transactional.id.prefix' must not be empty")
        # Validate the producer settings here, on the driver, so a typo fails
        # the query before any task starts.
        fk.Producer(dict(self.cfg)).close(0)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        n = write_batches(_headers_rule(iterator, self.headers), self.cfg, self.topic,
                          txn_prefix=self.txn_prefix)
        return KafkaCommitMessage(n)


def _headers_rule(batches: Iterator[pa.RecordBatch], include: Optional[bool]) -> Iterator[pa.RecordBatch]:
    """The sink's includeHeaders: unset writes a `headers` column when there
    is one (Spark's sink), false never writes headers, true requires the
    column."""
    for b in batches:
        has = "headers" in b.schema.names
        if include is False and has:
            b = b.drop_columns(["headers"])
        elif include is True and not has:
            raise ValueError(f"option includeHeaders=true but the DataFrame has no 'headers' column "
                             f"(columns: {b.schema.names})")
        yield b


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


class KafkaWriter(_WriterBase, DataSourceArrowWriter):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, False, "sink")


class KafkaStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    def __init__(self, options: Dict[str, str]) -> None:
        super().__init__(options, True, "streaming sink")

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
