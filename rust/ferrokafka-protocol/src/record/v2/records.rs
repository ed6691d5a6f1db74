//! Reading the records of one v2 batch payload: the iterator, and the
//! visitor the consumer's decode loop uses (one record's head read by the
//! short path when its varints are short, else by the checked reader).

use super::{Header, Record};
use crate::error::{ProtocolError, Result};
use crate::primitives::{invalid_len, short_uvarint_at, unzigzag64, word_uvarint_at, Reader};

/// Records of one batch payload. Yields an error (then stops) on malformed
/// bytes, and checks at the end that the payload held exactly `recordsCount`
/// records.
pub struct RecordIter<'b> {
    r: Reader<'b>,
    left: usize,
    base_offset: i64,
    base_timestamp: i64,
    override_timestamp: Option<i64>,
}

impl<'b> RecordIter<'b> {
    /// `count` records (checked against the payload by the caller) placed
    /// against the batch's base offset and timestamp; `override_timestamp`
    /// is the batch's max timestamp under log-append time.
    pub(super) fn new(
        payload: &'b [u8],
        count: usize,
        base_offset: i64,
        base_timestamp: i64,
        override_timestamp: Option<i64>,
    ) -> Self {
        RecordIter {
            r: Reader::new(payload),
            left: count,
            base_offset,
            base_timestamp,
            override_timestamp,
        }
    }

