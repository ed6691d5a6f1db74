//! Column buffers kept for reuse (docs/semantics.md §8.7).
//!
//! Every fetched run is decoded into fresh columns (`records.rs`), about a
//! megabyte of them at the default `max_partition_fetch_bytes`, and freed
//! when the application lets go of what `poll`/`poll_arrow` returned. Left
//! to malloc, that churn gives the pages back to the kernel (the heap is
//! trimmed as the freed run sits at its top, on the thread that frees it)
//! and takes them again on the next run: the ceiling run's consumer thread
//! took ~4 page faults per 1,000 records, ~0.3 with this pool, and
//! `poll_arrow` took 5-20% less CPU per record in three A/B runs (issue 17,
//! docs/benchmarks-components.md).
//!
//! So the columns of a run come from here and go back here when their last
//! holder drops them: `RecordColumns`' `Drop`, or an exported Arrow buffer's
//! release, on whatever thread that happens. In the steady state the same
//! few megabytes go round.
//!
//! Bounded: the pool keeps at most `max_bytes` of idle capacity (the rest is
//! freed as before), and a kept buffer is handed out only for a request it
//! does not exceed fourfold, so a small run never pins a large buffer that
//! a large run then has to allocate again.

use std::sync::{Arc, Mutex, MutexGuard};

/// How many times the asked-for capacity a kept buffer may have and still
/// be handed out (see the module comment).
const MAX_OVERSIZE: usize = 4;

/// Kept buffers per element type: what one run uses of each, many times
/// over, while capping the linear best-fit search of `take`.
const MAX_KEPT_PER_TYPE: usize = 64;

/// The element types of the columns.
pub trait Column: Copy + Send + 'static {
    #[doc(hidden)]
    fn kept(s: &mut Kept) -> &mut Vec<Vec<Self>>;
}

/// Idle buffers, by element type.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct Kept {
    u8s: Vec<Vec<u8>>,
    bools: Vec<Vec<bool>>,
    i32s: Vec<Vec<i32>>,
    i64s: Vec<Vec<i64>>,
    /// Capacity in bytes of everything above.
    bytes: usize,
}

macro_rules! column {
    ($t:ty, $field:ident) => {
        impl Column for $t {
            fn kept(s: &mut Kept) -> &mut Vec<Vec<Self>> {
                &mut s.$field
            }
        }
    };
}
column!(u8, u8s);
column!(bool, bools);
column!(i32, i32s);
column!(i64, i64s);

/// One consumer's idle column buffers; shared by the consumer thread (which
/// takes) and every holder of its records (which give back).
#[derive(Debug)]
pub struct ColumnPool {
    kept: Mutex<Kept>,
    max_bytes: usize,
}

impl ColumnPool {
    pub fn new(max_bytes: usize) -> Arc<Self> {
        Arc::new(ColumnPool {
            kept: Mutex::new(Kept::default()),
            max_bytes,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An empty vector with room for `n` elements: the smallest kept one
    /// that has the room (and not over `MAX_OVERSIZE` times more), else a
    /// new one.
    pub fn take<T: Column>(&self, n: usize) -> Vec<T> {
        let limit = n.saturating_mul(MAX_OVERSIZE).max(64);
        {
            let mut kept = self.lock();
            let list = T::kept(&mut kept);
            let best = list
                .iter()
                .enumerate()
                .filter(|(_, v)| v.capacity() >= n && v.capacity() <= limit)
                .min_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i);
            if let Some(i) = best {
                let v = list.swap_remove(i);
                kept.bytes -= v.capacity() * std::mem::size_of::<T>();
                return v;
            }
        }
        Vec::with_capacity(n)
    }

    /// Keep `v`'s memory for a later `take`, if the pool has room for it;
    /// else it is freed (after the lock is released).
    pub fn give<T: Column>(&self, mut v: Vec<T>) {
        let size = v.capacity() * std::mem::size_of::<T>();
        if size == 0 {
            return;
        }
        v.clear();
        let mut kept = self.lock();
        if kept.bytes + size > self.max_bytes || T::kept(&mut kept).len() >= MAX_KEPT_PER_TYPE {
            drop(kept);
            drop(v);
            return;
        }
        T::kept(&mut kept).push(v);
        kept.bytes += size;
    }

    /// The pool of a consumer fetching with these sizes: it keeps four runs
    /// of `max_partition_fetch_bytes`, no more than one `fetch_max_bytes`.
    /// A run's columns take about 1.4 times its records' bytes at 100 B
    /// values, and a steady poll loop has one or two runs between release
    /// and reuse.
    pub fn for_fetch_sizes(max_partition_fetch_bytes: i32, fetch_max_bytes: i32) -> Arc<Self> {
        let run = max_partition_fetch_bytes.max(0) as usize;
        Self::new(run.saturating_mul(4).min(fetch_max_bytes.max(0) as usize))
    }

    /// Capacity in bytes of the idle buffers.
    pub fn kept_bytes(&self) -> usize {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_comes_back_for_a_request_it_fits() {
        let pool = ColumnPool::new(1 << 20);
        let mut v: Vec<i64> = pool.take(1000);
        v.extend(0..1000);
        let at = v.as_ptr();
        pool.give(v);
        assert_eq!(pool.kept_bytes(), 8000);
        let again: Vec<i64> = pool.take(900);
        assert_eq!(again.as_ptr(), at, "the same memory");
        assert!(again.is_empty());
        assert_eq!(pool.kept_bytes(), 0);
    }

    #[test]
    fn the_smallest_fitting_buffer_is_taken_and_never_a_far_larger_one() {
        let pool = ColumnPool::new(1 << 20);
        pool.give(Vec::<u8>::with_capacity(10_000));
        pool.give(Vec::<u8>::with_capacity(2_000));
        pool.give(Vec::<u8>::with_capacity(5_000));
        assert_eq!(pool.take::<u8>(1_500).capacity(), 2_000);
        // 10_000 is over four times 100: a small request gets a new buffer.
        let small = pool.take::<u8>(100);
        assert!(small.capacity() < 10_000);
        assert_eq!(pool.take::<u8>(4_000).capacity(), 5_000);
        assert_eq!(pool.kept_bytes(), 10_000);
        // Element types are kept apart.
        assert!(pool.take::<i32>(10).capacity() < 10_000);
    }

    #[test]
    fn memory_over_the_bound_is_freed_not_kept() {
        let pool = ColumnPool::new(10_000);
        pool.give(Vec::<u8>::with_capacity(6_000));
        pool.give(Vec::<u8>::with_capacity(6_000));
        assert_eq!(pool.kept_bytes(), 6_000);
        pool.give(Vec::<i64>::with_capacity(500));
        assert_eq!(pool.kept_bytes(), 10_000);
        pool.give(Vec::<bool>::new());
        assert_eq!(pool.kept_bytes(), 10_000);
    }
}
