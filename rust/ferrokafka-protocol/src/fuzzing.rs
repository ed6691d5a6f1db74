//! Entry points of the fuzz targets (`fuzz/fuzz_targets/*.rs`), kept here so
//! that the regression test (`tests/fuzz_corpus.rs`) replays the checked-in
//! corpus through exactly the code the fuzzer ran, on the stable toolchain.
//!
//! Every function takes arbitrary bytes and must return without panicking,
//! aborting, looping or allocating beyond the caps it passes down: a broker
//! (or whatever answers on its port) controls every byte of these inputs.
//! Results are ignored; only the absence of a crash is the property, plus the
//! few cross-checks noted inline (re-decoding what was accepted).

use bytes::{Bytes, BytesMut};

use crate::compression::{decompress, Compression};
use crate::frame::{
    decode_response, decode_response_header, peek_correlation_id, FrameDecoder, CORE_APIS,
};
use crate::record::{decode_all_owned, Batch, Batches, DecodeOptions};
use crate::sasl::{ScramClient, ScramHash};

/// Decompression cap used by the targets: big enough for any seed, small
/// enough that a bomb is refused quickly instead of exhausting the fuzzer's
/// RSS limit.
pub const FUZZ_MAX_DECOMPRESSED: usize = 1 << 20;

/// The API a `response` input is decoded as. The first byte picks one of
/// the APIs the client speaks, unless `pinned` (a key number, from the fuzz
/// driver's `FERROKAFKA_FUZZ_API`) overrides it, so one corpus serves both
/// modes. The second byte picks the version within the client's range.
/// Returns `(key, version, frame)`.
pub fn response_selector(pinned: Option<i16>, data: &[u8]) -> Option<(i16, i16, &[u8])> {
    let (&sel, rest) = data.split_first()?;
    let key = pinned.unwrap_or(CORE_APIS[sel as usize % CORE_APIS.len()] as i16);
    let (&vsel, frame) = rest.split_first()?;
    let (min, max) = crate::frame::client_version_range(key)?;
    let span = (max - min + 1) as u16;
    let version = min + (vsel as u16 % span) as i16;
    Some((key, version, frame))
}

/// The two selector bytes that make [`response_selector`] pick `key` at
/// `version` (for seed files).
pub fn response_prefix(key: i16, version: i16) -> Option<[u8; 2]> {
    let idx = CORE_APIS.iter().position(|k| *k as i16 == key)?;
    let (min, max) = crate::frame::client_version_range(key)?;
    (min..=max)
        .contains(&version)
        .then(|| [idx as u8, (version - min) as u8])
}

/// A response frame (header and body, no length prefix) of any API the
/// client speaks, at any version it speaks.
pub fn response(pinned: Option<i16>, data: &[u8]) {
    let Some((key, version, frame)) = response_selector(pinned, data) else {
        return;
    };
    let _ = decode_response(key, version, Bytes::copy_from_slice(frame));
}

/// Options for the record targets from one selector byte: CRC checking on
/// or off (off lets the fuzzer reach the record parser without forging
/// CRC32C), control records included or not.
fn record_opts(sel: u8) -> (DecodeOptions, bool) {
    let opts = DecodeOptions {
        verify_crc: sel & 1 == 1,
        max_decompressed: FUZZ_MAX_DECOMPRESSED,
    };
    (opts, sel & 2 == 2)
}

/// A Fetch `records` blob: every batch format (v2, legacy v0/v1, nested
/// compressed wrappers), every codec, truncated tails.
pub fn record_batches(data: &[u8]) {
    let Some((&sel, blob)) = data.split_first() else {
        return;
    };
    let (opts, include_control) = record_opts(sel);
    let owned = decode_all_owned(blob, opts, include_control);
    // The borrowing path must agree with the owning one on success.
    let mut borrowed = 0usize;
    let mut ok = true;
    for b in Batches::new(blob, opts) {
        match b {
            Ok(Batch::V2(batch)) => {
                let _ = batch.control_record(&opts);
                if batch.header.is_control() && !include_control {
                    continue;
                }
                let r = batch.decode_each(&opts, |_| {
                    borrowed += 1;
                    Ok(())
                });
                ok &= r.is_ok();
            }
            Ok(Batch::Legacy(m)) => {
                let mut v = Vec::new();
                ok &= m.decode_into(&opts, &mut v).is_ok();
                borrowed += v.len();
            }
            Err(_) => ok = false,
        }
    }
    if let (Ok((records, _)), true) = (&owned, ok) {
        assert_eq!(
            records.len(),
            borrowed,
            "owned and borrowed decoders disagree"
        );
    }
}

/// Raw socket bytes cut into frames (max frame 64 KiB so the fuzzer can
/// reach the cap), each frame's correlation id and header peeled off.
pub fn frames(data: &[u8]) {
    let Some((&sel, stream)) = data.split_first() else {
        return;
    };
    let dec = FrameDecoder::new(64 * 1024);
    let mut buf = BytesMut::new();
    // Feed in chunks of 1..=16 bytes, as a socket might deliver them.
    let step = (sel as usize % 16) + 1;
    for chunk in stream.chunks(step) {
        buf.extend_from_slice(chunk);
        loop {
            match dec.decode(&mut buf) {
                Ok(Some(mut frame)) => {
                    let _ = peek_correlation_id(&frame);
                    let _ = decode_response_header(&mut frame, (sel >> 4) as i16 & 1);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
}

/// One compressed payload of any codec (Kafka's lz4 framing, xerial and
/// raw snappy, gzip, zstd) against the decompression cap.
pub fn decompression(data: &[u8]) {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let codec = match sel % 4 {
        0 => Compression::Gzip,
        1 => Compression::Snappy,
        2 => Compression::Lz4,
        _ => Compression::Zstd,
    };
    if let Ok(out) = decompress(codec, input, FUZZ_MAX_DECOMPRESSED) {
        assert!(
            out.len() <= FUZZ_MAX_DECOMPRESSED,
            "{codec:?} inflated past the cap: {}",
            out.len()
        );
    }
}

/// The server side of a SCRAM exchange: server-first and server-final
/// messages, split at the first 0xff byte (never valid UTF-8, so it cannot
/// be part of either message).
pub fn sasl_scram(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let (first, last) = match rest.iter().position(|&b| b == 0xff) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let hash = if sel & 1 == 0 {
        ScramHash::Sha256
    } else {
        ScramHash::Sha512
    };
    // Low iteration bounds keep each input cheap; the bounds themselves are
    // unit-tested in sasl.rs.
    let mut c = ScramClient::new(hash, "user", "pencil", "fuzznonce")
        .with_min_iterations(1)
        .with_max_iterations(64);
    let _ = c.handle_server_final(last); // out of order: must be refused
    c.client_first();
    if c.handle_server_first(first).is_ok() {
        let _ = c.handle_server_final(last);
    }
}
