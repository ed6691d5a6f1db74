//! Kafka record formats: RecordBatch v2 (encode + decode, the hot path) and
//! legacy MessageSet v0/v1 (decode only, for old brokers and old log
//! segments).
//!
//! Decoding borrows: an uncompressed batch yields records whose keys, values
//! and headers are slices of the input; a compressed one is inflated once into
//! a buffer the caller holds, and records borrow from that.
//!
//! A Fetch response's `records` blob is a run of batches whose last one is
//! often cut short by the broker (it fills up to `max_bytes`); [`Batches`]
//! stops there cleanly and reports it via [`Batches::truncated`].

pub mod crc;
mod legacy;
mod v2;

pub use legacy::{encode_legacy_message, LegacyMessage, LEGACY_MAGIC_V0, LEGACY_MAGIC_V1};
pub use v2::{
    control_batch, BatchHeader, ControlRecord, ControlRecordType, RecordBatch, RecordBatchBuilder,
    RecordIter, RecordVisitor, RunRecord, BATCH_HEADER_SIZE, MAGIC_V2, MIN_RECORD_SIZE,
    RUN_RECORD_OVERHEAD,
};

use crate::compression::DEFAULT_MAX_DECOMPRESSED;
use crate::error::{ProtocolError, Result};
use crate::primitives::Reader;

/// Where a record's timestamp came from (batch attribute bit 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimestampType {
    /// Magic 0 messages carry no timestamp.
    NoTimestamp,
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    /// The Java `TimestampType.id`: -1, 0, 1.
    pub fn id(self) -> i8 {
        match self {
            TimestampType::NoTimestamp => -1,
            TimestampType::CreateTime => 0,
            TimestampType::LogAppendTime => 1,
        }
    }
}

/// One record header as it sits in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    pub key: &'a str,
    pub value: Option<&'a [u8]>,
}

/// A decoded record borrowing from the batch (or its decompressed payload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub offset: i64,
    pub timestamp: i64,
    /// Per-record attributes byte; unused by Kafka today, kept for fidelity.
    pub attributes: i8,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<Header<'a>>,
}

/// A record that owns its bytes: what legacy decoding produces (inner message
/// sets of old wrappers are inflated into temporaries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Knobs of the decoders.
#[derive(Clone, Copy, Debug)]
pub struct DecodeOptions {
    /// Check the batch CRC (CRC32C for v2, CRC32 for v0/v1). Java consumers
    /// default to `check.crcs=true`; turning it off is for tools only.
    pub verify_crc: bool,
    /// Cap on the size of one decompressed payload.
    pub max_decompressed: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            verify_crc: true,
            max_decompressed: DEFAULT_MAX_DECOMPRESSED,
        }
    }
}

/// One entry of a records blob: a v2 batch or a legacy (possibly wrapper) message.
#[derive(Clone, Debug)]
pub enum Batch<'a> {
    V2(RecordBatch<'a>),
    Legacy(LegacyMessage<'a>),
}

impl Batch<'_> {
    pub fn magic(&self) -> i8 {
        match self {
            Batch::V2(_) => MAGIC_V2,
            Batch::Legacy(m) => m.magic,
        }
    }
}

/// Offset of the magic byte, which both the v2 batch and the legacy message
/// put in the same place (after offset, length and epoch-or-crc).
const MAGIC_OFFSET: usize = 16;
/// The 8-byte offset and 4-byte length every entry starts with.
const LOG_OVERHEAD: usize = 12;

/// Iterator over the batches of a records blob (Fetch response, log segment).
pub struct Batches<'a> {
    rest: &'a [u8],
    opts: DecodeOptions,
    truncated: bool,
    failed: bool,
}

impl<'a> Batches<'a> {
    pub fn new(blob: &'a [u8], opts: DecodeOptions) -> Self {
        Batches {
            rest: blob,
            opts,
            truncated: false,
            failed: false,
        }
    }

    /// True once iteration ended on an incomplete trailing entry (which the
    /// broker sends when a batch does not fit in the fetch size). The bytes
    /// are simply ignored, as the Java consumer does.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// Bytes not consumed (the truncated tail, if any).
    pub fn remaining(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<Batch<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        if self.rest.len() < LOG_OVERHEAD {
            self.truncated = true;
            return None;
        }
        let mut r = Reader::new(self.rest);
        let _offset = r.i64().ok()?;
        let size = match r.i32() {
            Ok(n) if n >= 0 => n as usize,
            Ok(n) => {
                self.failed = true;
                return Some(Err(ProtocolError::invalid("batch length", format!("{n}"))));
            }
            Err(e) => return Some(Err(e)),
        };
        let total = LOG_OVERHEAD.saturating_add(size);
        if total > self.rest.len() {
            self.truncated = true;
            return None;
        }
        let (entry, rest) = self.rest.split_at(total);
        self.rest = rest;
        let Some(&magic) = entry.get(MAGIC_OFFSET) else {
            self.failed = true;
            return Some(Err(ProtocolError::truncated(
                "record batch",
                MAGIC_OFFSET + 1,
                entry.len(),
            )));
        };
        let out = match magic as i8 {
            MAGIC_V2 => RecordBatch::parse_exact(entry, &self.opts).map(Batch::V2),
            LEGACY_MAGIC_V0 | LEGACY_MAGIC_V1 => {
                LegacyMessage::parse_exact(entry, &self.opts).map(Batch::Legacy)
            }
            m => Err(ProtocolError::Unsupported {
                what: "record batch magic",
                detail: format!("{m}"),
            }),
        };
        if out.is_err() {
            self.failed = true;
        }
        Some(out)
    }
}

/// Decode every record of a records blob into owned records, with batch
/// bookkeeping (control batches are skipped unless `include_control`).
/// Returns the records and whether a truncated tail was dropped.
pub fn decode_all_owned(
    blob: &[u8],
    opts: DecodeOptions,
    include_control: bool,
) -> Result<(Vec<OwnedRecord>, bool)> {
    let mut out = Vec::new();
    let mut batches = Batches::new(blob, opts);
    for b in batches.by_ref() {
        match b? {
            Batch::V2(batch) => {
                if batch.header.is_control() && !include_control {
                    continue;
                }
                let payload = batch.payload(&opts)?;
                let tt = batch.header.timestamp_type();
                for rec in batch.records(&payload)? {
                    let rec = rec?;
                    out.push(OwnedRecord {
                        offset: rec.offset,
                        timestamp: rec.timestamp,
                        timestamp_type: tt,
                        key: rec.key.map(<[u8]>::to_vec),
                        value: rec.value.map(<[u8]>::to_vec),
                        headers: rec
                            .headers
                            .iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect(),
                    });
                }
            }
            Batch::Legacy(m) => m.decode_into(&opts, &mut out)?,
        }
    }
    Ok((out, batches.truncated()))
}
