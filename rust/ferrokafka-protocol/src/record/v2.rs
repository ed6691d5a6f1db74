//! RecordBatch v2 (magic 2), the format of every Kafka since 0.11.
//!
//! ```text
//! offset  field                    type
//!      0  baseOffset               int64
//!      8  batchLength              int32   (bytes after this field)
//!     12  partitionLeaderEpoch     int32
//!     16  magic                    int8    (= 2)
//!     17  crc                      uint32  (CRC32C of bytes 21..end)
//!     21  attributes               int16
//!     23  lastOffsetDelta          int32
//!     27  baseTimestamp            int64
//!     35  maxTimestamp             int64
//!     43  producerId               int64
//!     51  producerEpoch            int16
//!     53  baseSequence             int32
//!     57  recordsCount             int32
//!     61  records...               (compressed as a whole when compression != 0)
//! ```

use super::{DecodeOptions, Header, Record, TimestampType};
use crate::compression::{self, Compression};
use crate::error::{ProtocolError, Result};
use crate::primitives::{
    put_varint, stamp_two_byte_uvarint, stamp_uvarlong, varint_len, varlong_len, zigzag32,
    zigzag64, Reader,
};
use bytes::{BufMut, BytesMut};
use std::borrow::Cow;

mod records;
mod run;
pub use records::{RecordIter, RecordVisitor};
pub use run::{RunRecord, RUN_RECORD_OVERHEAD};

pub const MAGIC_V2: i8 = 2;
pub const BATCH_HEADER_SIZE: usize = 61;
const CRC_OFFSET: usize = 17;
const ATTRIBUTES_OFFSET: usize = 21;
/// Smallest possible record: length, attributes, timestamp delta, offset
/// delta, key length, value length, header count, one byte each.
pub const MIN_RECORD_SIZE: usize = 7;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_BIT: i16 = 0x08;
const TRANSACTIONAL_BIT: i16 = 0x10;
const CONTROL_BIT: i16 = 0x20;
const DELETE_HORIZON_BIT: i16 = 0x40;

/// The fixed 61-byte header of a v2 batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id((self.attributes & COMPRESSION_MASK) as u8)
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_BIT != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_BIT != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_BIT != 0
    }
    /// Set when the log cleaner rewrote `baseTimestamp` as the delete horizon.
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes & DELETE_HORIZON_BIT != 0
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset.wrapping_add(self.last_offset_delta as i64)
    }
    /// Offset the next fetch should start at.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }
    /// Total bytes of the batch on the wire.
    pub fn size(&self) -> usize {
        12 + self.batch_length as usize
    }
}

/// A parsed v2 batch: its header and a borrowed (possibly compressed) records
/// section.
#[derive(Clone, Debug)]
pub struct RecordBatch<'a> {
    pub header: BatchHeader,
    /// The records section as stored (compressed if the batch is).
    pub records_data: &'a [u8],
    /// What the stored CRC covers (attributes to the end), for
    /// `verify_crc` after a parse that skipped it.
    crc_covered: &'a [u8],
}

impl<'a> RecordBatch<'a> {
    /// Parse one batch from the front of `input`, returning it and the bytes
    /// consumed. Errors on truncation; use [`super::Batches`] to treat a
    /// truncated tail as the end of a blob instead.
    pub fn parse(input: &'a [u8], opts: &DecodeOptions) -> Result<(Self, usize)> {
        if input.len() < 12 {
            return Err(ProtocolError::truncated("record batch", 12, input.len()));
        }
        let len = i32::from_be_bytes([input[8], input[9], input[10], input[11]]);
        if len < 0 {
            return Err(ProtocolError::invalid("batch length", format!("{len}")));
        }
        let total = 12usize + len as usize;
        if total > input.len() {
            return Err(ProtocolError::truncated("record batch", total, input.len()));
        }
        Ok((Self::parse_exact(&input[..total], opts)?, total))
    }

