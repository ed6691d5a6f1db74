//! The updater against a fake network client, with injected time.

use super::*;
use crate::metadata::tests::{pm, response, topic, topic_err};
use crate::metadata::{codes, MetadataConfig};
use crate::updater::MetadataRequestSpec;
use std::collections::{HashMap, HashSet};

/// A scripted network client: nodes are reachable unless `down`; a node
/// becomes READY one `maybe_update` after `initiate_connect`; least-loaded
/// is a reachable node of `nodes` (the updater's fetch_nodes), rotating.
#[derive(Default)]
struct FakeCtx {
    nodes: Vec<Node>,
    down: HashSet<i32>,
    /// node id -> time its reconnect backoff ends (after a failed connect).
    backoff_until: HashMap<i32, i64>,
    connecting: HashSet<i32>,
    ready: HashSet<i32>,
    sent: Vec<(i64, i32, MetadataRequestSpec)>,
    connects: Vec<(i64, i32)>,
    rr: usize,
}

impl FakeCtx {
    fn reachable(&self, id: i32, now: i64) -> bool {
        self.ready.contains(&id)
            || self.connecting.contains(&id)
            || self.backoff_until.get(&id).is_none_or(|t| now >= *t)
    }
}

impl UpdaterContext for FakeCtx {
    fn least_loaded_node(&mut self, now_ms: i64) -> Option<Node> {
        // docs/semantics.md §2.2: a ready node first, then a connecting one, then one
        // out of backoff, starting at a random index (here: rotating).
        if let Some(n) = self
            .nodes
            .iter()
            .find(|n| self.ready.contains(&n.id) || self.connecting.contains(&n.id))
        {
            return Some(n.clone());
        }
        self.rr += 1;
        let n = self.nodes.len();
        (0..n)
            .map(|i| &self.nodes[(self.rr + i) % n])
            .find(|node| self.reachable(node.id, now_ms))
            .cloned()
    }
    fn can_send_request(&self, node_id: i32, _now_ms: i64) -> bool {
        self.ready.contains(&node_id)
    }
    fn is_connecting_or_connected(&self, node_id: i32) -> bool {
        self.ready.contains(&node_id) || self.connecting.contains(&node_id)
    }
    fn can_connect(&self, node: &Node, now_ms: i64) -> bool {
        !self.is_connecting_or_connected(node.id)
            && self
                .backoff_until
                .get(&node.id)
                .is_none_or(|t| now_ms >= *t)
    }
    fn initiate_connect(&mut self, node: &Node, now_ms: i64) {
        self.connects.push((now_ms, node.id));
        self.connecting.insert(node.id);
    }
    fn send_metadata_request(
        &mut self,
        node_id: i32,
        spec: MetadataRequestSpec,
        now_ms: i64,
    ) -> Result<(), Error> {
        self.sent.push((now_ms, node_id, spec));
        Ok(())
    }
    fn reconnect_backoff_ms(&self) -> i64 {
        50
    }
}

/// Test times are offsets from T0: a wall clock is never near 0, and
/// `last_refresh_ms = 0` ("refresh at once") relies on that.
const T0: i64 = 1_700_000_000_000;

/// The client's side of a poll: finish connects (or fail them), refresh the
/// node list from the updater, call maybe_update.
fn poll(up: &mut DefaultMetadataUpdater, ctx: &mut FakeCtx, now: i64) -> i64 {
    let now = T0 + now;
    let connecting: Vec<i32> = ctx.connecting.drain().collect();
    for id in connecting {
        if ctx.down.contains(&id) {
            ctx.backoff_until.insert(id, now + 50);
            up.handle_server_disconnect(now, id, None);
        } else {
            ctx.ready.insert(id);
        }
    }
    ctx.nodes = up.fetch_nodes();
    up.maybe_update(now, ctx)
}

fn updater(seed: u64) -> (Arc<Metadata>, DefaultMetadataUpdater) {
    let md = Arc::new(
        Metadata::new_producer(
            MetadataConfig {
                rng_seed: Some(seed),
                ..MetadataConfig::default()
            },
            300_000,
        )
        .unwrap(),
    );
    md.bootstrap(&["s1:9092", "s2:9092", "s3:9092"]).unwrap();
    let up = DefaultMetadataUpdater::new(md.clone(), UpdaterConfig::default());
    (md, up)
}

