//! The core with a recording transport and injected time: no sockets, no sleeps.

use super::*;
use crate::cluster::MetadataResponse;
use bytes::{BufMut, BytesMut};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Connect(i32, u64),
    Write(i32, u64, RequestHeader),
    Close(i32, u64),
}

/// Records operations; every write is `Queued` (so tests drive `SendDone`),
/// numbered per connection.
#[derive(Clone, Default)]
struct Fake(
    Arc<Mutex<Vec<Op>>>,
    Arc<Mutex<std::collections::HashMap<u64, u64>>>,
    Arc<std::sync::atomic::AtomicBool>,
);

impl Transport for Fake {
    fn connect(&mut self, node: &Node, conn: u64) {
        self.0.lock().unwrap().push(Op::Connect(node.id, conn));
    }
    fn write(&mut self, node_id: i32, conn: u64, f: Frame) -> WriteOutcome {
        let mut b = f.to_bytes().slice(4..);
        let h = frame::decode_request_header(&mut b).unwrap();
        self.0.lock().unwrap().push(Op::Write(node_id, conn, h));
        let mut seqs = self.1.lock().unwrap();
        let seq = seqs.entry(conn).or_default();
        *seq += 1;
        if self.2.load(std::sync::atomic::Ordering::SeqCst) {
            return WriteOutcome::Buffered;
        }
        WriteOutcome::Queued(*seq)
    }
    fn close(&mut self, node_id: i32, conn: u64) {
        self.0.lock().unwrap().push(Op::Close(node_id, conn));
    }
}

