//! Positions and records: committed offsets for new partitions, offset
//! resets, fetch planning, fetched data into the buffer, and the buffer
//! drained by the application's `poll`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use ferrokafka_protocol::record::DecodeOptions;

use super::{coordinator_connection, ConsumerCore, Dest, Tag};
use crate::cluster::{Node, TopicPartition};
use crate::consumer::config::{ConsumerConfig, RecordSlice};
use crate::consumer::coordinator::{offset_fetch_reaction, Reaction};
use crate::consumer::fetch::{
    build_fetch_request, build_list_offsets_request, parse_fetch_response,
    parse_list_offsets_response, AbortedTransactionFilter, FetchLimits, PartitionFetch,
    PartitionFetchResult, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, READ_COMMITTED, READ_UNCOMMITTED,
};
use crate::consumer::fetcher::{fetch_reaction, plan_fetches, Buffered, FetchReaction};
use crate::consumer::pool::ColumnPool;
use crate::consumer::records::{decode_fetched, DecodedFetch, RecordColumns};
use crate::consumer::requests as rq;
use crate::consumer::subscription::{FetchState, OffsetResetStrategy};
use crate::driver::{Body, RequestOpts};
use crate::error::Error;

/// A decoded fetch waiting for the application.
pub struct Chunk {
    pub(super) tp: TopicPartition,
    /// The position the records continue from; stale (dropped) when the
    /// partition's position moved (seek, reset, revocation).
    start: i64,
    cols: Arc<RecordColumns>,
    cursor: usize,
    next_offset: i64,
    last_epoch: i32,
    pub(super) bytes: usize,
}

/// One partition of a Fetch answer: the answer, the offset it was fetched
/// from, what its error code means, and its records decoded (on Deliver).
pub struct FetchedPartition {
    part: PartitionFetchResult,
    at: i64,
    reaction: FetchReaction,
    decoded: Option<Result<DecodedFetch, Error>>,
}

/// An answer ready for the core. Fetch answers are decoded (CRC,
/// decompression, columns) by [`prepare_answer`], which needs no state, so
/// the shell runs it before taking the lock the application's `poll` waits on.
pub enum Answer {
    /// Boxed: a decoded answer is large next to the Fetch variant.
    Response(Box<Result<(ResponseKind, i16), Error>>),
    Fetched(Result<Vec<FetchedPartition>, Error>),
}

/// `pool`: where the decoded columns take their buffers (the shell's; the
/// sans-IO tests decode without one).
pub fn prepare_answer(
    cfg: &ConsumerConfig,
    tag: &Tag,
    result: Result<(ResponseKind, i16), Error>,
    pool: Option<&Arc<ColumnPool>>,
) -> Answer {
    let Tag::Fetch { offsets, names, .. } = tag else {
        return Answer::Response(Box::new(result));
    };
    let resp = match result {
        Ok((ResponseKind::Fetch(resp), _)) => resp,
        Ok(_) => {
            return Answer::Fetched(Err(Error::State {
                detail: "unexpected Fetch answer".into(),
            }))
        }
        Err(e) => return Answer::Fetched(Err(e)),
    };
    let (code, parts) = parse_fetch_response(&resp, &|id| names.get(id).cloned());
    if code != codes::NONE {
        return Answer::Fetched(Err(Error::broker(code, Some("fetch".into()))));
    }
    let opts = DecodeOptions {
        verify_crc: cfg.check_crcs,
        ..DecodeOptions::default()
    };
    Answer::Fetched(Ok(parts
        .into_iter()
        .filter_map(|p| {
            let at = *offsets.get(&p.tp)?;
            let reaction = fetch_reaction(p.error_code);
            let decoded = (reaction == FetchReaction::Deliver).then(|| {
                let mut filter = AbortedTransactionFilter::new(
                    cfg.read_committed,
                    p.aborted_transactions.clone(),
                );
                decode_fetched(&p.records, at, opts, &mut filter, pool)
            });
            Some(FetchedPartition {
                part: p,
                at,
                reaction,
                decoded,
            })
        })
        .collect()))
}

impl ConsumerCore {
    fn isolation_level(&self) -> i8 {
        if self.cfg.read_committed {
            READ_COMMITTED
        } else {
            READ_UNCOMMITTED
        }
    }

