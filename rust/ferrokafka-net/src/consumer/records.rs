//! Fetched records in columnar form.
//!
//! A partition's Fetch answer is decoded once, on the consumer thread (no
//! GIL): CRC check, decompression, read_committed filtering, and the keys,
//! values and headers copied into a handful of contiguous buffers. Both
//! consumer faces read from here: `poll` makes one Python object per record
//! from slices, `poll_arrow` hands the buffers to Arrow. One copy of the
//! payload in total, and no allocation per record.

use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::record::{
    Batch, Batches, ControlRecordType, DecodeOptions, TimestampType, MIN_RECORD_SIZE,
};

use std::sync::Arc;

use crate::consumer::fetch::{AbortedTransactionFilter, BatchInfo};
use crate::consumer::pool::ColumnPool;
use crate::consumer::rows::Rows;
use crate::error::Error;

/// How many of `v` are false. Summed a byte at a time in runs of 255 (a
/// bool is 0 or 1, so a run's sum fits in a byte), which the compiler
/// vectorizes; `filter(..).count()` was a loop of four instructions a bool:
/// counting the key and value columns of each batch was 0.85% of the
/// ceiling run's `poll_arrow` samples, on the calling thread (perf, issue 17).
fn count_false(v: &[bool]) -> usize {
    let trues: usize = v
        .chunks(255)
        .map(|run| run.iter().fold(0u8, |sum, &b| sum + u8::from(b)) as usize)
        .sum();
    v.len() - trues
}

/// A nullable binary column in Arrow's layout (offsets `n + 1`, validity).
#[derive(Debug, Clone, Default)]
pub struct BinaryBuf {
    pub offsets: Vec<i32>,
    pub valid: Vec<bool>,
    pub data: Vec<u8>,
}

impl BinaryBuf {
    pub fn new() -> Self {
        BinaryBuf {
            offsets: vec![0],
            valid: Vec::new(),
            data: Vec::new(),
        }
    }

    #[inline(always)]
    pub fn push(&mut self, v: Option<&[u8]>) {
        if let Some(v) = v {
            self.data.extend_from_slice(v);
        }
        self.valid.push(v.is_some());
        self.offsets.push(self.data.len() as i32);
    }

    /// Room for `rows` values of `bytes` in all, from `pool`.
    fn pooled(pool: &ColumnPool, rows: usize, bytes: usize) -> Self {
        let mut offsets = pool.take(rows + 1);
        offsets.push(0);
        BinaryBuf {
            offsets,
            valid: pool.take(rows),
            data: pool.take(bytes),
        }
    }

    fn give_back(&mut self, pool: &ColumnPool) {
        pool.give(std::mem::take(&mut self.offsets));
        pool.give(std::mem::take(&mut self.valid));
        pool.give(std::mem::take(&mut self.data));
    }

    pub fn len(&self) -> usize {
        self.valid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.valid.is_empty()
    }

    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.valid[i].then(|| &self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }

    pub fn null_count(&self) -> usize {
        count_false(&self.valid)
    }

    /// Append rows `[from, to)` of `other`.
    pub fn extend_range(&mut self, other: &BinaryBuf, from: usize, to: usize) {
        let base = other.offsets[from];
        let start = self.data.len() as i32;
        self.data
            .extend_from_slice(&other.data[base as usize..other.offsets[to] as usize]);
        self.offsets.extend(
            other.offsets[from + 1..=to]
                .iter()
                .map(|o| o - base + start),
        );
        self.valid.extend_from_slice(&other.valid[from..to]);
    }
}

/// Decoded records of one partition (or the rows `poll_arrow` gathers).
#[derive(Debug, Clone, Default)]
pub struct RecordColumns {
    pub offsets: Vec<i64>,
    pub timestamps: Vec<i64>,
    /// 0 CreateTime, 1 LogAppendTime (Spark's `timestampType`).
    pub timestamp_types: Vec<i32>,
    pub leader_epochs: Vec<i32>,
    pub keys: BinaryBuf,
    pub values: BinaryBuf,
    /// Row i's headers are `header_keys/values[header_offsets[i]..header_offsets[i+1]]`.
    pub header_offsets: Vec<i32>,
    pub header_keys: BinaryBuf,
    pub header_values: BinaryBuf,
    /// Where the buffers go back when the columns are dropped (and where
    /// they came from); `None`: freed as usual.
    pub pool: Option<Arc<ColumnPool>>,
}

