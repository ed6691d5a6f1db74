//! cargo bench -p ferrokafka-net: the per-request costs of the network core.

use std::hint::black_box;

use bytes::{BufMut, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrokafka_net::inflight::{InFlight, InFlightRequests};
use ferrokafka_net::protocol::frame::{self, FrameDecoder, RequestHeader};
use ferrokafka_net::protocol::kafka_protocol::messages::{MetadataRequest, RequestKind};

struct Req {
    deadline: i64,
}
impl InFlight for Req {
    fn is_send_done(&self) -> bool {
        true
    }
    fn is_expired(&self, now_ms: i64) -> bool {
        now_ms > self.deadline
    }
    fn deadline_ms(&self) -> i64 {
        self.deadline
    }
}

fn inflight(c: &mut Criterion) {
    let mut g = c.benchmark_group("inflight");
    g.throughput(Throughput::Elements(5));
    g.bench_function("push5_complete5", |b| {
        let mut q = InFlightRequests::new(5);
        b.iter(|| {
            for i in 0..5 {
                q.add(black_box(1), Req { deadline: i });
            }
            black_box(q.can_send_more(1));
            for _ in 0..5 {
                black_box(q.complete_next(1));
            }
        })
    });
    g.finish();
}

fn frames(c: &mut Criterion) {
    // A socket buffer holding 100 Metadata-sized response frames back to back.
    let mut stream = BytesMut::new();
    for cid in 0..100 {
        let body = [0u8; 120];
        stream.put_i32(4 + body.len() as i32);
        stream.put_i32(cid);
        stream.put_slice(&body);
    }
    let stream = stream.freeze();
    let mut g = c.benchmark_group("frame");
    g.throughput(Throughput::Elements(100));
    g.bench_function("split_100_frames_from_socket_buffer", |b| {
        let d = FrameDecoder::new(100 << 20);
        b.iter(|| {
            let mut buf = BytesMut::from(&stream[..]);
            let mut n = 0;
            while let Ok(Some(f)) = d.decode(&mut buf) {
                n += frame::peek_correlation_id(&f).unwrap();
            }
            black_box(n)
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("encode_metadata_request_frame", |b| {
        let body = RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![])));
        let mut buf = BytesMut::with_capacity(256);
        b.iter(|| {
            buf.clear();
            let h = RequestHeader {
                api_key: 3,
                api_version: 12,
                correlation_id: 1,
                client_id: Some("ferrokafka".into()),
            };
            frame::encode_request(&mut buf, &h, black_box(&body)).unwrap();
            black_box(buf.len())
        })
    });
    g.finish();
}

/// A Fetch answer's records into columns (the consumer thread's decode):
/// 10 batches of 1,000 records of 100 B, CRCs checked.
fn fetched(c: &mut Criterion) {
    use ferrokafka_net::consumer::fetch::AbortedTransactionFilter;
    use ferrokafka_net::consumer::records::decode_fetched;
    use ferrokafka_net::protocol::compression::Compression;
    use ferrokafka_net::protocol::record::{DecodeOptions, RecordBatchBuilder};
    let value = [b'x'; 100];
    let mut blob = BytesMut::new();
    for b in 0..10 {
        let mut builder = RecordBatchBuilder::new(Compression::None).base_offset(b * 1000);
        for i in 0..1000 {
            builder
                .append(1_700_000_000_000 + i, None, Some(&value), &[])
                .unwrap();
        }
        blob.extend_from_slice(&builder.finish().unwrap());
    }
    let mut g = c.benchmark_group("fetched");
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("decode_10x1000x100B_into_columns", |b| {
        b.iter(|| {
            let mut filter = AbortedTransactionFilter::new(false, vec![]);
            let d = decode_fetched(
                black_box(&blob),
                0,
                DecodeOptions::default(),
                &mut filter,
                None,
            )
            .unwrap();
            black_box(d.records.len())
        })
    });
    g.finish();
}

/// The calling thread's side of `send_batch`: 8,000 records of 100 B
/// appended to one partition's open batch (the first through `append`, the
/// rest through the run path, `extend_open`), each with a 24-byte handle as
/// the bindings' `PyCompletion` is. Timed on one thread, so a change to the
/// append path shows here apart from the scheduling noise of the ceiling
/// run (issue 17). The batch is drained and dropped in each iteration, as
/// the sender would; the allocator hands the same memory back to the next,
/// so this times the loop with its memory in cache, not the ceiling run's
/// writes to memory other threads touched last.
fn accumulate(c: &mut Criterion) {
    use ferrokafka_net::cluster::TopicPartition;
    use ferrokafka_net::producer::accumulator::{AccumulatorConfig, RecordAccumulator, RecordRef};
    use ferrokafka_net::producer::batch::ProducerRecordBatch;
    use ferrokafka_net::producer::handles::IndexRun;
    use ferrokafka_net::protocol::compression::Compression;
    const N: usize = 8_000; // one 1 MB batch holds them
    let cfg = AccumulatorConfig {
        batch_size: 1_000_000,
        linger_ms: 5,
        retry_backoff_ms: 100,
        retry_backoff_max_ms: 1000,
        delivery_timeout_ms: 120_000,
        buffer_memory: 32 << 20,
    };
    let tp = TopicPartition::new("t", 0);
    let value = [b'x'; 100];
    let values: Vec<&[u8]> = (0..N).map(|_| &value[..]).collect();
    let at = |i: usize| RecordRef {
        timestamp_ms: 1_700_000_000_000,
        key: None,
        value: Some(values[i]),
        headers: &[],
    };
    // As ferrokafka-py's `send_batch` handles: one for a run of a call's
    // consecutive records (`RecordHandles::absorb`); their sizes the call
    // took from its input before appending.
    let handle = |i: usize| IndexRun(i as u32, 1);
    type Acc = RecordAccumulator<ProducerRecordBatch, IndexRun>;
    // One iteration: the records appended as the run path does, then the
    // batch drained and its memory given back, as the sender would.
    let fill = |acc: &mut Acc| {
        acc.append(&tp, &at(0), 200, handle(0), 0, |cap| {
            ProducerRecordBatch::new(Compression::None, None, cap)
        })
        .ok()
        .unwrap();
        let mut done = 1;
        while done < N {
            let ext = acc.extend_open(
                &tp,
                done..N,
                |i| Some((at(i), 200)),
                |i, _| handle(i),
                None,
                usize::MAX,
            );
            assert!(ext.appended > 0);
            done += ext.appended;
        }
        let batches = acc.drain_node(0, std::slice::from_ref(&tp), usize::MAX, i64::MAX / 2);
        for batch in &batches {
            acc.deallocate(batch);
        }
        batches
    };
    let mut g = c.benchmark_group("accumulate");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("append_run_8k_x_100B", |b| {
        let mut acc: Acc = RecordAccumulator::new(cfg.clone());
        b.iter(|| black_box(fill(&mut acc)))
    });
    // The same loop writing to memory it has not touched for ~24 MB, as in
    // the ceiling run, where the buffer cycles through `buffer_memory`
    // while earlier batches wait to be sent: the memory's share of the
    // loop's cost there (docs/benchmarks-components.md). The last 24
    // batches are kept, so the allocator hands out other memory.
    g.bench_function("append_run_8k_x_100B_cold", |b| {
        let mut acc: Acc = RecordAccumulator::new(cfg.clone());
        let mut ring = std::collections::VecDeque::new();
        b.iter(|| {
            ring.push_back(fill(&mut acc));
            if ring.len() > 24 {
                black_box(ring.pop_front());
            }
        })
    });
    g.finish();
}

criterion_group!(benches, inflight, frames, fetched, accumulate);
criterion_main!(benches);