    /// Positions: committed offsets for new partitions, then resets.
    pub(super) fn positions_step(&mut self, now: i64) {
        let initializing = if self.want_positions || self.subs.has_auto_assigned_partitions() {
            self.subs.initializing_partitions()
        } else {
            Vec::new()
        };
        if !initializing.is_empty() {
            if self.cfg.group_id.is_none() {
                if let Err(e) = self.subs.reset_initializing_to_default() {
                    self.errors.push_back(e);
                    self.wake_app();
                }
            } else if !self.offset_fetch_in_flight {
                if let Some(node) = self.group.as_ref().and_then(|g| g.coordinator().cloned()) {
                    self.offset_fetch_in_flight = true;
                    let gid = self.cfg.group_id.clone().unwrap_or_default();
                    let body = Body::Versioned {
                        api_key: ApiKey::OffsetFetch as i16,
                        max_version: None,
                        build: Box::new(move |v| {
                            RequestKind::OffsetFetch(rq::offset_fetch(
                                &gid,
                                Some(&initializing),
                                true,
                                v,
                            ))
                        }),
                    };
                    self.send(
                        Dest::Node(coordinator_connection(&node)),
                        body,
                        RequestOpts::default(),
                        Tag::OffsetFetch,
                    );
                }
            }
        }
        let resets: Vec<_> = self
            .subs
            .partitions_needing_reset(now)
            .into_iter()
            .filter(|(tp, _)| !self.resets_in_flight.contains(tp))
            .collect();
        if resets.is_empty() {
            return;
        }
        let cluster = self.cluster.clone();
        let mut by_leader: BTreeMap<i32, (Node, Vec<(TopicPartition, OffsetResetStrategy)>)> =
            BTreeMap::new();
        for (tp, s) in resets {
            match cluster.leader_for(&tp.topic, tp.partition) {
                Some(n) => by_leader
                    .entry(n.id)
                    .or_insert_with(|| (n.clone(), vec![]))
                    .1
                    .push((tp, s)),
                None => self.metadata_update_for_topic(&tp.topic),
            }
        }
        for (_, (node, parts)) in by_leader {
            let q: Vec<(TopicPartition, i64, i32)> = parts
                .iter()
                .map(|(tp, s)| {
                    let ts = if *s == OffsetResetStrategy::Earliest {
                        EARLIEST_TIMESTAMP
                    } else {
                        LATEST_TIMESTAMP
                    };
                    let epoch = cluster
                        .leader_epoch_for(&tp.topic, tp.partition)
                        .unwrap_or(-1);
                    (tp.clone(), ts, epoch)
                })
                .collect();
            for (tp, _) in &parts {
                self.resets_in_flight.insert(tp.clone());
            }
            let body = RequestKind::ListOffsets(build_list_offsets_request(
                self.isolation_level(),
                &q,
                self.cfg.request_timeout_ms as i32,
            ));
            self.send(
                Dest::Node(node),
                Body::Ready(body),
                RequestOpts::default(),
                Tag::Reset { parts },
            );
        }
    }

