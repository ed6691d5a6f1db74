//! How answers change the share consumer's state: FindCoordinator,
//! ShareGroupHeartbeat, ShareFetch (acquired records, acknowledgement
//! outcomes) and ShareAcknowledge (docs/semantics.md §11.2-§11.6).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::ResponseKind;
use ferrokafka_protocol::record::DecodeOptions;

use super::{
    Action, ShareBatch, ShareCore, Tag, EMPTY_FETCH_PACE_MS, INVALID_SHARE_SESSION_EPOCH,
    SHARE_SESSION_NOT_FOUND,
};
use crate::cluster::TopicPartition;
use crate::consumer::core::coordinator_connection;
use crate::consumer::fetch::AbortedTransactionFilter;
use crate::consumer::pool::ColumnPool;
use crate::consumer::records::{decode_fetched, RecordColumns};
use crate::consumer::requests as rq;
use crate::error::Error;
use crate::share::acks::AckType;
use crate::share::session::SessionChange;

impl ShareCore {
    pub fn on_answer(
        &mut self,
        tag: Tag,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) -> Vec<Action> {
        match tag {
            Tag::FindCoordinator => {
                let r = match result {
                    Ok((ResponseKind::FindCoordinator(resp), _)) => {
                        rq::parse_find_coordinator(&resp, &self.cfg.group_id)
                            .map(|n| coordinator_connection(&n))
                            .map_err(|code| Error::broker(code, Some("FindCoordinator".into())))
                    }
                    Ok(_) => Err(unexpected("FindCoordinator")),
                    Err(e) => Err(e),
                };
                if let Err(e) = self.member.on_coordinator(r, now) {
                    self.report(e);
                }
            }
            Tag::Heartbeat => {
                let r = match result {
                    Ok((ResponseKind::ShareGroupHeartbeat(resp), _)) => Ok(resp),
                    Ok(_) => Err(unexpected("ShareGroupHeartbeat")),
                    Err(e) => Err(e),
                };
                if let Err(e) = self.member.on_heartbeat(r, now) {
                    self.report(e);
                }
            }
            Tag::Fetch {
                node,
                change,
                acked,
                commits,
                names,
            } => self.on_fetch(node, change, acked, commits, names, result, now),
            Tag::Acknowledge {
                node,
                acked,
                commits,
                close,
                names,
            } => self.on_acknowledge(node, acked, commits, close, names, result, now),
        }
        self.take_actions()
    }

    pub(super) fn report(&mut self, e: Error) {
        log::warn!(target: "ferrokafka::share", "share consumer error: {e}");
        self.errors.push_back(e);
        self.out.push(Action::WakeApplication);
    }

    /// Fill the commits waiting on `node` with the outcome of each
    /// partition's acknowledgements.
    pub(super) fn ack_results(
        &mut self,
        node: i32,
        commits: &[u64],
        acked: &[TopicPartition],
        outcome: impl Fn(&TopicPartition) -> Option<Error>,
    ) {
        if commits.is_empty() {
            for tp in acked {
                if let Some(e) = outcome(tp) {
                    // Piggybacked acknowledgements have nobody waiting.
                    log::warn!(target: "ferrokafka::share", "acknowledging {}-{} failed: {e}", tp.topic, tp.partition);
                }
            }
            return;
        }
        for id in commits {
            if let Some(w) = self.commits.get_mut(id) {
                for tp in acked {
                    w.results.insert(tp.clone(), outcome(tp));
                }
                w.nodes.remove(&node);
            }
        }
        self.out.push(Action::WakeApplication);
    }

    /// Offsets of `tp` from `node` this member holds: buffered, or returned
    /// and not yet acknowledged.
    fn held(&self, node: i32, tp: &TopicPartition) -> BTreeSet<i64> {
        let mut out: BTreeSet<i64> = self
            .delivered
            .get(&(node, tp.clone()))
            .map(|d| d.keys().copied().collect())
            .unwrap_or_default();
        for b in self.buffer.iter().filter(|b| b.node == node && &b.tp == tp) {
            out.extend(b.rows.iter().map(|&r| b.cols.offsets[r]));
        }
        out
    }

