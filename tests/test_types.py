"""The value types: immutable, hashable, ordered where it makes sense, repr-able."""

from __future__ import annotations

import copy
import pickle

import pytest

import ferrokafka as fk


def test_topic_partition():
    tp = fk.TopicPartition("t", 1)
    assert (tp.topic, tp.partition) == ("t", 1)
    assert tp == fk.TopicPartition("t", 1)
    assert tp != fk.TopicPartition("t", 2)
    assert hash(tp) == hash(fk.TopicPartition("t", 1))
    assert len({tp, fk.TopicPartition("t", 1), fk.TopicPartition("u", 1)}) == 2
    assert sorted([fk.TopicPartition("b", 0), fk.TopicPartition("a", 2), fk.TopicPartition("a", 1)]) == [
        fk.TopicPartition("a", 1), fk.TopicPartition("a", 2), fk.TopicPartition("b", 0)]
    assert repr(tp) == "TopicPartition(topic='t', partition=1)"
    assert eval(repr(tp), {"TopicPartition": fk.TopicPartition}) == tp
    assert pickle.loads(pickle.dumps(tp)) == tp
    assert copy.deepcopy(tp) == tp
    with pytest.raises(AttributeError):
        tp.partition = 3  # type: ignore[misc]
    assert {tp: 1}[fk.TopicPartition("t", 1)] == 1


def test_node():
    n = fk.Node(1, "h", 9092)
    assert n.rack is None
    r = fk.Node(1, "h", 9092, rack="r1")
    assert r.rack == "r1" and r != n
    assert n == fk.Node(1, "h", 9092) and hash(n) == hash(fk.Node(1, "h", 9092))
    assert sorted([fk.Node(2, "a", 1), fk.Node(1, "z", 1)])[0].id == 1
    assert repr(n) == "Node(id=1, host='h', port=9092, rack=None)"
    assert eval(repr(r), {"Node": fk.Node}) == r
    assert pickle.loads(pickle.dumps(r)) == r
    assert fk.Node(1, "::1", 9092).address == "[::1]:9092"
    with pytest.raises(AttributeError):
        n.id = 2  # type: ignore[misc]


def test_partition_and_topic_metadata():
    p = fk.PartitionMetadata(0, 1)
    assert (p.partition, p.leader_id, p.leader_epoch, p.replicas, p.isr, p.error_code) == (0, 1, -1, (), (), 0)
    q = fk.PartitionMetadata(0, 1, 3, [1, 2], (1,), 0)
    assert q.replicas == (1, 2) and q.isr == (1,)
    assert q == fk.PartitionMetadata(0, 1, 3, (1, 2), [1]) and hash(q) == hash(fk.PartitionMetadata(0, 1, 3, (1, 2), [1]))
    assert "leader_epoch=3" in repr(q)
    assert pickle.loads(pickle.dumps(q)) == q
    t = fk.TopicMetadata("t", [q, p])
    assert t.name == "t" and t.partitions == (q, p) and t.error_code == 0 and not t.is_internal
    assert t == fk.TopicMetadata("t", (q, p)) and hash(t) == hash(fk.TopicMetadata("t", (q, p)))
    assert fk.TopicMetadata("__consumer_offsets", [], 0, True).is_internal
    assert "name='t'" in repr(t)
    with pytest.raises(TypeError):
        fk.TopicMetadata("t", ["not a partition"])


def test_metadata_response():
    r = fk.MetadataResponse([fk.Node(0, "h", 1)], [fk.TopicMetadata("t", [])])
    assert r.cluster_id is None and r.controller_id == -1
    assert r.brokers == (fk.Node(0, "h", 1),)
    assert r.topics[0].name == "t"
    r2 = fk.MetadataResponse([fk.Node(0, "h", 1)], [fk.TopicMetadata("t", [])], "c", 0)
    assert r != r2 and r2.cluster_id == "c" and r2.controller_id == 0
    assert "cluster_id='c'" in repr(r2)


def test_cluster_lookups():
    md = fk.Metadata()
    md.update(0, fk.MetadataResponse(
        [fk.Node(0, "h0", 1), fk.Node(1, "h1", 1)],
        [fk.TopicMetadata("t", [fk.PartitionMetadata(1, -1, 2), fk.PartitionMetadata(0, 1, 7)])],
        "cid", 1), False, 1_700_000_000_000)
    c = md.fetch()
    assert isinstance(c, fk.Cluster)
    assert [p.partition for p in c.partitions_for_topic("t")] == [0, 1]  # sorted
    assert [p.partition for p in c.available_partitions_for_topic("t")] == [0]
    assert c.leader_for(fk.TopicPartition("t", 0)) == fk.Node(1, "h1", 1)
    assert c.leader_for(("t", 1)) is None
    assert c.leader_for(("nope", 0)) is None
    assert c.leader_epoch_for(("t", 0)) == 7
    assert c.partition(("t", 1)).leader_epoch == 2
    assert c.node_by_id(0) == fk.Node(0, "h0", 1) and c.node_by_id(5) is None
    assert c.controller == fk.Node(1, "h1", 1)
    assert c.cluster_id == "cid"
    assert c.topics == {"t"}
    assert c.partition_count_for_topic("t") == 2
    assert "cluster_id='cid'" in repr(c)
    with pytest.raises(TypeError):
        c.leader_for("t")


def test_cluster_hands_out_shared_nodes():
    md = fk.Metadata()
    md.update(0, fk.MetadataResponse([fk.Node(0, "h0", 1)],
                                     [fk.TopicMetadata("t", [fk.PartitionMetadata(0, 0, 1)])], "c", 0),
              False, 1_700_000_000_000)
    c = md.fetch()
    # Same immutable object each time: lookups do not allocate a new Node.
    assert c.leader_for(("t", 0)) is c.leader_for(fk.TopicPartition("t", 0)) is c.node_by_id(0)
    assert c.controller is c.nodes[0]


def test_pattern_matching():
    match fk.TopicPartition("t", 3):
        case fk.TopicPartition(topic, partition):
            assert (topic, partition) == ("t", 3)
    match fk.Node(1, "h", 2):
        case fk.Node(node_id, host, port, rack):
            assert (node_id, host, port, rack) == (1, "h", 2, None)
