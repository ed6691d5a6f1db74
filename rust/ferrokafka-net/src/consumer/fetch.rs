//! Fetch and ListOffsets request building and answer parsing, for the
//! consumer's fetcher and for offset lookups (`beginning_offsets`,
//! `end_offsets`, `offsets_for_times`, resets).
//!
//! Sessionless fetches (session id 0, epoch -1, KIP-227's "full fetch, no
//! session"): every request names every partition. Simple and always
//! correct; incremental sessions are an optimisation for many partitions.

use std::collections::BTreeMap;

use bytes::Bytes;
use ferrokafka_protocol::kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use ferrokafka_protocol::kafka_protocol::messages::fetch_response::FetchResponse;
use ferrokafka_protocol::kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use ferrokafka_protocol::kafka_protocol::messages::list_offsets_response::ListOffsetsResponse;
use ferrokafka_protocol::kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, TopicName,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;

use crate::cluster::TopicPartition;

/// ListOffsets special timestamps.
pub const LATEST_TIMESTAMP: i64 = -1;
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const MAX_TIMESTAMP: i64 = -3;

/// `isolation.level` on the wire.
pub const READ_UNCOMMITTED: i8 = 0;
pub const READ_COMMITTED: i8 = 1;

#[derive(Debug, Clone)]
pub struct PartitionFetch {
    pub tp: TopicPartition,
    pub topic_id: Option<[u8; 16]>,
    pub fetch_offset: i64,
    /// KIP-320: the epoch of our position, so a leader that lost data
    /// answers FENCED/UNKNOWN_LEADER_EPOCH instead of serving a divergent log.
    pub current_leader_epoch: i32,
    pub partition_max_bytes: i32,
}

#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub isolation_level: i8,
}

fn topic_name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

pub fn build_fetch_request(
    limits: FetchLimits,
    partitions: &[PartitionFetch],
    rack: &str,
) -> FetchRequest {
    let mut by_topic: BTreeMap<&str, (Option<[u8; 16]>, Vec<FetchPartition>)> = BTreeMap::new();
    for p in partitions {
        let e = by_topic
            .entry(&p.tp.topic)
            .or_insert((p.topic_id, Vec::new()));
        e.1.push(
            FetchPartition::default()
                .with_partition(p.tp.partition)
                .with_current_leader_epoch(p.current_leader_epoch)
                .with_fetch_offset(p.fetch_offset)
                .with_log_start_offset(-1)
                .with_partition_max_bytes(p.partition_max_bytes),
        );
    }
    let topics = by_topic
        .into_iter()
        .map(|(t, (id, parts))| {
            let mut ft = FetchTopic::default()
                .with_topic(topic_name(t))
                .with_partitions(parts);
            if let Some(id) = id {
                ft.topic_id = uuid::Uuid::from_bytes(id);
            }
            ft
        })
        .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(limits.max_wait_ms)
        .with_min_bytes(limits.min_bytes)
        .with_max_bytes(limits.max_bytes)
        .with_isolation_level(limits.isolation_level)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
        .with_rack_id(StrBytes::from_string(rack.to_string()))
}

/// The newest Fetch version `partitions` can go out at: from v13 topics
/// are named by id only, so unless every partition has its topic id, names
/// (up to v12). None: no limit.
pub fn fetch_max_version(partitions: &[PartitionFetch]) -> Option<i16> {
    if partitions.iter().all(|p| p.topic_id.is_some()) {
        None
    } else {
        Some(12)
    }
}

/// `build_fetch_request` for `version`, the one the request goes out at:
/// topic ids from v13 on, names before (the encoder refuses a field its
/// version lacks). Use with `fetch_max_version`.
pub fn fetch_request(
    limits: FetchLimits,
    partitions: &[PartitionFetch],
    rack: &str,
    version: i16,
) -> FetchRequest {
    if version < 13 {
        let named: Vec<PartitionFetch> = partitions
            .iter()
            .map(|p| PartitionFetch {
                topic_id: None,
                ..p.clone()
            })
            .collect();
        return build_fetch_request(limits, &named, rack);
    }
    let mut req = build_fetch_request(limits, partitions, rack);
    for t in &mut req.topics {
        t.topic = Default::default();
    }
    req
}

#[derive(Debug, Clone)]
pub struct PartitionFetchResult {
    pub tp: TopicPartition,
    pub error_code: i16,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    /// (producer id, first offset) of transactions aborted in this range,
    /// for read_committed filtering.
    pub aborted_transactions: Vec<(i64, i64)>,
    pub preferred_read_replica: i32,
    /// Raw record batches, possibly ending in a partial batch.
    pub records: Bytes,
    /// KIP-951 leader hint on NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH.
    pub current_leader: Option<(i32, i32)>,
}

