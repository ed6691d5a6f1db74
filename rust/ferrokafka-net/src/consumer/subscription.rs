//! What the consumer reads and where it stands (Java `SubscriptionState`).
//!
//! Pure state: the fetcher, the coordinator and the user-facing calls
//! (`seek`, `pause`, `position`) all go through it, under the consumer's lock.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use regex::Regex;

use crate::cluster::{Cluster, TopicPartition};
use crate::consumer::requests::OffsetAndMetadata;
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

impl FetchPosition {
    /// This position as an offset to commit (no metadata string).
    pub fn to_commit(self) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata: None,
        }
    }
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

/// A pattern subscription (Java `subscribe(Pattern)`): the regex, and which
/// metadata it was matched against.
#[derive(Debug)]
struct TopicPattern {
    source: String,
    /// `source` anchored at both ends: Java matches the whole topic name
    /// (`Pattern.matcher(topic).matches()`), not a prefix or a substring.
    regex: Regex,
    /// The metadata update version the topics were last matched at.
    matched_at: Option<i32>,
    /// The version when it was subscribed: a join waits for a match against
    /// a later one, so the first assignment is not made from stale topics.
    subscribed_at: i32,
}

#[derive(Debug)]
pub struct SubscriptionState {
    kind: SubscriptionType,
    topics: BTreeSet<String>,
    pattern: Option<TopicPattern>,
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

    /// Subscribe to the topics whose whole name matches `pattern`, a regex in
    /// the dialect of Rust's `regex` crate. For the patterns topic names need
    /// it reads as Java's `java.util.regex`; the differences are features the
    /// crate lacks (look-around, backreferences, possessive quantifiers: such
    /// a pattern is refused here, never matched differently) and `\w`, `\d`
    /// and `\s` also matching non-ASCII letters, digits and spaces, which
    /// Kafka topic names (ASCII letters, digits, `.`, `_`, `-`) cannot hold.
    /// `metadata_version`: the current metadata update version; the topics
    /// are matched by `match_pattern` from metadata newer than that. The
    /// topics of a previous pattern stay subscribed until then.
    pub fn subscribe_pattern(&mut self, pattern: &str, metadata_version: i32) -> Result<(), Error> {
        let regex = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| Error::Config {
            key: "pattern".into(),
            detail: format!("{pattern:?} is not a valid regex: {e}"),
        })?;
        self.set_kind(SubscriptionType::AutoPattern)?;
        self.pattern = Some(TopicPattern {
            source: pattern.to_string(),
            regex,
            matched_at: None,
            subscribed_at: metadata_version,
        });
        Ok(())
    }

    pub fn pattern(&self) -> Option<&str> {
        self.pattern.as_ref().map(|p| p.source.as_str())
    }

    /// Pattern subscriptions: subscribe to the non-internal topics of
    /// `cluster()` that match, unless metadata update `version` was matched
    /// already (Java re-matches on every metadata update). `cluster` must
    /// give a snapshot at least as new as `version`. True if the topics changed.
    pub fn match_pattern(&mut self, version: i32, cluster: impl FnOnce() -> Arc<Cluster>) -> bool {
        let Some(p) = self.pattern.as_mut() else {
            return false;
        };
        if p.matched_at == Some(version) {
            return false;
        }
        p.matched_at = Some(version);
        let cluster = cluster();
        let internal = cluster.internal_topics();
        let topics: BTreeSet<String> = cluster
            .topics()
            .into_iter()
            .filter(|t| !internal.contains(*t) && p.regex.is_match(t))
            .map(str::to_string)
            .collect();
        let changed = topics != self.topics;
        self.topics = topics;
        changed
    }

    /// False while a pattern subscription waits for its first match against
    /// metadata fetched after `subscribe_pattern`: the group is not joined
    /// with the topics of an older pattern or of stale metadata.
    pub fn pattern_ready(&self) -> bool {
        self.pattern
            .as_ref()
            .is_none_or(|p| p.matched_at.is_some_and(|v| v > p.subscribed_at))
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
    /// What a commit of every assigned partition sends: each consumed
    /// position as an offset to commit, with its leader epoch.
    pub fn consumed_offsets(&self) -> BTreeMap<TopicPartition, OffsetAndMetadata> {
        self.all_consumed()
            .into_iter()
            .map(|(tp, p)| (tp, p.to_commit()))
            .collect()
    }

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

    fn cluster(topics: &[&str], internal: &[&str]) -> Arc<Cluster> {
        use crate::cluster::{Node, PartitionMetadata};
        let partitions = topics
            .iter()
            .map(|t| {
                (
                    t.to_string(),
                    vec![PartitionMetadata::new(0, 1, 0, vec![1], vec![1])],
                )
            })
            .collect();
        Arc::new(Cluster::new(
            None,
            vec![Node::new(1, "h", 9092, None)],
            partitions,
            &Default::default(),
            internal.iter().map(|t| t.to_string()).collect(),
            BTreeSet::new(),
            BTreeSet::new(),
            None,
        ))
    }

    #[test]
    fn pattern_matches_whole_non_internal_names_once_per_metadata_version() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::Latest);
        s.subscribe_pattern("orders-.*|audit", 3).unwrap();
        assert!(!s.pattern_ready(), "no match yet");
        let all = [
            "orders-eu",
            "orders-us",
            "audit",
            "audit-log",
            "x-orders-eu",
            "__consumer_offsets",
        ];
        // Version 3 is what subscribe saw: matched, but not yet ready to join.
        assert!(s.match_pattern(3, || cluster(&all[..2], &[])));
        assert!(!s.pattern_ready());
        assert!(s.match_pattern(4, || cluster(&all, &["__consumer_offsets"])));
        assert!(s.pattern_ready());
        // Whole names only: not "audit-log" (a prefix match) nor "x-orders-eu".
        let want: BTreeSet<String> = ["audit", "orders-eu", "orders-us"].map(String::from).into();
        assert_eq!(s.subscription(), &want);
        assert!(!s.match_pattern(4, || unreachable!("version 4 was matched")));
        assert!(
            !s.match_pattern(5, || cluster(&all, &[])),
            "same topics: no change"
        );
        // A topic deleted, another created: both seen at the next version.
        assert!(s.match_pattern(6, || cluster(&["orders-eu", "orders-apac", "audit"], &[])));
        let want: BTreeSet<String> = ["audit", "orders-apac", "orders-eu"]
            .map(String::from)
            .into();
        assert_eq!(s.subscription(), &want);
    }

    #[test]
    fn pattern_subscription_rules() {
        let mut s = SubscriptionState::new(OffsetResetStrategy::Latest);
        let e = s.subscribe_pattern("(?<=x)y", 0).unwrap_err();
        assert!(e.to_string().contains("not a valid regex"), "{e}");
        assert_eq!(
            s.kind(),
            SubscriptionType::None,
            "a refused pattern subscribes nothing"
        );
        // A literal `|` cannot escape the anchors: `^(?:a|b)$`, not `^a|b$`.
        s.subscribe_pattern("a|b", 0).unwrap();
        s.match_pattern(1, || cluster(&["a", "b", "ab", "xb", "ax"], &[]));
        assert_eq!(s.subscription().len(), 2);
        assert!(
            s.subscribe(["t".to_string()]).is_err(),
            "topics and pattern are exclusive"
        );
        s.unsubscribe();
        assert!(s.pattern().is_none() && s.pattern_ready());
        assert!(!s.match_pattern(2, || unreachable!("no pattern")));
        s.subscribe(["t".to_string()]).unwrap();
        assert!(s.subscribe_pattern("t", 0).is_err());
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
