//! The receiving half of [`NetworkClient`]: what happens when the selector
//! reports events (docs/semantics.md §4.9-§4.11), and the client's face to the
//! metadata updater. Same state machine as `network_client.rs`; split only to
//! keep each file readable.

use super::*;
use ferrokafka_protocol::frame;

impl NetworkClient {
    /// docs/semantics.md §4.11 after the selector: process `events` in the order
    /// completed sends, completed receives, disconnections, new connections,
    /// pending ApiVersions sends, timed-out requests (+ idle connections).
    /// Returns the responses; their callbacks are still inside, for the
    /// caller to run once no lock is held.
    pub fn handle_events(&mut self, events: Vec<Event>, now_ms: i64) -> Vec<ClientResponse> {
        let mut responses = std::mem::take(&mut self.local_completions);
        let (mut sends, mut frames, mut discs, mut connects) = (vec![], vec![], vec![], vec![]);
        for ev in events {
            match ev {
                Event::SendDone {
                    node,
                    conn,
                    written,
                } => sends.push((node, conn, written)),
                Event::Frame { node, conn, frame } => frames.push((node, conn, frame)),
                Event::Disconnected { node, conn, error } => discs.push((node, conn, error)),
                Event::Connected { node, conn } => connects.push((node, conn)),
                Event::Wakeup => {}
            }
        }
        for (node, conn, written) in sends {
            if self.is_current(node, conn) {
                self.handle_send_done(node, written, now_ms, &mut responses);
            }
        }
        for (node, conn, f) in frames {
            if self.is_current(node, conn) {
                self.handle_frame(node, f, now_ms, &mut responses);
            }
        }
        for (node, conn, err) in discs {
            if self.is_current(node, conn) {
                self.disconnect_node(node, now_ms, Some(err), &mut responses);
            }
        }
        for (node, conn) in connects {
            if self.is_current(node, conn) && self.states.state(node) == ConnectionState::Connecting
            {
                self.stats.connections_created += 1;
                self.states.checking_api_versions(node, now_ms);
                if let Some(c) = self.conns.get_mut(&node) {
                    c.api_versions_pending = Some(API_VERSIONS_START);
                }
            }
        }
        // Pending ApiVersions sends (new connections, or a retry at the
        // version the broker named).
        let pending: Vec<(i32, i16)> = self
            .conns
            .iter()
            .filter_map(|(n, c)| c.api_versions_pending.map(|v| (*n, v)))
            .filter(|(n, _)| self.in_flight.can_send_more(*n))
            .collect();
        for (node, v) in pending {
            if let Some(c) = self.conns.get_mut(&node) {
                c.api_versions_pending = None;
            }
            self.send_api_versions(node, v, now_ms);
        }
        // Timed-out requests close their connection (4.10).
        for node in self.in_flight.nodes_with_expired_requests(now_ms) {
            let err = Error::Timeout {
                what: format!("request to node {node}"),
                timeout_ms: self.cfg.request_timeout_ms.max(0) as u64,
            };
            self.disconnect_node(node, now_ms, Some(err), &mut responses);
        }
        // Idle connections (nothing in flight, no traffic for max idle).
        for node in self
            .states
            .idle_nodes(now_ms, self.cfg.connections_max_idle_ms)
        {
            if self.in_flight.is_empty(node) {
                self.close_node(node, now_ms);
            }
        }
        self.stats.record(&responses);
        responses
    }

    /// `host:port` of a node, for log lines.
    fn address_of(&self, node: i32) -> String {
        self.nodes
            .get(&node)
            .map_or_else(|| "address unknown".into(), |n| n.address())
    }

    fn is_current(&self, node: i32, conn: u64) -> bool {
        self.conns.get(&node).is_some_and(|c| c.conn == conn)
    }

    fn handle_send_done(
        &mut self,
        node: i32,
        written: u64,
        now_ms: i64,
        out: &mut Vec<ClientResponse>,
    ) {
        // `can_send_more` keeps at most one unwritten request per node and it
        // is the newest, so only the head can be waiting for this.
        let Some(head) = self.in_flight.last_sent_mut(node) else {
            return;
        };
        if head.send_done || head.send_seq > written {
            return;
        }
        head.send_done = true;
        if !head.expect_response {
            // 4.8: acks=0 completes when its bytes are out.
            if let Some(r) = self.in_flight.complete_last_sent(node) {
                out.push(r.into_response(now_ms, false, None, None));
            }
        }
    }

