"""Cost of metadata lookups through the Rust snapshot vs a pure-Python dict.

    python benches/bench_metadata.py [topics] [partitions]

Prints ns per operation for: fetch(), Cluster.leader_for(TopicPartition),
leader_for((topic, partition)), leader_epoch_for, and the same leader lookup
in a dict {(topic, partition): Node} built from the snapshot (the floor a
Python-side cache could reach), plus update() of a whole answer.
"""

from __future__ import annotations

import sys
import time

import ferrokafka as fk

T = 1_700_000_000_000


def build(n_topics: int, n_parts: int) -> fk.MetadataResponse:
    brokers = [fk.Node(i, f"b{i}", 9092) for i in range(6)]
    topics = [
        fk.TopicMetadata(f"topic-{t}", [fk.PartitionMetadata(p, (t + p) % 6, 1, [0, 1, 2], [0, 1, 2])
                                        for p in range(n_parts)])
        for t in range(n_topics)
    ]
    return fk.MetadataResponse(brokers, topics, "bench", 0)


def bench(label: str, fn, n: int) -> None:
    fn()  # warm
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    ns = (time.perf_counter_ns() - t0) / n
    print(f"{label:<48} {ns:10.0f} ns/op")


def main() -> None:
    n_topics = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    n_parts = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    resp = build(n_topics, n_parts)
    md = fk.Metadata()
    md.update(0, resp, False, T)
    cluster = md.fetch()
    tp = fk.TopicPartition(f"topic-{n_topics // 2}", n_parts // 2)
    key = (tp.topic, tp.partition)
    py_dict = {(t, p.partition): cluster.node_by_id(p.leader_id)
               for t in cluster.topics for p in cluster.partitions_for_topic(t)}
    n = 200_000
    print(f"{n_topics} topics x {n_parts} partitions")
    bench("Metadata.fetch()", md.fetch, n)
    bench("Cluster.leader_for(TopicPartition)", lambda: cluster.leader_for(tp), n)
    bench("Cluster.leader_for((topic, partition))", lambda: cluster.leader_for(key), n)
    bench("Cluster.leader_epoch_for(TopicPartition)", lambda: cluster.leader_epoch_for(tp), n)
    bench("dict[(topic, partition)] -> Node (pure Python)", lambda: py_dict[key], n)
    bench("dict.get(TopicPartition-equivalent tuple)", lambda: py_dict.get(key), n)
    bench("Metadata.update(full answer)", lambda: md.update(0, resp, False, T), 200)


if __name__ == "__main__":
    main()
