//! Writes the seed corpus of the codec-level targets into `fuzz/seeds/<target>/`
//! from our own encoders (the `response` seeds are real broker answers,
//! recorded by `fuzz/capture_seeds.py`). Run: `cargo +nightly run --example seeds`
//! (any toolchain works; it is a plain binary).
use std::fs;
use std::path::PathBuf;

use ferrokafka_net::cluster::TopicPartition;
use ferrokafka_net::consumer::protocol::{encode_assignment, encode_subscription};
use ferrokafka_protocol::compression::{compress, Compression};
use ferrokafka_protocol::frame::{client_version_range, decode_response_header, response_header_version, CORE_APIS};
use ferrokafka_protocol::fuzzing::response_prefix;
use ferrokafka_protocol::record::{
    control_batch, encode_legacy_message, ControlRecord, ControlRecordType, Header, RecordBatchBuilder,
};

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), data).unwrap();
}

fn batch(codec: Compression, base: i64, n: usize, headers: bool) -> Vec<u8> {
    let mut b = RecordBatchBuilder::new(codec).base_offset(base).producer(7, 0, base as i32);
    for i in 0..n {
        let v = format!("value-{i}-{}", "x".repeat(i % 13));
        let k = format!("k{i}");
        let h = [Header { key: "h", value: Some(b"1") }, Header { key: "null", value: None }];
        b.append(1_700_000_000_000 + i as i64, (i % 3 != 0).then_some(k.as_bytes()), (i % 5 != 4).then_some(v.as_bytes()), if headers { &h } else { &[] })
            .unwrap();
    }
    b.finish().unwrap().to_vec()
}

