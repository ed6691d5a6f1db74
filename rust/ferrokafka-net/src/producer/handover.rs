//! Work handed to the thread appending a `send_batch` call while it holds
//! the producer's lock: the answers that arrive meanwhile, and the steps the
//! runner (or a send-done) wants (docs/semantics.md §5.11).
//!
//! Why: a `send_batch` call appends thousands of records per hold of the
//! lock, and takes it back the moment it lets go. The driver (applying an
//! answer) and the runner (draining a sealed batch) then slept on the lock
//! until a release they mostly lost again: at a fast producer's start the
//! io thread idled 40% of the time while sealed batches waited to be drained
//! and answered ones to be applied (perf of the ceiling run's first 25 ms,
//! session 34). Handing the lock over (a fair unlock) cost more than it
//! saved. Here nobody waits: the waiting threads leave their work with the
//! appender, which does it between two slices of its appends, where it holds
//! the lock anyway. The driver's and the runner's CPU on the ceiling run went
//! from 3.9 to 1.7 ns a record (docs/benchmarks-components.md, Session 34).
//!
//! The protocol (all flags `SeqCst`):
//! * `appending` is true only while an appender holds the lock: set after it
//!   takes it, cleared before it lets go (`end`). Whoever clears it then
//!   takes the queued answers, under the lock, and applies them.
//! * An answer that finds the lock taken while `appending` is queued, then
//!   `appending` is read again: still true, the appender will take it (its
//!   clearing comes after this read, so after the push); false, the thread
//!   applies the queue itself. Answers are taken from the queue only under
//!   the lock, older first, so they are applied in the order they arrived
//!   (§4.11), whichever thread applies them.
//! * A step wanted while `appending` sets `step_wanted` and reads
//!   `appending` again in the same way; the appender steps after it lets go.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Mutex;

use crate::error::Error;
use crate::producer::core::Answer;

/// An answer to a request of the producer: its tag and outcome.
pub(crate) type QueuedAnswer = (u64, Result<Answer, Error>);

#[derive(Default)]
pub(crate) struct Handover {
    appending: AtomicBool,
    /// `answers` is not empty (read without its lock at every slice).
    queued: AtomicBool,
    answers: Mutex<VecDeque<QueuedAnswer>>,
    step_wanted: AtomicBool,
}

impl Handover {
    /// An appender took the lock (call with it held).
    pub(crate) fn begin(&self) {
        self.appending.store(true, SeqCst);
    }

    /// The appender is about to let go of the lock (call with it held):
    /// the queued answers, oldest first, for it to apply now, and whether a
    /// step was wanted.
    pub(crate) fn end(&self) -> (Vec<QueuedAnswer>, bool) {
        self.appending.store(false, SeqCst);
        (self.take(), self.step_wanted.swap(false, SeqCst))
    }

    pub(crate) fn is_appending(&self) -> bool {
        self.appending.load(SeqCst)
    }

    /// Work waits for the appender: it should let go at its next slice.
    pub(crate) fn wanted(&self) -> bool {
        self.queued.load(SeqCst) || self.step_wanted.load(SeqCst)
    }

    /// Queue `a` for the appender; false if the appender let go meanwhile
    /// (the caller then applies the queue itself).
    pub(crate) fn queue(&self, a: QueuedAnswer) -> bool {
        {
            let mut q = self.lock();
            q.push_back(a);
            self.queued.store(true, SeqCst);
        }
        self.is_appending()
    }

    /// Leave a step to the appender, if one holds the lock: true if it will
    /// take it.
    pub(crate) fn defer_step(&self) -> bool {
        if !self.is_appending() {
            return false;
        }
        self.step_wanted.store(true, SeqCst);
        self.is_appending()
    }

    /// The queued answers, oldest first (call with the producer's lock).
    pub(crate) fn take(&self) -> Vec<QueuedAnswer> {
        if !self.queued.load(SeqCst) {
            return Vec::new();
        }
        let mut q = self.lock();
        self.queued.store(false, SeqCst);
        q.drain(..).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<QueuedAnswer>> {
        // Nothing panics while holding it; a poisoned queue is still whole.
        self.answers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(tag: u64) -> QueuedAnswer {
        (tag, Err(Error::Closed { what: "test" }))
    }

    #[test]
    fn answers_wait_for_the_appender_only_while_it_holds_the_lock() {
        let h = Handover::default();
        assert!(!h.defer_step(), "no appender: step here");
        assert!(!h.queue(answer(1)), "no appender: apply here");
        assert_eq!(h.take().len(), 1);
        h.begin();
        assert!(h.queue(answer(2)) && h.queue(answer(3)));
        assert!(h.defer_step());
        assert!(h.wanted());
        let (answers, step) = h.end();
        let tags: Vec<u64> = answers.iter().map(|a| a.0).collect();
        assert_eq!(tags, [2, 3], "oldest first");
        assert!(step);
        assert!(!h.wanted() && !h.is_appending());
        assert!(h.take().is_empty());
    }
}
