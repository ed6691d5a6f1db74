//! The network client's state machine (Java's `NetworkClient`, docs/semantics.md §4).
//!
//! `NetworkClient` is pure: it never blocks, never reads a clock and never
//! touches a socket. It talks to the outside through two narrow paths:
//!
//! * outgoing: the [`Transport`] trait (`connect`, `write`, `close`), which
//!   the tokio layer implements by spawning per-connection tasks and which
//!   unit tests implement with a recording fake;
//! * incoming: [`Event`] values (connected, send done, frame, disconnected)
//!   that the caller feeds to [`NetworkClient::handle_events`].
//!
//! Every event carries the *connection generation* it belongs to. A node's
//! generation changes each time we start a connection, so events still in the
//! channel from a connection we already closed (its reader noticed EOF after we
//! aborted it, say) are recognised as stale and dropped instead of corrupting
//! the state of the new connection.

use std::collections::HashMap;

use bytes::Bytes;
use ferrokafka_protocol::frame::{self, RequestHeader};
use ferrokafka_protocol::kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use ferrokafka_protocol::kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, MetadataRequest, RequestKind, ResponseKind, TopicName,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use ferrokafka_protocol::produce_frame::Frame;
use rand::Rng;

use crate::cluster::Node;
use crate::error::Error;
use crate::inflight::{InFlight, InFlightRequests};
use crate::log_context::LogContext;
use crate::metadata::wire::metadata_response_from_wire;
use crate::states::{ClusterConnectionStates, ConnectionState};
use crate::updater::{MetadataRequestSpec, MetadataUpdater, UpdaterContext};
use std::sync::Arc;

/// Settings of the network client (names as the Java properties, snake_case).
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub client_id: String,
    pub max_in_flight_requests_per_connection: usize,
    pub request_timeout_ms: i64,
    pub reconnect_backoff_ms: i64,
    pub reconnect_backoff_max_ms: i64,
    pub connections_max_idle_ms: i64,
    pub socket_connection_setup_timeout_ms: i64,
    /// SO_SNDBUF / SO_RCVBUF; -1 = the OS sizes it (the option table has
    /// the defaults and why).
    pub send_buffer_bytes: i32,
    pub receive_buffer_bytes: i32,
    pub max_response_size: usize,
    /// TLS / SASL applied to every connection (see `security.rs`).
    pub security: crate::security::Security,
    /// KIP-714: push client metrics to brokers that ask for them (Java's
    /// `enable.metrics.push`, on by default). See `telemetry/`.
    pub enable_metrics_push: bool,
    /// The client's identity in its log lines (`log_context.rs`); set by
    /// `Effective::client_config` for every client that has a network.
    pub log: Option<Arc<LogContext>>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            client_id: "ferrokafka".into(),
            max_in_flight_requests_per_connection: 5,
            request_timeout_ms: 30_000,
            reconnect_backoff_ms: 50,
            reconnect_backoff_max_ms: 1000,
            connections_max_idle_ms: 540_000,
            socket_connection_setup_timeout_ms: 10_000,
            send_buffer_bytes: 1024 * 1024,
            receive_buffer_bytes: -1,
            max_response_size: ferrokafka_protocol::DEFAULT_MAX_RESPONSE_SIZE,
            security: crate::security::Security::plaintext(),
            enable_metrics_push: true,
            log: None,
        }
    }
}

impl ClientConfig {
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |key: &str, detail: &str| {
            Err(Error::Config {
                key: key.into(),
                detail: detail.into(),
            })
        };
        if self.max_in_flight_requests_per_connection == 0 {
            return bad("max_in_flight_requests_per_connection", "must be >= 1");
        }
        if self.request_timeout_ms < 0 {
            return bad("request_timeout_ms", "must be >= 0");
        }
        if self.reconnect_backoff_ms < 0 {
            return bad("reconnect_backoff_ms", "must be >= 0");
        }
        if self.reconnect_backoff_max_ms < 0 {
            return bad("reconnect_backoff_max_ms", "must be >= 0");
        }
        if self.connections_max_idle_ms < 0 {
            return bad("connections_max_idle_ms", "must be >= 0");
        }
        Ok(())
    }
}

