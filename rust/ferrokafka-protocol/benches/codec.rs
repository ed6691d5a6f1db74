//! Codec benchmarks: RecordBatch v2 encode/decode (ours and kafka-protocol's
//! on the same records), CRC32C, varints, and every compression codec.
//!
//! cargo bench -p ferrokafka-protocol --bench codec -- --warm-up-time 1 --measurement-time 3

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrokafka_protocol::compression::{self, Compression, DEFAULT_MAX_DECOMPRESSED};
use ferrokafka_protocol::primitives::{put_varint, Reader};
use ferrokafka_protocol::record::{DecodeOptions, RecordBatch, RecordBatchBuilder};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression as KpCompression, Record as KpRecord, RecordBatchDecoder, RecordBatchEncoder,
    RecordEncodeOptions, TimestampType as KpTs,
};
use std::hint::black_box;

const N: usize = 1000;
const VALUE: usize = 100;
const TS: i64 = 1_700_000_000_000;

/// Log-like values: compressible the way real payloads are, not all zeros.
fn values() -> Vec<Vec<u8>> {
    (0..N)
        .map(|i| {
            let mut v = format!(
                "{{\"id\":{i},\"user\":\"u{}\",\"event\":\"click\",\"ts\":{},\"path\":\"/p/{}\"",
                i % 97,
                TS + i as i64,
                i * 7919 % 1000
            )
            .into_bytes();
            v.resize(VALUE - 1, b' ');
            v.push(b'}');
            v
        })
        .collect()
}

fn ours_encode(values: &[Vec<u8>], codec: Compression) -> BytesMut {
    BytesMut::from(Bytes::from(ours_encode_into(
        values,
        codec,
        Vec::with_capacity(128 * 1024),
    )))
}

fn ours_encode_into(values: &[Vec<u8>], codec: Compression, buf: Vec<u8>) -> Vec<u8> {
    let mut b = RecordBatchBuilder::with_buffer(codec, buf).producer(1, 0, 0);
    for (i, v) in values.iter().enumerate() {
        b.append(TS + i as i64, None, Some(v), &[]).unwrap();
    }
    b.finish_vec().unwrap()
}

fn ours_decode(bytes: &[u8]) -> usize {
    let opts = DecodeOptions::default();
    let (batch, _) = RecordBatch::parse(bytes, &opts).unwrap();
    let payload = batch.payload(&opts).unwrap();
    let mut n = 0;
    for r in batch.records(&payload).unwrap() {
        let r = r.unwrap();
        black_box(&r);
        n += r.value.map_or(0, <[u8]>::len);
    }
    n
}

fn kp_records(values: &[Vec<u8>]) -> Vec<KpRecord> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| KpRecord {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: 1,
            producer_epoch: 0,
            timestamp_type: KpTs::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: TS + i as i64,
            key: None,
            value: Some(Bytes::copy_from_slice(v)),
            headers: IndexMap::new(),
        })
        .collect()
}

fn record_batch(c: &mut Criterion) {
    let values = values();
    let encoded = ours_encode(&values, Compression::None).freeze();
    let kp = kp_records(&values);
    let opts = RecordEncodeOptions {
        version: 2,
        compression: KpCompression::None,
    };

    let mut g = c.benchmark_group("record_batch_1000x100B");
    g.throughput(Throughput::Bytes(encoded.len() as u64));
    // Both encoders write into a recycled buffer, as a producer would.
    g.bench_function("encode/ferrokafka", |b| {
        let mut buf = Some(Vec::with_capacity(128 * 1024));
        b.iter(|| {
            let out = ours_encode_into(black_box(&values), Compression::None, buf.take().unwrap());
            black_box(out.len());
            buf = Some(out);
        })
    });
    g.bench_function("encode/kafka-protocol", |b| {
        let mut buf = BytesMut::with_capacity(128 * 1024);
        b.iter(|| {
            buf.clear();
            RecordBatchEncoder::encode(&mut buf, black_box(&kp), &opts).unwrap();
            black_box(buf.len())
        })
    });
    g.bench_function("decode/ferrokafka", |b| {
        b.iter(|| black_box(ours_decode(black_box(&encoded))))
    });
    g.bench_function("decode/kafka-protocol", |b| {
        b.iter(|| {
            let mut buf = encoded.clone();
            black_box(RecordBatchDecoder::decode(&mut buf).unwrap())
        })
    });
    g.finish();
}

fn crc(c: &mut Criterion) {
    let data: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut g = c.benchmark_group("crc32c");
    g.throughput(Throughput::Bytes(data.len() as u64));
    // What the batches use (`record::crc`, crc-fast), and the crc32c
    // crate it replaced, kept as the tests' oracle.
    g.bench_function("64KiB", |b| {
        b.iter(|| black_box(ferrokafka_protocol::record::crc::checksum(black_box(&data))))
    });
    g.bench_function("64KiB/crc32c-crate", |b| {
        b.iter(|| black_box(crc32c::crc32c(black_box(&data))))
    });
    for size in [110usize, 4096] {
        let piece = &data[..size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("{size}B"), |b| {
            b.iter(|| black_box(ferrokafka_protocol::record::crc::checksum(black_box(piece))))
        });
        g.bench_function(format!("{size}B/crc32c-crate"), |b| {
            b.iter(|| black_box(crc32c::crc32c(black_box(piece))))
        });
    }
    g.finish();
}

fn varint(c: &mut Criterion) {
    // A record-like mix: mostly 1-2 byte values, some longer.
    let vals: Vec<i32> = (0..1000i32)
        .map(|i| match i % 10 {
            0 => i * 100_000,
            1..=3 => i * 7,
            _ => i % 60,
        })
        .collect();
    let mut enc = Vec::new();
    for v in &vals {
        put_varint(&mut enc, *v);
    }
    let mut g = c.benchmark_group("varint_1000");
    g.throughput(Throughput::Elements(vals.len() as u64));
    g.bench_function("encode", |b| {
        let mut out = Vec::with_capacity(8 * 1024);
        b.iter(|| {
            out.clear();
            for v in black_box(&vals) {
                put_varint(&mut out, *v);
            }
            black_box(out.len())
        })
    });
    g.bench_function("decode", |b| {
        b.iter(|| {
            let mut r = Reader::new(black_box(&enc));
            let mut s = 0i64;
            while !r.is_empty() {
                s += r.varint().unwrap() as i64;
            }
            black_box(s)
        })
    });
    g.finish();
}

fn codecs(c: &mut Criterion) {
    // The uncompressed records section of the benchmark batch.
    let raw = ours_encode(&values(), Compression::None)[61..].to_vec();
    let mut g = c.benchmark_group("compression_100KB_records");
    g.throughput(Throughput::Bytes(raw.len() as u64));
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut z = Vec::new();
        compression::compress(codec, None, &raw, &mut z).unwrap();
        eprintln!("{}: {} -> {} bytes", codec.name(), raw.len(), z.len());
        g.bench_function(format!("{}/compress", codec.name()), |b| {
            let mut out = Vec::with_capacity(raw.len());
            b.iter(|| {
                out.clear();
                compression::compress(codec, None, black_box(&raw), &mut out).unwrap();
                black_box(out.len())
            })
        });
        g.bench_function(format!("{}/decompress", codec.name()), |b| {
            b.iter(|| {
                black_box(
                    compression::decompress(codec, black_box(&z), DEFAULT_MAX_DECOMPRESSED)
                        .unwrap(),
                )
            })
        });
    }
    g.finish();
}

criterion_group!(benches, record_batch, crc, varint, codecs);
criterion_main!(benches);
