//! The async face for the Rust layers above (producer, consumer,
//! coordinator): `send_request(node, body).await` without going through
//! Python.
//!
//! A background thread (the *driver*) owns the polling: it loops over
//! `NetworkClient::poll`, and before each poll it tries to send the requests
//! queued by `send_request` whose node has become ready (calling `ready`,
//! which starts the connection). Each request's callback completes a oneshot
//! channel, which is the future the caller awaits. The driver uses the same
//! `NetworkClient` as everyone else, so Python callers and Rust callers share
//! connections, correlation ids and in-flight limits.
//!
//! Why a thread and not a tokio task: `poll` blocks on a std channel, and
//! blocking inside the runtime would steal one of its two worker threads.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use ferrokafka_protocol::kafka_protocol::messages::ResponseKind;
use ferrokafka_protocol::kafka_protocol::messages::RequestKind;
use tokio::sync::oneshot;

use crate::cluster::Node;
use crate::error::Error;
use crate::io::{now_ms, NetworkClient};

type Reply = oneshot::Sender<Result<(ResponseKind, i16), Error>>;

struct Pending {
    node: Node,
    body: RequestKind,
    deadline_ms: i64,
    reply: Reply,
}

pub struct AsyncClient {
    client: Arc<NetworkClient>,
    queue: Arc<Mutex<Vec<Pending>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl AsyncClient {
    pub fn start(client: Arc<NetworkClient>) -> Self {
        let queue: Arc<Mutex<Vec<Pending>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (c, q, s) = (client.clone(), queue.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("ferrokafka-driver".into())
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    let now = now_ms();
                    // Take the queue out so the lock is not held while we
                    // lock the core (lock order: queue, then core, never
                    // both for long).
                    let pending = std::mem::take(&mut *q.lock().unwrap_or_else(|p| p.into_inner()));
                    let mut keep = Vec::new();
                    for p in pending {
                        if p.reply.is_closed() {
                            continue; // caller dropped the future
                        }
                        if now >= p.deadline_ms {
                            let _ = p.reply.send(Err(Error::Timeout { what: format!("waiting for node {} to be ready", p.node.id), timeout_ms: 0 }));
                            continue;
                        }
                        // ready + new request + send under one core lock:
                        // no other thread can fill the deque in between, so
                        // `send` cannot fail for "not ready".
                        let mut core = c.core();
                        if !core.ready(&p.node, now) {
                            drop(core);
                            keep.push(p);
                            continue;
                        }
                        let reply = Mutex::new(Some(p.reply));
                        let cb = Box::new(move |r: &crate::client::ClientResponse| {
                            let out = if let Some(e) = &r.version_mismatch {
                                Err(e.clone())
                            } else if r.disconnected {
                                Err(r.error.clone().unwrap_or(Error::Disconnected { node_id: r.destination }))
                            } else {
                                match &r.body {
                                    Some(b) => Ok((b.clone(), r.request_header.api_version)),
                                    None => Err(Error::State { detail: "request expected no response".into() }),
                                }
                            };
                            if let Some(tx) = reply.lock().unwrap_or_else(|p| p.into_inner()).take() {
                                let _ = tx.send(out);
                            }
                        });
                        let req = core.new_client_request(p.node.id, p.body, true, Some(cb), now);
                        // On error (closed client, unknown API) the request
                        // and its callback are dropped, which resolves the
                        // future with `Closed`.
                        let _ = core.send(req, now);
                    }
                    q.lock().unwrap_or_else(|p| p.into_inner()).extend(keep);
                    c.poll(Duration::from_millis(20));
                }
            })
            .expect("cannot start the network driver thread");
        AsyncClient { client, queue, stop, thread: Some(thread) }
    }

    pub fn client(&self) -> &Arc<NetworkClient> {
        &self.client
    }

    /// Sends `body` to `node` once its connection is ready (waiting at most
    /// `timeout_ms` for that) and resolves with the decoded answer and the
    /// version it was sent at.
    pub async fn send_request(&self, node: Node, body: RequestKind, timeout_ms: i64) -> Result<(ResponseKind, i16), Error> {
        let (tx, rx) = oneshot::channel();
        self.queue
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Pending { node, body, deadline_ms: now_ms() + timeout_ms, reply: tx });
        self.client.wakeup();
        rx.await.map_err(|_| Error::Closed { what: "network driver" })?
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
