//! The waits of the blocking facade methods (consumer commit/committed/
//! offset lookups, admin calls): every one goes to a deadline in slices and
//! asks the caller's `interrupted` between them.
//!
//! Why slices and a callback instead of a helper thread per call: the Python
//! bindings must notice Ctrl-C while a call waits, and they can only do so
//! from the waiting thread (signal handlers run in the main thread, under the
//! GIL). So the one loop that waits also asks: the bindings' `interrupted`
//! re-takes the GIL for a moment, runs the signal handlers and remembers the
//! KeyboardInterrupt; Rust callers with nobody to interrupt them pass
//! [`never`]. A call that was told "interrupted" returns
//! `Error::Interrupted` at once and leaves whatever it had in flight to
//! finish in the background (each method says what that means for it).

use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::metadata::Metadata;

/// The longest a facade wait goes without asking `interrupted`: short
/// enough for Ctrl-C to feel immediate, long enough to cost nothing.
pub const SLICE: Duration = Duration::from_millis(100);

/// The interrupt check of a caller that cannot be interrupted (Drop, Rust
/// tests).
pub fn never() -> bool {
    false
}

/// How a wait for a channel ended.
#[derive(Debug)]
pub enum Waited<T> {
    Ready(T),
    /// The deadline passed first.
    Deadline,
    /// `interrupted` said yes; the sender may still deliver later.
    Interrupted,
    /// The sender went away without a value.
    Gone,
}

/// Receive from `rx` by `deadline`, asking `interrupted` between slices.
/// A value already there is taken even past the deadline or after an
/// interrupt: the work it reports is done and must not be lost.
pub fn recv_until<T>(
    rx: &Receiver<T>,
    deadline: Instant,
    interrupted: &dyn Fn() -> bool,
) -> Waited<T> {
    loop {
        let now = Instant::now();
        let slice = deadline.saturating_duration_since(now).min(SLICE);
        match rx.recv_timeout(slice) {
            Ok(v) => return Waited::Ready(v),
            Err(RecvTimeoutError::Disconnected) => return Waited::Gone,
            Err(RecvTimeoutError::Timeout) => {}
        }
        if Instant::now() >= deadline {
            return Waited::Deadline;
        }
        if interrupted() {
            return Waited::Interrupted;
        }
    }
}

/// Sleep until `until` (a retry backoff), asking `interrupted` between
/// slices. False when interrupted.
pub fn sleep_until(until: Instant, interrupted: &dyn Fn() -> bool) -> bool {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        if interrupted() {
            return false;
        }
        std::thread::sleep(left.min(SLICE));
    }
}

/// `sleep_until(now + d)`.
pub fn sleep(d: Duration, interrupted: &dyn Fn() -> bool) -> bool {
    sleep_until(Instant::now() + d, interrupted)
}

/// `Metadata::await_update` to `deadline` in slices, asking `interrupted`
/// between them: `Error::Timeout` at the deadline (the caller names what
/// it waited for), `Error::Interrupted` when told.
pub fn metadata_update(
    md: &Metadata,
    version: i32,
    topic: Option<&str>,
    deadline: Instant,
    interrupted: &dyn Fn() -> bool,
) -> Result<(), Error> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if let Some(r) = md.await_update_step(version, topic, left.min(SLICE)) {
            return r;
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: "waiting for a metadata update".into(),
                timeout_ms: 0,
            });
        }
        if interrupted() {
            return Err(Error::Interrupted);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::mpsc::channel;

    #[test]
    fn recv_takes_a_value_sent_later() {
        let (tx, rx) = channel();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            tx.send(7).unwrap();
        });
        let r = recv_until(&rx, Instant::now() + Duration::from_secs(5), &never);
        assert!(matches!(r, Waited::Ready(7)), "{r:?}");
        t.join().unwrap();
    }

    #[test]
    fn recv_asks_between_slices_and_stops_when_told() {
        let (_tx, rx) = channel::<()>();
        let asked = Cell::new(0);
        let t0 = Instant::now();
        let r = recv_until(&rx, t0 + Duration::from_secs(10), &|| {
            asked.set(asked.get() + 1);
            asked.get() == 3
        });
        assert!(matches!(r, Waited::Interrupted), "{r:?}");
        assert_eq!(asked.get(), 3);
        // Three slices, not the ten-second deadline.
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    #[test]
    fn recv_ends_at_the_deadline_and_when_the_sender_goes() {
        let (tx, rx) = channel::<()>();
        let t0 = Instant::now();
        let r = recv_until(&rx, t0 + Duration::from_millis(150), &never);
        assert!(matches!(r, Waited::Deadline), "{r:?}");
        assert!(t0.elapsed() >= Duration::from_millis(150));
        drop(tx);
        let r = recv_until(&rx, Instant::now() + Duration::from_secs(5), &never);
        assert!(matches!(r, Waited::Gone), "{r:?}");
    }

    #[test]
    fn a_value_already_there_wins_over_an_interrupt() {
        let (tx, rx) = channel();
        tx.send(1).unwrap();
        let r = recv_until(&rx, Instant::now(), &|| true);
        assert!(matches!(r, Waited::Ready(1)), "{r:?}");
    }

    #[test]
    fn sleep_is_cut_short_by_an_interrupt() {
        let t0 = Instant::now();
        let asked = Cell::new(0);
        let slept = sleep(Duration::from_secs(10), &|| {
            asked.set(asked.get() + 1);
            asked.get() == 2
        });
        assert!(!slept);
        assert!(t0.elapsed() < Duration::from_secs(2));
        assert!(sleep(Duration::from_millis(20), &never));
    }
}