    pub fn len(&self) -> usize {
        self.left
    }
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// One record's fields up to its header count; the headers are left in
    /// the returned reader, checked to be plausibly that many. The
    /// iterator's path (`read_one`); `visit` spells the same two reads out
    /// itself, to keep the head out of a `Result` (see there).
    #[inline(always)]
    fn read_head(&mut self) -> Result<RecordHead<'b>> {
        let body = self.record_body()?;
        match self.read_short_head(body) {
            Some(h) => Ok(h),
            None => self.read_checked_head(body),
        }
    }

    /// The next record's bytes (after its length). A length of one or two
    /// bytes is read as one two-byte word (a record is seven bytes at least,
    /// so more always follows it); any other, or one the bytes do not hold,
    /// by the checked reader, which says what is wrong.
    #[inline(always)]
    fn record_body(&mut self) -> Result<&'b [u8]> {
        if let Some(body) = self.r.short_length_prefixed() {
            return Ok(body);
        }
        let len = self.r.varint()?;
        if len < 0 {
            return Err(invalid_len("record length", len as i64));
        }
        self.r.take(len as usize, "record")
    }

    /// `read_head`'s fields by the checked reader: any record the short
    /// path does not take (a field of three bytes or more, or a malformed
    /// record, read again from its start here so the error says what is
    /// wrong).
    #[inline(never)]
    fn read_checked_head(&self, body: &'b [u8]) -> Result<RecordHead<'b>> {
        let mut r = Reader::new(body);
        let attributes = r.i8()?;
        let ts_delta = r.varlong()?;
        let offset_delta = r.varint()?;
        let key = r.varint_bytes("record key")?;
        let value = r.varint_bytes("record value")?;
        let n_headers = r.varint()?;
        if n_headers < 0 {
            return Err(invalid_len("header count", n_headers as i64));
        }
        let n_headers = n_headers as usize;
        // Two bytes minimum per header (key length, value length).
        if n_headers > r.remaining() / 2 {
            return Err(ProtocolError::TooLarge {
                what: "header count",
                size: n_headers,
                max: r.remaining() / 2,
            });
        }
        Ok(self.head(
            attributes,
            ts_delta,
            offset_delta as i64,
            (key, value),
            n_headers,
            r,
        ))
    }

    /// `read_head`'s fields when every varint of them is one or two bytes
    /// (nearly every record: deltas below 8,192, values below 8 KiB), read
    /// with a plain index into the record's bytes; `None` for anything
    /// else, which the checked reader then reads (and rejects if it must).
    /// Why: through `Reader` each field built a slice of the rest and a
    /// `Result`, ~140 of the decode's ~390 instructions a record
    /// (callgrind of cargo bench `fetched`, issue 17).
    #[inline(always)]
    fn read_short_head(&self, body: &'b [u8]) -> Option<RecordHead<'b>> {
        let attributes = *body.first()? as i8;
        let mut p = 1;
        let ts_delta = short_varint(body, &mut p)?;
        let offset_delta = short_varint(body, &mut p)?;
        let key = short_bytes(body, &mut p)?;
        let value = short_bytes(body, &mut p)?;
        // The last field: nothing need follow it, so not a word read.
        let n_headers = short_uvarint_at(body, &mut p).map(unzigzag64)?;
        let rest = body.get(p..)?;
        // As `read_checked_head`: no negative count, two bytes at least a
        // header.
        if n_headers < 0 || n_headers as usize > rest.len() / 2 {
            return None;
        }
        Some(self.head(
            attributes,
            ts_delta,
            offset_delta,
            (key, value),
            n_headers as usize,
            Reader::new(rest),
        ))
    }

    /// A head from a record's fields: its offset and timestamp placed
    /// against the batch's (the batch's max timestamp under log-append time).
    #[inline(always)]
    fn head(
        &self,
        attributes: i8,
        ts_delta: i64,
        offset_delta: i64,
        (key, value): (Option<&'b [u8]>, Option<&'b [u8]>),
        n_headers: usize,
        rest: Reader<'b>,
    ) -> RecordHead<'b> {
        RecordHead {
            offset: self.base_offset.wrapping_add(offset_delta),
            timestamp: self
                .override_timestamp
                .unwrap_or(self.base_timestamp.wrapping_add(ts_delta)),
            attributes,
            key,
            value,
            n_headers,
            rest,
        }
    }

    #[inline]
    fn read_one(&mut self) -> Result<Record<'b>> {
        let mut h = self.read_head()?;
        let mut headers = Vec::with_capacity(h.n_headers);
        for _ in 0..h.n_headers {
            headers.push(read_header(&mut h.rest)?);
        }
        finish_record(&h.rest)?;
        Ok(Record {
            offset: h.offset,
            timestamp: h.timestamp,
            attributes: h.attributes,
            key: h.key,
            value: h.value,
            headers,
        })
    }

    /// Every remaining record into `v`, with the same checks as iterating
    /// (an error stops it), but without building a `Record` and its header
    /// list per record: the consumer's columns take the fields directly
    /// (the iterator's per-record struct and calls were most of the
    /// decode's cost in the ceiling run).
    pub fn visit<V: RecordVisitor<'b>>(mut self, v: &mut V) -> Result<()> {
        while self.left > 0 {
            self.left -= 1;
            let body = self.record_body()?;
            if self.visit_plain(body, v) {
                continue;
            }
            // The short path without a `Result` around it: wrapped, the
            // head was copied out of it once more per record (callgrind).
            let mut h = match self.read_short_head(body) {
                Some(h) => h,
                None => self.read_checked_head(body)?,
            };
            let keep = v.record(h.offset, h.timestamp, h.key, h.value);
            for _ in 0..h.n_headers {
                let hd = read_header(&mut h.rest)?;
                if keep {
                    v.header(hd.key, hd.value);
                }
            }
            finish_record(&h.rest)?;
            if keep {
                v.end_record();
            }
        }
        if !self.r.is_empty() {
            return Err(trailing_bytes(self.r.remaining()));
        }
        Ok(())
    }

    /// A record without headers whose varints are one or two bytes (nearly
    /// every record of a plain producer), read by index and handed to `v`
    /// directly: true when it was. Anything else (headers, a longer varint,
    /// bytes left after the fields, a malformed record) is false, for the
    /// general path to read, or reject, from the record's start. Why not
    /// `read_short_head`: its head, a struct of eleven words, was stored and
    /// loaded again on the way to the visitor, and the record's checks are
    /// fewer when it is known to have no headers: the decode went from 317
    /// to 275 instructions a record (`benches/decode_instructions.py`,
    /// issue 17); 262 -> 247 with its fields read as two-byte words
    /// (`word_uvarint_at`), 239 with the record's length read so too.
    #[inline(always)]
    fn visit_plain<V: RecordVisitor<'b>>(&self, body: &'b [u8], v: &mut V) -> bool {
        // The attributes byte (unused in v2 records) is skipped.
        let mut p = 1;
        let Some(ts_delta) = short_varint(body, &mut p) else {
            return false;
        };
        let Some(offset_delta) = short_varint(body, &mut p) else {
            return false;
        };
        let Some(key) = short_bytes(body, &mut p) else {
            return false;
        };
        let Some(value) = short_bytes(body, &mut p) else {
            return false;
        };
        // No headers (a zigzagged 0), and nothing after.
        if body.get(p) != Some(&0) || p + 1 != body.len() {
            return false;
        }
        let offset = self.base_offset.wrapping_add(offset_delta);
        let timestamp = self
            .override_timestamp
            .unwrap_or(self.base_timestamp.wrapping_add(ts_delta));
        if v.record(offset, timestamp, key, value) {
            v.end_record();
        }
        true
    }
}