impl Fake {
    /// "Everything written so far on `conn` is out."
    fn sent(&self, node: i32, conn: u64) -> Event {
        let written = self.1.lock().unwrap().get(&conn).copied().unwrap_or(0);
        Event::SendDone {
            node,
            conn,
            written,
        }
    }
    fn take(&self) -> Vec<Op> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Fixed nodes, never due, records what it is told.
#[derive(Default)]
struct TestUpdater {
    nodes: Vec<Node>,
    disconnects: Arc<Mutex<Vec<i32>>>,
    update_requests: Arc<Mutex<u32>>,
}

impl MetadataUpdater for TestUpdater {
    fn fetch_nodes(&self) -> Vec<Node> {
        self.nodes.clone()
    }
    fn is_update_due(&self, _: i64) -> bool {
        false
    }
    fn maybe_update(&mut self, _: i64, _: &mut dyn UpdaterContext) -> i64 {
        i64::MAX
    }
    fn handle_server_disconnect(&mut self, _: i64, node: i32, _: Option<&Error>) {
        self.disconnects.lock().unwrap().push(node);
    }
    fn handle_failed_request(&mut self, _: i64, _: Option<&Error>) {}
    fn handle_success_request(&mut self, _: i64, _: MetadataResponse) {}
    fn request_update(&mut self) {
        *self.update_requests.lock().unwrap() += 1;
    }
    fn close(&mut self) {}
}

fn nodes(n: i32) -> Vec<Node> {
    (0..n).map(|i| Node::new(i, "h", 9092, None)).collect()
}

struct H {
    core: NetworkClient,
    t: Fake,
    disconnects: Arc<Mutex<Vec<i32>>>,
    update_requests: Arc<Mutex<u32>>,
}

fn harness(n: i32, cfg: ClientConfig) -> H {
    let t = Fake::default();
    let up = TestUpdater {
        nodes: nodes(n),
        ..Default::default()
    };
    let (d, u) = (up.disconnects.clone(), up.update_requests.clone());
    let mut core = NetworkClient::new(cfg, Box::new(up), Box::new(t.clone()), 7).unwrap();
    core.states_mut().set_jitter(0.0);
    H {
        core,
        t,
        disconnects: d,
        update_requests: u,
    }
}

/// ApiVersions v0..v3 answer (response header v0 always). `keys`: (key, min, max).
fn api_versions_frame(cid: i32, version: i16, error: i16, keys: &[(i16, i16, i16)]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(cid);
    b.put_i16(error);
    if version >= 3 {
        b.put_u8(keys.len() as u8 + 1); // compact array
    } else {
        b.put_i32(keys.len() as i32);
    }
    for (k, lo, hi) in keys {
        b.put_i16(*k);
        b.put_i16(*lo);
        b.put_i16(*hi);
        if version >= 3 {
            b.put_u8(0);
        }
    }
    if version >= 1 {
        b.put_i32(0); // throttle
    }
    if version >= 3 {
        b.put_u8(0);
    }
    b.freeze()
}

/// Heartbeat v0 answer: header v0 + error_code.
fn heartbeat_frame(cid: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(cid);
    b.put_i16(0);
    b.freeze()
}

const KEYS: &[(i16, i16, i16)] = &[(18, 0, 3), (12, 0, 0), (3, 0, 12)];

/// Connects node `id` up to READY; returns its connection generation.
fn bring_up(h: &mut H, id: i32, now: i64) -> u64 {
    assert!(!h.core.ready(&Node::new(id, "h", 9092, None), now));
    let ops = h.t.take();
    let Some(Op::Connect(_, conn)) = ops.last().cloned() else {
        panic!("{ops:?}")
    };
    assert_eq!(h.core.connection_state(id), ConnectionState::Connecting);
    h.core
        .handle_events(vec![Event::Connected { node: id, conn }], now);
    assert_eq!(
        h.core.connection_state(id),
        ConnectionState::CheckingApiVersions
    );
    let ops = h.t.take();
    let Some(Op::Write(_, _, hdr)) = ops.last().cloned() else {
        panic!("{ops:?}")
    };
    assert_eq!((hdr.api_key, hdr.api_version), (18, 3));
    h.core.handle_events(
        vec![
            h.t.sent(id, conn),
            Event::Frame {
                node: id,
                conn,
                frame: api_versions_frame(hdr.correlation_id, 3, 0, KEYS),
            },
        ],
        now,
    );
    assert_eq!(h.core.connection_state(id), ConnectionState::Ready);
    assert!(h.core.ready(&Node::new(id, "h", 9092, None), now));
    conn
}

fn heartbeat() -> RequestKind {
    RequestKind::Heartbeat(Default::default())
}

/// `n` Heartbeats written to node 0 on `conn` at t=1; the recorded ops are
/// cleared. Returns their correlation ids.
fn send_heartbeats(h: &mut H, conn: u64, n: usize) -> Vec<i32> {
    let mut cids = vec![];
    for _ in 0..n {
        let r = h.core.new_client_request(0, heartbeat(), true, None, 1);
        cids.push(r.correlation_id);
        h.core.send(r, 1).unwrap();
        h.core.handle_events(vec![h.t.sent(0, conn)], 1);
    }
    h.t.take();
    cids
}

#[test]
fn connect_negotiate_send_receive() {
    let mut h = harness(1, ClientConfig::default());
    let conn = bring_up(&mut h, 0, 0);
    let av = h.core.api_versions(0);
    assert_eq!(av.get(&12), Some(&(0, 0)));
    assert_eq!(av.get(&3).map(|r| r.1), Some(12));
    let req = h.core.new_client_request(0, heartbeat(), true, None, 5);
    let cid = req.correlation_id;
    h.core.send(req, 5).unwrap();
    let Op::Write(_, _, hdr) = h.t.take().pop().unwrap() else {
        panic!()
    };
    assert_eq!(
        (hdr.api_key, hdr.api_version, hdr.correlation_id),
        (12, 0, cid),
        "highest common version"
    );
    assert_eq!(h.core.in_flight_count(Some(0)), 1);
    let rs = h.core.handle_events(
        vec![
            h.t.sent(0, conn),
            Event::Frame {
                node: 0,
                conn,
                frame: heartbeat_frame(cid),
            },
        ],
        12,
    );
    assert_eq!(rs.len(), 1);
    assert!(!rs[0].disconnected);
    assert!(matches!(rs[0].body, Some(ResponseKind::Heartbeat(_))));
    assert_eq!(rs[0].latency_ms(), 7);
    assert_eq!(h.core.in_flight_count(None), 0);
}

#[test]
fn in_flight_cap_and_oldest_first() {
    let cfg = ClientConfig {
        max_in_flight_requests_per_connection: 3,
        ..Default::default()
    };
    let mut h = harness(1, cfg);
    let conn = bring_up(&mut h, 0, 0);
    let mut cids = vec![];
    for _ in 0..3 {
        assert!(h.core.is_ready(0, 1));
        let r = h.core.new_client_request(0, heartbeat(), true, None, 1);
        cids.push(r.correlation_id);
        h.core.send(r, 1).unwrap();
        assert!(!h.core.is_ready(0, 1), "unwritten send blocks the next");
        h.core.handle_events(vec![h.t.sent(0, conn)], 1);
    }
    assert!(!h.core.is_ready(0, 1), "cap reached");
    let r = h.core.new_client_request(0, heartbeat(), true, None, 1);
    assert!(matches!(h.core.send(r, 1), Err(Error::State { .. })));
    let frames = cids
        .iter()
        .map(|c| Event::Frame {
            node: 0,
            conn,
            frame: heartbeat_frame(*c),
        })
        .collect();
    let rs = h.core.handle_events(frames, 2);
    let got: Vec<i32> = rs.iter().map(|r| r.request_header.correlation_id).collect();
    assert_eq!(got, cids);
    assert!(cids.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn wrong_correlation_id_poisons_the_connection() {
    let mut h = harness(1, ClientConfig::default());
    let conn = bring_up(&mut h, 0, 0);
    let cids = send_heartbeats(&mut h, conn, 2);
    let rs = h.core.handle_events(
        vec![Event::Frame {
            node: 0,
            conn,
            frame: heartbeat_frame(cids[1]),
        }],
        2,
    );
    assert_eq!(rs.len(), 2);
    assert!(rs.iter().all(|r| r.disconnected));
    assert!(matches!(
        rs[0].error,
        Some(Error::Protocol(
            ferrokafka_protocol::ProtocolError::CorrelationMismatch { .. }
        ))
    ));
    assert_eq!(h.core.connection_state(0), ConnectionState::Disconnected);
    assert_eq!(h.t.take(), vec![Op::Close(0, conn)]);
    assert_eq!(*h.update_requests.lock().unwrap(), 1);
    assert_eq!(*h.disconnects.lock().unwrap(), vec![0]);
    // Stale events of the dead connection are ignored.
    let rs = h.core.handle_events(
        vec![Event::Frame {
            node: 0,
            conn,
            frame: heartbeat_frame(cids[0]),
        }],
        3,
    );
    assert!(rs.is_empty());
}

#[test]
fn undecodable_body_fails_only_its_request_and_keeps_the_connection() {
    // A frame with the right correlation id whose body does not decode (a
    // Heartbeat v0 answer cut to one byte of its error code): the stream is
    // still in step, so only that request fails; the next one on the same
    // connection is answered normally and nothing is closed.
    let mut h = harness(1, ClientConfig::default());
    let conn = bring_up(&mut h, 0, 0);
    let cids = send_heartbeats(&mut h, conn, 2);
    let mut bad = BytesMut::new();
    bad.put_i32(cids[0]);
    bad.put_u8(0);
    let rs = h.core.handle_events(
        vec![
            Event::Frame {
                node: 0,
                conn,
                frame: bad.freeze(),
            },
            Event::Frame {
                node: 0,
                conn,
                frame: heartbeat_frame(cids[1]),
            },
        ],
        2,
    );
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].request_header.correlation_id, cids[0]);
    assert!(
        rs[0].disconnected && rs[0].body.is_none(),
        "no usable answer: callers retry or fail it"
    );
    assert!(
        matches!(rs[0].error, Some(Error::Protocol(_))),
        "{:?}",
        rs[0].error
    );
    assert!(!rs[1].disconnected && rs[1].error.is_none());
    assert!(matches!(rs[1].body, Some(ResponseKind::Heartbeat(_))));
    assert_eq!(h.core.connection_state(0), ConnectionState::Ready);
    assert!(h.t.take().is_empty(), "nothing closed");
    assert!(h.disconnects.lock().unwrap().is_empty());
}

#[test]
fn unsupported_version_completes_locally_without_io() {
    let mut h = harness(1, ClientConfig::default());
    bring_up(&mut h, 0, 0);
    h.t.take();
    // FindCoordinator (10) is not in the broker's list.
    let r = h.core.new_client_request(
        0,
        RequestKind::FindCoordinator(Default::default()),
        true,
        None,
        1,
    );
    h.core.send(r, 1).unwrap();
    assert!(h.t.take().is_empty(), "socket untouched");
    assert_eq!(h.core.in_flight_count(None), 0);
    assert_eq!(h.core.maybe_update(1), 0, "poll must not sleep");
    let rs = h.core.handle_events(vec![], 2);
    assert_eq!(rs.len(), 1);
    let e = rs[0].version_mismatch.as_ref().unwrap();
    assert_eq!(e.code(), 35);
}

#[test]
fn request_timeout_closes_the_connection() {
    let cfg = ClientConfig {
        request_timeout_ms: 100,
        ..Default::default()
    };
    let mut h = harness(1, cfg);
    let conn = bring_up(&mut h, 0, 0);
    let r = h.core.new_client_request(0, heartbeat(), true, None, 10);
    h.core.send(r, 10).unwrap();
    h.core.handle_events(vec![h.t.sent(0, conn)], 10);
    assert_eq!(
        h.core.maybe_update(10),
        100,
        "sleep at most until the deadline"
    );
    assert!(h.core.handle_events(vec![], 110).is_empty());
    let rs = h.core.handle_events(vec![], 111);
    assert_eq!(rs.len(), 1);
    assert!(rs[0].disconnected);
    assert!(matches!(rs[0].error, Some(Error::Timeout { .. })));
    assert_eq!(h.core.connection_state(0), ConnectionState::Disconnected);
}

#[test]
fn acks0_completes_on_send() {
    let mut h = harness(1, ClientConfig::default());
    let conn = bring_up(&mut h, 0, 0);
    let r = h.core.new_client_request(0, heartbeat(), false, None, 1);
    h.core.send(r, 1).unwrap();
    let rs = h.core.handle_events(vec![h.t.sent(0, conn)], 2);
    assert_eq!(rs.len(), 1);
    assert!(rs[0].body.is_none() && !rs[0].disconnected);
    assert_eq!(h.core.in_flight_count(None), 0);
}

#[test]
fn api_versions_unsupported_retries_at_broker_version() {
    let mut h = harness(1, ClientConfig::default());
    h.core.ready(&Node::new(0, "h", 1, None), 0);
    let Op::Connect(_, conn) = h.t.take().pop().unwrap() else {
        panic!()
    };
    h.core
        .handle_events(vec![Event::Connected { node: 0, conn }], 0);
    let Op::Write(_, _, hdr) = h.t.take().pop().unwrap() else {
        panic!()
    };
    // v0-format error answer naming ApiVersions 0..=2.
    h.core.handle_events(
        vec![
            h.t.sent(0, conn),
            Event::Frame {
                node: 0,
                conn,
                frame: api_versions_frame(hdr.correlation_id, 0, 35, &[(18, 0, 2)]),
            },
        ],
        1,
    );
    assert_eq!(
        h.core.connection_state(0),
        ConnectionState::CheckingApiVersions
    );
    h.core.handle_events(vec![], 1);
    let Op::Write(_, _, hdr2) = h.t.take().pop().unwrap() else {
        panic!()
    };
    assert_eq!((hdr2.api_key, hdr2.api_version), (18, 2));
    h.core.handle_events(
        vec![
            h.t.sent(0, conn),
            Event::Frame {
                node: 0,
                conn,
                frame: api_versions_frame(hdr2.correlation_id, 2, 0, KEYS),
            },
        ],
        2,
    );
    assert_eq!(h.core.connection_state(0), ConnectionState::Ready);
}

/// A hostile or broken broker answering UNSUPPORTED_VERSION to every
/// ApiVersions, with no fallback lower than what we sent: the connection must
/// fail after at most one retry per lower version, not cycle forever in
/// CHECKING_API_VERSIONS (each retry has a fresh deadline, so the request
/// timeout alone would never end it).
#[test]
fn api_versions_unsupported_without_a_lower_version_disconnects() {
    // (keys in the error answer, versions we expect to send before giving up)
    type Case<'a> = (&'a [(i16, i16, i16)], &'a [i16]);
    let cases: &[Case] = &[
        (&[], &[3, 0]),           // empty list: fall back to v0 once, then stop
        (&[(18, 0, 3)], &[3]),    // names the version it just refused
        (&[(18, 0, 9)], &[3]),    // names a higher one
        (&[(18, 0, 1)], &[3, 1]), // one step down, then it refuses that too
    ];
    for (keys, expect) in cases {
        let mut h = harness(1, ClientConfig::default());
        h.core.ready(&Node::new(0, "h", 1, None), 0);
        let Op::Connect(_, conn) = h.t.take().pop().unwrap() else {
            panic!()
        };
        h.core
            .handle_events(vec![Event::Connected { node: 0, conn }], 0);
        let mut sent = vec![];
        for now in 1..10 {
            let ops = h.t.take();
            let Some(Op::Write(_, _, hdr)) = ops.last().cloned() else {
                break;
            };
            assert_eq!(hdr.api_key, 18);
            sent.push(hdr.api_version);
            h.core.handle_events(
                vec![
                    h.t.sent(0, conn),
                    Event::Frame {
                        node: 0,
                        conn,
                        frame: api_versions_frame(hdr.correlation_id, 0, 35, keys),
                    },
                ],
                now,
            );
            h.core.handle_events(vec![], now);
        }
        assert_eq!(&sent, expect, "keys {keys:?}");
        assert_eq!(
            h.core.connection_state(0),
            ConnectionState::Disconnected,
            "keys {keys:?}"
        );
        assert_eq!(h.core.in_flight_count(None), 0);
        assert_eq!(*h.disconnects.lock().unwrap(), vec![0]);
    }
}

#[test]
fn connect_failure_backs_off_exponentially_and_resets() {
    let cfg = ClientConfig {
        reconnect_backoff_ms: 100,
        reconnect_backoff_max_ms: 1000,
        ..Default::default()
    };
    let mut h = harness(1, cfg);
    let n = Node::new(0, "h", 1, None);
    let mut now = 0;
    for expected in [100, 200, 400] {
        h.core.ready(&n, now);
        let Op::Connect(_, conn) = h.t.take().pop().unwrap() else {
            panic!()
        };
        h.core.handle_events(
            vec![Event::Disconnected {
                node: 0,
                conn,
                error: Error::Disconnected { node_id: 0 },
            }],
            now,
        );
        assert_eq!(h.core.connection_state(0), ConnectionState::Disconnected);
        assert!(!h.core.ready(&n, now + expected - 1));
        assert!(
            !h.t.take().iter().any(|o| matches!(o, Op::Connect(..))),
            "no attempt inside the backoff"
        );
        now += expected;
    }
    bring_up(&mut h, 0, now);
    assert_eq!(h.core.states_mut().current_backoff(0), Some(100));
}

#[test]
fn least_loaded_rules() {
    let mut h = harness(3, ClientConfig::default());
    // Nothing connected: any node whose backoff elapsed (all).
    assert!(h.core.least_loaded_node(0).is_some());
    // Node 1 ready with nothing in flight wins at once, whatever the start offset.
    let c1 = bring_up(&mut h, 1, 0);
    for _ in 0..20 {
        assert_eq!(h.core.least_loaded_node(0).unwrap().id, 1);
    }
    // Node 1 busy (1 in flight), node 2 ready with 2 in flight: fewest wins.
    let c2 = bring_up(&mut h, 2, 0);
    for (node, conn, k) in [(1, c1, 1), (2, c2, 2)] {
        for _ in 0..k {
            let r = h.core.new_client_request(node, heartbeat(), true, None, 0);
            h.core.send(r, 0).unwrap();
            h.core.handle_events(vec![h.t.sent(node, conn)], 0);
        }
    }
    // Node 0 is never-tried: can connect, but a ready node beats it.
    for _ in 0..20 {
        assert_eq!(h.core.least_loaded_node(0).unwrap().id, 1);
    }
    // All disconnected and blacked out: none.
    let mut h = harness(2, ClientConfig::default());
    for id in 0..2 {
        h.core.ready(&Node::new(id, "h", 1, None), 0);
        let Op::Connect(_, conn) = h.t.take().pop().unwrap() else {
            panic!()
        };
        // Connecting beats can-connect.
        h.core.handle_events(
            vec![Event::Disconnected {
                node: id,
                conn,
                error: Error::Disconnected { node_id: id },
            }],
            0,
        );
    }
    assert!(h.core.least_loaded_node(10).is_none());
    assert!(h.core.least_loaded_node(50).is_some(), "backoff elapsed");
    h.core.ready(&Node::new(0, "h", 1, None), 50);
    for _ in 0..20 {
        assert_eq!(
            h.core.least_loaded_node(50).unwrap().id,
            0,
            "connecting beats backoff-elapsed"
        );
    }
}

#[test]
fn correlation_ids_wrap() {
    let mut h = harness(1, ClientConfig::default());
    h.core.next_correlation_id = i32::MAX;
    let a = h
        .core
        .new_client_request(0, heartbeat(), true, None, 0)
        .correlation_id;
    let b = h
        .core
        .new_client_request(0, heartbeat(), true, None, 0)
        .correlation_id;
    assert_eq!((a, b), (i32::MAX, i32::MIN));
}

#[test]
fn buffered_sends_count_as_sent_at_once() {
    let cfg = ClientConfig {
        max_in_flight_requests_per_connection: 3,
        ..Default::default()
    };
    let mut h = harness(1, cfg);
    let conn = bring_up(&mut h, 0, 0);
    h.t.2.store(true, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..3 {
        assert!(
            h.core.is_ready(0, 1),
            "no SendDone round trip needed between buffered sends"
        );
        let r = h.core.new_client_request(0, heartbeat(), true, None, 1);
        h.core.send(r, 1).unwrap();
    }
    assert!(!h.core.is_ready(0, 1), "the in-flight cap still holds");
    // acks=0 style: completes on the next poll without any event.
    let mut h = harness(1, ClientConfig::default());
    bring_up(&mut h, 0, 0);
    h.t.2.store(true, std::sync::atomic::Ordering::SeqCst);
    let r = h.core.new_client_request(0, heartbeat(), false, None, 1);
    h.core.send(r, 1).unwrap();
    assert_eq!(h.core.in_flight_count(None), 0);
    assert_eq!(h.core.maybe_update(1), 0);
    let rs = h.core.handle_events(vec![], 2);
    assert_eq!(rs.len(), 1);
    assert!(rs[0].body.is_none() && !rs[0].disconnected);
    let _ = conn;
}

#[test]
fn metrics_count_requests_latency_and_failures_per_node() {
    let cfg = ClientConfig {
        request_timeout_ms: 100,
        ..Default::default()
    };
    let mut h = harness(1, cfg);
    let conn = bring_up(&mut h, 0, 0);
    let m = |h: &H| -> HashMap<String, f64> { h.core.metrics().into_iter().collect() };
    // The connection and its ApiVersions (answered at 0, made at 0).
    let before = m(&h);
    assert_eq!(before["connection-count"], 1.0);
    assert_eq!(before["connection-creation-total"], 1.0);
    assert_eq!(before["request-total{node-id=node-0}"], 1.0);
    let req = h.core.new_client_request(0, heartbeat(), true, None, 5);
    let cid = req.correlation_id;
    h.core.send(req, 5).unwrap();
    let frame = heartbeat_frame(cid);
    h.core.handle_events(
        vec![
            h.t.sent(0, conn),
            Event::Frame {
                node: 0,
                conn,
                frame,
            },
        ],
        12,
    );
    let after = m(&h);
    assert_eq!(after["request-total{node-id=node-0}"], 2.0);
    assert_eq!(after["request-latency-max{node-id=node-0}"], 7.0);
    assert_eq!(after["request-latency-avg{node-id=node-0}"], 3.5);
    assert_eq!(after["request-error-total{node-id=node-0}"], 0.0);
    // A timed-out request: a failure, and the connection closes.
    let r = h.core.new_client_request(0, heartbeat(), true, None, 20);
    h.core.send(r, 20).unwrap();
    h.core.handle_events(vec![h.t.sent(0, conn)], 20);
    assert_eq!(h.core.handle_events(vec![], 121).len(), 1);
    let last = m(&h);
    assert_eq!(last["request-total{node-id=node-0}"], 3.0);
    assert_eq!(last["request-error-total{node-id=node-0}"], 1.0);
    assert_eq!(last["connection-count"], 0.0);
    assert_eq!(last["connection-close-total"], 1.0);
}
