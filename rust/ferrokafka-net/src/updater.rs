//! The contract between the network client and the metadata that steers it
//! (Java's `NetworkClient.MetadataUpdater`).
//!
//! The network client calls these at fixed points of `poll` (docs/semantics.md §4.11);
//! the metadata side decides *whether* and *what* to ask, and uses the
//! `UpdaterContext` the client hands in to ask it. Both sides take `now_ms`, so
//! the pair is testable with injected time and a fake context.

use crate::cluster::{MetadataResponse, Node};
use crate::error::Error;

/// What a Metadata request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataRequestSpec {
    /// `None` = all topics; `Some(vec![])` = no topics (brokers only).
    pub topics: Option<Vec<String>>,
    pub allow_auto_topic_creation: bool,
}

/// The parts of the network client an updater may use while deciding.
pub trait UpdaterContext {
    /// docs/semantics.md §2.2.
    fn least_loaded_node(&mut self, now_ms: i64) -> Option<Node>;
    /// Connection READY, channel ready and in-flight `can_send_more`.
    fn can_send_request(&self, node_id: i32, now_ms: i64) -> bool;
    /// CONNECTING, CHECKING_API_VERSIONS, AUTHENTICATING or READY.
    fn is_connecting_or_connected(&self, node_id: i32) -> bool;
    /// True when the node's connection may be (re)started now (backoff elapsed).
    fn can_connect(&self, node: &Node, now_ms: i64) -> bool;
    fn initiate_connect(&mut self, node: &Node, now_ms: i64);
    /// Queue an internal Metadata request to `node_id`; its answer comes back
    /// through `handle_success_request` / `handle_failed_request`.
    fn send_metadata_request(
        &mut self,
        node_id: i32,
        spec: MetadataRequestSpec,
        now_ms: i64,
    ) -> Result<(), Error>;
    /// The reconnect backoff the client would apply, for the updater's own waits.
    fn reconnect_backoff_ms(&self) -> i64;
}

pub trait MetadataUpdater: Send {
    /// Nodes least_loaded_node chooses among: bootstrap nodes until the first
    /// answer, then the brokers of the latest answer.
    fn fetch_nodes(&self) -> Vec<Node>;
    /// When true, `is_ready` is false for every node (docs/semantics.md §4.2) so the
    /// update goes out before more data requests.
    fn is_update_due(&self, now_ms: i64) -> bool;
    /// Start an update if one is due and none is in flight. Returns how many ms
    /// until calling again is useful (the client's poll timeout is capped by it).
    fn maybe_update(&mut self, now_ms: i64, ctx: &mut dyn UpdaterContext) -> i64;
    /// A connection closed or failed to open (docs/semantics.md §4.3, 4.10).
    fn handle_server_disconnect(&mut self, now_ms: i64, node_id: i32, error: Option<&Error>);
    /// The in-flight Metadata request failed (disconnect, timeout, version).
    fn handle_failed_request(&mut self, now_ms: i64, error: Option<&Error>);
    /// The in-flight Metadata request was answered.
    fn handle_success_request(&mut self, now_ms: i64, response: MetadataResponse);
    /// Anything saw stale routing (NOT_LEADER_OR_FOLLOWER, disconnect...).
    fn request_update(&mut self);
    fn close(&mut self);
}
