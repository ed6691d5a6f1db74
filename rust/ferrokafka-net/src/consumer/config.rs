//! The consumer's configuration and what `poll` returns.

use std::collections::HashMap;
use std::sync::Arc;

use crate::cluster::TopicPartition;
use crate::consumer::assignor;
use crate::consumer::records::RecordColumns;
use crate::consumer::subscription::OffsetResetStrategy;
use crate::error::Error;

#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    pub group_id: Option<String>,
    pub group_instance_id: Option<String>,
    pub auto_offset_reset: OffsetResetStrategy,
    pub enable_auto_commit: bool,
    pub auto_commit_interval_ms: i64,
    pub session_timeout_ms: i64,
    pub heartbeat_interval_ms: i64,
    pub max_poll_interval_ms: i64,
    /// Assignor protocol names, preferred first.
    pub assignors: Vec<String>,
    pub fetch_min_bytes: i32,
    pub fetch_max_bytes: i32,
    pub fetch_max_wait_ms: i32,
    pub max_partition_fetch_bytes: i32,
    pub read_committed: bool,
    pub check_crcs: bool,
    pub client_rack: Option<String>,
    pub retry_backoff_ms: i64,
    pub request_timeout_ms: i64,
    pub default_api_timeout_ms: i64,
    /// Classic (JoinGroup/SyncGroup) or KIP-848 (ConsumerGroupHeartbeat).
    pub group_protocol: GroupProtocol,
    /// KIP-848: the coordinator's assignor to use (None: its default).
    pub group_remote_assignor: Option<String>,
}

/// Java `group.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupProtocol {
    #[default]
    Classic,
    /// KIP-848: the coordinator assigns, the member reconciles
    /// (docs/semantics.md §6).
    Consumer,
}

impl GroupProtocol {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "classic" => Some(GroupProtocol::Classic),
            "consumer" => Some(GroupProtocol::Consumer),
            _ => None,
        }
    }
}

/// The coordinator-side assignors a KIP-848 member may ask for.
pub const REMOTE_ASSIGNORS: &[&str] = &["uniform", "range"];

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            group_id: None,
            group_instance_id: None,
            auto_offset_reset: OffsetResetStrategy::Latest,
            enable_auto_commit: true,
            auto_commit_interval_ms: 5000,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 3000,
            max_poll_interval_ms: 300_000,
            assignors: vec!["range".into(), "cooperative-sticky".into()],
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            fetch_max_wait_ms: 500,
            max_partition_fetch_bytes: 1_048_576,
            read_committed: false,
            check_crcs: true,
            client_rack: None,
            retry_backoff_ms: 100,
            request_timeout_ms: 30_000,
            default_api_timeout_ms: 60_000,
            group_protocol: GroupProtocol::Classic,
            group_remote_assignor: None,
        }
    }
}

impl ConsumerConfig {
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, detail: String| {
            Err(Error::Config {
                key: key.into(),
                detail,
            })
        };
        // Only a group member heartbeats (Java builds its Heartbeat, and makes
        // this check, only with a group id).
        if self.group_id.is_some() && self.heartbeat_interval_ms >= self.session_timeout_ms {
            return bad(
                "heartbeat_interval_ms",
                format!(
                    "must be lower than session_timeout_ms ({})",
                    self.session_timeout_ms
                ),
            );
        }
        if self.assignors.is_empty() {
            return bad(
                "partition_assignment_strategy",
                "needs at least one assignor".into(),
            );
        }
        for a in &self.assignors {
            if assignor::assign(a, &[], &HashMap::new()).is_none() {
                return bad(
                    "partition_assignment_strategy",
                    format!("unknown assignor {a:?}"),
                );
            }
        }
        if let Some(a) = &self.group_remote_assignor {
            if !REMOTE_ASSIGNORS.contains(&a.as_str()) {
                return bad(
                    "group_remote_assignor",
                    format!("unknown assignor {a:?} (expected one of {REMOTE_ASSIGNORS:?})"),
                );
            }
            if self.group_protocol != GroupProtocol::Consumer {
                return bad(
                    "group_remote_assignor",
                    "only used with group_protocol=\"consumer\"".into(),
                );
            }
        }
        if self.group_instance_id.is_some() && self.group_id.is_none() {
            return bad("group_instance_id", "needs group_id".into());
        }
        Ok(())
    }

    /// Java: cooperative only when every configured assignor supports it.
    pub(crate) fn cooperative(&self) -> bool {
        self.assignors.iter().all(|a| a == "cooperative-sticky")
    }
}

/// What `poll` hands the application before records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebalanceEvent {
    Revoked(Vec<TopicPartition>),
    Assigned(Vec<TopicPartition>),
    Lost(Vec<TopicPartition>),
}

/// Rows `[from, to)` of one partition's decoded fetch.
#[derive(Debug, Clone)]
pub struct RecordSlice {
    pub tp: TopicPartition,
    pub cols: Arc<RecordColumns>,
    pub from: usize,
    pub to: usize,
}

/// One `poll`'s result. Events come first and alone: records are returned by
/// the next call, once the callbacks have run.
#[derive(Debug, Default)]
pub struct Polled {
    pub events: Vec<RebalanceEvent>,
    pub records: Vec<RecordSlice>,
    /// Outcomes of asynchronous commits: (token, result).
    pub commits: Vec<(u64, Result<(), Error>)>,
}
