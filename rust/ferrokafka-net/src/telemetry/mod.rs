//! KIP-714 client metrics push: which telemetry to send, when, and what to
//! do with each answer, as a sans-IO state machine with time as a
//! parameter (docs/semantics.md §10). `agent.rs` runs it on a thread.
//!
//! The cycle: GetTelemetrySubscriptions (the broker assigns our client
//! instance id and says which metric-name prefixes it wants, how often, how
//! compressed), then PushTelemetry every push interval, each carrying the
//! client's metrics (`metrics()` with Java's names) as an OTLP payload; one
//! last push marked `terminating` on close.

pub mod agent;
pub mod otlp;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use ferrokafka_protocol::codes;
use ferrokafka_protocol::compression::{compress, Compression};
use ferrokafka_protocol::kafka_protocol::messages::{
    GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, PushTelemetryRequest,
    PushTelemetryResponse,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::error::Error;

/// Retry delay when the broker gave no subscription (an error answer or no
/// answer): a fixed half minute, so a cluster without telemetry costs one
/// small request per 30 s until it answers UNSUPPORTED_VERSION or we stop.
pub const RETRY_MS: i64 = 30_000;

/// The client type: the metric-name namespace Java uses
/// (`org.apache.kafka.<type>.`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Producer,
    Consumer,
    Admin,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Producer => "org.apache.kafka.producer.",
            Kind::Consumer => "org.apache.kafka.consumer.",
            Kind::Admin => "org.apache.kafka.admin.",
        }
    }
}

/// What the broker asked for (GetTelemetrySubscriptions).
#[derive(Debug, Clone)]
struct Subscription {
    id: i32,
    push_interval_ms: i64,
    accepted: Vec<i8>,
    max_bytes: usize,
    delta: bool,
    /// Name prefixes; empty: nothing wanted; one empty string: everything.
    requested: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Ask for a subscription at `at`.
    NeedSubscription { at: i64 },
    /// A GetTelemetrySubscriptions is out.
    AwaitSubscription,
    /// Push at `at`.
    PushAt { at: i64 },
    /// A PushTelemetry is out.
    AwaitPush,
    /// Telemetry is off for this client (broker without it, or an answer
    /// that says our pushes are unwanted); nothing more is sent.
    Off,
    /// The terminating push went (or none was due): done.
    Terminated,
}

/// The next thing to do.
#[derive(Debug)]
pub enum Action {
    Subscribe(GetTelemetrySubscriptionsRequest),
    Push(PushTelemetryRequest),
    /// Nothing before `at` (ms).
    Idle {
        at: i64,
    },
    /// Nothing ever again.
    Stop,
}

pub struct Telemetry {
    kind: Kind,
    resource: Vec<(String, String)>,
    instance_id: Uuid,
    sub: Option<Subscription>,
    state: State,
    closing: bool,
    /// Counter values at the last push (delta temporality), keyed by the
    /// metric's own name (`request-total{node-id=node-1}`).
    last: HashMap<String, f64>,
    /// Start of the interval the counters of the next push cover.
    interval_start_ns: u64,
    pushes: u64,
    /// A number in [0, 1) drawn once: the first push waits
    /// (0.5 + jitter) x the push interval, so clients started together do not
    /// push together (KIP-714).
    jitter: f64,
}

fn ns(ms: i64) -> u64 {
    (ms.max(0) as u64) * 1_000_000
}

impl Telemetry {
    pub fn new(kind: Kind, client_id: &str, now: i64, jitter: f64) -> Self {
        Telemetry {
            kind,
            resource: vec![
                ("client_id".into(), client_id.into()),
                ("client_software_name".into(), "ferrokafka".into()),
                (
                    "client_software_version".into(),
                    env!("CARGO_PKG_VERSION").into(),
                ),
            ],
            instance_id: Uuid::nil(),
            sub: None,
            state: State::NeedSubscription { at: now },
            closing: false,
            last: HashMap::new(),
            interval_start_ns: ns(now),
            pushes: 0,
            jitter: jitter.clamp(0.0, 1.0),
        }
    }

    /// The id the broker gave this client (nil before the first answer).
    pub fn client_instance_id(&self) -> Uuid {
        self.instance_id
    }

    pub fn pushes(&self) -> u64 {
        self.pushes
    }

    pub fn is_stopped(&self) -> bool {
        matches!(self.state, State::Off | State::Terminated)
    }

