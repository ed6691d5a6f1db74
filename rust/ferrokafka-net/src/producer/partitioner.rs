//! Partition choice for records without an explicit partition.
//!
//! * Keyed records: Java's `murmur2` over the serialized key, made positive
//!   with `& 0x7fffffff` (not `abs`, which fails on i32::MIN) and taken modulo
//!   the topic's partition count. Same answer as the Java client and
//!   librdkafka's `murmur2_random` partitioner for every key, so keyed data
//!   lands on the same partitions whichever client wrote it.
//! * Unkeyed records: the built-in sticky partitioner of KIP-480 with the
//!   adaptive refinements of KIP-794: stay on one partition until about
//!   `batch_size` bytes went to it (so batches fill up and linger does not
//!   cost latency), then switch to another partition, chosen at random with
//!   weights that favour partitions whose leader has a shorter queue.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::Rng;

use crate::error::Error;

/// Kafka's murmur2 (`org.apache.kafka.common.utils.Utils.murmur2`), bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    // Java mixes the length as a signed int; for the sizes a key can have
    // that is the same bit pattern as u32.
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    // The Java switch falls through from case 3 to case 1.
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// `Utils.toPositive`: clears the sign bit (abs would overflow on MIN).
#[inline]
pub fn to_positive(n: i32) -> i32 {
    n & 0x7fff_ffff
}

/// The partition of a keyed record: `toPositive(murmur2(key)) % num_partitions`.
pub fn partition_for_key(key: &[u8], num_partitions: usize) -> i32 {
    debug_assert!(num_partitions > 0);
    (to_positive(murmur2(key)) as usize % num_partitions.max(1)) as i32
}

/// Per-topic sticky state of the built-in partitioner (KIP-480/KIP-794).
///
/// Not thread-safe by itself: the accumulator keeps one per topic under the
/// topic's lock, so choosing and appending happen as one step (otherwise two
/// threads could both see "batch full" and switch twice).
#[derive(Debug)]
pub struct StickyPartitioner {
    sticky_batch_size: usize,
    current: Option<i32>,
    produced_bytes: usize,
    /// Cumulative weights over `load_partitions` (KIP-794). Empty = no load
    /// information yet: choose uniformly among available partitions.
    cumulative_weights: Vec<u64>,
    load_partitions: Vec<i32>,
}

impl StickyPartitioner {
    pub fn new(sticky_batch_size: usize) -> Self {
        StickyPartitioner {
            sticky_batch_size: sticky_batch_size.max(1),
            current: None,
            produced_bytes: 0,
            cumulative_weights: Vec::new(),
            load_partitions: Vec::new(),
        }
    }

    /// The partition the next unkeyed record goes to. `available` are the
    /// partitions with a known, reachable leader; `num_partitions` the topic's
    /// partition count (used when none is available, so records queue on
    /// some partition and wait for its leader instead of failing at once).
    pub fn partition(
        &mut self,
        available: &[i32],
        num_partitions: usize,
        rng: &mut impl Rng,
    ) -> i32 {
        if let Some(p) = self.current {
            // A partition that became unavailable loses the stickiness, unless
            // nothing is available at all.
            if (available.is_empty() || available.contains(&p) || (p as usize) >= num_partitions)
                && (p as usize) < num_partitions.max(1)
            {
                return p;
            }
        }
        let p = self.next_partition(available, num_partitions, rng);
        self.current = Some(p);
        self.produced_bytes = 0;
        p
    }

    /// Account for `bytes` appended to the current partition; switch once the
    /// sticky batch size is reached (KIP-794 switches on bytes produced, not
    /// on the batch being sent, so the batch that just filled is not reused).
    /// `enforce_switch` is set when the append created a new batch although
    /// the old one was not full (it was drained), matching the Java client.
    pub fn on_append(&mut self, partition: i32, bytes: usize, enforce_switch: bool) {
        if self.current != Some(partition) {
            return;
        }
        self.produced_bytes += bytes;
        if self.produced_bytes >= self.sticky_batch_size || enforce_switch {
            self.current = None;
            self.produced_bytes = 0;
        }
    }

