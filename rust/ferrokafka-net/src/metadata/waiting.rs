//! Waiting for metadata answers (docs/semantics.md §3.12, §3.13): the
//! blocking wait and the bounded slices the Python binding loops over,
//! between which it looks at signals.

use std::time::{Duration, Instant};

use super::{timeout_error, Metadata, State};
use crate::error::Result;

impl Metadata {
    /// docs/semantics.md §3.12: block until `update_version > last_version` or close.
    /// Errors: the stored fatal error (at once, then cleared); `Closed`;
    /// `Timeout` at the deadline (`None` = no deadline); and, once the
    /// version has advanced, the topic error of the new answer: for `topic`
    /// only when given, else for any topic we use (invalid, then
    /// unauthorized).
    pub fn await_update(
        &self,
        last_version: i32,
        topic: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.lock();
        loop {
            if let Some(r) = st.check_wait(last_version, topic) {
                return r;
            }
            st = match deadline {
                None => self.changed.wait(st).unwrap_or_else(|p| p.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(timeout_error(timeout.unwrap_or_default()));
                    }
                    self.changed
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
    }

    /// One bounded slice of `await_update` for callers that run their own
    /// deadline loop (the Python binding, which must look at signals between
    /// slices): Some(result) when the wait is over, None when the slice ran
    /// out (spurious wakeups also return None; the caller loops).
    pub fn await_update_step(
        &self,
        last_version: i32,
        topic: Option<&str>,
        slice: Duration,
    ) -> Option<Result<()>> {
        self.wait_step(slice, |st| st.check_wait(last_version, topic))
    }

    /// `await_update_step` for an answer that also covers the topic set as
    /// it is now (docs/semantics.md §3.13): an answer to an older request
    /// (built before a `set_subscription`) moves `last_version` on and the
    /// wait goes on for the next one, which that change already asked for.
    pub fn await_covering_update_step(
        &self,
        last_version: &mut i32,
        want_request_version: i32,
        slice: Duration,
    ) -> Option<Result<()>> {
        self.wait_step(slice, |st| {
            st.check_wait_covering(last_version, want_request_version)
        })
    }

    /// `check` now and, if it is not over, once more after a wake-up or
    /// `slice`, whichever comes first.
    fn wait_step(
        &self,
        slice: Duration,
        mut check: impl FnMut(&mut State) -> Option<Result<()>>,
    ) -> Option<Result<()>> {
        let mut st = self.lock();
        if let Some(r) = check(&mut st) {
            return Some(r);
        }
        if slice.is_zero() {
            return None;
        }
        // wait_timeout releases the mutex while parked and re-takes it before
        // returning, so the check below sees a consistent state.
        st = self
            .changed
            .wait_timeout(st, slice)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        check(&mut st)
    }
}
