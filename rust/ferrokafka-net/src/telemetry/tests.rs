//! The telemetry state machine with fake answers and a fake clock.

use ferrokafka_protocol::codes;
use ferrokafka_protocol::kafka_protocol::messages::{
    GetTelemetrySubscriptionsResponse, PushTelemetryRequest, PushTelemetryResponse,
};
use ferrokafka_protocol::kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::otlp::reader::{bytes, fields, one, Field};
use super::{Action, Kind, Telemetry, RETRY_MS};
use crate::error::Error;

fn metrics() -> Vec<(String, f64)> {
    vec![
        ("record-send-total".into(), 10.0),
        ("record-send-rate".into(), 2.5),
        ("request-latency-avg{node-id=node-1}".into(), 3.0),
        ("records_sent".into(), 10.0), // a legacy alias: never pushed
    ]
}

fn subscription(
    requested: &[&str],
    interval: i32,
    delta: bool,
) -> GetTelemetrySubscriptionsResponse {
    let mut r = GetTelemetrySubscriptionsResponse::default();
    r.client_instance_id = Uuid::from_u128(7);
    r.subscription_id = 42;
    r.accepted_compression_types = vec![4, 1];
    r.push_interval_ms = interval;
    r.telemetry_max_bytes = 1 << 20;
    r.delta_temporality = delta;
    r.requested_metrics = requested
        .iter()
        .map(|s| StrBytes::from_string(s.to_string()))
        .collect();
    r
}

fn ok_push() -> Result<PushTelemetryResponse, Error> {
    Ok(PushTelemetryResponse::default())
}

fn push_code(code: i16) -> Result<PushTelemetryResponse, Error> {
    let mut r = PushTelemetryResponse::default();
    r.error_code = code;
    Ok(r)
}

/// Subscribes `t` at `now`; returns the time of the first push.
fn subscribe(t: &mut Telemetry, now: i64, requested: &[&str], delta: bool) -> i64 {
    match t.next(now, &metrics) {
        Action::Subscribe(r) => assert!(r.client_instance_id.is_nil()),
        a => panic!("expected a subscription request, got {a:?}"),
    }
    t.on_subscription(now, Ok(subscription(requested, 1000, delta)));
    match t.next(now, &metrics) {
        Action::Idle { at } => at,
        a => panic!("{a:?}"),
    }
}

fn expect_push(t: &mut Telemetry, now: i64) -> PushTelemetryRequest {
    match t.next(now, &metrics) {
        Action::Push(r) => r,
        a => panic!("expected a push at {now}, got {a:?}"),
    }
}