    /// KIP-794 load statistics: `queue_sizes[i]` is the number of batches
    /// queued for `partitions[i]`'s leader. Weight = (max + 1 - size), so the
    /// emptiest queues are the likeliest targets but none is starved.
    pub fn update_load_stats(&mut self, partitions: &[i32], queue_sizes: &[usize]) {
        self.cumulative_weights.clear();
        self.load_partitions.clear();
        if partitions.len() != queue_sizes.len() || partitions.is_empty() {
            return;
        }
        let max = *queue_sizes.iter().max().unwrap_or(&0) as u64;
        // All equal: no information, fall back to uniform choice.
        if queue_sizes.iter().all(|&q| q as u64 == max) {
            return;
        }
        let mut acc = 0u64;
        for (&p, &q) in partitions.iter().zip(queue_sizes) {
            acc += max + 1 - q as u64;
            self.cumulative_weights.push(acc);
            self.load_partitions.push(p);
        }
    }

    fn next_partition(&self, available: &[i32], num_partitions: usize, rng: &mut impl Rng) -> i32 {
        if let Some(&total) = self.cumulative_weights.last() {
            let r = rng.gen_range(0..total);
            // First cumulative weight strictly above r.
            let idx = self.cumulative_weights.partition_point(|&w| w <= r);
            return self.load_partitions[idx.min(self.load_partitions.len() - 1)];
        }
        if !available.is_empty() {
            return available[rng.gen_range(0..available.len())];
        }
        rng.gen_range(0..num_partitions.max(1)) as i32
    }

    pub fn current(&self) -> Option<i32> {
        self.current
    }
}

/// Where one record goes, as `Partitioner::partition` chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionChoice {
    pub partition: i32,
    /// Chosen by the topic's sticky partitioner (no key, no explicit
    /// partition): its bytes count towards the next switch (`on_append`).
    pub sticky: bool,
}

/// The producer's one partition-choice entry point: an explicit partition
/// (range-checked), else `partition_for_key` for a key, else the topic's
/// sticky partitioner (KIP-480/KIP-794). Holds the per-topic sticky state and
/// the random source; pure (no clock, no locks), so the producer keeps it in
/// its state machine and choosing and appending happen under one lock hold.
pub struct Partitioner {
    sticky_batch_size: usize,
    sticky: HashMap<String, StickyPartitioner>,
    rng: StdRng,
}

impl Partitioner {
    pub fn new(sticky_batch_size: usize, rng: StdRng) -> Self {
        Partitioner {
            sticky_batch_size,
            sticky: HashMap::new(),
            rng,
        }
    }

    /// The partition of one record of `topic` (`num_partitions` partitions,
    /// `available` with a reachable leader). `Error::Config` when an explicit
    /// partition is out of range.
    pub fn partition(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        num_partitions: usize,
        available: &[i32],
    ) -> Result<PartitionChoice, Error> {
        let explicit = |p| PartitionChoice {
            partition: p,
            sticky: false,
        };
        match (partition, key) {
            (Some(p), _) if p < 0 || p as usize >= num_partitions => Err(Error::Config {
                key: "partition".into(),
                detail: format!(
                    "{p} is not in the range [0...{}] of topic {topic}",
                    num_partitions as i64 - 1
                ),
            }),
            (Some(p), _) => Ok(explicit(p)),
            (None, Some(k)) => Ok(explicit(partition_for_key(k, num_partitions))),
            (None, None) => {
                // Look up before inserting: `entry` would allocate the topic
                // name on every unkeyed record (this is `send`'s hot path).
                if !self.sticky.contains_key(topic) {
                    self.sticky.insert(
                        topic.to_string(),
                        StickyPartitioner::new(self.sticky_batch_size),
                    );
                }
                let sp = self.sticky.get_mut(topic).expect("inserted above");
                Ok(PartitionChoice {
                    partition: sp.partition(available, num_partitions, &mut self.rng),
                    sticky: true,
                })
            }
        }
    }

    /// `bytes` were appended where `choice` said: a sticky choice counts
    /// towards the topic's next switch.
    pub fn on_append(&mut self, topic: &str, choice: PartitionChoice, bytes: usize) {
        if choice.sticky {
            if let Some(sp) = self.sticky.get_mut(topic) {
                sp.on_append(choice.partition, bytes, false);
            }
        }
    }

    /// KIP-794: weight each topic's sticky choice by the batches queued per
    /// available partition (`available(topic)`, `queued(topic, partition)`),
    /// so partitions behind slow leaders get less new data.
    pub fn update_load_stats(
        &mut self,
        available: &mut dyn FnMut(&str) -> Vec<i32>,
        queued: &dyn Fn(&str, i32) -> usize,
    ) {
        for (topic, sp) in self.sticky.iter_mut() {
            let parts = available(topic);
            let sizes: Vec<usize> = parts.iter().map(|&p| queued(topic, p)).collect();
            sp.update_load_stats(&parts, &sizes);
        }
    }