    /// The client is closing: the next action is the terminating push (if
    /// metrics are subscribed), then `Stop`.
    pub fn close(&mut self, now: i64) {
        self.closing = true;
        match self.state {
            State::PushAt { .. } => self.state = State::PushAt { at: now },
            State::NeedSubscription { .. } => self.state = State::Terminated,
            _ => {}
        }
    }

    /// What to do at `now`; `metrics` is read only when a push is due.
    pub fn next(&mut self, now: i64, metrics: &dyn Fn() -> Vec<(String, f64)>) -> Action {
        match self.state {
            State::Off | State::Terminated => Action::Stop,
            State::AwaitSubscription | State::AwaitPush => Action::Idle { at: now + RETRY_MS },
            State::NeedSubscription { at } if now >= at => {
                self.state = State::AwaitSubscription;
                let mut r = GetTelemetrySubscriptionsRequest::default();
                r.client_instance_id = self.instance_id;
                Action::Subscribe(r)
            }
            State::PushAt { at } if now >= at => match self.push(now, metrics()) {
                Some(r) => {
                    self.state = State::AwaitPush;
                    Action::Push(r)
                }
                None if self.closing => {
                    self.state = State::Terminated;
                    Action::Stop
                }
                None => {
                    let interval = self.sub.as_ref().map_or(RETRY_MS, |s| s.push_interval_ms);
                    self.state = State::PushAt { at: now + interval };
                    Action::Idle { at: now + interval }
                }
            },
            State::NeedSubscription { at } | State::PushAt { at } => Action::Idle { at },
        }
    }

    /// The PushTelemetry for this moment, or None when there is nothing to
    /// send (no metric matches the subscription, or the payload is over the
    /// broker's limit: skipped, logged, tried again next interval).
    fn push(&mut self, now: i64, metrics: Vec<(String, f64)>) -> Option<PushTelemetryRequest> {
        let sub = self.sub.clone()?;
        let points = self.select(&sub, metrics);
        if points.is_empty() {
            return None;
        }
        let payload = otlp::encode(
            &self.resource,
            &points,
            self.interval_start_ns,
            ns(now),
            sub.delta,
        );
        let codec = choose_codec(&sub.accepted);
        let mut body = Vec::with_capacity(payload.len());
        let codec = match compress(codec, None, &payload, &mut body) {
            Ok(()) => codec,
            Err(_) => {
                body = payload;
                Compression::None
            }
        };
        if body.len() > sub.max_bytes {
            log::warn!(
                "client telemetry: {} bytes of metrics are over the broker's limit of {}; not pushed",
                body.len(),
                sub.max_bytes
            );
            return None;
        }
        if sub.delta {
            self.interval_start_ns = ns(now);
        }
        let mut r = PushTelemetryRequest::default();
        r.client_instance_id = self.instance_id;
        r.subscription_id = sub.id;
        r.terminating = self.closing;
        r.compression_type = codec as i8;
        r.metrics = body.into();
        Some(r)
    }

