//! Record handles: what the accumulator keeps per record, or per run of
//! consecutive records, so that each record's outcome reaches its sender.
//! The accumulator is generic over them; ferrokafka-py's `send_batch`
//! completion is the handle that stands for runs.

/// What the producer needs of a record handle: how many records it stands
/// for. A handle may stand for a run of consecutive records (records of one
/// `send_batch` call, appended one after the other into one batch): the
/// batch then keeps one handle for the run, where one per record cost a
/// cache-missing write per record on the calling thread and a read on the
/// completing one (perf of the ceiling run, issue 17).
pub trait RecordHandles: Sized {
    /// Records this handle stands for.
    fn records(&self) -> usize {
        1
    }
    /// Take `next`, a handle for the record appended right after this
    /// handle's last, into this handle; or give it back.
    fn absorb(&mut self, next: Self) -> Result<(), Self> {
        Err(next)
    }
    /// Keep this handle's first `k` records (`0 < k < records()`) and
    /// return a handle for the rest (a batch split in two).
    fn split_off(&mut self, k: usize) -> Self {
        unreachable!("split_off({k}) of a one-record handle")
    }
}

/// Test and plain handles: one record each.
impl RecordHandles for u32 {}

/// Records `.0 .. .0 + .1` by index: the simplest handle that stands for
/// runs, for tests and the accumulator's bench (the real one is
/// ferrokafka-py's `send_batch` completion).
#[doc(hidden)]
#[derive(Debug, PartialEq, Eq)]
pub struct IndexRun(pub u32, pub u32);

impl RecordHandles for IndexRun {
    fn records(&self) -> usize {
        self.1 as usize
    }
    fn absorb(&mut self, next: Self) -> Result<(), Self> {
        if next.0 == self.0 + self.1 {
            self.1 += next.1;
            Ok(())
        } else {
            Err(next)
        }
    }
    fn split_off(&mut self, k: usize) -> Self {
        let rest = IndexRun(self.0 + k as u32, self.1 - k as u32);
        self.1 = k as u32;
        rest
    }
}

/// Records the handles stand for.
pub fn count_records<T: RecordHandles>(handles: &[T]) -> usize {
    handles.iter().map(RecordHandles::records).sum()
}

/// Append `h` to a batch's handles: into the last one if that takes it.
#[inline(always)]
pub(crate) fn push_handle<T: RecordHandles>(handles: &mut Vec<T>, h: T) {
    let h = match handles.last_mut() {
        Some(last) => match last.absorb(h) {
            Ok(()) => return,
            Err(h) => h,
        },
        None => h,
    };
    handles.push(h);
}

/// The handles of a batch's first `n` records, taken off the front of
/// `handles` (a handle straddling the cut is split).
pub fn take_records<T: RecordHandles>(
    handles: &mut std::collections::VecDeque<T>,
    n: usize,
) -> Vec<T> {
    let mut out = Vec::new();
    let mut left = n;
    while left > 0 {
        let Some(mut h) = handles.pop_front() else {
            break;
        };
        let r = h.records();
        if r > left {
            let rest = h.split_off(left);
            handles.push_front(rest);
            out.push(h);
            break;
        }
        left -= r;
        out.push(h);
    }
    out
}
