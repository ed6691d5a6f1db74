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
//!
//! A finished batch's bytes come back when the last holder lets go
//! (`returning`), whichever that is: the batch when it completes, or a
//! request the io thread still holds (on loopback the answer is often
//! handled before the writing thread dropped the frame). Given back only
//! by the batch, a third of a ceiling run's buffers were still held then
//! and were freed, their successors faulted in anew (session 32).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

#[derive(Debug)]
pub struct BufferPool {
    /// The capacity a buffer needs to be kept: `batch_size`. A larger one
    /// (a record bigger than the batch size got a batch of its own) is
    /// freed, as is one smaller (a batch that grew from a first chunk).
    size: usize,
    /// As many as `buffer_memory` holds, as Java's pool keeps every
    /// buffer of the pooled size given back: kept buffers count against
    /// `buffer_memory`, so keeping more never lets the producer hold more;
    /// it only keeps what a burst faulted in for the next one. (An eighth
    /// and a quarter of `buffer_memory` were tried: a run that filled the
    /// buffer then freed a tenth of its batches for want of room here and
    /// faulted their successors in; session 32.)
    max_kept: usize,
    kept: Mutex<Vec<Vec<u8>>>,
    /// Capacity of `kept`, read without the lock by the accumulator's
    /// memory checks. Only grows concurrently with them (a `give` on the
    /// thread that lets go of a batch's bytes), which makes those checks
    /// stricter, never looser.
    kept_bytes: AtomicUsize,
}

/// A finished batch's buffer inside `Bytes`: given back to its pool when
/// the last `Bytes` pointing into it is dropped.
struct Returning {
    buf: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl AsRef<[u8]> for Returning {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Returning {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buf));
    }
}

impl BufferPool {
    pub fn new(batch_size: usize, buffer_memory: usize) -> Self {
        // batch_size 0 (a batch per record) keeps nothing.
        let max_kept = buffer_memory
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
    pub fn take(&self) -> Option<Vec<u8>> {
        let b = self.lock().pop()?;
        self.kept_bytes.fetch_sub(b.capacity(), Ordering::Relaxed);
        Some(b)
    }

    /// `buf` (a finished batch) as `Bytes` that give it back to the pool
    /// when the last of them is dropped.
    pub fn returning(self: &Arc<Self>, buf: Vec<u8>) -> Bytes {
        Bytes::from_owner(Returning {
            buf,
            pool: self.clone(),
        })
    }

    /// A buffer no one holds any more, kept if its capacity is the batch
    /// size's (up to twice it: what the builder reserved beyond) and there
    /// is room, else freed.
    pub fn give(&self, mut b: Vec<u8>) {
        let cap = b.capacity();
        if cap < self.size || cap >= self.size.saturating_mul(2) {
            return;
        }
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

    /// Free kept buffers until at least `at_least` bytes are (or none is
    /// left): memory is short. The oldest go first, being the least likely
    /// to be still cached. Returns the bytes freed.
    ///
    /// Why not all of them: a producer held at `buffer_memory` (the ceiling
    /// run) let its whole pool go each time one batch needed room, and the
    /// next batches were then allocated and faulted in anew: 24-62 of ~300
    /// buffers a run (session 32).
    pub fn release(&self, at_least: usize) -> usize {
        let (freed, bytes) = {
            let mut kept = self.lock();
            let (mut n, mut bytes) = (0, 0);
            while bytes < at_least && n < kept.len() {
                bytes += kept[n].capacity();
                n += 1;
            }
            self.kept_bytes.fetch_sub(bytes, Ordering::Relaxed);
            (kept.drain(..n).collect::<Vec<_>>(), bytes)
        };
        // Freed after the lock is let go: a `give` on another thread need
        // not wait for the allocator.
        drop(freed);
        bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // A panic while holding it left a valid list.
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(cap: usize) -> Vec<u8> {
        let mut b = Vec::with_capacity(cap);
        b.resize(cap / 2, 7);
        b
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
        let t = pool.take().unwrap();
        assert_eq!(t.as_ptr(), pa);
        assert!(pool.take().is_none());
        assert_eq!(pool.kept_bytes(), 0);
    }

    #[test]
    fn a_buffer_comes_back_when_its_last_holder_lets_go() {
        let pool = Arc::new(BufferPool::new(1000, 1_000_000));
        let batch = pool.returning(full(1032));
        let at = batch.as_ptr();
        let request = batch.slice(10..20);
        drop(batch);
        assert_eq!(pool.kept_bytes(), 0, "a request still holds the bytes");
        drop(request);
        assert_eq!(pool.kept_bytes(), 1032);
        let t = pool.take().unwrap();
        assert_eq!(t.as_ptr(), at);
    }

    #[test]
    fn a_buffer_of_another_size_is_not_kept() {
        let pool = Arc::new(BufferPool::new(1000, 1_000_000));
        pool.give(full(500));
        drop(pool.returning(full(2000)));
        assert_eq!(pool.kept_bytes(), 0);
        assert!(pool.take().is_none());
    }

    #[test]
    fn kept_buffers_are_bounded_by_the_buffer_memory() {
        // 2000 / 1000: two buffers.
        let pool = BufferPool::new(1000, 2000);
        pool.give(full(1032));
        pool.give(full(1032));
        pool.give(full(1032));
        assert_eq!(pool.kept_bytes(), 2 * 1032);
    }

    #[test]
    fn a_release_frees_the_oldest_buffers_until_it_has_enough() {
        let pool = BufferPool::new(1000, 10_000);
        for b in [full(1010), full(1020), full(1030)] {
            pool.give(b);
        }
        assert_eq!(pool.release(0), 0);
        assert_eq!(pool.release(1500), 1010 + 1020, "the two oldest");
        assert_eq!(pool.kept_bytes(), 1030);
        assert_eq!(pool.release(usize::MAX), 1030);
        assert_eq!(pool.release(1), 0, "nothing left");
        assert_eq!(pool.kept_bytes(), 0);
    }
}