    /// The client's metrics as OTLP points: Java's names under the client
    /// type's namespace (`record-send-rate` -> `org.apache.kafka.producer.
    /// record.send.rate`), tags as attributes, the legacy `snake_case`
    /// aliases left out, filtered by the subscribed prefixes. Counters
    /// (`*-total`) become deltas when the subscription asks for them.
    fn select(&mut self, sub: &Subscription, metrics: Vec<(String, f64)>) -> Vec<otlp::Point> {
        let all = sub.requested.iter().any(|p| p.is_empty());
        let mut out = Vec::new();
        for (raw, value) in metrics {
            let (base, tags) = match raw.split_once('{') {
                Some((b, rest)) => (b, rest.trim_end_matches('}')),
                None => (raw.as_str(), ""),
            };
            if base.contains('_') {
                continue;
            }
            let name = format!("{}{}", self.kind.prefix(), base.replace('-', "."));
            if !all && !sub.requested.iter().any(|p| name.starts_with(p.as_str())) {
                continue;
            }
            let attributes = tags
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.replace('-', "_"), v.to_string()))
                .collect();
            let counter = base.ends_with("-total");
            let mut v = value;
            if counter && sub.delta {
                let prev = self.last.insert(raw.clone(), value).unwrap_or(0.0);
                v = (value - prev).max(0.0);
            }
            out.push(otlp::Point {
                name,
                attributes,
                value: v,
                counter,
            });
        }
        out
    }

    /// The answer to our GetTelemetrySubscriptions.
    pub fn on_subscription(
        &mut self,
        now: i64,
        answer: Result<GetTelemetrySubscriptionsResponse, Error>,
    ) {
        let r = match answer {
            Ok(r) if r.error_code == codes::NONE => r,
            Ok(r) if r.error_code == codes::UNSUPPORTED_VERSION => return self.off("unsupported"),
            Err(Error::UnsupportedVersion { .. }) => return self.off("not served by the broker"),
            Ok(_) | Err(_) => {
                self.state = self.after_error(now);
                return;
            }
        };
        if !r.client_instance_id.is_nil() {
            self.instance_id = r.client_instance_id;
        }
        let requested: Vec<String> = r
            .requested_metrics
            .iter()
            .map(|s: &StrBytes| s.to_string())
            .collect();
        let interval = i64::from(r.push_interval_ms).max(100);
        let first_sub = self.sub.is_none();
        self.sub = Some(Subscription {
            id: r.subscription_id,
            push_interval_ms: interval,
            accepted: r.accepted_compression_types.clone(),
            max_bytes: r.telemetry_max_bytes.max(0) as usize,
            delta: r.delta_temporality,
            requested: requested.clone(),
        });
        self.state = if self.closing {
            State::PushAt { at: now }
        } else if requested.is_empty() {
            // Nothing wanted now; the subscription may change: ask again.
            State::NeedSubscription { at: now + interval }
        } else if first_sub {
            State::PushAt {
                at: now + (interval as f64 * (0.5 + self.jitter)) as i64,
            }
        } else {
            // A renewed subscription (after UNKNOWN_SUBSCRIPTION_ID, ...):
            // push at once, the interval already passed.
            State::PushAt { at: now }
        };
    }

    /// The answer to our PushTelemetry.
    pub fn on_push(&mut self, now: i64, answer: Result<PushTelemetryResponse, Error>) {
        let interval = self.sub.as_ref().map_or(RETRY_MS, |s| s.push_interval_ms);
        let code = match answer {
            Ok(r) => r.error_code,
            Err(Error::UnsupportedVersion { .. }) => codes::UNSUPPORTED_VERSION,
            Err(_) => -1,
        };
        if code == codes::NONE {
            self.pushes += 1;
        }
        if self.closing {
            self.state = State::Terminated;
            return;
        }
        self.state = match code {
            codes::NONE | codes::TELEMETRY_TOO_LARGE | codes::THROTTLING_QUOTA_EXCEEDED | -1 => {
                State::PushAt { at: now + interval }
            }
            // The subscription changed or our codec is no longer accepted:
            // ask again now.
            codes::UNKNOWN_SUBSCRIPTION_ID | codes::UNSUPPORTED_COMPRESSION_TYPE => {
                State::NeedSubscription { at: now }
            }
            // INVALID_REQUEST, INVALID_RECORD, UNSUPPORTED_VERSION and the
            // rest: the broker will not take our pushes; stop (as Java).
            other => {
                self.off(&format!("PushTelemetry answered error code {other}"));
                return;
            }
        };
    }

    /// A request failed to go out at all (no node, client closing).
    pub fn on_not_sent(&mut self, now: i64) {
        self.state = if self.closing {
            State::Terminated
        } else {
            self.after_error(now)
        };
    }

    fn after_error(&self, now: i64) -> State {
        if self.closing {
            return State::Terminated;
        }
        match &self.sub {
            Some(s) if !s.requested.is_empty() => State::PushAt {
                at: now + s.push_interval_ms,
            },
            _ => State::NeedSubscription { at: now + RETRY_MS },
        }
    }

    fn off(&mut self, why: &str) {
        log::debug!("client telemetry off: {why}");
        self.state = State::Off;
    }
}

/// The first codec in the broker's preference order that we produce;
/// none when it accepts none of them (KIP-714: uncompressed is always
/// accepted). Snappy is left out: Java frames it differently here.
fn choose_codec(accepted: &[i8]) -> Compression {
    accepted
        .iter()
        .find_map(|&c| match c {
            1 => Some(Compression::Gzip),
            3 => Some(Compression::Lz4),
            4 => Some(Compression::Zstd),
            _ => None,
        })
        .unwrap_or(Compression::None)
}
