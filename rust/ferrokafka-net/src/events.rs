//! The queue of socket events from the connection tasks to a client's
//! pollers (`BlockingClient::poll_with`, `poll_pending`, `wait_for_answer`).
//!
//! Why not a std channel: its receiver is taken by one thread at a time, and
//! the driver thread took it (under a mutex) for the whole of its sleep, so
//! an answer could only be applied by the thread sleeping on it. Waking that
//! thread (a futex wake, then waiting for a CPU on a busy 2-core machine) was
//! a hop of its own in every acknowledgement's round trip, while the
//! application's thread, spinning in `Producer.poll(0)`, could have applied
//! the answer itself (issue 17's latency goal). Here waiting for an event
//! (`wait`) and taking events (`drain`) are separate: a poller sleeps
//! without holding anything, and whichever thread gets to the events first
//! takes them, in the order they were queued. The pollers order their
//! handling among themselves (`BlockingClient`'s `apply` lock).
//!
//! Two kinds of sleeper: pollers (`wait`: the driver thread, a consumer's
//! thread) and application threads blocked until an answer of theirs is
//! in (`wait_for`: `DeliveryFuture.result()`, `flush`). A send wakes the
//! latter when there are any, the pollers otherwise: the thread that wants
//! the answer applies it, and the driver is not woken to do it first.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::network_client::Event;

#[derive(Default)]
struct State {
    events: VecDeque<Event>,
    /// Pollers in `wait`: a send notifies only when one is there, so a
    /// queue nobody sleeps on costs no futex call per event.
    sleepers: usize,
    /// Application threads in `wait_for`, each waiting for one answer of
    /// its own (`DeliveryFuture.result()`). A send wakes them instead of
    /// the `wait` sleepers (the driver): the thread that wants the answer
    /// applies it (`BlockingClient::wait_for_answer`), with no hop through
    /// the driver, which sleeps on unless told (`wake_pollers`).
    waiting_apps: usize,
    /// The client is gone: sends fail, so the connection tasks stop.
    closed: bool,
}

impl State {
    /// The sleepers of `wait` (`app` false) or of `wait_for`.
    fn count(&mut self, app: bool) -> &mut usize {
        if app {
            &mut self.waiting_apps
        } else {
            &mut self.sleepers
        }
    }
}

#[derive(Default)]
pub struct EventQueue {
    state: Mutex<State>,
    ready: Condvar,
    /// For `wait_for`'s sleepers (`State::waiting_apps`).
    app_ready: Condvar,
    /// Whether `events` holds anything, read without the lock by a thread
    /// that checks for answers in a busy loop (`Producer.poll(0)`). Written
    /// under the lock; a stale `false` only delays that thread to its next
    /// look, or to the sleeping poller, which the send woke.
    queued: AtomicBool,
}

/// The connection tasks' end: cheap to clone, `send` never blocks for long
/// (a short lock).
#[derive(Clone)]
pub struct EventSender(Arc<EventQueue>);

impl EventSender {
    /// Queue `ev`; gives it back if the queue is closed (the client is
    /// gone), as a std channel's send does once its receiver is dropped.
    pub fn send(&self, ev: Event) -> Result<(), Event> {
        let sleepers = self.0.push(ev)?;
        // After the lock is let go: notified under it, the woken poller
        // and a thread draining the queue meanwhile (the application's,
        // seeing `queued`) both blocked on the lock until this thread's
        // futex call returned (perf trace: ~15 µs of an acknowledgement's
        // round trip). A sleeper counted under the lock is inside its
        // condvar wait by then, so it cannot miss this notify.
        match sleepers {
            (0, 0) => {}
            // Every sleeper: one woken finds the events taken by another
            // and sleeps again, but none must sleep through an event.
            (0, _) => self.0.ready.notify_all(),
            _ => self.0.app_ready.notify_all(),
        }
        Ok(())
    }
}

