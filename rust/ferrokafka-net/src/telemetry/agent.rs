//! Runs a client's [`Telemetry`] on its own thread, sending through the
//! client's network client.
//!
//! Why a thread of its own: pushes are minutes apart and must not wait
//! behind (or delay) the producer's sender or the consumer's fetch loop,
//! and the same code then serves every client type. The thread sleeps on a
//! condition variable between steps, so it costs nothing while idle; the
//! requests go out through `driver::try_send` on the shared
//! `BlockingClient`, and whichever thread polls that client (the producer's
//! and admin's driver, the consumer's own thread) completes them.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokafka_protocol::kafka_protocol::messages::{RequestKind, ResponseKind};
use rand::Rng;

use super::{Action, Kind, Telemetry};
use crate::blocking::{now_ms, BlockingClient};
use crate::driver::{try_send, Body, Pending, Reply, RequestOpts};
use crate::error::Error;

/// How long `close` waits for the terminating push.
pub const CLOSE_WAIT: Duration = Duration::from_millis(2_000);

/// Reads the client's metrics (Java names) when a push is due.
pub type MetricsFn = Box<dyn Fn() -> Vec<(String, f64)> + Send>;

#[derive(Default)]
struct Ctl {
    closing: bool,
    done: bool,
    pushes: u64,
}

pub struct Agent {
    ctl: Arc<(Mutex<Ctl>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Agent {
    /// Starts pushing for a client whose `enable_metrics_push` is on.
    pub fn start(kind: Kind, net: Arc<BlockingClient>, metrics: MetricsFn) -> Option<Agent> {
        let ctl: Arc<(Mutex<Ctl>, Condvar)> = Arc::default();
        let c = ctl.clone();
        let client_id = net.client_id();
        let thread = std::thread::Builder::new()
            .name("ferrokafka-telemetry".into())
            .spawn(move || {
                crate::log_context::set_thread(net.log_context());
                let jitter = rand::thread_rng().gen::<f64>();
                let mut t = Telemetry::new(kind, &client_id, now_ms(), jitter);
                run(&mut t, &net, &c, &*metrics);
                let (lock, cv) = &*c;
                let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
                g.done = true;
                g.pushes = t.pushes();
                cv.notify_all();
            })
            .ok()?;
        Some(Agent {
            ctl,
            thread: Some(thread),
        })
    }

    /// Sends the terminating push (waiting at most [`CLOSE_WAIT`]) and stops.
    /// Call before the network client closes.
    pub fn close(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        let (lock, cv) = &*self.ctl;
        let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
        g.closing = true;
        cv.notify_all();
        let deadline = Instant::now() + CLOSE_WAIT;
        while !g.done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                // The push is stuck on a dead broker: leave the thread to its
                // request timeout rather than hold up the close.
                return;
            }
            g = cv
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(g);
        let _ = thread.join();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.close();
    }
}

fn run(
    t: &mut Telemetry,
    net: &BlockingClient,
    ctl: &(Mutex<Ctl>, Condvar),
    metrics: &dyn Fn() -> Vec<(String, f64)>,
) {
    let mut closed = false;
    loop {
        let closing = ctl.0.lock().unwrap_or_else(|p| p.into_inner()).closing;
        if closing && !closed {
            t.close(now_ms());
            closed = true;
        }
        match t.next(now_ms(), metrics) {
            Action::Stop => return,
            Action::Idle { at } => {
                let (lock, cv) = ctl;
                let g = lock.lock().unwrap_or_else(|p| p.into_inner());
                if g.closing == closed {
                    let wait = (at - now_ms()).max(1) as u64;
                    let _ = cv.wait_timeout(g, Duration::from_millis(wait));
                }
            }
            Action::Subscribe(r) => {
                let answer = exchange(net, RequestKind::GetTelemetrySubscriptions(r), ctl);
                log::debug!("client telemetry: subscription answer {answer:?}");
                t.on_subscription(
                    now_ms(),
                    answer.and_then(|a| match a {
                        ResponseKind::GetTelemetrySubscriptions(r) => Ok(r),
                        other => Err(unexpected(&other)),
                    }),
                );
            }
            Action::Push(r) => {
                let answer = exchange(net, RequestKind::PushTelemetry(r), ctl);
                log::debug!("client telemetry: push answer {answer:?}");
                t.on_push(
                    now_ms(),
                    answer.and_then(|a| match a {
                        ResponseKind::PushTelemetry(r) => Ok(r),
                        other => Err(unexpected(&other)),
                    }),
                );
            }
        }
    }
}

fn unexpected(r: &ResponseKind) -> Error {
    Error::State {
        detail: format!("unexpected answer to a telemetry request: {r:?}"),
    }
}

/// One request to the least loaded broker, answered (or failed) within the
/// request timeout plus the connection wait.
fn exchange(
    net: &BlockingClient,
    body: RequestKind,
    ctl: &(Mutex<Ctl>, Condvar),
) -> Result<ResponseKind, Error> {
    let timeout = net.request_timeout_ms();
    let ready_ms = timeout;
    // Right after the client starts no broker may be known yet (the first
    // metadata is on its way): wait for one, as any request would.
    let start = now_ms();
    let node = loop {
        if let Some(n) = net.least_loaded_node(now_ms()) {
            break n;
        }
        let (lock, cv) = ctl;
        let g = lock.lock().unwrap_or_else(|p| p.into_inner());
        if g.closing || now_ms() - start > ready_ms {
            return Err(Error::Timeout {
                what: "a broker for client telemetry".into(),
                timeout_ms: ready_ms.max(0) as u64,
            });
        }
        net.wakeup();
        let _ = cv.wait_timeout(g, Duration::from_millis(50));
    };
    let now = now_ms();
    let sent_kind = match &body {
        RequestKind::PushTelemetry(p) => Some(p.terminating),
        _ => None,
    };
    let opts = RequestOpts::default();
    let (done, reply) = Reply::pair(&opts, timeout, ready_ms, None);
    let mut p = Pending::new(node, Body::Ready(body), opts, now + ready_ms, done);
    loop {
        match try_send(net, p, now_ms()) {
            None => break,
            Some(back) => {
                p = back;
                net.wakeup();
                // Waiting for the connection; a close in the meantime gives up.
                let (lock, cv) = ctl;
                let g = lock.lock().unwrap_or_else(|p| p.into_inner());
                let closing = g.closing;
                let _ = cv.wait_timeout(g, Duration::from_millis(20));
                if closing {
                    p.fail(Error::Closed { what: "client" });
                    break;
                }
            }
        }
    }
    net.wakeup();
    // A close gives up waiting for any answer but the terminating push's
    // (which `close` itself bounds by CLOSE_WAIT): a subscription request
    // to a broker that never answers must not hold up the client's close.
    let terminating = matches!(&sent_kind, Some(true));
    let interrupted = || !terminating && ctl.0.lock().unwrap_or_else(|p| p.into_inner()).closing;
    reply.wait(&interrupted).map(|(r, _)| r)
}
