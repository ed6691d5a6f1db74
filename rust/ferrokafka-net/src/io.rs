//! The tokio side: the process-wide runtime, one pair of tasks per broker
//! connection, and [`NetworkClient`], which glues a [`ClientCore`] to them.
//!
//! Concurrency model
//! -----------------
//! * All protocol state lives in one `ClientCore` behind one `Mutex`. It is
//!   only ever held for short, non-blocking work (never across an await, a
//!   socket call or a wait), so contention is brief and deadlock impossible:
//!   no code path takes a second lock while holding it, except the event
//!   receiver lock described next, which is always taken *before* it.
//! * Connection tasks never touch the core. They only push [`Event`]s into a
//!   std mpsc channel (non-blocking `send`, fine from async code). `poll`
//!   sleeps on that channel *without* the core lock, so other threads (the
//!   Python caller's other threads, the async driver) can `send` meanwhile;
//!   their bytes go straight to the writer task, so I/O progresses even when
//!   nobody is polling, and the completions wait in the channel.
//! * The receiver sits in its own `Mutex`: only one poller consumes events at
//!   a time (a second concurrent `poll` waits its turn), which keeps the
//!   4.11 processing order per batch.
//! * Callbacks run after both locks are released, so a callback may call
//!   `send` / `ready` on the same client.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use ferrokafka_protocol::frame::FrameDecoder;
use ferrokafka_protocol::kafka_protocol::messages::RequestKind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc as tmpsc;
use tokio::task::JoinHandle;

use crate::client::{
    Callback, ClientConfig, ClientCore, ClientRequest, ClientResponse, Event, Transport,
    WriteOutcome,
};
use crate::cluster::Node;
use crate::error::Error;
use crate::states::ConnectionState;
use crate::updater::MetadataUpdater;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

// ------------------------------------------------------------------ runtime

/// (pid that built it, runtime). Spark forks Python workers: a forked child
/// inherits this static but none of the runtime's threads, so a runtime from
/// another pid is abandoned (leaked on purpose: dropping it would wait for
/// worker threads that do not exist in this process) and a new one is built.
type PidRuntime = Option<(u32, Arc<Runtime>)>;
static RUNTIME: OnceLock<Mutex<PidRuntime>> = OnceLock::new();

pub fn runtime() -> Arc<Runtime> {
    let cell = RUNTIME.get_or_init(|| Mutex::new(None));
    // A poisoned lock only means a panic elsewhere while holding it; the
    // Option inside is still consistent.
    let mut g = cell.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    if let Some((owner, rt)) = g.as_ref() {
        if *owner == pid {
            return rt.clone();
        }
    }
    if let Some(old) = g.take() {
        std::mem::forget(old);
    }
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("ferrokafka-io")
            .enable_all()
            .build()
            .expect("cannot start the tokio runtime"),
    );
    *g = Some((pid, rt.clone()));
    rt
}

// ------------------------------------------------------------------ transport

struct ConnHandle {
    conn: u64,
    tx: tmpsc::UnboundedSender<Bytes>,
    task: JoinHandle<()>,
    /// Frames handed to the writer so far (the next frame's seq is this + 1).
    queued: u64,
    shared: Arc<WriterShared>,
}

/// Written by the client thread (`write`) and the writer task; see
/// `TokioTransport::write` for the protocol.
#[derive(Default)]
struct WriterShared {
    /// Bytes handed to the writer and not yet written to the socket: our
    /// user-space part of the socket send buffer.
    unwritten: AtomicUsize,
    /// Seq of a frame whose writer must report `SendDone` (0 = none). At most
    /// one such frame exists per connection: the core sends nothing more to a
    /// node until its newest send is done.
    notify_at: AtomicU64,
}

/// `Transport` over tokio: each connection is one task that connects, then
/// splits into a reader (this task) and a writer (a child task).
pub struct TokioTransport {
    handle: Handle,
    events: Sender<Event>,
    conns: HashMap<i32, ConnHandle>,
    cfg: ClientConfig,
}

impl TokioTransport {
    pub fn new(handle: Handle, events: Sender<Event>, cfg: ClientConfig) -> Self {
        TokioTransport {
            handle,
            events,
            conns: HashMap::new(),
            cfg,
        }
    }
}

impl Transport for TokioTransport {
    fn connect(&mut self, node: &Node, conn: u64) {
        if let Some(old) = self.conns.remove(&node.id) {
            old.task.abort();
        }
        let (tx, rx) = tmpsc::unbounded_channel();
        let shared = Arc::new(WriterShared::default());
        let task = self.handle.spawn(run_connection(
            node.clone(),
            conn,
            self.events.clone(),
            rx,
            self.cfg.clone(),
            shared.clone(),
        ));
        self.conns.insert(
            node.id,
            ConnHandle {
                conn,
                tx,
                task,
                queued: 0,
                shared,
            },
        );
    }