impl RecordColumns {
    pub fn new() -> Self {
        RecordColumns {
            offsets: Vec::new(),
            timestamps: Vec::new(),
            timestamp_types: Vec::new(),
            leader_epochs: Vec::new(),
            keys: BinaryBuf::new(),
            values: BinaryBuf::new(),
            header_offsets: vec![0],
            header_keys: BinaryBuf::new(),
            header_values: BinaryBuf::new(),
            pool: None,
        }
    }

    /// Room for `rows` records with `bytes` of values, taken from `pool`
    /// when there is one (and given back to it on drop).
    pub fn with_capacity(pool: Option<&Arc<ColumnPool>>, rows: usize, bytes: usize) -> Self {
        let Some(pool) = pool else {
            let mut cols = RecordColumns::new();
            cols.reserve(rows, bytes);
            return cols;
        };
        let mut header_offsets = pool.take(rows + 1);
        header_offsets.push(0);
        RecordColumns {
            offsets: pool.take(rows),
            timestamps: pool.take(rows),
            timestamp_types: pool.take(rows),
            leader_epochs: pool.take(rows),
            keys: BinaryBuf::pooled(pool, rows, 0),
            values: BinaryBuf::pooled(pool, rows, bytes),
            header_offsets,
            header_keys: BinaryBuf::pooled(pool, 0, 0),
            header_values: BinaryBuf::pooled(pool, 0, 0),
            pool: Some(pool.clone()),
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Payload bytes held (for the prefetch memory bound).
    pub fn byte_size(&self) -> usize {
        self.keys.data.len()
            + self.values.data.len()
            + self.header_keys.data.len()
            + self.header_values.data.len()
            + self.len() * 40
    }

    pub fn headers(&self, i: usize) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        let (a, b) = (
            self.header_offsets[i] as usize,
            self.header_offsets[i + 1] as usize,
        );
        (a..b).map(move |h| {
            (
                self.header_keys.get(h).unwrap_or_default(),
                self.header_values.get(h),
            )
        })
    }

    pub fn header_count(&self, i: usize) -> usize {
        (self.header_offsets[i + 1] - self.header_offsets[i]) as usize
    }

    /// Append rows `[from, to)` of `other` (poll_arrow gathering chunks).
    pub fn extend_range(&mut self, other: &RecordColumns, from: usize, to: usize) {
        self.offsets.extend_from_slice(&other.offsets[from..to]);
        self.timestamps
            .extend_from_slice(&other.timestamps[from..to]);
        self.timestamp_types
            .extend_from_slice(&other.timestamp_types[from..to]);
        self.leader_epochs
            .extend_from_slice(&other.leader_epochs[from..to]);
        self.keys.extend_range(&other.keys, from, to);
        self.values.extend_range(&other.values, from, to);
        let (hf, ht) = (
            other.header_offsets[from] as usize,
            other.header_offsets[to] as usize,
        );
        let base = other.header_offsets[from];
        let start = *self.header_offsets.last().unwrap_or(&0);
        self.header_offsets.extend(
            other.header_offsets[from + 1..=to]
                .iter()
                .map(|o| o - base + start),
        );
        self.header_keys.extend_range(&other.header_keys, hf, ht);
        self.header_values
            .extend_range(&other.header_values, hf, ht);
    }

    fn reserve(&mut self, rows: usize, bytes: usize) {
        self.offsets.reserve(rows);
        self.timestamps.reserve(rows);
        self.timestamp_types.reserve(rows);
        self.leader_epochs.reserve(rows);
        self.header_offsets.reserve(rows);
        for b in [&mut self.keys, &mut self.values] {
            b.offsets.reserve(rows);
            b.valid.reserve(rows);
        }
        self.values.data.reserve(bytes);
    }

    // A legacy (magic 0/1) message's row; v2 batches are written through
    // `rows::Rows`. The timestamp type and leader epoch are the batch's:
    // `fill_batch` writes them for the batch's rows at once.
    #[inline]
    fn push(&mut self, offset: i64, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.offsets.push(offset);
        self.timestamps.push(ts);
        self.keys.push(key);
        self.values.push(value);
    }

    /// The per-batch columns of the rows pushed since they were last filled.
    fn fill_batch(&mut self, tt: i32, epoch: i32) {
        let n = self.offsets.len();
        self.timestamp_types.resize(n, tt);
        self.leader_epochs.resize(n, epoch);
    }

    #[inline]
    fn end_row(&mut self) {
        self.header_offsets.push(self.header_keys.len() as i32);
    }
}

impl Drop for RecordColumns {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else { return };
        pool.give(std::mem::take(&mut self.offsets));
        pool.give(std::mem::take(&mut self.timestamps));
        pool.give(std::mem::take(&mut self.timestamp_types));
        pool.give(std::mem::take(&mut self.leader_epochs));
        pool.give(std::mem::take(&mut self.header_offsets));
        for b in [
            &mut self.keys,
            &mut self.values,
            &mut self.header_keys,
            &mut self.header_values,
        ] {
            b.give_back(&pool);
        }
    }
}

