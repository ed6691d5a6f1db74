//! A minimal `MetadataUpdater`: bootstrap nodes until the first answer, then
//! the brokers of the latest Metadata answer; refreshes only when asked (at
//! start, after a disconnect, on `request_update`). The metadata work owns the
//! real updater (max-age refresh, backoff, re-bootstrap, topic sets); this one
//! exists so the network client works and is testable on its own.
//!
//! The wire answer is converted by `metadata::wire` before it gets here.

use crate::cluster::{MetadataResponse, Node};
use crate::error::Error;
use crate::updater::{MetadataRequestSpec, MetadataUpdater, UpdaterContext};

#[derive(Debug)]
pub struct SimpleUpdater {
    bootstrap: Vec<Node>,
    latest: Option<MetadataResponse>,
    update_requested: bool,
    in_flight: bool,
    closed: bool,
    /// When the last request went out or failed; a failed refresh is not
    /// retried before `REFRESH_BACKOFF_MS` (else a broker refusing Metadata
    /// would keep every node not-ready forever, docs/semantics.md §4.2).
    last_attempt_ms: i64,
}

pub const REFRESH_BACKOFF_MS: i64 = 100;

impl SimpleUpdater {
    pub fn new(bootstrap: Vec<Node>) -> Self {
        SimpleUpdater {
            bootstrap,
            latest: None,
            update_requested: true,
            in_flight: false,
            closed: false,
            last_attempt_ms: i64::MIN / 2,
        }
    }

    pub fn latest(&self) -> Option<&MetadataResponse> {
        self.latest.as_ref()
    }
}

impl MetadataUpdater for SimpleUpdater {
    fn fetch_nodes(&self) -> Vec<Node> {
        match &self.latest {
            Some(m) if !m.brokers.is_empty() => m.brokers.clone(),
            _ => self.bootstrap.clone(),
        }
    }

    fn is_update_due(&self, now_ms: i64) -> bool {
        self.update_requested
            && !self.in_flight
            && !self.closed
            && now_ms >= self.last_attempt_ms + REFRESH_BACKOFF_MS
    }

    fn maybe_update(&mut self, now_ms: i64, ctx: &mut dyn UpdaterContext) -> i64 {
        if !self.is_update_due(now_ms) {
            if self.update_requested && !self.in_flight && !self.closed {
                return (self.last_attempt_ms + REFRESH_BACKOFF_MS - now_ms).max(0);
            }
            return i64::MAX;
        }
        let Some(node) = ctx.least_loaded_node(now_ms) else {
            return ctx.reconnect_backoff_ms();
        };
        if ctx.can_send_request(node.id, now_ms) {
            // Brokers only: topic sets are the real updater's business.
            let spec = MetadataRequestSpec {
                topics: Some(vec![]),
                allow_auto_topic_creation: false,
            };
            if ctx.send_metadata_request(node.id, spec, now_ms).is_ok() {
                self.last_attempt_ms = now_ms;
                self.in_flight = true;
                return i64::MAX;
            }
            // Refused locally (no Metadata version in common...): back off.
            self.last_attempt_ms = now_ms;
            return REFRESH_BACKOFF_MS;
        }
        if ctx.is_connecting_or_connected(node.id) {
            // Wait for the connection; the connect event wakes poll anyway.
            return ctx.reconnect_backoff_ms();
        }
        if ctx.can_connect(&node, now_ms) {
            ctx.initiate_connect(&node, now_ms);
        }
        ctx.reconnect_backoff_ms()
    }

    fn handle_server_disconnect(&mut self, _now_ms: i64, _node_id: i32, _error: Option<&Error>) {
        self.update_requested = true;
    }

    fn handle_failed_request(&mut self, now_ms: i64, _error: Option<&Error>) {
        self.last_attempt_ms = now_ms;
        self.in_flight = false;
        self.update_requested = true;
    }

    fn handle_success_request(&mut self, _now_ms: i64, response: MetadataResponse) {
        self.in_flight = false;
        self.update_requested = false;
        self.latest = Some(response);
    }

    fn request_update(&mut self) {
        self.update_requested = true;
    }

    fn close(&mut self) {
        self.closed = true;
    }
}
