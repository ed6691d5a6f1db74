//! What the consumer reads and where it stands (Java `SubscriptionState`).
//!
//! Pure state: the fetcher, the coordinator and the user-facing calls
//! (`seek`, `pause`, `position`) all go through it, under the consumer's lock.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::TopicPartition;
use crate::error::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionType {
    None,
    AutoTopics,
    AutoPattern,
    UserAssigned,
}

/// `auto.offset.reset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetResetStrategy {
    Earliest,
    Latest,
    /// No reset: a missing or out-of-range position is an error to the user.
    None,
}

impl OffsetResetStrategy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "earliest" | "smallest" | "beginning" => Some(Self::Earliest),
            "latest" | "largest" | "end" => Some(Self::Latest),
            "none" | "error" => Some(Self::None),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchState {
    /// Assigned, no position yet: needs a committed offset or a reset.
    Initializing,
    Fetching,
    /// Waiting for a ListOffsets answer.
    AwaitReset,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPosition {
    pub offset: i64,
    /// Epoch of the last record consumed (KIP-320), -1 if unknown.
    pub leader_epoch: i32,
}

#[derive(Debug, Clone)]
pub struct PartitionState {
    pub state: FetchState,
    pub position: Option<FetchPosition>,
    pub paused: bool,
    pub reset_strategy: Option<OffsetResetStrategy>,
    /// Earliest time the next reset may be sent (retry backoff after failure).
    pub next_reset_allowed_ms: i64,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub last_stable_offset: i64,
}

impl PartitionState {
    fn new() -> Self {
        PartitionState {
            state: FetchState::Initializing,
            position: None,
            paused: false,
            reset_strategy: None,
            next_reset_allowed_ms: 0,
            high_watermark: -1,
            log_start_offset: -1,
            last_stable_offset: -1,
        }
    }
}

#[derive(Debug)]
pub struct SubscriptionState {
    kind: SubscriptionType,
    topics: BTreeSet<String>,
    pattern: Option<String>,
    assignment: BTreeMap<TopicPartition, PartitionState>,
    default_reset: OffsetResetStrategy,
    /// Bumped on every assignment change, so an in-flight fetch or offset
    /// lookup for a revoked partition can be recognised and dropped.
    assignment_id: u64,
}

const MUTUALLY_EXCLUSIVE: &str =
    "subscription to topics, partitions and pattern are mutually exclusive";

impl SubscriptionState {
    pub fn new(default_reset: OffsetResetStrategy) -> Self {
        SubscriptionState {
            kind: SubscriptionType::None,
            topics: BTreeSet::new(),
            pattern: None,
            assignment: BTreeMap::new(),
            default_reset,
            assignment_id: 0,
        }
    }

    fn set_kind(&mut self, kind: SubscriptionType) -> Result<(), Error> {
        if self.kind == SubscriptionType::None || self.kind == kind {
            self.kind = kind;
            Ok(())
        } else {
            Err(Error::State {
                detail: MUTUALLY_EXCLUSIVE.into(),
            })
        }
    }

    pub fn kind(&self) -> SubscriptionType {
        self.kind
    }

    /// Subscribe to topic names. Returns true if the set changed (a rejoin is needed).
    pub fn subscribe(&mut self, topics: impl IntoIterator<Item = String>) -> Result<bool, Error> {
        self.set_kind(SubscriptionType::AutoTopics)?;
        let new: BTreeSet<String> = topics.into_iter().collect();
        let changed = new != self.topics;
        self.topics = new;
        Ok(changed)
    }

    pub fn subscribe_pattern(&mut self, pattern: String) -> Result<(), Error> {
        self.set_kind(SubscriptionType::AutoPattern)?;
        self.pattern = Some(pattern);
        Ok(())
    }

    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_deref()
    }

    /// For pattern subscriptions: the topics matching now (from metadata).
    pub fn set_pattern_topics(&mut self, topics: BTreeSet<String>) -> bool {
        let changed = topics != self.topics;
        self.topics = topics;
        changed
    }

    pub fn subscription(&self) -> &BTreeSet<String> {
        &self.topics
    }

    pub fn has_auto_assigned_partitions(&self) -> bool {
        matches!(
            self.kind,
            SubscriptionType::AutoTopics | SubscriptionType::AutoPattern
        )
    }

    /// `assign()`: manual assignment. Keeps the state of partitions that stay.
    pub fn assign_from_user(
        &mut self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<bool, Error> {
        self.set_kind(SubscriptionType::UserAssigned)?;
        let new: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        self.topics = new.iter().map(|tp| tp.topic.to_string()).collect();
        Ok(self.replace_assignment(new))
    }

    /// The coordinator's assignment after a rebalance. Partitions of topics we
    /// are not subscribed to are refused (a buggy or malicious leader).
    pub fn assign_from_subscribed(
        &mut self,
        partitions: impl IntoIterator<Item = TopicPartition>,
    ) -> Result<bool, Error> {
        if !self.has_auto_assigned_partitions() {
            return Err(Error::State {
                detail: "assignment from the group without a subscription".into(),
            });
        }
        let new: BTreeSet<TopicPartition> = partitions.into_iter().collect();
        if let Some(bad) = new.iter().find(|tp| !self.topics.contains(&*tp.topic)) {
            return Err(Error::State {
                detail: format!(
                    "assigned partition {}-{} of a topic not subscribed to",
                    bad.topic, bad.partition
                ),
            });
        }
        Ok(self.replace_assignment(new))
    }

    fn replace_assignment(&mut self, new: BTreeSet<TopicPartition>) -> bool {
        let old: BTreeSet<TopicPartition> = self.assignment.keys().cloned().collect();
        if old == new {
            return false;
        }
        self.assignment.retain(|tp, _| new.contains(tp));
        for tp in new {
            self.assignment
                .entry(tp)
                .or_insert_with(PartitionState::new);
        }
        self.assignment_id += 1;
        true
    }

    pub fn unsubscribe(&mut self) {
        self.kind = SubscriptionType::None;
        self.topics.clear();
        self.pattern = None;
        self.assignment.clear();
        self.assignment_id += 1;
    }

    pub fn assignment_id(&self) -> u64 {
        self.assignment_id
    }

    pub fn assigned_partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.assignment.keys()
    }

    pub fn is_assigned(&self, tp: &TopicPartition) -> bool {
        self.assignment.contains_key(tp)
    }

    pub fn state(&self, tp: &TopicPartition) -> Option<&PartitionState> {
        self.assignment.get(tp)
    }

    fn assigned_mut(&mut self, tp: &TopicPartition) -> Result<&mut PartitionState, Error> {
        self.assignment.get_mut(tp).ok_or_else(|| Error::State {
            detail: format!(
                "partition {}-{} is not assigned to this consumer",
                tp.topic, tp.partition
            ),
        })
    }

    pub fn seek(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
        leader_epoch: i32,
    ) -> Result<(), Error> {
        if offset < 0 {
            return Err(Error::Config {
                key: "offset".into(),
                detail: format!("seek offset must be >= 0, got {offset}"),
            });
        }
        let s = self.assigned_mut(tp)?;
        s.position = Some(FetchPosition {
            offset,
            leader_epoch,
        });
        s.state = FetchState::Fetching;
        s.reset_strategy = None;
        Ok(())
    }

    pub fn position(&self, tp: &TopicPartition) -> Option<FetchPosition> {
        self.assignment.get(tp).and_then(|s| s.position)
    }

    /// The fetcher consumed records up to `next_offset` (exclusive).
    pub fn advance(&mut self, tp: &TopicPartition, next_offset: i64, leader_epoch: i32) {
        if let Some(s) = self.assignment.get_mut(tp) {
            if s.state == FetchState::Fetching {
                s.position = Some(FetchPosition {
                    offset: next_offset,
                    leader_epoch,
                });
            }
        }
    }

    pub fn request_offset_reset(
        &mut self,
        tp: &TopicPartition,
        strategy: Option<OffsetResetStrategy>,
    ) -> Result<(), Error> {
        let default = self.default_reset;
        let s = self.assigned_mut(tp)?;
        let strategy = strategy.unwrap_or(default);
        s.reset_strategy = Some(strategy);
        s.state = FetchState::AwaitReset;
        s.position = None;
        s.next_reset_allowed_ms = 0;
        Ok(())
    }

    /// Partitions with no position and no committed offset take the default
    /// strategy; with `auto.offset.reset=none` that is an error for the user.
    pub fn reset_initializing_to_default(&mut self) -> Result<(), Error> {
        let default = self.default_reset;
        let mut missing = Vec::new();
        for (tp, s) in self.assignment.iter_mut() {
            if s.state == FetchState::Initializing {
                if default == OffsetResetStrategy::None {
                    missing.push(format!("{}-{}", tp.topic, tp.partition));
                } else {
                    s.reset_strategy = Some(default);
                    s.state = FetchState::AwaitReset;
                }
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            // Java's NoOffsetForPartitionException is an InvalidOffsetException,
            // the family of OFFSET_OUT_OF_RANGE.
            Err(Error::broker(
                1,
                Some(format!(
                    "no committed offset and auto_offset_reset is 'none' for: {}",
                    missing.join(", ")
                )),
            ))
        }
    }

    /// Partitions whose reset may be sent now, with their strategy.
    pub fn partitions_needing_reset(
        &self,
        now_ms: i64,
    ) -> Vec<(TopicPartition, OffsetResetStrategy)> {
        self.assignment
            .iter()
            .filter(|(_, s)| {
                s.state == FetchState::AwaitReset && !s.paused && now_ms >= s.next_reset_allowed_ms
            })
            .filter_map(|(tp, s)| s.reset_strategy.map(|r| (tp.clone(), r)))
            .collect()
    }

    /// A reset request is in flight: don't resend before `next_allowed_ms`.
    pub fn set_reset_pending(&mut self, tp: &TopicPartition, next_allowed_ms: i64) {
        if let Some(s) = self.assignment.get_mut(tp) {
            s.next_reset_allowed_ms = next_allowed_ms;
        }
    }

    /// ListOffsets answered for a reset: take the offset unless the user
    /// seeked meanwhile (then the reset is stale).
    pub fn maybe_complete_reset(
        &mut self,
        tp: &TopicPartition,
        offset: i64,
        leader_epoch: i32,
        strategy: OffsetResetStrategy,
    ) -> bool {
        match self.assignment.get_mut(tp) {
            Some(s) if s.state == FetchState::AwaitReset && s.reset_strategy == Some(strategy) => {
                s.position = Some(FetchPosition {
                    offset,
                    leader_epoch,
                });
                s.state = FetchState::Fetching;
                s.reset_strategy = None;
                true
            }
            _ => false,
        }
    }

    pub fn initializing_partitions(&self) -> Vec<TopicPartition> {
        self.assignment
            .iter()
            .filter(|(_, s)| s.state == FetchState::Initializing)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    pub fn has_all_fetch_positions(&self) -> bool {
        self.assignment
            .values()
            .all(|s| s.position.is_some() && s.state == FetchState::Fetching)
    }

    pub fn pause(&mut self, tp: &TopicPartition) -> Result<(), Error> {
        self.assigned_mut(tp)?.paused = true;
        Ok(())
    }

    pub fn resume(&mut self, tp: &TopicPartition) -> Result<(), Error> {
        self.assigned_mut(tp)?.paused = false;
        Ok(())
    }

    pub fn paused(&self) -> Vec<TopicPartition> {
        self.assignment
            .iter()
            .filter(|(_, s)| s.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// Partitions the fetcher may fetch now.
    pub fn fetchable_partitions(&self) -> Vec<(TopicPartition, FetchPosition)> {
        self.assignment
            .iter()
            .filter(|(_, s)| !s.paused && s.state == FetchState::Fetching)
            .filter_map(|(tp, s)| s.position.map(|p| (tp.clone(), p)))
            .collect()
    }

    /// Positions to commit (`commit()` with no arguments).
    pub fn all_consumed(&self) -> BTreeMap<TopicPartition, FetchPosition> {
        self.assignment
            .iter()
            .filter_map(|(tp, s)| s.position.map(|p| (tp.clone(), p)))
            .collect()
    }

    pub fn update_watermarks(
        &mut self,
        tp: &TopicPartition,
        high: i64,
        log_start: i64,
        last_stable: i64,
    ) {
        if let Some(s) = self.assignment.get_mut(tp) {
            s.high_watermark = high;
            s.log_start_offset = log_start;
            s.last_stable_offset = last_stable;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    #[test]
    fn subscribe_and_assign_are_exclusive() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::Latest);
        assert!(s.subscribe(["t".to_string()]).unwrap());
        assert!(!s.subscribe(["t".to_string()]).unwrap());
        assert!(s.assign_from_user([tp(0)]).is_err());
        s.unsubscribe();
        assert!(s.assign_from_user([tp(0)]).unwrap());
        assert!(s.subscribe(["t".to_string()]).is_err());
    }

    #[test]
    fn group_assignment_must_match_subscription() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::Latest);
        s.subscribe(["t".to_string()]).unwrap();
        assert!(s
            .assign_from_subscribed([TopicPartition::new("other", 0)])
            .is_err());
        assert!(s.assign_from_subscribed([tp(0), tp(1)]).unwrap());
        assert_eq!(s.initializing_partitions(), vec![tp(0), tp(1)]);
    }

    #[test]
    fn positions_seek_reset_and_fetchable() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::Earliest);
        s.assign_from_user([tp(0), tp(1)]).unwrap();
        assert!(!s.has_all_fetch_positions());
        s.seek(&tp(0), 5, -1).unwrap();
        s.reset_initializing_to_default().unwrap();
        assert_eq!(
            s.partitions_needing_reset(0),
            vec![(tp(1), OffsetResetStrategy::Earliest)]
        );
        s.set_reset_pending(&tp(1), 100);
        assert!(s.partitions_needing_reset(50).is_empty());
        assert!(s.maybe_complete_reset(&tp(1), 0, 3, OffsetResetStrategy::Earliest));
        assert!(s.has_all_fetch_positions());
        s.advance(&tp(0), 9, 2);
        assert_eq!(s.position(&tp(0)).unwrap().offset, 9);
        s.pause(&tp(1)).unwrap();
        let f: Vec<_> = s
            .fetchable_partitions()
            .into_iter()
            .map(|(tp, _)| tp)
            .collect();
        assert_eq!(f, vec![tp(0)]);
        assert_eq!(s.paused(), vec![tp(1)]);
        assert!(s.seek(&tp(7), 0, -1).is_err(), "not assigned");
        assert!(s.seek(&tp(0), -3, -1).is_err(), "negative offset");
    }

    #[test]
    fn seek_during_reset_makes_the_reset_stale() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::Latest);
        s.assign_from_user([tp(0)]).unwrap();
        s.request_offset_reset(&tp(0), None).unwrap();
        s.seek(&tp(0), 42, -1).unwrap();
        assert!(!s.maybe_complete_reset(&tp(0), 100, -1, OffsetResetStrategy::Latest));
        assert_eq!(s.position(&tp(0)).unwrap().offset, 42);
    }

    #[test]
    fn reset_none_is_an_error() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::None);
        s.assign_from_user([tp(0)]).unwrap();
        let e = s.reset_initializing_to_default().unwrap_err();
        assert!(e.to_string().contains("t-0"), "{e}");
    }

    #[test]
    fn reassignment_keeps_state_of_partitions_that_stay() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::Latest);
        s.assign_from_user([tp(0), tp(1)]).unwrap();
        s.seek(&tp(0), 7, -1).unwrap();
        let id = s.assignment_id();
        s.assign_from_user([tp(0), tp(2)]).unwrap();
        assert_eq!(s.position(&tp(0)).unwrap().offset, 7);
        assert!(!s.is_assigned(&tp(1)));
        assert!(s.assignment_id() > id);
    }
}