    fn handle_frame(&mut self, node: i32, f: Bytes, now_ms: i64, out: &mut Vec<ClientResponse>) {
        self.states.touch(node, now_ms);
        let expected = self.in_flight.oldest(node).map(|r| r.header.correlation_id);
        let actual = frame::peek_correlation_id(&f);
        let ok = matches!((expected, &actual), (Some(e), Ok(a)) if e == *a);
        if !ok {
            // docs/semantics.md §1.5 / 4.9: the stream is out of step (a response
            // nobody asked for, or the wrong id): nothing later on it can be
            // trusted. Fail everything in flight and start over.
            let err = match (expected, actual) {
                (None, _) => Error::Protocol(ferrokafka_protocol::ProtocolError::invalid(
                    "response",
                    "response received with no request in flight",
                )),
                (Some(e), Ok(a)) => {
                    Error::Protocol(ferrokafka_protocol::ProtocolError::CorrelationMismatch {
                        expected: e,
                        actual: a,
                    })
                }
                (_, Err(e)) => Error::Protocol(e),
            };
            self.disconnect_node(node, now_ms, Some(err), out);
            self.with_updater(|up, _| up.request_update());
            return;
        }
        let Some(req) = self.in_flight.complete_next(node) else {
            return;
        };
        let decoded = frame::decode_response(req.header.api_key, req.header.api_version, f);
        if decoded.is_ok() {
            // Every answered request counts for the node's figures (Java
            // counts its own Metadata and ApiVersions requests too).
            self.stats.answered(node, now_ms - req.created_ms);
        }
        match decoded {
            Err(e) => {
                // An undecodable body fails this request only. The stream is
                // still in step: the frame had its own length and the
                // correlation id we expected, so the next frame starts where
                // it should. Closing here would fail every other request in
                // flight with an error about a body that was not theirs
                // (seen on librdkafka's mock, whose error answers to
                // JoinGroup v5 and SyncGroup v3 carry nulls in non-nullable
                // fields, failing a group member's unrelated OffsetCommit).
                // Framing errors (above) still poison the connection.
                //
                // The request completes as `disconnected` with the decode error:
                // every caller already treats that as "no usable answer" (a
                // Produce batch is retried with its sequence, which the broker
                // deduplicates), where a body-less non-disconnected response
                // would read as an acks=0 completion.
                let e = Error::Protocol(e);
                let internal = req.internal;
                let r = req.into_response(now_ms, true, None, Some(e.clone()));
                self.finish(r, internal, out);
                if matches!(internal, Internal::ApiVersions) {
                    // Without a readable ApiVersions answer the connection
                    // never becomes ready: end it.
                    self.disconnect_node(node, now_ms, Some(e), out);
                }
            }
            Ok((_, body, _)) => match req.internal {
                Internal::ApiVersions => {
                    self.handle_api_versions(node, req.header.api_version, body, now_ms, out)
                }
                Internal::Metadata => {
                    if let ResponseKind::Metadata(m) = &body {
                        match metadata_response_from_wire(m) {
                            Ok(md) => {
                                for b in &md.brokers {
                                    self.nodes.insert(b.id, b.clone());
                                }
                                self.with_updater(|up, _| up.handle_success_request(now_ms, md));
                                self.refresh_nodes();
                            }
                            // A top-level error (v13+ REBOOTSTRAP_REQUIRED...) is a
                            // failed update for the updater to back off from.
                            Err(e) => {
                                self.with_updater(|up, _| {
                                    up.handle_failed_request(now_ms, Some(&e))
                                });
                            }
                        }
                    }
                }
                Internal::No => out.push(req.into_response(now_ms, false, Some(body), None)),
            },
        }
    }

    fn handle_api_versions(
        &mut self,
        node: i32,
        sent_version: i16,
        body: ResponseKind,
        now_ms: i64,
        out: &mut Vec<ClientResponse>,
    ) {
        let ResponseKind::ApiVersions(r) = body else {
            return;
        };
        if r.error_code == frame::UNSUPPORTED_VERSION {
            // The broker does not speak our ApiVersions version; its v0
            // answer names the range it does speak (an empty list means v0,
            // as in Java). Retry at its max, but only if that is *lower* than
            // what we just sent: a broker that refuses v0, or names the very
            // version it refused (or a higher one), would otherwise keep the
            // connection in CHECKING_API_VERSIONS forever, each retry being a
            // fresh request with a fresh deadline so the request timeout
            // never fires. Versions strictly decrease, so at most
            // API_VERSIONS_START retries; after that the error below ends it.
            let theirs = r
                .api_keys
                .iter()
                .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                .map(|k| k.max_version)
                .unwrap_or(0);
            let retry = theirs.clamp(0, API_VERSIONS_START);
            if retry < sent_version {
                let last = self.in_flight.count(node) == 0;
                if let Some(c) = self.conns.get_mut(&node) {
                    if last {
                        c.api_versions_pending = Some(retry);
                    }
                }
                return;
            }
        }
        if r.error_code != 0 {
            let e = Error::broker(r.error_code, Some("ApiVersions".into()));
            self.disconnect_node(node, now_ms, Some(e), out);
            return;
        }
        if let Some(c) = self.conns.get_mut(&node) {
            c.broker_versions = r
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect();
        }
        self.states.ready(node, now_ms);
        // Connection lifecycle at INFO: up (here), lost or closed (below).
        log::info!(
            target: "ferrokafka::network",
            "connected to node {node} ({}): ApiVersions v{sent_version}, {} APIs",
            self.address_of(node),
            r.api_keys.len()
        );
    }

    fn finish(&mut self, r: ClientResponse, internal: Internal, out: &mut Vec<ClientResponse>) {
        match internal {
            Internal::No => out.push(r),
            Internal::ApiVersions => {}
            Internal::Metadata => {
                let err = r.error.clone();
                self.with_updater(|up, _| up.handle_failed_request(r.received_ms, err.as_ref()));
            }
        }
    }

