//! The producer's counters behind `metrics()` (relaxed atomics: readers
//! want a recent value, not a consistent snapshot), and the figures built
//! from them with Java's producer metric names (docs/metrics.md).
//!
//! Counted once per Produce request (bytes, batches, per-topic bytes) and
//! once per finished batch (records sent or failed, per topic): nothing per
//! record. Rates are over the producer's lifetime (count / seconds since it
//! was created); latencies are over the last `LATENCY_WINDOW` answers.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Per topic: records sent and failed, bytes sent.
#[derive(Default, Debug, Clone, Copy)]
struct TopicFigures {
    sent: u64,
    errored: u64,
    bytes: u64,
}

pub(crate) struct Stats {
    created: Instant,
    pub(crate) records_sent: AtomicU64,
    pub(crate) records_errored: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) batches: AtomicU64,
    pub(crate) bytes_out: AtomicU64,
    /// Produce round trips in µs, the last `LATENCY_WINDOW` of them.
    latencies_us: Mutex<VecDeque<u64>>,
    topics: Mutex<BTreeMap<String, TopicFigures>>,
    /// Nanoseconds spent in each transactional call (Java's
    /// `txn-*-time-ns-total`), indexed by `TXN_CALLS`.
    txn_ns: [AtomicU64; 5],
}

/// The transactional calls timed, in `Stats::txn_ns` order, with Java's
/// metric names.
pub(crate) const TXN_CALLS: [&str; 5] = [
    "txn-init-time-ns-total",
    "txn-begin-time-ns-total",
    "txn-send-offsets-time-ns-total",
    "txn-commit-time-ns-total",
    "txn-abort-time-ns-total",
];

const LATENCY_WINDOW: usize = 4096;

impl Default for Stats {
    fn default() -> Self {
        Stats {
            created: Instant::now(),
            records_sent: AtomicU64::new(0),
            records_errored: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            latencies_us: Mutex::default(),
            topics: Mutex::default(),
            txn_ns: Default::default(),
        }
    }
}

/// What the producer adds from outside the counters.
pub(crate) struct Gauges {
    pub(crate) records_pending: f64,
    pub(crate) buffer_available: f64,
    pub(crate) buffer_total: f64,
    pub(crate) batches_in_flight: f64,
}

impl Stats {
    /// Time spent in transactional call `i` (`TXN_CALLS`).
    pub(crate) fn txn_time(&self, i: usize, ns: u64) {
        self.txn_ns[i].fetch_add(ns, Ordering::Relaxed);
    }

    pub(crate) fn record_latency(&self, us: u64) {
        let mut l = self.latencies_us.lock().unwrap_or_else(|p| p.into_inner());
        if l.len() == LATENCY_WINDOW {
            l.pop_front();
        }
        l.push_back(us);
    }

    fn topic(&self, topic: &str, f: impl FnOnce(&mut TopicFigures)) {
        let mut t = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        // Look up by &str first: no allocation once the topic is known.
        match t.get_mut(topic) {
            Some(e) => f(e),
            None => f(t.entry(topic.to_string()).or_default()),
        }
    }

    /// A Produce request carried `bytes` of `topic`'s batches.
    pub(crate) fn topic_bytes(&self, topic: &str, bytes: u64) {
        self.topic(topic, |e| e.bytes += bytes);
    }

    /// A batch of `n` records of `topic` finished.
    pub(crate) fn topic_records(&self, topic: &str, n: u64, ok: bool) {
        self.topic(topic, |e| {
            if ok {
                e.sent += n;
            } else {
                e.errored += n;
            }
        });
    }

    /// (avg, p99, max) in ms over the window; zeros before the first answer.
    pub(crate) fn latency_ms(&self) -> (f64, f64, f64) {
        let l = self.latencies_us.lock().unwrap_or_else(|p| p.into_inner());
        if l.is_empty() {
            return (0.0, 0.0, 0.0);
        }
        let mut v: Vec<u64> = l.iter().copied().collect();
        v.sort_unstable();
        let avg = v.iter().sum::<u64>() as f64 / v.len() as f64;
        let p99 = v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1];
        let max = v[v.len() - 1];
        (avg / 1000.0, p99 as f64 / 1000.0, max as f64 / 1000.0)
    }

    /// Every figure: Java's names, then the names `metrics()` had before
    /// (kept as aliases: existing callers read them), then per topic as
    /// `name{topic=T}`.
    pub(crate) fn metrics(&self, g: Gauges) -> Vec<(String, f64)> {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        // The first second counts as one: no inflated rate right at start.
        let secs = self.created.elapsed().as_secs_f64().max(1.0);
        let (lat_avg, lat_p99, lat_max) = self.latency_ms();
        let (sent, errored) = (get(&self.records_sent), get(&self.records_errored));
        let (requests, batches, bytes) = (
            get(&self.requests),
            get(&self.batches),
            get(&self.bytes_out),
        );
        let per = |x: f64, n: f64| if n > 0.0 { x / n } else { 0.0 };
        let batch_size_avg = per(bytes, batches);
        let mut out: Vec<(String, f64)> = [
            ("record-send-total", sent),
            ("record-send-rate", sent / secs),
            ("record-error-total", errored),
            ("record-error-rate", errored / secs),
            ("request-total", requests),
            ("request-rate", requests / secs),
            ("request-latency-avg", lat_avg),
            ("request-latency-max", lat_max),
            ("request-latency-p99", lat_p99),
            ("batch-total", batches),
            ("batch-size-avg", batch_size_avg),
            ("records-per-request-avg", per(sent + errored, requests)),
            ("outgoing-byte-total", bytes),
            ("outgoing-byte-rate", bytes / secs),
            ("buffer-available-bytes", g.buffer_available),
            ("buffer-total-bytes", g.buffer_total),
            ("records-pending", g.records_pending),
            ("batches-in-flight", g.batches_in_flight),
            (TXN_CALLS[0], get(&self.txn_ns[0])),
            (TXN_CALLS[1], get(&self.txn_ns[1])),
            (TXN_CALLS[2], get(&self.txn_ns[2])),
            (TXN_CALLS[3], get(&self.txn_ns[3])),
            (TXN_CALLS[4], get(&self.txn_ns[4])),
            // Before the Java names (kept for compatibility).
            ("records_pending", g.records_pending),
            ("records_sent", sent),
            ("records_errored", errored),
            ("requests_sent", requests),
            ("batches_sent", batches),
            ("bytes_out", bytes),
            ("batch_size_avg", batch_size_avg),
            ("request_latency_avg_ms", lat_avg),
            ("request_latency_p99_ms", lat_p99),
            ("buffer_available_bytes", g.buffer_available),
            ("buffer_total_bytes", g.buffer_total),
            ("batches_in_flight", g.batches_in_flight),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let topics = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        for (t, f) in topics.iter() {
            let l = format!("{{topic={t}}}");
            out.push((format!("record-send-total{l}"), f.sent as f64));
            out.push((format!("record-send-rate{l}"), f.sent as f64 / secs));
            out.push((format!("record-error-total{l}"), f.errored as f64));
            out.push((format!("byte-total{l}"), f.bytes as f64));
            out.push((format!("byte-rate{l}"), f.bytes as f64 / secs));
        }
        out
    }
}
