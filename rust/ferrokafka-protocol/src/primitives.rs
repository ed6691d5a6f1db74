//! Kafka wire primitives: a borrowing, bounds-checked [`Reader`] and the
//! matching `put_*` writers.
//!
//! Every read returns a [`ProtocolError`] instead of panicking, and no read
//! allocates: strings and byte fields are slices of the input. Array lengths
//! are checked against what is left in the buffer (an element is at least one
//! byte), so a caller that pre-sizes a `Vec` from them can never be made to
//! allocate more than the frame it already holds.

use crate::error::{ProtocolError, Result};
use bytes::BufMut;

/// Cursor over a borrowed byte slice.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

macro_rules! read_be {
    ($name:ident, $ty:ty, $n:expr) => {
        #[inline]
        pub fn $name(&mut self) -> Result<$ty> {
            let b = self.take_array::<$n>(stringify!($ty))?;
            Ok(<$ty>::from_be_bytes(b))
        }
    };
}

impl<'a> Reader<'a> {
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline]
    pub fn position(&self) -> usize {
        self.pos
    }

    #[inline]
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unread part of the buffer.
    #[inline]
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// A record's bytes after its length, when the length is a one- or
    /// two-byte varint ([`word_uvarint_at`]) and not negative and the bytes
    /// are all there; else `None`, nothing read, for the checked reader.
    #[inline(always)]
    pub(crate) fn short_length_prefixed(&mut self) -> Option<&'a [u8]> {
        let mut p = self.pos;
        // Zigzagged: even for a length, odd for a negative one.
        let z = word_uvarint_at(self.buf, &mut p)?;
        if z & 1 != 0 {
            return None;
        }
        let body = self.buf.get(p..p + (z >> 1) as usize)?;
        self.pos = p + body.len();
        Some(body)
    }

    /// Take `n` bytes as a slice of the input.
    #[inline]
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(truncated(what, n, self.remaining()));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    pub fn skip(&mut self, n: usize, what: &'static str) -> Result<()> {
        self.take(n, what).map(|_| ())
    }

    #[inline]
    fn take_array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        match self.buf.get(self.pos..self.pos + N) {
            Some(s) => {
                self.pos += N;
                // The length is N by construction of the range.
                let mut out = [0u8; N];
                out.copy_from_slice(s);
                Ok(out)
            }
            None => Err(ProtocolError::truncated(what, N, self.remaining())),
        }
    }

    read_be!(i8, i8, 1);
    read_be!(u8, u8, 1);
    read_be!(i16, i16, 2);
    read_be!(u16, u16, 2);
    read_be!(i32, i32, 4);
    read_be!(u32, u32, 4);
    read_be!(i64, i64, 8);
    read_be!(u64, u64, 8);

    #[inline]
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }

    #[inline]
    pub fn bool(&mut self) -> Result<bool> {
        Ok(self.u8()? != 0)
    }

    /// Unsigned LEB128 of at most 5 bytes (a `u32`).
    #[inline]
    pub fn uvarint(&mut self) -> Result<u32> {
        // One- and two-byte values are by far the most common (record fields
        // and lengths below 8 KiB), so they skip the general loop.
        if let Some(v) = self.short_uvarint() {
            return Ok(v as u32);
        }
        let v = self.uvarlong_n(5, "unsigned varint")?;
        u32::try_from(v).map_err(|_| overflow32())
    }

    /// Unsigned LEB128 of at most 10 bytes (a `u64`).
    #[inline]
    pub fn uvarlong(&mut self) -> Result<u64> {
        if let Some(v) = self.short_uvarint() {
            return Ok(v);
        }
        self.uvarlong_n(10, "unsigned varlong")
    }

    #[inline(always)]
    fn short_uvarint(&mut self) -> Option<u64> {
        short_uvarint_at(self.buf, &mut self.pos)
    }

    #[inline(never)]
    fn uvarlong_n(&mut self, max_bytes: usize, what: &'static str) -> Result<u64> {
        let mut value: u64 = 0;
        let mut shift = 0u32;
        for i in 0..max_bytes {
            let Some(&b) = self.buf.get(self.pos + i) else {
                return Err(ProtocolError::truncated(what, i + 1, self.remaining()));
            };
            let bits = (b & 0x7f) as u64;
            // The last permitted byte may only carry the bits that still fit.
            if shift == 63 && bits > 1 {
                return Err(ProtocolError::invalid(what, "value overflows 64 bits"));
            }
            value |= bits << shift;
            if b < 0x80 {
                self.pos += i + 1;
                return Ok(value);
            }
            shift += 7;
        }
        Err(ProtocolError::invalid(
            what,
            format!("longer than {max_bytes} bytes"),
        ))
    }

    /// Zigzag varint (`i32`), as in record fields.
    #[inline]
    pub fn varint(&mut self) -> Result<i32> {
        let u = self.uvarint()?;
        Ok(((u >> 1) as i32) ^ -((u & 1) as i32))
    }

    /// Zigzag varlong (`i64`), as in record timestamp deltas.
    #[inline]
    pub fn varlong(&mut self) -> Result<i64> {
        Ok(unzigzag64(self.uvarlong()?))
    }

    fn utf8(what: &'static str, b: &'a [u8]) -> Result<&'a str> {
        std::str::from_utf8(b).map_err(|e| ProtocolError::invalid(what, e.to_string()))
    }

    /// Length-prefixed (`i16`) nullable string; `-1` is null, below that an error.
    pub fn nullable_string(&mut self) -> Result<Option<&'a str>> {
        let len = self.i16()?;
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(ProtocolError::invalid("string length", format!("{n}"))),
            n => Ok(Some(Self::utf8(
                "string",
                self.take(n as usize, "string")?,
            )?)),
        }
    }

    pub fn string(&mut self) -> Result<&'a str> {
        self.nullable_string()?
            .ok_or_else(|| ProtocolError::invalid("string", "null in a non-nullable field"))
    }

    /// Compact (unsigned varint length + 1) nullable string.
    pub fn compact_nullable_string(&mut self) -> Result<Option<&'a str>> {
        match self.compact_len()? {
            None => Ok(None),
            Some(n) => Ok(Some(Self::utf8(
                "compact string",
                self.take(n, "compact string")?,
            )?)),
        }
    }

    pub fn compact_string(&mut self) -> Result<&'a str> {
        self.compact_nullable_string()?
            .ok_or_else(|| ProtocolError::invalid("compact string", "null in a non-nullable field"))
    }

    /// `i32`-length nullable bytes; `-1` is null.
    pub fn nullable_bytes(&mut self) -> Result<Option<&'a [u8]>> {
        let len = self.i32()?;
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(ProtocolError::invalid("bytes length", format!("{n}"))),
            n => Ok(Some(self.take(n as usize, "bytes")?)),
        }
    }

    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        self.nullable_bytes()?
            .ok_or_else(|| ProtocolError::invalid("bytes", "null in a non-nullable field"))
    }

    pub fn compact_nullable_bytes(&mut self) -> Result<Option<&'a [u8]>> {
        match self.compact_len()? {
            None => Ok(None),
            Some(n) => Ok(Some(self.take(n, "compact bytes")?)),
        }
    }

    pub fn compact_bytes(&mut self) -> Result<&'a [u8]> {
        self.compact_nullable_bytes()?
            .ok_or_else(|| ProtocolError::invalid("compact bytes", "null in a non-nullable field"))
    }

    /// Zigzag-varint-length nullable bytes, the encoding of record keys, values
    /// and header values.
    // Always inlined: the record decode loop calls it twice per record.
    #[inline(always)]
    pub fn varint_bytes(&mut self, what: &'static str) -> Result<Option<&'a [u8]>> {
        let len = self.varint()?;
        if len < 0 {
            if len == -1 {
                return Ok(None);
            }
            return Err(invalid_len(what, len as i64));
        }
        Ok(Some(self.take(len as usize, what)?))
    }

    fn compact_len(&mut self) -> Result<Option<usize>> {
        let n = self.uvarint()?;
        Ok(if n == 0 { None } else { Some((n - 1) as usize) })
    }

    fn check_count(&self, what: &'static str, n: usize) -> Result<usize> {
        // Each element takes at least one byte, so a count above what is left
        // is a lie we can catch before anyone allocates for it.
        if n > self.remaining() {
            return Err(ProtocolError::TooLarge {
                what,
                size: n,
                max: self.remaining(),
            });
        }
        Ok(n)
    }

    /// `i32` array count; `-1` (null) returns `None`.
    pub fn nullable_array_len(&mut self) -> Result<Option<usize>> {
        let n = self.i32()?;
        match n {
            -1 => Ok(None),
            n if n < 0 => Err(ProtocolError::invalid("array length", format!("{n}"))),
            n => Ok(Some(self.check_count("array", n as usize)?)),
        }
    }

    pub fn array_len(&mut self) -> Result<usize> {
        self.nullable_array_len()?
            .ok_or_else(|| ProtocolError::invalid("array", "null in a non-nullable field"))
    }

    pub fn compact_nullable_array_len(&mut self) -> Result<Option<usize>> {
        match self.compact_len()? {
            None => Ok(None),
            Some(n) => Ok(Some(self.check_count("compact array", n)?)),
        }
    }

    pub fn compact_array_len(&mut self) -> Result<usize> {
        self.compact_nullable_array_len()?
            .ok_or_else(|| ProtocolError::invalid("compact array", "null in a non-nullable field"))
    }

    pub fn uuid(&mut self) -> Result<[u8; 16]> {
        self.take_array::<16>("uuid")
    }

    /// Read a tagged-field section, handing each `(tag, data)` to `f`. Tags
    /// must be strictly increasing, as the spec requires.
    pub fn tagged_fields<F>(&mut self, mut f: F) -> Result<()>
    where
        F: FnMut(u32, &'a [u8]) -> Result<()>,
    {
        let count = self.uvarint()? as usize;
        self.check_count("tagged fields", count)?;
        let mut last: Option<u32> = None;
        for _ in 0..count {
            let tag = self.uvarint()?;
            if let Some(prev) = last {
                if tag <= prev {
                    return Err(ProtocolError::invalid(
                        "tagged fields",
                        format!("tag {tag} after {prev}"),
                    ));
                }
            }
            last = Some(tag);
            let len = self.uvarint()? as usize;
            let data = self.take(len, "tagged field")?;
            f(tag, data)?;
        }
        Ok(())
    }

    pub fn skip_tagged_fields(&mut self) -> Result<()> {
        self.tagged_fields(|_, _| Ok(()))
    }
}

// Error constructors kept out of line so the hot readers stay small enough
// to inline into the record decoder.
#[cold]
#[inline(never)]
fn truncated(what: &'static str, needed: usize, available: usize) -> ProtocolError {
    ProtocolError::truncated(what, needed, available)
}

#[cold]
#[inline(never)]
pub(crate) fn invalid_len(what: &'static str, n: i64) -> ProtocolError {
    ProtocolError::invalid(what, format!("negative length {n}"))
}

#[cold]
#[inline(never)]
fn overflow32() -> ProtocolError {
    ProtocolError::invalid("unsigned varint", "value exceeds 32 bits")
}

// ---------------------------------------------------------------- writers

/// A one- or two-byte unsigned varint at `b[*p..]` read as one two-byte
/// word, moving `p` past it; `None` (and `p` unmoved) when it is longer or
/// fewer than two bytes are left, even for a one-byte varint. For fields a
/// byte at least always follows (a record's length and head fields, the
/// record decoder's plain path): one bounds check and one load where
/// `short_uvarint_at` has two of each (issue 17).
#[inline(always)]
pub(crate) fn word_uvarint_at(b: &[u8], p: &mut usize) -> Option<u64> {
    let w = u16::from_le_bytes(b.get(*p..*p + 2)?.try_into().ok()?);
    if w & 0x80 == 0 {
        *p += 1;
        return Some((w & 0x7f) as u64);
    }
    if w & 0x8000 != 0 {
        return None;
    }
    *p += 2;
    Some(((w & 0x7f) | ((w >> 8) << 7)) as u64)
}

/// A one- or two-byte unsigned varint at `b[*p..]`, moving `p` past it;
/// `None` (and `p` unmoved) when it is longer or the bytes end first. The
/// fast path of `Reader`'s varints and of the record decoder's short head
/// (`record::v2::records`), which reads a record's fields by index.
#[inline(always)]
pub(crate) fn short_uvarint_at(b: &[u8], p: &mut usize) -> Option<u64> {
    let b0 = *b.get(*p)?;
    if b0 < 0x80 {
        *p += 1;
        return Some(b0 as u64);
    }
    let b1 = *b.get(*p + 1)?;
    if b1 < 0x80 {
        *p += 2;
        return Some((b0 & 0x7f) as u64 | (b1 as u64) << 7);
    }
    None
}

/// Zigzag decoding of a 64-bit value (the inverse of `zigzag64`).
#[inline(always)]
pub fn unzigzag64(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

#[inline]
pub fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

#[inline]
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Bytes an unsigned varint of `v` takes.
#[inline]
pub fn uvarint_len(v: u64) -> usize {
    // ceil(bits / 7), with 0 needing one byte, as (9 * floor(log2 v) + 73)
    // / 64: exact for every bit count from 1 to 64 (checked in the tests),
    // and one multiply-add and a shift, where `div_ceil(7)` compiled to two
    // multiplies and a compare. A record's append computes five of these;
    // they were a quarter of its time (perf of the append bench, issue 17).
    let log2 = 63 - (v | 1).leading_zeros() as usize;
    (log2 * 9 + 73) / 64
}

#[inline]
pub fn varint_len(v: i32) -> usize {
    uvarint_len(zigzag32(v) as u64)
}

#[inline]
pub fn varlong_len(v: i64) -> usize {
    uvarint_len(zigzag64(v))
}

/// Write an unsigned varint into `out` at `at` (10 bytes must fit),
/// returning the position after it. Encoding into a stack array first lets
/// the caller copy a run of fields with one bounds check.
#[inline(always)]
pub fn encode_uvarlong_at(mut v: u64, out: &mut [u8], mut at: usize) -> usize {
    while v >= 0x80 {
        out[at] = (v as u8) | 0x80;
        v >>= 7;
        at += 1;
    }
    out[at] = v as u8;
    at + 1
}

/// Write `v` as an unsigned varint at `p`, built in a register and stored
/// as one unaligned 8-byte word (two more bytes past 2^56: at most 10
/// written), and return its length (1-10). Bytes past the length are
/// garbage the caller overwrites or never reads.
///
/// Why: the record encoder used to assemble its varints byte by byte in a
/// stack array and copy that array out as a vector; the vector load of
/// bytes just stored one at a time stalls on store forwarding, three times
/// per record (perf of `RecordBatchBuilder::append`, issue 17).
///
/// # Safety
/// `p` must be valid for writes of 10 bytes.
#[inline(always)]
pub unsafe fn stamp_uvarlong(p: *mut u8, v: u64) -> usize {
    // One and two bytes take nearly every field of a record (lengths and
    // offset deltas below 8192): each a compare and a store, where the
    // general loop spent three instructions a byte on them (callgrind of
    // the encode loop, issue 17).
    if v < 0x80 {
        *p = v as u8;
        return 1;
    }
    if v < 0x4000 {
        stamp_two_byte_uvarint(p, v as u32);
        return 2;
    }
    stamp_uvarlong_long(p, v)
}

/// The two-byte varint of `v` (0x80 <= v < 0x4000) at `p`: `stamp_uvarlong`'s
/// second case, for a caller that knows the range (a short record's length).
///
/// # Safety
/// `p` must be valid for writes of two bytes.
#[inline(always)]
pub unsafe fn stamp_two_byte_uvarint(p: *mut u8, v: u32) {
    debug_assert!((0x80..0x4000).contains(&v));
    let w = ((v & 0x7f) | 0x80 | ((v >> 7) << 8)) as u16;
    // SAFETY: as the function's contract says.
    unsafe { std::ptr::write_unaligned(p as *mut u16, w.to_le()) };
}

/// `stamp_uvarlong` of three bytes or more.
///
/// # Safety
/// As `stamp_uvarlong`.
#[inline]
unsafe fn stamp_uvarlong_long(p: *mut u8, mut v: u64) -> usize {
    let mut word = 0u64;
    let mut n = 0;
    while n < 8 {
        if v < 0x80 {
            word |= v << (8 * n);
            std::ptr::write_unaligned(p as *mut u64, word.to_le());
            return n + 1;
        }
        word |= ((v & 0x7f) | 0x80) << (8 * n);
        v >>= 7;
        n += 1;
    }
    std::ptr::write_unaligned(p as *mut u64, word.to_le());
    // 56 bits written; at most 8 are left (two bytes).
    if v < 0x80 {
        *p.add(8) = v as u8;
        return 9;
    }
    *p.add(8) = (v as u8) | 0x80;
    *p.add(9) = (v >> 7) as u8;
    10
}

#[inline]
fn encode_uvarlong(v: u64, out: &mut [u8; 10]) -> usize {
    encode_uvarlong_at(v, out, 0)
}

#[inline]
pub fn put_uvarlong<B: BufMut + ?Sized>(buf: &mut B, v: u64) {
    if v < 0x80 {
        buf.put_u8(v as u8);
        return;
    }
    let mut tmp = [0u8; 10];
    let n = encode_uvarlong(v, &mut tmp);
    buf.put_slice(&tmp[..n]);
}

#[inline]
pub fn put_uvarint<B: BufMut + ?Sized>(buf: &mut B, v: u32) {
    put_uvarlong(buf, v as u64)
}

#[inline]
pub fn put_varint<B: BufMut + ?Sized>(buf: &mut B, v: i32) {
    put_uvarlong(buf, zigzag32(v) as u64)
}

#[inline]
pub fn put_varlong<B: BufMut + ?Sized>(buf: &mut B, v: i64) {
    put_uvarlong(buf, zigzag64(v))
}

fn i16_len(what: &'static str, n: usize) -> Result<i16> {
    i16::try_from(n).map_err(|_| ProtocolError::TooLarge {
        what,
        size: n,
        max: i16::MAX as usize,
    })
}

fn i32_len(what: &'static str, n: usize) -> Result<i32> {
    i32::try_from(n).map_err(|_| ProtocolError::TooLarge {
        what,
        size: n,
        max: i32::MAX as usize,
    })
}

pub fn put_nullable_string<B: BufMut + ?Sized>(buf: &mut B, s: Option<&str>) -> Result<()> {
    match s {
        None => buf.put_i16(-1),
        Some(s) => {
            buf.put_i16(i16_len("string", s.len())?);
            buf.put_slice(s.as_bytes());
        }
    }
    Ok(())
}

pub fn put_string<B: BufMut + ?Sized>(buf: &mut B, s: &str) -> Result<()> {
    put_nullable_string(buf, Some(s))
}

pub fn put_compact_nullable_string<B: BufMut + ?Sized>(buf: &mut B, s: Option<&str>) -> Result<()> {
    put_compact_nullable_bytes(buf, s.map(str::as_bytes))
}

pub fn put_compact_string<B: BufMut + ?Sized>(buf: &mut B, s: &str) -> Result<()> {
    put_compact_nullable_bytes(buf, Some(s.as_bytes()))
}

pub fn put_nullable_bytes<B: BufMut + ?Sized>(buf: &mut B, b: Option<&[u8]>) -> Result<()> {
    match b {
        None => buf.put_i32(-1),
        Some(b) => {
            buf.put_i32(i32_len("bytes", b.len())?);
            buf.put_slice(b);
        }
    }
    Ok(())
}

pub fn put_bytes<B: BufMut + ?Sized>(buf: &mut B, b: &[u8]) -> Result<()> {
    put_nullable_bytes(buf, Some(b))
}

pub fn put_compact_nullable_bytes<B: BufMut + ?Sized>(buf: &mut B, b: Option<&[u8]>) -> Result<()> {
    match b {
        None => buf.put_u8(0),
        Some(b) => {
            // Compact lengths are stored +1 in a u32.
            let n = u32::try_from(b.len())
                .ok()
                .filter(|&n| n < u32::MAX)
                .ok_or(ProtocolError::TooLarge {
                    what: "compact bytes",
                    size: b.len(),
                    max: u32::MAX as usize - 1,
                })?;
            put_uvarint(buf, n + 1);
            buf.put_slice(b);
        }
    }
    Ok(())
}

pub fn put_compact_bytes<B: BufMut + ?Sized>(buf: &mut B, b: &[u8]) -> Result<()> {
    put_compact_nullable_bytes(buf, Some(b))
}

/// Varint-length nullable bytes (record keys/values/header values).
#[inline]
pub fn put_varint_bytes<B: BufMut + ?Sized>(buf: &mut B, b: Option<&[u8]>) -> Result<()> {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, i32_len("record field", b.len())?);
            buf.put_slice(b);
        }
    }
    Ok(())
}

