//! The share consumer's settings (filled from the option table).

use crate::error::Error;

/// How records returned by `poll` get acknowledged (Java's
/// `share.acknowledgement.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckMode {
    /// Every record a poll returned is accepted at the next poll or commit,
    /// unless the application acknowledged it otherwise.
    Implicit,
    /// The application acknowledges every record itself; polling again with
    /// records of the previous poll unacknowledged is an error.
    Explicit,
}

impl AckMode {
    pub fn from_name(s: &str) -> Option<AckMode> {
        match s {
            "implicit" => Some(AckMode::Implicit),
            "explicit" => Some(AckMode::Explicit),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ShareConfig {
    pub group_id: String,
    pub client_rack: Option<String>,
    pub ack_mode: AckMode,
    /// Most records one poll returns; also ShareFetch's max_records.
    pub max_poll_records: i32,
    pub fetch_min_bytes: i32,
    pub fetch_max_bytes: i32,
    pub fetch_max_wait_ms: i32,
    pub max_partition_fetch_bytes: i32,
    pub check_crcs: bool,
    pub request_timeout_ms: i64,
    pub retry_backoff_ms: i64,
    pub default_api_timeout_ms: i64,
}

impl Default for ShareConfig {
    fn default() -> Self {
        ShareConfig {
            group_id: String::new(),
            client_rack: None,
            ack_mode: AckMode::Implicit,
            max_poll_records: 500,
            fetch_min_bytes: 1,
            fetch_max_bytes: 52_428_800,
            fetch_max_wait_ms: 500,
            max_partition_fetch_bytes: 1_048_576,
            check_crcs: true,
            request_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            default_api_timeout_ms: 60_000,
        }
    }
}

impl ShareConfig {
    pub fn validate(&self) -> Result<(), Error> {
        if self.group_id.is_empty() {
            return Err(Error::Config {
                key: "group_id".into(),
                detail: "a share consumer needs a non-empty group_id".into(),
            });
        }
        Ok(())
    }
}