/// Spark's `timestampType`: 0 CreateTime, 1 LogAppendTime; -1 for magic 0
/// messages, which carry no timestamp (Java's NO_TIMESTAMP_TYPE).
fn ts_type_id(t: TimestampType) -> i32 {
    match t {
        TimestampType::NoTimestamp => -1,
        TimestampType::CreateTime => 0,
        TimestampType::LogAppendTime => 1,
    }
}

/// The outcome of decoding one partition's records blob.
#[derive(Debug)]
pub struct DecodedFetch {
    pub records: RecordColumns,
    /// Where the next fetch starts: past the last complete batch, including
    /// control batches and aborted data that were skipped (so the position
    /// never gets stuck behind a marker).
    pub next_offset: i64,
    /// Leader epoch of the last batch seen (-1 when none or legacy).
    pub last_epoch: i32,
    /// The blob held data but not one complete batch: the record at the
    /// fetch offset is bigger than the partition fetch size.
    pub record_too_large: bool,
}

/// Decode a partition's records from `fetch_offset` on. Records before the
/// fetch offset (a compressed batch is returned whole) are dropped, and so is
/// any record at or below one already taken from this answer: a broker that
/// answers overlapping batches (Tansu 0.6.0 once did under concurrent
/// appends) must not make the application see a record twice or offsets go
/// back (Java's `nextFetchOffset` rule; docs/semantics.md §8.6).
pub fn decode_fetched(
    blob: &[u8],
    fetch_offset: i64,
    opts: DecodeOptions,
    filter: &mut AbortedTransactionFilter,
    pool: Option<&Arc<ColumnPool>>,
) -> Result<DecodedFetch, Error> {
    let mut next_offset = fetch_offset;
    let mut last_epoch = -1;
    // The batches are parsed before any record is decoded, so the columns
    // can be sized once for the whole answer: sized batch by batch, the
    // growing buffers were reallocated and copied about twice over, as much
    // memory traffic as the decode itself (perf, ceiling run). Each batch's
    // CRC is checked just before it is decoded, not in this pass: checked
    // here, a 1 MB answer has been read through once before the decode
    // reads it again, by then out of this core's L2 cache. An error
    // anywhere still fails the whole answer (every batch is checked, the
    // ones skipped below too).
    let parse = DecodeOptions {
        verify_crc: false,
        ..opts
    };
    let batches = Batches::new(blob, parse).collect::<Result<Vec<_>, _>>()?;
    let saw_batch = !batches.is_empty();
    let (rows, bytes) = batches.iter().fold((0, 0), |(rows, bytes), b| match b {
        Batch::V2(b) if !b.header.is_control() => {
            let stored = b.records_data.len();
            // The count is the header's claim: bounded by what the bytes can
            // hold (`records` checks the same bound), so a hostile header
            // cannot make this reserve the heap.
            let claimed = (b.header.records_count.max(0) as usize).min(stored / MIN_RECORD_SIZE);
            // Compressed batches grow the value buffer as they inflate.
            let plain = matches!(b.header.compression(), Ok(Compression::None));
            (rows + claimed, bytes + if plain { stored } else { 0 })
        }
        _ => (rows, bytes),
    });
    let mut cols = RecordColumns::with_capacity(pool, rows, bytes);
    for b in batches {
        match b {
            Batch::V2(batch) => {
                if opts.verify_crc {
                    batch.verify_crc()?;
                }
                let h = &batch.header;
                last_epoch = h.partition_leader_epoch;
                let info = BatchInfo {
                    last_offset: h.last_offset(),
                    producer_id: h.producer_id,
                    is_transactional: h.is_transactional(),
                    control_commit: if h.is_control() {
                        Some(!matches!(
                            batch.control_record(&opts)?.map(|c| c.kind),
                            Some(ControlRecordType::Abort)
                        ))
                    } else {
                        None
                    },
                };
                let batch_next = h.next_offset();
                if batch_next <= next_offset {
                    if next_offset > fetch_offset && batch_next > fetch_offset {
                        log::debug!(
                            target: "ferrokafka::consumer",
                            "dropped a batch ending at {} the answer already passed ({next_offset})",
                            batch_next - 1
                        );
                    }
                    continue;
                }
                if !filter.skip(&info) {
                    let payload = batch.payload(&opts)?;
                    // `records` checks the count against the payload size
                    // first: reserving from the header's count alone let a
                    // hostile batch claiming 2^31 records abort the process
                    // on allocation (found by the fetched_records fuzz target).
                    let records = batch.records(&payload)?;
                    // A no-op unless the batch was compressed.
                    cols.reserve(h.records_count.max(0) as usize, payload.len());
                    records.visit(&mut Rows::new(&mut cols, next_offset))?;
                    cols.fill_batch(ts_type_id(h.timestamp_type()), h.partition_leader_epoch);
                }
                next_offset = next_offset.max(batch_next);
            }
            Batch::Legacy(msg) => {
                if opts.verify_crc {
                    msg.verify_crc()?;
                }
                let mut owned = Vec::new();
                msg.decode_into(&opts, &mut owned)?;
                for r in owned {
                    if r.offset < next_offset {
                        continue;
                    }
                    cols.push(r.offset, r.timestamp, r.key.as_deref(), r.value.as_deref());
                    cols.fill_batch(ts_type_id(r.timestamp_type), -1);
                    cols.end_row();
                    next_offset = next_offset.max(r.offset + 1);
                }
            }
        }
    }
    let record_too_large = !saw_batch && !blob.is_empty();
    Ok(DecodedFetch {
        records: cols,
        next_offset,
        last_epoch,
        record_too_large,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokafka_protocol::compression::Compression;
    use ferrokafka_protocol::record::{Header, RecordBatchBuilder};

    #[test]
    fn count_false_counts_across_runs_of_255() {
        assert_eq!(count_false(&[]), 0);
        for n in [1, 254, 255, 256, 511, 9_000] {
            let v: Vec<bool> = (0..n).map(|i| i % 3 != 1).collect();
            assert_eq!(count_false(&v), v.iter().filter(|b| !**b).count(), "{n}");
            assert_eq!(count_false(&vec![false; n]), n);
            assert_eq!(count_false(&vec![true; n]), 0);
        }
    }

    fn batch(base: i64, n: usize, compression: Compression) -> Vec<u8> {
        let mut b = RecordBatchBuilder::new(compression).base_offset(base);
        for i in 0..n {
            let v = format!("v{}", base + i as i64);
            let hs = [Header {
                key: "h",
                value: Some(&b"x"[..]),
            }];
            b.append(
                1000 + i as i64,
                if i % 2 == 0 { Some(&b"k"[..]) } else { None },
                Some(v.as_bytes()),
                &hs,
            )
            .unwrap();
        }
        b.finish().unwrap().to_vec()
    }

    #[test]
    fn decodes_into_columns_and_skips_before_fetch_offset() {
        let mut blob = batch(0, 3, Compression::Lz4);
        blob.extend(batch(3, 2, Compression::None));
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        let d = decode_fetched(&blob, 1, DecodeOptions::default(), &mut f, None).unwrap();
        assert_eq!(d.records.offsets, vec![1, 2, 3, 4]);
        assert_eq!(d.next_offset, 5);
        assert_eq!(d.records.values.get(0), Some(&b"v1"[..]));
        assert_eq!(d.records.keys.get(0), None);
        assert_eq!(d.records.keys.get(1), Some(&b"k"[..]));
        assert_eq!(
            d.records.headers(3).collect::<Vec<_>>(),
            vec![(&b"h"[..], Some(&b"x"[..]))]
        );
        let mut g = RecordColumns::new();
        g.extend_range(&d.records, 1, 3);
        g.extend_range(&d.records, 0, 1);
        assert_eq!(g.offsets, vec![2, 3, 1]);
        assert_eq!(g.values.get(2), Some(&b"v1"[..]));
        assert_eq!(g.header_offsets, vec![0, 1, 2, 3]);
    }

    #[test]
    fn overlapping_batches_of_one_answer_give_each_record_once_in_order() {
        // 0..10, 10..20, then 5..15 again (whole and partly overlapping), then
        // 20..25: what the application sees never repeats or goes back.
        let mut blob = batch(0, 10, Compression::None);
        blob.extend(batch(10, 10, Compression::None));
        blob.extend(batch(5, 10, Compression::Lz4));
        blob.extend(batch(15, 10, Compression::None));
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        let d = decode_fetched(&blob, 3, DecodeOptions::default(), &mut f, None).unwrap();
        assert_eq!(d.records.offsets, (3..25).collect::<Vec<i64>>());
        assert_eq!(d.next_offset, 25);
    }

    #[test]
    fn partial_trailing_batch_is_ignored_and_oversized_first_batch_flagged() {
        let full = batch(0, 2, Compression::None);
        let mut blob = full.clone();
        blob.extend_from_slice(&full[..20]);
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        let d = decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, None).unwrap();
        assert_eq!(d.records.len(), 2);
        assert!(!d.record_too_large);
        let d = decode_fetched(&full[..30], 0, DecodeOptions::default(), &mut f, None).unwrap();
        assert!(d.record_too_large);
        assert_eq!(d.next_offset, 0);
    }

    #[test]
    fn crc_fails_the_answer_even_for_a_batch_it_skips() {
        // A flipped byte inside a value parses fine: only the CRC catches it.
        let good = batch(0, 50, Compression::None);
        let mut bad = good.clone();
        let at = bad.len() - 30;
        bad[at] ^= 0x01;
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        let e = decode_fetched(&bad, 0, DecodeOptions::default(), &mut f, None).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Protocol(ferrokafka_protocol::ProtocolError::CrcMismatch { .. })
            ),
            "{e}"
        );
        // Unchecked (check_crcs=False), the same bytes decode.
        let off = DecodeOptions {
            verify_crc: false,
            ..DecodeOptions::default()
        };
        assert_eq!(
            decode_fetched(&bad, 0, off, &mut f, None)
                .unwrap()
                .records
                .len(),
            50
        );
        // A corrupt batch before the fetch offset still fails the answer.
        let mut blob = bad;
        blob.extend(batch(50, 5, Compression::None));
        assert!(decode_fetched(&blob, 50, DecodeOptions::default(), &mut f, None).is_err());
        // So does one after a good batch (each batch is checked as it is
        // decoded): no record of the answer comes out.
        let mut blob = batch(0, 5, Compression::None);
        let mut later = batch(5, 50, Compression::None);
        let at = later.len() - 30;
        later[at] ^= 0x01;
        blob.extend(later);
        assert!(decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, None).is_err());
        // And a legacy message's CRC32.
        let mut legacy =
            ferrokafka_protocol::record::encode_legacy_message(1, 0, 0, 1000, None, Some(b"v"));
        let last = legacy.len() - 1;
        legacy[last] ^= 0x01;
        let e = decode_fetched(&legacy, 0, DecodeOptions::default(), &mut f, None).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Protocol(ferrokafka_protocol::ProtocolError::CrcMismatch { .. })
            ),
            "{e}"
        );
        assert_eq!(
            decode_fetched(&legacy, 0, off, &mut f, None)
                .unwrap()
                .records
                .len(),
            1
        );
    }

    #[test]
    fn corrupt_batch_is_an_error_not_a_panic() {
        let mut blob = batch(0, 2, Compression::None);
        let n = blob.len();
        blob[n - 1] ^= 0xff;
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        assert!(decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, None).is_err());
    }

    #[test]
    fn a_run_decoded_after_another_was_dropped_reuses_its_buffers() {
        let pool = ColumnPool::new(1 << 20);
        let blob = batch(0, 200, Compression::None);
        let mut f = AbortedTransactionFilter::new(false, vec![]);
        let first = decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, Some(&pool))
            .unwrap()
            .records;
        let (values, offsets) = (first.values.data.as_ptr(), first.offsets.as_ptr());
        assert_eq!(pool.kept_bytes(), 0);
        drop(first);
        assert!(pool.kept_bytes() > 0, "given back on drop");
        let again = decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, Some(&pool))
            .unwrap()
            .records;
        assert_eq!(again.values.data.as_ptr(), values);
        assert_eq!(again.offsets.as_ptr(), offsets);
        // Reused buffers hold only the new run's rows.
        assert_eq!(again.len(), 200);
        assert_eq!(again.values.get(199), Some(&b"v199"[..]));
        assert_eq!(again.headers(0).count(), 1);
        // Copies (poll_arrow gathering) come from the pool too and go back.
        let mut g = RecordColumns::with_capacity(Some(&pool), 10, 40);
        g.extend_range(&again, 5, 15);
        assert_eq!(g.offsets, (5..15).collect::<Vec<i64>>());
        drop((g, again));
        let kept = pool.kept_bytes();
        let plain = decode_fetched(&blob, 0, DecodeOptions::default(), &mut f, None).unwrap();
        drop(plain);
        assert_eq!(
            pool.kept_bytes(),
            kept,
            "columns without a pool are freed as before"
        );
    }
}
