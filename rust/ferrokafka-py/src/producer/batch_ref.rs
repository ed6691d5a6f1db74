//! A `send_batch` record's share of its call's `BatchState`, without a
//! reference count per record.
//!
//! Why: with an `Arc<BatchState>` per record, every record paid an atomic
//! increment on the calling thread and an atomic decrement on the network
//! thread that completes it, on the same cache line (perf of the ceiling
//! run, issue 17). The call's records instead share one strong reference,
//! and the state's own countdown of records without an outcome says when
//! that reference goes.
//!
//! The protocol, which the `unsafe` blocks below rely on:
//! 1. `RecordRefs::new` turns one strong reference into a raw pointer: the
//!    records' reference. `BatchState::remaining` starts at `len`.
//! 2. `RecordRefs::make` hands out at most `len` `BatchRef`s (checked, a
//!    panic otherwise), each for one record of the call.
//! 3. A `BatchRef` stands for `count` consecutive records of the call (1
//!    as made; more once it absorbed the next records' `BatchRef`s, which
//!    are then consumed; a split divides its records between two). It is
//!    consumed exactly once (Rust's moves): completed, absorbed into a run
//!    another `BatchRef` of the call stores or stands for, or dropped
//!    (which fails its records, so the countdown still moves). Each stored
//!    run counts down by the records in it, so `remaining` reaches zero
//!    only once every record of every `BatchRef` ever made is consumed,
//!    and then the records' reference is released.
//! 4. Hence while any `BatchRef` exists, `remaining > 0` and the pointer
//!    is live. References never made (a call that stopped early, which
//!    only a panic does) are counted down when `RecordRefs` goes.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::completion::{BatchState, Indices, Run};
use ferrokafka_net::producer::client::DeliveredRecord;
use ferrokafka_net::Error;

/// Makes the `BatchRef`s of one call (step 2 above).
pub(crate) struct RecordRefs {
    state: NonNull<BatchState>,
    len: usize,
    /// How many were made. Only the calling thread makes them; an atomic
    /// for `Sync` (the maker is shared into the GIL-free section), read
    /// and written with plain loads and stores, no read-modify-write.
    made: AtomicUsize,
}

// SAFETY: `BatchState` is `Sync` (it lives in an `Arc` shared with Python);
// the pointer is live while this exists (it holds or has handed out the
// records' reference, step 4).
unsafe impl Send for RecordRefs {}
unsafe impl Sync for RecordRefs {}

impl RecordRefs {
    pub(crate) fn new(state: &Arc<BatchState>) -> Self {
        let len = state.len;
        let raw = Arc::into_raw(state.clone()) as *mut BatchState;
        RecordRefs {
            state: NonNull::new(raw).expect("Arc::into_raw is never null"),
            len,
            made: AtomicUsize::new(0),
        }
    }

    /// Record `index`'s share.
    #[inline]
    pub(crate) fn make(&self, index: usize) -> BatchRef {
        self.make_run(index, 1)
    }

    /// The shares of records `index..index + count` (`count` > 0), as one
    /// ref: what `make` for each and `absorb_next` would give.
    #[inline]
    pub(crate) fn make_run(&self, index: usize, count: usize) -> BatchRef {
        let made = self.made.load(Ordering::Relaxed);
        // More than `len` would let the countdown reach zero with a
        // `BatchRef` still out: a use after free. Never reached by the
        // callers (one completion per record), so a panic is fine.
        assert!(
            count > 0 && count <= self.len - made && index < self.len && count <= self.len - index,
            "send_batch made more record completions than records"
        );
        self.made.store(made + count, Ordering::Relaxed);
        BatchRef {
            state: self.state,
            index: index as u32,
            count: count as u32,
        }
    }
}

impl Drop for RecordRefs {
    fn drop(&mut self) {
        let unmade = self.len - self.made.load(Ordering::Relaxed);
        if self.len == 0 {
            // No record to release it: release it here.
            // SAFETY: the reference from `new`, released once.
            unsafe { Arc::decrement_strong_count(self.state.as_ptr()) };
        } else if unmade > 0 {
            // SAFETY: `remaining` >= `unmade` > 0 until this count-down, so
            // the pointer is live.
            release(
                self.state,
                unsafe { self.state.as_ref() }.count_down(unmade),
            );
        }
    }
}

/// Records `index..index + count` of a `send_batch` call, and the call's
/// state. Their key and value sizes are in the state (`BatchState::sizes`).
pub(crate) struct BatchRef {
    state: NonNull<BatchState>,
    index: u32,
    count: u32,
}

