"""Record batch codec through the Python bindings.

Round trips for every codec, hostile bytes, and decode of batches written by
an independent encoder (kafka-python's pure-Python record builders, v2 and
legacy v0/v1, every codec).
"""

from __future__ import annotations

import os
import random
import struct

import pytest

import ferrokafka as fk
from ferrokafka.protocol import (
    COMPRESSION_TYPES,
    Record,
    decode_record_batch,
    encode_record_batch,
)


def sample_records(n=50, seed=1):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else f"key-{i}".encode()
        value = None if i % 9 == 8 else bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 300)))
        headers = [("trace", f"t{i}".encode()), ("null", None)] if i % 3 == 0 else []
        out.append((key, value, headers, 1_700_000_000_000 + i))
    return out


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_round_trip_every_codec(compression):
    recs = sample_records()
    data = encode_record_batch(recs, compression=compression, base_offset=500)
    assert isinstance(data, bytes)
    out = decode_record_batch(data)
    assert len(out) == len(recs)
    for i, (r, (k, v, h, ts)) in enumerate(zip(out, recs)):
        assert isinstance(r, Record)
        assert r.offset == 500 + i
        assert (r.key, r.value, r.headers, r.timestamp_ms) == (k, v, h, ts)
        assert r.timestamp_type == 0
        assert r.compression == compression
        assert r.magic == 2


def test_producer_fields_and_input_shapes():
    class Obj:
        key = b"o"
        value = b"obj"
        headers = {"a": b"1"}
        timestamp_ms = 7

    data = encode_record_batch(
        [(b"k", "text"), {"key": None, "value": b"d", "timestamp_ms": 5}, Obj()],
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        transactional=True,
    )
    out = decode_record_batch(data)
    assert [r.value for r in out] == [b"text", b"d", b"obj"]
    assert out[2].headers == [("a", b"1")]
    assert [r.sequence for r in out] == [10, 11, 12]
    assert all(r.producer_id == 42 and r.producer_epoch == 3 and r.is_transactional for r in out)
    assert out[1].timestamp_ms == 5


def test_several_batches_and_truncated_tail():
    a = encode_record_batch([(None, b"a")], base_offset=0)
    b = encode_record_batch([(None, b"b")], compression="lz4", base_offset=1)
    c = encode_record_batch([(None, b"c")], base_offset=2)
    out = decode_record_batch(a + b + c[:-5])
    assert [r.value for r in out] == [b"a", b"b"]


def test_garbage_raises_kafka_error():
    good = encode_record_batch(sample_records(5), compression="gzip")
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(fk.KafkaError):
        decode_record_batch(bytes(bad_crc))
    huge = bytearray(good)
    huge[57:61] = struct.pack(">i", 0x7FFFFFFF)  # records count
    with pytest.raises(fk.KafkaError):
        decode_record_batch(bytes(huge), verify_crc=False)
    rnd = random.Random(7)
    for _ in range(300):
        blob = bytearray(good)
        for _ in range(rnd.randrange(1, 4)):
            blob[rnd.randrange(len(blob))] ^= rnd.randrange(1, 256)
        try:
            decode_record_batch(bytes(blob), verify_crc=rnd.random() < 0.5)
        except fk.KafkaError:
            pass
    for _ in range(200):
        try:
            decode_record_batch(os.urandom(rnd.randrange(0, 200)))
        except fk.KafkaError:
            pass


def test_bad_arguments_raise_value_or_type_error():
    with pytest.raises(ValueError, match="compression"):
        encode_record_batch([(None, b"x")], compression="brotli")
    with pytest.raises(TypeError):
        encode_record_batch([(None, 3)])


def test_decompression_cap():
    data = encode_record_batch([(None, bytes(1 << 20))] * 3, compression="zstd")
    with pytest.raises(fk.KafkaError):
        decode_record_batch(data, max_decompressed=1 << 20)
    assert len(decode_record_batch(data)) == 3


# --- an independent encoder: kafka-python's record builders -------------------

kafka_records = pytest.importorskip("kafka.record")
from kafka.record.default_records import DefaultRecordBatchBuilder  # noqa: E402
from kafka.record.legacy_records import LegacyRecordBatchBuilder  # noqa: E402

# kafka-python's compression type ids are the wire ids.
KP_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _kp_codec_available(name):
    import kafka.codec as c

    return {"none": True, "gzip": c.has_gzip(), "snappy": c.has_snappy(), "lz4": c.has_lz4(),
            "zstd": c.has_zstd()}[name]


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_decode_kafka_python_v2_batch(compression):
    if not _kp_codec_available(compression):
        pytest.skip(f"kafka-python lacks the {compression} library")
    recs = sample_records(40, seed=3)
    b = DefaultRecordBatchBuilder(magic=2, compression_type=KP_CODECS[compression], is_transactional=False,
                                  producer_id=9, producer_epoch=1, base_sequence=100, batch_size=1 << 30)
    for i, (k, v, h, ts) in enumerate(recs):
        b.append(i, timestamp=ts, key=k, value=v, headers=h)
    data = bytes(b.build())
    out = decode_record_batch(data)
    assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in out] == [(k, v, h, ts) for k, v, h, ts in recs]
    assert out[5].sequence == 105 and out[0].producer_id == 9


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4"])
def test_decode_kafka_python_legacy_message_set(magic, compression):
    if not _kp_codec_available(compression):
        pytest.skip(f"kafka-python lacks the {compression} library")
    # kafka-python writes magic-0 lz4 with the old broken frame header checksum
    # (KAFKA-1493), which is exactly the quirk the decoder must tolerate.
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=KP_CODECS[compression], batch_size=1 << 30)
    values = [f"value-{i}".encode() * (i % 5 + 1) for i in range(30)]
    for i, v in enumerate(values):
        b.append(i, timestamp=1000 + i if magic else None, key=None if i % 2 else b"k", value=v)
    data = bytearray(b.build())
    if compression != "none":
        # A producer leaves the wrapper offset at 0; the broker stamps the
        # absolute offset of the last inner message there (not CRC-covered),
        # and v1 readers derive the inner offsets from it.
        data[0:8] = struct.pack(">q", 29)
    out = decode_record_batch(bytes(data))
    assert [r.value for r in out] == values
    assert [r.offset for r in out] == list(range(30))
    assert all(r.magic == magic for r in out)
    if magic == 1:
        assert [r.timestamp_ms for r in out] == [1000 + i for i in range(30)]
    else:
        assert all(r.timestamp_type == -1 for r in out)


def test_kafka_python_reads_our_batches():
    from kafka.record.memory_records import MemoryRecords

    for compression in COMPRESSION_TYPES:
        if not _kp_codec_available(compression):
            continue
        recs = sample_records(20, seed=5)
        data = encode_record_batch(recs, compression=compression, base_offset=7)
        batch = MemoryRecords(data).next_batch()
        got = [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch]
        assert got == [(7 + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(recs)], compression
