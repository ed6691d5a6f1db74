//! Group facts shared by the coordinator client and tools.

/// Java's `String.hashCode` over UTF-16 code units (what the broker hashes a
/// group id with).
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(u as i32))
}

/// The `__consumer_offsets` partition that holds a group (docs/semantics.md §2.4):
/// `abs(hash) % n`, with Kafka's `Utils.abs` mapping i32::MIN to 0.
pub fn coordinator_partition_for(group_id: &str, num_partitions: i32) -> i32 {
    let h = java_string_hash(group_id);
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % num_partitions.max(1)
}

/// Member state of the classic group protocol (Java `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// Not in the group: never joined, left, or fenced.
    Unjoined,
    /// JoinGroup sent, waiting for the answer.
    PreparingRebalance,
    /// JoinGroup answered, SyncGroup sent.
    CompletingRebalance,
    /// Assignment received; heartbeating.
    Stable,
}

impl MemberState {
    pub fn as_str(&self) -> &'static str {
        match self {
            MemberState::Unjoined => "UNJOINED",
            MemberState::PreparingRebalance => "PREPARING_REBALANCE",
            MemberState::CompletingRebalance => "COMPLETING_REBALANCE",
            MemberState::Stable => "STABLE",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        // "hello".hashCode() == 99162322; "".hashCode() == 0.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash(""), 0);
        // Non-BMP characters hash as two UTF-16 surrogates, as in Java.
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
    }

    #[test]
    fn partition_for_group() {
        assert_eq!(coordinator_partition_for("hello", 50), 99_162_322 % 50);
        // A string whose hash is negative still maps into range.
        for g in ["group-a", "my-consumer-group", "zzzzzzzzzzzz", "ключ"] {
            let p = coordinator_partition_for(g, 50);
            assert!((0..50).contains(&p), "{g} -> {p}");
        }
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Utils.abs gives 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(coordinator_partition_for("polygenelubricants", 50), 0);
    }
}
