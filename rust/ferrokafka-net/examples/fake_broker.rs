//! A sink broker that answers from memory, for measuring *client* cost (the
//! ceiling run of docs/benchmarks.md): no storage, no replication, every
//! request answered as soon as it is parsed, so pipelined requests are not
//! serialised behind broker work.
//!
//! * Produce: acknowledged at once; per partition the base offset counts the
//!   records received (each batch's header is read for its record count,
//!   the rest discarded in the kernel unread: `fake_broker/wire.rs`).
//! * Fetch: served from one encoded batch of `FAKE_BATCH_RECORDS` records of
//!   `FAKE_VALUE_BYTES` bytes (built once), written (vectored, never copied
//!   here) with its base offset patched (outside the CRC, so no checksum
//!   work per answer) up to `partition_max_bytes`; every partition's log
//!   end is `FAKE_LOG_END`.
//!   A fetch at the log end waits `max_wait_ms` (at most 500 ms) and answers
//!   empty, as a broker would.
//! * Metadata, CreateTopics, DeleteTopics (topics live in a map; Metadata
//!   for an unknown topic creates it with one partition), ListOffsets
//!   (earliest 0, latest the log end), InitProducerId, FindCoordinator,
//!   OffsetCommit (accepted, not kept), OffsetFetch (nothing committed).
//!
//! Produce and Fetch stop below v13 (topic ids); the client downgrades.
//!
//!     cargo run --release -p ferrokafka-net --example fake_broker -- [PORT]
//!
//! prints the port it listens on. `fake_broker --floor N` instead prints the
//! floor of a record's cost: copying N records of FAKE_VALUE_BYTES and
//! CRC32C over them, in µs per record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::kafka_protocol::messages::api_versions_response::ApiVersion;
use ferrokafka_protocol::kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use ferrokafka_protocol::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use ferrokafka_protocol::kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, PartitionData as FetchPartitionData,
};
use ferrokafka_protocol::kafka_protocol::messages::find_coordinator_response::Coordinator;
use ferrokafka_protocol::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use ferrokafka_protocol::kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use ferrokafka_protocol::kafka_protocol::messages::produce_response::{
    PartitionProduceResponse, TopicProduceResponse,
};
use ferrokafka_protocol::kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, CreateTopicsResponse, DeleteTopicsResponse,
    FetchRequest, FetchResponse, FindCoordinatorResponse, InitProducerIdResponse,
    ListOffsetsRequest, ListOffsetsResponse, MetadataRequest, MetadataResponse,
    OffsetCommitResponse, OffsetFetchResponse, ProduceResponse, ProducerId, RequestHeader,
    RequestKind, ResponseHeader, ResponseKind, TopicName,
};
use ferrokafka_protocol::kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use ferrokafka_protocol::primitives::put_uvarlong;
use ferrokafka_protocol::record::RecordBatchBuilder;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

#[path = "fake_broker/wire.rs"]
mod wire;

/// Highest versions answered, per API key (lowest: 0). Produce and Fetch
/// stop at 12: v13 names topics by id only.
const VERSIONS: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, 12),
    (ApiKey::Fetch, 12),
    (ApiKey::ListOffsets, 9),
    (ApiKey::Metadata, 12),
    (ApiKey::OffsetCommit, 9),
    (ApiKey::OffsetFetch, 9),
    (ApiKey::FindCoordinator, 6),
    (ApiKey::ApiVersions, 3),
    (ApiKey::CreateTopics, 7),
    (ApiKey::DeleteTopics, 6),
    (ApiKey::InitProducerId, 5),
];

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Broker {
    port: u16,
    /// Topic -> partition count.
    topics: Mutex<HashMap<String, i32>>,
    /// (topic, partition) -> next offset for Produce.
    produced: Mutex<HashMap<(String, i32), i64>>,
    /// One encoded batch for Fetch, base offset 0.
    template: Bytes,
    batch_records: i64,
    log_end: i64,
}

