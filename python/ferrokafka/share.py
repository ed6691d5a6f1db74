"""The share consumer (KIP-932 share groups; Java ``KafkaShareConsumer`` semantics).

Members of a share group read the same partitions; the broker hands each record
to one member at a time, under an acquisition lock, and the member acknowledges
it: ACCEPT (done), RELEASE (deliver it again, to anyone) or REJECT (never deliver
it again). A record whose lock runs out is delivered again too; every delivery
increments its ``delivery_count``. docs/semantics.md §11
gives the rules; a Rust thread runs the group membership (ShareGroupHeartbeat) and
one share session per leader (ShareFetch / ShareAcknowledge) without the GIL.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _core
from ._config import SHARE_CONSUMER
from ._core import Message, TopicPartition
from .errors import KafkaClosedError, KafkaError

__all__ = ["ShareConsumer", "ACK_TYPES"]

#: The acknowledgement types ``acknowledge`` takes.
ACK_TYPES = ("ACCEPT", "RELEASE", "REJECT")


class ShareConsumer:
    """Consume records as a member of a share group.

    ``ShareConsumer("host:9092", group_id="sg")``; options as for every client
    (keywords or a dict of Java / librdkafka names). ``share_acknowledgement_mode``:
    ``"implicit"`` (default) accepts every record a poll returned at the next
    poll or commit; ``"explicit"`` requires ``acknowledge()`` for each record
    before the next poll, which raises ``IllegalStateError`` otherwise.
    """

    def __init__(self, bootstrap_servers: Union[str, Sequence[str], Mapping[str, Any], None] = None,
                 **config: Any) -> None:
        if isinstance(bootstrap_servers, Mapping):
            cfg = dict(bootstrap_servers)
        else:
            cfg = {} if bootstrap_servers is None else {"bootstrap_servers": bootstrap_servers}
        self.config = SHARE_CONSUMER.resolve(cfg, **config)
        self._core: Optional[_core._ShareConsumer] = _core._ShareConsumer(dict(self.config))

    def _c(self) -> "_core._ShareConsumer":
        if self._core is None:
            raise KafkaClosedError("share consumer is closed")
        return self._core

    # --- subscription --------------------------------------------------------------------

    def subscribe(self, topics: Union[str, Sequence[str]]) -> None:
        """Join the share group for these topics (replacing the subscription)."""
        if isinstance(topics, str):
            topics = [topics]
        self._c().subscribe([str(t) for t in topics])

    def unsubscribe(self) -> None:
        """Leave the share group; acquired records not yet returned are released."""
        self._c().unsubscribe()

    def subscription(self) -> List[str]:
        return self._c().subscription()

    # --- records ---------------------------------------------------------------------------

    def poll(self, timeout_ms: int = 0, max_records: Optional[int] = None) -> List[Message]:
        """Up to ``max_records`` records (default ``max_poll_records``) acquired
        for this member, waiting up to ``timeout_ms`` for some. Each has
        ``delivery_count``. The previous poll's records are acknowledged first
        (implicit mode: accepted; explicit mode: as ``acknowledge`` said, and
        an unacknowledged one raises ``IllegalStateError``)."""
        n = self.config["max_poll_records"] if max_records is None else int(max_records)
        return self._c().poll(int(timeout_ms), max(1, n))

    def poll_arrow(self, timeout_ms: int = 0, max_records: Optional[int] = None) -> Any:
        """Like ``poll``, as one ``pyarrow.RecordBatch``: the consumer's columns
        (Spark's Kafka source: key, value, topic, partition, offset, timestamp,
        timestampType, headers) plus ``delivery_count`` (int16). Acknowledgement
        works as for ``poll``; in explicit mode ``acknowledge`` takes any object
        with ``topic``, ``partition`` and ``offset`` for a row."""
        import pyarrow as pa

        n = self.config["max_poll_records"] if max_records is None else int(max_records)
        batch, counts = self._c().poll_arrow(int(timeout_ms), max(1, n))
        return pa.record_batch(batch).append_column("delivery_count", pa.array(counts, type=pa.int16()))

    def acknowledge(self, record: Message, type: str = "ACCEPT") -> None:
        """Explicit mode: how the broker should treat ``record`` (a record the
        last poll returned): ``"ACCEPT"``, ``"RELEASE"`` (deliver again) or
        ``"REJECT"`` (never deliver again). Sent with the next poll or commit."""
        t = str(type).upper()
        if t not in ACK_TYPES:
            raise ValueError(f"invalid acknowledgement type {type!r}: expected one of {', '.join(ACK_TYPES)}")
        self._c().acknowledge(str(record.topic), int(record.partition), int(record.offset), t)

    def commit_sync(self, timeout_ms: Optional[int] = None) -> Dict[TopicPartition, Optional[KafkaError]]:
        """Send the acknowledgements decided so far (implicit mode: the last
        poll's records) and wait for the leaders' answers. Returns the outcome
        per partition (None = acknowledged). If any partition failed, its error
        is raised with the whole mapping as its ``results`` attribute."""
        t = self.config["default_api_timeout_ms"] if timeout_ms is None else int(timeout_ms)
        results: Dict[TopicPartition, Optional[KafkaError]] = dict(self._c().commit_sync(t))
        failed = [e for e in results.values() if e is not None]
        if failed:
            err = failed[0]
            err.results = results  # type: ignore[attr-defined]
            raise err
        return results

    def commit_async(self) -> None:
        """Send the acknowledgements decided so far without waiting; failures are logged
        (logger ``ferrokafka``)."""
        self._c().commit_async()

    def close(self, timeout_ms: Optional[int] = None) -> None:
        """Acknowledge what was decided (implicit mode: accept the last poll's
        records), release acquired records never returned, close the share
        sessions and leave the group, waiting up to ``timeout_ms`` (default
        ``default_api_timeout_ms``). Idempotent."""
        core, self._core = self._core, None
        if core is None:
            return
        t = self.config["default_api_timeout_ms"] if timeout_ms is None else int(timeout_ms)
        core.close(t)

    def __enter__(self) -> "ShareConsumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._core is None else "open"
        return f"ShareConsumer(group_id={self.config['group_id']!r}, {state})"

