//! Offset commits: the auto-commit timer, the OffsetCommit body, and the
//! reactions to commit / offset-fetch errors (shared with the facade's
//! `commit_sync` and `committed`, which send their own requests).

use std::collections::{BTreeMap, HashMap};

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use super::group::Prepare;
use super::{coordinator_connection, ConsumerCore, Dest, Tag};
use crate::cluster::{Cluster, TopicPartition};
use crate::consumer::coordinator::{commit_reaction, Generation, Reaction};
use crate::consumer::group::MemberState;
use crate::consumer::requests::{self as rq, OffsetAndMetadata};
use crate::driver::{Body, RequestOpts};
use crate::error::Error;

/// OffsetCommit for `offsets`, by topic id (v10+) when the metadata knows
/// every topic's id, else by name (<= v9).
pub fn commit_body(
    cluster: &Cluster,
    group_id: &str,
    generation: &Generation,
    instance: Option<String>,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
) -> Body {
    let ids: HashMap<String, [u8; 16]> = offsets
        .keys()
        .filter_map(|tp| {
            cluster
                .topic_id(&tp.topic)
                .map(|id| (tp.topic.to_string(), id))
        })
        .collect();
    let all_ids = offsets
        .keys()
        .all(|tp| ids.get(&*tp.topic).is_some_and(|id| *id != [0; 16]));
    let (g, gen, o) = (group_id.to_string(), generation.clone(), offsets.clone());
    Body::Versioned {
        api_key: ApiKey::OffsetCommit as i16,
        // v10 names topics by id only.
        max_version: if all_ids { None } else { Some(9) },
        build: Box::new(move |v| {
            RequestKind::OffsetCommit(rq::offset_commit(
                &g,
                &gen,
                instance.as_deref(),
                &o,
                &|t| ids.get(t).copied(),
                v,
            ))
        }),
    }
}

impl ConsumerCore {
    /// Send an auto-commit of the consumed positions that moved since the
    /// last commit. Returns true when one was sent.
    pub(super) fn maybe_auto_commit(&mut self, pre_join: bool) -> bool {
        if self.auto_commit_in_flight {
            return false;
        }
        let Some(g) = self.group.as_ref() else {
            return false;
        };
        let Some(node) = g.coordinator().cloned() else {
            return false;
        };
        let consumed = self.subs.all_consumed();
        let offsets: BTreeMap<TopicPartition, i64> = consumed
            .iter()
            .filter(|(tp, p)| self.last_committed.get(*tp) != Some(&p.offset))
            .map(|(tp, p)| (tp.clone(), p.offset))
            .collect();
        if offsets.is_empty() {
            return false;
        }
        let generation = if self.subs.has_auto_assigned_partitions() {
            // Mid-rebalance only the pre-join commit goes out (with the
            // generation being left).
            if g.state() != MemberState::Stable && !pre_join {
                return false;
            }
            g.generation().clone()
        } else {
            Generation::none()
        };
        let full: BTreeMap<TopicPartition, OffsetAndMetadata> = consumed
            .into_iter()
            .filter(|(tp, _)| offsets.contains_key(tp))
            .map(|(tp, p)| (tp, p.to_commit()))
            .collect();
        let body = commit_body(
            &self.cluster,
            g.group_id.as_str(),
            &generation,
            g.group_instance_id.clone(),
            &full,
        );
        self.auto_commit_in_flight = true;
        self.send(
            Dest::Node(coordinator_connection(&node)),
            body,
            RequestOpts::default(),
            Tag::AutoCommit {
                offsets,
                pre_join,
                generation,
                sent_ms: self.now_ms,
            },
        );
        true
    }

    pub(super) fn on_auto_commit(
        &mut self,
        offsets: BTreeMap<TopicPartition, i64>,
        pre_join: bool,
        generation: Generation,
        sent_ms: i64,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let full: BTreeMap<TopicPartition, OffsetAndMetadata> = offsets
            .into_iter()
            .map(|(tp, o)| {
                (
                    tp,
                    OffsetAndMetadata {
                        offset: o,
                        leader_epoch: -1,
                        metadata: None,
                    },
                )
            })
            .collect();
        let cluster = self.cluster.clone();
        let outcome = self.commit_result(result, &full, &generation, &cluster, now);
        // commit-latency / commit-error-total, as for the application's commits.
        self.record_commit((now - sent_ms) as f64, outcome.is_ok());
        if let Err((e, _)) = outcome {
            // The next interval commits again; the records of a failed
            // pre-join commit will be seen again by the new owner.
            log::debug!(target: "ferrokafka::consumer", "auto-commit failed: {e}");
        }
        self.auto_commit_in_flight = false;
        if self.member.is_some() {
            // KIP-848: the commit before a revocation; the reconciliation goes on.
            if pre_join {
                self.member_commit_done();
            }
        } else if pre_join && self.prepare == Prepare::Committing {
            // Java commits before revoking and goes on even when the
            // commit fails.
            self.prepare = Prepare::AwaitUser;
            self.start_revocation();
        }
    }