pub fn put_nullable_array_len<B: BufMut + ?Sized>(buf: &mut B, n: Option<usize>) -> Result<()> {
    match n {
        None => buf.put_i32(-1),
        Some(n) => buf.put_i32(i32_len("array", n)?),
    }
    Ok(())
}

pub fn put_array_len<B: BufMut + ?Sized>(buf: &mut B, n: usize) -> Result<()> {
    put_nullable_array_len(buf, Some(n))
}

pub fn put_compact_nullable_array_len<B: BufMut + ?Sized>(
    buf: &mut B,
    n: Option<usize>,
) -> Result<()> {
    match n {
        None => buf.put_u8(0),
        Some(n) => {
            let n =
                u32::try_from(n)
                    .ok()
                    .filter(|&n| n < u32::MAX)
                    .ok_or(ProtocolError::TooLarge {
                        what: "compact array",
                        size: n,
                        max: u32::MAX as usize - 1,
                    })?;
            put_uvarint(buf, n + 1);
        }
    }
    Ok(())
}

pub fn put_compact_array_len<B: BufMut + ?Sized>(buf: &mut B, n: usize) -> Result<()> {
    put_compact_nullable_array_len(buf, Some(n))
}

pub fn put_uuid<B: BufMut + ?Sized>(buf: &mut B, u: &[u8; 16]) {
    buf.put_slice(u);
}