    /// A request failed as a whole: its session is reset (or backed off).
    fn session_failed(&mut self, node: i32, e: &Error, now: i64) {
        let session_gone = matches!(e.code(), c if c == SHARE_SESSION_NOT_FOUND || c == INVALID_SHARE_SESSION_EPOCH);
        let retry = if session_gone {
            now
        } else {
            now + self.cfg.retry_backoff_ms
        };
        if let Some(s) = self.sessions.get_mut(&node) {
            s.reset(retry);
        }
        if !session_gone {
            self.out.push(Action::MetadataUpdate);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_fetch(
        &mut self,
        node: i32,
        change: SessionChange,
        acked: Vec<TopicPartition>,
        commits: Vec<u64>,
        names: HashMap<[u8; 16], String>,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let resp = match result {
            Ok((ResponseKind::ShareFetch(r), _)) if r.error_code == codes::NONE => r,
            other => {
                let e = match other {
                    Ok((ResponseKind::ShareFetch(r), _)) => Error::broker(
                        r.error_code,
                        r.error_message
                            .map(|m| m.to_string())
                            .or_else(|| Some("ShareFetch".into())),
                    ),
                    Ok(_) => unexpected("ShareFetch"),
                    Err(e) => e,
                };
                log::debug!(target: "ferrokafka::share", "ShareFetch to node {node} failed: {e}");
                self.ack_results(node, &commits, &acked, |_| Some(e.clone()));
                if is_fatal(&e) {
                    self.report(e.clone());
                }
                self.session_failed(node, &e, now);
                return;
            }
        };
        if let Some(s) = self.sessions.get_mut(&node) {
            s.on_success(&change);
        }
        let mut ack_codes: BTreeMap<TopicPartition, i16> = BTreeMap::new();
        let opts = DecodeOptions {
            verify_crc: self.cfg.check_crcs,
            ..DecodeOptions::default()
        };
        let mut got = false;
        let mut stale_routes = false;
        for t in resp.responses {
            let Some(name) = names.get(t.topic_id.as_bytes()) else {
                continue;
            };
            for p in t.partitions {
                let tp = TopicPartition::new(name.as_str(), p.partition_index);
                ack_codes.insert(tp.clone(), p.acknowledge_error_code);
                if p.error_code != codes::NONE {
                    log::debug!(target: "ferrokafka::share", "ShareFetch {}-{}: error code {}", tp.topic, tp.partition, p.error_code);
                    if matches!(p.error_code, codes::TOPIC_AUTHORIZATION_FAILED) {
                        self.report(Error::broker(
                            p.error_code,
                            Some(format!("ShareFetch {}-{}", tp.topic, tp.partition)),
                        ));
                    } else {
                        stale_routes = true;
                    }
                    continue;
                }
                if p.acquired_records.is_empty() {
                    continue;
                }
                let ranges: Vec<(i64, i64, i16)> = p
                    .acquired_records
                    .iter()
                    .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
                    .collect();
                log::debug!(target: "ferrokafka::share", "node {node} {}-{}: acquired {ranges:?}", tp.topic, tp.partition);
                let blob = p.records.unwrap_or_default();
                match acquired_rows(&blob, &ranges, opts, Some(&self.pool)) {
                    Ok((cols, mut rows, mut counts, gaps)) => {
                        // A record we still hold (buffered or returned and not
                        // yet acknowledged) is not handed out twice, should a
                        // broker list it again.
                        let held = self.held(node, &tp);
                        if !held.is_empty() {
                            let keep: Vec<bool> = rows
                                .iter()
                                .map(|&r| !held.contains(&cols.offsets[r]))
                                .collect();
                            let mut k = keep.iter();
                            rows.retain(|_| *k.next().unwrap_or(&true));
                            let mut k = keep.iter();
                            counts.retain(|_| *k.next().unwrap_or(&true));
                        }
                        if !gaps.is_empty() {
                            let a = self
                                .pending
                                .entry(node)
                                .or_default()
                                .entry(tp.clone())
                                .or_default();
                            for g in gaps {
                                a.insert(g, AckType::Gap);
                            }
                        }
                        if !rows.is_empty() {
                            self.buffer.push_back(ShareBatch {
                                tp,
                                node,
                                cols: Arc::new(cols),
                                rows,
                                delivery_counts: counts,
                            });
                            got = true;
                        }
                    }
                    Err(e) => {
                        // Undecodable: the records go back to the group (a
                        // healthy copy may reach another member) and the
                        // application hears why.
                        let a = self
                            .pending
                            .entry(node)
                            .or_default()
                            .entry(tp.clone())
                            .or_default();
                        for (first, last, _) in &ranges {
                            for o in *first..=*last {
                                a.insert(o, AckType::Release);
                            }
                        }
                        self.report(e);
                    }
                }
            }
        }
        self.ack_results(node, &commits, &acked, |tp| {
            match ack_codes.get(tp).copied().unwrap_or(codes::NONE) {
                codes::NONE => None,
                c => Some(Error::broker(
                    c,
                    Some(format!("acknowledging {}-{}", tp.topic, tp.partition)),
                )),
            }
        });
        if stale_routes {
            self.out.push(Action::MetadataUpdate);
        }
        if !got {
            // Nothing acquired: the broker held the fetch up to
            // fetch_max_wait_ms already, or (a broker that does not hold
            // share fetches) answered at once; the next fetch is paced so
            // such a broker is not asked in a tight loop.
            if let Some(s) = self.sessions.get_mut(&node) {
                s.retry_at_ms = now + EMPTY_FETCH_PACE_MS.min(self.cfg.fetch_max_wait_ms as i64);
            }
        }
        if got {
            self.out.push(Action::WakeApplication);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_acknowledge(
        &mut self,
        node: i32,
        acked: Vec<TopicPartition>,
        commits: Vec<u64>,
        close: bool,
        names: HashMap<[u8; 16], String>,
        result: Result<(ResponseKind, i16), Error>,
        now: i64,
    ) {
        let resp = match result {
            Ok((ResponseKind::ShareAcknowledge(r), _)) if r.error_code == codes::NONE => r,
            other => {
                let e = match other {
                    Ok((ResponseKind::ShareAcknowledge(r), _)) => Error::broker(
                        r.error_code,
                        r.error_message
                            .map(|m| m.to_string())
                            .or_else(|| Some("ShareAcknowledge".into())),
                    ),
                    Ok(_) => unexpected("ShareAcknowledge"),
                    Err(e) => e,
                };
                self.ack_results(node, &commits, &acked, |_| Some(e.clone()));
                if close {
                    if let Some(s) = self.sessions.get_mut(&node) {
                        s.in_flight = false;
                    }
                } else {
                    self.session_failed(node, &e, now);
                }
                return;
            }
        };
        if let Some(s) = self.sessions.get_mut(&node) {
            if close {
                s.in_flight = false;
            } else {
                s.on_success(&SessionChange::default());
            }
        }
        let mut codes_by_tp: BTreeMap<TopicPartition, i16> = BTreeMap::new();
        for t in resp.responses {
            let Some(name) = names.get(t.topic_id.as_bytes()) else {
                continue;
            };
            for p in t.partitions {
                codes_by_tp.insert(
                    TopicPartition::new(name.as_str(), p.partition_index),
                    p.error_code,
                );
            }
        }
        self.ack_results(node, &commits, &acked, |tp| {
            match codes_by_tp.get(tp).copied().unwrap_or(codes::NONE) {
                codes::NONE => None,
                c => Some(Error::broker(
                    c,
                    Some(format!("acknowledging {}-{}", tp.topic, tp.partition)),
                )),
            }
        });
    }
}

fn unexpected(what: &str) -> Error {
    Error::State {
        detail: format!("unexpected answer to {what}"),
    }
}

/// Errors the application must hear about (retrying will not help).
fn is_fatal(e: &Error) -> bool {
    matches!(
        e.code(),
        codes::GROUP_AUTHORIZATION_FAILED
            | codes::TOPIC_AUTHORIZATION_FAILED
            | codes::UNSUPPORTED_VERSION
            | codes::INVALID_GROUP_ID
    ) || matches!(e, Error::UnsupportedVersion { .. })
}

/// Decode a partition's blob and keep only the records inside the acquired
/// ranges (docs/semantics.md §11.3), each with its delivery count. Acquired offsets with no record
/// (control records, compacted holes) are returned as gaps.
#[allow(clippy::type_complexity)]
pub fn acquired_rows(
    blob: &[u8],
    ranges: &[(i64, i64, i16)],
    opts: DecodeOptions,
    pool: Option<&Arc<ColumnPool>>,
) -> Result<(RecordColumns, Vec<usize>, Vec<i16>, Vec<i64>), Error> {
    let first = ranges.iter().map(|r| r.0).min().unwrap_or(0);
    let mut filter = AbortedTransactionFilter::new(false, Vec::new());
    let decoded = decode_fetched(blob, first, opts, &mut filter, pool)?;
    let cols = decoded.records;
    let mut rows = Vec::new();
    let mut counts = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, &off) in cols.offsets.iter().enumerate() {
        if let Some(r) = ranges.iter().find(|r| r.0 <= off && off <= r.1) {
            if seen.insert(off) {
                rows.push(i);
                counts.push(r.2);
            }
        }
    }
    let mut gaps = Vec::new();
    for (a, b, _) in ranges {
        for o in *a..=*b {
            if !seen.contains(&o) {
                gaps.push(o);
            }
        }
    }
    Ok((cols, rows, counts, gaps))
}
