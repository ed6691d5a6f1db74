"""``ferrokafka topics``: list (the default), describe, create, delete.

``alter`` (more partitions) is refused with a clear error: the native Admin has
no CreatePartitions call yet, and a CLI that said "done" without it would lie.
"""

from __future__ import annotations

import argparse
import difflib
from typing import Any

from ._common import (
    EXIT_FAILURE,
    EXIT_OK,
    Failure,
    UsageError,
    action_command,
    action_common,
    cluster,
    note,
    options_of,
    parse_pairs,
    print_json,
    table,
)

# Kafka's topic-level configs (TopicConfig, Kafka 4.x). Tansu, the embedded broker,
# accepts any name and ignores the ones it does not know, so a misspelt config would
# be silently dropped: names are checked here, values by the broker.
TOPIC_CONFIGS = frozenset("""
cleanup.policy compression.type compression.gzip.level compression.lz4.level
compression.zstd.level delete.retention.ms file.delete.delay.ms flush.messages flush.ms
follower.replication.throttled.replicas index.interval.bytes
leader.replication.throttled.replicas local.retention.bytes local.retention.ms
max.compaction.lag.ms max.message.bytes message.downconversion.enable
message.format.version message.timestamp.after.max.ms message.timestamp.before.max.ms
message.timestamp.difference.max.ms message.timestamp.type min.cleanable.dirty.ratio
min.compaction.lag.ms min.insync.replicas preallocate remote.log.copy.disable
remote.log.delete.on.disable remote.storage.enable retention.bytes retention.ms
segment.bytes segment.index.bytes segment.jitter.ms segment.ms
unclean.leader.election.enable
""".split())


def check_topic_config(pairs: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in pairs:
        if name not in TOPIC_CONFIGS:
            close = difflib.get_close_matches(name, sorted(TOPIC_CONFIGS), n=2)
            hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise UsageError(f"unknown topic config {name!r}.{hint} Known: {', '.join(sorted(TOPIC_CONFIGS))}")
        if name in out:
            raise UsageError(f"topic config {name!r} given twice")
        out[name] = value
    return out


def register(sub: Any) -> None:
    acts = action_command(sub, "topics", "list, describe, create, delete topics",
                          "Without an action: list the topics and their partition counts.",
                          "topics and partition counts (the default)", run_list)

    d = acts.add_parser("describe", help="partitions: leader, replicas, ISR, offsets")
    action_common(d)
    d.add_argument("name")
    d.set_defaults(run=run_describe)

    c = acts.add_parser("create", help="create a topic")
    action_common(c)
    c.add_argument("name")
    c.add_argument("--partitions", type=int, default=-1, metavar="N", help="default: the broker's")
    c.add_argument("--replication-factor", type=int, default=-1, metavar="R", help="default: the broker's")
    c.add_argument("--config", action="append", metavar="K=V", help="a Kafka topic config, e.g. retention.ms=60000 (repeatable)")
    c.add_argument("--if-not-exists", action="store_true", help="an existing topic is not an error")
    c.set_defaults(run=run_create)

    x = acts.add_parser("delete", help="delete a topic")
    action_common(x)
    x.add_argument("name")
    x.add_argument("--if-exists", action="store_true", help="a missing topic is not an error")
    x.set_defaults(run=run_delete)

    a = acts.add_parser("alter", help="add partitions (not available yet: see docs/cli.md)")
    action_common(a)
    a.add_argument("name")
    a.add_argument("--partitions", type=int, required=True, metavar="N")
    a.set_defaults(run=run_alter)


def _admin(args: argparse.Namespace, bs: str) -> Any:
    import ferrokafka as fk

    return fk.Admin(options_of(args, ("Admin",)).config("Admin", bs))


def run_list(args: argparse.Namespace) -> int:
    options_of(args, ("Admin",))  # -X checked before a broker is started
    with cluster(args) as bs, _admin(args, bs) as a:
        topics = a.list_topics()
    if getattr(args, "json", False):
        print_json([{"name": t, "partitions": n} for t, n in sorted(topics.items())])
    else:
        print(table([[t, n] for t, n in sorted(topics.items())], ["TOPIC", "PARTITIONS"]))
    return EXIT_OK


def describe_topic(fk: Any, c: Any, name: str) -> list[dict]:
    """Per partition: leader, replicas, ISR, first and end offsets, from the
    consumer's metadata and ListOffsets."""
    topics = c.list_topics()
    if name not in topics:
        raise Failure(f"topic {name!r} does not exist")
    cl = c.metadata.fetch()
    parts = sorted(cl.partitions_for_topic(name), key=lambda p: p.partition)
    tps = [fk.TopicPartition(name, p.partition) for p in parts]
    first, end = c.beginning_offsets(tps), c.end_offsets(tps)
    return [{"partition": p.partition, "leader": p.leader_id, "replicas": list(p.replicas),
             "isr": list(p.isr), "offline_replicas": list(p.offline_replicas),
             "first_offset": first[tp], "end_offset": end[tp]} for p, tp in zip(parts, tps)]


def run_describe(args: argparse.Namespace) -> int:
    opts = options_of(args, ("Consumer",))
    with cluster(args) as bs:
        import ferrokafka as fk

        with fk.Consumer(opts.config("Consumer", bs)) as c:
            parts = describe_topic(fk, c, args.name)
    if getattr(args, "json", False):
        print_json({"name": args.name, "partitions": parts})
        return EXIT_OK
    print(f"Topic: {args.name}  Partitions: {len(parts)}")
    print(table([[p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]), p["first_offset"],
                  p["end_offset"]] for p in parts],
                ["PARTITION", "LEADER", "REPLICAS", "ISR", "FIRST-OFFSET", "END-OFFSET"]))
    return EXIT_OK


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids)) or "-"


def run_create(args: argparse.Namespace) -> int:
    import ferrokafka as fk

    config = check_topic_config(parse_pairs(args.config, "--config"))
    try:
        spec = fk.NewTopic(args.name, args.partitions, args.replication_factor, config or None)
    except ValueError as e:
        raise UsageError(str(e)) from None
    options_of(args, ("Admin",))
    with cluster(args) as bs, _admin(args, bs) as a:
        err = a.create_topics([spec], timeout_ms=int(args.timeout * 1000), raise_on_error=False)[args.name]
    if err is not None:
        if args.if_not_exists and isinstance(err, fk.errors.for_name("TOPIC_ALREADY_EXISTS")):
            note(f"topic {args.name!r} already exists")
            return EXIT_OK
        raise err
    note(f"created topic {args.name!r}")
    return EXIT_OK


def run_delete(args: argparse.Namespace) -> int:
    import ferrokafka as fk

    options_of(args, ("Admin",))
    with cluster(args) as bs, _admin(args, bs) as a:
        err = a.delete_topics([args.name], timeout_ms=int(args.timeout * 1000), raise_on_error=False)[args.name]
    if err is not None:
        if args.if_exists and isinstance(err, fk.errors.for_name("UNKNOWN_TOPIC_OR_PARTITION")):
            note(f"topic {args.name!r} does not exist")
            return EXIT_OK
        raise err
    note(f"deleted topic {args.name!r}")
    return EXIT_OK


def run_alter(args: argparse.Namespace) -> int:
    # Needs CreatePartitions (API key 37) in the native Admin; refused rather
    # than faked with a delete-and-recreate that would lose the data.
    note(f"{args.name}: adding partitions needs CreatePartitions, which ferrokafka's Admin "
         "does not offer yet; use the broker's own tools (kafka-topics.sh --alter)")
    return EXIT_FAILURE
