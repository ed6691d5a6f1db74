//! Buffers of sent full-size batches, kept for the next ones (Java's
//! `BufferPool`, docs/semantics.md §5.10).
//!
//! A partition that fills its batches opens each new one at `batch_size`
//! (1 MB by default). Left to malloc, each such buffer is freed on the
//! thread that completes the batch and the heap is trimmed as it sits at
//! the top, so the next batch's pages are faulted in and zeroed again by the
//! kernel while the calling thread copies records into them: ~4 page faults
//! per 1,000 records of 100 B in the ceiling run, ~1-2 with this pool, and
//! `send_batch(list)` took 13% less CPU a record (median of 8 alternating
//! rounds, twice; `send_batch(pyarrow)` no change through the noise) on the
//! machine of session 26 (docs/benchmarks-components.md). An earlier attempt
//! on another machine, which handed out the oldest buffer, lost: that one had
//! left the caches.
//!
//! So the most recently returned buffer goes out first (a stack): it is the
//! one most likely to be still cached. Its bytes count against
//! `buffer_memory` while kept (`kept_bytes`), and the accumulator lets the
//! pool go before it makes a caller wait for memory, so what the producer
//! holds stays within `buffer_memory` as before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};

/// Kept buffers are at most this fraction of `buffer_memory` (and at least
/// one): eight 1 MB batches by default, enough for a partition's five
/// requests in flight and their answers coming back in bursts (an eighth
/// of the buffer still missed: 1.3-3.6 faults per 1,000 records against
/// 0.9-1.8 with a quarter, `thread_cpu.py`),
/// without holding much of the budget idle after a burst.
const KEPT_SHARE: usize = 4;

#[derive(Debug)]
pub struct BufferPool {
    /// The capacity a buffer needs to be kept: `batch_size`. A larger one
    /// (a record bigger than the batch size got a batch of its own) is
    /// freed, as is one smaller (a batch that grew from a first chunk).
    size: usize,
    max_kept: usize,
    kept: Mutex<Vec<BytesMut>>,
    /// Capacity of `kept`, read without the lock by the accumulator's
    /// memory checks. Only grows concurrently with them (a `give` on the
    /// completing thread), which makes those checks stricter, never looser.
    kept_bytes: AtomicUsize,
}

impl BufferPool {
    pub fn new(batch_size: usize, buffer_memory: usize) -> Self {
        // batch_size 0 (a batch per record) keeps nothing.
        let max_kept = (buffer_memory / KEPT_SHARE)
            .checked_div(batch_size)
            .map_or(0, |n| n.max(1));
        BufferPool {
            size: batch_size,
            max_kept,
            kept: Mutex::new(Vec::new()),
            kept_bytes: AtomicUsize::new(0),
        }
    }

    /// A kept buffer, empty, if there is one.
    pub fn take(&self) -> Option<BytesMut> {
        let b = self.lock().pop()?;
        self.kept_bytes.fetch_sub(b.capacity(), Ordering::Relaxed);
        Some(b)
    }

    /// A finished batch's bytes, kept if no request holds them any more and
    /// their capacity is the batch size's (up to twice it: what the builder
    /// reserved beyond), else dropped.
    pub fn give(&self, bytes: Bytes) {
        let Ok(mut b) = bytes.try_into_mut() else {
            return;
        };
        let cap = b.capacity();
        if cap < self.size || cap >= self.size.saturating_mul(2) {
            return;
        }
        // Empty before it is kept: the builder converts it to a `Vec`, which
        // moves the content to the allocation's start (a 1 MB memmove for a
        // full buffer).
        b.clear();
        let mut kept = self.lock();
        if kept.len() < self.max_kept {
            self.kept_bytes.fetch_add(cap, Ordering::Relaxed);
            kept.push(b);
        }
    }

    /// Capacity of the buffers kept now.
    pub fn kept_bytes(&self) -> usize {
        self.kept_bytes.load(Ordering::Relaxed)
    }

    /// Free every kept buffer (memory is short); returns the bytes freed.
    pub fn release(&self) -> usize {
        let freed: Vec<BytesMut> = std::mem::take(&mut *self.lock());
        let bytes = freed.iter().map(BytesMut::capacity).sum();
        self.kept_bytes.fetch_sub(bytes, Ordering::Relaxed);
        bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<BytesMut>> {
        // A panic while holding it left a valid list.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(cap: usize) -> Bytes {
        let mut b = BytesMut::with_capacity(cap);
        b.resize(cap / 2, 7);
        b.freeze()
    }

    #[test]
    fn the_last_buffer_given_is_the_first_taken() {
        let pool = BufferPool::new(1000, 1_000_000);
        let a = full(1032);
        let b = full(1040);
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        pool.give(a);
        pool.give(b);
        assert_eq!(pool.kept_bytes(), 1032 + 1040);
        let t = pool.take().unwrap();
        assert_eq!(
            (t.as_ptr(), t.len()),
            (pb, 0),
            "the same allocation, emptied"
        );
        assert_eq!(pool.take().unwrap().as_ptr(), pa);
        assert!(pool.take().is_none());
        assert_eq!(pool.kept_bytes(), 0);
    }

    #[test]
    fn a_buffer_still_held_elsewhere_or_of_another_size_is_not_kept() {
        let pool = BufferPool::new(1000, 1_000_000);
        let shared = full(1032);
        let _request = shared.clone();
        pool.give(shared);
        pool.give(full(500));
        pool.give(full(2000));
        assert_eq!(pool.kept_bytes(), 0);
        assert!(pool.take().is_none());
    }

    #[test]
    fn kept_buffers_are_bounded_and_released_on_demand() {
        // 4000 / 4 / 1000: one buffer.
        let pool = BufferPool::new(1000, 4000);
        pool.give(full(1032));
        pool.give(full(1032));
        assert_eq!(pool.kept_bytes(), 1032);
        assert_eq!(pool.release(), 1032);
        assert_eq!(pool.kept_bytes(), 0);
        assert!(pool.take().is_none());
    }
}