    /// Fetches: one in flight per leader, planned by `fetcher::plan_fetches`,
    /// while the buffer holds less than `cap` bytes. Returns how long until
    /// a fetch backoff ends (100 when none is running).
    pub(super) fn fetch_step(&mut self, now: i64) -> i64 {
        self.fetch_backoff.retain(|_, until| *until > now);
        self.partition_backoff.retain(|_, until| *until > now);
        let wait = self
            .fetch_backoff
            .values()
            .chain(self.partition_backoff.values())
            .map(|until| until - now)
            .min()
            .unwrap_or(100);
        let cap = (self.cfg.fetch_max_bytes as usize)
            .max(self.cfg.max_partition_fetch_bytes as usize * 2);
        if self.buffered_bytes >= cap {
            return wait;
        }
        let mut buffered: HashMap<TopicPartition, Buffered> = HashMap::new();
        for c in &self.buffer {
            let e = buffered.entry(c.tp.clone()).or_insert(Buffered {
                chunks: 0,
                next_offset: c.next_offset,
                bytes: 0,
            });
            e.chunks += 1;
            e.next_offset = c.next_offset;
            e.bytes += c.bytes;
        }
        let cluster = self.cluster.clone();
        let mut fetchable = self.subs.fetchable_partitions();
        fetchable.retain(|(tp, _)| !self.partition_backoff.contains_key(tp));
        let mut busy = self.fetch_in_flight.clone();
        busy.extend(self.fetch_backoff.keys());
        let subs = &self.subs;
        let read_committed = self.cfg.read_committed;
        let (plan, no_leader) = plan_fetches(
            &fetchable,
            |tp| cluster.leader_id_for(tp),
            &busy,
            &buffered,
            self.cfg.max_partition_fetch_bytes.max(0) as usize,
            // At the end of what a Fetch may return: the high watermark, or
            // under read_committed the last stable offset.
            |tp, offset| {
                subs.state(tp).is_some_and(|s| {
                    let end = if read_committed {
                        s.last_stable_offset
                    } else {
                        s.high_watermark
                    };
                    end >= 0 && offset >= end
                })
            },
        );
        for tp in no_leader {
            self.metadata_update_for_topic(&tp.topic);
        }
        let limits = FetchLimits {
            max_wait_ms: self.cfg.fetch_max_wait_ms,
            min_bytes: self.cfg.fetch_min_bytes,
            max_bytes: self.cfg.fetch_max_bytes,
            isolation_level: self.isolation_level(),
        };
        let rack = self.cfg.client_rack.clone().unwrap_or_default();
        for (node_id, planned) in plan {
            let Some(node) = cluster.node_by_id(node_id).cloned() else {
                // A leader id the broker list does not name: routing is stale.
                self.metadata_update();
                continue;
            };
            let parts: Vec<PartitionFetch> = planned
                .into_iter()
                .map(|p| PartitionFetch {
                    current_leader_epoch: cluster
                        .leader_epoch_for(&p.tp.topic, p.tp.partition)
                        .unwrap_or(-1),
                    topic_id: cluster.topic_id(&p.tp.topic).filter(|id| *id != [0; 16]),
                    tp: p.tp,
                    fetch_offset: p.fetch_offset,
                    partition_max_bytes: self.cfg.max_partition_fetch_bytes,
                })
                .collect();
            self.fetch_in_flight.insert(node_id);
            let all_ids = parts.iter().all(|p| p.topic_id.is_some());
            let offsets: HashMap<TopicPartition, i64> = parts
                .iter()
                .map(|p| (p.tp.clone(), p.fetch_offset))
                .collect();
            let names: HashMap<[u8; 16], String> = parts
                .iter()
                .filter_map(|p| p.topic_id.map(|id| (id, p.tp.topic.to_string())))
                .collect();
            let rack = rack.clone();
            let body = Body::Versioned {
                api_key: ApiKey::Fetch as i16,
                // Topic ids from v13 on; without ids, names (<= v12).
                max_version: if all_ids { None } else { Some(12) },
                build: Box::new(move |v| {
                    let mut parts = parts;
                    if v < 13 {
                        for p in &mut parts {
                            p.topic_id = None;
                        }
                    }
                    let mut req = build_fetch_request(limits, &parts, &rack);
                    if v >= 13 {
                        for t in &mut req.topics {
                            t.topic = Default::default();
                        }
                    }
                    RequestKind::Fetch(req)
                }),
            };
            // The broker may hold a Fetch for max_wait: the request timeout
            // must cover it (Java adds fetch.max.wait.ms).
            let opts = RequestOpts {
                request_timeout_ms: Some(
                    self.cfg.request_timeout_ms + self.cfg.fetch_max_wait_ms as i64,
                ),
                max_version: None,
            };
            self.send(
                Dest::Node(node),
                body,
                opts,
                Tag::Fetch {
                    node: node_id,
                    offsets,
                    names,
                    sent_ms: now,
                },
            );
        }
        wait
    }