    /// A frame that fits in the send buffer (`send_buffer_bytes`, as the
    /// kernel's SO_SNDBUF would) counts as sent at once: no round trip
    /// through the writer task before the next request may go, which is what
    /// makes pipelining cheap. A frame that does not fit is `Queued`: the
    /// writer reports when it is out, giving the same backpressure as a full
    /// socket buffer in Java's selector.
    fn write(&mut self, node_id: i32, conn: u64, frame: Bytes) -> WriteOutcome {
        let limit = if self.cfg.send_buffer_bytes > 0 {
            self.cfg.send_buffer_bytes as usize
        } else {
            128 * 1024
        };
        let Some(c) = self.conns.get_mut(&node_id).filter(|c| c.conn == conn) else {
            return WriteOutcome::Closed;
        };
        c.queued += 1;
        let seq = c.queued;
        let len = frame.len();
        let before = c.shared.unwritten.fetch_add(len, Ordering::SeqCst);
        let buffered = before + len <= limit;
        if !buffered {
            // Set before the frame enters the channel, so the writer cannot
            // have written it without seeing the request for a report.
            c.shared.notify_at.store(seq, Ordering::SeqCst);
        }
        if c.tx.send(frame).is_err() {
            return WriteOutcome::Closed;
        }
        if buffered {
            WriteOutcome::Buffered
        } else {
            WriteOutcome::Queued(seq)
        }
    }

    fn close(&mut self, node_id: i32, conn: u64) {
        if self.conns.get(&node_id).is_some_and(|c| c.conn == conn) {
            if let Some(c) = self.conns.remove(&node_id) {
                // Aborting the task drops the socket halves: the broker sees
                // the close at once. Events it already queued are stale now
                // (generation check in the core).
                c.task.abort();
            }
        }
    }
}

impl Drop for TokioTransport {
    fn drop(&mut self) {
        for (_, c) in self.conns.drain() {
            c.task.abort();
        }
    }
}

fn transport_err(node: &Node, detail: impl std::fmt::Display) -> Error {
    Error::Transport {
        broker: format!("{}/{}", node.id, node.address()),
        detail: detail.to_string(),
    }
}

async fn connect_any(node: &Node, cfg: &ClientConfig) -> Result<tokio::net::TcpStream, Error> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((node.host.as_str(), node.port))
        .await
        .map_err(|e| transport_err(node, format!("cannot resolve {}: {e}", node.host)))?
        .collect();
    if addrs.is_empty() {
        return Err(transport_err(
            node,
            format!("{} resolves to no address", node.host),
        ));
    }
    let setup = Duration::from_millis(cfg.socket_connection_setup_timeout_ms.max(1) as u64);
    let mut last = None;
    // Every address in turn (IPv6 and IPv4 of a dual-stack name, several A
    // records): the first that accepts wins.
    for addr in addrs {
        let sock = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        let sock = match sock {
            Ok(s) => s,
            Err(e) => {
                last = Some(e.to_string());
                continue;
            }
        };
        if cfg.send_buffer_bytes > 0 {
            let _ = sock.set_send_buffer_size(cfg.send_buffer_bytes as u32);
        }
        if cfg.receive_buffer_bytes > 0 {
            let _ = sock.set_recv_buffer_size(cfg.receive_buffer_bytes as u32);
        }
        match tokio::time::timeout(setup, sock.connect(addr)).await {
            Ok(Ok(stream)) => {
                // Requests are small and latency-bound: no Nagle delay.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => last = Some(format!("{addr}: {e}")),
            Err(_) => {
                last = Some(format!(
                    "{addr}: connection setup timed out after {} ms",
                    setup.as_millis()
                ))
            }
        }
    }
    Err(transport_err(node, last.unwrap_or_default()))
}

