//! `RecordIter::read_short_head` and `visit_plain` against the checked reader (issue 17's
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

/// An iterator over nothing, for reading records' bodies given apart.
fn no_records() -> RecordIter<'static> {
    RecordIter {
        r: Reader::new(&[]),
        left: 0,
        base_offset: 0,
        base_timestamp: 0,
        override_timestamp: None,
    }
}

#[test]
fn a_malformed_short_record_falls_to_the_checked_reader_and_its_error() {
    // attributes, ts 0, offset 0, key length -2 (zigzag 3), ...
    let body = [0u8, 0, 0, 3, 0, 0];
    let it = no_records();
    assert!(it.read_short_head(&body).is_none());
    assert!(it.read_checked_head(&body).is_err());
    // A header count the bytes cannot hold.
    let body = [0u8, 0, 0, 1, 1, 8];
    assert!(it.read_short_head(&body).is_none());
    assert!(it.read_checked_head(&body).is_err());
}

/// What a visitor saw: (offset, timestamp, key, value, headers).
type Seen = (
    i64,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

#[derive(Default)]
struct Collect(Vec<Seen>);

impl<'b> RecordVisitor<'b> for Collect {
    fn record(
        &mut self,
        offset: i64,
        ts: i64,
        key: Option<&'b [u8]>,
        value: Option<&'b [u8]>,
    ) -> bool {
        self.0.push((
            offset,
            ts,
            key.map(<[u8]>::to_vec),
            value.map(<[u8]>::to_vec),
            Vec::new(),
        ));
        true
    }
    fn header(&mut self, key: &'b str, value: Option<&'b [u8]>) {
        let last = self.0.last_mut().expect("a header after its record");
        last.4.push((key.to_string(), value.map(<[u8]>::to_vec)));
    }
    fn end_record(&mut self) {}
}

/// `visit` (the consumer's decode: header-less short records handed over
/// by `visit_plain`, the rest by the head readers) reports exactly what
/// the iterator reads, record for record; `visit_plain` takes the
/// header-less records with short varints and nothing else.
#[test]
fn visit_reports_what_the_iterator_reads_and_the_plain_path_takes_only_plain_records() {
    let mut b = RecordBatchBuilder::new(Compression::None).base_offset(40);
    let mut n = 0;
    for (i, d) in [0i64, 63, 64, 8191, 8192, -65].into_iter().enumerate() {
        for len in [0usize, 1, 63, 64, 8191, 8192] {
            let value = vec![i as u8; len];
            let headers = [Header {
                key: "h",
                value: None,
            }];
            // Every size with headers and without, across the deltas.
            let h: &[Header<'_>] = if (len + i) % 2 == 0 { &headers } else { &[] };
            b.append(
                5_000 + d,
                (len != 1).then_some(&value[..len.min(9)]),
                Some(&value),
                h,
            )
            .unwrap();
            b.append(5_000 + d, None, None, &[]).unwrap();
            n += 2;
        }
    }
    let bytes = b.finish().unwrap();
    let batch = RecordBatch::parse_exact(&bytes, &DecodeOptions::default()).unwrap();
    let payload = batch.payload(&DecodeOptions::default()).unwrap();
    let mut seen = Collect::default();
    batch.records(&payload).unwrap().visit(&mut seen).unwrap();
    let read: Vec<Seen> = batch
        .records(&payload)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            let hs = r
                .headers
                .iter()
                .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
                .collect();
            (
                r.offset,
                r.timestamp,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
                hs,
            )
        })
        .collect();
    assert_eq!(seen.0.len(), n);
    assert_eq!(seen.0, read);
    // Which records the plain path took: header-less, short varints only.
    let mut it = batch.records(&payload).unwrap();
    let mut plain = Collect::default();
    for (_, ts, _, value, headers) in &read {
        let body = it.record_body().unwrap();
        let short = value.as_ref().is_none_or(|v| v.len() < 8192) && (ts - 5_000).abs() < 8192;
        assert_eq!(
            it.visit_plain(body, &mut plain),
            headers.is_empty() && short
        );
    }
    assert!(
        plain.0.len() > n / 2,
        "{} of {n} took the plain path",
        plain.0.len()
    );
    // Malformed or not plain: left to the general path (which rejects the
    // first two when it reads them).
    let it = no_records();
    for body in [
        &[0u8, 0, 0, 3, 0, 0][..], // key length -2
        &[0, 0, 0, 1, 1, 0, 9],    // a byte after the header count
        &[0, 0, 0, 1, 1, 2, 2, 0], // one header
        &[0, 0, 0, 1, 1],          // no header count
    ] {
        assert!(!it.visit_plain(body, &mut plain), "{body:?}");
    }
}
