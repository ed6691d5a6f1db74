//! How a binding blocks: `wait_detached` for waits the binding drives
//! (await_update, flush, result), `interruptible` for net-crate methods
//! that run their own deadline loop (consumer and admin calls, send).
//!
//! Either way (a) the GIL is released for the whole wait, letting other
//! Python threads run, and (b) Ctrl-C still works: the waiting thread comes
//! back at least every `SIGNAL_CHECK` to re-take the GIL briefly and run
//! `check_signals`, which raises KeyboardInterrupt if the user pressed it.
//! No helper thread is started for either.

use pyo3::prelude::*;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a detached wait comes back to look for signals. Short enough for
/// Ctrl-C to feel instant, long enough to cost nothing measurable.
pub const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Run `step(slice)` repeatedly without the GIL until it returns `Some`, or the
/// deadline passes (`Ok(None)`), or a signal handler raises.
///
/// `step` must block for at most the slice it is given (e.g. a condvar
/// wait_timeout or a channel recv_timeout) and must not touch Python objects.
pub fn wait_detached<T: Send, F>(
    py: Python<'_>,
    timeout: Option<Duration>,
    mut step: F,
) -> PyResult<Option<T>>
where
    F: FnMut(Duration) -> Option<T> + Send,
{
    let deadline = timeout.map(|t| Instant::now() + t);
    // Log records queued by Rust threads reach Python logging from here:
    // at the start and at every signal check of every blocking call.
    crate::logbridge::drain(py);
    loop {
        let slice = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    // One last non-blocking look so a zero timeout still polls.
                    return Ok(py.detach(|| step(Duration::ZERO)));
                }
                (d - now).min(SIGNAL_CHECK)
            }
            None => SIGNAL_CHECK,
        };
        if let Some(v) = py.detach(|| step(slice)) {
            return Ok(Some(v));
        }
        py.check_signals()?;
        crate::logbridge::drain(py);
    }
}

/// Run a closure that does not block for long (encode, decode, copy) without
/// the GIL.
pub fn detached<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, f: F) -> T {
    py.detach(f)
}

/// The interrupt check handed to the net crate's blocking methods (their
/// `interrupted: &dyn Fn() -> bool`): they wait in slices, in the calling
/// thread, and ask it between slices. It re-takes the GIL for a moment, runs
/// the signal handlers (only the main thread ever sees one) and forwards
/// queued log records to Python logging, as `wait_detached` does; a
/// KeyboardInterrupt (or whatever a handler raised) is kept for the binding
/// to raise once the method has returned.
///
/// Callers must not hold a lock a GIL-holding thread may want while they
/// ask: the check takes the GIL.
pub struct SignalCheck {
    raised: Mutex<Option<PyErr>>,
    /// When the handlers last ran. The net crate's loops may ask more often
    /// than `SIGNAL_CHECK` (a 10 ms coordinator poll): taking the GIL that
    /// often would slow every other Python thread for nothing.
    last: Mutex<Instant>,
}

impl SignalCheck {
    pub fn new() -> Self {
        SignalCheck {
            raised: Mutex::new(None),
            last: Mutex::new(Instant::now()),
        }
    }

    pub fn interrupted(&self) -> bool {
        if self
            .raised
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
        {
            // Sticky: a method asks again on its way out.
            return true;
        }
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.elapsed() < SIGNAL_CHECK {
                return false;
            }
            *last = Instant::now();
        }
        Python::attach(|py| match py.check_signals() {
            Ok(()) => {
                // After the signal check, not before: the logging calls run
                // Python code, whose eval loop would take a pending
                // KeyboardInterrupt and lose it inside a log handler.
                crate::logbridge::drain(py);
                false
            }
            Err(e) => {
                *self.raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                true
            }
        })
    }

    /// What a signal handler raised, if one did.
    pub fn take(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Default for SignalCheck {
    fn default() -> Self {
        Self::new()
    }
}

/// Run a blocking net-crate method without the GIL, giving it an interrupt
/// check (`SignalCheck`). This is how every blocking consumer and admin
/// call waits: in the calling thread, no helper thread.
///
/// If a signal handler raised while the method waited, that exception is
/// raised whatever the method returned (usually `Error::Interrupted`): the
/// user's Ctrl-C is never swallowed, even by a call that finished anyway.
pub fn interruptible<T: Send, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce(&dyn Fn() -> bool) -> T + Send,
{
    crate::logbridge::drain(py);
    let signals = SignalCheck::new();
    let out = py.detach(|| f(&|| signals.interrupted()));
    match signals.take() {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
