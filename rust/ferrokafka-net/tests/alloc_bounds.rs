//! Hostile lengths and counts must not turn into allocations: a counting
//! global allocator (this test binary only) records the largest single
//! request while decoders chew on forged input. Linux overcommits, so a
//! 16 GiB reservation "succeeds" here and would go unnoticed by a plain
//! test; on a smaller machine or under a memory limit it aborts the process.
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ferrokafka_net::consumer::fetch::AbortedTransactionFilter;
use ferrokafka_net::consumer::records::decode_fetched;
use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::record::{DecodeOptions, RecordBatchBuilder};

struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);
/// Tests in one binary run in parallel threads; one at a time measures.
static SERIAL: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

fn largest_during(f: impl FnOnce()) -> usize {
    let _g = SERIAL.lock().unwrap();
    LARGEST.store(0, Ordering::Relaxed);
    f();
    LARGEST.load(Ordering::Relaxed)
}

/// Found by the fetched_records fuzz target: the consumer reserved its
/// columns from the batch header's record count before checking it against
/// the payload, so a batch claiming 2^31-1 records asked for ~16 GiB.
#[test]
fn forged_records_count_allocates_nothing_big() {
    let mut b = RecordBatchBuilder::new(Compression::None).base_offset(0);
    b.append(1, Some(b"k"), Some(b"v"), &[]).unwrap();
    b.append(2, None, Some(b"w"), &[]).unwrap();
    let mut blob = b.finish().unwrap().to_vec();
    blob[57..61].copy_from_slice(&i32::MAX.to_be_bytes()); // records_count
    let opts = DecodeOptions {
        verify_crc: false,
        ..DecodeOptions::default()
    };
    let mut result = None;
    let largest = largest_during(|| {
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        result = Some(decode_fetched(&blob, 0, opts, &mut f, None).map(|d| d.records.len()));
    });
    let err = result.unwrap().expect_err("a forged count must be refused");
    assert!(err.to_string().contains("records count"), "{err}");
    assert!(
        largest < 1 << 20,
        "largest allocation {largest} bytes for a {}-byte batch",
        blob.len()
    );
}