    pub(super) fn on_fetch(
        &mut self,
        node: i32,
        sent_ms: i64,
        parts: Result<Vec<FetchedPartition>, Error>,
        now: i64,
    ) {
        self.fetch_in_flight.remove(&node);
        let backoff_until = now + self.cfg.retry_backoff_ms;
        let parts = match parts {
            Ok(p) => p,
            Err(e) => {
                self.metrics.fetch_errors += 1;
                // Disconnects and timeouts: the leader may have moved. Ask
                // again after the backoff, with fresher metadata.
                log::debug!(target: "ferrokafka::consumer", "fetch from node {node} failed: {e}");
                self.fetch_backoff.insert(node, backoff_until);
                self.metadata_update();
                return;
            }
        };
        // Java's fetch-latency: one sample per Fetch answer.
        self.metrics.fetch.record((now - sent_ms) as f64);
        for f in parts {
            let FetchedPartition {
                part: p,
                at,
                reaction,
                decoded,
            } = f;
            // Still ours, and still where we asked from?
            let Some(s) = self.subs.state(&p.tp) else {
                continue;
            };
            if s.state != FetchState::Fetching || s.paused {
                continue;
            }
            let expected = self
                .buffer
                .iter()
                .rev()
                .find(|c| c.tp == p.tp)
                .map(|c| c.next_offset)
                .or(s.position.map(|p| p.offset));
            if expected != Some(at) {
                continue;
            }
            match reaction {
                FetchReaction::Deliver => {
                    self.subs.update_watermarks(
                        &p.tp,
                        p.high_watermark,
                        p.log_start_offset,
                        p.last_stable_offset,
                    );
                    match decoded.expect("decoded on Deliver") {
                        Ok(d) if d.record_too_large => {
                            self.errors.push_back(Error::broker(
                                codes::MESSAGE_TOO_LARGE,
                                Some(format!(
                                    "the record at offset {at} of {}-{} is larger than max_partition_fetch_bytes ({})",
                                    p.tp.topic, p.tp.partition, self.cfg.max_partition_fetch_bytes
                                )),
                            ));
                            self.wake_app();
                        }
                        Ok(d) => {
                            self.metrics.records_fetched += d.records.len() as u64;
                            self.metrics.bytes_fetched += p.records.len() as u64;
                            if d.next_offset > at {
                                let bytes = d.records.byte_size();
                                self.buffered_bytes += bytes;
                                self.buffer.push_back(Chunk {
                                    tp: p.tp.clone(),
                                    start: at,
                                    cols: Arc::new(d.records),
                                    cursor: 0,
                                    next_offset: d.next_offset,
                                    last_epoch: d.last_epoch,
                                    bytes,
                                });
                                self.wake_app();
                            }
                        }
                        Err(e) => {
                            self.errors.push_back(Error::State {
                                detail: format!(
                                    "corrupt records from {}-{} at offset {at}: {e}",
                                    p.tp.topic, p.tp.partition
                                ),
                            });
                            self.wake_app();
                        }
                    }
                }
                FetchReaction::RefreshMetadata => {
                    self.partition_backoff.insert(p.tp.clone(), backoff_until);
                    self.metadata_update();
                }
                FetchReaction::Retry => {
                    self.partition_backoff.insert(p.tp.clone(), backoff_until);
                }
                FetchReaction::OffsetOutOfRange => {
                    if self.cfg.auto_offset_reset == OffsetResetStrategy::None {
                        self.errors.push_back(Error::broker(
                            codes::OFFSET_OUT_OF_RANGE,
                            Some(format!(
                                "offset {at} of {}-{} is out of range",
                                p.tp.topic, p.tp.partition
                            )),
                        ));
                        self.wake_app();
                    } else {
                        let _ = self.subs.request_offset_reset(&p.tp, None);
                    }
                }
                FetchReaction::Raise(code) => {
                    self.errors.push_back(Error::broker(
                        code,
                        Some(format!("fetching {}-{}", p.tp.topic, p.tp.partition)),
                    ));
                    self.wake_app();
                }
            }
        }
    }

    pub(super) fn on_offset_fetch(&mut self, result: Result<(ResponseKind, i16), Error>, now: i64) {
        self.offset_fetch_in_flight = false;
        let resp = match result {
            Ok((ResponseKind::OffsetFetch(resp), _)) => resp,
            _ => {
                self.apply_coordinator_reaction(
                    Reaction::CoordinatorUnknown,
                    "offset fetch failed",
                    None,
                    now,
                );
                return;
            }
        };
        let gid = self.cfg.group_id.clone().unwrap_or_default();
        let (code, parts) = rq::parse_offset_fetch(&resp, &gid);
        let code = rq::offset_fetch_error(code, &parts);
        if code != codes::NONE {
            let reaction = offset_fetch_reaction(code);
            if let Reaction::Fatal(c) = reaction {
                self.errors
                    .push_back(Error::broker(c, Some("fetching committed offsets".into())));
                self.wake_app();
            } else {
                self.apply_coordinator_reaction(reaction, "offset fetch", None, now);
            }
            return;
        }
        let mut missing = Vec::new();
        for (tp, o, _) in parts {
            let Some(s) = self.subs.state(&tp) else {
                continue;
            };
            if s.state != FetchState::Initializing {
                continue;
            }
            if o.offset >= 0 {
                let _ = self.subs.seek(&tp, o.offset, o.leader_epoch);
                self.last_committed.insert(tp, o.offset);
            } else {
                missing.push(tp);
            }
        }
        if !missing.is_empty() {
            if self.cfg.auto_offset_reset == OffsetResetStrategy::None {
                self.errors.push_back(Error::broker(
                    codes::OFFSET_OUT_OF_RANGE,
                    Some(format!(
                        "no committed offset and auto_offset_reset is 'none' for {} partition(s)",
                        missing.len()
                    )),
                ));
            } else {
                for tp in missing {
                    let _ = self.subs.request_offset_reset(&tp, None);
                }
            }
        }
        self.wake_app();
    }

