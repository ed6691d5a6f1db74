//! `RecordBatchBuilder::append_run`: a stretch of header-less records
//! appended in one loop.
//!
//! Why: `append` is a call per record, and around it a producer checks per
//! record what changes only once in a while (room in the batch, its memory
//! reservation, whether it filled). For `send_batch`, whose records come in
//! thousands, those checks and the write's own bookkeeping (a reservation
//! of the buffer, the stored length, the count) were most of the ~200
//! instructions a record its calling thread spent outside the copy and the
//! CRC (callgrind of the ceiling run, issue 17). Here the buffer is reserved
//! once for the whole room, one bound check a record stands for all the
//! others, and the length, count and largest timestamp stay in registers
//! until the loop ends. Each record is written by the same code as
//! `append`'s (`write_two_byte_length_record_at`): the bytes are the same.

use super::{
    write_two_byte_length_record_at, RecordBatchBuilder, CRC_CHUNK, MAX_BODY_OVERHEAD, STAMP_SLACK,
    TWO_BYTE_LENGTH_PAYLOAD,
};
use crate::compression::Compression;

/// The most bytes a record `append_run` takes adds to its key and value:
/// its length (two bytes) and the rest of its body at its longest.
pub const RUN_RECORD_OVERHEAD: usize = 2 + MAX_BODY_OVERHEAD;

/// A header-less record as `append_run` reads it: timestamp, key, value.
pub type RunRecord<'r> = (i64, Option<&'r [u8]>, Option<&'r [u8]>);