    /// Parse a buffer that holds exactly one batch.
    pub fn parse_exact(input: &'a [u8], opts: &DecodeOptions) -> Result<Self> {
        if input.len() < BATCH_HEADER_SIZE {
            return Err(ProtocolError::truncated(
                "record batch header",
                BATCH_HEADER_SIZE,
                input.len(),
            ));
        }
        let mut r = Reader::new(input);
        let header = BatchHeader {
            base_offset: r.i64()?,
            batch_length: r.i32()?,
            partition_leader_epoch: r.i32()?,
            magic: r.i8()?,
            crc: r.u32()?,
            attributes: r.i16()?,
            last_offset_delta: r.i32()?,
            base_timestamp: r.i64()?,
            max_timestamp: r.i64()?,
            producer_id: r.i64()?,
            producer_epoch: r.i16()?,
            base_sequence: r.i32()?,
            records_count: r.i32()?,
        };
        if header.magic != MAGIC_V2 {
            return Err(ProtocolError::invalid(
                "record batch magic",
                format!("{} (expected 2)", header.magic),
            ));
        }
        if header.batch_length < 0 || 12 + header.batch_length as usize != input.len() {
            return Err(ProtocolError::invalid(
                "batch length",
                format!(
                    "{} does not match the {} bytes given",
                    header.batch_length,
                    input.len()
                ),
            ));
        }
        if header.records_count < 0 {
            return Err(ProtocolError::invalid(
                "records count",
                format!("{}", header.records_count),
            ));
        }
        let batch = RecordBatch {
            header,
            records_data: &input[BATCH_HEADER_SIZE..],
            crc_covered: &input[ATTRIBUTES_OFFSET..],
        };
        if opts.verify_crc {
            batch.verify_crc()?;
        }
        // Unknown codec ids are refused here rather than at first use.
        batch.header.compression()?;
        Ok(batch)
    }

    /// Check the stored CRC32C against the batch's bytes: what a parse with
    /// `verify_crc` does, for a reader that parsed without it to check each
    /// batch just before decoding it, while its bytes are in cache.
    pub fn verify_crc(&self) -> Result<()> {
        let computed = super::crc::checksum(self.crc_covered);
        if computed != self.header.crc {
            return Err(ProtocolError::CrcMismatch {
                stored: self.header.crc,
                computed,
            });
        }
        Ok(())
    }

    /// The uncompressed records section: borrowed when the batch is not
    /// compressed, otherwise inflated (bounded by `opts.max_decompressed`).
    pub fn payload(&self, opts: &DecodeOptions) -> Result<Cow<'a, [u8]>> {
        match self.header.compression()? {
            Compression::None => Ok(Cow::Borrowed(self.records_data)),
            c => Ok(Cow::Owned(compression::decompress(
                c,
                self.records_data,
                opts.max_decompressed,
            )?)),
        }
    }

    /// Iterate the records of `payload` (from [`Self::payload`]).
    pub fn records<'b>(&self, payload: &'b [u8]) -> Result<RecordIter<'b>> {
        let count = self.header.records_count as usize;
        if count > payload.len() / MIN_RECORD_SIZE {
            return Err(ProtocolError::TooLarge {
                what: "records count",
                size: count,
                max: payload.len() / MIN_RECORD_SIZE,
            });
        }
        let log_append = self.header.timestamp_type() == TimestampType::LogAppendTime;
        Ok(RecordIter::new(
            payload,
            count,
            self.header.base_offset,
            self.header.base_timestamp,
            log_append.then_some(self.header.max_timestamp),
        ))
    }

    /// Decode every record into `out` (convenience over payload + records).
    pub fn decode_each<F>(&self, opts: &DecodeOptions, mut f: F) -> Result<()>
    where
        F: FnMut(Record<'_>) -> Result<()>,
    {
        let payload = self.payload(opts)?;
        for rec in self.records(&payload)? {
            f(rec?)?;
        }
        Ok(())
    }

    /// The marker of a control batch (its single record's key).
    pub fn control_record(&self, opts: &DecodeOptions) -> Result<Option<ControlRecord>> {
        if !self.header.is_control() {
            return Ok(None);
        }
        let payload = self.payload(opts)?;
        let mut it = self.records(&payload)?;
        match it.next() {
            Some(rec) => {
                let rec = rec?;
                let key = rec
                    .key
                    .ok_or_else(|| ProtocolError::invalid("control record", "null key"))?;
                Ok(Some(ControlRecord::parse(key)?))
            }
            None => Err(ProtocolError::invalid("control batch", "no records")),
        }
    }
}

