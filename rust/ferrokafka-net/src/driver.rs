//! The request face for the Rust layers above (producer, admin): `submit(node, body, done)`, or `request` for an answer to wait
//! for, without going through Python.
//!
//! A background thread (the *driver*) owns the polling: it loops over
//! `BlockingClient::poll`, and before each poll it tries to send the requests
//! queued by `submit` whose node has become ready (calling `ready`, which
//! starts the connection). Each request's callback runs `done` on the driver
//! thread (`request` makes that a channel send). The driver uses the same
//! `BlockingClient` as everyone else, so Python callers and Rust callers share
//! connections, correlation ids and in-flight limits.
//!
//! Why a thread and not a tokio task: `poll` blocks on the event queue
//! (`events.rs`), and blocking inside the runtime would stall its one
//! worker thread, and with it every connection (`selector::runtime`).
//!
//! The consumer does not use `AsyncClient`: its own thread polls its client
//! and sends with [`try_send`], the same send-when-ready step as the driver
//! loop here, so its answers skip the driver thread; its application-thread
//! requests are waited for with the same [`Reply`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokafka_protocol::kafka_protocol::messages::RequestKind;
use ferrokafka_protocol::kafka_protocol::messages::ResponseKind;

use crate::blocking::{now_ms, BlockingClient, DRIVER_POLL};
use crate::cluster::Node;
use crate::error::Error;
use crate::wait::{self, Waited};

/// A decoded answer and the version the request was sent at.
pub type Answer = Result<(ResponseKind, i16), Error>;

/// Called once with the answer (and the version it was sent at), on the
/// thread that polls the client: the driver, or an application thread
/// that found the answer waiting (`BlockingClient::poll_pending`). Keep it
/// short (push into a channel).
pub type Done = Box<dyn FnOnce(Answer) + Send>;

/// A request body, or a builder for one when the fields depend on the version
/// negotiated with that broker (group APIs: `group_instance_id` exists from
/// JoinGroup v5 on, and so on). The builder runs once the connection is
/// ready, with the newest version both sides accept.
// Not boxed: a body moves a handful of times per request, and boxing the
// large variant would add an allocation to every request for no gain.
#[allow(clippy::large_enum_variant)]
pub enum Body {
    Ready(RequestKind),
    Versioned {
        api_key: i16,
        max_version: Option<i16>,
        build: Box<dyn FnOnce(i16) -> RequestKind + Send>,
    },
}

/// Per-request overrides of the client defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestOpts {
    /// JoinGroup waits for the whole group on the broker: Java gives it the
    /// rebalance timeout plus a margin instead of `request_timeout_ms`.
    pub request_timeout_ms: Option<i64>,
    /// Newest version allowed (Fetch by topic name stops at v12).
    pub max_version: Option<i16>,
}

/// A request waiting for its node's connection to be ready.
pub(crate) struct Pending {
    /// A connection attempt was started for this request: if the node is
    /// DISCONNECTED again, the attempt failed and the request fails now
    /// (Java's `checkDisconnects`), instead of waiting out its deadline, so
    /// the caller can mark a coordinator unknown and go elsewhere.
    attempted: bool,
    node: Node,
    body: Body,
    opts: RequestOpts,
    deadline_ms: i64,
    reply: Done,
}

impl Pending {
    /// `reply` runs once, on the thread that polls the client (or in
    /// `try_send`, when the request fails before it is sent).
    pub(crate) fn new(
        node: Node,
        body: Body,
        opts: RequestOpts,
        deadline_ms: i64,
        reply: Done,
    ) -> Self {
        Pending {
            attempted: false,
            node,
            body,
            opts,
            deadline_ms,
            reply,
        }
    }

    /// Fail the request without sending it.
    pub(crate) fn fail(self, e: Error) {
        (self.reply)(Err(e));
    }
}