    /// Topics with sticky state (those that got unkeyed records).
    pub fn has_sticky_topics(&self) -> bool {
        !self.sticky.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    // Vectors computed with the Java client's Utils.murmur2 (also pinned by
    // librdkafka's rdmurmur2.c unit test, which checks itself against Java).
    #[test]
    fn murmur2_matches_java() {
        assert_eq!(murmur2(b"21"), -973932308);
        assert_eq!(murmur2(b"foobar"), -790332482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58897971
        );
        assert_eq!(murmur2(b"abc"), 479470107);
    }

    #[test]
    fn keyed_partition_is_positive_modulo() {
        for key in [&b""[..], b"k", b"\xff\xfe", "ключ".as_bytes()] {
            let p = partition_for_key(key, 7);
            assert!((0..7).contains(&p));
            assert_eq!(p, (to_positive(murmur2(key)) % 7));
        }
        assert_eq!(to_positive(i32::MIN), 0);
    }

    #[test]
    fn sticky_stays_until_batch_size_then_switches() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut sp = StickyPartitioner::new(100);
        let avail = [0, 1, 2, 3];
        let first = sp.partition(&avail, 4, &mut rng);
        for _ in 0..9 {
            assert_eq!(sp.partition(&avail, 4, &mut rng), first);
            sp.on_append(first, 10, false);
        }
        assert_eq!(sp.partition(&avail, 4, &mut rng), first);
        sp.on_append(first, 10, false); // reaches 100 bytes
        assert_eq!(sp.current(), None);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let p = sp.partition(&avail, 4, &mut rng);
            seen.insert(p);
            sp.on_append(p, 100, false);
        }
        assert_eq!(seen.len(), 4, "every available partition gets traffic");
    }

    #[test]
    fn sticky_leaves_unavailable_partition() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut sp = StickyPartitioner::new(1000);
        let p = sp.partition(&[0, 1, 2], 3, &mut rng);
        let rest: Vec<i32> = [0, 1, 2].into_iter().filter(|&x| x != p).collect();
        let q = sp.partition(&rest, 3, &mut rng);
        assert_ne!(p, q);
        // No partition available: stay where we are and queue.
        assert_eq!(sp.partition(&[], 3, &mut rng), q);
    }

    #[test]
    fn adaptive_weights_favour_short_queues() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut sp = StickyPartitioner::new(1);
        sp.update_load_stats(&[0, 1], &[0, 9]); // weights 10 and 1
        let mut counts = [0usize; 2];
        for _ in 0..11_000 {
            let p = sp.partition(&[0, 1], 2, &mut rng);
            counts[p as usize] += 1;
            sp.on_append(p, 1, false);
        }
        assert!(counts[0] > 8 * counts[1], "{counts:?}");
        assert!(counts[1] > 0, "no partition is starved: {counts:?}");
    }

    #[test]
    fn partitioner_entry_point_explicit_keyed_sticky() {
        let mut p = Partitioner::new(20, StdRng::seed_from_u64(5));
        let avail = [0, 1, 2];
        let err = p.partition("t", Some(3), None, 3, &avail).unwrap_err();
        assert!(matches!(err, Error::Config { ref key, .. } if key == "partition"));
        let c = p.partition("t", Some(2), Some(b"k"), 3, &avail).unwrap();
        assert_eq!(
            (c.partition, c.sticky),
            (2, false),
            "explicit beats the key"
        );
        let c = p.partition("t", None, Some(b"k"), 3, &avail).unwrap();
        assert_eq!((c.partition, c.sticky), (partition_for_key(b"k", 3), false));
        assert!(
            !p.has_sticky_topics(),
            "keyed records leave no sticky state"
        );
        let first = p.partition("t", None, None, 3, &avail).unwrap();
        assert!(first.sticky);
        // Keyed appends do not count towards the sticky switch.
        p.on_append("t", c, 100);
        assert_eq!(p.partition("t", None, None, 3, &avail).unwrap(), first);
        p.on_append("t", first, 20);
        assert_eq!(p.sticky["t"].current(), None, "20 bytes: switch");
    }
}
