//! The decode loop's writer: one v2 batch's records into the columns.
//!
//! Why not `Vec::push`: the loop writes eight values a record (offset,
//! timestamp, each binary column's offset, validity and bytes, the header
//! offset), and every push through `&mut RecordColumns` loads the vector's
//! pointer, length and capacity from memory and stores the length back:
//! the value's copy is a call to `memcpy`, which as far as the compiler
//! knows may change any memory, so none of it stays in a register across a
//! record. A [`Cursor`] keeps its own copy of the three in locals for the
//! batch and writes the length back once, when the batch is done:
//! `benches/decode_instructions.py` counted 332 -> 318 instructions a
//! record (issue 17). The validity of a binary column, a null key's offset
//! and a header-less row's header offset are kept as runs and written one
//! run at a time ([`Lazy`]): 275 -> 262.

use ferrokafka_protocol::record::RecordVisitor;

use crate::consumer::records::{BinaryBuf, RecordColumns};

/// Appends to a vector through a pointer and length held in locals; the
/// vector's own length is set on drop. Safe: a write past the capacity
/// grows the vector first (never, in the decode loop, whose columns are
/// reserved for the batch up front; a branch that is never taken).
struct Cursor<'v, T: Copy> {
    vec: &'v mut Vec<T>,
    ptr: *mut T,
    len: usize,
    cap: usize,
}

impl<'v, T: Copy> Cursor<'v, T> {
    fn new(vec: &'v mut Vec<T>) -> Self {
        Cursor {
            ptr: vec.as_mut_ptr(),
            len: vec.len(),
            cap: vec.capacity(),
            vec,
        }
    }

    #[inline(always)]
    fn push(&mut self, x: T) {
        if self.len == self.cap {
            self.grow(1);
        }
        // SAFETY: `len < cap` (grown above if not): inside the allocation,
        // past the initialized part, which `len` then covers.
        unsafe { self.ptr.add(self.len).write(x) };
        self.len += 1;
    }

    #[inline(always)]
    fn extend(&mut self, s: &[T]) {
        if self.cap - self.len < s.len() {
            self.grow(s.len());
        }
        // SAFETY: room for `s.len()` more (grown above if not); `s` is
        // borrowed from elsewhere (the fetched bytes), so no overlap.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), self.ptr.add(self.len), s.len()) };
        self.len += s.len();
    }

    /// `k` copies of `x` (a run a column writes at once, see [`Lazy`]).
    #[inline]
    fn fill(&mut self, x: T, k: usize) {
        if self.cap - self.len < k {
            self.grow(k);
        }
        // SAFETY: room for `k` more (grown above if not).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(self.len), k).fill(x) };
        self.len += k;
    }

    /// Room for `more` values: the vector takes the length written so far,
    /// grows as `Vec` does, and the cursor its new pointer and capacity.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, more: usize) {
        // SAFETY: the first `len` values were written by `push`/`extend`.
        unsafe { self.vec.set_len(self.len) };
        self.vec.reserve(more);
        self.ptr = self.vec.as_mut_ptr();
        self.cap = self.vec.capacity();
    }
}

impl<T: Copy> Drop for Cursor<'_, T> {
    fn drop(&mut self) {
        // SAFETY: as `grow`.
        unsafe { self.vec.set_len(self.len) };
    }
}

/// A binary column's three cursors, and the rows at its end written only
/// in part (see [`Lazy`]).
struct BinaryCursor<'v> {
    offsets: Cursor<'v, i32>,
    valid: Cursor<'v, bool>,
    data: Cursor<'v, u8>,
    lazy: Lazy,
}

/// Rows of a binary column left to write as one run: a run of values
/// (`Present`: their offsets and bytes written, their validity, all true,
/// not yet) or of nulls (`Null`: neither their validity, all false, nor
/// their offsets, all the same, written yet). Why: a producer's records
/// have a value and no key, nearly always all of a batch's records alike,
/// and each per-row push is a load of the vector's length and capacity
/// from memory, a compare and two stores (the cursors do not fit in
/// registers); a run is written with one fill when it ends, the counter
/// is one increment a row (`benches/decode_instructions.py`, issue 17).
#[derive(Clone, Copy)]
enum Lazy {
    Present(usize),
    Null(usize),
}

impl<'v> BinaryCursor<'v> {
    fn new(b: &'v mut BinaryBuf) -> Self {
        BinaryCursor {
            offsets: Cursor::new(&mut b.offsets),
            valid: Cursor::new(&mut b.valid),
            data: Cursor::new(&mut b.data),
            lazy: Lazy::Present(0),
        }
    }

    #[inline(always)]
    fn push(&mut self, v: Option<&[u8]>) {
        match (v, &mut self.lazy) {
            (Some(v), Lazy::Present(n)) => {
                *n += 1;
                self.data.extend(v);
                self.offsets.push(self.data.len as i32);
            }
            (None, Lazy::Null(n)) => *n += 1,
            (v, _) => self.switch(v),
        }
    }

    /// A row unlike the run before it: the run is written, a new one starts.
    #[cold]
    #[inline(never)]
    fn switch(&mut self, v: Option<&[u8]>) {
        self.finish_run();
        self.lazy = match v {
            Some(v) => {
                self.data.extend(v);
                self.offsets.push(self.data.len as i32);
                Lazy::Present(1)
            }
            None => Lazy::Null(1),
        };
    }

    /// The pending run's validity (and a null run's offsets), written.
    fn finish_run(&mut self) {
        match self.lazy {
            Lazy::Present(n) => self.valid.fill(true, n),
            Lazy::Null(n) => {
                self.valid.fill(false, n);
                self.offsets.fill(self.data.len as i32, n);
            }
        }
        self.lazy = Lazy::Present(0);
    }
}