// SAFETY: as `RecordRefs`: a shared reference to a `Sync` state kept alive
// by the protocol above.
unsafe impl Send for BatchRef {}

impl BatchRef {
    pub(crate) fn index(&self) -> usize {
        self.index as usize
    }

    /// Records it stands for.
    #[inline(always)]
    pub(crate) fn count(&self) -> usize {
        self.count as usize
    }

    /// Take `next` in if its records follow this one's in the same call
    /// (step 3): its records are then this one's.
    #[inline(always)]
    pub(crate) fn absorb_next(&mut self, next: BatchRef) -> Result<(), BatchRef> {
        if next.state == self.state
            && next.index == self.index.wrapping_add(self.count)
            && self.count.checked_add(next.count).is_some()
        {
            self.count += next.count;
            std::mem::forget(next);
            Ok(())
        } else {
            Err(next)
        }
    }

    /// Keep the first `k` records (`0 < k < count`), return the rest.
    pub(crate) fn split_off(&mut self, k: usize) -> BatchRef {
        let k = k as u32;
        assert!(k > 0 && k < self.count, "split of a BatchRef out of range");
        let rest = BatchRef {
            state: self.state,
            index: self.index + k,
            count: self.count - k,
        };
        self.count = k;
        rest
    }

    /// Both records belong to the same call.
    #[inline]
    pub(crate) fn same_call(&self, other: &BatchRef) -> bool {
        self.state == other.state
    }

    /// Give up this record's share into a run that a `BatchRef` of the
    /// same call stores (its count includes this record): no count-down of
    /// its own.
    #[inline]
    pub(crate) fn absorb(self) {
        std::mem::forget(self);
    }

    /// Keep what this ref's records report, in the call's state: their
    /// timestamp (`BatchState::stamp`). Its sizes the state
    /// took from the call's input (`call_sizes`).
    #[inline(always)]
    pub(crate) fn stamped(self, timestamp_ms: i64) -> Self {
        // Not dropped if the stamp unwinds (it does not: its lock is
        // poison-tolerant; were it to, the record's share would leak and
        // its call never resolve, never be freed twice): with no drop to
        // run on that path the new `BatchRef` is built in registers and
        // stored once; with one it was spilled to the stack in 4-byte
        // pieces and reloaded in wider loads, which stall (perf annotate of
        // the run path).
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: an unconsumed `BatchRef`: the state is live (step 4).
        unsafe { this.state.as_ref() }.stamp(this.index, this.count, timestamp_ms);
        BatchRef {
            state: this.state,
            index: this.index,
            count: this.count,
        }
    }

    /// What `stamped` kept, of its first record.
    pub(crate) fn meta(&self) -> (i64, i32, i32) {
        // SAFETY: as `stamped`.
        let state = unsafe { self.state.as_ref() };
        let i = self.index as usize;
        let (k, v) = state.sizes_of(i);
        (state.timestamp(i), k, v)
    }

    /// Store `run`, which holds this record and the records absorbed into
    /// it, and count them down.
    pub(crate) fn store(self, run: Run) {
        let state = self.state;
        std::mem::forget(self);
        // SAFETY: this unconsumed `BatchRef` keeps `remaining` above zero,
        // so the state is live (step 4).
        let last = unsafe { state.as_ref() }.store(run);
        release(state, last);
    }

    /// Its records, all with `result` (the first's; the k-th's offset is
    /// the first's plus k): a record that failed before it was appended,
    /// or the one-by-one completion path.
    pub(crate) fn complete(self, result: Result<DeliveredRecord, Error>) {
        let indices = Indices::range(self.index, self.count);
        self.store(Run::single(indices, result));
    }
}

impl Drop for BatchRef {
    /// A record dropped without an outcome (its producer torn down around
    /// it) fails, so the call's future still resolves.
    fn drop(&mut self) {
        let run = Run::single(
            Indices::range(self.index, self.count),
            Err(Error::Closed { what: "producer" }),
        );
        // SAFETY: as `store`.
        let last = unsafe { self.state.as_ref() }.store(run);
        release(self.state, last);
    }
}

/// Release the records' reference once the last record is counted down.
fn release(state: NonNull<BatchState>, last: bool) {
    if last {
        // SAFETY: the countdown reached zero once, now: no `BatchRef` is
        // left (step 3), and this is the reference `RecordRefs::new` took.
        unsafe { Arc::decrement_strong_count(state.as_ptr()) };
    }
}