/// A head field's varint (zigzagged) of one or two bytes, read as one
/// two-byte word (`word_uvarint_at`): every head field has at least one
/// byte after it (the header count ends the record). `None` for anything
/// else, left to the checked reader. Shared by both short paths.
#[inline(always)]
fn short_varint(b: &[u8], p: &mut usize) -> Option<i64> {
    word_uvarint_at(b, p).map(unzigzag64)
}

/// A key or value by `short_varint`'s read of its length, whose zigzag is 1
/// for null and even for a length (odd and above 1 is negative, malformed:
/// `None`), so it needs no unzigzagging.
#[inline(always)]
fn short_bytes<'a>(b: &'a [u8], p: &mut usize) -> Option<Option<&'a [u8]>> {
    match word_uvarint_at(b, p)? {
        1 => Some(None),
        z if z & 1 == 1 => None,
        z => {
            let n = (z >> 1) as usize;
            let s = b.get(*p..*p + n)?;
            *p += n;
            Some(Some(s))
        }
    }
}

/// Receives the records of [`RecordIter::visit`] in order.
pub trait RecordVisitor<'b> {
    /// A record; `false` skips it (its headers and `end_record` are not
    /// reported, though still checked).
    fn record(
        &mut self,
        offset: i64,
        timestamp: i64,
        key: Option<&'b [u8]>,
        value: Option<&'b [u8]>,
    ) -> bool;
    fn header(&mut self, key: &'b str, value: Option<&'b [u8]>);
    fn end_record(&mut self);
}

struct RecordHead<'b> {
    offset: i64,
    timestamp: i64,
    attributes: i8,
    key: Option<&'b [u8]>,
    value: Option<&'b [u8]>,
    n_headers: usize,
    /// The record's bytes from its first header on.
    rest: Reader<'b>,
}

#[inline]
fn read_header<'b>(r: &mut Reader<'b>) -> Result<Header<'b>> {
    let k = r
        .varint_bytes("header key")?
        .ok_or_else(|| ProtocolError::invalid("header key", "null"))?;
    let key =
        std::str::from_utf8(k).map_err(|e| ProtocolError::invalid("header key", e.to_string()))?;
    let value = r.varint_bytes("header value")?;
    Ok(Header { key, value })
}

/// A record's length must cover exactly its fields.
#[inline]
fn finish_record(rest: &Reader<'_>) -> Result<()> {
    if !rest.is_empty() {
        return Err(ProtocolError::invalid(
            "record",
            format!("{} bytes left after the headers", rest.remaining()),
        ));
    }
    Ok(())
}

#[cold]
fn trailing_bytes(n: usize) -> ProtocolError {
    ProtocolError::invalid("record batch", format!("{n} bytes after the last record"))
}

impl<'b> Iterator for RecordIter<'b> {
    type Item = Result<Record<'b>>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            if !self.r.is_empty() {
                // Report once, then stay finished.
                let n = self.r.remaining();
                self.r = Reader::new(&[]);
                return Some(Err(trailing_bytes(n)));
            }
            return None;
        }
        self.left -= 1;
        let out = self.read_one();
        if out.is_err() {
            self.left = 0;
            self.r = Reader::new(&[]);
        }
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left + 1))
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod short_head_tests;
