//! The real `MetadataUpdater` (Java's `NetworkClient.DefaultMetadataUpdater`,
//! sarama's `backgroundMetadataUpdater`): decides when a Metadata request goes
//! out and to whom, and feeds answers and failures back into `Metadata`.
//!
//! It is driven by the network client's `poll` (docs/semantics.md §4.11), so it needs
//! no task or timer of its own: `maybe_update` returns how long until it wants
//! to be called again and the client caps its poll timeout with that. All
//! timing comes in as `now_ms`; nothing here reads a clock.
//!
//! Not thread-shared: the network client owns it (`&mut self` everywhere).
//! The `Metadata` it steers is shared and does its own locking.

use std::collections::HashSet;
use std::sync::Arc;

use super::Metadata;
use crate::cluster::{MetadataResponse, Node};
use crate::error::Error;
use crate::updater::{MetadataUpdater, UpdaterContext};

/// Knobs of the updater. Times in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdaterConfig {
    /// How long an in-flight Metadata request may take before the client
    /// times it out; the updater does not start another meanwhile.
    pub request_timeout_ms: i64,
    /// Java's `metadata.recovery.strategy`: true = "rebootstrap", false = "none".
    pub rebootstrap: bool,
    /// Java's `metadata.recovery.rebootstrap.trigger.ms`: re-bootstrap when an
    /// update has been due this long without an answer.
    pub rebootstrap_trigger_ms: i64,
    /// Also re-bootstrap once every broker we know of has failed to connect
    /// (or dropped us) since the last answer, the first of them at least this
    /// long ago. Java only has the two rules above; with reconnect backoff
    /// and metadata backoff both capped near 1 s, `least_loaded_node` rarely
    /// finds *every* node in backoff at once, so "all dead for a while"
    /// would otherwise wait out the whole trigger period.
    pub unreachable_rebootstrap_ms: i64,
}

