//! The producer's batch: the protocol crate's `RecordBatchBuilder` plus what
//! the accumulator and sender need around it (capacity, re-encoding with new
//! producer fields on retry).

use bytes::{Bytes, BytesMut};
use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::record::{
    DecodeOptions, Header, RecordBatch, RecordBatchBuilder, RUN_RECORD_OVERHEAD,
};

use crate::error::Error;
use crate::producer::accumulator::{BatchBuilder, RecordRef, FIRST_CHUNK};
use crate::producer::buffer_pool::BufferPool;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use crate::producer::sender::{EncodableBatch, Encode, ProducerFields};

/// RecordBatch v2 header layout (Kafka's `DefaultRecordBatch`): the CRC at
/// 17..21 covers everything from the attributes (21) to the end, including
/// producer id (43..51), epoch (51..53) and base sequence (53..57).
const CRC_OFFSET: usize = 17;
const CRC_START: usize = 21;
const PRODUCER_ID_OFFSET: usize = 43;

pub struct ProducerRecordBatch {
    builder: Option<RecordBatchBuilder>,
    /// Set at first encode; later encodes only patch the producer fields.
    /// The encoded batch, shared with the requests that carry it (a retry
    /// sends the same bytes): handing it out is a reference count, not a copy.
    finished: Option<Bytes>,
    /// Filled by the job `encode_later` handed out; read into `finished` by
    /// the next `encode` (a retry or a split, after the request went out).
    pending: Option<Arc<OnceLock<Result<Bytes, Error>>>>,
    finished_fields: ProducerFields,
    capacity: usize,
    count: usize,
    size: usize,
    /// Kept to build the smaller batches of a split with the same codec.
    compression: Compression,
    level: Option<i32>,
    /// Written by a transactional producer (the attributes' transactional
    /// bit: read_committed consumers hold it back until the commit marker).
    transactional: bool,
    /// Set for a full-size batch (`reserve_total`): its buffer goes back
    /// there when the last holder of its finished bytes (the batch, or a
    /// request that carried them) lets go (`finished_bytes`).
    pool: Option<Arc<BufferPool>>,
}

impl ProducerRecordBatch {
    pub fn new(compression: Compression, level: Option<i32>, capacity: usize) -> Self {
        ProducerRecordBatch {
            builder: Some(
                RecordBatchBuilder::with_capacity(compression, capacity.min(FIRST_CHUNK))
                    .compression_level(level),
            ),
            finished: None,
            pending: None,
            finished_fields: ProducerFields::NONE,
            capacity,
            count: 0,
            size: 61,
            compression,
            level,
            transactional: false,
            pool: None,
        }
    }

    /// Mark the batch transactional (every batch of a transactional producer).
    pub fn with_transactional(mut self, v: bool) -> Self {
        self.transactional = v;
        self.builder = self.builder.take().map(|b| b.transactional(v));
        self
    }
}

/// What a record adds to its key and value at most, as `try_append` counts
/// it: length, attributes, timestamp delta, offset delta, key/value lengths,
/// header count: at most 5 + 1 + 10 + 5 + 5 + 5 + 5 bytes of varints.
const RECORD_OVERHEAD: usize = 36;

/// Upper bound of a record's encoded size inside a batch.
// Per record in the run loop; as a call it was a tenth of `try_append`'s
// own instructions (callgrind of the calling thread, issue 17).
#[inline(always)]
pub fn record_size_upper_bound(r: &RecordRef<'_>) -> usize {
    RECORD_OVERHEAD
        + r.key.map_or(0, |k| k.len())
        + r.value.map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|(k, v)| 10 + k.len() + v.map_or(0, |v| v.len()))
            .sum::<usize>()
}