    pub(super) fn on_reset(
        &mut self,
        parts: Vec<(TopicPartition, OffsetResetStrategy)>,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        for (tp, _) in &parts {
            self.resets_in_flight.remove(tp);
        }
        match result {
            Ok((ResponseKind::ListOffsets(resp), _)) => {
                for r in parse_list_offsets_response(&resp) {
                    let Some(strategy) = parts.iter().find(|p| p.0 == r.tp).map(|p| p.1) else {
                        continue;
                    };
                    if r.error_code == codes::NONE && r.offset >= 0 {
                        self.subs
                            .maybe_complete_reset(&r.tp, r.offset, r.leader_epoch, strategy);
                    } else {
                        self.subs
                            .set_reset_pending(&r.tp, now + self.cfg.retry_backoff_ms);
                        self.metadata_update();
                    }
                }
                self.wake_app();
            }
            _ => {
                for (tp, _) in &parts {
                    self.subs
                        .set_reset_pending(tp, now + self.cfg.retry_backoff_ms);
                }
                self.metadata_update();
            }
        }
    }
}

/// Move up to `max` records from the buffer to the application, advancing
/// positions. Chunks whose partition moved (seek, revocation) are dropped.
///
/// A whole fetched run of at least `alone_from` records that comes first is
/// returned alone. `poll_arrow` asks so (`ARROW_RUN_ALONE`): such a run
/// becomes an Arrow batch as it is, while merging it with the next
/// partition's run copies both (on six partitions that copy was a third of
/// the CPU per record, docs/benchmarks.md). `usize::MAX`: fill up to `max`.
pub(super) fn take_records(
    st: &mut ConsumerCore,
    max: usize,
    alone_from: usize,
) -> Vec<RecordSlice> {
    let mut out = Vec::new();
    let mut left = max;
    while left > 0 {
        let Some(c) = st.buffer.front_mut() else {
            break;
        };
        let current = st
            .subs
            .state(&c.tp)
            .filter(|s| s.state == FetchState::Fetching && !s.paused)
            .and_then(|s| s.position)
            .is_some_and(|p| p.offset == c.start);
        if !current {
            let b = c.bytes;
            st.buffer.pop_front();
            st.buffered_bytes -= b;
            continue;
        }
        let n = (c.cols.len() - c.cursor).min(left);
        let whole_run = out.is_empty() && c.cursor == 0 && n == c.cols.len() && n >= alone_from;
        // Java's records-consumed counts what poll returns: one add per slice.
        st.metrics.records_consumed += n as u64;
        if n > 0 {
            out.push(RecordSlice {
                tp: c.tp.clone(),
                cols: c.cols.clone(),
                from: c.cursor,
                to: c.cursor + n,
            });
            c.cursor += n;
            left = if whole_run { 0 } else { left - n };
        }
        let tp = c.tp.clone();
        let (next, epoch) = if c.cursor >= c.cols.len() {
            (c.next_offset, c.last_epoch)
        } else {
            (c.cols.offsets[c.cursor], c.cols.leader_epochs[c.cursor - 1])
        };
        // `start` always names where the unread part begins, which is the
        // position once we advance it below.
        c.start = next;
        if c.cursor >= c.cols.len() {
            let b = c.bytes;
            st.buffer.pop_front();
            st.buffered_bytes -= b;
        }
        st.subs.advance(&tp, next, epoch);
    }
    out
}
