//! Per-node figures of the network client (Java's per-node metrics
//! `request-total`, `request-latency-avg`/`-max` tagged `node-id=node-<id>`,
//! and the client-wide `connection-count`, `connection-creation-total`,
//! `connection-close-total`). Tallied once per `handle_events` from the
//! responses it hands out: nothing is done per byte or per record.
//! A coordinator connection is its own node `i32::MAX - id`, as in Java.

use std::collections::BTreeMap;

use super::{ClientResponse, NetworkClient};
use crate::states::ConnectionState;

#[derive(Debug, Default, Clone, Copy)]
struct NodeFigures {
    requests: u64,
    /// Disconnected, timed out, version mismatch: no answer arrived.
    errors: u64,
    latency_count: u64,
    latency_sum_ms: f64,
    latency_max_ms: f64,
}

#[derive(Debug, Default)]
pub(super) struct NodeStats {
    nodes: BTreeMap<i32, NodeFigures>,
    pub(super) connections_created: u64,
    pub(super) connections_closed: u64,
}

impl NodeStats {
    /// A decodable answer from `node`, `latency_ms` after the request
    /// was made (any request, ours or the caller's: docs/semantics.md §4.9
    /// sends our Metadata and ApiVersions answers elsewhere, but they were
    /// requests to that node all the same).
    pub(super) fn answered(&mut self, node: i32, latency_ms: i64) {
        let f = self.nodes.entry(node).or_default();
        let ms = latency_ms.max(0) as f64;
        f.requests += 1;
        f.latency_count += 1;
        f.latency_sum_ms += ms;
        f.latency_max_ms = f.latency_max_ms.max(ms);
    }

    /// The callers' requests that completed without an answer: failures
    /// (disconnected or timed out, docs/semantics.md §4.10; undecodable; no
    /// common version, §4.6), and acks=0 sends (done when written, §4.8).
    /// Answered ones are already counted.
    pub(super) fn record(&mut self, responses: &[ClientResponse]) {
        for r in responses.iter().filter(|r| r.body.is_none()) {
            let f = self.nodes.entry(r.destination).or_default();
            f.requests += 1;
            if r.disconnected || r.version_mismatch.is_some() || r.error.is_some() {
                f.errors += 1;
            }
        }
    }
}

impl NetworkClient {
    /// `node`'s connection is closing: counted if it had been established
    /// (as `connections_created` counts them), not for a failed attempt.
    pub(super) fn count_close(&mut self, node: i32) {
        let established = matches!(
            self.states.state(node),
            ConnectionState::CheckingApiVersions
                | ConnectionState::Authenticating
                | ConnectionState::Ready
        );
        if established && self.conns.contains_key(&node) {
            self.stats.connections_closed += 1;
        }
    }

    /// Client-wide connection figures, then per node (keys
    /// `name{node-id=node-<id>}`, docs/metrics.md).
    pub fn metrics(&self) -> Vec<(String, f64)> {
        let connected = self
            .conns
            .keys()
            .filter(|n| self.states.is_ready(**n))
            .count();
        let mut out = vec![
            ("connection-count".to_string(), connected as f64),
            (
                "connection-creation-total".to_string(),
                self.stats.connections_created as f64,
            ),
            (
                "connection-close-total".to_string(),
                self.stats.connections_closed as f64,
            ),
        ];
        let (mut total, mut sum, mut count, mut max) = (0u64, 0.0, 0u64, 0.0f64);
        for (node, f) in &self.stats.nodes {
            let l = format!("{{node-id=node-{node}}}");
            let avg = if f.latency_count > 0 {
                f.latency_sum_ms / f.latency_count as f64
            } else {
                0.0
            };
            out.push((format!("request-total{l}"), f.requests as f64));
            out.push((format!("request-error-total{l}"), f.errors as f64));
            out.push((format!("request-latency-avg{l}"), avg));
            out.push((format!("request-latency-max{l}"), f.latency_max_ms));
            total += f.requests;
            sum += f.latency_sum_ms;
            count += f.latency_count;
            max = max.max(f.latency_max_ms);
        }
        out.push(("network-request-total".to_string(), total as f64));
        out.push((
            "network-request-latency-avg".to_string(),
            if count > 0 { sum / count as f64 } else { 0.0 },
        ));
        out.push(("network-request-latency-max".to_string(), max));
        out.push((
            "requests-in-flight".to_string(),
            self.in_flight_count(None) as f64,
        ));
        out
    }
}