impl RecordBatchBuilder {
    /// Append `record(0)`, `record(1)`, ... (at most `n`) while each fits in
    /// what is left of `room` bytes at its longest (key and value plus
    /// `RUN_RECORD_OVERHEAD`), and its key and value add up to
    /// `TWO_BYTE_LENGTH_PAYLOAD` bytes; stops at the first `None` or record
    /// that does not (which `append` then takes). Returns how many it
    /// appended. Needs a record in the batch already (its first sets the
    /// base timestamp); appends none otherwise.
    #[inline(always)]
    pub fn append_run<'r>(
        &mut self,
        n: usize,
        room: usize,
        mut record: impl FnMut(usize) -> Option<RunRecord<'r>>,
    ) -> usize {
        let Some(base_ts) = self.base_timestamp else {
            return 0;
        };
        // The offset deltas stay below i32::MAX (`append`'s error).
        let n = n.min((i32::MAX - self.count) as usize);
        self.buf.reserve(room + STAMP_SLACK);
        let start = self.buf.len();
        let end = start + room;
        let checksum = self.compression == Compression::None;
        let mut len = start;
        let mut count = self.count;
        let mut max_ts = self.max_timestamp;
        let mut i = 0;
        while i < n {
            let Some((ts, key, value)) = record(i) else {
                break;
            };
            let payload = key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
            if !TWO_BYTE_LENGTH_PAYLOAD.contains(&payload)
                || len + payload + RUN_RECORD_OVERHEAD > end
            {
                break;
            }
            // SAFETY: `reserve` made room for `room + STAMP_SLACK` bytes past
            // `start`, and the record at its longest ends within `end`,
            // as `write_two_byte_length_record_at` needs.
            len += unsafe {
                let at = self.buf.as_mut_ptr().add(len);
                write_two_byte_length_record_at(at, ts.wrapping_sub(base_ts), count, key, value)
            };
            count += 1;
            max_ts = max_ts.max(ts);
            i += 1;
            if checksum && len - self.crc_upto >= CRC_CHUNK {
                // SAFETY: every byte up to `len` was written above.
                unsafe { self.buf.set_len(len) };
                self.checksum_appended();
            }
        }
        // SAFETY: as above.
        unsafe { self.buf.set_len(len) };
        self.count = count;
        self.max_timestamp = max_ts;
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of every shape the run takes or refuses: with and without a
    /// key, payloads at the two-byte range's edges and outside it,
    /// timestamps before and after the first, offset deltas past the
    /// one- and two-byte varints.
    fn records() -> Vec<Owned> {
        let payloads = [0usize, 57, 58, 100, 1000, 8164, 8165, 9000];
        (0..9000)
            .map(|i| {
                let len = payloads[(i * 7) % payloads.len()];
                let ts = 1_000 + (i as i64 % 5) * 300 - 600;
                match i % 3 {
                    0 => (ts, None, Some(vec![i as u8; len])),
                    1 => (
                        ts,
                        Some(vec![b'k'; len.min(20)]),
                        Some(vec![1; len.saturating_sub(20)]),
                    ),
                    _ => (ts, None, (len != 100).then(|| vec![2; len])),
                }
            })
            .collect()
    }

    type Owned = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

    fn get(r: &Owned) -> RunRecord<'_> {
        (r.0, r.1.as_deref(), r.2.as_deref())
    }

    /// Long stretches of one shape (the same timestamp and key and value
    /// lengths, as a `send_batch` call's records), keyed and not, whose
    /// offset deltas pass the one- and two-byte varints, then a change of
    /// timestamp, of length, of key presence.
    fn runs_of_one_shape() -> Vec<Owned> {
        (0..9000)
            .map(|i| match i {
                0..=8299 => (7, None, Some(vec![i as u8; 100])),
                8300..=8599 => (7, Some(vec![i as u8; 16]), Some(vec![3; 100])),
                8600..=8799 => (9, Some(vec![i as u8; 16]), Some(vec![3; 100])),
                _ => (9, None, Some(vec![4; 99])),
            })
            .collect()
    }

    /// A batch built by runs (and `append` for what a run refuses) is the
    /// batch `append` builds record by record, byte for byte.
    #[test]
    fn a_run_writes_what_append_writes() {
        for recs in [records(), runs_of_one_shape()] {
            runs_match_appends(&recs);
        }
    }

    fn runs_match_appends(recs: &[Owned]) {
        let mut one = RecordBatchBuilder::new(Compression::None);
        for r in recs {
            let (ts, k, v) = get(r);
            one.append(ts, k, v, &[]).unwrap();
        }
        let expected = one.finish().unwrap();
        for room in [0usize, 200, 5_000, 1 << 20] {
            let mut runs = RecordBatchBuilder::new(Compression::None);
            let (mut i, mut by_run) = (0, 0);
            while i < recs.len() {
                let n = runs.append_run(recs.len() - i, room, |j| Some(get(&recs[i + j])));
                by_run += n;
                i += n;
                if i < recs.len() {
                    let (ts, k, v) = get(&recs[i]);
                    runs.append(ts, k, v, &[]).unwrap();
                    i += 1;
                }
            }
            match room {
                0 => assert_eq!(by_run, 0),
                1_048_576 => assert!(by_run > recs.len() / 4, "{by_run} by runs"),
                _ => assert!(by_run > 0, "room {room}"),
            }
            assert_eq!(runs.finish().unwrap(), expected, "room {room}");
        }
    }

    /// A run stops before a record that might not fit its room, at a
    /// `None`, and appends nothing to a batch without a first record.
    #[test]
    fn a_run_stops_at_its_room_and_needs_a_first_record() {
        let v = [7u8; 100];
        let mut b = RecordBatchBuilder::new(Compression::None);
        assert_eq!(b.append_run(10, 1 << 20, |_| Some((1, None, Some(&v)))), 0);
        b.append(1, None, Some(&v), &[]).unwrap();
        // At its longest a record of 100 B takes 2 + 100 + 27.
        let before = b.size_in_bytes();
        assert_eq!(b.append_run(10, 3 * 129, |_| Some((1, None, Some(&v)))), 3);
        assert!(b.size_in_bytes() - before <= 3 * 129);
        assert_eq!(
            b.append_run(10, 1 << 20, |j| (j < 4).then_some((1, None, Some(&v[..])))),
            4
        );
        assert_eq!(b.len(), 8);
    }
}