/// Commit/abort marker written by the transaction coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlRecordType {
    Abort,
    Commit,
    /// Types added by later Kafka versions; the Java consumer ignores them too.
    Unknown(i16),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlRecord {
    pub version: i16,
    pub kind: ControlRecordType,
}

impl ControlRecord {
    /// Parse a control record key: `version: int16, type: int16`.
    pub fn parse(key: &[u8]) -> Result<Self> {
        let mut r = Reader::new(key);
        let version = r.i16()?;
        let kind = match r.i16()? {
            0 => ControlRecordType::Abort,
            1 => ControlRecordType::Commit,
            n => ControlRecordType::Unknown(n),
        };
        Ok(ControlRecord { version, kind })
    }

    pub fn key_bytes(&self) -> [u8; 4] {
        let t: i16 = match self.kind {
            ControlRecordType::Abort => 0,
            ControlRecordType::Commit => 1,
            ControlRecordType::Unknown(n) => n,
        };
        let mut out = [0u8; 4];
        out[..2].copy_from_slice(&self.version.to_be_bytes());
        out[2..].copy_from_slice(&t.to_be_bytes());
        out
    }
}

// ---------------------------------------------------------------- encoding

/// Room `append` needs past a record's end for its fixed-size stamps.
const STAMP_SLACK: usize = 32;

/// A header-less record's body besides its key and value bytes: one byte
/// of attributes and of header count, and its four varints (timestamp
/// delta, offset delta, key and value lengths) at one byte each at least,
/// at most 10, 5, 5 and 5.
const MIN_BODY_OVERHEAD: usize = 6;
const MAX_BODY_OVERHEAD: usize = 27;

/// Key plus value bytes for which a header-less record's length prefix is
/// two bytes whatever its deltas: the body is 64 to 8191 bytes, whose
/// zigzagged varint is two bytes (`write_two_byte_length_record`).
const TWO_BYTE_LENGTH_PAYLOAD: std::ops::RangeInclusive<usize> =
    (64 - MIN_BODY_OVERHEAD)..=(8191 - MAX_BODY_OVERHEAD);

/// Builds one v2 batch, as a producer does: append records, then `finish`.
///
/// Records are written straight into the output buffer after a reserved
/// header; `finish` fills the header in and computes the CRC in place, so an
/// uncompressed batch is built with one copy of each key and value.
#[derive(Debug)]
pub struct RecordBatchBuilder {
    // A Vec rather than the BytesMut we hand out: its appends are cheaper,
    // and the two convert into each other without copying.
    buf: Vec<u8>,
    compression: Compression,
    level: Option<i32>,
    base_offset: i64,
    partition_leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    control: bool,
    log_append_time: bool,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    count: i32,
    /// CRC32C of `buf[BATCH_HEADER_SIZE..crc_upto]`, kept up as records are
    /// appended (uncompressed batches only), so `finish` checksums the few
    /// bytes since and the header instead of the whole batch.
    records_crc: u32,
    crc_upto: usize,
}

/// Appended bytes checksummed at a time: small enough to still be in the
/// appending core's L1 cache, large enough for the CRC's three-stream path.
/// Checksummed at `finish` instead, a 1 MB batch has left that core's caches
/// (or was written by another thread): perf of the ceiling run measured 21 ns
/// a 100 B record for that cold pass, against about 4 while hot.
const CRC_CHUNK: usize = 4096;

impl RecordBatchBuilder {
    pub fn new(compression: Compression) -> Self {
        Self::with_capacity(compression, 16 * 1024)
    }

    pub fn with_capacity(compression: Compression, capacity: usize) -> Self {
        Self::with_buffer(
            compression,
            Vec::with_capacity(capacity.max(BATCH_HEADER_SIZE) + STAMP_SLACK),
        )
    }

