//! Client-side partition assignors, run by the group leader after JoinGroup
//! (Java `ConsumerPartitionAssignor` implementations). Same results as the
//! Java client for the same input, so a ferrokafka leader and a Java or
//! librdkafka member agree on who owns what in a mixed group.
//!
//! * `range`: per topic, members sorted by member id, contiguous ranges; the
//!   first `n % m` members get one extra partition.
//! * `roundrobin`: all partitions sorted by (topic, partition), dealt in turn
//!   to the sorted members subscribed to the topic.
//! * `sticky` / `cooperative-sticky`: balanced, and keeps each member's
//!   previously owned partitions where balance allows. The cooperative variant
//!   then withholds partitions that change owner (the old owner must revoke
//!   them first; a follow-up rebalance hands them over: KIP-429).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::cluster::TopicPartition;

/// One group member as the leader sees it in the JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    pub member_id: String,
    /// KIP-345 static id; sticky assignors order by it when present so a
    /// restarted static member keeps its place.
    pub group_instance_id: Option<String>,
    pub topics: Vec<String>,
    /// Partitions this member owned in the previous generation (subscription v1+).
    pub owned_partitions: Vec<TopicPartition>,
    /// Generation of `owned_partitions` (subscription v2+), -1 if unknown.
    pub generation: i32,
}

pub type Assignment = BTreeMap<String, Vec<TopicPartition>>;

/// Java `MemberInfo` order: static members first, by instance id; then
/// dynamic members by member id. Range and round robin deal in this order.
fn member_order(a: &MemberSubscription, b: &MemberSubscription) -> std::cmp::Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// An empty assignment for every member, and the members in Java's order
/// (static members by instance id first, then by member id).
fn empty_and_ordered(members: &[MemberSubscription]) -> (Assignment, Vec<&MemberSubscription>) {
    let out = members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect();
    let mut ordered: Vec<&MemberSubscription> = members.iter().collect();
    ordered.sort_by(|a, b| member_order(a, b));
    (out, ordered)
}

/// Range (Java `RangeAssignor`, without rack awareness).
pub fn range(
    members: &[MemberSubscription],
    partitions_per_topic: &HashMap<String, i32>,
) -> Assignment {
    let (mut out, ordered) = empty_and_ordered(members);
    let mut consumers_per_topic: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in ordered {
        for t in &m.topics {
            let list = consumers_per_topic.entry(t.as_str()).or_default();
            if !list.contains(&m.member_id.as_str()) {
                list.push(m.member_id.as_str());
            }
        }
    }
    for (topic, consumers) in consumers_per_topic {
        let Some(&n) = partitions_per_topic.get(topic) else {
            continue;
        };
        let n = n.max(0) as usize;
        let per = n / consumers.len();
        let extra = n % consumers.len();
        for (i, c) in consumers.iter().enumerate() {
            let start = per * i + i.min(extra);
            let len = per + usize::from(i < extra);
            let list = out.get_mut(*c).expect("member listed above");
            list.extend((start..start + len).map(|p| TopicPartition::new(topic, p as i32)));
        }
    }
    out
}

/// Round robin (Java `RoundRobinAssignor`).
pub fn round_robin(
    members: &[MemberSubscription],
    partitions_per_topic: &HashMap<String, i32>,
) -> Assignment {
    let (mut out, sorted) = empty_and_ordered(members);
    let topics: BTreeSet<&str> = members
        .iter()
        .flat_map(|m| m.topics.iter().map(String::as_str))
        .collect();
    let mut cursor = 0usize;
    for topic in topics {
        let Some(&n) = partitions_per_topic.get(topic) else {
            continue;
        };
        for p in 0..n.max(0) {
            // Next member in the circle that subscribes to this topic.
            for _ in 0..sorted.len() {
                let m = sorted[cursor % sorted.len()];
                cursor += 1;
                if m.topics.iter().any(|t| t == topic) {
                    out.get_mut(&m.member_id)
                        .expect("member listed")
                        .push(TopicPartition::new(topic, p));
                    break;
                }
            }
        }
    }
    out
}

