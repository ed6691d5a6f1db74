//! Legacy MessageSet, magic 0 and 1 (Kafka < 0.11), decode only.
//!
//! ```text
//! offset  field        type
//!      0  offset       int64
//!      8  messageSize  int32   (bytes after this field)
//!     12  crc          uint32  (CRC32/IEEE of bytes 16..end)
//!     16  magic        int8    (0 or 1)
//!     17  attributes   int8    (bits 0-2 codec; bit 3 timestamp type, v1)
//!     18  timestamp    int64   (v1 only)
//!         key          bytes   (int32 length, -1 = null)
//!         value        bytes   (for a compressed wrapper: the inner message set)
//! ```
//!
//! A compressed message is a *wrapper*: its value inflates to a message set
//! of plain messages. In v1 the inner offsets are relative (0..n-1) and the
//! wrapper carries the absolute offset of the *last* inner message.

use super::{DecodeOptions, OwnedRecord, TimestampType};
use crate::compression::{self, Compression};
use crate::error::{ProtocolError, Result};
use crate::primitives::Reader;

pub const LEGACY_MAGIC_V0: i8 = 0;
pub const LEGACY_MAGIC_V1: i8 = 1;

const TIMESTAMP_TYPE_BIT: i8 = 0x08;

fn check_crc(stored: u32, covered: &[u8]) -> Result<()> {
    let computed = crc32fast::hash(covered);
    if computed != stored {
        return Err(ProtocolError::CrcMismatch { stored, computed });
    }
    Ok(())
}

/// One legacy message as it sits in the buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyMessage<'a> {
    pub offset: i64,
    pub crc: u32,
    pub magic: i8,
    pub attributes: i8,
    /// -1 for magic 0.
    pub timestamp: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// What `crc` covers (magic to the end), for `verify_crc`.
    crc_covered: &'a [u8],
}

impl<'a> LegacyMessage<'a> {
    /// Parse a buffer holding exactly one message (offset and size included).
    pub fn parse_exact(input: &'a [u8], opts: &DecodeOptions) -> Result<Self> {
        let mut r = Reader::new(input);
        let offset = r.i64()?;
        let size = r.i32()?;
        if size < 0 || 12 + size as usize != input.len() {
            return Err(ProtocolError::invalid(
                "message size",
                format!("{size} for {} bytes", input.len()),
            ));
        }
        let crc = r.u32()?;
        let magic = r.i8()?;
        if magic != LEGACY_MAGIC_V0 && magic != LEGACY_MAGIC_V1 {
            return Err(ProtocolError::invalid("message magic", format!("{magic}")));
        }
        let crc_covered = &input[16..];
        if opts.verify_crc {
            check_crc(crc, crc_covered)?;
        }
        let attributes = r.i8()?;
        let timestamp = if magic == LEGACY_MAGIC_V1 {
            r.i64()?
        } else {
            -1
        };
        let key = r.nullable_bytes()?;
        let value = r.nullable_bytes()?;
        if !r.is_empty() {
            return Err(ProtocolError::invalid(
                "message",
                "trailing bytes after the value",
            ));
        }
        Ok(LegacyMessage {
            offset,
            crc,
            magic,
            attributes,
            timestamp,
            key,
            value,
            crc_covered,
        })
    }

    /// Check the stored CRC32 against the message's bytes (for a reader
    /// that parsed without `verify_crc`).
    pub fn verify_crc(&self) -> Result<()> {
        check_crc(self.crc, self.crc_covered)
    }

    pub fn compression(&self) -> Result<Compression> {
        Compression::from_id((self.attributes & 0x07) as u8)
    }

    pub fn timestamp_type(&self) -> TimestampType {
        match self.magic {
            LEGACY_MAGIC_V0 => TimestampType::NoTimestamp,
            _ if self.attributes & TIMESTAMP_TYPE_BIT != 0 => TimestampType::LogAppendTime,
            _ => TimestampType::CreateTime,
        }
    }

    fn to_owned_record(&self, offset: i64, timestamp: i64, tt: TimestampType) -> OwnedRecord {
        OwnedRecord {
            offset,
            timestamp,
            timestamp_type: tt,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers: Vec::new(),
        }
    }

    /// Append this message's records to `out`: itself, or for a wrapper the
    /// messages of its inflated inner set with absolute offsets.
    pub fn decode_into(&self, opts: &DecodeOptions, out: &mut Vec<OwnedRecord>) -> Result<()> {
        let codec = self.compression()?;
        if codec == Compression::None {
            out.push(self.to_owned_record(self.offset, self.timestamp, self.timestamp_type()));
            return Ok(());
        }
        let compressed = self
            .value
            .ok_or_else(|| ProtocolError::invalid("wrapper message", "null value"))?;
        let inner_buf = compression::decompress(codec, compressed, opts.max_decompressed)?;
        let mut inner = Vec::new();
        let mut rest: &[u8] = &inner_buf;
        while !rest.is_empty() {
            if rest.len() < 12 {
                return Err(ProtocolError::truncated("inner message", 12, rest.len()));
            }
            let size = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
            if size < 0 {
                return Err(ProtocolError::invalid(
                    "inner message size",
                    format!("{size}"),
                ));
            }
            let total = 12usize + size as usize;
            if total > rest.len() {
                return Err(ProtocolError::truncated("inner message", total, rest.len()));
            }
            let m = LegacyMessage::parse_exact(&rest[..total], opts)?;
            if m.compression()? != Compression::None {
                return Err(ProtocolError::invalid(
                    "inner message",
                    "nested compression",
                ));
            }
            inner.push(m);
            rest = &rest[total..];
        }
        let wrapper_tt = self.timestamp_type();
        // v1 inner offsets are relative to a base the wrapper implies through
        // its own (last) offset; v0 inner messages carry absolute offsets.
        let base = match (self.magic, inner.last()) {
            (LEGACY_MAGIC_V1, Some(last)) => self.offset.wrapping_sub(last.offset),
            _ => 0,
        };
        out.reserve(inner.len());
        for m in &inner {
            let offset = if self.magic == LEGACY_MAGIC_V1 {
                base.wrapping_add(m.offset)
            } else {
                m.offset
            };
            let (ts, tt) = match wrapper_tt {
                TimestampType::LogAppendTime => (self.timestamp, TimestampType::LogAppendTime),
                TimestampType::NoTimestamp => (-1, TimestampType::NoTimestamp),
                TimestampType::CreateTime => (m.timestamp, m.timestamp_type()),
            };
            out.push(m.to_owned_record(offset, ts, tt));
        }
        Ok(())
    }
}

/// Encode one legacy message (for tests and tools; producers speak v2).
pub fn encode_legacy_message(
    magic: i8,
    offset: i64,
    attributes: i8,
    timestamp: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Vec<u8> {
    let mut body = Vec::new();
    body.push(magic as u8);
    body.push(attributes as u8);
    if magic == LEGACY_MAGIC_V1 {
        body.extend_from_slice(&timestamp.to_be_bytes());
    }
    for f in [key, value] {
        match f {
            None => body.extend_from_slice(&(-1i32).to_be_bytes()),
            Some(b) => {
                body.extend_from_slice(&(b.len() as i32).to_be_bytes());
                body.extend_from_slice(b);
            }
        }
    }
    let mut out = Vec::with_capacity(body.len() + 16);
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}