/// Send `p` if its node is ready (starting the connection if needed).
/// Returns it back when it must wait for the connection; otherwise it was
/// sent, or failed (deadline passed, authentication refused, connection
/// attempt failed, no common version) and its reply has run.
pub(crate) fn try_send(c: &BlockingClient, p: Pending, now: i64) -> Option<Pending> {
    if now >= p.deadline_ms {
        (p.reply)(Err(Error::Timeout {
            what: format!("waiting for node {} to be ready", p.node.id),
            timeout_ms: 0,
        }));
        return None;
    }
    // ready + new request + send under one core lock: no other thread can
    // fill the deque in between, so `send` cannot fail for "not ready".
    let mut core = c.core();
    if let Some(e) = core.auth_error(p.node.id) {
        drop(core);
        (p.reply)(Err(e));
        return None;
    }
    if p.attempted
        && core.connection_state(p.node.id) == crate::states::ConnectionState::Disconnected
    {
        drop(core);
        (p.reply)(Err(Error::Disconnected { node_id: p.node.id }));
        return None;
    }
    if !core.ready(&p.node, now) {
        drop(core);
        let mut p = p;
        p.attempted = true;
        return Some(p);
    }
    let mut chosen = None;
    let body = match p.body {
        Body::Ready(b) => b,
        Body::Versioned {
            api_key,
            max_version,
            build,
        } => {
            // The version `send` would choose, client range included; the
            // body is built for it and must go out at exactly it.
            match core.usable_version(p.node.id, api_key, max_version) {
                Some(v) => {
                    chosen = Some(v);
                    build(v)
                }
                None => {
                    let range = core.api_versions(p.node.id).get(&api_key).copied();
                    drop(core);
                    (p.reply)(Err(Error::UnsupportedVersion {
                        api: format!("api key {api_key}"),
                        node_id: p.node.id,
                        broker_min: range.map_or(-1, |r| r.0),
                        broker_max: range.map_or(-1, |r| r.1),
                        client_min: 0,
                        client_max: max_version.unwrap_or(-1),
                    }));
                    return None;
                }
            }
        }
    };
    let reply = Mutex::new(Some(p.reply));
    let cb = Box::new(move |r: &crate::network_client::ClientResponse| {
        let out = if let Some(e) = &r.version_mismatch {
            Err(e.clone())
        } else if r.disconnected {
            Err(r.error.clone().unwrap_or(Error::Disconnected {
                node_id: r.destination,
            }))
        } else {
            match &r.body {
                Some(b) => Ok((b.clone(), r.request_header.api_version)),
                None => Err(Error::State {
                    detail: "request expected no response".into(),
                }),
            }
        };
        if let Some(done) = reply.lock().unwrap_or_else(|p| p.into_inner()).take() {
            done(out);
        }
    });
    let mut req = core.new_client_request(p.node.id, body, true, Some(cb), now);
    if let Some(t) = p.opts.request_timeout_ms {
        req.request_timeout_ms = t;
    }
    if p.opts.max_version.is_some() {
        req.max_version = p.opts.max_version;
    }
    if chosen.is_some() {
        req.max_version = chosen;
    }
    // On error (closed client, unknown API) the request and its callback
    // are dropped, which resolves the waiter with `Closed`.
    if let Err(e) = core.send(req, now) {
        log::debug!("request to node {} not sent: {e}", p.node.id);
    }
    None
}

pub struct AsyncClient {
    client: Arc<BlockingClient>,
    queue: Arc<Mutex<Vec<Pending>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AsyncClient {
    pub fn start(client: Arc<BlockingClient>) -> Self {
        let queue: Arc<Mutex<Vec<Pending>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let waiting = Arc::downgrade(&queue);
        client.on_driver_waits(Box::new(move || {
            waiting
                .upgrade()
                .is_some_and(|q| !q.lock().unwrap_or_else(|p| p.into_inner()).is_empty())
        }));
        let (c, q, s) = (client.clone(), queue.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("ferrokafka-driver".into())
            .spawn(move || {
                crate::log_context::set_thread(c.log_context());
                while !s.load(Ordering::Acquire) {
                    let now = now_ms();
                    // Take the queue out so the lock is not held while we
                    // lock the core (lock order: queue, then core, never
                    // both for long).
                    let pending = std::mem::take(&mut *q.lock().unwrap_or_else(|p| p.into_inner()));
                    let keep: Vec<Pending> = pending
                        .into_iter()
                        .filter_map(|p| try_send(&c, p, now))
                        .collect();
                    q.lock().unwrap_or_else(|p| p.into_inner()).extend(keep);
                    c.poll(DRIVER_POLL);
                }
            })
            .expect("cannot start the network driver thread");
        AsyncClient {
            client,
            queue,
            stop,
            thread: Some(thread),
        }
    }

    pub fn client(&self) -> &Arc<BlockingClient> {
        &self.client
    }

    /// Sends `body` to `node` once its connection is ready (waiting at most
    /// `ready_timeout_ms` for that); `done` runs once with the answer, on the
    /// thread polling the client (`Done`; here, if the client is closed).
    /// `ready_timeout_ms` bounds the wait for the connection.
    pub fn submit(
        &self,
        node: Node,
        body: Body,
        opts: RequestOpts,
        ready_timeout_ms: i64,
        done: Done,
    ) {
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Pending::new(
                node,
                body,
                opts,
                now_ms() + ready_timeout_ms,
                done,
            ));
        self.client.wakeup();
    }
}

/// Anything that sends a request and hands back its [`Reply`]: the driver
/// for admin and producer, the consumer's own thread for the consumer.
pub trait Requester {
    /// Queue `body` for `node`; `ready_timeout_ms` bounds the wait for the
    /// connection, `then` runs on the answering thread after the answer.
    fn request(
        &self,
        node: Node,
        body: Body,
        opts: RequestOpts,
        ready_timeout_ms: i64,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) -> Reply;