#[test]
fn first_update_connects_then_sends_once() {
    let (md, mut up) = updater(1);
    md.add("t", T0).unwrap();
    assert!(up.is_update_due(T0));
    let wait = poll(&mut up, &mut FakeCtx::default(), 0);
    assert!(wait > 0);
    let mut ctx = FakeCtx::default();
    poll(&mut up, &mut ctx, 0); // initiates connect
    assert_eq!(ctx.connects.len(), 1);
    assert!(ctx.sent.is_empty());
    poll(&mut up, &mut ctx, 1); // ready -> send
    assert_eq!(ctx.sent.len(), 1);
    assert_eq!(ctx.sent[0].2.topics, Some(vec!["t".to_string()]));
    assert!(ctx.sent[0].1 < 0, "first request goes to a seed broker");
    // One in flight at a time.
    assert_eq!(poll(&mut up, &mut ctx, 2), 30_000);
    assert!(!up.is_update_due(T0 + 2));
    assert_eq!(ctx.sent.len(), 1);
    up.handle_success_request(T0 + 5, response(vec![topic("t", vec![pm(0, 1, 0)])]));
    // Seeds are no longer used: the brokers of the answer are.
    let ids: Vec<i32> = up.fetch_nodes().iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![0, 1]);
    assert_eq!(md.fetch().leader_for("t", 0).unwrap().id, 1);
    assert!(!md.update_requested());
}

#[test]
fn seeds_tried_in_random_order() {
    let firsts: HashSet<i32> = (0..16)
        .map(|seed| {
            let (_md, mut up) = updater(seed);
            let mut ctx = FakeCtx::default();
            poll(&mut up, &mut ctx, 0);
            ctx.connects[0].1
        })
        .collect();
    assert!(firsts.len() > 1, "always the same first seed: {firsts:?}");
}

#[test]
fn unknown_topic_no_spin() {
    let (md, mut up) = updater(2);
    let mut ctx = FakeCtx::default();
    md.add("missing", T0).unwrap();
    // Producer-like loop: each ms, ask for the topic again and poll; the
    // broker always answers UNKNOWN_TOPIC_OR_PARTITION at once.
    for now in 0..1000 {
        let _ = md.request_update_for_topic("missing");
        poll(&mut up, &mut ctx, now);
        if up.has_fetch_in_progress() {
            up.handle_success_request(
                T0 + now,
                response(vec![topic_err(
                    "missing",
                    codes::UNKNOWN_TOPIC_OR_PARTITION,
                )]),
            );
        }
    }
    assert!(md.fetch().partitions_for_topic("missing").is_empty());
    // At most one request per refresh_backoff_ms (100) after the first.
    let times: Vec<i64> = ctx.sent.iter().map(|s| s.0 - T0).collect();
    assert!(
        times.len() <= 1 + 1000 / 100,
        "{} requests: {times:?}",
        times.len()
    );
    for w in times.windows(2) {
        assert!(w[1] - w[0] >= 100, "{times:?}");
    }
}

#[test]
fn failed_requests_back_off_exponentially() {
    let (md, mut up) = updater(3);
    let mut ctx = FakeCtx::default();
    md.request_update();
    let mut now = 0;
    let mut sends = vec![];
    while now < 20_000 {
        poll(&mut up, &mut ctx, now);
        if up.has_fetch_in_progress() {
            sends.push(now);
            up.handle_failed_request(T0 + now, None);
        }
        now += 1;
    }
    let gaps: Vec<i64> = sends.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.len() > 10);
    // ~100, ~200, ~400, ~800, then capped at 1000 (+-20% jitter, capped).
    assert!(gaps[0] >= 80 && gaps[0] <= 120, "{gaps:?}");
    assert!(gaps[1] >= 160 && gaps[1] <= 240, "{gaps:?}");
    assert!(gaps[2] >= 320 && gaps[2] <= 480, "{gaps:?}");
    for g in &gaps[4..] {
        assert!(*g >= 800 && *g <= 1000, "{gaps:?}");
    }
    assert_eq!(md.failed_attempts() as usize, sends.len());
}