impl EventQueue {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    pub fn sender(self: &Arc<Self>) -> EventSender {
        EventSender(self.clone())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding it; a poisoned queue is still whole.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether an event is queued (without the lock: see `queued`).
    pub fn has_events(&self) -> bool {
        self.queued.load(Ordering::Acquire)
    }

    /// Wait up to `timeout` for an event to be queued, taking none; true if
    /// one is queued when it returns. Returns at once when one already is,
    /// or when the queue is closed.
    pub fn wait(&self, timeout: Duration) -> bool {
        self.sleep(timeout, false, &|| false)
    }

    /// Wait up to `timeout` for an event to be queued or `done()` to hold,
    /// taking none; an application thread waiting for an answer of its own,
    /// woken by a send in place of the `wait` sleepers. `done` is checked
    /// under this queue's lock, and whatever makes it true must call
    /// `notify_apps` after: then the wake-up cannot fall between the check
    /// and the sleep.
    pub fn wait_for(&self, timeout: Duration, done: &dyn Fn() -> bool) {
        self.sleep(timeout, true, done);
    }

    /// `wait` (`app` false: counted in `sleepers`, woken by `ready`) or
    /// `wait_for` (`app`: `waiting_apps`, `app_ready`).
    fn sleep(&self, timeout: Duration, app: bool, done: &dyn Fn() -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let cv = if app { &self.app_ready } else { &self.ready };
        let mut st = self.lock();
        while st.events.is_empty() && !st.closed && !done() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            *st.count(app) += 1;
            st = cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            *st.count(app) -= 1;
        }
        !st.events.is_empty()
    }

    /// Wake the `wait_for` sleepers (what they wait for may be done).
    pub fn notify_apps(&self) {
        let st = self.lock();
        if st.waiting_apps > 0 {
            drop(st);
            self.app_ready.notify_all();
        }
    }

    /// Queue a `Wakeup` for the `wait` sleepers (the driver) and wake them,
    /// not the `wait_for` ones: a close, a metadata update asked for, or
    /// events an application thread handled that unblocked the driver's
    /// work. The event, not only the notify: `wait` sleeps on while the
    /// queue is empty.
    pub fn wake_pollers(&self) {
        if let Ok((_, sleepers)) = self.push(Event::Wakeup) {
            if sleepers > 0 {
                self.ready.notify_all();
            }
        }
    }

    /// Queue `ev` unless the queue is closed (then it is given back);
    /// returns the sleepers of `wait_for` and of `wait` counted as it was
    /// queued, for the caller to wake after letting go of the lock.
    fn push(&self, ev: Event) -> Result<(usize, usize), Event> {
        let mut st = self.lock();
        if st.closed {
            return Err(ev);
        }
        st.events.push_back(ev);
        self.queued.store(true, Ordering::Release);
        Ok((st.waiting_apps, st.sleepers))
    }

    /// Move every queued event to `out`, in the order they were sent.
    pub fn drain(&self, out: &mut Vec<Event>) {
        let mut st = self.lock();
        out.extend(st.events.drain(..));
        self.queued.store(false, Ordering::Release);
    }

    /// The first queued event, waiting up to `timeout` for one (tests).
    #[cfg(test)]
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Option<Event> {
        self.wait(timeout);
        let mut st = self.lock();
        let ev = st.events.pop_front();
        self.queued.store(!st.events.is_empty(), Ordering::Release);
        ev
    }

    /// Queue `ev` without waking a sleeper (tests: a thread other than
    /// the sleeper's is to take it).
    #[cfg(test)]
    pub(crate) fn push_quietly(&self, ev: Event) {
        self.lock().events.push_back(ev);
        self.queued.store(true, Ordering::Release);
    }

    /// Threads asleep in `wait_for` now (tests).
    #[cfg(test)]
    pub(crate) fn waiting_apps(&self) -> usize {
        self.lock().waiting_apps
    }

    /// Pollers asleep in `wait` now (tests).
    #[cfg(test)]
    pub(crate) fn sleepers(&self) -> usize {
        self.lock().sleepers
    }