/// Write a tagged-field section. `fields` must be sorted by tag, strictly
/// increasing; anything else would be rejected by the reader on the far side,
/// so it is refused here.
pub fn put_tagged_fields<B: BufMut + ?Sized>(buf: &mut B, fields: &[(u32, &[u8])]) -> Result<()> {
    if fields.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err(ProtocolError::invalid(
            "tagged fields",
            "tags not strictly increasing",
        ));
    }
    put_uvarint(
        buf,
        u32::try_from(fields.len())
            .map_err(|_| ProtocolError::invalid("tagged fields", "too many"))?,
    );
    for (tag, data) in fields {
        put_uvarint(buf, *tag);
        let n = u32::try_from(data.len()).map_err(|_| ProtocolError::TooLarge {
            what: "tagged field",
            size: data.len(),
            max: u32::MAX as usize,
        })?;
        put_uvarint(buf, n);
        buf.put_slice(data);
    }
    Ok(())
}

/// An empty tagged-field section (the common case in flexible versions).
#[inline]
pub fn put_empty_tagged_fields<B: BufMut + ?Sized>(buf: &mut B) {
    buf.put_u8(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_varints_are_the_plain_encoding() {
        let mut values: Vec<u64> = vec![0, 1, 0x7f, 0x80, 0x3fff, 0x4000, u64::MAX, 1 << 63];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1u64 << bits, (1u64 << bits) + 1]);
        }
        for v in values {
            let mut plain = Vec::new();
            put_uvarlong(&mut plain, v);
            let mut out = [0xaau8; 16];
            // SAFETY: 16 writable bytes (10 needed).
            let n = unsafe { stamp_uvarlong(out.as_mut_ptr(), v) };
            assert_eq!(&out[..n], &plain[..], "{v:#x}");
            assert_eq!(uvarint_len(v), plain.len(), "{v:#x}");
        }
    }

    /// The word reads take exactly the varints of one and two bytes that
    /// are followed by a byte, read as the general reader reads them, and
    /// leave the position alone otherwise; a length-prefixed run likewise.
    #[test]
    fn word_reads_match_the_general_reader_or_decline() {
        for v in [
            0u64, 1, 0x3f, 0x40, 0x7f, 0x80, 0x1fff, 0x2000, 0x3fff, 0x4000, 0x1_0000,
        ] {
            let mut enc = Vec::new();
            put_uvarlong(&mut enc, v);
            let mut followed = enc.clone();
            followed.push(0x55);
            let mut p = 0;
            let got = word_uvarint_at(&followed, &mut p);
            if enc.len() <= 2 {
                assert_eq!((got, p), (Some(v), enc.len()), "{v:#x}");
            } else {
                assert_eq!((got, p), (None, 0), "{v:#x}");
            }
            // A one-byte varint that ends the input: declined.
            if enc.len() == 1 {
                let mut p = 0;
                assert_eq!((word_uvarint_at(&enc, &mut p), p), (None, 0));
            }
        }
        // Length 3 (zigzag 6), three bytes, one byte after.
        let mut r = Reader::new(&[6, 1, 2, 3, 9]);
        assert_eq!(r.short_length_prefixed(), Some(&[1u8, 2, 3][..]));
        assert_eq!(r.remaining(), 1);
        // Negative (zigzag 1), longer than the input, a length of three
        // bytes: declined, nothing read.
        for bytes in [&[1u8, 0, 0][..], &[8, 1, 2, 3], &[0x80, 0x80, 0x01, 0]] {
            let mut r = Reader::new(bytes);
            assert_eq!(r.short_length_prefixed(), None, "{bytes:?}");
            assert_eq!(r.position(), 0);
        }
    }

    #[test]
    fn varint_known_encodings() {
        // Values from the protobuf/Kafka zigzag tables.
        let cases: &[(i32, &[u8])] = &[
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
        ];
        for (v, enc) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, *v);
            assert_eq!(&out[..], *enc, "encode {v}");
            assert_eq!(varint_len(*v), enc.len());
            assert_eq!(Reader::new(enc).varint().unwrap(), *v);
        }
    }

    #[test]
    fn overlong_varints_are_errors() {
        assert!(Reader::new(&[0xff; 6]).uvarint().is_err());
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x1f])
            .uvarint()
            .is_err());
        assert!(Reader::new(&[0xff; 11]).uvarlong().is_err());
        assert!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02])
                .uvarlong()
                .is_err()
        );
        assert!(Reader::new(&[0x80]).uvarint().is_err());
    }

    #[test]
    fn negative_lengths() {
        assert_eq!(Reader::new(&[0xff, 0xff]).nullable_string().unwrap(), None);
        assert!(Reader::new(&[0xff, 0xff]).string().is_err());
        assert!(Reader::new(&[0xff, 0xfe]).nullable_string().is_err());
        assert!(Reader::new(&[0xff, 0xff, 0xff, 0xfe])
            .nullable_bytes()
            .is_err());
        assert!(Reader::new(&[0x7f, 0xff, 0xff, 0xff]).array_len().is_err());
        assert!(Reader::new(&[0x7f, 0xff, 0xff, 0xff])
            .nullable_bytes()
            .is_err());
    }
}