/// The I/O the core asks for. Implementations must not call back into the
/// core synchronously: results come back later as [`Event`]s.
pub trait Transport: Send {
    /// Start connecting `node` (resolve, try each address, then report
    /// `Connected` or `Disconnected`) as connection generation `conn`.
    fn connect(&mut self, node: &Node, conn: u64);
    /// Queue one frame on the connection. `Buffered`: it fits in the send
    /// buffer and counts as sent now (Java's "send completed" also only means
    /// "in the socket buffer"). `Queued(seq)`: the buffer is full, the frame is
    /// the connection's `seq`-th (from 1), and a `SendDone` with
    /// `written >= seq` follows once it is out. `Closed`: a `Disconnected` is
    /// coming.
    fn write(&mut self, node_id: i32, conn: u64, frame: Frame) -> WriteOutcome;
    /// Close the connection now; no more events for `conn` matter.
    fn close(&mut self, node_id: i32, conn: u64);
    /// Bytes of frames handed to `write` and not yet written to their
    /// sockets, over every connection (a transport that writes at once: 0).
    fn unwritten(&self) -> usize {
        0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Buffered,
    Queued(u64),
    Closed,
}

#[derive(Debug, Clone)]
pub enum Event {
    Connected {
        node: i32,
        conn: u64,
    },
    /// The first `written` frames queued on the connection are fully written.
    SendDone {
        node: i32,
        conn: u64,
        written: u64,
    },
    Frame {
        node: i32,
        conn: u64,
        frame: Bytes,
    },
    Disconnected {
        node: i32,
        conn: u64,
        error: Error,
    },
    /// Nothing happened on a socket, but poll should look again (a request
    /// completed locally, the client closed...).
    Wakeup,
}

/// The ApiVersions request this client sends first on every connection
/// (docs/semantics.md §4.4), naming the client software (KIP-511).
pub fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("ferrokafka"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")))
}

/// Called once with the response, after the I/O work of the poll that produced it.
pub type Callback = Box<dyn FnOnce(&ClientResponse) + Send>;

/// A request built by `new_client_request`, not yet sent (docs/semantics.md §4.5).
pub struct ClientRequest {
    pub destination: i32,
    pub body: RequestKind,
    pub api_key: i16,
    pub correlation_id: i32,
    pub client_id: String,
    pub created_ms: i64,
    pub expect_response: bool,
    pub request_timeout_ms: i64,
    /// Newest version this request may be sent at (Java's builder
    /// `latestAllowedVersion`): e.g. a Fetch naming topics by name stops at
    /// v12 because v13+ identifies topics by id only.
    pub max_version: Option<i16>,
    pub callback: Option<Callback>,
}

impl std::fmt::Debug for ClientRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientRequest")
            .field("destination", &self.destination)
            .field("api_key", &self.api_key)
            .field("correlation_id", &self.correlation_id)
            .field("expect_response", &self.expect_response)
            .finish()
    }
}

/// The outcome of one request (Java's `ClientResponse`).
pub struct ClientResponse {
    pub request_header: RequestHeader,
    pub destination: i32,
    pub created_ms: i64,
    pub received_ms: i64,
    pub disconnected: bool,
    /// Set when no version both sides support exists (the request never left).
    pub version_mismatch: Option<Error>,
    /// The decoded answer; `None` for disconnects, version mismatches and
    /// requests that expect no response.
    pub body: Option<ResponseKind>,
    /// Why the request failed, when it did (disconnect cause, timeout,
    /// corrupt answer). Extra to Java, for clear errors.
    pub error: Option<Error>,
    pub callback: Option<Callback>,
}

impl std::fmt::Debug for ClientResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientResponse")
            .field("request_header", &self.request_header)
            .field("destination", &self.destination)
            .field("disconnected", &self.disconnected)
            .field("version_mismatch", &self.version_mismatch)
            .field("error", &self.error)
            .field("has_body", &self.body.is_some())
            .finish()
    }
}