    /// Refuse further events and wake every sleeper; what is queued is
    /// dropped with the queue.
    pub fn close(&self) {
        let mut st = self.lock();
        st.closed = true;
        self.ready.notify_all();
        self.app_ready.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_in_the_order_sent() {
        let q = EventQueue::new();
        let tx = q.sender();
        assert!(!q.has_events());
        for n in 0..3 {
            tx.send(Event::Connected { node: n, conn: 1 }).unwrap();
        }
        assert!(q.has_events());
        let mut out = Vec::new();
        q.drain(&mut out);
        let nodes: Vec<i32> = out
            .iter()
            .map(|e| match e {
                Event::Connected { node, .. } => *node,
                _ => -1,
            })
            .collect();
        assert_eq!(nodes, [0, 1, 2]);
        assert!(!q.has_events());
    }

    #[test]
    fn a_sleeping_poller_is_woken_by_a_send_and_takes_nothing() {
        let q = EventQueue::new();
        let tx = q.sender();
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || q.wait(Duration::from_secs(30)))
        };
        // The waiter is asleep once it counts as a sleeper.
        while q.sleepers() == 0 {
            std::thread::yield_now();
        }
        tx.send(Event::Wakeup).unwrap();
        assert!(waiter.join().unwrap(), "woken by the event");
        assert!(q.has_events(), "waiting took nothing");
        assert!(matches!(
            q.recv_timeout(Duration::ZERO),
            Some(Event::Wakeup)
        ));
    }

    #[test]
    fn wait_times_out_and_close_fails_senders_and_wakes_sleepers() {
        let q = EventQueue::new();
        let t = Instant::now();
        assert!(!q.wait(Duration::from_millis(20)));
        assert!(t.elapsed() >= Duration::from_millis(20));
        let waiter = {
            let q = q.clone();
            std::thread::spawn(move || q.wait(Duration::from_secs(30)))
        };
        while q.sleepers() == 0 {
            std::thread::yield_now();
        }
        q.close();
        assert!(
            !waiter.join().unwrap(),
            "woken by the close, nothing queued"
        );
        assert!(q.sender().send(Event::Wakeup).is_err());
    }

    /// A thread in `wait_for` until `done`; joined, how long it waited.
    fn waiting_for(
        q: &Arc<EventQueue>,
        done: &Arc<AtomicBool>,
    ) -> std::thread::JoinHandle<Duration> {
        let (q, done) = (q.clone(), done.clone());
        std::thread::spawn(move || {
            let t = Instant::now();
            q.wait_for(Duration::from_secs(30), &|| done.load(Ordering::SeqCst));
            t.elapsed()
        })
    }

    /// A send wakes a thread waiting for an answer, not the pollers asleep
    /// beside it; `done` becoming true wakes it too, through `notify_apps`.
    #[test]
    fn an_answer_waiter_is_woken_in_the_pollers_place() {
        let q = EventQueue::new();
        let poller = {
            let q = q.clone();
            std::thread::spawn(move || q.wait(Duration::from_secs(30)))
        };
        let done = Arc::new(AtomicBool::new(false));
        let app = waiting_for(&q, &done);
        while q.sleepers() == 0 || q.waiting_apps() == 0 {
            std::thread::yield_now();
        }
        q.sender().send(Event::Wakeup).unwrap();
        assert!(
            app.join().unwrap() < Duration::from_secs(10),
            "woken by the send"
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(q.sleepers(), 1, "the poller sleeps on");
        // Nothing queued that it waits for: woken by what completes it.
        let mut out = Vec::new();
        q.drain(&mut out);
        let app = waiting_for(&q, &done);
        while q.waiting_apps() == 0 {
            std::thread::yield_now();
        }
        done.store(true, Ordering::SeqCst);
        q.notify_apps();
        assert!(
            app.join().unwrap() < Duration::from_secs(10),
            "woken by notify_apps"
        );
        q.close();
        assert!(!poller.join().unwrap());
    }
}
