//! Partition choice for records without an explicit partition: one
//! [`Partitioner`] chosen from the `partitioner` option, applied with the
//! topic's partition count as the metadata has it at `send` time (so
//! partitions added to a topic are used once the metadata shows them).
//!
//! * Keyed records (the default, `murmur2`): Java's `murmur2` over the
//!   serialized key, made positive with `& 0x7fffffff` (not `abs`, which
//!   fails on i32::MIN) and taken modulo the partition count. Same answer as
//!   the Java client and librdkafka for every key, so keyed data lands on the
//!   same partitions whichever client wrote it.
//! * Unkeyed records: the built-in sticky partitioner of KIP-480 with the
//!   adaptive refinements of KIP-794: stay on one partition until about
//!   `batch_size` bytes went to it (so batches fill up and linger does not
//!   cost latency), then switch to another partition, chosen at random with
//!   weights that favour partitions whose leader has a shorter queue.
//!   librdkafka does the same for the `*_random` partitioners (its
//!   `sticky.partitioning.linger.ms`), which is why they share this path.
//! * The other librdkafka names hash with CRC32 (`consistent*`) or FNV-1a
//!   (`fnv1a*`) as librdkafka does; `round_robin` is Java's
//!   `RoundRobinPartitioner`.

use rustc_hash::FxHashMap;

use rand::rngs::StdRng;
use rand::Rng;

use crate::error::Error;

/// The `partitioner` option. Names and behaviour are librdkafka's (and for
/// `round_robin` Java's `RoundRobinPartitioner`); "hash" below is the
/// partitioner's hash of the key bytes modulo the partition count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Partitioner {
    /// murmur2 hash of the key; null keys sticky: Java's default partitioner
    /// and librdkafka's `murmur2_random`. Accepted as `murmur2` too, the
    /// default name of the API: librdkafka's `murmur2` would send every
    /// unkeyed record to one fixed partition, which the Java semantics of
    /// ferrokafka's default do not do (the one difference from librdkafka).
    #[default]
    Murmur2,
    /// CRC32 hash of the key; a null key hashes as the empty key.
    Consistent,
    /// CRC32 hash of the key; null and empty keys sticky.
    ConsistentRandom,
    /// FNV-1a hash of the key; a null key hashes as the empty key.
    Fnv1a,
    /// FNV-1a hash of the key; null keys sticky.
    Fnv1aRandom,
    /// A random partition per keyed record; null keys sticky.
    Random,
    /// Every record (keyed or not) to the next available partition in turn.
    RoundRobin,
}

impl Partitioner {
    /// Every accepted name, in the order they are documented: the one list
    /// the configuration layer validates `partitioner` against.
    pub const ALL: &'static [(&'static str, Partitioner)] = &[
        ("murmur2", Partitioner::Murmur2),
        ("consistent", Partitioner::Consistent),
        ("consistent_random", Partitioner::ConsistentRandom),
        ("murmur2_random", Partitioner::Murmur2),
        ("fnv1a", Partitioner::Fnv1a),
        ("fnv1a_random", Partitioner::Fnv1aRandom),
        ("random", Partitioner::Random),
        ("round_robin", Partitioner::RoundRobin),
    ];

    /// The names of `ALL`, for the option table's choices (a test keeps the
    /// two lists equal).
    pub const NAMES: &'static [&'static str] = &[
        "murmur2",
        "consistent",
        "consistent_random",
        "murmur2_random",
        "fnv1a",
        "fnv1a_random",
        "random",
        "round_robin",
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
    }

    /// Whether a record with this key goes to the topic's sticky partition.
    pub fn is_sticky(self, key: Option<&[u8]>) -> bool {
        match self {
            Partitioner::Murmur2 | Partitioner::Fnv1aRandom | Partitioner::Random => key.is_none(),
            Partitioner::ConsistentRandom => key.is_none_or(<[u8]>::is_empty),
            Partitioner::Consistent | Partitioner::Fnv1a | Partitioner::RoundRobin => false,
        }
    }

    /// Whether choosing the partition of a record with this explicit
    /// `partition` and `key` looks at the available partitions: explicit
    /// partitions and key hashes do not, so `send` can skip listing them.
    pub fn uses_available(self, partition: Option<i32>, key: Option<&[u8]>) -> bool {
        partition.is_none()
            && (self.is_sticky(key)
                || matches!(self, Partitioner::RoundRobin | Partitioner::Random))
    }

    /// The partition of a record decided by its key alone, or `None` when the
    /// topic's [`TopicPartitioner`] decides (sticky, round robin).
    /// `available`: partitions with a known leader (may be empty).
    pub fn partition_by_key(
        self,
        key: Option<&[u8]>,
        available: &[i32],
        num_partitions: usize,
        rng: &mut impl Rng,
    ) -> Option<i32> {
        if self == Partitioner::Random && !self.is_sticky(key) {
            // librdkafka draws among all partitions and redraws once when the
            // first draw has no leader; drawing among the available ones
            // (when there are any) is the same distribution without the miss.
            return Some(if available.is_empty() {
                rng.gen_range(0..num_partitions.max(1)) as i32
            } else {
                available[rng.gen_range(0..available.len())]
            });
        }
        // Sticky and round-robin choices are `None` there too.
        self.hash_partition(key, num_partitions)
    }

    /// The partition the key alone decides, whatever the cluster's state;
    /// `None` when the choice depends on state (sticky, round robin,
    /// random). `send_many` groups a keyed call by it.
    pub fn hash_partition(self, key: Option<&[u8]>, num_partitions: usize) -> Option<i32> {
        if self.is_sticky(key) || matches!(self, Partitioner::RoundRobin | Partitioner::Random) {
            return None;
        }
        let n = num_partitions.max(1);
        let key = key.unwrap_or_default();
        Some(match self {
            Partitioner::Murmur2 => partition_for_key(key, n),
            Partitioner::Consistent | Partitioner::ConsistentRandom => {
                (crc32fast::hash(key) as usize % n) as i32
            }
            // librdkafka (Sarama-compatible): the hash as a signed 32-bit
            // number, C's `%`, then the sign dropped, i.e. |hash| mod n.
            Partitioner::Fnv1a | Partitioner::Fnv1aRandom => {
                ((fnv1a(key) as i32).unsigned_abs() as usize % n) as i32
            }
            Partitioner::Random | Partitioner::RoundRobin => unreachable!("handled above"),
        })
    }
}