    /// 4.10: every in-flight request of `node` completes disconnected, the
    /// connection closes, state DISCONNECTED (backoff grows), updater told.
    pub(super) fn disconnect_node(
        &mut self,
        node: i32,
        now_ms: i64,
        error: Option<Error>,
        out: &mut Vec<ClientResponse>,
    ) {
        self.count_close(node);
        if let Some(c) = self.conns.remove(&node) {
            self.transport.close(node, c.conn);
        }
        let in_flight = self.in_flight.count(node);
        let connecting = self.states.state(node) == ConnectionState::Connecting;
        match &error {
            // A failure to connect is reported at WARNING (rate-limited,
            // naming the cause) by the metadata updater, which knows whether
            // every broker is down; here only at DEBUG.
            Some(e) if connecting => log::debug!(
                target: "ferrokafka::network",
                "connecting to node {node} ({}) failed: {e}",
                self.address_of(node)
            ),
            Some(e) => log::warn!(
                target: "ferrokafka::network",
                "connection to node {node} ({}) lost: {e}; {in_flight} request(s) in flight fail",
                self.address_of(node)
            ),
            None => log::info!(
                target: "ferrokafka::network",
                "disconnected from node {node} ({})",
                self.address_of(node)
            ),
        }
        if let Some(Error::Authentication { .. }) = &error {
            // Java's AUTHENTICATION_FAILED: reconnects still back off (no
            // storm), and callers see the refusal instead of a generic
            // disconnect.
            self.states.auth_failed(node, now_ms);
            self.last_auth_error
                .insert(node, error.clone().expect("matched"));
        } else {
            self.states.disconnected(node, now_ms);
        }
        for req in self.in_flight.clear_all(node) {
            let internal = req.internal;
            let r = req.into_response(now_ms, true, None, error.clone());
            self.finish(r, internal, out);
        }
        self.with_updater(|up, _| up.handle_server_disconnect(now_ms, node, error.as_ref()));
    }

    /// Close a connection on purpose (idle, or `close(node)`): same as a
    /// disconnect for anything in flight.
    pub fn close_node(&mut self, node: i32, now_ms: i64) -> Vec<ClientResponse> {
        let mut out = Vec::new();
        if self.conns.contains_key(&node) {
            log::info!(
                target: "ferrokafka::network",
                "closing the connection to node {node} ({})",
                self.address_of(node)
            );
        }
        self.count_close(node);
        if let Some(c) = self.conns.remove(&node) {
            self.transport.close(node, c.conn);
        }
        self.states.disconnected(node, now_ms);
        for req in self.in_flight.clear_all(node) {
            let internal = req.internal;
            let r = req.into_response(
                now_ms,
                true,
                None,
                Some(Error::Disconnected { node_id: node }),
            );
            self.finish(r, internal, &mut out);
        }
        out
    }

    pub fn close(&mut self, now_ms: i64) -> Vec<ClientResponse> {
        let nodes: Vec<i32> = self.conns.keys().copied().collect();
        let mut out = Vec::new();
        for n in nodes {
            out.extend(self.close_node(n, now_ms));
        }
        self.with_updater(|up, _| up.close());
        self.closed = true;
        out
    }

    /// Why the node's last connection was refused (TLS/SASL), if it was.
    pub fn auth_error(&self, node: i32) -> Option<Error> {
        (self.states.state(node) == ConnectionState::AuthFailed)
            .then(|| self.last_auth_error.get(&node).cloned())
            .flatten()
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

impl UpdaterContext for NetworkClient {
    fn least_loaded_node(&mut self, now_ms: i64) -> Option<Node> {
        NetworkClient::least_loaded_node(self, now_ms)
    }
    fn can_send_request(&self, node_id: i32, _now_ms: i64) -> bool {
        NetworkClient::can_send_request(self, node_id)
    }
    fn is_connecting_or_connected(&self, node_id: i32) -> bool {
        self.states.is_connecting_or_connected(node_id)
    }
    fn can_connect(&self, node: &Node, now_ms: i64) -> bool {
        self.states.can_connect(node.id, now_ms)
    }
    fn initiate_connect(&mut self, node: &Node, now_ms: i64) {
        NetworkClient::initiate_connect(self, node, now_ms)
    }
    fn send_metadata_request(
        &mut self,
        node_id: i32,
        spec: MetadataRequestSpec,
        now_ms: i64,
    ) -> Result<(), Error> {
        let topics = spec.topics.map(|ts| {
            ts.into_iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t))))
                })
                .collect()
        });
        let body = RequestKind::Metadata(
            MetadataRequest::default()
                .with_topics(topics)
                .with_allow_auto_topic_creation(spec.allow_auto_topic_creation),
        );
        let req = self.new_client_request(node_id, body, true, None, now_ms);
        self.do_send(req, now_ms, Internal::Metadata)
    }
    fn reconnect_backoff_ms(&self) -> i64 {
        self.cfg.reconnect_backoff_ms
    }
}
