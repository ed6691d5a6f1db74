//! `RecordIter::read_short_head` against the checked reader (issue 17's
//! decode fast path must read exactly what the checked path reads).

use super::*;
use crate::compression::Compression;
use crate::record::v2::{RecordBatch, RecordBatchBuilder};
use crate::record::DecodeOptions;

/// Every record the short path takes reads as the checked reader reads
/// it, and the sizes at the one-/two-/three-byte varint boundaries go
/// to the checked reader only when a field needs three bytes.
#[test]
fn the_short_path_reads_what_the_checked_reader_reads() {
    let mut b = RecordBatchBuilder::new(Compression::None).base_offset(0);
    let lens = [0usize, 1, 63, 64, 8191, 8192];
    let deltas = [0i64, 63, 64, 8191, 8192, -1, -64, -65];
    let mut taken = 0;
    let mut n = 0;
    for (i, &d) in deltas.iter().enumerate() {
        for &len in &lens {
            let key = vec![b'k'; len.min(70)];
            let value = vec![i as u8; len];
            let headers = [Header {
                key: "h",
                value: Some(b"v"),
            }];
            let h: &[Header<'_>] = if len % 2 == 0 { &headers } else { &[] };
            let k = (len != 1).then_some(&key[..]);
            b.append(1_000 + d, k, Some(&value), h).unwrap();
            b.append(1_000 + d, None, None, &[]).unwrap();
            n += 2;
        }
    }
    let bytes = b.finish().unwrap();
    let batch = RecordBatch::parse_exact(&bytes, &DecodeOptions::default()).unwrap();
    let payload = batch.payload(&DecodeOptions::default()).unwrap();
    let mut it = batch.records(&payload).unwrap();
    for _ in 0..n {
        let body = it.record_body().unwrap();
        let checked = it.read_checked_head(body).unwrap();
        if let Some(short) = it.read_short_head(body) {
            taken += 1;
            assert_eq!(
                (short.offset, short.timestamp, short.attributes),
                (checked.offset, checked.timestamp, checked.attributes)
            );
            assert_eq!((short.key, short.value), (checked.key, checked.value));
            assert_eq!(short.n_headers, checked.n_headers);
            assert_eq!(short.rest.remaining(), checked.rest.remaining());
        } else {
            // Only a field of three bytes or more leaves the short path:
            // a value of 8,192 bytes or a delta of 8,192 (zigzag 16,384).
            assert!(
                checked.value.is_some_and(|v| v.len() >= 8192)
                    || (checked.timestamp - 1_000).abs() >= 8192
            );
        }
    }
    assert!(it.r.is_empty(), "every record read");
    assert!(taken > n / 2, "{taken} of {n} took the short path");
}

#[test]
fn a_malformed_short_record_falls_to_the_checked_reader_and_its_error() {
    // attributes, ts 0, offset 0, key length -2 (zigzag 3), ...
    let body = [0u8, 0, 0, 3, 0, 0];
    let it = RecordIter {
        r: Reader::new(&[]),
        left: 0,
        base_offset: 0,
        base_timestamp: 0,
        override_timestamp: None,
    };
    assert!(it.read_short_head(&body).is_none());
    assert!(it.read_checked_head(&body).is_err());
    // A header count the bytes cannot hold.
    let body = [0u8, 0, 0, 1, 1, 8];
    assert!(it.read_short_head(&body).is_none());
    assert!(it.read_checked_head(&body).is_err());
}