async fn run_connection(
    node: Node,
    conn: u64,
    events: Sender<Event>,
    mut rx: tmpsc::UnboundedReceiver<Bytes>,
    cfg: ClientConfig,
    shared: Arc<WriterShared>,
) {
    let id = node.id;
    let tcp = match connect_any(&node, &cfg).await {
        Ok(s) => s,
        Err(error) => {
            let _ = events.send(Event::Disconnected {
                node: id,
                conn,
                error,
            });
            return;
        }
    };
    // TLS and SASL happen before the core hears of the connection, so it
    // never sends a request over an unauthenticated socket.
    let setup = Duration::from_millis(cfg.socket_connection_setup_timeout_ms.max(1) as u64)
        .max(Duration::from_millis(cfg.request_timeout_ms.max(1) as u64));
    let (stream, session_lifetime_ms) =
        match crate::security::secure(tcp, &node, &cfg.security, &cfg.client_id, setup).await {
            Ok(s) => s,
            Err(error) => {
                let _ = events.send(Event::Disconnected {
                    node: id,
                    conn,
                    error,
                });
                return;
            }
        };
    if events.send(Event::Connected { node: id, conn }).is_err() {
        return; // client gone
    }
    let reauth_at =
        crate::security::reauth_after(session_lifetime_ms).map(|d| tokio::time::Instant::now() + d);
    let plaintext = cfg.security.protocol == crate::security::SecurityProtocol::Plaintext;
    let mut got_frame = false;
    let (mut rd, mut wr) = tokio::io::split(stream);
    let wevents = events.clone();
    let wnode = node.clone();
    // Writer: drains the queue, coalescing whatever is already waiting into
    // one write (pipelined requests cost one syscall), then reports how many
    // frames are out. Errors are reported as a disconnect; the reader side
    // will usually notice too, and the core ignores the second report.
    let writer = tokio::spawn(async move {
        let mut batch = BytesMut::new();
        let mut written: u64 = 0;
        while let Some(first) = rx.recv().await {
            let mut count = 1u64;
            let mut bytes = first.len();
            let res = if let Ok(second) = rx.try_recv() {
                batch.clear();
                batch.extend_from_slice(&first);
                batch.extend_from_slice(&second);
                count += 1;
                bytes += second.len();
                while batch.len() < 1 << 20 {
                    match rx.try_recv() {
                        Ok(more) => {
                            batch.extend_from_slice(&more);
                            count += 1;
                            bytes += more.len();
                        }
                        Err(_) => break,
                    }
                }
                wr.write_all(&batch).await
            } else {
                wr.write_all(&first).await
            };
            if let Err(e) = res {
                let _ = wevents.send(Event::Disconnected {
                    node: id,
                    conn,
                    error: transport_err(&wnode, format!("write failed: {e}")),
                });
                return;
            }
            written += count;
            shared.unwritten.fetch_sub(bytes, Ordering::SeqCst);
            // Report only when a queued frame is waiting for it: buffered
            // frames were already counted as sent, and an event per write
            // would wake the poller for nothing.
            let want = shared.notify_at.load(Ordering::SeqCst);
            if want != 0
                && written >= want
                && shared
                    .notify_at
                    .compare_exchange(want, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                && wevents
                    .send(Event::SendDone {
                        node: id,
                        conn,
                        written,
                    })
                    .is_err()
            {
                return;
            }
        }
    });
    // Aborting this task (client close) must take the writer down too.
    struct AbortOnDrop(JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _guard = AbortOnDrop(writer);

    let decoder = FrameDecoder::new(cfg.max_response_size);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let error = loop {
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                got_frame = true;
                if events
                    .send(Event::Frame {
                        node: id,
                        conn,
                        frame,
                    })
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => break Error::Protocol(e),
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
        let read =
            match reauth_at {
                Some(at) => match tokio::time::timeout_at(at, rd.read_buf(&mut buf)).await {
                    Ok(r) => r,
                    Err(_) => break transport_err(
                        &node,
                        "SASL session lifetime reached: reconnecting to re-authenticate (KIP-368)",
                    ),
                },
                None => rd.read_buf(&mut buf).await,
            };
        match read {
            Ok(0) => {
                break transport_err(
                    &node,
                    if buf.is_empty() && !got_frame && plaintext {
                        // The classic symptom of PLAINTEXT against a TLS or
                        // SASL listener: say so instead of a bare EOF.
                        "connection closed by peer before any answer (is the listener TLS or SASL? security_protocol is PLAINTEXT)".to_string()
                    } else if buf.is_empty() {
                        "connection closed by peer".to_string()
                    } else {
                        format!("connection closed by peer in the middle of a frame ({} bytes buffered)", buf.len())
                    },
                )
            }
            Ok(_) => {}
            Err(e) if buf.is_empty() && !got_frame && plaintext => {
                break transport_err(&node, format!("read failed: {e} before any answer (is the listener TLS or SASL? security_protocol is PLAINTEXT)"))
            }
            Err(e) => break transport_err(&node, format!("read failed: {e}")),
        }
    };
    let _ = events.send(Event::Disconnected {
        node: id,
        conn,
        error,
    });
}

// ------------------------------------------------------------------ client

/// The blocking network client: the pure core plus the tokio transport.
/// Shared by reference (`Arc<NetworkClient>`) between the Python binding,
/// the async driver and any thread that wants to send.
pub struct NetworkClient {
    core: Mutex<ClientCore>,
    events: Mutex<Receiver<Event>>,
    waker: Sender<Event>,
    _runtime: Arc<Runtime>,
}

impl NetworkClient {
    pub fn new(cfg: ClientConfig, updater: Box<dyn MetadataUpdater>) -> Result<Self, Error> {
        let rt = runtime();
        let (tx, rx) = mpsc::channel();
        let transport = TokioTransport::new(rt.handle().clone(), tx.clone(), cfg.clone());
        let seed = rand::random::<u64>();
        let core = ClientCore::new(cfg, updater, Box::new(transport), seed)?;
        Ok(NetworkClient {
            core: Mutex::new(core),
            events: Mutex::new(rx),
            waker: tx,
            _runtime: rt,
        })
    }

    /// Short critical sections only (see the module comment).
    pub fn core(&self) -> MutexGuard<'_, ClientCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn ready(&self, node: &Node, now: i64) -> bool {
        self.core().ready(node, now)
    }

    pub fn is_ready(&self, node: i32, now: i64) -> bool {
        self.core().is_ready(node, now)
    }

    pub fn connection_state(&self, node: i32) -> ConnectionState {
        self.core().connection_state(node)
    }

    pub fn least_loaded_node(&self, now: i64) -> Option<Node> {
        self.core().least_loaded_node(now)
    }

    pub fn new_client_request(
        &self,
        node: i32,
        body: RequestKind,
        expect_response: bool,
        callback: Option<Callback>,
        now: i64,
    ) -> ClientRequest {
        self.core()
            .new_client_request(node, body, expect_response, callback, now)
    }

    pub fn send(&self, req: ClientRequest, now: i64) -> Result<(), Error> {
        let r = self.core().send(req, now);
        // A locally completed request (version mismatch) must not wait for
        // a socket event: nudge any poller sleeping on the channel.
        let _ = self.waker.send(Event::Wakeup);
        r
    }

    pub fn wakeup(&self) {
        let _ = self.waker.send(Event::Wakeup);
    }

    /// One round of SEMANTICS 4.11: wait up to `timeout` (less if a deadline
    /// is nearer) for I/O events, process them, run the Rust callbacks.
    /// `now` is called for the times used by the state machine, so tests can
    /// inject time; real callers pass `now_ms`.
    /// Returns the responses and whether anything at all happened (an event
    /// or a response), so a blocking caller knows when to stop waiting.
    pub fn poll_with(
        &self,
        timeout: Duration,
        now: &dyn Fn() -> i64,
    ) -> (Vec<ClientResponse>, bool) {
        let rx = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let wait_ms = self.core().maybe_update(now());
        let wait = timeout.min(Duration::from_millis(wait_ms.clamp(0, i64::MAX) as u64));
        let mut events = Vec::new();
        match rx.recv_timeout(wait) {
            Ok(ev) => events.push(ev),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {}
        }
        while let Ok(ev) = rx.try_recv() {
            events.push(ev);
        }
        let progressed = events.iter().any(|e| !matches!(e, Event::Wakeup));
        let mut responses = {
            let mut core = self.core();
            let r = core.handle_events(events, now());
            // A response may have made the connection ready for the updater
            // (e.g. ApiVersions done): let it send its Metadata now, not one
            // poll later.
            core.maybe_update(now());
            r
        };
        drop(rx);
        for r in &mut responses {
            if let Some(cb) = r.callback.take() {
                // A panicking callback must not take the others (or the
                // client) down with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(r)));
            }
        }
        let any = progressed || !responses.is_empty();
        (responses, any)
    }

    pub fn poll(&self, timeout: Duration) -> Vec<ClientResponse> {
        self.poll_with(timeout, &now_ms).0
    }

    pub fn in_flight_request_count(&self, node: Option<i32>) -> usize {
        self.core().in_flight_count(node)
    }

    pub fn close(&self) -> Vec<ClientResponse> {
        let r = self.core().close(now_ms());
        self.wakeup();
        r
    }
}

impl Drop for NetworkClient {
    fn drop(&mut self) {
        let mut core = self.core.lock().unwrap_or_else(|p| p.into_inner());
        if !core.is_closed() {
            core.close(now_ms());
        }
    }
}
