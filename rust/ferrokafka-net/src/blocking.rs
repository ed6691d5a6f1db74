//! [`BlockingClient`]: the [`NetworkClient`] state machine behind a mutex,
//! glued to the [`Selector`]'s connection tasks, with a blocking `poll`.
//!
//! Concurrency model
//! -----------------
//! * All protocol state lives in one `NetworkClient` behind one `Mutex`. It is
//!   only ever held for short, non-blocking work (never across an await, a
//!   socket call or a wait), so contention is brief and deadlock impossible:
//!   no code path takes a second lock while holding it, except the `apply`
//!   lock described below, which is always taken *before* it.
//! * Connection tasks never touch the core. They only push [`Event`]s into
//!   an [`EventQueue`] (a short lock, fine from async code). `poll` sleeps
//!   on that queue *without* any lock, so other threads (the Python
//!   caller's other threads, the async driver) can `send` meanwhile; their
//!   bytes go straight to the writer task, so I/O progresses even when
//!   nobody is polling, and the completions wait in the queue.
//! * Events are taken and handled under the `apply` lock, taken *before*
//!   the core's: one poller handles events at a time, in the order they
//!   were queued (docs/semantics.md §4.11's order per batch), whichever
//!   thread it is: the driver woken by the event, or a thread that found
//!   events waiting first (`poll_pending`, the application's own thread).
//! * Callbacks run after both locks are released, so a callback may call
//!   `send` / `ready` on the same client; the `callbacks` lock, taken
//!   before `apply` is let go, keeps one poller's callbacks before the next
//!   one's (so a callback must not poll this client: it would wait for
//!   itself; none does, they hand answers on). A poller holding the GIL
//!   must not wait for it: a callback may take the GIL (an asyncio future's
//!   wake-up), so Python-facing pollers release it first.
//! * Whichever thread holds the core, or polls, logs as this client: the
//!   client's log context is entered for as long (`log_context.rs`).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ferrokafka_protocol::kafka_protocol::messages::RequestKind;
use tokio::runtime::Runtime;

use crate::cluster::Node;
use crate::error::Error;
use crate::events::{EventQueue, EventSender};
use crate::log_context::{self, LogContext, Scope};
use crate::network_client::{
    Callback, ClientConfig, ClientRequest, ClientResponse, Event, NetworkClient,
};
use crate::selector::{runtime, Selector};
use crate::states::ConnectionState;
use crate::updater::MetadataUpdater;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

// ------------------------------------------------------------------ client

/// Longest an `AsyncClient` driver thread sleeps in one poll: what it was
/// not woken for (a request's timeout, a connection attempt's) it notices
/// within this.
pub const DRIVER_POLL: Duration = Duration::from_millis(20);

/// The blocking network client: the pure core plus the tokio transport.
/// Shared by reference (`Arc<BlockingClient>`) between the Python binding,
/// the async driver and any thread that wants to send.
pub struct BlockingClient {
    core: Mutex<NetworkClient>,
    events: Arc<EventQueue>,
    waker: EventSender,
    /// Held while a poller takes and handles events (module comment).
    apply: Mutex<()>,
    /// Held while a poller runs its responses' callbacks (module comment).
    callbacks: Mutex<()>,
    _runtime: Arc<Runtime>,
    /// For io-wait-ratio: when the client was made, and the µs its pollers
    /// spent blocked waiting for I/O events.
    created: Instant,
    waited_us: AtomicU64,
    /// The client's identity in log lines (`ClientConfig::log`).
    log: Option<Arc<LogContext>>,
    /// Called after a poll that handled a `SendDone` (`on_send_done`).
    send_done: OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// Whether the driver thread has requests waiting for a connection
    /// (`AsyncClient`'s queue): events an application thread handled may
    /// have made one ready, so that thread wakes the driver then.
    driver_waits: OnceLock<Box<dyn Fn() -> bool + Send + Sync>>,
}

/// The locked network client, with its log context entered while held.
pub struct LockedCore<'a> {
    // Declared first, dropped first: unlocked before the context goes.
    guard: MutexGuard<'a, NetworkClient>,
    _scope: Scope,
}

impl Deref for LockedCore<'_> {
    type Target = NetworkClient;
    fn deref(&self) -> &NetworkClient {
        &self.guard
    }
}

impl DerefMut for LockedCore<'_> {
    fn deref_mut(&mut self) -> &mut NetworkClient {
        &mut self.guard
    }
}

