use super::*;
use crate::cluster::TopicMetadata;
use std::thread;

fn cfg() -> MetadataConfig {
    MetadataConfig {
        rng_seed: Some(7),
        ..MetadataConfig::default()
    }
}

pub(crate) fn pm(partition: i32, leader: i32, epoch: i32) -> PartitionMetadata {
    PartitionMetadata::new(partition, leader, epoch, vec![leader], vec![leader])
}

pub(crate) fn topic(name: &str, parts: Vec<PartitionMetadata>) -> TopicMetadata {
    TopicMetadata {
        name: name.into(),
        topic_id: None,
        partitions: parts,
        error_code: 0,
        is_internal: false,
    }
}

pub(crate) fn topic_err(name: &str, code: i16) -> TopicMetadata {
    TopicMetadata {
        name: name.into(),
        topic_id: None,
        partitions: vec![],
        error_code: code,
        is_internal: false,
    }
}

pub(crate) fn response(topics: Vec<TopicMetadata>) -> MetadataResponse {
    MetadataResponse {
        brokers: vec![
            Node::new(0, "b0", 9092, None),
            Node::new(1, "b1", 9092, None),
        ],
        topics,
        cluster_id: Some("c1".into()),
        controller_id: 0,
    }
}

#[test]
fn bootstrap_parses_and_shuffles() {
    let md = Metadata::new(cfg()).unwrap();
    md.bootstrap(&["a:1", "b:2,c:3", "[::1]:4"]).unwrap();
    let c = md.fetch();
    assert!(c.is_bootstrap_configured());
    let mut ids: Vec<i32> = c.nodes().iter().map(|n| n.id).collect();
    ids.sort();
    assert_eq!(ids, vec![-4, -3, -2, -1]);
    assert_eq!(c.node_by_id(-4).unwrap().host, "::1");
    assert_eq!(md.update_version(), 1);
    assert!(md.need_full_update());
    // Different seeds give different orders: the seeds are shuffled.
    let addrs: Vec<String> = (0..8).map(|i| format!("h{i}:9092")).collect();
    let orders: HashSet<Vec<i32>> = (0..10)
        .map(|s| {
            let md = Metadata::new(MetadataConfig {
                rng_seed: Some(s),
                ..cfg()
            })
            .unwrap();
            md.bootstrap(&addrs).unwrap();
            md.fetch().nodes().iter().map(|n| n.id).collect()
        })
        .collect();
    assert!(orders.len() > 1);
    for bad in [&["nohost"][..], &["h:0"], &["h:x"], &[":9"], &[]] {
        match md.bootstrap(bad) {
            Err(Error::Config { key, .. }) => assert_eq!(key, "bootstrap_servers"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn config_validation_names_key() {
    let e = Metadata::new(MetadataConfig {
        refresh_backoff_ms: -1,
        ..cfg()
    })
    .unwrap_err();
    assert!(matches!(e, Error::Config { ref key, .. } if key == "refresh_backoff_ms"));
    let e = Metadata::new_producer(cfg(), -5).unwrap_err();
    assert!(matches!(e, Error::Config { ref key, .. } if key == "metadata_idle_ms"));
}

#[test]
fn producer_partial_then_full_requests() {
    let md = Metadata::new_producer(cfg(), 300_000).unwrap();
    md.bootstrap(&["a:1"]).unwrap();
    // Full update first (bootstrap asked for it).
    md.add("t1", 0).unwrap();
    let (spec, rv, partial) = md.new_metadata_request(0);
    assert!(!partial);
    assert_eq!(spec.topics, Some(vec!["t1".to_string()]));
    md.update(
        rv,
        &response(vec![topic("t1", vec![pm(0, 0, 1)])]),
        partial,
        10,
    )
    .unwrap();
    assert!(!md.update_requested());
    assert!(md.new_topics().is_empty());
    // New topic: partial request naming only it.
    md.add("t2", 20).unwrap();
    let (spec, rv, partial) = md.new_metadata_request(20);
    assert!(partial);
    assert_eq!(spec.topics, Some(vec!["t2".to_string()]));
    md.update(
        rv,
        &response(vec![topic("t2", vec![pm(0, 1, 1), pm(1, 0, 1)])]),
        true,
        30,
    )
    .unwrap();
    let c = md.fetch();
    // Merge kept t1.
    assert_eq!(c.partitions_for_topic("t1").len(), 1);
    assert_eq!(c.partitions_for_topic("t2").len(), 2);
    assert_eq!(c.leader_for("t2", 0).unwrap().id, 1);
    assert_eq!(md.last_successful_refresh_ms(), 10);
    assert_eq!(md.last_refresh_ms(), 30);
}

#[test]
fn stale_epoch_keeps_cached_entry() {
    let md = Metadata::new(cfg()).unwrap();
    md.update(0, &response(vec![topic("t", vec![pm(0, 0, 5)])]), false, 1)
        .unwrap();
    md.update(0, &response(vec![topic("t", vec![pm(0, 1, 4)])]), false, 2)
        .unwrap();
    let c = md.fetch();
    assert_eq!(c.leader_for("t", 0).unwrap().id, 0);
    assert_eq!(c.leader_epoch_for("t", 0), Some(5));
    md.update(0, &response(vec![topic("t", vec![pm(0, 1, 6)])]), false, 3)
        .unwrap();
    assert_eq!(md.fetch().leader_for("t", 0).unwrap().id, 1);
    // An epoch seen elsewhere makes an answer with an older one stale too.
    let tp = TopicPartition::new("t", 0);
    assert!(md.update_last_seen_epoch_if_newer(&tp, 8));
    assert!(!md.update_last_seen_epoch_if_newer(&tp, 7));
    assert!(md.need_full_update());
    md.update(0, &response(vec![topic("t", vec![pm(0, 0, 7)])]), false, 4)
        .unwrap();
    assert_eq!(md.fetch().leader_for("t", 0).unwrap().id, 1);
}

#[test]
fn fail_partition_leader_marks_unknown() {
    let md = Metadata::new(cfg()).unwrap();
    md.update(
        0,
        &response(vec![topic("t", vec![pm(0, 0, 5), pm(1, 1, 5)])]),
        false,
        1,
    )
    .unwrap();
    let before = md.fetch();
    assert!(!md.update_requested());
    assert!(md.handle_partition_error("t", 0, codes::NOT_LEADER_OR_FOLLOWER));
    let c = md.fetch();
    assert!(c.leader_for("t", 0).is_none());
    assert_eq!(c.available_partitions_for_topic("t").len(), 1);
    // The old snapshot is untouched.
    assert_eq!(before.leader_for("t", 0).unwrap().id, 0);
    assert!(md.need_full_update());
    assert!(!md.handle_partition_error("t", 1, 87));
    assert_eq!(c.available_partition_ids("t"), vec![1]);
    assert_eq!(c.leader_id_for(&TopicPartition::new("t", 1)), Some(1));
    assert_eq!(c.leader_id_for(&TopicPartition::new("t", 0)), None);
}

#[test]
fn await_update_across_threads() {
    let md = Arc::new(Metadata::new(cfg()).unwrap());
    let v = md.request_update();
    let md2 = md.clone();
    let h = thread::spawn(move || md2.await_update(v, None, Some(Duration::from_secs(10))));
    thread::sleep(Duration::from_millis(20));
    md.update(0, &response(vec![]), false, 1).unwrap();
    h.join().unwrap().unwrap();
    assert!(matches!(
        md.await_update(md.update_version(), None, Some(Duration::from_millis(10))),
        Err(Error::Timeout { .. })
    ));
    md.close();
    assert!(matches!(
        md.await_update(0, None, None),
        Err(Error::Closed { .. })
    ));
}

#[test]
fn topic_errors_only_for_that_topic() {
    let md = Metadata::new_producer(cfg(), 1000).unwrap();
    md.add("ok", 0).unwrap();
    md.add("secret", 0).unwrap();
    let v = md.update_version();
    md.update(
        md.request_version(),
        &response(vec![
            topic("ok", vec![pm(0, 0, 1)]),
            topic_err("secret", codes::TOPIC_AUTHORIZATION_FAILED),
        ]),
        false,
        1,
    )
    .unwrap();
    assert!(md.await_update(v, Some("ok"), Some(Duration::ZERO)).is_ok());
    let e = md
        .await_update(v, Some("secret"), Some(Duration::ZERO))
        .unwrap_err();
    assert_eq!(e.code(), codes::TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        md.await_update(v, None, Some(Duration::ZERO))
            .unwrap_err()
            .code(),
        29
    );
    assert!(md.error_for_topic("ok").is_none());
    // Fatal: raised once, then cleared.
    md.fatal_error(Error::Authentication { detail: "x".into() });
    assert!(matches!(
        md.await_update(v, Some("ok"), None),
        Err(Error::Authentication { .. })
    ));
    assert!(md.await_update(v, Some("ok"), None).is_ok());
}

#[test]
fn failure_backoff_grows_with_jitter_and_cap() {
    let md = Metadata::new(cfg()).unwrap();
    md.update(0, &response(vec![]), false, 0).unwrap();
    md.request_update();
    assert_eq!(md.time_to_next_update(0), 100);
    let mut prev = 0;
    for i in 0..10 {
        md.failed_update(1000);
        let b = md.time_to_next_update(1000);
        let nominal = (100i64 << i).min(1000);
        assert!(
            b >= nominal * 8 / 10 - 1 && b <= (nominal * 12 / 10).min(1000),
            "attempt {i}: {b} vs {nominal}"
        );
        if nominal < 1000 && i > 0 {
            assert!(b > prev / 2);
        }
        prev = b;
    }
    assert!(md.time_to_next_update(1000) <= 1000);
    // An answer resets the backoff.
    md.update(0, &response(vec![]), false, 2000).unwrap();
    md.request_update();
    assert_eq!(md.time_to_next_update(2000), 100);
}

#[test]
fn base_subscription_limits_requests_and_cache() {
    let md = Metadata::new(cfg()).unwrap();
    assert_eq!(md.new_metadata_request(0).0.topics, None);
    let rv = md.request_version();
    md.set_subscription(Some(vec!["b".into(), "a".into()]))
        .unwrap();
    assert_eq!(md.request_version(), rv + 1);
    assert!(md.update_requested());
    let (spec, v, partial) = md.new_metadata_request(0);
    assert_eq!(spec.topics, Some(vec!["a".to_string(), "b".to_string()]));
    assert!(!partial);
    md.update(
        v,
        &response(vec![
            topic("a", vec![pm(0, 0, 0)]),
            topic("z", vec![pm(0, 0, 0)]),
        ]),
        false,
        1,
    )
    .unwrap();
    assert_eq!(md.fetch().topics(), ["a"].into_iter().collect());
    assert!(!md.update_requested());
    // Same subscription again: nothing to do.
    let rv = md.request_version();
    md.set_subscription(Some(vec!["a".into(), "b".into()]))
        .unwrap();
    assert_eq!(md.request_version(), rv);
    let p = Metadata::new_producer(cfg(), 10).unwrap();
    assert!(matches!(p.set_subscription(None), Err(Error::State { .. })));
}

#[test]
fn a_covering_wait_skips_the_answer_to_a_request_built_before_the_topic_set_changed() {
    // A consumer starts subscribed to no topics; its first request is in
    // flight when listing topics widens the set to all (§3.13).
    let md = Metadata::new(cfg()).unwrap();
    md.set_subscription(Some(vec![])).unwrap();
    let (spec, old_request, _) = md.new_metadata_request(0);
    assert_eq!(spec.topics, Some(vec![]));
    md.set_subscription(None).unwrap();
    let want = md.request_version();
    let mut v = md.request_update();
    assert!(md
        .await_covering_update_step(&mut v, want, Duration::ZERO)
        .is_none());
    // The old answer moves the update version (a plain wait would end here,
    // with no topics) but not the covering wait.
    md.update(old_request, &response(vec![]), false, 1).unwrap();
    assert!(md
        .await_update_step(md.update_version() - 1, None, Duration::ZERO)
        .is_some());
    assert!(md
        .await_covering_update_step(&mut v, want, Duration::ZERO)
        .is_none());
    assert_eq!(v, md.update_version());
    // The change keeps an update wanted; its answer ends the wait.
    assert!(md.update_requested());
    let (spec, new_request, _) = md.new_metadata_request(2);
    assert_eq!(spec.topics, None);
    md.update(
        new_request,
        &response(vec![topic("t", vec![pm(0, 0, 0)])]),
        false,
        3,
    )
    .unwrap();
    assert!(matches!(
        md.await_covering_update_step(&mut v, want, Duration::ZERO),
        Some(Ok(()))
    ));
    assert_eq!(md.fetch().topics(), ["t"].into_iter().collect());
}

#[test]
fn concurrent_adds_updates_and_reads() {
    // Producer threads add topics and wait, a "selector" thread answers,
    // readers fetch: no deadlock, versions only grow, every waiter wakes.
    let md = Arc::new(Metadata::new_producer(cfg(), 60_000).unwrap());
    md.bootstrap(&["a:1"]).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answerer = {
        let (md, stop) = (md.clone(), stop.clone());
        thread::spawn(move || {
            let mut now = 1_000;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if !md.update_requested() {
                    thread::sleep(Duration::from_micros(50));
                    continue;
                }
                let (spec, rv, partial) = md.new_metadata_request(now);
                let topics = spec
                    .topics
                    .unwrap_or_default()
                    .iter()
                    .map(|t| topic(t, vec![pm(0, 0, 1)]))
                    .collect();
                md.update(rv, &response(topics), partial, now).unwrap();
                now += 1;
                thread::yield_now();
            }
        })
    };
    let producers: Vec<_> = (0..4)
        .map(|i| {
            let md = md.clone();
            thread::spawn(move || {
                for j in 0..100 {
                    let t = format!("t{i}-{j}");
                    md.add(&t, 1_000).unwrap();
                    let v = md.request_update_for_topic(&t);
                    md.await_update(v, Some(&t), Some(Duration::from_secs(10)))
                        .unwrap();
                    let c = md.fetch();
                    let _ = c.leader_for(&t, 0);
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    answerer.join().unwrap();
    assert_eq!(md.topics().len(), 400);
}

#[test]
fn kip951_leader_hints_apply_only_when_newer() {
    let md = Metadata::new(cfg()).unwrap();
    md.update(
        0,
        &response(vec![topic("t", vec![pm(0, 0, 5), pm(1, 0, 5)])]),
        false,
        1,
    )
    .unwrap();
    let v = md.update_version();
    let tp0 = TopicPartition::new("t", 0);
    let tp1 = TopicPartition::new("t", 1);
    let b2 = Node::new(2, "b2", 9092, None);
    let applied = md.update_partition_leadership(
        &[
            (tp0.clone(), 2, 6),                 // newer, new node given: applied
            (tp1.clone(), 1, 5),                 // same epoch: stale
            (TopicPartition::new("t", 9), 1, 9), // partition not cached
            (TopicPartition::new("u", 0), 1, 9), // topic not cached
        ],
        std::slice::from_ref(&b2),
    );
    assert_eq!(applied, vec![tp0.clone()]);
    let c = md.fetch();
    assert_eq!(c.leader_for("t", 0), Some(&b2));
    assert_eq!(c.leader_epoch_for("t", 0), Some(6));
    assert_eq!(c.leader_for("t", 1).unwrap().id, 0);
    assert_eq!(c.nodes().len(), 3);
    assert_eq!(md.last_seen_leader_epoch(&tp0), Some(6));
    assert_eq!(md.update_version(), v);
    // An unknown leader node is not applied.
    assert!(md
        .update_partition_leadership(&[(tp1.clone(), 7, 9)], &[])
        .is_empty());
    // A later metadata answer with the old epoch is stale for tp0.
    md.update(
        0,
        &response(vec![topic("t", vec![pm(0, 0, 5), pm(1, 0, 5)])]),
        false,
        2,
    )
    .unwrap();
    assert_eq!(md.fetch().leader_epoch_for("t", 0), Some(6));
}