impl BatchBuilder for ProducerRecordBatch {
    // Inlined into the accumulator's run loop (`extend_open`), where the
    // checks it repeats per record (builder present, capacity) are hoisted:
    // as a call per record it was a fifth of the append bench's time (the
    // call, six saved registers, the reloads; issue 17). `always`: in the
    // bindings' build the loop sits in a large function, where a plain hint
    // was not taken.
    #[inline(always)]
    fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
        let builder = self.builder.as_mut()?;
        let est = record_size_upper_bound(r);
        if self.count > 0 && builder.size_in_bytes() + est > self.capacity {
            return None;
        }
        let before = builder.size_in_bytes();
        // Most records have no headers: no list to build for them.
        let headers: Vec<Header<'_>> = if r.headers.is_empty() {
            Vec::new()
        } else {
            r.headers
                .iter()
                .map(|(k, v)| Header { key: k, value: *v })
                .collect()
        };
        builder
            .append_inlined(r.timestamp_ms, r.key, r.value, &headers)
            .ok()?;
        self.count += 1;
        self.size = builder.size_in_bytes();
        Some(self.size - before)
    }

    // Inlined into the accumulator's loop for the same reason as
    // `try_append`. The room is also bounded by the batch's capacity, less
    // what `try_append`'s bound for a record (`RECORD_OVERHEAD`) adds to
    // the run's (`RUN_RECORD_OVERHEAD`): a run stops where `try_append`
    // would have, and a batch ends at the same record whichever appended it.
    #[inline(always)]
    fn append_run<'a, R>(
        &mut self,
        range: Range<usize>,
        room: usize,
        record: &mut R,
    ) -> (usize, usize)
    where
        R: FnMut(usize) -> Option<(RecordRef<'a>, usize)>,
    {
        let Some(builder) = self.builder.as_mut() else {
            return (0, 0);
        };
        let before = builder.size_in_bytes();
        let room = room.min(
            self.capacity
                .saturating_sub(before + (RECORD_OVERHEAD - RUN_RECORD_OVERHEAD)),
        );
        let start = range.start;
        let n = builder.append_run(range.len(), room, |j| {
            let (r, _) = record(start + j)?;
            r.headers
                .is_empty()
                .then_some((r.timestamp_ms, r.key, r.value))
        });
        self.count += n;
        self.size = builder.size_in_bytes();
        (n, self.size - before)
    }

    fn size_bytes(&self) -> usize {
        self.size
    }

    fn record_count(&self) -> usize {
        self.count
    }

    fn reserve_total(&mut self, total: usize, pool: &Arc<BufferPool>) {
        if self.count == 0 && self.builder.is_some() {
            if let Some(buf) = pool.take() {
                self.builder = Some(
                    RecordBatchBuilder::with_buffer(self.compression, buf)
                        .compression_level(self.level)
                        .transactional(self.transactional),
                );
            }
            self.pool = Some(pool.clone());
        }
        if let Some(b) = self.builder.as_mut() {
            // A kept buffer has the room already: no reallocation.
            b.reserve(total.saturating_sub(b.size_in_bytes()));
        }
    }
}

impl EncodableBatch for ProducerRecordBatch {
    fn split(&mut self, target_bytes: usize) -> Result<Vec<Self>, Error> {
        self.split_records(target_bytes)
    }

    fn encode_later(&mut self, p: ProducerFields) -> Option<Encode> {
        let b = self.builder.take()?;
        let b = b.producer(p.producer_id, p.producer_epoch, p.base_sequence);
        let slot = Arc::new(OnceLock::new());
        self.pending = Some(slot.clone());
        self.finished_fields = p;
        let pool = self.pool.clone();
        Some(Box::new(move || {
            let r = b
                .finish_vec()
                .map(|v| finished_bytes(v, pool.as_ref()))
                .map_err(Error::from);
            let _ = slot.set(r.clone());
            r
        }))
    }

    fn encode(&mut self, p: ProducerFields) -> Result<Bytes, Error> {
        if let Some(slot) = self.pending.take() {
            match slot.get() {
                Some(Ok(b)) => self.finished = Some(b.clone()),
                Some(Err(e)) => return Err(e.clone()),
                None => {
                    return Err(Error::State {
                        detail: "batch encoding has not run".into(),
                    })
                }
            }
        }
        if let Some(b) = self.builder.take() {
            let b = b.producer(p.producer_id, p.producer_epoch, p.base_sequence);
            self.finished = Some(finished_bytes(b.finish_vec()?, self.pool.as_ref()));
            self.finished_fields = p;
        }
        let bytes = self.finished.as_ref().ok_or_else(|| Error::State {
            detail: "batch was never built".into(),
        })?;
        if self.finished_fields != p {
            // Retry after an epoch bump: same records, new producer fields;
            // rewrite them and the CRC in a copy (rare) instead of
            // re-encoding. The copy leaves requests still holding the old
            // bytes untouched.
            let mut buf = BytesMut::from(&bytes[..]);
            buf[PRODUCER_ID_OFFSET..PRODUCER_ID_OFFSET + 8]
                .copy_from_slice(&p.producer_id.to_be_bytes());
            buf[PRODUCER_ID_OFFSET + 8..PRODUCER_ID_OFFSET + 10]
                .copy_from_slice(&p.producer_epoch.to_be_bytes());
            buf[PRODUCER_ID_OFFSET + 10..PRODUCER_ID_OFFSET + 14]
                .copy_from_slice(&p.base_sequence.to_be_bytes());
            let crc = ferrokafka_protocol::record::crc::checksum(&buf[CRC_START..]);
            buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            self.finished = Some(buf.freeze());
            self.finished_fields = p;
        }
        Ok(self.finished.clone().expect("set above"))
    }
}