impl BlockingClient {
    pub fn new(cfg: ClientConfig, updater: Box<dyn MetadataUpdater>) -> Result<Self, Error> {
        let rt = runtime();
        let events = EventQueue::new();
        let tx = events.sender();
        let transport = Selector::new(rt.handle().clone(), tx.clone(), cfg.clone());
        let seed = rand::random::<u64>();
        let log = cfg.log.clone();
        let core = NetworkClient::new(cfg, updater, Box::new(transport), seed)?;
        Ok(BlockingClient {
            core: Mutex::new(core),
            events,
            waker: tx,
            apply: Mutex::new(()),
            callbacks: Mutex::new(()),
            _runtime: rt,
            created: Instant::now(),
            waited_us: AtomicU64::new(0),
            log,
            send_done: OnceLock::new(),
            driver_waits: OnceLock::new(),
        })
    }

    /// Short critical sections only (see the module comment).
    pub fn core(&self) -> LockedCore<'_> {
        let _scope = log_context::enter(self.log.as_ref());
        LockedCore {
            guard: self.core.lock().unwrap_or_else(|p| p.into_inner()),
            _scope,
        }
    }

    /// The client's log context, for the threads it starts
    /// (`log_context::set_thread`).
    pub fn log_context(&self) -> Option<Arc<LogContext>> {
        self.log.clone()
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

    /// `client.id` of this client (client telemetry names itself with it).
    pub fn client_id(&self) -> String {
        self.core().config().client_id.clone()
    }

    pub fn request_timeout_ms(&self) -> i64 {
        self.core().config().request_timeout_ms
    }

    /// Whether KIP-714 client metrics push is on (`enable_metrics_push`).
    pub fn metrics_push(&self) -> bool {
        self.core().config().enable_metrics_push
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
        // a socket event: nudge a poller sleeping on the event queue.
        let _ = self.waker.send(Event::Wakeup);
        r
    }

    /// `send` for a client polled by an `AsyncClient` driver thread, which
    /// comes back at least every `DRIVER_POLL` on its own: the poller is
    /// nudged only for a request completed locally (version mismatch, acks=0
    /// written), which no socket event will report. A request on the wire
    /// is answered through a socket event, which wakes the poller anyway,
    /// and its timeout is noticed within `DRIVER_POLL`; waking the poller
    /// for it cost a context switch per request (every Produce).
    pub fn send_polled(&self, req: ClientRequest, now: i64) -> Result<(), Error> {
        let (r, local) = {
            let mut core = self.core();
            let r = core.send(req, now);
            (r, core.has_local_completions())
        };
        if local {
            let _ = self.waker.send(Event::Wakeup);
        }
        r
    }

    /// Have `f` called (on the polling thread, no lock held) after each
    /// poll that handled a `SendDone`: a connection that had a frame queued
    /// behind a full send buffer can take requests again. Its sender is
    /// woken by this instead of finding out at its next recheck (a producer's
    /// held-back batch waited up to `HELD_BACK_RECHECK_MS` for it, so 1 MB
    /// batches, each bigger than the buffer, went out one at a time;
    /// docs/semantics.md §4.7). Set once; later calls are ignored.
    pub fn on_send_done(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.send_done.set(f);
    }

    /// Wait until every frame handed to the connections is written to its
    /// socket (the kernel has it), or `deadline`. A request that expects no
    /// answer (acks=0) completes once it counts as sent, which can be while
    /// it is still in the writer's queue; closing aborts the writers, so
    /// a close waits here first. True if all was written.
    pub fn wait_written(&self, deadline: Instant) -> bool {
        loop {
            if self.core().unwritten_bytes() == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Wake the client's pollers (the driver thread) to look again: a
    /// close, a metadata update asked for. Not the threads waiting for an
    /// answer, whom a queued event would wake in the driver's place.
    pub fn wakeup(&self) {
        self.events.wake_pollers();
    }

    /// One round of docs/semantics.md §4.11: wait up to `timeout` (less if a deadline
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
        // The callbacks below run outside the core's lock: they log as this
        // client too.
        let _scope = log_context::enter(self.log.as_ref());
        let wait_ms = self.core().maybe_update(now());
        let wait = timeout.min(Duration::from_millis(wait_ms.clamp(0, i64::MAX) as u64));
        if !wait.is_zero() {
            let blocked = Instant::now();
            self.events.wait(wait);
            self.waited_us
                .fetch_add(blocked.elapsed().as_micros() as u64, Ordering::Relaxed);
        }
        let apply = self.apply.lock().unwrap_or_else(|p| p.into_inner());
        self.handle_queued(apply, now)
    }

    /// Handle the events queued now, on this thread, unless none is queued
    /// or another thread is handling events (it takes these too); true if
    /// this thread did. For a thread that would otherwise wait for the
    /// driver to pass an answer on: the application's thread spinning in
    /// `Producer.poll(0)` applies an acknowledgement itself instead of
    /// waiting for the driver to be woken and scheduled (`events.rs`).
    /// Call without the GIL (module comment).
    pub fn poll_pending(&self, now: &dyn Fn() -> i64) -> bool {
        if !self.events.has_events() {
            return false;
        }
        let Ok(apply) = self.apply.try_lock() else {
            return false;
        };
        let _scope = log_context::enter(self.log.as_ref());
        self.handle_queued(apply, now);
        // The driver sleeps through events an application thread waits
        // for (`wait_for_answer`); what they made ready (a connection, for
        // a request it holds back) is its to send.
        if self.driver_waits.get().is_some_and(|f| f()) {
            self.events.wake_pollers();
        }
        true
    }

    /// Wait up to `timeout` for an answer this thread wants, applying it
    /// here: sleep until an event is queued (a send wakes this thread, not
    /// the driver) or `done()` holds, then handle what is queued unless
    /// another thread is at it. For a thread blocked on one record's
    /// delivery (`DeliveryFuture.result()`): its acknowledgement completes
    /// it without a hop through the driver thread (`events.rs`). Whatever
    /// makes `done()` true must then call `wake_answer_waiters`. Call
    /// without the GIL (module comment).
    pub fn wait_for_answer(&self, timeout: Duration, done: &dyn Fn() -> bool) {
        let blocked = Instant::now();
        self.events.wait_for(timeout, done);
        self.waited_us
            .fetch_add(blocked.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.poll_pending(&now_ms);
    }

    /// Wake the threads in `wait_for_answer`: what they wait for may be
    /// done (a record completed other than by an answer they applied).
    pub fn wake_answer_waiters(&self) {
        self.events.notify_apps();
    }

    /// Have `f` say whether the driver thread has requests waiting for a
    /// connection (`AsyncClient::start`). Set once.
    pub fn on_driver_waits(&self, f: Box<dyn Fn() -> bool + Send + Sync>) {
        let _ = self.driver_waits.set(f);
    }

    /// The client's event queue, for a caller that looks for waiting events
    /// on every call (`Producer.poll(0)`) without reaching the client
    /// through locks (`EventQueue::has_events`).
    pub fn event_queue(&self) -> Arc<EventQueue> {
        self.events.clone()
    }

    /// Take the queued events and handle them (`apply` held), then run the
    /// responses' callbacks in order with the poller before (`callbacks`).
    fn handle_queued(
        &self,
        apply: MutexGuard<'_, ()>,
        now: &dyn Fn() -> i64,
    ) -> (Vec<ClientResponse>, bool) {
        let mut events = Vec::new();
        self.events.drain(&mut events);
        let progressed = events.iter().any(|e| !matches!(e, Event::Wakeup));
        let send_done = events.iter().any(|e| matches!(e, Event::SendDone { .. }));
        let mut responses = {
            let mut core = self.core();
            let r = core.handle_events(events, now());
            // A response may have made the connection ready for the updater
            // (e.g. ApiVersions done): let it send its Metadata now, not one
            // poll later.
            core.maybe_update(now());
            r
        };
        let in_order = self.callbacks.lock().unwrap_or_else(|p| p.into_inner());
        drop(apply);
        for r in &mut responses {
            if let Some(cb) = r.callback.take() {
                // A panicking callback must not take the others (or the
                // client) down with it.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(r)));
            }
        }
        drop(in_order);
        if send_done {
            if let Some(f) = self.send_done.get() {
                f();
            }
        }
        let any = progressed || !responses.is_empty();
        (responses, any)
    }

    /// The network client's figures (docs/metrics.md) and io-wait-ratio:
    /// the share of the client's lifetime its pollers spent blocked waiting
    /// for I/O (Java's is per selector over a sample window; this is over
    /// the lifetime, and can pass 1 when two threads poll one client).
    pub fn node_metrics(&self) -> Vec<(String, f64)> {
        let mut out = self.core().metrics();
        let life = self.created.elapsed().as_micros().max(1) as f64;
        let waited = self.waited_us.load(Ordering::Relaxed) as f64;
        out.push(("io-wait-ratio".to_string(), waited / life));
        out.push(("io-wait-time-ns-total".to_string(), waited * 1000.0));
        out
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

impl Drop for BlockingClient {
    fn drop(&mut self) {
        let mut core = self.core.lock().unwrap_or_else(|p| p.into_inner());
        if !core.is_closed() {
            core.close(now_ms());
        }
        // The connection tasks' sends fail from now on: they stop.
        self.events.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simple_updater::SimpleUpdater;
    use std::sync::atomic::AtomicUsize;

    /// A poll that handles a `SendDone` calls the hook once, after the
    /// events; a poll without one does not.
    #[test]
    fn send_done_calls_the_hook() {
        let client = BlockingClient::new(
            ClientConfig::default(),
            Box::new(SimpleUpdater::new(vec![])),
        )
        .unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        client.on_send_done(Box::new(move || {
            c.fetch_add(1, Ordering::SeqCst);
        }));
        client.wakeup();
        client.poll(Duration::from_millis(50));
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        for _ in 0..2 {
            let _ = client.waker.send(Event::SendDone {
                node: 7,
                conn: 1,
                written: 1,
            });
        }
        client.poll(Duration::from_millis(50));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "once per poll");
    }

    /// A client whose send-done hook records the threads it runs on: the
    /// threads that handled a `SendDone`.
    fn recording_send_done() -> (Arc<BlockingClient>, Arc<Mutex<Vec<std::thread::ThreadId>>>) {
        let client = Arc::new(
            BlockingClient::new(
                ClientConfig::default(),
                Box::new(SimpleUpdater::new(vec![])),
            )
            .unwrap(),
        );
        let ran_on = Arc::new(Mutex::new(Vec::new()));
        let r = ran_on.clone();
        client.on_send_done(Box::new(move || {
            r.lock().unwrap().push(std::thread::current().id());
        }));
        (client, ran_on)
    }

    /// A poller asleep waiting for events holds no lock, so another thread
    /// handles queued events itself (`poll_pending`), on its own thread;
    /// none queued, or another thread handling them, and it does nothing.
    #[test]
    fn poll_pending_handles_events_while_a_poller_sleeps() {
        let (client, ran_on) = recording_send_done();
        assert!(!client.poll_pending(&now_ms), "nothing queued");
        let sleeper = {
            let c = client.clone();
            std::thread::spawn(move || c.poll(Duration::from_secs(30)))
        };
        while client.events.sleepers() == 0 {
            std::thread::yield_now();
        }
        // With a std channel the sleeper held the receiver: nobody else
        // could take an event until it woke.
        assert!(client.apply.try_lock().is_ok(), "the sleeper holds nothing");
        let busy = client.apply.lock().unwrap();
        let done = Event::SendDone {
            node: 7,
            conn: 1,
            written: 1,
        };
        // Queued straight into the queue's state, not through `send`: the
        // sleeper is not woken, so which thread handles it is not a race.
        client.events.push_quietly(done);
        assert!(client.events.has_events());
        assert!(!client.poll_pending(&now_ms), "another thread is handling");
        assert!(client.events.has_events(), "left queued");
        drop(busy);
        assert!(client.poll_pending(&now_ms));
        assert!(!client.events.has_events());
        assert_eq!(*ran_on.lock().unwrap(), [std::thread::current().id()]);
        client.wakeup();
        sleeper.join().unwrap();
    }

    /// A thread waiting for an answer handles the event that wakes it on
    /// its own thread, and the driver asleep in `poll` is not woken for it;
    /// the driver is woken when it holds requests back for a connection.
    #[test]
    fn an_answer_waiter_handles_its_event_itself() {
        let (client, ran_on) = recording_send_done();
        let driver_waits = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let w = driver_waits.clone();
        client.on_driver_waits(Box::new(move || w.load(Ordering::SeqCst)));
        // The driver's sleep in `poll` (whose wait the updater may shorten).
        let driver = {
            let c = client.clone();
            std::thread::spawn(move || {
                let t = Instant::now();
                c.events.wait(Duration::from_secs(30));
                t.elapsed()
            })
        };
        while client.events.sleepers() == 0 {
            std::thread::yield_now();
        }
        let waiter = {
            let c = client.clone();
            std::thread::spawn(move || {
                c.wait_for_answer(Duration::from_secs(30), &|| false);
                std::thread::current().id()
            })
        };
        while client.events.waiting_apps() == 0 {
            std::thread::yield_now();
        }
        let done = Event::SendDone {
            node: 7,
            conn: 1,
            written: 1,
        };
        client.waker.send(done).unwrap();
        let app_thread = waiter.join().unwrap();
        assert_eq!(
            *ran_on.lock().unwrap(),
            [app_thread],
            "handled by the waiter"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(client.events.sleepers(), 1, "the driver sleeps on");
        // With requests held back, the waiter wakes the driver after.
        driver_waits.store(true, Ordering::SeqCst);
        let waiter = {
            let c = client.clone();
            std::thread::spawn(move || c.wait_for_answer(Duration::from_secs(30), &|| false))
        };
        while client.events.waiting_apps() == 0 {
            std::thread::yield_now();
        }
        client.waker.send(Event::Wakeup).unwrap();
        waiter.join().unwrap();
        assert!(
            driver.join().unwrap() < Duration::from_secs(10),
            "woken to send"
        );
    }
}
