//! Classifying what brokers and users hand the metadata: Kafka error codes
//! that mean "refresh" (docs/semantics.md §3.5), per-topic errors for callers,
//! and bootstrap address lists.

use super::*;

/// Java's `InvalidMetadataException` family: the error says our routing is
/// stale, so a metadata refresh is the fix.
pub fn is_invalid_metadata_error(code: i16) -> bool {
    use codes::*;
    matches!(
        code,
        UNKNOWN_TOPIC_OR_PARTITION
            | LEADER_NOT_AVAILABLE
            | NOT_LEADER_OR_FOLLOWER
            | KAFKA_STORAGE_ERROR
            | FENCED_LEADER_EPOCH
            | UNKNOWN_LEADER_EPOCH
            | UNKNOWN_TOPIC_ID
            | INCONSISTENT_TOPIC_ID
    )
}

/// Errors that say the partition's leader as we know it is wrong: the
/// partition's leader becomes unknown until the next metadata answer.
pub fn invalidates_leader(code: i16) -> bool {
    use codes::*;
    matches!(
        code,
        NOT_LEADER_OR_FOLLOWER | FENCED_LEADER_EPOCH | UNKNOWN_LEADER_EPOCH
    )
}

pub fn timeout_error(timeout: Duration) -> Error {
    Error::Timeout {
        what: "metadata update".into(),
        timeout_ms: timeout.as_millis() as u64,
    }
}

pub(super) fn topic_error(cache: &Cluster, topic: Option<&str>) -> Option<Error> {
    match topic {
        Some(t) => {
            if cache.invalid_topics().contains(t) {
                Some(Error::broker(
                    codes::INVALID_TOPIC_EXCEPTION,
                    Some(format!("invalid topic: {t}")),
                ))
            } else if cache.unauthorized_topics().contains(t) {
                Some(Error::broker(
                    codes::TOPIC_AUTHORIZATION_FAILED,
                    Some(format!("not authorized to access topic: {t}")),
                ))
            } else {
                None
            }
        }
        None => {
            if !cache.invalid_topics().is_empty() {
                let names: Vec<&str> = cache.invalid_topics().iter().map(String::as_str).collect();
                Some(Error::broker(
                    codes::INVALID_TOPIC_EXCEPTION,
                    Some(format!("invalid topics: {}", names.join(", "))),
                ))
            } else if !cache.unauthorized_topics().is_empty() {
                let names: Vec<&str> = cache
                    .unauthorized_topics()
                    .iter()
                    .map(String::as_str)
                    .collect();
                Some(Error::broker(
                    codes::TOPIC_AUTHORIZATION_FAILED,
                    Some(format!(
                        "not authorized to access topics: {}",
                        names.join(", ")
                    )),
                ))
            } else {
                None
            }
        }
    }
}

/// Parse `host:port` entries (IPv6 as `[addr]:port`; entries may hold
/// comma-separated lists). Ids -1, -2, ... in order.
pub fn parse_bootstrap<S: AsRef<str>>(addresses: &[S]) -> Result<Vec<Node>> {
    let bad = |detail: String| Error::Config {
        key: "bootstrap_servers".into(),
        detail,
    };
    let mut nodes = Vec::new();
    for entry in addresses {
        for addr in entry
            .as_ref()
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
        {
            let (host, port) = addr
                .rsplit_once(':')
                .ok_or_else(|| bad(format!("{addr:?} is not host:port")))?;
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            if host.is_empty() {
                return Err(bad(format!("{addr:?} has no host")));
            }
            let port: u16 = port
                .parse()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad(format!("{addr:?} has no valid port (1-65535)")))?;
            let id = -(nodes.len() as i32) - 1;
            nodes.push(Node::new(id, host, port, None));
        }
    }
    if nodes.is_empty() {
        return Err(bad("no address given; expected [\"host:port\", ...]".into()));
    }
    Ok(nodes)
}
