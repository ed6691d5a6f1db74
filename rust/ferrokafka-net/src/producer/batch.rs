//! The producer's batch: the protocol crate's `RecordBatchBuilder` plus what
//! the accumulator and sender need around it (capacity, re-encoding with new
//! producer fields on retry).

use bytes::{Bytes, BytesMut};
use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::record::{Header, RecordBatchBuilder};

use crate::error::Error;
use crate::producer::accumulator::{BatchBuilder, RecordRef};
use crate::producer::sender::{EncodableBatch, ProducerFields};

/// RecordBatch v2 header layout (Kafka's `DefaultRecordBatch`): the CRC at
/// 17..21 covers everything from the attributes (21) to the end, including
/// producer id (43..51), epoch (51..53) and base sequence (53..57).
const CRC_OFFSET: usize = 17;
const CRC_START: usize = 21;
const PRODUCER_ID_OFFSET: usize = 43;

pub struct ProducerRecordBatch {
    builder: Option<RecordBatchBuilder>,
    /// Set at first encode; later encodes only patch the producer fields.
    finished: Option<BytesMut>,
    finished_fields: ProducerFields,
    capacity: usize,
    count: usize,
    size: usize,
}

impl ProducerRecordBatch {
    pub fn new(compression: Compression, level: Option<i32>, capacity: usize) -> Self {
        ProducerRecordBatch {
            builder: Some(RecordBatchBuilder::with_capacity(compression, capacity.min(1 << 20)).compression_level(level)),
            finished: None,
            finished_fields: ProducerFields::NONE,
            capacity,
            count: 0,
            size: 61,
        }
    }
}

/// Upper bound of a record's encoded size inside a batch.
pub fn record_size_upper_bound(r: &RecordRef<'_>) -> usize {
    // length, attributes, timestamp delta, offset delta, key/value lengths,
    // header count: at most 5 + 1 + 10 + 5 + 5 + 5 + 5 bytes of varints.
    36 + r.key.map_or(0, |k| k.len())
        + r.value.map_or(0, |v| v.len())
        + r.headers.iter().map(|(k, v)| 10 + k.len() + v.map_or(0, |v| v.len())).sum::<usize>()
}

impl BatchBuilder for ProducerRecordBatch {
    fn try_append(&mut self, r: &RecordRef<'_>) -> Option<usize> {
        let builder = self.builder.as_mut()?;
        let est = record_size_upper_bound(r);
        if self.count > 0 && builder.size_in_bytes() + est > self.capacity {
            return None;
        }
        let before = builder.size_in_bytes();
        let headers: Vec<Header<'_>> = r.headers.iter().map(|(k, v)| Header { key: k, value: *v }).collect();
        builder.append(r.timestamp_ms, r.key, r.value, &headers).ok()?;
        self.count += 1;
        self.size = builder.size_in_bytes();
        Some(self.size - before)
    }

    fn size_bytes(&self) -> usize {
        self.size
    }

    fn record_count(&self) -> usize {
        self.count
    }
}

impl EncodableBatch for ProducerRecordBatch {
    fn encode(&mut self, p: ProducerFields) -> Result<Bytes, Error> {
        if let Some(b) = self.builder.take() {
            let b = b.producer(p.producer_id, p.producer_epoch, p.base_sequence);
            self.finished = Some(b.finish()?);
            self.finished_fields = p;
        }
        let buf = self.finished.as_mut().ok_or_else(|| Error::State { detail: "batch was never built".into() })?;
        if self.finished_fields != p {
            // Retry after an epoch bump: same records, new producer fields;
            // rewrite them and the CRC in place instead of re-encoding.
            buf[PRODUCER_ID_OFFSET..PRODUCER_ID_OFFSET + 8].copy_from_slice(&p.producer_id.to_be_bytes());
            buf[PRODUCER_ID_OFFSET + 8..PRODUCER_ID_OFFSET + 10].copy_from_slice(&p.producer_epoch.to_be_bytes());
            buf[PRODUCER_ID_OFFSET + 10..PRODUCER_ID_OFFSET + 14].copy_from_slice(&p.base_sequence.to_be_bytes());
            let crc = crc32c_of(&buf[CRC_START..]);
            buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            self.finished_fields = p;
        }
        // Bytes::copy_from_slice keeps the original for a later re-patch;
        // batches are small next to the cost of a request.
        Ok(Bytes::copy_from_slice(buf))
    }
}

fn crc32c_of(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrokafka_protocol::record::RecordBatch;

    #[test]
    fn encode_then_repatch_producer_fields_keeps_crc_valid() {
        let mut b = ProducerRecordBatch::new(Compression::Lz4, None, 16_384);
        let hdr = [("h", Some(&b"x"[..]))];
        let r = RecordRef { timestamp_ms: 1000, key: Some(b"k"), value: Some(b"value"), headers: &hdr };
        assert!(b.try_append(&r).is_some());
        assert!(b.try_append(&r).is_some());
        let first = b.encode(ProducerFields { producer_id: 5, producer_epoch: 0, base_sequence: 0 }).unwrap();
        let second = b.encode(ProducerFields { producer_id: 5, producer_epoch: 1, base_sequence: 7 }).unwrap();
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
        let r = RecordRef { timestamp_ms: 0, key: None, value: Some(&big), headers: &[] };
        assert!(b.try_append(&r).is_some(), "first record goes in whatever its size");
        assert!(b.try_append(&r).is_none());
    }
}
