"""docs/semantics.md §2.4: which __consumer_offsets partition holds a group."""

import pytest

import ferrokafka as fk
from ferrokafka import _core


def java_hash(s: str) -> int:
    """Independent reimplementation of java.lang.String.hashCode."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize("group", ["", "hello", "my-group", "ключ", "😀-group", "polygenelubricants"])
def test_matches_an_independent_java_hash(group):
    assert _core.java_string_hash(group) == java_hash(group)
    h = java_hash(group)
    expected = (0 if h == -(1 << 31) else abs(h)) % 50
    assert fk.coordinator_partition_for(group) == expected


def test_known_values_and_min_value():
    assert _core.java_string_hash("hello") == 99162322
    assert fk.coordinator_partition_for("hello") == 99162322 % 50
    # hashCode == Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0.
    assert _core.java_string_hash("polygenelubricants") == -(1 << 31)
    assert fk.coordinator_partition_for("polygenelubricants", 7) == 0


def test_num_partitions_is_validated():
    with pytest.raises(ValueError, match="num_partitions"):
        fk.coordinator_partition_for("g", 0)
    assert fk.coordinator_partition_for("g", 1) == 0