fn main() {
    let codecs = [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
    // record_batches / fetched_records: selector byte(s) then a records blob.
    for (ci, &c) in codecs.iter().enumerate() {
        for &(n, headers) in &[(1usize, false), (5, true), (40, false)] {
            let blob = batch(c, 10, n, headers);
            for sel in [0u8, 1, 3] {
                write("record_batches", &format!("{}-{n}-{sel}", c.name()), &[&[sel][..], &blob].concat());
            }
            let mut f = vec![0b0000_0101u8]; // crc on, read_committed, no aborted list
            f.extend_from_slice(&12i64.to_be_bytes()); // fetch offset inside the batch
            f.extend_from_slice(&blob);
            write("fetched_records", &format!("{}-{n}", c.name()), &f);
        }
        // Two batches, the second cut short (what a broker sends at max_bytes).
        let mut two = batch(c, 0, 3, false);
        let second = batch(c, 3, 3, true);
        two.extend_from_slice(&second[..second.len() - 5]);
        write("record_batches", &format!("{}-truncated", c.name()), &[&[1u8][..], &two].concat());
        if c != Compression::None {
            let mut out = Vec::new();
            compress(c, None, &b"abcabcabc-kafka-kafka-kafka".repeat(20), &mut out).unwrap();
            write("decompression", c.name(), &[&[(ci as u8 + 3) % 4][..], &out].concat());
        }
    }
    // Transaction marker and an aborted run for read_committed.
    let marker = control_batch(ControlRecord { version: 0, kind: ControlRecordType::Abort }, 3, 1, 7, 0).unwrap();
    let mut txn = batch(Compression::None, 0, 3, false);
    txn.extend_from_slice(&marker);
    write("record_batches", "control", &[&[3u8][..], &txn].concat());
    let mut f = vec![0b0010_0101u8];
    f.extend_from_slice(&0i64.to_be_bytes());
    f.extend_from_slice(&7i64.to_be_bytes()); // aborted producer id (mod 4 in the target)
    f.extend_from_slice(&0i64.to_be_bytes()); // first offset
    f.extend_from_slice(&txn);
    write("fetched_records", "aborted", &f);
    // Legacy message sets, v0 and v1, plain and a gzip wrapper.
    let mut legacy = Vec::new();
    for (i, magic) in [0i8, 1, 1].iter().enumerate() {
        let m = encode_legacy_message(*magic, i as i64, 0, 1_600_000_000_000, Some(b"k"), Some(b"legacy"));
        legacy.extend_from_slice(&m);
    }
    write("record_batches", "legacy", &[&[1u8][..], &legacy].concat());
    let mut inner = Vec::new();
    compress(Compression::Gzip, None, &legacy, &mut inner).unwrap();
    let wrapper = encode_legacy_message(1, 2, 1, 1_600_000_000_000, None, Some(&inner));
    write("record_batches", "legacy-gzip-wrapper", &[&[1u8][..], &wrapper].concat());
    // Kafka framing quirks: xerial snappy and raw snappy.
    let mut x = Vec::new();
    x.extend_from_slice(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01");
    let raw = ferrokafka_protocol::compression::snappy_raw_compress(b"hello hello hello").unwrap();
    x.extend_from_slice(&(raw.len() as i32).to_be_bytes());
    x.extend_from_slice(&raw);
    write("decompression", "snappy-xerial", &[&[1u8][..], &x].concat());
    write("decompression", "snappy-raw", &[&[1u8][..], &raw].concat());
    // SCRAM: RFC 7677's server messages, with our fixed client nonce.
    let first = b"r=fuzznonce%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=16";
    write("sasl_scram", "rfc7677", &[&[0u8][..], first, &[0xff], b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="].concat());
    write("sasl_scram", "error", &[&[1u8][..], b"e=invalid-proof"].concat());
    // group_assignment: selector, then per member (instance byte, len, subscription), then an assignment.
    let owned = vec![TopicPartition::new("a", 0), TopicPartition::new("b", 1)];
    for v in 0..=3i16 {
        let mut g = vec![2u8]; // three members
        for (i, topics) in [vec!["a".to_string(), "b".to_string()], vec!["a".to_string()], vec!["b".to_string(), "c".to_string()]].iter().enumerate() {
            let own = if i == 0 { &owned[..] } else { &[][..] };
            let sub = encode_subscription(topics, own, 3, None, None, v).unwrap();
            g.push(i as u8 & 1);
            g.push(sub.len() as u8);
            g.extend_from_slice(&sub);
        }
        let a = encode_assignment(&owned, None, v.min(3)).unwrap();
        g.push(a.len() as u8);
        g.extend_from_slice(&a);
        write("group_assignment", &format!("v{v}"), &g);
    }
    // response / metadata_update: real answers recorded by capture_seeds.py,
    // plus a zero-filled frame for every API and version the client speaks
    // (a valid, mostly empty message for many of them).
    if let Some(dir) = std::env::args().nth(1) {
        let mut names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        // frames: runs of length-prefixed answers, cut at several chunk sizes.
        for (i, group) in names.chunks(8).enumerate() {
            let mut stream = vec![(i % 16) as u8 | ((i as u8 & 1) << 4)];
            for name in group {
                let frame = fs::read(PathBuf::from(&dir).join(name)).unwrap();
                if frame.len() < 60_000 {
                    stream.extend_from_slice(&(frame.len() as i32).to_be_bytes());
                    stream.extend_from_slice(&frame);
                }
            }
            write("frames", &format!("stream-{i}"), &stream);
        }
        for name in names {
            let mut it = name.split('-').map(|x| x.parse::<i16>().unwrap());
            let (key, version) = (it.next().unwrap(), it.next().unwrap());
            let frame = fs::read(PathBuf::from(&dir).join(&name)).unwrap();
            if let Some(prefix) = response_prefix(key, version) {
                write("response", &name, &[&prefix[..], &frame].concat());
            }
            if key == 3 {
                let hv = response_header_version(key, version).unwrap();
                let mut body = bytes::Bytes::from(frame);
                decode_response_header(&mut body, hv).unwrap();
                write("metadata_update", &name, &[&[version as u8, 0][..], &body].concat());
            }
        }
    }
    for key in CORE_APIS {
        let key = *key as i16;
        let (min, max) = client_version_range(key).unwrap();
        for v in min..=max {
            let mut f = response_prefix(key, v).unwrap().to_vec();
            f.extend_from_slice(&1i32.to_be_bytes());
            if response_header_version(key, v).unwrap() >= 1 {
                f.push(0); // no tagged fields
            }
            f.extend_from_slice(&[0u8; 48]);
            write("response", &format!("{key}-{v}-zeros"), &f);
        }
    }
    println!("seeds written under {}/seeds", env!("CARGO_MANIFEST_DIR"));
}