/// Sticky (Java `StickyAssignor` semantics): balanced (partition counts of
/// members differ by at most one among members with the same subscription),
/// keeping owned partitions when that keeps balance.
pub fn sticky(
    members: &[MemberSubscription],
    partitions_per_topic: &HashMap<String, i32>,
) -> Assignment {
    // Resolve ownership conflicts: if two members claim a partition, the
    // claim from the highest generation wins (KIP-792), ties to the lower id.
    let mut owner: HashMap<TopicPartition, (i32, &str)> = HashMap::new();
    for m in members {
        for tp in &m.owned_partitions {
            let claim = (m.generation, m.member_id.as_str());
            match owner.get(tp) {
                Some(&(g, id)) if g > claim.0 || (g == claim.0 && id <= claim.1) => {}
                _ => {
                    owner.insert(tp.clone(), claim);
                }
            }
        }
    }
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| a.member_id.cmp(&b.member_id));
    let subscribed = |m: &MemberSubscription, t: &str| m.topics.iter().any(|x| x == t);

    // All partitions that someone subscribes to, in a stable order.
    let mut all: Vec<TopicPartition> = Vec::new();
    let topics: BTreeSet<&str> = members
        .iter()
        .flat_map(|m| m.topics.iter().map(String::as_str))
        .collect();
    for t in &topics {
        if let Some(&n) = partitions_per_topic.get(*t) {
            all.extend((0..n.max(0)).map(|p| TopicPartition::new(*t, p)));
        }
    }

    let mut out: Assignment = members
        .iter()
        .map(|m| (m.member_id.clone(), Vec::new()))
        .collect();
    let total = all.len();
    let count = sorted.len().max(1);
    // Quotas for the common case of identical subscriptions; for mixed
    // subscriptions they are only an upper bound and the greedy pass below
    // balances among eligible members.
    let min_quota = total / count;
    let max_quota = min_quota + usize::from(!total.is_multiple_of(count));
    let mut at_max = 0usize;
    let max_allowed_at_max = total % count;

    // 1. Keep owned partitions up to quota.
    let mut assigned: BTreeSet<TopicPartition> = BTreeSet::new();
    for m in &sorted {
        let mut kept: Vec<TopicPartition> = m
            .owned_partitions
            .iter()
            .filter(|tp| owner.get(*tp).map(|&(_, id)| id) == Some(m.member_id.as_str()))
            // Owned partitions come from other members' bytes: a negative id
            // (the fuzz target sent one) must not be kept any more than a
            // partition past the topic's end.
            .filter(|tp| {
                subscribed(m, &tp.topic)
                    && partitions_per_topic
                        .get(&*tp.topic)
                        .is_some_and(|&n| (0..n).contains(&tp.partition))
            })
            .cloned()
            .collect();
        kept.sort();
        kept.dedup();
        let cap = if max_allowed_at_max == 0 || at_max < max_allowed_at_max {
            max_quota
        } else {
            min_quota
        };
        kept.truncate(cap);
        if kept.len() == max_quota && max_quota != min_quota {
            at_max += 1;
        }
        for tp in &kept {
            assigned.insert(tp.clone());
        }
        out.insert(m.member_id.clone(), kept);
    }

    // 2. Hand out the rest, each to the eligible member with the fewest
    //    partitions (ties: lowest member id), which yields the quotas above
    //    for identical subscriptions.
    for tp in all.into_iter().filter(|tp| !assigned.contains(tp)) {
        let target = sorted
            .iter()
            .filter(|m| subscribed(m, &tp.topic))
            .min_by_key(|m| (out[&m.member_id].len(), m.member_id.as_str()));
        if let Some(m) = target {
            out.get_mut(&m.member_id).expect("member listed").push(tp);
        }
    }

    // 3. Rebalance mixed subscriptions: move from the fullest to the
    //    emptiest eligible member while that narrows the gap by two or more.
    loop {
        let mut moved = false;
        for from in &sorted {
            let from_len = out[&from.member_id].len();
            let candidate = out[&from.member_id]
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, tp)| {
                    sorted
                        .iter()
                        .filter(|m| m.member_id != from.member_id && subscribed(m, &tp.topic))
                        .filter(|m| out[&m.member_id].len() + 1 < from_len)
                        .min_by_key(|m| (out[&m.member_id].len(), m.member_id.as_str()))
                        .map(|m| (i, m.member_id.clone()))
                });
            if let Some((i, to)) = candidate {
                let tp = out.get_mut(&from.member_id).expect("member").remove(i);
                out.get_mut(&to).expect("member").push(tp);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// Cooperative sticky (KIP-429): the sticky target, minus every partition
/// whose owner changes; those are revoked by their owner first and assigned
/// in the follow-up rebalance.
pub fn cooperative_sticky(
    members: &[MemberSubscription],
    partitions_per_topic: &HashMap<String, i32>,
) -> Assignment {
    let mut target = sticky(members, partitions_per_topic);
    let mut owned_by: HashMap<&TopicPartition, &str> = HashMap::new();
    for m in members {
        for tp in &m.owned_partitions {
            owned_by.insert(tp, m.member_id.as_str());
        }
    }
    for (member, parts) in target.iter_mut() {
        parts.retain(|tp| owned_by.get(tp).is_none_or(|&o| o == member.as_str()));
    }
    target
}

/// Assignor by its protocol name.
pub fn assign(
    name: &str,
    members: &[MemberSubscription],
    partitions_per_topic: &HashMap<String, i32>,
) -> Option<Assignment> {
    Some(match name {
        "range" => range(members, partitions_per_topic),
        "roundrobin" => round_robin(members, partitions_per_topic),
        "sticky" => sticky(members, partitions_per_topic),
        "cooperative-sticky" => cooperative_sticky(members, partitions_per_topic),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[&str], owned: &[(&str, i32)]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.into(),
            group_instance_id: None,
            topics: topics.iter().map(|s| s.to_string()).collect(),
            owned_partitions: owned
                .iter()
                .map(|(t, p)| TopicPartition::new(*t, *p))
                .collect(),
            generation: 1,
        }
    }

    fn tps(v: &[(&str, i32)]) -> Vec<TopicPartition> {
        v.iter().map(|(t, p)| TopicPartition::new(*t, *p)).collect()
    }

    /// Owned partitions are other members' bytes: one claiming a negative
    /// partition (found by the group_assignment fuzz target) or one past the
    /// topic's end keeps nothing that does not exist.
    #[test]
    fn sticky_drops_owned_partitions_that_do_not_exist() {
        let members = vec![
            member("m0", &["a"], &[("a", -5), ("a", 7), ("a", 0)]),
            member("m1", &["a"], &[]),
        ];
        let counts: HashMap<String, i32> = [("a".to_string(), 2)].into();
        for out in [
            sticky(&members, &counts),
            cooperative_sticky(&members, &counts),
        ] {
            let all: Vec<&TopicPartition> = out.values().flatten().collect();
            assert!(
                all.iter().all(|tp| (0..2).contains(&tp.partition)),
                "{out:?}"
            );
            assert_eq!(out["m0"], tps(&[("a", 0)]));
        }
    }

    fn counts(n: &[(&str, i32)]) -> HashMap<String, i32> {
        n.iter().map(|(t, c)| (t.to_string(), *c)).collect()
    }

    #[test]
    fn range_matches_java_example() {
        // Javadoc example: C0, C1 subscribe t0, t1 with 3 partitions each.
        let m = [
            member("C0", &["t0", "t1"], &[]),
            member("C1", &["t0", "t1"], &[]),
        ];
        let a = range(&m, &counts(&[("t0", 3), ("t1", 3)]));
        assert_eq!(a["C0"], tps(&[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]));
        assert_eq!(a["C1"], tps(&[("t0", 2), ("t1", 2)]));
    }

    #[test]
    fn static_members_come_first_in_range() {
        let mut s = member("zz", &["t"], &[]);
        s.group_instance_id = Some("instance-1".into());
        let m = [member("aa", &["t"], &[]), s];
        let a = range(&m, &counts(&[("t", 3)]));
        assert_eq!(a["zz"], tps(&[("t", 0), ("t", 1)]));
        assert_eq!(a["aa"], tps(&[("t", 2)]));
    }

    #[test]
    fn round_robin_matches_java_example() {
        let m = [
            member("C0", &["t0", "t1"], &[]),
            member("C1", &["t0", "t1"], &[]),
        ];
        let a = round_robin(&m, &counts(&[("t0", 3), ("t1", 3)]));
        assert_eq!(a["C0"], tps(&[("t0", 0), ("t0", 2), ("t1", 1)]));
        assert_eq!(a["C1"], tps(&[("t0", 1), ("t1", 0), ("t1", 2)]));
    }

    #[test]
    fn sticky_is_balanced_and_keeps_ownership() {
        let m = [
            member("a", &["t"], &[("t", 0), ("t", 1), ("t", 2)]),
            member("b", &["t"], &[("t", 3), ("t", 4), ("t", 5)]),
            member("c", &["t"], &[]),
        ];
        let a = sticky(&m, &counts(&[("t", 6)]));
        for v in a.values() {
            assert_eq!(v.len(), 2);
        }
        // a and b keep two of their own each; c gets one from each.
        assert!(a["a"].iter().all(|tp| tp.partition <= 2));
        assert!(a["b"].iter().all(|tp| tp.partition >= 3));
    }

    #[test]
    fn cooperative_withholds_moving_partitions() {
        let m = [
            member("a", &["t"], &[("t", 0), ("t", 1), ("t", 2), ("t", 3)]),
            member("b", &["t"], &[]),
        ];
        let a = cooperative_sticky(&m, &counts(&[("t", 4)]));
        assert_eq!(a["a"].len(), 2, "a keeps two");
        assert!(a["b"].is_empty(), "b waits until a revoked: {:?}", a["b"]);
        // Second round: a now owns only its two.
        let m2 = [
            member("a", &["t"], &[("t", 0), ("t", 1)]),
            member("b", &["t"], &[]),
        ];
        let a2 = cooperative_sticky(&m2, &counts(&[("t", 4)]));
        assert_eq!(a2["b"].len(), 2);
    }

    #[test]
    fn sticky_mixed_subscriptions_every_partition_once() {
        let m = [
            member("a", &["x", "y"], &[]),
            member("b", &["y"], &[]),
            member("c", &["x"], &[]),
        ];
        let a = sticky(&m, &counts(&[("x", 5), ("y", 3)]));
        let mut all: Vec<_> = a.values().flatten().cloned().collect();
        all.sort();
        let before = all.len();
        all.dedup();
        assert_eq!(before, all.len());
        assert_eq!(all.len(), 8);
        let lens: Vec<usize> = a.values().map(Vec::len).collect();
        assert!(
            lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1,
            "{a:?}"
        );
    }

    #[test]
    fn conflicting_claims_go_to_the_newer_generation() {
        let mut old = member("a", &["t"], &[("t", 0)]);
        old.generation = 1;
        let mut new = member("b", &["t"], &[("t", 0)]);
        new.generation = 2;
        let a = sticky(&[old, new], &counts(&[("t", 2)]));
        assert_eq!(a["b"], tps(&[("t", 0)]));
        assert_eq!(a["a"], tps(&[("t", 1)]));
    }
}
