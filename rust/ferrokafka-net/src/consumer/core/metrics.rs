//! The consumer's counters behind `metrics()` and `lag()`.
//!
//! They live inside `ConsumerCore`, so they are updated under the lock the
//! core is already held by (one update per Fetch answer, per commit answer,
//! per `take_records` slice: nothing per record) and read on demand by
//! `metrics()`. Rates are over the consumer's lifetime (count / seconds
//! since it was created), not Java's 30 s sample windows: a lifetime rate
//! needs no timer and no per-sample storage. Names follow Java's consumer
//! metrics (docs/metrics.md lists them); per-partition figures are keyed
//! `name{topic=T,partition=P}`, the same shape the producer's per-topic
//! figures use.

use super::ConsumerCore;
use crate::cluster::TopicPartition;

/// Sum, count and maximum of a latency, in ms.
#[derive(Default, Debug, Clone, Copy)]
pub(super) struct Latency {
    count: u64,
    sum_ms: f64,
    max_ms: f64,
}

impl Latency {
    pub(super) fn record(&mut self, ms: f64) {
        let ms = ms.max(0.0);
        self.count += 1;
        self.sum_ms += ms;
        if ms > self.max_ms {
            self.max_ms = ms;
        }
    }

    fn avg(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ms / self.count as f64
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct ConsumerMetrics {
    created_ms: i64,
    /// Records handed to the application (`take_records`), as Java counts
    /// records-consumed (what `poll` returned, not what was fetched).
    pub(super) records_consumed: u64,
    /// Records and bytes that arrived in Fetch answers.
    pub(super) records_fetched: u64,
    pub(super) bytes_fetched: u64,
    pub(super) fetch: Latency,
    pub(super) fetch_errors: u64,
    pub(super) commit: Latency,
    pub(super) commit_errors: u64,
    pub(super) rebalances: u64,
    pub(super) last_rebalance_ms: Option<i64>,
    pub(super) heartbeats: u64,
    pub(super) last_heartbeat_ms: Option<i64>,
}

impl ConsumerMetrics {
    pub(super) fn new(now: i64) -> Self {
        ConsumerMetrics {
            created_ms: now,
            records_consumed: 0,
            records_fetched: 0,
            bytes_fetched: 0,
            fetch: Latency::default(),
            fetch_errors: 0,
            commit: Latency::default(),
            commit_errors: 0,
            rebalances: 0,
            last_rebalance_ms: None,
            heartbeats: 0,
            last_heartbeat_ms: None,
        }
    }
}

/// Per second over the lifetime; the first second counts as one so a rate
/// read right after creation is not inflated by a tiny divisor.
fn rate(count: f64, created_ms: i64, now: i64) -> f64 {
    count / (((now - created_ms) as f64) / 1000.0).max(1.0)
}

impl ConsumerCore {
    /// A commit answer arrived `latency_ms` after the request was queued.
    pub fn record_commit(&mut self, latency_ms: f64, ok: bool) {
        if ok {
            self.metrics.commit.record(latency_ms);
        } else {
            self.metrics.commit_errors += 1;
        }
    }

    /// Lag of every assigned partition whose position and high watermark
    /// are both known: the last Fetch answer's high watermark (the last
    /// stable offset under read_committed, as Java) minus the position.
    /// No request: a partition not fetched yet has no entry.
    pub fn lag(&self) -> Vec<(TopicPartition, i64)> {
        self.subs
            .assigned_partitions()
            .filter_map(|tp| {
                let s = self.subs.state(tp)?;
                let pos = s.position?.offset;
                let end = if self.cfg.read_committed {
                    s.last_stable_offset
                } else {
                    s.high_watermark
                };
                (end >= 0).then(|| (tp.clone(), (end - pos).max(0)))
            })
            .collect()
    }

    /// Every figure, Java's name first (docs/metrics.md).
    pub fn metrics(&self, now: i64) -> Vec<(String, f64)> {
        let m = &self.metrics;
        let r = |c: u64| rate(c as f64, m.created_ms, now);
        let fetches = m.fetch.count as f64;
        let per_request = |x: u64| {
            if fetches > 0.0 {
                x as f64 / fetches
            } else {
                0.0
            }
        };
        let ago = |t: Option<i64>| t.map_or(-1.0, |t| (now - t) as f64 / 1000.0);
        let hours = (((now - m.created_ms) as f64) / 3_600_000.0).max(1.0 / 60.0);
        let lag = self.lag();
        let mut out: Vec<(String, f64)> = vec![
            ("records-consumed-total", m.records_consumed as f64),
            ("records-consumed-rate", r(m.records_consumed)),
            ("bytes-consumed-total", m.bytes_fetched as f64),
            ("bytes-consumed-rate", r(m.bytes_fetched)),
            ("fetch-total", fetches),
            ("fetch-rate", r(m.fetch.count)),
            ("fetch-latency-avg", m.fetch.avg()),
            ("fetch-latency-max", m.fetch.max_ms),
            ("fetch-error-total", m.fetch_errors as f64),
            ("records-per-request-avg", per_request(m.records_fetched)),
            ("fetch-size-avg", per_request(m.bytes_fetched)),
            (
                "records-lag-max",
                lag.iter().map(|(_, l)| *l).max().unwrap_or(0) as f64,
            ),
            ("commit-total", m.commit.count as f64),
            ("commit-rate", r(m.commit.count)),
            ("commit-latency-avg", m.commit.avg()),
            ("commit-latency-max", m.commit.max_ms),
            ("commit-error-total", m.commit_errors as f64),
            ("rebalance-total", m.rebalances as f64),
            ("rebalance-rate-per-hour", m.rebalances as f64 / hours),
            ("last-rebalance-seconds-ago", ago(m.last_rebalance_ms)),
            ("heartbeat-total", m.heartbeats as f64),
            ("last-heartbeat-seconds-ago", ago(m.last_heartbeat_ms)),
            (
                "assigned-partitions",
                self.subs.assigned_partitions().count() as f64,
            ),
            ("buffered-bytes", self.buffered_bytes as f64),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (tp, l) in lag {
            let labels = format!("{{topic={},partition={}}}", tp.topic, tp.partition);
            if let Some(s) = self.subs.state(&tp) {
                out.push((format!("records-lag{labels}"), l as f64));
                out.push((
                    format!("records-lead{labels}"),
                    s.position
                        .map_or(0, |p| p.offset - s.log_start_offset.max(0))
                        as f64,
                ));
                out.push((format!("high-watermark{labels}"), s.high_watermark as f64));
                if let Some(p) = s.position {
                    out.push((format!("position{labels}"), p.offset as f64));
                }
            }
        }
        out
    }
}
