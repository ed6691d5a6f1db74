//! Fuzz entry points for the parts of the network crate that consume bytes
//! a broker or another group member controls (see
//! `ferrokafka_protocol::fuzzing` for the codec-level ones). Shared by the
//! cargo-fuzz targets in `fuzz/` and the corpus replay test
//! (`tests/fuzz_corpus.rs`), so a crash found once stays a test.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use ferrokafka_protocol::fuzzing::FUZZ_MAX_DECOMPRESSED;
use ferrokafka_protocol::kafka_protocol::messages::MetadataResponse;
use ferrokafka_protocol::kafka_protocol::protocol::Decodable;
use ferrokafka_protocol::record::DecodeOptions;

use crate::cluster::TopicPartition;
use crate::consumer::assignor::{assign, MemberSubscription};
use crate::consumer::fetch::AbortedTransactionFilter;
use crate::consumer::protocol::{decode_assignment, decode_subscription};
use crate::consumer::records::decode_fetched;
use crate::metadata::wire::metadata_response_from_wire;
use crate::metadata::{Metadata, MetadataConfig};

/// Reads little selector values off the front of an input.
struct Sel<'a>(&'a [u8]);

impl<'a> Sel<'a> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn i64(&mut self) -> i64 {
        let mut v = [0u8; 8];
        for b in &mut v {
            *b = self.byte();
        }
        i64::from_be_bytes(v)
    }
    /// A length-prefixed (one byte) slice.
    fn chunk(&mut self) -> &'a [u8] {
        let n = (self.byte() as usize).min(self.0.len());
        let (c, rest) = self.0.split_at(n);
        self.0 = rest;
        c
    }
}

/// A Fetch partition's `records` through the consumer's columnar decoder,
/// with an arbitrary fetch offset and aborted-transaction list, read
/// committed or not. Checks what the fetcher relies on: the next position
/// never goes backwards and every returned record is at or past the fetch
/// offset.
pub fn fetched_records(data: &[u8]) {
    let mut s = Sel(data);
    let sel = s.byte();
    let fetch_offset = s.i64();
    let aborted: Vec<(i64, i64)> = (0..(sel >> 5)).map(|_| (s.i64() % 4, s.i64())).collect();
    let read_committed = sel & 4 == 4;
    let opts = DecodeOptions {
        verify_crc: sel & 1 == 1,
        max_decompressed: FUZZ_MAX_DECOMPRESSED,
    };
    let mut filter = AbortedTransactionFilter::new(read_committed, aborted);
    if let Ok(d) = decode_fetched(s.0, fetch_offset, opts, &mut filter, None) {
        assert!(
            d.next_offset >= fetch_offset,
            "position went back: {} < {fetch_offset}",
            d.next_offset
        );
        for i in 0..d.records.len() {
            let _ = d.records.headers(i).count();
        }
    }
}

/// A Metadata answer of any version applied to the client's metadata state,
/// then read back the way the producer and consumer read it.
pub fn metadata_update(data: &[u8]) {
    let mut s = Sel(data);
    let version = (s.byte() % 14) as i16;
    let partial = s.byte() & 1 == 1;
    let mut body = Bytes::copy_from_slice(s.0);
    let Ok(wire) = MetadataResponse::decode(&mut body, version) else {
        return;
    };
    let Ok(resp) = metadata_response_from_wire(&wire) else {
        return;
    };
    let md = Metadata::new(MetadataConfig {
        rng_seed: Some(1),
        ..MetadataConfig::default()
    })
    .expect("default config is valid");
    let _ = md.bootstrap(&["127.0.0.1:9092"]);
    for t in resp.topics.iter().take(8) {
        let _ = md.add(&t.name, 0);
    }
    if md.update(1, &resp, partial, 1_000).is_err() {
        return;
    }
    let _ = md.update(2, &resp, !partial, 2_000); // the same answer twice: epochs must not regress into a panic
    let cluster = md.fetch();
    let _ = cluster.controller();
    for topic in cluster.topics() {
        let _ = cluster.topic_id(topic);
        for p in cluster.partitions_for_topic(topic) {
            let _ = cluster.leader_for(topic, p.partition);
            let _ = cluster.leader_epoch_for(topic, p.partition);
        }
        let _ = cluster.available_partition_ids(topic);
    }
    let _ = md.time_to_next_update(3_000);
}

/// The leader's side of a rebalance: members' JoinGroup metadata (any
/// bytes: other clients write them) decoded and run through every assignor,
/// and a SyncGroup assignment decoded. Checks the assignors' contract: no
/// partition is given to two members, and every assigned partition exists.
pub fn group_assignment(data: &[u8]) {
    let mut s = Sel(data);
    let sel = s.byte();
    let members_n = (sel % 6) as usize + 1;
    let mut members = Vec::new();
    for i in 0..members_n {
        // Duplicate member ids happen only if the selector asks: brokers
        // never send them, but a hostile one could.
        let id = if sel & 0x80 == 0x80 {
            format!("m{}", i % 2)
        } else {
            format!("m{i}")
        };
        let instance = (s.byte() & 1 == 1).then(|| format!("i{i}"));
        if let Ok(m) =
            decode_subscription(&id, instance.as_deref(), Bytes::copy_from_slice(s.chunk()))
        {
            members.push(m);
        }
    }
    let _ = decode_assignment(Bytes::copy_from_slice(s.chunk()));
    if members.is_empty() {
        return;
    }
    // Partition counts as metadata would give them: small, some topics
    // missing, some with zero partitions.
    let topics: BTreeSet<&str> = members
        .iter()
        .flat_map(|m| m.topics.iter().map(String::as_str))
        .collect();
    let counts: HashMap<String, i32> = topics
        .iter()
        .enumerate()
        .filter(|(i, _)| (sel >> 3) as usize % 4 != i % 4)
        .map(|(i, t)| (t.to_string(), ((sel as usize + i * 7) % 9) as i32))
        .collect();
    let distinct_ids: BTreeSet<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
    for name in ["range", "roundrobin", "sticky", "cooperative-sticky"] {
        let out = assign(name, &members, &counts).expect("known assignor");
        if distinct_ids.len() != members.len() {
            continue; // duplicate ids: only "no crash" is promised
        }
        check_assignment(name, &members, &counts, &out);
    }
}

fn check_assignment(
    name: &str,
    members: &[MemberSubscription],
    counts: &HashMap<String, i32>,
    out: &crate::consumer::assignor::Assignment,
) {
    let mut seen: BTreeSet<&TopicPartition> = BTreeSet::new();
    for (member, parts) in out {
        let m = members
            .iter()
            .find(|m| &m.member_id == member)
            .expect("assignment names a member");
        for tp in parts {
            assert!(seen.insert(tp), "{name}: {tp:?} assigned twice");
            let n = counts.get(tp.topic.as_ref()).copied().unwrap_or(0);
            assert!(
                (0..n).contains(&tp.partition),
                "{name}: {tp:?} does not exist ({n} partitions)"
            );
            assert!(
                m.topics.iter().any(|t| t.as_str() == tp.topic.as_ref()),
                "{name}: {member} not subscribed to {tp:?}"
            );
        }
    }
}
