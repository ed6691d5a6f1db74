"""``ferrokafka metadata``: the cluster as a client sees it: brokers, controller, and
per partition the leader, replicas and in-sync replicas."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import EXIT_FAILURE, EXIT_OK, add_common, cluster, note, options_of, print_json, table


def register(sub: Any) -> None:
    p = sub.add_parser("metadata", help="brokers, and each partition's leader, replicas, ISR")
    add_common(p)
    p.add_argument("--topic", "-t", action="append", metavar="T", help="only these topics (repeatable)")
    p.add_argument("--json", action="store_true", help="machine output")
    p.set_defaults(run=run)


def collect(c: Any, only: list[str] | None) -> dict:
    # What a client knows of the cluster (docs/semantics.md §1.1): the brokers, and per
    # partition its leader, epoch, replicas and ISR, from a fresh full Metadata answer.
    topics = c.list_topics()  # KafkaTimeoutError if no broker answers
    cl = c.metadata.fetch()
    controller = cl.controller
    names = sorted(topics) if not only else list(dict.fromkeys(only))
    out: dict[str, Any] = {
        "cluster_id": cl.cluster_id,
        "controller": None if controller is None else controller.id,
        "brokers": [{"id": n.id, "host": n.host, "port": n.port, "rack": n.rack}
                    for n in sorted(cl.nodes, key=lambda n: n.id)],
        "topics": [],
    }
    for name in names:
        if name not in topics:
            out["topics"].append({"name": name, "error": "does not exist", "partitions": []})
            continue
        parts = sorted(cl.partitions_for_topic(name), key=lambda p: p.partition)
        out["topics"].append({"name": name, "partitions": [
            {"partition": p.partition, "leader": p.leader_id, "leader_epoch": p.leader_epoch,
             "replicas": list(p.replicas), "isr": list(p.isr), "offline_replicas": list(p.offline_replicas),
             "error_code": p.error_code} for p in parts]})
    return out


def run(args: argparse.Namespace) -> int:
    opts = options_of(args, ("Consumer",))
    with cluster(args) as bs:
        import ferrokafka as fk

        with fk.Consumer(opts.config("Consumer", bs)) as c:
            md = collect(c, args.topic)
    missing = [t["name"] for t in md["topics"] if "error" in t]
    status = EXIT_FAILURE if missing else EXIT_OK
    if missing:
        note(f"topic(s) not in the cluster: {', '.join(missing)}")
    if args.json:
        print_json(md)
        return status
    print(f"Cluster: {md['cluster_id']}  Controller: {md['controller']}")
    print(table([[b["id"], f"{b['host']}:{b['port']}", b["rack"] or "-"] for b in md["brokers"]],
                ["BROKER", "ADDRESS", "RACK"]))
    rows = []
    for t in md["topics"]:
        if "error" in t:
            rows.append([t["name"], "-", "-", "-", "-", t["error"]])
        for p in t["partitions"]:
            rows.append([t["name"], p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]),
                         "" if not p["error_code"] else f"error {p['error_code']}"])
    print()
    print(table(rows, ["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", ""]))
    return status


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids)) or "-"
