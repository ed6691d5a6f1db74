//! Record batch compression codecs, in the exact wire variants the Java
//! client emits and accepts.
//!
//! * gzip: RFC 1952 stream (flate2).
//! * snappy: decode both raw snappy and the xerial "snappy-java" framing
//!   (`\x82SNAPPY\0` + version + compat + `[i32 len, raw block]*`), detected
//!   by the magic; encode xerial, which is what the Java producer writes and
//!   what every Kafka client reads.
//! * lz4: the LZ4 *frame* format (Java `KafkaLZ4BlockOutputStream`: 64 KiB
//!   independent blocks, no checksums). Decoding parses the frame by hand so
//!   that the header checksum is not verified: magic 0 messages were written
//!   with a wrong header checksum (KAFKA-1493) and the batch CRC already guards
//!   integrity.
//! * zstd: a standard zstd frame.
//!
//! Decompression output is capped (`max_output`): a zip bomb is an error, not
//! an out-of-memory kill.

use crate::error::{ProtocolError, Result};
use std::io::{Read, Write};

/// Default cap on decompressed output, matching `max_response_size`.
pub const DEFAULT_MAX_DECOMPRESSED: usize = 100 * 1024 * 1024;

/// Compression codec id, as stored in bits 0-2 of the batch attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Compression {
    #[default]
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Compression {
    pub const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    pub fn from_id(id: u8) -> Result<Self> {
        Ok(match id {
            0 => Compression::None,
            1 => Compression::Gzip,
            2 => Compression::Snappy,
            3 => Compression::Lz4,
            4 => Compression::Zstd,
            n => {
                return Err(ProtocolError::Unsupported {
                    what: "compression codec",
                    detail: format!("id {n}"),
                })
            }
        })
    }

    /// The `compression.type` names the Java client accepts.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name.to_ascii_lowercase().as_str() {
            "none" | "" => Compression::None,
            "gzip" => Compression::Gzip,
            "snappy" => Compression::Snappy,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

fn err(codec: &'static str, detail: impl ToString) -> ProtocolError {
    ProtocolError::Compression {
        codec,
        detail: detail.to_string(),
    }
}

fn too_large(max: usize) -> ProtocolError {
    ProtocolError::TooLarge {
        what: "decompressed records",
        size: max.saturating_add(1),
        max,
    }
}

/// Compress `input`, appending to `out`. `level` is the codec's own scale
/// (gzip 0-9, zstd -7..=22); `None` picks the Java client's default. lz4 and
/// snappy have no level here (Java's lz4 level only switches to HC, which
/// lz4_flex does not implement) and ignore it.
pub fn compress(
    codec: Compression,
    level: Option<i32>,
    input: &[u8],
    out: &mut Vec<u8>,
) -> Result<()> {
    match codec {
        Compression::None => out.extend_from_slice(input),
        Compression::Gzip => {
            let lvl = level.unwrap_or(6).clamp(0, 9) as u32;
            let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::new(lvl));
            enc.write_all(input).map_err(|e| err("gzip", e))?;
            enc.finish().map_err(|e| err("gzip", e))?;
        }
        Compression::Snappy => snappy_xerial_compress(input, out)?,
        Compression::Lz4 => {
            let info = lz4_flex::frame::FrameInfo::new()
                .block_size(lz4_flex::frame::BlockSize::Max64KB)
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, out);
            enc.write_all(input).map_err(|e| err("lz4", e))?;
            enc.finish().map_err(|e| err("lz4", e))?;
        }
        Compression::Zstd => {
            // Java's default zstd level is 3, which is zstd's own default.
            let lvl = level.unwrap_or(3);
            let compressed = zstd::bulk::compress(input, lvl).map_err(|e| err("zstd", e))?;
            out.extend_from_slice(&compressed);
        }
    }
    Ok(())
}

/// Decompress `input`, refusing to produce more than `max_output` bytes.
pub fn decompress(codec: Compression, input: &[u8], max_output: usize) -> Result<Vec<u8>> {
    match codec {
        Compression::None => {
            if input.len() > max_output {
                return Err(too_large(max_output));
            }
            Ok(input.to_vec())
        }
        Compression::Gzip => read_capped(
            "gzip",
            flate2::read::MultiGzDecoder::new(input),
            input.len(),
            max_output,
        ),
        Compression::Snappy => snappy_decompress(input, max_output),
        Compression::Lz4 => lz4_frame_decompress(input, max_output),
        Compression::Zstd => {
            let mut dec =
                zstd::stream::read::Decoder::with_buffer(input).map_err(|e| err("zstd", e))?;
            // The frame header chooses the window the decoder allocates; cap
            // it by our output cap so a hostile header cannot ask for more
            // (zstd's own limit is 2^27).
            let window_log =
                (usize::BITS - max_output.max(1).saturating_sub(1).leading_zeros()).clamp(10, 27);
            dec.window_log_max(window_log).map_err(|e| err("zstd", e))?;
            read_capped("zstd", dec, input.len(), max_output).map_err(|e| match e {
                // libzstd reports the window cap only as this message; it
                // means the frame wants more room than the output cap allows.
                ProtocolError::Compression { ref detail, .. }
                    if detail.contains("too much memory") =>
                {
                    too_large(max_output)
                }
                e => e,
            })
        }
    }
}

/// Read a decoder to the end, erroring once it yields more than `max`.
fn read_capped<R: Read>(
    codec: &'static str,
    r: R,
    input_len: usize,
    max: usize,
) -> Result<Vec<u8>> {
    // Records compress a few times over; start there rather than grow from 0,
    // but never pre-size beyond the cap.
    let mut out = Vec::with_capacity(input_len.saturating_mul(4).min(max).min(1 << 20));
    let mut limited = r.take(max as u64 + 1);
    limited.read_to_end(&mut out).map_err(|e| err(codec, e))?;
    if out.len() > max {
        return Err(too_large(max));
    }
    Ok(out)
}