/// The OTLP metric names of a push (decompressed).
fn names(r: &PushTelemetryRequest) -> Vec<String> {
    let raw = ferrokafka_protocol::compression::decompress(
        ferrokafka_protocol::compression::Compression::from_id(r.compression_type as u8).unwrap(),
        &r.metrics,
        1 << 20,
    )
    .unwrap();
    let rm = bytes(&fields(&raw), 1).to_vec();
    let sm = bytes(&fields(&rm), 2).to_vec();
    fields(&sm)
        .into_iter()
        .filter(|(f, _)| *f == 2)
        .map(|(_, m)| match m {
            Field::Bytes(b) => String::from_utf8(bytes(&fields(b), 1).to_vec()).unwrap(),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn subscribes_first_then_pushes_every_interval_with_the_instance_id() {
    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.5);
    let first = subscribe(&mut t, 0, &[""], false);
    assert_eq!(first, 1000, "first push after (0.5 + jitter) x interval");
    assert!(matches!(t.next(999, &metrics), Action::Idle { at: 1000 }));
    let r = expect_push(&mut t, 1000);
    assert_eq!(r.client_instance_id, Uuid::from_u128(7));
    assert_eq!(r.subscription_id, 42);
    assert_eq!(
        r.compression_type, 4,
        "the broker's first accepted codec we have: zstd"
    );
    assert!(!r.terminating);
    assert_eq!(
        names(&r),
        [
            "org.apache.kafka.producer.record.send.total",
            "org.apache.kafka.producer.record.send.rate",
            "org.apache.kafka.producer.request.latency.avg",
        ]
    );
    t.on_push(1010, ok_push());
    assert!(matches!(t.next(1500, &metrics), Action::Idle { at: 2010 }));
    assert!(matches!(t.next(2010, &metrics), Action::Push(_)));
    assert_eq!(t.pushes(), 1);
}

#[test]
fn only_the_subscribed_prefixes_are_pushed_and_none_means_ask_again() {
    let mut t = Telemetry::new(Kind::Consumer, "app", 0, 0.0);
    let at = subscribe(&mut t, 0, &["org.apache.kafka.consumer.request."], false);
    let r = expect_push(&mut t, at);
    assert_eq!(names(&r), ["org.apache.kafka.consumer.request.latency.avg"]);

    let mut t = Telemetry::new(Kind::Admin, "app", 0, 0.0);
    let again = subscribe(&mut t, 0, &[], false);
    assert_eq!(
        again, 1000,
        "no metrics wanted: ask again after the interval"
    );
    assert!(
        matches!(t.next(1000, &metrics), Action::Subscribe(r) if r.client_instance_id == Uuid::from_u128(7))
    );
}

#[test]
fn counters_are_deltas_when_the_subscription_says_so() {
    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.0);
    let at = subscribe(
        &mut t,
        0,
        &["org.apache.kafka.producer.record.send.total"],
        true,
    );
    let first = expect_push(&mut t, at);
    t.on_push(at, ok_push());
    let later = || vec![("record-send-total".to_string(), 25.0)];
    let second = match t.next(at + 1000, &later) {
        Action::Push(r) => r,
        a => panic!("{a:?}"),
    };
    let value = |r: &PushTelemetryRequest| -> f64 {
        let raw = ferrokafka_protocol::compression::decompress(
            ferrokafka_protocol::compression::Compression::from_id(r.compression_type as u8)
                .unwrap(),
            &r.metrics,
            1 << 20,
        )
        .unwrap();
        let rm = bytes(&fields(&raw), 1).to_vec();
        let sm = bytes(&fields(&rm), 2).to_vec();
        let metric = bytes(&fields(&sm), 2).to_vec();
        let sum = bytes(&fields(&metric), 7).to_vec();
        assert_eq!(one(&fields(&sum), 2), Field::Varint(1), "DELTA temporality");
        let dp = bytes(&fields(&sum), 1).to_vec();
        match one(&fields(&dp), 4) {
            Field::Fixed64(b) => f64::from_bits(b),
            f => panic!("{f:?}"),
        }
    };
    assert_eq!(value(&first), 10.0);
    assert_eq!(value(&second), 15.0);
}

#[test]
fn push_errors_follow_kip_714() {
    // The subscription changed: ask again at once, then push at once.
    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.0);
    let at = subscribe(&mut t, 0, &[""], false);
    expect_push(&mut t, at);
    t.on_push(at, push_code(codes::UNKNOWN_SUBSCRIPTION_ID));
    assert!(matches!(t.next(at, &metrics), Action::Subscribe(_)));
    t.on_subscription(at, Ok(subscription(&[""], 1000, false)));
    expect_push(&mut t, at);
    // Too large or throttled: the next interval.
    t.on_push(at, push_code(codes::TELEMETRY_TOO_LARGE));
    assert!(matches!(t.next(at, &metrics), Action::Idle { at: a } if a == at + 1000));
    // Invalid record: the broker does not want our pushes; stop for good.
    expect_push(&mut t, at + 1000);
    t.on_push(at + 1000, push_code(codes::INVALID_RECORD));
    assert!(matches!(t.next(at + 5000, &metrics), Action::Stop));
    assert!(t.is_stopped());
}

#[test]
fn a_broker_without_telemetry_turns_it_off_and_errors_retry_later() {
    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.0);
    assert!(matches!(t.next(0, &metrics), Action::Subscribe(_)));
    t.on_subscription(
        0,
        Err(Error::UnsupportedVersion {
            api: "GetTelemetrySubscriptions".into(),
            node_id: 1,
            broker_min: -1,
            broker_max: -1,
            client_min: 0,
            client_max: 0,
        }),
    );
    assert!(matches!(t.next(1, &metrics), Action::Stop));

    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.0);
    assert!(matches!(t.next(0, &metrics), Action::Subscribe(_)));
    t.on_subscription(0, Err(Error::Disconnected { node_id: 1 }));
    assert!(matches!(t.next(1, &metrics), Action::Idle { at: RETRY_MS }));
    assert!(matches!(t.next(RETRY_MS, &metrics), Action::Subscribe(_)));
}

#[test]
fn close_sends_one_terminating_push_then_stops() {
    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.0);
    subscribe(&mut t, 0, &[""], false);
    t.close(10);
    let r = expect_push(&mut t, 10);
    assert!(r.terminating);
    t.on_push(11, ok_push());
    assert!(matches!(t.next(12, &metrics), Action::Stop));

    // Never subscribed (no broker answered): nothing to terminate.
    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.0);
    t.close(0);
    assert!(matches!(t.next(0, &metrics), Action::Stop));
}

#[test]
fn uncompressed_when_the_broker_accepts_no_codec_we_have() {
    let mut t = Telemetry::new(Kind::Producer, "app", 0, 0.0);
    assert!(matches!(t.next(0, &metrics), Action::Subscribe(_)));
    let mut s = subscription(&[""], 1000, false);
    s.accepted_compression_types = vec![2]; // snappy only
    t.on_subscription(0, Ok(s));
    let r = expect_push(&mut t, 500);
    assert_eq!(r.compression_type, 0);
    assert_eq!(names(&r).len(), 3);
}
