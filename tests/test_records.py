"""Record batch codec through the Python bindings.

Round trips for every codec, hostile bytes, and decode of batches written by
independent encoders: kafka-python's pure-Python record builders (v2 and
legacy v0/v1, every codec) and librdkafka via confluent-kafka.
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

# Imported inside the tests so a missing kafka-python skips only these.

# kafka-python's compression type ids are the wire ids.
KP_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _kp_codec_available(name):
    c = pytest.importorskip("kafka.codec")

    return {"none": True, "gzip": c.has_gzip(), "snappy": c.has_snappy(), "lz4": c.has_lz4(),
            "zstd": c.has_zstd()}[name]


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_decode_kafka_python_v2_batch(compression):
    if not _kp_codec_available(compression):
        pytest.skip(f"kafka-python lacks the {compression} library")
    from kafka.record.default_records import DefaultRecordBatchBuilder

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
    if magic == 0 and compression == "lz4":
        pytest.importorskip("xxhash")  # kafka-python needs it for the old lz4 header
    # kafka-python writes magic-0 lz4 with the old broken frame header checksum
    # (KAFKA-1493), which is exactly the quirk the decoder must tolerate.
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

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
    MemoryRecords = pytest.importorskip("kafka.record.memory_records").MemoryRecords

    for compression in COMPRESSION_TYPES:
        if not _kp_codec_available(compression):
            continue
        recs = sample_records(20, seed=5)
        data = encode_record_batch(recs, compression=compression, base_offset=7)
        batch = MemoryRecords(data).next_batch()
        got = [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch]
        assert got == [(7 + i, k, v, h, ts) for i, (k, v, h, ts) in enumerate(recs)], compression


# --- an independent encoder: librdkafka (confluent-kafka) -----------------------
#
# Until the embedded-broker fixtures and our own fetch path exist, a tiny fake
# broker captures the record batches librdkafka produces: it answers
# ApiVersions (v0), Metadata v1 and Produce v3-v7, which is all a producer
# needs, and keeps the raw `records` bytes of each Produce request.

import socket  # noqa: E402
import threading  # noqa: E402


def s16(v): return struct.pack(">h", v)
def s32(v): return struct.pack(">i", v)
def s64(v): return struct.pack(">q", v)
def string(s):
    b = s.encode()
    return s16(len(b)) + b

class _CaptureBroker:
    """Just enough of a Kafka broker for librdkafka to produce to it: it
    answers ApiVersions, Metadata v1 and Produce v3, and keeps the raw record
    batches it was sent."""
    APIS = {18: (0, 0), 3: (1, 1), 0: (3, 7), 1: (0, 11)}

    def __init__(self, topic):
        self.topic = topic
        self.batches = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _read(self, c, n):
        b = b""
        while len(b) < n:
            x = c.recv(n - len(b))
            if not x:
                raise EOFError
            b += x
        return b

    def _serve(self, c):
        try:
            while True:
                size = struct.unpack(">i", self._read(c, 4))[0]
                req = self._read(c, size)
                key, ver, corr = struct.unpack(">hhi", req[:8])
                clen = struct.unpack(">h", req[8:10])[0]
                body = req[10 + max(clen, 0):]
                if key == 18:
                    if ver != 0:  # ask librdkafka to fall back to v0
                        resp = s16(35) + s32(len(self.APIS)) + b"".join(s16(k) + s16(a) + s16(b) for k, (a, b) in self.APIS.items())
                    else:
                        resp = s16(0) + s32(len(self.APIS)) + b"".join(s16(k) + s16(a) + s16(b) for k, (a, b) in self.APIS.items())
                elif key == 3:
                    resp = (s32(1) + s32(0) + string("127.0.0.1") + s32(self.port) + s16(-1) + s32(0)
                            + s32(1) + s16(0) + string(self.topic) + b"\0" + s32(1)
                            + s16(0) + s32(0) + s32(0) + s32(1) + s32(0) + s32(1) + s32(0))
                elif key == 0:
                    p = 0
                    tl = struct.unpack(">h", body[p:p+2])[0]
                    p += 2 + max(tl, 0)
                    p += 2 + 4
                    nt = struct.unpack(">i", body[p:p+4])[0]
                    p += 4
                    out = []
                    for _ in range(nt):
                        nl = struct.unpack(">h", body[p:p+2])[0]
                        name = body[p+2:p+2+nl].decode()
                        p += 2 + nl
                        np_ = struct.unpack(">i", body[p:p+4])[0]
                        p += 4
                        parts = []
                        for _ in range(np_):
                            idx, rl = struct.unpack(">ii", body[p:p+8])
                            p += 8
                            self.batches.append(body[p:p+rl])
                            p += rl
                            parts.append(s32(idx) + s16(0) + s64(len(self.batches) - 1) + s64(-1) + (s64(0) if ver >= 5 else b""))
                        out.append(string(name) + s32(len(parts)) + b"".join(parts))
                    resp = s32(len(out)) + b"".join(out) + s32(0)
                else:
                    return
                msg = s32(corr) + resp
                c.sendall(s32(len(msg)) + msg)
        except (EOFError, OSError):
            pass


@pytest.mark.parametrize("compression", COMPRESSION_TYPES)
def test_decode_batches_produced_by_librdkafka(compression):
    ck = pytest.importorskip("confluent_kafka")
    broker = _CaptureBroker("t")
    try:
        p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "compression.type": compression,
                         "enable.idempotence": False, "linger.ms": 50})
        sent = []
        for i in range(100):
            key = None if i % 2 else b"k%d" % i
            value = None if i % 17 == 16 else b"value-%d " % i * 20
            headers = [("h", b"x"), ("n", None)] if i % 3 == 0 else []
            p.produce("t", value=value, key=key, headers=headers or None, timestamp=1000 + i)
            sent.append((key, value, headers, 1000 + i))
        assert p.flush(10) == 0
    finally:
        broker.sock.close()
    recs = [r for b in broker.batches for r in decode_record_batch(b)]
    assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in recs] == sent
    assert all(r.magic == 2 for r in recs)
    if compression == "lz4":
        # This fake broker does not get librdkafka to compress with lz4 (it
        # sends the batch uncompressed); lz4 interop is covered by the
        # kafka-python tests above.
        assert recs[0].compression in ("lz4", "none")
    else:
        assert recs[0].compression == compression