/// A batch's records into the columns, from offset `from` on (earlier
/// records of the batch are skipped). The columns' per-record vectors are
/// written through cursors until this is dropped; the headers (rare) and
/// the per-batch columns (`fill_batch`) as usual.
pub(crate) struct Rows<'c> {
    from: i64,
    offsets: Cursor<'c, i64>,
    timestamps: Cursor<'c, i64>,
    keys: BinaryCursor<'c>,
    values: BinaryCursor<'c>,
    header_offsets: Cursor<'c, i32>,
    /// Rows ended whose header offset is not written yet: all the same,
    /// the header count so far, until a row with headers comes (as
    /// [`Lazy`], for records without headers, nearly all).
    header_offsets_due: usize,
    header_keys: &'c mut BinaryBuf,
    header_values: &'c mut BinaryBuf,
}

impl<'c> Rows<'c> {
    pub(crate) fn new(cols: &'c mut RecordColumns, from: i64) -> Self {
        Rows {
            from,
            offsets: Cursor::new(&mut cols.offsets),
            timestamps: Cursor::new(&mut cols.timestamps),
            keys: BinaryCursor::new(&mut cols.keys),
            values: BinaryCursor::new(&mut cols.values),
            header_offsets: Cursor::new(&mut cols.header_offsets),
            header_offsets_due: 0,
            header_keys: &mut cols.header_keys,
            header_values: &mut cols.header_values,
        }
    }
}

impl<'b> RecordVisitor<'b> for Rows<'_> {
    #[inline(always)]
    fn record(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&'b [u8]>,
        value: Option<&'b [u8]>,
    ) -> bool {
        if offset < self.from {
            return false;
        }
        self.offsets.push(offset);
        self.timestamps.push(timestamp);
        self.keys.push(key);
        self.values.push(value);
        true
    }

    #[inline]
    fn header(&mut self, key: &'b str, value: Option<&'b [u8]>) {
        // The rows ended before this one had no headers since the last
        // that had some: their offsets are the count before this header.
        self.write_header_offsets();
        self.header_keys.push(Some(key.as_bytes()));
        self.header_values.push(value);
    }

    #[inline(always)]
    fn end_record(&mut self) {
        self.header_offsets_due += 1;
    }
}

impl Rows<'_> {
    fn write_header_offsets(&mut self) {
        let due = std::mem::take(&mut self.header_offsets_due);
        self.header_offsets.fill(self.header_keys.len() as i32, due);
    }
}

impl Drop for Rows<'_> {
    // Before the cursors set their vectors' lengths (fields drop after
    // this): the runs still pending are written.
    fn drop(&mut self) {
        self.keys.finish_run();
        self.values.finish_run();
        self.write_header_offsets();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_grows_past_its_room_and_sets_the_length_once_dropped() {
        let mut v: Vec<i32> = Vec::with_capacity(2);
        v.push(7);
        {
            let mut c = Cursor::new(&mut v);
            for i in 0..100 {
                c.push(i);
            }
            c.extend(&[-1, -2, -3]);
        }
        assert_eq!(v.len(), 104);
        assert_eq!(v[0], 7);
        assert_eq!(v[1..101], (0..100).collect::<Vec<_>>()[..]);
        assert_eq!(v[101..], [-1, -2, -3]);
    }

    #[test]
    fn rows_write_the_same_columns_as_pushes() {
        let mut a = RecordColumns::new();
        let mut b = RecordColumns::new();
        // (offset, key, value, header count)
        type Rec<'a> = (i64, Option<&'a [u8]>, Option<&'a [u8]>, usize);
        let mut recs: Vec<Rec<'_>> = vec![
            (4, Some(b"k"), Some(b"v1"), 0),
            (5, None, Some(b"value two"), 2),
            (6, Some(b""), None, 1),
            (7, None, None, 0),
        ];
        // Runs of alike rows, as the columns write them at once (`Lazy`),
        // ending in each kind, and rows with headers between rows without.
        for o in 8..400i64 {
            let key: Option<&[u8]> = if (o / 7) % 3 == 0 { Some(b"key") } else { None };
            let value: Option<&[u8]> = if (o / 11) % 4 == 1 { None } else { Some(b"v") };
            recs.push((
                o,
                key,
                value,
                usize::from(o % 13 == 0) + usize::from(o % 39 == 0),
            ));
        }
        {
            let mut rows = Rows::new(&mut a, 5);
            for &(o, k, v, h) in &recs {
                if rows.record(o, o * 10, k, v) {
                    for j in 0..h {
                        rows.header("h", Some(&[j as u8][..]));
                    }
                    rows.end_record();
                }
            }
        }
        for &(o, k, v, h) in recs.iter().skip(1) {
            b.offsets.push(o);
            b.timestamps.push(o * 10);
            b.keys.push(k);
            b.values.push(v);
            for j in 0..h {
                b.header_keys.push(Some(b"h"));
                b.header_values.push(Some(&[j as u8][..]));
            }
            b.header_offsets.push(b.header_keys.len() as i32);
        }
        assert_eq!(a.offsets, b.offsets);
        assert_eq!(a.timestamps, b.timestamps);
        for (x, y) in [
            (&a.keys, &b.keys),
            (&a.values, &b.values),
            (&a.header_keys, &b.header_keys),
            (&a.header_values, &b.header_values),
        ] {
            assert_eq!(
                (&x.offsets, &x.valid, &x.data),
                (&y.offsets, &y.valid, &y.data)
            );
        }
        assert_eq!(a.header_offsets, b.header_offsets);
    }
}
