//! The one way a binding blocks: `wait_detached`.
//!
//! Every call that may wait (poll, await_update, flush, result) goes through
//! here so that (a) the GIL is released for the whole wait, letting other
//! Python threads run, and (b) Ctrl-C still works: we wake at least every
//! `SIGNAL_CHECK` to re-take the GIL briefly and run `check_signals`, which
//! raises KeyboardInterrupt if the user pressed it.

use pyo3::prelude::*;
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

/// Run a multi-step blocking operation (commit with retries, offset
/// lookups) on a helper thread and wait for it through `wait_detached`, so
/// Ctrl-C interrupts the wait at once even though the operation itself
/// cannot be interrupted mid-request. An abandoned operation finishes (or
/// times out) on its own thread; its result is dropped.
pub fn blocking_call<T: Send + 'static, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("ferrokafka-call".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| {
            pyo3::exceptions::PyRuntimeError::new_err(format!("cannot start a thread: {e}"))
        })?;
    let out = wait_detached(py, None, move |slice| match rx.recv_timeout(slice) {
        Ok(v) => Some(Some(v)),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Some(None),
    })?;
    out.flatten().ok_or_else(|| {
        pyo3::exceptions::PyRuntimeError::new_err("the operation's thread ended without a result")
    })
}