impl ClientResponse {
    pub fn latency_ms(&self) -> i64 {
        self.received_ms - self.created_ms
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Internal {
    No,
    ApiVersions,
    Metadata,
}

/// docs/semantics.md §4.6: what we keep about a request on the wire.
struct InFlightRequest {
    header: RequestHeader,
    destination: i32,
    created_ms: i64,
    send_ms: i64,
    expect_response: bool,
    internal: Internal,
    send_done: bool,
    /// The frame's number on its connection (see `WriteOutcome::Queued`).
    send_seq: u64,
    timeout_ms: i64,
    callback: Option<Callback>,
}

impl InFlight for InFlightRequest {
    fn is_send_done(&self) -> bool {
        self.send_done
    }
    fn is_expired(&self, now_ms: i64) -> bool {
        now_ms - self.send_ms > self.timeout_ms
    }
    fn deadline_ms(&self) -> i64 {
        self.send_ms.saturating_add(self.timeout_ms)
    }
}

impl InFlightRequest {
    fn into_response(
        self,
        now_ms: i64,
        disconnected: bool,
        body: Option<ResponseKind>,
        error: Option<Error>,
    ) -> ClientResponse {
        ClientResponse {
            request_header: self.header,
            destination: self.destination,
            created_ms: self.created_ms,
            received_ms: now_ms,
            disconnected,
            version_mismatch: None,
            body,
            error,
            callback: self.callback,
        }
    }
}

/// Per-node connection bookkeeping beside `ClusterConnectionStates`.
#[derive(Debug, Default)]
struct ConnInfo {
    conn: u64,
    /// Broker ranges from its ApiVersions answer: api_key -> (min, max).
    broker_versions: HashMap<i16, (i16, i16)>,
    /// ApiVersions version to send next (None = sent / nothing pending).
    api_versions_pending: Option<i16>,
}

/// The version ApiVersions starts at: the newest both we and the schema crate
/// know (v3 = flexible, KIP-511 client software fields). v4 only changes
/// error semantics, and older brokers answer v3 without a retry round trip.
pub const API_VERSIONS_START: i16 = 3;

pub struct NetworkClient {
    cfg: ClientConfig,
    in_flight: InFlightRequests<InFlightRequest>,
    states: ClusterConnectionStates,
    conns: HashMap<i32, ConnInfo>,
    /// Every node ever named to us (bootstrap, metadata, `ready(node)` args),
    /// so a node id can be turned back into an address.
    nodes: HashMap<i32, Node>,
    /// The updater's `fetch_nodes()` as of the last refresh. Cached because
    /// the updater is taken out of `self` while it runs, and it calls back
    /// into `least_loaded_node`, which needs the list.
    node_list: Vec<Node>,
    updater: Option<Box<dyn MetadataUpdater>>,
    transport: Box<dyn Transport>,
    next_correlation_id: i32,
    next_conn: u64,
    /// Requests completed without touching the network (version mismatch,
    /// acks=0 sends), handed out by the next `handle_events`.
    local_completions: Vec<ClientResponse>,
    /// The last TLS/SASL refusal per node, for callers that wait on it.
    last_auth_error: HashMap<i32, Error>,
    closed: bool,
    rng: rand::rngs::StdRng,
    stats: stats::NodeStats,
}

impl NetworkClient {
    pub fn new(
        cfg: ClientConfig,
        updater: Box<dyn MetadataUpdater>,
        transport: Box<dyn Transport>,
        seed: u64,
    ) -> Result<Self, Error> {
        use rand::SeedableRng;
        cfg.validate()?;
        let mut nodes = HashMap::new();
        let node_list = updater.fetch_nodes();
        for n in &node_list {
            nodes.insert(n.id, n.clone());
        }
        Ok(NetworkClient {
            in_flight: InFlightRequests::new(cfg.max_in_flight_requests_per_connection),
            states: ClusterConnectionStates::new(
                cfg.reconnect_backoff_ms,
                cfg.reconnect_backoff_max_ms,
                seed,
            ),
            cfg,
            conns: HashMap::new(),
            nodes,
            node_list,
            updater: Some(updater),
            transport,
            next_correlation_id: 0,
            next_conn: 1,
            local_completions: Vec::new(),
            last_auth_error: HashMap::new(),
            closed: false,
            rng: rand::rngs::StdRng::seed_from_u64(seed ^ 0x9e37_79b9_7f4a_7c15),
            stats: stats::NodeStats::default(),
        })
    }

    pub fn config(&self) -> &ClientConfig {
        &self.cfg
    }

    pub fn states_mut(&mut self) -> &mut ClusterConnectionStates {
        &mut self.states
    }

    /// Client-wide, wrapping int32 (docs/semantics.md §1.4).
    fn next_correlation(&mut self) -> i32 {
        let c = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        c
    }

    fn with_updater<R>(
        &mut self,
        f: impl FnOnce(&mut dyn MetadataUpdater, &mut Self) -> R,
    ) -> Option<R> {
        // The updater is taken out while it runs so it can receive `&mut self`
        // as its context without aliasing; it is always put back.
        let mut up = self.updater.take()?;
        let r = f(up.as_mut(), self);
        self.updater = Some(up);
        Some(r)
    }

    pub fn updater(&self) -> Option<&dyn MetadataUpdater> {
        self.updater.as_deref()
    }

    fn refresh_nodes(&mut self) {
        if let Some(up) = &self.updater {
            self.node_list = up.fetch_nodes();
            for n in &self.node_list {
                self.nodes.insert(n.id, n.clone());
            }
        }
    }

    pub fn node(&self, id: i32) -> Option<&Node> {
        self.nodes.get(&id)
    }

    pub fn known_nodes(&self) -> Vec<Node> {
        match &self.updater {
            Some(u) => u.fetch_nodes(),
            None => self.node_list.clone(),
        }
    }

    // ---------------------------------------------------------------- state

    pub fn connection_state(&self, node: i32) -> ConnectionState {
        self.states.state(node)
    }

    /// Ranges both sides accept, for the APIs the broker announced.
    pub fn api_versions(&self, node: i32) -> HashMap<i16, (i16, i16)> {
        let mut out = HashMap::new();
        if let Some(c) = self.conns.get(&node) {
            for (&k, &(bmin, bmax)) in &c.broker_versions {
                if let Some((cmin, cmax)) = frame::client_version_range(k) {
                    let (lo, hi) = (bmin.max(cmin), bmax.min(cmax));
                    if lo <= hi {
                        out.insert(k, (lo, hi));
                    }
                }
            }
        }
        out
    }

    /// Connection READY and the in-flight deque has room (docs/semantics.md §4.2).
    pub fn can_send_request(&self, node: i32) -> bool {
        self.states.is_ready(node)
            && self.conns.contains_key(&node)
            && self.in_flight.can_send_more(node)
    }

    pub fn is_ready(&self, node: i32, now_ms: i64) -> bool {
        let due = self
            .updater
            .as_ref()
            .is_some_and(|u| u.is_update_due(now_ms));
        !due && self.can_send_request(node)
    }

    /// docs/semantics.md §4.2: true if ready; else start connecting if allowed.
    pub fn ready(&mut self, node: &Node, now_ms: i64) -> bool {
        if self.closed {
            return false;
        }
        self.nodes.insert(node.id, node.clone());
        if self.is_ready(node.id, now_ms) {
            return true;
        }
        if self.states.can_connect(node.id, now_ms) {
            self.initiate_connect(node, now_ms);
        }
        false
    }

    /// Bytes handed to the transport and not yet written (`Transport::unwritten`).
    pub fn unwritten_bytes(&self) -> usize {
        self.transport.unwritten()
    }

    pub fn in_flight_count(&self, node: Option<i32>) -> usize {
        match node {
            Some(n) => self.in_flight.count(n),
            None => self.in_flight.total_count(),
        }
    }

    pub fn connection_delay(&self, node: i32, now_ms: i64) -> i64 {
        self.states.connection_delay(node, now_ms)
    }

    /// docs/semantics.md §2.2.
    pub fn least_loaded_node(&mut self, now_ms: i64) -> Option<Node> {
        let nodes = self.known_nodes();
        if nodes.is_empty() {
            return None;
        }
        let offset = self.rng.gen_range(0..nodes.len());
        let mut best_ready: Option<(usize, &Node)> = None;
        let mut connecting: Option<&Node> = None;
        let mut can_connect: Option<&Node> = None;
        for i in 0..nodes.len() {
            let n = &nodes[(offset + i) % nodes.len()];
            let inflight = self.in_flight.count(n.id);
            if self.can_send_request(n.id) {
                if inflight == 0 {
                    return Some(n.clone());
                }
                if best_ready.is_none_or(|(c, _)| inflight < c) {
                    best_ready = Some((inflight, n));
                }
            } else if self.states.is_preparing(n.id) || self.states.is_ready(n.id) {
                connecting.get_or_insert(n);
            } else if self.states.can_connect(n.id, now_ms) {
                can_connect.get_or_insert(n);
            }
        }
        best_ready
            .map(|(_, n)| n)
            .or(connecting)
            .or(can_connect)
            .cloned()
    }

    pub fn initiate_connect(&mut self, node: &Node, now_ms: i64) {
        log::debug!(target: "ferrokafka::network", "connecting to node {} at {}", node.id, node.address());
        self.nodes.insert(node.id, node.clone());
        let conn = self.next_conn;
        self.next_conn += 1;
        self.states.connecting(node.id, now_ms);
        self.conns.insert(
            node.id,
            ConnInfo {
                conn,
                ..Default::default()
            },
        );
        self.transport.connect(node, conn);
    }

    // ---------------------------------------------------------------- sending

    pub fn new_client_request(
        &mut self,
        node: i32,
        body: RequestKind,
        expect_response: bool,
        callback: Option<Callback>,
        now_ms: i64,
    ) -> ClientRequest {
        let api_key = frame::request_api_key(&body);
        ClientRequest {
            destination: node,
            body,
            api_key,
            correlation_id: self.next_correlation(),
            client_id: self.cfg.client_id.clone(),
            created_ms: now_ms,
            expect_response,
            request_timeout_ms: self.cfg.request_timeout_ms,
            max_version: None,
            callback,
        }
    }

    /// The version a request of `api_key` goes out at to `node`
    /// (docs/semantics.md §4.4): the newest both sides support, at most
    /// `max_version`. None when no
    /// version is common or the node's versions are not known yet (`send`
    /// then completes the request with an unsupported-version error). A
    /// body built for this version by a version-aware builder is sent at
    /// exactly this version if `send` follows under the same lock with
    /// `max_version` set to it.
    pub fn usable_version(&self, node: i32, api_key: i16, max_version: Option<i16>) -> Option<i16> {
        let (cmin, mut cmax) = frame::client_version_range(api_key)?;
        if let Some(m) = max_version {
            cmax = cmax.min(m);
        }
        let (bmin, bmax) = *self.conns.get(&node)?.broker_versions.get(&api_key)?;
        (bmin.max(cmin) <= bmax.min(cmax)).then_some(bmax.min(cmax))
    }

    /// docs/semantics.md §4.6. Errors only for caller mistakes (node not ready,
    /// unknown API, client closed); version mismatches complete the request
    /// locally instead.
    pub fn send(&mut self, req: ClientRequest, now_ms: i64) -> Result<(), Error> {
        self.do_send(req, now_ms, Internal::No)
    }

    fn do_send(
        &mut self,
        req: ClientRequest,
        now_ms: i64,
        internal: Internal,
    ) -> Result<(), Error> {
        if self.closed {
            return Err(Error::Closed {
                what: "network client",
            });
        }
        let node = req.destination;
        if !self.can_send_request(node) {
            return Err(Error::State {
                detail: format!(
                    "attempt to send a request to node {node} which is not ready ({})",
                    self.states.state(node).as_str()
                ),
            });
        }
        if req.api_key < 0 {
            return Err(Error::State {
                detail: "request kind not supported by the network client".into(),
            });
        }
        let header = |v: i16| RequestHeader {
            api_key: req.api_key,
            api_version: v,
            correlation_id: req.correlation_id,
            client_id: Some(req.client_id.clone()),
        };
        let version = match self.usable_version(node, req.api_key, req.max_version) {
            Some(v) => v,
            None => {
                let (cmin, mut cmax) = frame::client_version_range(req.api_key).unwrap_or((0, -1));
                if let Some(m) = req.max_version {
                    cmax = cmax.min(m);
                }
                let (bmin, bmax) = self
                    .conns
                    .get(&node)
                    .and_then(|c| c.broker_versions.get(&req.api_key).copied())
                    .unwrap_or((-1, -1));
                let err = Error::UnsupportedVersion {
                    api: format!("{:?}", ApiKey::try_from(req.api_key).map_err(|_| ()).ok()),
                    node_id: node,
                    broker_min: bmin,
                    broker_max: bmax,
                    client_min: cmin,
                    client_max: cmax,
                };
                if internal == Internal::Metadata {
                    // Our own refresh (sent from inside the updater's
                    // maybe_update): the updater learns of it by this Err.
                    return Err(err);
                }
                self.local_completions.push(ClientResponse {
                    request_header: header(cmax),
                    destination: node,
                    created_ms: req.created_ms,
                    received_ms: now_ms,
                    disconnected: false,
                    version_mismatch: Some(err),
                    body: None,
                    error: None,
                    callback: req.callback,
                });
                return Ok(());
            }
        };
        // Protocol detail at DEBUG (docs/semantics.md §4): the level check is
        // an atomic load, so nothing is formatted when DEBUG is off.
        log::debug!(
            target: "ferrokafka::network",
            "request {} v{version} to node {node} (correlation id {})",
            ApiKey::try_from(req.api_key).map_or_else(|_| req.api_key.to_string(), |k| format!("{k:?}")),
            req.correlation_id
        );
        let mut body = req.body;
        // Metadata v0 has no null topic list: an empty one means "all topics".
        if let RequestKind::Metadata(m) = &mut body {
            if version == 0 && m.topics.is_none() {
                m.topics = Some(vec![]);
            }
        }
        self.write_request(
            node,
            header(version),
            body,
            req.created_ms,
            req.expect_response,
            internal,
            req.request_timeout_ms,
            req.callback,
            now_ms,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn write_request(
        &mut self,
        node: i32,
        header: RequestHeader,
        body: RequestKind,
        created_ms: i64,
        expect_response: bool,
        internal: Internal,
        timeout_ms: i64,
        callback: Option<Callback>,
        now_ms: i64,
    ) -> Result<(), Error> {
        let frame = ferrokafka_protocol::produce_frame::encode_request_frame(&header, &body)?;
        let conn = self.conns.get(&node).map_or(0, |c| c.conn);
        // Hand the bytes over first, so we know whether the send is already
        // complete; the request is recorded either way (a refused write means
        // a Disconnected event is on its way and will complete it).
        let outcome = self.transport.write(node, conn, frame);
        let (send_done, send_seq) = match outcome {
            WriteOutcome::Buffered => (true, 0),
            WriteOutcome::Queued(seq) => (false, seq),
            WriteOutcome::Closed => (false, u64::MAX),
        };
        self.in_flight.add(
            node,
            InFlightRequest {
                header,
                destination: node,
                created_ms,
                send_ms: now_ms,
                expect_response,
                internal,
                send_done,
                send_seq,
                timeout_ms,
                callback,
            },
        );
        self.states.touch(node, now_ms);
        if send_done && !expect_response {
            // 4.8: acks=0 completes once its bytes are out.
            if let Some(r) = self.in_flight.complete_last_sent(node) {
                self.local_completions
                    .push(r.into_response(now_ms, false, None, None));
            }
        }
        Ok(())
    }

    pub fn has_local_completions(&self) -> bool {
        !self.local_completions.is_empty()
    }

    fn send_api_versions(&mut self, node: i32, version: i16, now_ms: i64) {
        let body = RequestKind::ApiVersions(api_versions_request());
        let cid = self.next_correlation();
        let header = RequestHeader {
            api_key: ApiKey::ApiVersions as i16,
            api_version: version,
            correlation_id: cid,
            client_id: Some(self.cfg.client_id.clone()),
        };
        let timeout = self.cfg.request_timeout_ms;
        if let Err(e) = self.write_request(
            node,
            header,
            body,
            now_ms,
            true,
            Internal::ApiVersions,
            timeout,
            None,
            now_ms,
        ) {
            self.disconnect_node(node, now_ms, Some(e), &mut Vec::new());
        }
    }

    // ---------------------------------------------------------------- poll

    /// docs/semantics.md §4.11 step 1: give the updater its chance; returns how long
    /// poll may sleep at most (ms), considering request deadlines too.
    pub fn maybe_update(&mut self, now_ms: i64) -> i64 {
        if self.closed {
            return i64::MAX;
        }
        self.refresh_nodes();
        let wait = self
            .with_updater(|up, core| up.maybe_update(now_ms, core))
            .unwrap_or(i64::MAX);
        let until_timeout = self
            .in_flight
            .earliest_deadline()
            .map_or(i64::MAX, |d| (d - now_ms).max(0));
        let mut w = wait.min(until_timeout);
        if self.has_local_completions()
            || self
                .conns
                .values()
                .any(|c| c.api_versions_pending.is_some())
        {
            w = 0;
        }
        w.max(0)
    }
}

mod events;
mod stats;
#[cfg(test)]
mod tests;