impl Default for UpdaterConfig {
    fn default() -> Self {
        UpdaterConfig {
            request_timeout_ms: 30_000,
            rebootstrap: true,
            rebootstrap_trigger_ms: 300_000,
            unreachable_rebootstrap_ms: 10_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct InProgress {
    request_version: i32,
    is_partial: bool,
    node_id: i32,
}

#[derive(Debug)]
pub struct DefaultMetadataUpdater {
    metadata: Arc<Metadata>,
    cfg: UpdaterConfig,
    /// The one Metadata request in flight, if any (never more than one).
    in_progress: Option<InProgress>,
    /// When the current unanswered update became due (for the rebootstrap
    /// trigger); cleared by an answer.
    attempt_start_ms: Option<i64>,
    /// Brokers that failed or dropped us since the last answer, and when the
    /// first of them did.
    failed_since_answer: HashSet<i32>,
    first_failure_ms: Option<i64>,
    /// How many times we went back to the seed brokers (for tests/metrics).
    rebootstraps: u64,
}

impl DefaultMetadataUpdater {
    pub fn new(metadata: Arc<Metadata>, cfg: UpdaterConfig) -> Self {
        DefaultMetadataUpdater {
            metadata,
            cfg,
            in_progress: None,
            attempt_start_ms: None,
            failed_since_answer: HashSet::new(),
            first_failure_ms: None,
            rebootstraps: 0,
        }
    }

    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.metadata
    }

    pub fn has_fetch_in_progress(&self) -> bool {
        self.in_progress.is_some()
    }

    pub fn rebootstrap_count(&self) -> u64 {
        self.rebootstraps
    }

    fn rebootstrap(&mut self, now_ms: i64) {
        if self.metadata.rebootstrap() {
            self.rebootstraps += 1;
            // Give the seed brokers a full trigger period of their own.
            self.attempt_start_ms = Some(now_ms);
            self.failed_since_answer.clear();
            self.first_failure_ms = None;
        }
    }

    /// Every broker of the current (non-seed) node list has failed since the
    /// last answer, the first of them `unreachable_rebootstrap_ms` ago.
    fn all_unreachable(&self, now_ms: i64) -> bool {
        let Some(first) = self.first_failure_ms else {
            return false;
        };
        if now_ms.saturating_sub(first) < self.cfg.unreachable_rebootstrap_ms {
            return false;
        }
        let cluster = self.metadata.fetch();
        !cluster.nodes().is_empty()
            && cluster
                .nodes()
                .iter()
                .all(|n| self.failed_since_answer.contains(&n.id))
    }

    /// Tell the application (log + `error_cb` event) that a connection
    /// failed, and when every known broker has failed since the last answer
    /// that all brokers are down (librdkafka's `_ALL_BROKERS_DOWN`).
    fn report_connection_error(&self, node_id: i32, e: &Error) {
        use crate::error::local_code::{ALL_BROKERS_DOWN, AUTHENTICATION, RESOLVE, TRANSPORT};
        let text = e.to_string();
        let code = match e {
            Error::Authentication { .. } => AUTHENTICATION,
            Error::Transport { detail, .. }
                if detail.starts_with("cannot resolve")
                    || detail.contains("resolves to no address") =>
            {
                RESOLVE
            }
            _ => TRANSPORT,
        };
        // Repeats are rate-limited where logs are turned into Python records.
        if code == AUTHENTICATION {
            log::error!(target: "ferrokafka::network", "{text}");
        } else {
            log::warn!(target: "ferrokafka::network", "{text}");
        }
        self.metadata.report_client_error(code, text.clone(), false);
        let cluster = self.metadata.fetch();
        let nodes = cluster.nodes();
        let down = nodes
            .iter()
            .filter(|n| n.id == node_id || self.failed_since_answer.contains(&n.id))
            .count();
        if !nodes.is_empty() && down == nodes.len() {
            let msg = format!("{down}/{down} brokers are down (last error: {text})");
            if self
                .metadata
                .report_client_error(ALL_BROKERS_DOWN, msg.clone(), true)
            {
                log::error!(target: "ferrokafka::network", "{msg}");
            }
        }
    }

    /// Send to `node` if it can take a request; else get a connection going.
    fn maybe_update_node(&mut self, now_ms: i64, node: &Node, ctx: &mut dyn UpdaterContext) -> i64 {
        if ctx.can_send_request(node.id, now_ms) {
            let (spec, request_version, is_partial) = self.metadata.new_metadata_request(now_ms);
            return match ctx.send_metadata_request(node.id, spec, now_ms) {
                Ok(()) => {
                    self.in_progress = Some(InProgress {
                        request_version,
                        is_partial,
                        node_id: node.id,
                    });
                    self.cfg.request_timeout_ms
                }
                Err(_) => {
                    // Could not even queue it: count as a failed attempt so
                    // the backoff applies instead of retrying in a loop.
                    self.metadata.failed_update(now_ms);
                    self.metadata.time_to_next_update(now_ms).max(1)
                }
            };
        }
        if ctx.is_connecting_or_connected(node.id) {
            // A connection is being set up (or is busy): wait for it rather
            // than opening more connections. The client wakes us on progress.
            return ctx.reconnect_backoff_ms().max(1);
        }
        if ctx.can_connect(node, now_ms) {
            ctx.initiate_connect(node, now_ms);
        }
        ctx.reconnect_backoff_ms().max(1)
    }
}

impl MetadataUpdater for DefaultMetadataUpdater {
    fn fetch_nodes(&self) -> Vec<Node> {
        // Seed brokers until the first answer replaces them (docs/semantics.md §1.2).
        self.metadata.fetch().nodes().to_vec()
    }

    fn is_update_due(&self, now_ms: i64) -> bool {
        self.in_progress.is_none() && self.metadata.time_to_next_update(now_ms) == 0
    }

    fn maybe_update(&mut self, now_ms: i64, ctx: &mut dyn UpdaterContext) -> i64 {
        if self.metadata.is_closed() {
            return i64::MAX;
        }
        let time_to_next = self.metadata.time_to_next_update(now_ms);
        let wait_for_fetch = if self.in_progress.is_some() {
            self.cfg.request_timeout_ms
        } else {
            0
        };
        let timeout = time_to_next.max(wait_for_fetch);
        if timeout > 0 {
            return timeout;
        }
        let started = *self.attempt_start_ms.get_or_insert(now_ms);

        let mut node = ctx.least_loaded_node(now_ms);
        if self.cfg.rebootstrap {
            // Every known broker is unreachable (none may even be connected
            // to), or we have gone a whole trigger period without an answer:
            // the brokers we learnt of may all be gone; start over from the
            // seed addresses. Pointless while still on the seeds.
            let stuck = now_ms.saturating_sub(started) >= self.cfg.rebootstrap_trigger_ms;
            if (node.is_none() || stuck || self.all_unreachable(now_ms))
                && !self.metadata.fetch().is_bootstrap_configured()
            {
                self.rebootstrap(now_ms);
                node = ctx.least_loaded_node(now_ms);
            }
        }
        match node {
            None => ctx.reconnect_backoff_ms().max(1),
            Some(n) => self.maybe_update_node(now_ms, &n, ctx),
        }
    }

    fn handle_server_disconnect(&mut self, now_ms: i64, node_id: i32, error: Option<&Error>) {
        self.failed_since_answer.insert(node_id);
        self.first_failure_ms.get_or_insert(now_ms);
        // A connection failing while an update is due counts as a failed
        // update, so the next attempt backs off instead of hammering.
        if self.is_update_due(now_ms) {
            self.metadata.failed_update(now_ms);
        }
        if let Some(e @ Error::Authentication { .. }) = error {
            self.metadata.fatal_error(e.clone());
        }
        if let Some(e) = error {
            if !matches!(e, Error::Disconnected { .. }) {
                self.metadata.set_connection_error(Some(e.to_string()));
                self.report_connection_error(node_id, e);
            }
        }
        // The disconnect may be the result of stale metadata.
        self.metadata.request_update();
    }

    fn handle_failed_request(&mut self, now_ms: i64, error: Option<&Error>) {
        if let Some(e @ (Error::Authentication { .. } | Error::UnsupportedVersion { .. })) = error {
            self.metadata.fatal_error(e.clone());
        }
        self.metadata.failed_update(now_ms);
        self.in_progress = None;
    }

    fn handle_success_request(&mut self, now_ms: i64, response: MetadataResponse) {
        let ip = self.in_progress.take();
        if response.brokers.is_empty() {
            // A broker still starting up may answer with no brokers: not an
            // answer we can route with; retry after the backoff.
            self.metadata.failed_update(now_ms);
            return;
        }
        let (request_version, is_partial) = match ip {
            Some(ip) => (ip.request_version, ip.is_partial),
            // An answer we did not ask for: apply it as a full one with the
            // current version (it is at least as fresh as anything we have).
            None => (self.metadata.request_version(), false),
        };
        // Only fails after close, when there is nobody left to tell.
        let _ = self
            .metadata
            .update(request_version, &response, is_partial, now_ms);
        self.attempt_start_ms = None;
        self.failed_since_answer.clear();
        self.first_failure_ms = None;
    }

    fn request_update(&mut self) {
        self.metadata.request_update();
    }

    fn close(&mut self) {
        self.metadata.close();
    }
}

#[cfg(test)]
mod tests;