    /// Build into `buf` (cleared first), so a producer can recycle the
    /// buffers of sent batches instead of allocating (and page-faulting in)
    /// a fresh one per batch.
    pub fn with_buffer(compression: Compression, mut buf: Vec<u8>) -> Self {
        buf.clear();
        buf.resize(BATCH_HEADER_SIZE, 0);
        RecordBatchBuilder {
            buf,
            compression,
            level: None,
            base_offset: 0,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            transactional: false,
            control: false,
            log_append_time: false,
            base_timestamp: None,
            max_timestamp: -1,
            count: 0,
            records_crc: 0,
            crc_upto: BATCH_HEADER_SIZE,
        }
    }

    /// Room for `additional` more bytes without regrowing (and copying) the
    /// buffer as records arrive.
    pub fn reserve(&mut self, additional: usize) {
        self.buf.reserve(additional + STAMP_SLACK);
    }

    pub fn compression_level(mut self, level: Option<i32>) -> Self {
        self.level = level;
        self
    }
    pub fn base_offset(mut self, v: i64) -> Self {
        self.base_offset = v;
        self
    }
    pub fn partition_leader_epoch(mut self, v: i32) -> Self {
        self.partition_leader_epoch = v;
        self
    }
    /// Idempotent/transactional producer state: id, epoch, first sequence.
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }
    pub fn transactional(mut self, v: bool) -> Self {
        self.transactional = v;
        self
    }
    pub fn control(mut self, v: bool) -> Self {
        self.control = v;
        self
    }
    pub fn log_append_time(mut self, v: bool) -> Self {
        self.log_append_time = v;
        self
    }

    pub fn len(&self) -> i32 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Bytes written so far (before compression), header included; what a
    /// producer compares with `batch.size`.
    pub fn size_in_bytes(&self) -> usize {
        self.buf.len()
    }

    /// Append a record with the next offset delta.
    #[inline]
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Result<()> {
        self.append_inlined(timestamp, key, value, headers)
    }

    /// `append`, inlined into its caller: the producer's per-record loop
    /// (ferrokafka-net's `try_append`). As a call there, passing its
    /// arguments, saving registers and restoring them cost about a tenth
    /// of the calling thread's instructions per record, and the compiler
    /// could not see that the loop's records have no headers (callgrind of
    /// `send_batch`, issue 17).
    #[inline(always)]
    pub fn append_inlined(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) -> Result<()> {
        let base_ts = *self.base_timestamp.get_or_insert(timestamp);
        let ts_delta = timestamp.wrapping_sub(base_ts);
        let offset_delta = self.count;
        if offset_delta == i32::MAX {
            return Err(ProtocolError::TooLarge {
                what: "records in batch",
                size: i32::MAX as usize,
                max: i32::MAX as usize - 1,
            });
        }
        if headers.is_empty() {
            let payload = key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len);
            if TWO_BYTE_LENGTH_PAYLOAD.contains(&payload) {
                // SAFETY: no headers, and a payload in the range.
                unsafe {
                    self.write_two_byte_length_record(ts_delta, offset_delta, key, value, payload)
                };
                self.after_append(timestamp);
                return Ok(());
            }
        }
        let field_len = |b: Option<&[u8]>| -> Result<usize> {
            match b {
                None => Ok(1),
                Some(b) => {
                    let n = i32::try_from(b.len()).map_err(|_| ProtocolError::TooLarge {
                        what: "record field",
                        size: b.len(),
                        max: i32::MAX as usize,
                    })?;
                    Ok(varint_len(n) + b.len())
                }
            }
        };
        let mut body = 1
            + varlong_len(ts_delta)
            + varint_len(offset_delta)
            + field_len(key)?
            + field_len(value)?;
        let n_headers = i32::try_from(headers.len())
            .map_err(|_| ProtocolError::invalid("headers", "too many"))?;
        body += varint_len(n_headers);
        for h in headers {
            body += field_len(Some(h.key.as_bytes()))? + field_len(h.value)?;
        }
        let body_i32 = i32::try_from(body).map_err(|_| ProtocolError::TooLarge {
            what: "record",
            size: body,
            max: i32::MAX as usize,
        })?;

        // The few-byte fields (length, attributes, timestamp delta, offset
        // delta, key and value lengths, header count) are each built in a
        // register and stored as one unaligned word at the write position
        // (`stamp_uvarlong`), which then advances by the field's real
        // length: a `memcpy` call per field cost more than copying the
        // value, and bytes assembled on the stack then copied out stalled
        // on store forwarding (perf, ceiling run). Only the key and value
        // are variable-length copies.
        let total = varint_len(body_i32) + body;
        // A stamp writes up to 10 bytes from a position inside the record,
        // so up to 10 past its end; `with_capacity` and `reserve` include
        // STAMP_SLACK for it, so a batch sized for its records is not
        // regrown for the slack.
        self.buf.reserve(total + STAMP_SLACK);
        let start = self.buf.len();
        // SAFETY: `reserve` made room for `total + STAMP_SLACK` bytes past
        // `start`; every write below stays inside it: each stamp writes at
        // most 10 bytes from a position inside the record (the pieces add
        // up to `total`, checked below in debug), each copy writes inside
        // the record. A stamp's bytes past its field are overwritten by the
        // next piece, or lie past the new length and are never read:
        // `set_len` covers exactly the record.
        unsafe {
            let base = self.buf.as_mut_ptr().add(start);
            let mut p = base;
            p = p.add(stamp_uvarlong(p, zigzag32(body_i32) as u64));
            p = stamp_fields::<false>(p, ts_delta, offset_delta, key, value);
            p = p.add(stamp_uvarlong(p, zigzag32(n_headers) as u64));
            let written = p.offset_from(base) as usize;
            debug_assert!(written <= total);
            self.buf.set_len(start + written);
        }
        let b = &mut self.buf;
        for h in headers {
            put_field(b, Some(h.key.as_bytes()));
            put_field(b, h.value);
        }
        debug_assert_eq!(self.buf.len(), start + total);
        self.after_append(timestamp);
        Ok(())
    }

    /// A record without headers whose length prefix is known to take two
    /// bytes (its key and value add up to `TWO_BYTE_LENGTH_PAYLOAD`): its
    /// fields are written first, two bytes past the write position, and
    /// the length stamped in front once they are. Why: the general path
    /// sizes the body before writing it, a varint length for each of its
    /// five short fields and for the body itself, work the stamps repeat
    /// when they write those fields (callgrind of `send_batch`'s calling
    /// thread: the sizing was ~30 of its ~390 instructions a record, issue
    /// 17). Nearly every record of 58 B to 8 KiB takes this path.
    ///
    /// # Safety
    /// `payload` is the key's and value's lengths summed, inside
    /// `TWO_BYTE_LENGTH_PAYLOAD`, and the record has no headers.
    #[inline(always)]
    unsafe fn write_two_byte_length_record(
        &mut self,
        ts_delta: i64,
        offset_delta: i32,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        payload: usize,
    ) {
        // The record's most: the length, then the body at its longest.
        let most = 2 + payload + MAX_BODY_OVERHEAD;
        self.buf.reserve(most + STAMP_SLACK);
        let start = self.buf.len();
        // SAFETY: room for `most + STAMP_SLACK` bytes past `start`, as
        // `write_two_byte_length_record_at` needs.
        unsafe {
            let base = self.buf.as_mut_ptr().add(start);
            let n = write_two_byte_length_record_at(base, ts_delta, offset_delta, key, value);
            self.buf.set_len(start + n);
        }
    }

    /// What every append ends with: the running CRC over what is now at
    /// least a chunk, the batch's max timestamp, the count.
    #[inline(always)]
    fn after_append(&mut self, timestamp: i64) {
        if self.compression == Compression::None && self.buf.len() - self.crc_upto >= CRC_CHUNK {
            self.checksum_appended();
        }
        if timestamp > self.max_timestamp {
            self.max_timestamp = timestamp;
        }
        self.count += 1;
    }

    /// The running CRC over the bytes appended since it last ran.
    #[inline]
    fn checksum_appended(&mut self) {
        self.records_crc = super::crc::append(self.records_crc, &self.buf[self.crc_upto..]);
        self.crc_upto = self.buf.len();
    }

    /// Write the header (and compress, if asked) and return the finished batch.
    pub fn finish(self) -> Result<BytesMut> {
        // Vec -> Bytes -> BytesMut hands the allocation over; nothing is copied.
        Ok(BytesMut::from(bytes::Bytes::from(self.finish_vec()?)))
    }

    /// `finish`, as the buffer the batch was built in (a producer hands it
    /// back to its pool once no request holds it).
    pub fn finish_vec(mut self) -> Result<Vec<u8>> {
        if self.compression != Compression::None {
            let mut compressed = Vec::with_capacity(self.buf.len() / 2 + 64);
            compression::compress(
                self.compression,
                self.level,
                &self.buf[BATCH_HEADER_SIZE..],
                &mut compressed,
            )?;
            self.buf.truncate(BATCH_HEADER_SIZE);
            self.buf.extend_from_slice(&compressed);
        }
        let total = self.buf.len();
        let batch_length = i32::try_from(total - 12).map_err(|_| ProtocolError::TooLarge {
            what: "record batch",
            size: total,
            max: i32::MAX as usize,
        })?;
        let mut attributes = self.compression as i16;
        if self.log_append_time {
            attributes |= TIMESTAMP_TYPE_BIT;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_BIT;
        }
        if self.control {
            attributes |= CONTROL_BIT;
        }
        // An empty batch still needs sane timestamps; Java uses -1 (NO_TIMESTAMP).
        let base_ts = self.base_timestamp.unwrap_or(-1);
        let last_offset_delta = (self.count - 1).max(0);

        let h = &mut self.buf[..BATCH_HEADER_SIZE];
        h[0..8].copy_from_slice(&self.base_offset.to_be_bytes());
        h[8..12].copy_from_slice(&batch_length.to_be_bytes());
        h[12..16].copy_from_slice(&self.partition_leader_epoch.to_be_bytes());
        h[16] = MAGIC_V2 as u8;
        h[21..23].copy_from_slice(&attributes.to_be_bytes());
        h[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
        h[27..35].copy_from_slice(&base_ts.to_be_bytes());
        h[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        h[43..51].copy_from_slice(&self.producer_id.to_be_bytes());
        h[51..53].copy_from_slice(&self.producer_epoch.to_be_bytes());
        h[53..57].copy_from_slice(&self.base_sequence.to_be_bytes());
        h[57..61].copy_from_slice(&self.count.to_be_bytes());
        let crc = if self.compression == Compression::None {
            // CRC(header fields ++ records) from the records' running CRC:
            // CRC32C is linear, so the two parts combine (record/crc.rs).
            let records = super::crc::append(self.records_crc, &self.buf[self.crc_upto..]);
            let head = super::crc::checksum(&self.buf[ATTRIBUTES_OFFSET..BATCH_HEADER_SIZE]);
            super::crc::combine(head, records, total - BATCH_HEADER_SIZE)
        } else {
            super::crc::checksum(&self.buf[ATTRIBUTES_OFFSET..])
        };
        self.buf[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(self.buf)
    }
}

/// A header-less record whose key and value add up to
/// `TWO_BYTE_LENGTH_PAYLOAD` bytes written at `base`: its fields two bytes
/// past it, then its length (two bytes) in front. Returns its size.
///
/// # Safety
/// `base` must be valid for writes of `2 + payload + MAX_BODY_OVERHEAD +
/// STAMP_SLACK` bytes (`payload`: the key's and value's lengths), which is in
/// that range.
#[inline(always)]
unsafe fn write_two_byte_length_record_at(
    base: *mut u8,
    ts_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> usize {
    // SAFETY: each stamp writes at most 10 bytes from a position inside the
    // record, each copy inside the record; the record is at most `2 +
    // payload + MAX_BODY_OVERHEAD` bytes. The key and value lengths fit an
    // i32 (the payload is below 8 KiB).
    unsafe {
        // The key's and the value's lengths are below 8 KiB (the payload's
        // range): their varints are one or two bytes (`SHORT`).
        let mut p = stamp_fields::<true>(base.add(2), ts_delta, offset_delta, key, value);
        *p = 0; // no headers (a zigzagged 0)
        p = p.add(1);
        let body = p.offset_from(base.add(2)) as usize;
        // The payload's range makes this so: every field at least one
        // byte, and at most MAX_BODY_OVERHEAD bytes besides the payload.
        debug_assert!((64..8192).contains(&body));
        // Positive and below 2^13: zigzagged, below 2^14, two bytes.
        stamp_two_byte_uvarint(base, (body as u32) << 1);
        2 + body
    }
}

/// The varint of a field shorter than 8 KiB, or of None (-1): one or two
/// bytes, stamped without `stamp_uvarlong`'s longer cases. Why: these and
/// the length are three of a short record's five varints; with their
/// ranges known, `send_batch`'s calling thread went from 258.7 to 250.2
/// instructions a record (list) and from 212.5 to 199.5 (pyarrow) of
/// compares and branches (`benches/instructions.py`, session 33).
///
/// # Safety
/// `p` must be valid for writes of two bytes; the field below 8 KiB.
#[inline(always)]
unsafe fn stamp_short_field_tag(p: *mut u8, f: Option<&[u8]>) -> usize {
    let v = match f {
        None => 1,
        Some(b) => (b.len() as u32) << 1,
    };
    debug_assert!(v < 0x4000);
    // SAFETY: as the function's contract says.
    unsafe {
        if v < 0x80 {
            *p = v as u8;
            1
        } else {
            stamp_two_byte_uvarint(p, v);
            2
        }
    }
}

/// A record's fields from its attributes to its value written at `p`
/// (each varint stamped, the key and value copied), returning the position
/// after them: the part both of `append`'s paths write alike. `SHORT`: the
/// key and value are each below 8 KiB (a record of the two-byte length
/// path), so their lengths take the one- and two-byte stamps
/// (`stamp_short_field_tag`).
///
/// # Safety
/// `p` must be valid for writes of the fields' bytes and 10 more; the key
/// and value lengths must fit an i32 (checked when the record was sized),
/// and with `SHORT` be below 8 KiB.
#[inline(always)]
unsafe fn stamp_fields<const SHORT: bool>(
    mut p: *mut u8,
    ts_delta: i64,
    offset_delta: i32,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> *mut u8 {
    // SAFETY: as the function's contract says.
    unsafe {
        *p = 0; // record attributes: unused
        p = p.add(1);
        p = p.add(stamp_uvarlong(p, zigzag64(ts_delta)));
        p = p.add(stamp_uvarlong(p, zigzag32(offset_delta) as u64));
        p = p.add(stamp_field_tag::<SHORT>(p, key));
        if let Some(k) = key {
            std::ptr::copy_nonoverlapping(k.as_ptr(), p, k.len());
            p = p.add(k.len());
        }
        p = p.add(stamp_field_tag::<SHORT>(p, value));
        if let Some(v) = value {
            std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len());
            p = p.add(v.len());
        }
        p
    }
}

/// The zigzagged varint that precedes a nullable field (its length or -1)
/// stamped at `p`; its size. Lengths were checked to fit an i32 when the
/// record was sized.
///
/// # Safety
/// As `stamp_fields`.
#[inline(always)]
unsafe fn stamp_field_tag<const SHORT: bool>(p: *mut u8, f: Option<&[u8]>) -> usize {
    // SAFETY: as the function's contract says.
    unsafe {
        if SHORT {
            return stamp_short_field_tag(p, f);
        }
        let tag = match f {
            None => 1,
            Some(v) => zigzag32(v.len() as i32) as u64,
        };
        stamp_uvarlong(p, tag)
    }
}

#[inline]
fn put_field(b: &mut Vec<u8>, f: Option<&[u8]>) {
    match f {
        None => b.put_u8(1), // zigzag(-1)
        Some(v) => {
            put_varint(b, v.len() as i32);
            b.put_slice(v);
        }
    }
}

/// Build a control batch holding one commit or abort marker, as the
/// transaction coordinator writes it (for tests and tools).
pub fn control_batch(
    marker: ControlRecord,
    base_offset: i64,
    timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
) -> Result<BytesMut> {
    let key = marker.key_bytes();
    // Value: version int16 0, coordinator epoch int32.
    let value = [0u8; 6];
    let mut b = RecordBatchBuilder::new(Compression::None)
        .base_offset(base_offset)
        .producer(producer_id, producer_epoch, -1)
        .transactional(true)
        .control(true);
    b.append(timestamp, Some(&key), Some(&value), &[])?;
    b.finish()
}