    /// `request` and wait for the answer (see [`Reply::wait`]).
    fn request_blocking(
        &self,
        node: Node,
        body: Body,
        opts: RequestOpts,
        timeout_ms: i64,
        interrupted: &dyn Fn() -> bool,
    ) -> Answer {
        self.request(node, body, opts, timeout_ms, None)
            .wait(interrupted)
    }
}

/// The answer to one `request`, arriving from the driver thread.
pub struct Reply {
    rx: Receiver<Answer>,
    wait_ms: i64,
    /// When the request has certainly been completed by its own timeouts.
    give_up: Instant,
}

impl Reply {
    /// The answer will arrive on `rx` within `wait_ms` (the request's own
    /// timeouts complete it by then).
    pub(crate) fn new(rx: Receiver<Answer>, wait_ms: i64) -> Self {
        Reply {
            rx,
            wait_ms,
            give_up: Instant::now() + Duration::from_millis(wait_ms.max(0) as u64),
        }
    }

    /// A `Reply` and the `Done` that fills it, for a `Requester::request`:
    /// the answer goes to the reply, then `then` runs (on the thread that
    /// completed the request). The request's own timeout completes it; the
    /// margin covers a request queued just before its node became ready.
    pub(crate) fn pair(
        opts: &RequestOpts,
        default_request_timeout_ms: i64,
        ready_timeout_ms: i64,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) -> (Done, Reply) {
        let (tx, rx) = channel();
        let wait = opts
            .request_timeout_ms
            .unwrap_or(default_request_timeout_ms)
            + ready_timeout_ms.max(0)
            + 1000;
        let done: Done = Box::new(move |r| {
            let _ = tx.send(r);
            if let Some(then) = then {
                then();
            }
        });
        (done, Reply::new(rx, wait))
    }

    /// Waits for the answer, asking `interrupted` at least every
    /// `wait::SLICE`. `Err(Error::Interrupted)` when it said yes: the
    /// request is still in flight and its answer can still be taken from
    /// this `Reply` (`try_take`); dropping the `Reply` discards it.
    pub fn wait(&self, interrupted: &dyn Fn() -> bool) -> Answer {
        match wait::recv_until(&self.rx, self.give_up, interrupted) {
            Waited::Ready(r) => r,
            Waited::Interrupted => Err(Error::Interrupted),
            Waited::Deadline => Err(Error::Timeout {
                what: "request".into(),
                timeout_ms: self.wait_ms.max(0) as u64,
            }),
            Waited::Gone => Err(Error::Closed {
                what: "network driver",
            }),
        }
    }

    /// Time since the request was handed over (commit-latency; an answer
    /// taken by `try_take` is counted when it is taken).
    pub fn age(&self) -> Duration {
        let created = self.give_up - Duration::from_millis(self.wait_ms.max(0) as u64);
        created.elapsed()
    }

    /// The answer if it has arrived, without waiting.
    pub fn try_take(&self) -> Option<Answer> {
        match self.rx.try_recv() {
            Ok(r) => Some(r),
            Err(TryRecvError::Empty) if Instant::now() < self.give_up => None,
            Err(TryRecvError::Empty) => Some(Err(Error::Timeout {
                what: "request".into(),
                timeout_ms: self.wait_ms.max(0) as u64,
            })),
            Err(TryRecvError::Disconnected) => Some(Err(Error::Closed {
                what: "network driver",
            })),
        }
    }
}

impl Drop for AsyncClient {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.client.wakeup();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Requester for AsyncClient {
    /// `submit` with the answer delivered to the returned [`Reply`].
    /// `then` runs on the polling thread (`Done`) right after the answer is
    /// queued (to wake a thread that waits on something else, e.g. a condvar); it
    /// must be short and must not own anything that owns this client, or
    /// the driver thread could end up joining itself.
    fn request(
        &self,
        node: Node,
        body: Body,
        opts: RequestOpts,
        ready_timeout_ms: i64,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) -> Reply {
        let (done, reply) = Reply::pair(
            &opts,
            self.client.core().config().request_timeout_ms,
            ready_timeout_ms,
            then,
        );
        self.submit(node, body, opts, ready_timeout_ms, done);
        reply
    }
}