fn template(records: usize, value_bytes: usize) -> Bytes {
    let value = vec![b'x'; value_bytes];
    let mut b = RecordBatchBuilder::with_capacity(Compression::None, records * (value_bytes + 16));
    for _ in 0..records {
        b.append(0, None, Some(&value), &[]).expect("append");
    }
    b.finish().expect("finish").freeze()
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

impl Broker {
    fn partitions(&self, topic: &str) -> i32 {
        *self
            .topics
            .lock()
            .unwrap()
            .entry(topic.to_string())
            .or_insert(1)
    }

    fn metadata(&self, req: MetadataRequest) -> ResponseKind {
        let wanted: Vec<String> = match req.topics {
            Some(ts) => ts
                .into_iter()
                .filter_map(|t| t.name.map(|n| n.0.to_string()))
                .collect(),
            None => self.topics.lock().unwrap().keys().cloned().collect(),
        };
        let topics = wanted
            .iter()
            .map(|t| {
                let parts = (0..self.partitions(t))
                    .map(|p| {
                        MetadataResponsePartition::default()
                            .with_partition_index(p)
                            .with_leader_id(BrokerId(1))
                            .with_replica_nodes(vec![BrokerId(1)])
                            .with_isr_nodes(vec![BrokerId(1)])
                    })
                    .collect();
                MetadataResponseTopic::default()
                    .with_name(Some(name(t)))
                    .with_partitions(parts)
            })
            .collect();
        ResponseKind::Metadata(
            MetadataResponse::default()
                .with_brokers(vec![MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(StrBytes::from_static_str("127.0.0.1"))
                    .with_port(self.port as i32)])
                .with_cluster_id(Some(StrBytes::from_static_str("sink")))
                .with_controller_id(BrokerId(1))
                .with_topics(topics),
        )
    }

    /// The answer to a Produce request read by `wire::read_produce`.
    fn produce(&self, req: wire::Produced) -> ResponseKind {
        let mut produced = self.produced.lock().unwrap();
        let responses = req
            .topics
            .into_iter()
            .map(|(topic, parts)| {
                let parts = parts
                    .into_iter()
                    .map(|(index, records)| {
                        let next = produced.entry((topic.clone(), index)).or_insert(0);
                        let base = *next;
                        *next += records;
                        PartitionProduceResponse::default()
                            .with_index(index)
                            .with_base_offset(base)
                            .with_log_append_time_ms(-1)
                    })
                    .collect();
                TopicProduceResponse::default()
                    .with_name(name(&topic))
                    .with_partition_responses(parts)
            })
            .collect();
        ResponseKind::Produce(ProduceResponse::default().with_responses(responses))
    }

    /// The answer to a Fetch, its records left out: each partition's
    /// records field holds a `Splice` sentinel, and `splices` gets the
    /// pieces that replace it on the wire (the template batch, its base
    /// offset patched as a piece of its own). Written vectored, the batches
    /// are never copied in this process: copied into each answer (three
    /// times, through the encoder and the output buffer), they streamed
    /// megabytes through the caches the measured client shares on a
    /// two-core machine, and charged the client for the sink's work.
    fn fetch(&self, req: &FetchRequest, splices: &mut Vec<Splice>) -> ResponseKind {
        let tlen = self.template.len();
        let responses = req
            .topics
            .iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .iter()
                    .map(|p| {
                        let k = self.batch_records;
                        let mut base = p.fetch_offset - p.fetch_offset.rem_euclid(k);
                        let fit = (p.partition_max_bytes.max(0) as usize / tlen).max(1);
                        let mut pieces = Vec::with_capacity(2 * fit);
                        for _ in 0..fit {
                            if base >= self.log_end {
                                break;
                            }
                            pieces.push(Bytes::copy_from_slice(&base.to_be_bytes()));
                            pieces.push(self.template.slice(8..));
                            base += k;
                        }
                        let records = if pieces.is_empty() {
                            Bytes::new()
                        } else {
                            let s = Splice::new(splices.len(), pieces);
                            let sentinel = Bytes::copy_from_slice(&s.sentinel);
                            splices.push(s);
                            sentinel
                        };
                        FetchPartitionData::default()
                            .with_partition_index(p.partition)
                            .with_high_watermark(self.log_end)
                            .with_last_stable_offset(self.log_end)
                            .with_log_start_offset(0)
                            .with_records(Some(records))
                    })
                    .collect();
                FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_partitions(parts)
            })
            .collect();
        ResponseKind::Fetch(FetchResponse::default().with_responses(responses))
    }

    /// Whether a fetch has nothing to answer (every partition at the end).
    fn fetch_is_empty(&self, req: &FetchRequest) -> bool {
        req.topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .all(|p| p.fetch_offset >= self.log_end)
    }

    fn list_offsets(&self, req: ListOffsetsRequest) -> ResponseKind {
        let topics = req
            .topics
            .into_iter()
            .map(|t| {
                let parts = t
                    .partitions
                    .into_iter()
                    .map(|p| {
                        // -1 latest, -2 earliest, -3 max timestamp, else a time.
                        let offset = if p.timestamp == -1 { self.log_end } else { 0 };
                        ListOffsetsPartitionResponse::default()
                            .with_partition_index(p.partition_index)
                            .with_timestamp(-1)
                            .with_offset(offset)
                    })
                    .collect();
                ListOffsetsTopicResponse::default()
                    .with_name(t.name)
                    .with_partitions(parts)
            })
            .collect();
        ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
    }

    fn answer(
        &self,
        key: ApiKey,
        req: RequestKind,
        splices: &mut Vec<Splice>,
    ) -> Option<ResponseKind> {
        Some(match req {
            RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(
                ApiVersionsResponse::default().with_api_keys(
                    VERSIONS
                        .iter()
                        .map(|(k, max)| {
                            ApiVersion::default()
                                .with_api_key(*k as i16)
                                .with_max_version(*max)
                        })
                        .collect(),
                ),
            ),
            RequestKind::Metadata(r) => self.metadata(r),
            RequestKind::Fetch(r) => self.fetch(&r, splices),
            RequestKind::ListOffsets(r) => self.list_offsets(r),
            RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(1))
                    .with_producer_epoch(0),
            ),
            RequestKind::CreateTopics(r) => {
                let mut topics = self.topics.lock().unwrap();
                let results = r
                    .topics
                    .into_iter()
                    .map(|t| {
                        let n = if t.num_partitions > 0 {
                            t.num_partitions
                        } else {
                            1
                        };
                        topics.insert(t.name.0.to_string(), n);
                        CreatableTopicResult::default()
                            .with_name(t.name)
                            .with_num_partitions(n)
                            .with_replication_factor(1)
                    })
                    .collect();
                ResponseKind::CreateTopics(CreateTopicsResponse::default().with_topics(results))
            }
            RequestKind::DeleteTopics(r) => {
                let mut topics = self.topics.lock().unwrap();
                let names: Vec<TopicName> = r
                    .topic_names
                    .into_iter()
                    .chain(r.topics.into_iter().filter_map(|t| t.name))
                    .collect();
                let results = names
                    .into_iter()
                    .map(|n| {
                        topics.remove(n.0.as_str());
                        DeletableTopicResult::default().with_name(Some(n))
                    })
                    .collect();
                ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(results))
            }
            RequestKind::FindCoordinator(r) => {
                let host = StrBytes::from_static_str("127.0.0.1");
                let coordinators = r
                    .coordinator_keys
                    .into_iter()
                    .map(|k| {
                        Coordinator::default()
                            .with_key(k)
                            .with_node_id(BrokerId(1))
                            .with_host(host.clone())
                            .with_port(self.port as i32)
                    })
                    .collect();
                ResponseKind::FindCoordinator(
                    FindCoordinatorResponse::default()
                        .with_node_id(BrokerId(1))
                        .with_host(host)
                        .with_port(self.port as i32)
                        .with_coordinators(coordinators),
                )
            }
            RequestKind::OffsetCommit(r) => {
                let topics = r
                    .topics
                    .into_iter()
                    .map(|t| {
                        let parts = t
                            .partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                            })
                            .collect();
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(parts)
                    })
                    .collect();
                ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
            }
            RequestKind::OffsetFetch(r) => {
                // Nothing committed: every asked partition at -1.
                let topics = r
                    .topics
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| {
                        let parts = t
                            .partition_indexes
                            .iter()
                            .map(|&p| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(-1)
                            })
                            .collect();
                        OffsetFetchResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(parts)
                    })
                    .collect();
                let groups = r
                    .groups
                    .into_iter()
                    .map(|g| {
                        let topics = g
                            .topics
                            .unwrap_or_default()
                            .into_iter()
                            .map(|t| {
                                let parts = t
                                    .partition_indexes
                                    .iter()
                                    .map(|&p| {
                                        OffsetFetchResponsePartitions::default()
                                            .with_partition_index(p)
                                            .with_committed_offset(-1)
                                    })
                                    .collect();
                                OffsetFetchResponseTopics::default()
                                    .with_name(t.name)
                                    .with_partitions(parts)
                            })
                            .collect();
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id)
                            .with_topics(topics)
                    })
                    .collect();
                ResponseKind::OffsetFetch(
                    OffsetFetchResponse::default()
                        .with_topics(topics)
                        .with_groups(groups),
                )
            }
            _ => {
                let _ = key;
                return None;
            }
        })
    }
}