// ---------------------------------------------------------------- snappy

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
/// snappy-java's default block size, so our output chunks like the Java producer's.
const XERIAL_BLOCK: usize = 32 * 1024;

fn snappy_xerial_compress(input: &[u8], out: &mut Vec<u8>) -> Result<()> {
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes()); // version
    out.extend_from_slice(&1i32.to_be_bytes()); // minimum compatible version
    let mut enc = snap::raw::Encoder::new();
    for chunk in input.chunks(XERIAL_BLOCK) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        let bound = snap::raw::max_compress_len(chunk.len());
        out.resize(start + 4 + bound, 0);
        let n = enc
            .compress(chunk, &mut out[start + 4..])
            .map_err(|e| err("snappy", e))?;
        out.truncate(start + 4 + n);
        out[start..start + 4].copy_from_slice(&(n as u32).to_be_bytes());
    }
    Ok(())
}

fn snappy_raw_into(block: &[u8], out: &mut Vec<u8>, max: usize) -> Result<()> {
    let n = snap::raw::decompress_len(block).map_err(|e| err("snappy", e))?;
    if out.len().saturating_add(n) > max {
        return Err(too_large(max));
    }
    let start = out.len();
    out.resize(start + n, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| err("snappy", e))?;
    out.truncate(start + written);
    Ok(())
}

fn snappy_decompress(input: &[u8], max: usize) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if input.len() >= 16 && input[..8] == XERIAL_MAGIC {
        let mut rest = &input[16..];
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err(err("snappy", "truncated xerial block header"));
            }
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            rest = &rest[4..];
            if len > rest.len() {
                return Err(err(
                    "snappy",
                    format!("xerial block of {len} bytes, {} left", rest.len()),
                ));
            }
            snappy_raw_into(&rest[..len], &mut out, max)?;
            rest = &rest[len..];
        }
    } else {
        snappy_raw_into(input, &mut out, max)?;
    }
    Ok(out)
}

/// Raw (unframed) snappy, for tests and for peers that skip the xerial framing.
pub fn snappy_raw_compress(input: &[u8]) -> Result<Vec<u8>> {
    snap::raw::Encoder::new()
        .compress_vec(input)
        .map_err(|e| err("snappy", e))
}

// ---------------------------------------------------------------- lz4

const LZ4_MAGIC: u32 = 0x184D_2204;

fn lz4_frame_decompress(input: &[u8], max: usize) -> Result<Vec<u8>> {
    let e = |d: &str| err("lz4", d);
    if input.len() < 7 {
        return Err(e("truncated frame header"));
    }
    if u32::from_le_bytes([input[0], input[1], input[2], input[3]]) != LZ4_MAGIC {
        return Err(e("bad frame magic"));
    }
    let flg = input[4];
    let bd = input[5];
    if flg >> 6 != 1 {
        return Err(e("unsupported frame version"));
    }
    let block_checksum = flg & 0x10 != 0;
    let content_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    let dict_id = flg & 0x01 != 0;
    let max_block = match (bd >> 4) & 0x7 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        _ => return Err(e("bad block size id")),
    };
    // Header: magic(4) FLG BD [content size 8] [dict id 4] HC(1). The HC is
    // deliberately not checked (see module docs).
    let mut pos = 6 + if content_size { 8 } else { 0 } + if dict_id { 4 } else { 0 } + 1;
    let mut out = Vec::new();
    loop {
        let Some(h) = input.get(pos..pos + 4) else {
            return Err(e("truncated block header"));
        };
        let word = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        pos += 4;
        if word == 0 {
            break; // end mark
        }
        let uncompressed = word & 0x8000_0000 != 0;
        let len = (word & 0x7fff_ffff) as usize;
        if len > max_block {
            return Err(e("block larger than the declared block size"));
        }
        let Some(block) = input.get(pos..pos + len) else {
            return Err(e("truncated block"));
        };
        pos += len + if block_checksum { 4 } else { 0 };
        let start = out.len();
        if uncompressed {
            if start + len > max {
                return Err(too_large(max));
            }
            out.extend_from_slice(block);
        } else {
            let room = max_block.min(max.saturating_sub(start).saturating_add(1));
            out.resize(start + room, 0);
            match lz4_flex::block::decompress_into(block, &mut out[start..]) {
                Ok(n) => out.truncate(start + n),
                Err(_) if room <= max.saturating_sub(start) => return Err(e("corrupt block")),
                Err(_) => return Err(too_large(max)),
            }
            if out.len() > max {
                return Err(too_large(max));
            }
        }
    }
    if content_checksum && input.len() < pos + 4 {
        return Err(e("truncated content checksum"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..200_000u32)
            .map(|i| (i % 251) as u8 ^ (i / 1000) as u8)
            .collect();
        for codec in Compression::ALL {
            let mut c = Vec::new();
            compress(codec, None, &data, &mut c).unwrap();
            assert_eq!(
                decompress(codec, &c, DEFAULT_MAX_DECOMPRESSED).unwrap(),
                data,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn raw_snappy_is_accepted() {
        let data = b"hello hello hello hello snappy".repeat(10);
        let raw = snappy_raw_compress(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 1 << 20).unwrap(),
            data
        );
    }

    #[test]
    fn bombs_are_capped() {
        let zeros = vec![0u8; 4 << 20];
        for codec in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            let mut c = Vec::new();
            compress(codec, None, &zeros, &mut c).unwrap();
            let r = decompress(codec, &c, 1 << 20);
            assert!(
                matches!(r, Err(ProtocolError::TooLarge { .. })),
                "{codec:?}: {r:?}"
            );
        }
    }
}
