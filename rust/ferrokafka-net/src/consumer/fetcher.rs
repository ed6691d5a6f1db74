//! Fetch planning and per-partition error handling (Java `AbstractFetch`).
//!
//! Planning: fetchable partitions grouped by their leader; at most one fetch
//! in flight per node (a second would return the same bytes again), and a
//! partition whose previous answer is still buffered (not yet handed to the
//! application) is not fetched again, so memory stays bounded by
//! `max_partition_fetch_bytes` per partition.

use std::collections::{BTreeMap, HashSet};

use crate::cluster::TopicPartition;
use crate::consumer::subscription::FetchPosition;

/// Kafka error codes: the one table in the protocol crate.
pub use ferrokafka_protocol::codes;

/// What a partition's Fetch error means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchReaction {
    /// Records (possibly none): hand them out, advance the position.
    Deliver,
    /// Routing is stale: refresh metadata, fetch again later.
    RefreshMetadata,
    /// Transient: fetch again (next round).
    Retry,
    /// The position is outside the log: reset by `auto_offset_reset`, or raise
    /// OffsetOutOfRange to the user when the strategy is none.
    OffsetOutOfRange,
    /// Surface to the user (authorization, corruption, unknown codes).
    Raise(i16),
}

pub fn fetch_reaction(code: i16) -> FetchReaction {
    use codes::*;
    match code {
        NONE => FetchReaction::Deliver,
        NOT_LEADER_OR_FOLLOWER
        | REPLICA_NOT_AVAILABLE
        | KAFKA_STORAGE_ERROR
        | FENCED_LEADER_EPOCH
        | OFFSET_NOT_AVAILABLE
        | UNKNOWN_TOPIC_OR_PARTITION
        | UNKNOWN_TOPIC_ID
        | INCONSISTENT_TOPIC_ID => FetchReaction::RefreshMetadata,
        // The leader has not caught up with our epoch yet.
        UNKNOWN_LEADER_EPOCH => FetchReaction::Retry,
        OFFSET_OUT_OF_RANGE => FetchReaction::OffsetOutOfRange,
        _ => FetchReaction::Raise(code),
    }
}

/// One partition to fetch and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFetch {
    pub tp: TopicPartition,
    pub position: FetchPosition,
}

/// Group `fetchable` partitions by leader, skipping nodes with a fetch in
/// flight, partitions with buffered data and partitions without a leader
/// (those are returned in the second value: their topics need metadata).
pub fn plan_fetches(
    fetchable: &[(TopicPartition, FetchPosition)],
    leader_of: impl Fn(&TopicPartition) -> Option<i32>,
    nodes_in_flight: &HashSet<i32>,
    buffered: &HashSet<TopicPartition>,
) -> (BTreeMap<i32, Vec<PlannedFetch>>, Vec<TopicPartition>) {
    let mut plan: BTreeMap<i32, Vec<PlannedFetch>> = BTreeMap::new();
    let mut no_leader = Vec::new();
    for (tp, pos) in fetchable {
        if buffered.contains(tp) {
            continue;
        }
        match leader_of(tp) {
            None => no_leader.push(tp.clone()),
            Some(node) if nodes_in_flight.contains(&node) => {}
            Some(node) => plan.entry(node).or_default().push(PlannedFetch {
                tp: tp.clone(),
                position: *pos,
            }),
        }
    }
    (plan, no_leader)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(o: i64) -> FetchPosition {
        FetchPosition {
            offset: o,
            leader_epoch: -1,
        }
    }

    #[test]
    fn plan_groups_by_leader_and_skips_busy_nodes_and_buffered() {
        let tps: Vec<_> = (0..4)
            .map(|p| (TopicPartition::new("t", p), pos(p as i64)))
            .collect();
        let leader = |tp: &TopicPartition| match tp.partition {
            0 | 1 => Some(1),
            2 => Some(2),
            _ => None,
        };
        let buffered: HashSet<_> = [TopicPartition::new("t", 1)].into();
        let (plan, no_leader) = plan_fetches(&tps, leader, &HashSet::new(), &buffered);
        assert_eq!(plan[&1].len(), 1);
        assert_eq!(plan[&2][0].tp.partition, 2);
        assert_eq!(no_leader, vec![TopicPartition::new("t", 3)]);
        let busy: HashSet<i32> = [2].into();
        let (plan, _) = plan_fetches(&tps, leader, &busy, &HashSet::new());
        assert!(!plan.contains_key(&2));
    }

    #[test]
    fn error_table() {
        assert_eq!(fetch_reaction(0), FetchReaction::Deliver);
        assert_eq!(
            fetch_reaction(codes::NOT_LEADER_OR_FOLLOWER),
            FetchReaction::RefreshMetadata
        );
        assert_eq!(
            fetch_reaction(codes::FENCED_LEADER_EPOCH),
            FetchReaction::RefreshMetadata
        );
        assert_eq!(
            fetch_reaction(codes::UNKNOWN_LEADER_EPOCH),
            FetchReaction::Retry
        );
        assert_eq!(
            fetch_reaction(codes::OFFSET_OUT_OF_RANGE),
            FetchReaction::OffsetOutOfRange
        );
        assert_eq!(
            fetch_reaction(codes::TOPIC_AUTHORIZATION_FAILED),
            FetchReaction::Raise(29)
        );
    }
}