/// A part of an answer that is written from pieces instead of encoded: the
/// encoder writes `sentinel` as the field's bytes, `push_frame` swaps it
/// (and its length prefix) for the length of `pieces` and the pieces.
struct Splice {
    sentinel: [u8; 16],
    pieces: Vec<Bytes>,
}

impl Splice {
    fn new(index: usize, pieces: Vec<Bytes>) -> Self {
        let mut sentinel = *b"\xfe\xed\xfa\xcesinkXXXXXXXX";
        sentinel[8..].copy_from_slice(&(index as u64).to_be_bytes());
        Splice { sentinel, pieces }
    }

    /// The bytes of its pieces.
    fn len(&self) -> usize {
        self.pieces.iter().map(Bytes::len).sum()
    }
}

/// Write every piece, vectored, and clear the list.
async fn write_pieces(s: &mut TcpStream, pieces: &mut Vec<Bytes>) -> std::io::Result<()> {
    let mut i = 0;
    while i < pieces.len() {
        let slices: Vec<std::io::IoSlice<'_>> = pieces[i..]
            .iter()
            .take(512)
            .map(|p| std::io::IoSlice::new(p))
            .collect();
        let mut n = s.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let p = &mut pieces[i];
            if n >= p.len() {
                n -= p.len();
                i += 1;
            } else {
                bytes::Buf::advance(p, n);
                n = 0;
            }
        }
        while i < pieces.len() && pieces[i].is_empty() {
            i += 1;
        }
    }
    pieces.clear();
    Ok(())
}