    /// Apply a coordinator-related reaction to the membership.
    /// `sent`: the generation the request carried. A rebalance or
    /// generation error about a generation we have already left (a commit
    /// sent in generation N answered after the sync of N+1) changes nothing:
    /// acting on it would throw away a valid membership and start one more
    /// rebalance (Java KAFKA-9823 checks `generationUnchanged` the same way).
    pub fn apply_coordinator_reaction(
        &mut self,
        r: Reaction,
        what: &str,
        sent: Option<&Generation>,
        now: i64,
    ) {
        if self.member.is_some() {
            match r {
                Reaction::CoordinatorUnknown => {
                    if let Some(g) = self.group.as_mut() {
                        g.mark_coordinator_unknown(what, now);
                    }
                    self.member.as_mut().expect("member").coordinator_lost(now);
                }
                Reaction::ResetAndRejoin | Reaction::ResetGeneration => {
                    let stale = sent
                        .is_some_and(|s| self.group.as_ref().is_some_and(|g| s != g.generation()));
                    if !stale {
                        self.member_fenced_by_commit();
                    }
                }
                _ => {}
            }
            return;
        }
        let lost = {
            let Some(g) = self.group.as_mut() else { return };
            let stale = sent.is_some_and(|s| s != g.generation());
            if stale
                && matches!(
                    r,
                    Reaction::Rejoin | Reaction::ResetAndRejoin | Reaction::ResetGeneration
                )
            {
                return;
            }
            match r {
                Reaction::CoordinatorUnknown => {
                    // docs/semantics.md §2.3: forgotten and looked up again.
                    g.mark_coordinator_unknown(what, now);
                    false
                }
                Reaction::Rejoin => {
                    g.request_rejoin(format!("{what}: group is rebalancing"));
                    false
                }
                Reaction::ResetAndRejoin | Reaction::ResetGeneration => {
                    g.on_generation_error(r, what);
                    true
                }
                _ => false,
            }
        };
        if lost {
            self.lose_partitions();
        }
    }

    /// A commit answer -> Ok, or (error, retriable). Success records the
    /// committed offsets (auto-commit sends only what moved since).
    pub fn commit_result(
        &mut self,
        r: Result<(ResponseKind, i16), Error>,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        sent: &Generation,
        cluster: &Cluster,
        now: i64,
    ) -> Result<(), (Error, bool)> {
        match r {
            Ok((ResponseKind::OffsetCommit(resp), _)) => {
                let names: HashMap<[u8; 16], String> = offsets
                    .keys()
                    .filter_map(|tp| {
                        cluster
                            .topic_id(&tp.topic)
                            .map(|id| (id, tp.topic.to_string()))
                    })
                    .collect();
                let parts = rq::parse_offset_commit(&resp, &|id| names.get(id).cloned());
                match parts.iter().find(|(_, c)| *c != codes::NONE) {
                    None => {
                        for (tp, o) in offsets {
                            self.last_committed.insert(tp.clone(), o.offset);
                        }
                        Ok(())
                    }
                    Some((tp, code)) => {
                        let reaction = commit_reaction(*code);
                        self.apply_coordinator_reaction(reaction, "offset commit", Some(sent), now);
                        let retriable =
                            matches!(reaction, Reaction::Retry | Reaction::CoordinatorUnknown);
                        let msg = match reaction {
                            Reaction::Rejoin | Reaction::ResetAndRejoin | Reaction::ResetGeneration => format!(
                                "commit of {}-{} failed: the group rebalanced; the partitions may now belong to another member",
                                tp.topic, tp.partition
                            ),
                            _ => format!("commit of {}-{} failed", tp.topic, tp.partition),
                        };
                        Err((Error::broker(*code, Some(msg)), retriable))
                    }
                }
            }
            Ok(_) => Err((
                Error::State {
                    detail: "unexpected OffsetCommit answer".into(),
                },
                false,
            )),
            Err(e) => {
                self.apply_coordinator_reaction(
                    Reaction::CoordinatorUnknown,
                    "offset commit failed",
                    None,
                    now,
                );
                let retriable = e.retriable()
                    || matches!(e, Error::Disconnected { .. } | Error::Timeout { .. });
                Err((e, retriable))
            }
        }
    }
}