#[test]
fn rebootstrap_when_all_brokers_unreachable() {
    let (md, _) = updater(4);
    let mut up = DefaultMetadataUpdater::new(
        md.clone(),
        UpdaterConfig {
            unreachable_rebootstrap_ms: 1_000,
            ..UpdaterConfig::default()
        },
    );
    let mut ctx = FakeCtx::default();
    // First answer from a seed.
    for now in 0..3 {
        poll(&mut up, &mut ctx, now);
    }
    assert_eq!(ctx.sent.len(), 1);
    up.handle_success_request(T0 + 3, response(vec![]));
    assert!(!md.fetch().is_bootstrap_configured());
    // Both brokers die; the seeds (other addresses, e.g. a load balancer) live.
    ctx.down.extend([0, 1]);
    ctx.ready.retain(|id| *id < 0);
    up.handle_server_disconnect(T0 + 4, 0, None);
    let mut now = 4;
    while now < 20_000 && !md.fetch().is_bootstrap_configured() {
        poll(&mut up, &mut ctx, now);
        now += 1;
    }
    assert!(
        md.fetch().is_bootstrap_configured(),
        "never re-bootstrapped"
    );
    assert!(
        now >= 1_004,
        "re-bootstrapped before the grace period: {now}"
    );
    assert_eq!(up.rebootstrap_count(), 1);
    // The next request goes to a seed again and its answer is applied.
    while now < 4000 && ctx.sent.len() < 2 {
        poll(&mut up, &mut ctx, now);
        now += 1;
    }
    assert_eq!(ctx.sent.len(), 2);
    assert!(ctx.sent[1].1 < 0);
    up.handle_success_request(T0 + now, response(vec![]));
    assert!(!md.fetch().is_bootstrap_configured());
}

#[test]
fn rebootstrap_trigger_when_no_answer_for_long() {
    let md = Arc::new(Metadata::new(MetadataConfig::default()).unwrap());
    md.bootstrap(&["s:1"]).unwrap();
    let mut up = DefaultMetadataUpdater::new(
        md.clone(),
        UpdaterConfig {
            rebootstrap_trigger_ms: 5_000,
            ..UpdaterConfig::default()
        },
    );
    let mut ctx = FakeCtx::default();
    poll(&mut up, &mut ctx, 0);
    poll(&mut up, &mut ctx, 1);
    up.handle_success_request(T0 + 2, response(vec![]));
    md.request_update();
    // Brokers stay connectable but every request fails (e.g. times out).
    let mut now = 3;
    while now < 12_000 && up.rebootstrap_count() == 0 {
        poll(&mut up, &mut ctx, now);
        if up.has_fetch_in_progress() {
            up.handle_failed_request(T0 + now, None);
        }
        now += 1;
    }
    assert_eq!(up.rebootstrap_count(), 1);
    assert!(now >= 5_000, "re-bootstrapped too early at {now}");
    assert!(md.fetch().is_bootstrap_configured());
}

#[test]
fn disconnect_requests_update_and_auth_failure_is_fatal() {
    let (md, mut up) = updater(5);
    md.update(0, &response(vec![]), false, T0).unwrap();
    assert!(!md.update_requested());
    up.handle_server_disconnect(
        T0 + 10,
        0,
        Some(&Error::Authentication {
            detail: "bad".into(),
        }),
    );
    assert!(md.update_requested());
    assert!(matches!(
        md.await_update(0, None, Some(std::time::Duration::ZERO)),
        Err(Error::Authentication { .. })
    ));
}

#[test]
fn empty_broker_list_is_a_failure() {
    let (md, mut up) = updater(6);
    let mut ctx = FakeCtx::default();
    poll(&mut up, &mut ctx, 0);
    poll(&mut up, &mut ctx, 1);
    let v = md.update_version();
    let mut r = response(vec![]);
    r.brokers.clear();
    up.handle_success_request(T0 + 2, r);
    assert_eq!(md.update_version(), v);
    assert!(md.fetch().is_bootstrap_configured());
    assert_eq!(md.failed_attempts(), 1);
}

#[test]
fn idle_producer_only_refreshes_at_max_age() {
    // The "metadata requests per second of an idle producer": after
    // the first answer, nothing but the metadata.max.age.ms refresh.
    let (md, mut up) = updater(7);
    let mut ctx = FakeCtx::default();
    md.add("t", T0).unwrap();
    let mut now = 0;
    // Ten minutes of virtual time, polled every 10 ms like an idle poll loop.
    while now <= 600_100 {
        poll(&mut up, &mut ctx, now);
        if up.has_fetch_in_progress() {
            up.handle_success_request(T0 + now, response(vec![topic("t", vec![pm(0, 0, 0)])]));
        }
        now += 10;
    }
    let times: Vec<i64> = ctx.sent.iter().map(|s| s.0 - T0).collect();
    // First update at once, then one per 300 s (the metadata_idle_ms of 300 s
    // is kept alive by nobody, so the 300 s refresh drops the topic and asks
    // for nothing more than the brokers).
    assert_eq!(times.len(), 3, "{times:?}");
    assert!(times[0] <= 10);
    assert!(
        (300_000..300_100).contains(&(times[1] - times[0])),
        "{times:?}"
    );
    assert!(
        (300_000..300_100).contains(&(times[2] - times[1])),
        "{times:?}"
    );
}