async fn serve(broker: Arc<Broker>, s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut w = wire::Wire::new(s);
    // Answers not yet written, as pieces (`push_frame`): pipelined requests
    // already read are answered by one write.
    let mut out: Vec<Bytes> = Vec::new();
    loop {
        if w.buf.len() < 12 && write_pieces(&mut w.s, &mut out).await.is_err() {
            return;
        }
        // Size, api key, version, correlation id.
        let Ok(mut head) = w.take(12, 12).await else {
            return;
        };
        let n = head.get_i32().max(8) as usize;
        let key = head.get_i16();
        let version = head.get_i16();
        let correlation_id = head.get_i32();
        let Ok(api) = ApiKey::try_from(key) else {
            return;
        };
        let mut splices = Vec::new();
        let resp = if api == ApiKey::Produce {
            match wire::read_produce(&mut w, n - 8, version).await {
                Ok(p) if p.acks == 0 => continue, // no answer expected
                Ok(p) => broker.produce(p),
                Err(_) => return,
            }
        } else {
            let Ok(rest) = w.take(n - 8, n - 8).await else {
                return;
            };
            let mut frame = BytesMut::with_capacity(n);
            frame.put_i16(key);
            frame.put_i16(version);
            frame.put_i32(correlation_id);
            frame.extend_from_slice(&rest);
            let mut frame = frame.freeze();
            if RequestHeader::decode(&mut frame, api.request_header_version(version)).is_err() {
                return;
            }
            let Ok(req) = RequestKind::decode(api, &mut frame, version) else {
                return;
            };
            if let RequestKind::Fetch(f) = &req {
                if broker.fetch_is_empty(f) {
                    // Flush what is queued first: the wait holds this connection.
                    if write_pieces(&mut w.s, &mut out).await.is_err() {
                        return;
                    }
                    let wait = f.max_wait_ms.clamp(0, 500) as u64;
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
            }
            let Some(resp) = broker.answer(api, req, &mut splices) else {
                return;
            };
            resp
        };
        push_frame(api, version, correlation_id, &resp, splices, &mut out);
    }
}

/// An answer's frame (size prefix included) onto `out`, as pieces: each
/// splice's sentinel and its length prefix (a 4-byte length, or in a
/// flexible Fetch a compact field's varint of length plus one) give way to
/// the splice's own length prefix and pieces, and the frame's size counts
/// what goes on the wire.
fn push_frame(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    resp: &ResponseKind,
    splices: Vec<Splice>,
    out: &mut Vec<Bytes>,
) {
    let mut body = BytesMut::new();
    body.put_i32(0); // the frame's size, set below
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut body, api.response_header_version(version))
        .expect("header");
    resp.encode(&mut body, version).expect("response");
    let compact = api == ApiKey::Fetch && version >= 12;
    let prefix = |len: usize| {
        let mut l = BytesMut::new();
        if compact {
            put_uvarlong(&mut l, len as u64 + 1);
        } else {
            l.put_i32(len as i32);
        }
        l.freeze()
    };
    let sentinel_prefix = prefix(16).len();
    let prefixes: Vec<Bytes> = splices.iter().map(|s| prefix(s.len())).collect();
    let mut size = body.len() - 4;
    for (s, p) in splices.iter().zip(&prefixes) {
        size = size - 16 - sentinel_prefix + p.len() + s.len();
    }
    body[..4].copy_from_slice(&(size as i32).to_be_bytes());
    let body = body.freeze();
    let mut at = 0;
    for (s, p) in splices.into_iter().zip(prefixes) {
        let found = body[at..]
            .windows(16)
            .position(|w| w == s.sentinel)
            .expect("sentinel in the encoded answer")
            + at;
        out.push(body.slice(at..found - sentinel_prefix));
        out.push(p);
        out.extend(s.pieces);
        at = found + 16;
    }
    out.push(body.slice(at..));
}