/// Per-topic state of the partitioners that need one: the sticky partition
/// (KIP-480/794) and Java's round-robin counter. Kept under the producer's
/// lock, so choosing and appending happen as one step.
#[derive(Debug)]
pub struct TopicPartitioner {
    sticky: StickyPartitioner,
    round_robin_next: u32,
}

impl TopicPartitioner {
    pub fn new(sticky_batch_size: usize) -> Self {
        TopicPartitioner {
            sticky: StickyPartitioner::new(sticky_batch_size),
            round_robin_next: 0,
        }
    }

    /// The partition of a record `kind.partition_by_key` left undecided.
    pub fn partition(
        &mut self,
        kind: Partitioner,
        available: &[i32],
        num_partitions: usize,
        rng: &mut impl Rng,
    ) -> i32 {
        if kind != Partitioner::RoundRobin {
            return self.sticky.partition(available, num_partitions, rng);
        }
        // Java's RoundRobinPartitioner: a per-topic counter over the
        // available partitions, or over all of them when none is available.
        let next = (self.round_robin_next & 0x7fff_ffff) as usize;
        self.round_robin_next = self.round_robin_next.wrapping_add(1);
        if available.is_empty() {
            (next % num_partitions.max(1)) as i32
        } else {
            available[next % available.len()]
        }
    }

    /// See [`StickyPartitioner::on_append`]; call only for records that went
    /// to the sticky partition (`Partitioner::is_sticky`).
    pub fn on_append(&mut self, partition: i32, bytes: usize, enforce_switch: bool) {
        self.sticky.on_append(partition, bytes, enforce_switch);
    }

    /// See [`StickyPartitioner::update_load_stats`].
    pub fn update_load_stats(&mut self, partitions: &[i32], queue_sizes: &[usize]) {
        self.sticky.update_load_stats(partitions, queue_sizes);
    }
}

/// 32-bit FNV-1a, as librdkafka's `rd_fnv1a`.
pub fn fnv1a(data: &[u8]) -> u32 {
    const PRIME: u32 = 0x0100_0193;
    const OFFSET: u32 = 0x811c_9dc5;
    data.iter()
        .fold(OFFSET, |h, &b| (h ^ b as u32).wrapping_mul(PRIME))
}

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

/// Where one record goes, as `Partitioners::partition` chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionChoice {
    pub partition: i32,
    /// Chosen by the topic's sticky partitioner (no key, no explicit
    /// partition, a sticky `Partitioner`): its bytes count towards the next
    /// switch (`on_append`).
    pub sticky: bool,
}

/// The producer's one entry point for choosing partitions: the configured
/// [`Partitioner`], the per-topic state it needs and the random source.
/// Kept under the producer's lock, so choosing and appending are one step.
#[derive(Debug)]
pub struct Partitioners {
    kind: Partitioner,
    sticky_batch_size: usize,
    topics: FxHashMap<String, TopicPartitioner>,
    rng: StdRng,
}

