"""``ferrokafka groups``: list (the default), describe (committed offsets, end offsets
and lag per partition), reset-offsets.

Lag is the log end offset (ListOffsets, from a group-less Consumer) minus the
group's committed offset (OffsetFetch, from the Admin). Members and their
assignments are not shown: the native Admin has no DescribeGroups yet.
"""

from __future__ import annotations

import argparse
from typing import Any

from ._common import (
    EXIT_OK,
    Failure,
    UsageError,
    action_command,
    action_common,
    cluster,
    note,
    options_of,
    print_json,
    table,
)

# Classic group states in which the group has members (Kafka's ConsumerGroupCommand
# refuses to reset offsets of such a group: members would overwrite them).
_ACTIVE = {"Stable", "PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}


def register(sub: Any) -> None:
    acts = action_command(sub, "groups", "list and describe consumer groups, reset their offsets",
                          "Without an action: list the consumer groups.",
                          "groups, protocol type and state (the default)", run_list)

    d = acts.add_parser("describe", help="committed offsets, end offsets and lag per partition")
    action_common(d)
    d.add_argument("group")
    d.set_defaults(run=run_describe)

    r = acts.add_parser("reset-offsets", help="set a group's committed offsets for a topic")
    action_common(r)
    r.add_argument("--group", "-g", required=True)
    r.add_argument("--topic", "-t", required=True)
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N", help="clamped to each partition's first..end range")
    r.add_argument("--dry-run", action="store_true", help="show the new offsets, change nothing")
    r.set_defaults(run=run_reset)


def run_list(args: argparse.Namespace) -> int:
    opts = options_of(args, ("Admin",))
    with cluster(args) as bs:
        import ferrokafka as fk

        with fk.Admin(opts.config("Admin", bs)) as a:
            groups = sorted(a.list_consumer_groups(), key=lambda g: g.group_id)
    if getattr(args, "json", False):
        print_json([{"group": g.group_id, "protocol_type": g.protocol_type, "state": g.state} for g in groups])
    else:
        print(table([[g.group_id, g.protocol_type or "-", g.state] for g in groups], ["GROUP", "PROTOCOL", "STATE"]))
    return EXIT_OK


def _state(a: Any, group: str) -> str | None:
    """The group's state from ListGroups; None when the group is not listed, or the
    broker does not answer ListGroups (librdkafka's mock cluster): then the broker's
    own check of the OffsetCommit is the only guard, and this says so."""
    from ..errors import UnsupportedVersionError

    try:
        listed = a.list_consumer_groups()
    except UnsupportedVersionError as e:
        note(f"the group's state is unknown: {e}")
        return None
    for g in listed:
        if g.group_id == group:
            return g.state
    return None


def describe(fk: Any, a: Any, c: Any, group: str) -> dict:
    state = _state(a, group)
    committed = a.list_consumer_group_offsets(group)
    if state is None and not committed:
        raise Failure(f"group {group!r} does not exist (no members, no committed offsets)")
    tps = sorted(committed)
    ends = c.end_offsets(tps) if tps else {}
    rows = []
    for tp in tps:
        cur, end = committed[tp], ends.get(tp)
        lag = None if cur is None or cur < 0 or end is None else max(0, end - cur)
        rows.append({"topic": tp.topic, "partition": tp.partition, "committed_offset": cur,
                     "end_offset": end, "lag": lag})
    total = sum(r["lag"] for r in rows if r["lag"] is not None)
    return {"group": group, "state": state, "partitions": rows, "total_lag": total}


def run_describe(args: argparse.Namespace) -> int:
    opts = options_of(args, ("Admin", "Consumer"))
    with cluster(args) as bs:
        import ferrokafka as fk

        with fk.Admin(opts.config("Admin", bs)) as a, fk.Consumer(opts.config("Consumer", bs)) as c:
            d = describe(fk, a, c, args.group)
    if getattr(args, "json", False):
        print_json(d)
        return EXIT_OK
    print(f"Group: {d['group']}  State: {d['state'] or 'unknown'}  Total lag: {d['total_lag']}")
    print(table([[r["topic"], r["partition"], r["committed_offset"], r["end_offset"],
                  "-" if r["lag"] is None else r["lag"]] for r in d["partitions"]],
                ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]))
    return EXIT_OK


def run_reset(args: argparse.Namespace) -> int:
    if args.to_offset is not None and args.to_offset < 0:
        raise UsageError(f"invalid --to-offset {args.to_offset}: must be >= 0")
    opts = options_of(args, ("Admin", "Consumer"))
    with cluster(args) as bs:
        import ferrokafka as fk

        with fk.Admin(opts.config("Admin", bs)) as a, fk.Consumer(opts.config("Consumer", bs)) as c:
            state = _state(a, args.group)
            if state in _ACTIVE:
                raise Failure(f"group {args.group!r} is {state}: stop its consumers before resetting its offsets")
            count = c.list_topics().get(args.topic)
            if count is None:
                raise Failure(f"topic {args.topic!r} does not exist")
            tps = [fk.TopicPartition(args.topic, p) for p in range(count)]
            first, end = c.beginning_offsets(tps), c.end_offsets(tps)
            current = a.list_consumer_group_offsets(args.group)
            new = {}
            for tp in tps:
                if args.to_earliest:
                    new[tp] = first[tp]
                elif args.to_latest:
                    new[tp] = end[tp]
                else:
                    new[tp] = min(max(args.to_offset, first[tp]), end[tp])
            if not args.dry_run:
                # Committed through the group's coordinator; an unreachable one is
                # looked up again until --timeout, then a timeout error (docs/semantics.md §2.3).
                with fk.Consumer(opts.config("Consumer", bs, group_id=args.group, enable_auto_commit=False)) as g:
                    g.commit(new)
    rows = [{"topic": tp.topic, "partition": tp.partition, "current_offset": current.get(tp),
             "new_offset": off} for tp, off in new.items()]
    if getattr(args, "json", False):
        print_json({"group": args.group, "dry_run": args.dry_run, "partitions": rows})
    else:
        print(table([[r["topic"], r["partition"], "-" if r["current_offset"] is None else r["current_offset"],
                      r["new_offset"]] for r in rows], ["TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"]))
    note(f"dry run: offsets of group {args.group!r} not changed" if args.dry_run
         else f"committed the new offsets of group {args.group!r}")
    return EXIT_OK