/// Flatten a Fetch answer; v13+ answers name topics by id only.
pub fn parse_fetch_response(
    resp: &FetchResponse,
    topic_names: &dyn Fn(&[u8; 16]) -> Option<String>,
) -> (i16, Vec<PartitionFetchResult>) {
    let mut out = Vec::new();
    for t in &resp.responses {
        let name = if t.topic.0.is_empty() {
            match topic_names(t.topic_id.as_bytes()) {
                Some(n) => n,
                None => continue,
            }
        } else {
            t.topic.0.to_string()
        };
        for p in &t.partitions {
            out.push(PartitionFetchResult {
                tp: TopicPartition::new(name.as_str(), p.partition_index),
                error_code: p.error_code,
                high_watermark: p.high_watermark,
                last_stable_offset: p.last_stable_offset,
                log_start_offset: p.log_start_offset,
                aborted_transactions: p
                    .aborted_transactions
                    .as_ref()
                    .map(|v| {
                        v.iter()
                            .map(|a| (a.producer_id.0, a.first_offset))
                            .collect()
                    })
                    .unwrap_or_default(),
                preferred_read_replica: p.preferred_read_replica.0,
                records: p.records.clone().unwrap_or_default(),
                current_leader: (p.current_leader.leader_id.0 >= 0)
                    .then_some((p.current_leader.leader_id.0, p.current_leader.leader_epoch)),
            });
        }
    }
    (resp.error_code, out)
}

pub fn build_list_offsets_request(
    isolation_level: i8,
    partitions: &[(TopicPartition, i64, i32)],
    timeout_ms: i32,
) -> ListOffsetsRequest {
    let mut by_topic: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
    for (tp, ts, epoch) in partitions {
        by_topic.entry(&tp.topic).or_default().push(
            ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_current_leader_epoch(*epoch)
                .with_timestamp(*ts),
        );
    }
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_timeout_ms(timeout_ms)
        .with_topics(
            by_topic
                .into_iter()
                .map(|(t, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(ps)
                })
                .collect(),
        )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListOffsetsResult {
    pub tp: TopicPartition,
    pub error_code: i16,
    /// -1 when no record matches (offsets_for_times past the end).
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: i32,
}

pub fn parse_list_offsets_response(resp: &ListOffsetsResponse) -> Vec<ListOffsetsResult> {
    resp.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| ListOffsetsResult {
                tp: TopicPartition::new(t.name.0.as_str(), p.partition_index),
                error_code: p.error_code,
                offset: p.offset,
                timestamp: p.timestamp,
                leader_epoch: p.leader_epoch,
            })
        })
        .collect()
}

/// What the read_committed filter needs to know of a record batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchInfo {
    pub last_offset: i64,
    pub producer_id: i64,
    pub is_transactional: bool,
    /// `Some(true)` for a COMMIT marker, `Some(false)` for ABORT, `None` for data.
    pub control_commit: Option<bool>,
}

/// read_committed filtering of one partition's fetched batches (Java
/// `CompletedFetch`): a transactional batch is dropped when its producer has
/// an aborted transaction that started at or before the batch's end, until
/// that producer's ABORT marker is seen. Control batches are never returned.
///
/// Feed batches in offset order; for read_uncommitted only control batches
/// are dropped.
#[derive(Debug)]
pub struct AbortedTransactionFilter {
    read_committed: bool,
    /// Aborted transactions not yet reached, by first offset ascending.
    pending: std::collections::VecDeque<(i64, i64)>,
    /// Producers whose aborted transaction is open at the current offset.
    aborted_producers: std::collections::HashSet<i64>,
}

impl AbortedTransactionFilter {
    pub fn new(read_committed: bool, mut aborted: Vec<(i64, i64)>) -> Self {
        aborted.sort_by_key(|&(_, first)| first);
        AbortedTransactionFilter {
            read_committed,
            pending: aborted.into(),
            aborted_producers: Default::default(),
        }
    }