/// A finished batch's buffer as the `Bytes` its requests share: a
/// full-size batch's goes back to `pool` once the last of them is dropped.
fn finished_bytes(buf: Vec<u8>, pool: Option<&Arc<BufferPool>>) -> Bytes {
    match pool {
        Some(pool) => pool.returning(buf),
        None => Bytes::from(buf),
    }
}

impl ProducerRecordBatch {
    /// The batch's records re-cut into new open batches, in order: each
    /// holds at most `max_bytes` and at most about half of this batch's
    /// records by size (a record larger than that gets a batch of its own),
    /// so a batch of two or more records always yields two or more. The
    /// records are read back from the encoded bytes (decompressed if need
    /// be), as Java's `ProducerBatch.split` does: after the first encode the
    /// builder no longer holds them.
    pub fn split_records(&mut self, max_bytes: usize) -> Result<Vec<ProducerRecordBatch>, Error> {
        if self.finished.is_none() {
            self.encode(self.finished_fields)?;
        }
        let buf = self.finished.as_ref().ok_or_else(|| Error::State {
            detail: "batch was never built".into(),
        })?;
        // Our own bytes: the CRC was just computed, no need to verify it, and
        // the decompressed size is bounded by what we compressed.
        let opts = DecodeOptions {
            verify_crc: false,
            max_decompressed: usize::MAX,
        };
        let (batch, _) = RecordBatch::parse(buf, &opts)?;
        let payload = batch.payload(&opts)?;
        // Boundaries from the records' size bounds (one pass), so pieces are
        // even: the 61-byte batch header and the builder's own per-append
        // bound would otherwise cut small records one per batch.
        let mut sizes = Vec::with_capacity(self.count);
        for rec in batch.records(&payload)? {
            let rec = rec?;
            let hdrs: usize = rec
                .headers
                .iter()
                .map(|h| 10 + h.key.len() + h.value.map_or(0, |v| v.len()))
                .sum();
            sizes.push(
                36 + rec.key.map_or(0, |k| k.len()) + rec.value.map_or(0, |v| v.len()) + hdrs,
            );
        }
        let budget = max_bytes
            .min(sizes.iter().sum::<usize>().div_ceil(2))
            .max(1);
        let (compression, level, txn) = (self.compression, self.level, self.transactional);
        let new_piece = || {
            // Buffer sized for the piece; no capacity check on these appends
            // (the boundaries were decided above).
            let mut p =
                ProducerRecordBatch::new(compression, level, budget + 61).with_transactional(txn);
            p.capacity = usize::MAX;
            p
        };
        let mut out = Vec::new();
        let mut cur = new_piece();
        let mut cur_bytes = 0usize;
        let mut headers: Vec<(&str, Option<&[u8]>)> = Vec::new();
        for (rec, size) in batch.records(&payload)?.zip(sizes) {
            let rec = rec?;
            if cur.count > 0 && cur_bytes + size > budget {
                out.push(std::mem::replace(&mut cur, new_piece()));
                cur_bytes = 0;
            }
            headers.clear();
            headers.extend(rec.headers.iter().map(|h| (h.key, h.value)));
            let r = RecordRef {
                timestamp_ms: rec.timestamp,
                key: rec.key,
                value: rec.value,
                headers: &headers,
            };
            if cur.try_append(&r).is_none() {
                return Err(Error::State {
                    detail: "a batch refused a record during a split".into(),
                });
            }
            cur_bytes += size;
        }
        if cur.count > 0 {
            out.push(cur);
        }
        if out.iter().map(|b| b.count).sum::<usize>() != self.count {
            return Err(Error::State {
                detail: "split lost or added records".into(),
            });
        }
        // The pieces are sealed batches: capacity only matters for appends.
        for p in out.iter_mut() {
            p.capacity = max_bytes;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokafka_protocol::record::RecordBatch;

    /// The deferred first encode (run by the runner without the producer
    /// lock) gives the bytes a direct encode would, and later encodes (a
    /// retry) reuse them.
    #[test]
    fn deferred_encode_matches_a_direct_one() {
        let fields = ProducerFields {
            producer_id: 7,
            producer_epoch: 1,
            base_sequence: 3,
        };
        let r = RecordRef {
            timestamp_ms: 1000,
            key: Some(b"k"),
            value: Some(b"value"),
            headers: &[],
        };
        let mut direct = ProducerRecordBatch::new(Compression::Lz4, None, 16_384);
        let mut later = ProducerRecordBatch::new(Compression::Lz4, None, 16_384);
        for _ in 0..50 {
            direct.try_append(&r).unwrap();
            later.try_append(&r).unwrap();
        }
        let want = direct.encode(fields).unwrap();
        let job = later.encode_later(fields).expect("a job for a fresh batch");
        assert!(later.encode_later(fields).is_none(), "one job per batch");
        let got = job().unwrap();
        assert_eq!(got, want);
        assert_eq!(later.encode(fields).unwrap(), want);
        // A split after a deferred encode reads the records back.
        assert!(later.split_records(200).unwrap().len() >= 2);
    }

    /// A full-size batch builds in the buffer the last one gave back, once
    /// neither that batch nor a request holds its bytes (whichever lets go
    /// last), and the records it writes there are its own (the buffer was
    /// emptied).
    #[test]
    fn a_full_size_batch_reuses_the_last_sent_batchs_buffer() {
        let pool = Arc::new(BufferPool::new(4096, 1 << 20));
        let r = |v: &'static [u8]| RecordRef {
            timestamp_ms: 1,
            key: None,
            value: Some(v),
            headers: &[],
        };
        let mut first = ProducerRecordBatch::new(Compression::None, None, 4096);
        first.reserve_total(4096, &pool);
        while first.try_append(&r(b"first")).is_some() {}
        let request = first.encode(ProducerFields::NONE).unwrap();
        let at = request.as_ptr();
        drop(first);
        assert_eq!(pool.kept_bytes(), 0, "a request still holds the bytes");
        drop(request);
        assert!(pool.kept_bytes() >= 4096, "the request let go last");

        let mut second = ProducerRecordBatch::new(Compression::None, None, 4096);
        second.reserve_total(4096, &pool);
        second.try_append(&r(b"second")).unwrap();
        let job = second.encode_later(ProducerFields::NONE).unwrap();
        let bytes = job().unwrap();
        assert_eq!(bytes.as_ptr(), at, "the first batch's buffer");
        drop(bytes);
        assert_eq!(pool.kept_bytes(), 0, "the job's slot still holds them");
        drop(second);
        assert!(pool.kept_bytes() >= 4096);

        let mut third = ProducerRecordBatch::new(Compression::None, None, 4096);
        third.reserve_total(4096, &pool);
        third.try_append(&r(b"third")).unwrap();
        let bytes = third.encode(ProducerFields::NONE).unwrap();
        assert_eq!(bytes.as_ptr(), at, "the kept buffer");
        let opts = DecodeOptions::default();
        let (batch, _) = RecordBatch::parse(&bytes, &opts).unwrap();
        batch.verify_crc().unwrap();
        let payload = batch.payload(&opts).unwrap();
        let values: Vec<_> = batch
            .records(&payload)
            .unwrap()
            .map(|x| x.unwrap().value.map(<[u8]>::to_vec))
            .collect();
        assert_eq!(values, vec![Some(b"third".to_vec())]);
    }

    /// Until the job ran, an encode is an error, not a silent re-encode.
    #[test]
    fn encode_before_the_job_ran_is_an_error() {
        let mut b = ProducerRecordBatch::new(Compression::None, None, 16_384);
        let r = RecordRef {
            timestamp_ms: 1,
            key: None,
            value: Some(b"v"),
            headers: &[],
        };
        b.try_append(&r).unwrap();
        let _job = b.encode_later(ProducerFields::NONE).unwrap();
        assert!(b.encode(ProducerFields::NONE).is_err());
    }

    #[test]
    fn encode_then_repatch_producer_fields_keeps_crc_valid() {
        let mut b = ProducerRecordBatch::new(Compression::Lz4, None, 16_384);
        let hdr = [("h", Some(&b"x"[..]))];
        let r = RecordRef {
            timestamp_ms: 1000,
            key: Some(b"k"),
            value: Some(b"value"),
            headers: &hdr,
        };
        assert!(b.try_append(&r).is_some());
        assert!(b.try_append(&r).is_some());
        let first = b
            .encode(ProducerFields {
                producer_id: 5,
                producer_epoch: 0,
                base_sequence: 0,
            })
            .unwrap();
        let second = b
            .encode(ProducerFields {
                producer_id: 5,
                producer_epoch: 1,
                base_sequence: 7,
            })
            .unwrap();
        assert_ne!(first, second);
        let opts = Default::default();
        for bytes in [&first, &second] {
            let (batch, _) = RecordBatch::parse(bytes, &opts).unwrap();
            assert_eq!(batch.header.records_count, 2);
        }
        let (batch, _) = RecordBatch::parse(&second, &opts).unwrap();
        assert_eq!(batch.header.producer_epoch, 1);
        assert_eq!(batch.header.base_sequence, 7);
    }

    #[test]
    fn capacity_closes_the_batch_but_first_record_always_fits() {
        let mut b = ProducerRecordBatch::new(Compression::None, None, 100);
        let big = vec![0u8; 500];
        let r = RecordRef {
            timestamp_ms: 0,
            key: None,
            value: Some(&big),
            headers: &[],
        };
        assert!(
            b.try_append(&r).is_some(),
            "first record goes in whatever its size"
        );
        assert!(b.try_append(&r).is_none());
    }

    #[test]
    fn split_keeps_records_in_order_with_timestamps_keys_and_headers() {
        for codec in [Compression::None, Compression::Lz4] {
            let mut b = ProducerRecordBatch::new(codec, None, 1 << 20);
            let vals: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 100]).collect();
            let hdr = [("h", Some(&b"x"[..]))];
            for (i, v) in vals.iter().enumerate() {
                let key = [i as u8];
                let r = RecordRef {
                    timestamp_ms: 1000 + i as i64,
                    key: Some(&key),
                    value: Some(v),
                    headers: &hdr,
                };
                assert!(b.try_append(&r).is_some());
            }
            b.encode(ProducerFields {
                producer_id: 3,
                producer_epoch: 0,
                base_sequence: 0,
            })
            .unwrap();
            let mut parts = b.split(1 << 20).unwrap();
            let counts: Vec<usize> = parts.iter().map(|p| p.record_count()).collect();
            assert_eq!(counts, vec![5, 5], "equal records split in halves");
            let mut seen = Vec::new();
            for p in parts.iter_mut() {
                assert!(p.record_count() >= 1);
                let bytes = p
                    .encode(ProducerFields {
                        producer_id: 3,
                        producer_epoch: 0,
                        base_sequence: 0,
                    })
                    .unwrap();
                let opts = Default::default();
                let (rb, _) = RecordBatch::parse(&bytes, &opts).unwrap();
                rb.decode_each(&opts, |r| {
                    assert_eq!(r.headers.len(), 1);
                    seen.push((
                        r.timestamp,
                        r.key.unwrap().to_vec(),
                        r.value.unwrap().to_vec(),
                    ));
                    Ok(())
                })
                .unwrap();
            }
            let want: Vec<_> = vals
                .iter()
                .enumerate()
                .map(|(i, v)| (1000 + i as i64, vec![i as u8], v.clone()))
                .collect();
            assert_eq!(seen, want, "{codec:?}");
        }
    }

    #[test]
    fn split_of_a_large_record_and_small_ones_isolates_the_large_one() {
        let mut b = ProducerRecordBatch::new(Compression::None, None, 1 << 20);
        let big = vec![7u8; 1000];
        for v in [&b"a"[..], &big[..], &b"c"[..]] {
            assert!(b
                .try_append(&RecordRef {
                    timestamp_ms: 0,
                    key: None,
                    value: Some(v),
                    headers: &[]
                })
                .is_some());
        }
        b.encode(ProducerFields::NONE).unwrap();
        let parts = b.split(1 << 20).unwrap();
        let counts: Vec<usize> = parts.iter().map(|p| p.record_count()).collect();
        assert_eq!(counts, vec![1, 1, 1]);
        let mut b = ProducerRecordBatch::new(Compression::None, None, 1 << 20);
        for _ in 0..8 {
            assert!(b
                .try_append(&RecordRef {
                    timestamp_ms: 0,
                    key: None,
                    value: Some(&big[..100]),
                    headers: &[]
                })
                .is_some());
        }
        b.encode(ProducerFields::NONE).unwrap();
        let counts: Vec<usize> = b
            .split(300)
            .unwrap()
            .iter()
            .map(|p| p.record_count())
            .collect();
        assert_eq!(
            counts,
            vec![2, 2, 2, 2],
            "max_bytes caps the pieces below half"
        );
    }
}