impl Partitioners {
    pub fn new(kind: Partitioner, sticky_batch_size: usize, rng: StdRng) -> Self {
        Partitioners {
            kind,
            sticky_batch_size,
            topics: FxHashMap::default(),
            rng,
        }
    }

    /// The partition of one record of `topic` (`num_partitions` partitions,
    /// `available` with a reachable leader): the explicit one, else the
    /// key's, else the topic's sticky or round-robin choice. `Error::Config`
    /// when an explicit partition is out of range.
    pub fn partition(
        &mut self,
        topic: &str,
        partition: Option<i32>,
        key: Option<&[u8]>,
        num_partitions: usize,
        available: &[i32],
    ) -> Result<PartitionChoice, Error> {
        let fixed = |p| PartitionChoice {
            partition: p,
            sticky: false,
        };
        if let Some(p) = partition {
            if p < 0 || p as usize >= num_partitions {
                return Err(Error::Config {
                    key: "partition".into(),
                    detail: format!(
                        "{p} is not in the range [0...{}] of topic {topic}",
                        num_partitions as i64 - 1
                    ),
                });
            }
            return Ok(fixed(p));
        }
        if let Some(p) = self
            .kind
            .partition_by_key(key, available, num_partitions, &mut self.rng)
        {
            return Ok(fixed(p));
        }
        let sticky = self.kind.is_sticky(key);
        // One lookup for a known topic (`send`'s hot path); `entry` would
        // allocate the topic name on every unkeyed record.
        if let Some(tp) = self.topics.get_mut(topic) {
            let partition = tp.partition(self.kind, available, num_partitions, &mut self.rng);
            return Ok(PartitionChoice { partition, sticky });
        }
        let mut tp = TopicPartitioner::new(self.sticky_batch_size);
        let partition = tp.partition(self.kind, available, num_partitions, &mut self.rng);
        self.topics.insert(topic.to_string(), tp);
        Ok(PartitionChoice { partition, sticky })
    }

    /// `bytes` were appended where `choice` said: a sticky choice counts
    /// towards the topic's next switch.
    pub fn on_append(&mut self, topic: &str, choice: PartitionChoice, bytes: usize) {
        if choice.sticky {
            if let Some(tp) = self.topics.get_mut(topic) {
                tp.on_append(choice.partition, bytes, false);
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
        for (topic, tp) in self.topics.iter_mut() {
            let parts = available(topic);
            let sizes: Vec<usize> = parts.iter().map(|&p| queued(topic, p)).collect();
            tp.update_load_stats(&parts, &sizes);
        }
    }

    /// The configured partitioner.
    pub fn kind(&self) -> Partitioner {
        self.kind
    }

    /// The run path of `send_many` (`ProducerCore::extend_run`): the
    /// partition `topic`'s next sticky record goes to, and how many more
    /// bytes it takes before the partitioner switches; `None` when no
    /// sticky partition is chosen (the next record must go through
    /// `partition`, which chooses one).
    pub fn sticky_run(&self, topic: &str) -> Option<(i32, usize)> {
        let s = &self.topics.get(topic)?.sticky;
        let p = s.current?;
        Some((p, s.sticky_batch_size.saturating_sub(s.produced_bytes)))
    }

    /// Topics with per-topic state (those that got unkeyed records).
    pub fn has_sticky_topics(&self) -> bool {
        !self.topics.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn names_list_every_partitioner_name() {
        let all: Vec<&str> = Partitioner::ALL.iter().map(|(n, _)| *n).collect();
        assert_eq!(all, Partitioner::NAMES);
    }

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
    fn names_round_trip_and_unknown_names_are_refused() {
        for &(name, p) in Partitioner::ALL {
            assert_eq!(Partitioner::from_name(name), Some(p));
        }
        assert_eq!(Partitioner::ALL.len(), 8);
        assert_eq!(
            Partitioner::from_name("murmur2_random"),
            Some(Partitioner::Murmur2)
        );
        assert_eq!(Partitioner::from_name("fancy"), None);
        assert_eq!(Partitioner::from_name("Murmur2"), None);
        assert_eq!(Partitioner::default(), Partitioner::Murmur2);
    }

    // Published check values: CRC-32 of "123456789" (the CRC catalogue's
    // `check`), FNV-1a 32 of "", "a" and "foobar" (the FNV reference suite).
    #[test]
    fn hashes_match_reference_vectors() {
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn keyed_choices_follow_the_named_hash() {
        let mut rng = StdRng::seed_from_u64(5);
        let mut by = |p: Partitioner, key: Option<&[u8]>| {
            p.partition_by_key(key, &[0, 1, 2, 3, 4, 5, 6], 7, &mut rng)
        };
        let k = &b"123456789"[..];
        assert_eq!(
            by(Partitioner::Consistent, Some(k)),
            Some((0xcbf4_3926u32 % 7) as i32)
        );
        assert_eq!(
            by(Partitioner::ConsistentRandom, Some(k)),
            Some((0xcbf4_3926u32 % 7) as i32)
        );
        // FNV-1a of "foobar" and "a" are negative as i32: |hash| mod 7.
        let abs_mod7 = |h: u32| Some(((h as i32).unsigned_abs() % 7) as i32);
        assert_eq!(
            by(Partitioner::Fnv1a, Some(b"foobar")),
            abs_mod7(0xbf9c_f968)
        );
        assert_eq!(
            by(Partitioner::Fnv1aRandom, Some(b"a")),
            abs_mod7(0xe40c_292c)
        );
        assert_eq!(
            abs_mod7(0xe40c_292c),
            Some(6),
            "as librdkafka places \"a\" on 7 partitions"
        );
        assert_eq!(
            by(Partitioner::Murmur2, Some(b"21")),
            Some(partition_for_key(b"21", 7))
        );
        // Non-random names hash a null key as the empty key: one fixed partition.
        assert_eq!(
            by(Partitioner::Consistent, None),
            Some(0),
            "crc32 of nothing is 0"
        );
        assert_eq!(by(Partitioner::Fnv1a, None), abs_mod7(0x811c_9dc5));
        // The *_random names (and murmur2, see the enum) leave null keys (and
        // consistent_random empty ones) to the sticky partitioner; murmur2
        // hashes an empty key.
        assert_eq!(by(Partitioner::Murmur2, None), None);
        assert_eq!(by(Partitioner::Fnv1aRandom, None), None);
        assert_eq!(by(Partitioner::Random, None), None);
        assert_eq!(by(Partitioner::ConsistentRandom, None), None);
        assert_eq!(by(Partitioner::ConsistentRandom, Some(b"")), None);
        assert_eq!(
            by(Partitioner::Murmur2, Some(b"")),
            Some(partition_for_key(b"", 7))
        );
        assert_eq!(by(Partitioner::RoundRobin, Some(b"k")), None);
    }

    #[test]
    fn random_spreads_keyed_records_over_available_partitions() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            let p =
                Partitioner::Random.partition_by_key(Some(b"same key"), &[1, 3, 4], 6, &mut rng);
            seen.insert(p.unwrap());
        }
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), vec![1, 3, 4]);
        let p = Partitioner::Random
            .partition_by_key(Some(b"k"), &[], 6, &mut rng)
            .unwrap();
        assert!((0..6).contains(&p), "nothing available: any partition");
    }