/// Copy + CRC32C of `n` records of `size` bytes: the least any client can
/// spend per record on its way to or from the wire. Records are copied into a
/// reused 1 MiB buffer (a batch's worth), checksummed a buffer at a time,
/// with the client's own CRC32C (the protocol crate's `record::crc`): the
/// floor is what the fastest checksum we know of leaves, not a slower one's.
fn floor(n: usize, size: usize) {
    let src = vec![b'x'; size];
    let per_buf = ((1 << 20) / size.max(1)).max(1);
    let mut dst: Vec<u8> = Vec::with_capacity(per_buf * size);
    let mut crc = 0u32;
    let t = Instant::now();
    let mut left = n;
    while left > 0 {
        dst.clear();
        for _ in 0..left.min(per_buf) {
            dst.extend_from_slice(&src);
        }
        crc = ferrokafka_protocol::record::crc::append(crc, &dst);
        left = left.saturating_sub(per_buf);
    }
    let us = t.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!("{us:.4} {crc}");
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let size = env_num("FAKE_VALUE_BYTES", 100);
    if args.get(1).map(String::as_str) == Some("--floor") {
        let n = args
            .get(2)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000);
        floor(n, size);
        return;
    }
    let port: u16 = args.get(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    let l = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let port = l.local_addr().unwrap().port();
    let batch_records = env_num("FAKE_BATCH_RECORDS", 1000).max(1);
    let broker = Arc::new(Broker {
        port,
        topics: Mutex::new(HashMap::new()),
        produced: Mutex::new(HashMap::new()),
        template: template(batch_records, size),
        batch_records: batch_records as i64,
        log_end: env_num("FAKE_LOG_END", 100_000_000) as i64,
    });
    println!("{port}");
    loop {
        let (s, _) = l.accept().await.unwrap();
        tokio::spawn(serve(broker.clone(), s));
    }
}