    /// True when the batch must not reach the application.
    pub fn skip(&mut self, b: &BatchInfo) -> bool {
        if self.read_committed && b.producer_id >= 0 {
            while let Some(&(pid, first)) = self.pending.front() {
                if first > b.last_offset {
                    break;
                }
                self.aborted_producers.insert(pid);
                self.pending.pop_front();
            }
        }
        if let Some(commit) = b.control_commit {
            if self.read_committed && !commit {
                self.aborted_producers.remove(&b.producer_id);
            }
            return true;
        }
        self.read_committed && b.is_transactional && self.aborted_producers.contains(&b.producer_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use ferrokafka_protocol::kafka_protocol::protocol::Encodable;

    #[test]
    fn fetch_request_groups_by_topic_and_encodes_every_version() {
        let parts = vec![
            PartitionFetch {
                tp: TopicPartition::new("t", 1),
                topic_id: Some([9; 16]),
                fetch_offset: 10,
                current_leader_epoch: 3,
                partition_max_bytes: 1 << 20,
            },
            PartitionFetch {
                tp: TopicPartition::new("t", 0),
                topic_id: Some([9; 16]),
                fetch_offset: 0,
                current_leader_epoch: -1,
                partition_max_bytes: 1 << 20,
            },
        ];
        let limits = FetchLimits {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 50 << 20,
            isolation_level: READ_COMMITTED,
        };
        let req = build_fetch_request(limits, &parts, "");
        assert_eq!(req.topics.len(), 1);
        assert_eq!(req.topics[0].partitions.len(), 2);
        assert_eq!(req.session_epoch, -1);
        for v in 4..=17 {
            let mut b = BytesMut::new();
            req.encode(&mut b, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }

    #[test]
    fn fetch_request_names_topics_by_name_or_id_as_its_version_does() {
        let part = |id| PartitionFetch {
            tp: TopicPartition::new("t", 0),
            topic_id: id,
            fetch_offset: 5,
            current_leader_epoch: -1,
            partition_max_bytes: 1 << 20,
        };
        let limits = FetchLimits {
            max_wait_ms: 100,
            min_bytes: 1,
            max_bytes: 1 << 20,
            isolation_level: READ_UNCOMMITTED,
        };
        assert_eq!(fetch_max_version(&[part(None)]), Some(12));
        assert_eq!(fetch_max_version(&[part(Some([1; 16]))]), None);
        assert_eq!(
            fetch_max_version(&[part(Some([1; 16])), part(None)]),
            Some(12)
        );
        for v in 4..=17 {
            let req = fetch_request(limits, &[part(Some([1; 16]))], "", v);
            let t = &req.topics[0];
            if v < 13 {
                assert_eq!(t.topic.0.as_str(), "t", "v{v}");
                assert!(t.topic_id.is_nil(), "v{v}");
            } else {
                assert!(t.topic.0.is_empty(), "v{v}");
                assert_eq!(t.topic_id.as_bytes(), &[1; 16], "v{v}");
            }
            let mut b = BytesMut::new();
            req.encode(&mut b, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }

    #[test]
    fn list_offsets_encodes_every_version() {
        let req = build_list_offsets_request(
            READ_UNCOMMITTED,
            &[
                (TopicPartition::new("a", 0), EARLIEST_TIMESTAMP, -1),
                (TopicPartition::new("a", 1), LATEST_TIMESTAMP, -1),
            ],
            30_000,
        );
        assert_eq!(req.topics[0].partitions.len(), 2);
        for v in 1..=9 {
            let mut b = BytesMut::new();
            req.encode(&mut b, v)
                .unwrap_or_else(|e| panic!("v{v}: {e}"));
        }
    }

    fn data(last: i64, pid: i64, txn: bool) -> BatchInfo {
        BatchInfo {
            last_offset: last,
            producer_id: pid,
            is_transactional: txn,
            control_commit: None,
        }
    }

    fn marker(last: i64, pid: i64, commit: bool) -> BatchInfo {
        BatchInfo {
            last_offset: last,
            producer_id: pid,
            is_transactional: true,
            control_commit: Some(commit),
        }
    }

    #[test]
    fn read_committed_drops_aborted_and_markers() {
        // Producer 1 aborts [0..=4] (marker at 5), producer 2 commits [6..=7] (marker 8),
        // producer 1 then commits [9..=10] (marker 11).
        let mut f = AbortedTransactionFilter::new(true, vec![(1, 0)]);
        assert!(f.skip(&data(4, 1, true)));
        assert!(f.skip(&marker(5, 1, false)));
        assert!(!f.skip(&data(7, 2, true)));
        assert!(f.skip(&marker(8, 2, true)));
        assert!(
            !f.skip(&data(10, 1, true)),
            "after its ABORT marker producer 1 is clean again"
        );
        assert!(f.skip(&marker(11, 1, true)));
        assert!(
            !f.skip(&data(12, -1, false)),
            "non-transactional data always passes"
        );
    }

    #[test]
    fn read_uncommitted_only_drops_markers() {
        let mut f = AbortedTransactionFilter::new(false, vec![(1, 0)]);
        assert!(!f.skip(&data(4, 1, true)));
        assert!(f.skip(&marker(5, 1, false)));
    }
}