    #[test]
    fn round_robin_cycles_available_partitions_and_follows_their_count() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut tp = TopicPartitioner::new(100);
        let rr = Partitioner::RoundRobin;
        let got: Vec<i32> = (0..5)
            .map(|_| tp.partition(rr, &[0, 1, 2], 3, &mut rng))
            .collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1]);
        // Two partitions more (metadata now shows 5): they take their turns.
        let got: Vec<i32> = (0..5)
            .map(|_| tp.partition(rr, &[0, 1, 2, 3, 4], 5, &mut rng))
            .collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4]);
        // Partition 1 without a leader: 0 and 2 take turns (counter 10, 11).
        assert_eq!(tp.partition(rr, &[0, 2], 3, &mut rng), 0);
        assert_eq!(tp.partition(rr, &[0, 2], 3, &mut rng), 2);
        // None available: every partition counts (counter 12).
        assert_eq!(tp.partition(rr, &[], 3, &mut rng), 0);
        tp.round_robin_next = u32::MAX;
        assert!(
            (0..3).contains(&tp.partition(rr, &[], 3, &mut rng)),
            "wraps"
        );
    }

    #[test]
    fn sticky_kinds_share_the_sticky_partition() {
        let mut rng = StdRng::seed_from_u64(4);
        let mut tp = TopicPartitioner::new(1000);
        let first = tp.partition(Partitioner::Murmur2, &[0, 1, 2, 3], 4, &mut rng);
        for kind in [
            Partitioner::Random,
            Partitioner::ConsistentRandom,
            Partitioner::Fnv1aRandom,
        ] {
            assert_eq!(tp.partition(kind, &[0, 1, 2, 3], 4, &mut rng), first);
        }
        tp.on_append(first, 1000, false);
        assert_eq!(tp.sticky.current(), None, "switches after batch_size bytes");
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
        let mut p = Partitioners::new(Partitioner::Murmur2, 20, StdRng::seed_from_u64(5));
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
        assert_eq!(p.topics["t"].sticky.current(), None, "20 bytes: switch");
    }
}
