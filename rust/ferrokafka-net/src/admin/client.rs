//! `AdminClient`: blocking admin calls over the shared network client, with
//! the Java AdminClient's routing and retry rules.
//!
//! * CreateTopics / DeleteTopics go to the controller (from metadata); a
//!   NOT_CONTROLLER answer refreshes metadata and retries there.
//! * Per-topic retriable errors retry only those topics, with backoff, until
//!   the call's timeout; per-topic fatal errors are returned per topic, so
//!   one bad topic never hides the others' outcome.
//! * ListGroups goes to every broker; OffsetFetch to the group coordinator
//!   (FindCoordinator first).
//!
//! Every call waits in the caller's thread, in slices, asking the caller's
//! `interrupted` between them (`crate::wait`); interrupted, it returns
//! `Error::Interrupted` at once. A request already sent may still be
//! applied by the broker (a topic created or deleted): the caller can
//! assume nothing about it, and repeating the call is safe (creating an
//! existing topic answers TOPIC_ALREADY_EXISTS, deleting a missing one
//! UNKNOWN_TOPIC_OR_PARTITION, per topic).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokafka_protocol::kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::admin::{
    create_topics, delete_topics, list_groups, parse_create_topics, parse_delete_topics,
    parse_list_groups, NewTopic,
};
use crate::blocking::BlockingClient;
use crate::cluster::{Cluster, Node, TopicPartition};
use crate::consumer::requests::{self as rq, OffsetAndMetadata};
use crate::driver::{AsyncClient, Body, RequestOpts, Requester};
use crate::error::Error;
use crate::metadata::Metadata;
use crate::telemetry::agent::Agent;
use crate::telemetry::Kind as TelemetryKind;
use crate::wait;

use ferrokafka_protocol::codes::{NOT_CONTROLLER, UNKNOWN_TOPIC_OR_PARTITION};

/// Per topic of an answer: (name, error code, error message).
type TopicOutcomes = Vec<(String, i16, Option<String>)>;

#[derive(Debug, Clone)]
pub struct AdminConfig {
    pub request_timeout_ms: i64,
    pub retry_backoff_ms: i64,
    pub default_api_timeout_ms: i64,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            request_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            default_api_timeout_ms: 60_000,
        }
    }
}

/// What `describe_cluster` returns.
#[derive(Debug, Clone)]
pub struct ClusterDescription {
    pub nodes: Vec<Node>,
    pub controller: Option<Node>,
    pub cluster_id: Option<String>,
}

pub struct AdminClient {
    cfg: AdminConfig,
    metadata: Arc<Metadata>,
    client: AsyncClient,
    /// Kept for `metrics()` (the async client owns the polling).
    net: Arc<BlockingClient>,
    /// KIP-714 metrics push; closed first on drop, while the driver still
    /// polls, so its terminating push can go out.
    telemetry: Option<Agent>,
}

impl Drop for AdminClient {
    fn drop(&mut self) {
        if let Some(mut t) = self.telemetry.take() {
            t.close();
        }
    }
}

fn timeout_err(what: &str, timeout: Duration, last: Option<Error>) -> Error {
    match last {
        Some(e) => e,
        None => Error::Timeout {
            what: what.to_string(),
            timeout_ms: timeout.as_millis() as u64,
        },
    }
}

impl AdminClient {
    /// `metadata` must be base metadata driven by `net`'s updater.
    pub fn new(cfg: AdminConfig, metadata: Arc<Metadata>, net: Arc<BlockingClient>) -> Self {
        let telemetry = if net.metrics_push() {
            let n = net.clone();
            Agent::start(
                TelemetryKind::Admin,
                net.clone(),
                Box::new(move || n.node_metrics()),
            )
        } else {
            None
        };
        AdminClient {
            cfg,
            metadata,
            client: AsyncClient::start(net.clone()),
            net,
            telemetry,
        }
    }

    /// The network client's figures with Java's names (docs/metrics.md):
    /// an admin client's metrics are its connections and requests.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        self.net.node_metrics()
    }

    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.metadata
    }

    /// A fresh metadata snapshot (a completed refresh, not the bootstrap list).
    /// `timeout` is the caller's whole budget (`deadline` its end), named in
    /// the error so the message states the timeout the caller actually set.
    fn fresh_cluster(
        &self,
        deadline: Instant,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Arc<Cluster>, Error> {
        loop {
            let v = self.metadata.request_update();
            self.client.client().wakeup();
            match wait::metadata_update(&self.metadata, v, None, deadline, interrupted) {
                Ok(()) => {
                    let c = self.metadata.fetch();
                    if !c.is_bootstrap_configured() {
                        return Ok(c);
                    }
                }
                Err(Error::Timeout { .. }) => {
                    return Err(Error::Timeout {
                        what: format!(
                            "waiting for cluster metadata{}",
                            self.metadata.connection_error_hint()
                        ),
                        timeout_ms: timeout.as_millis() as u64,
                    })
                }
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!(
                        "waiting for cluster metadata{}",
                        self.metadata.connection_error_hint()
                    ),
                    timeout_ms: timeout.as_millis() as u64,
                });
            }
        }
    }

    fn request(
        &self,
        node: Node,
        body: Body,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<ResponseKind, Error> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .as_millis() as i64;
        let opts = RequestOpts {
            request_timeout_ms: Some(self.cfg.request_timeout_ms.min(left.max(1))),
            max_version: None,
        };
        self.client
            .request_blocking(node, body, opts, left, interrupted)
            .map(|(r, _)| r)
    }

    /// The retry backoff; `Error::Interrupted` when cut short.
    fn backoff(&self, interrupted: &dyn Fn() -> bool) -> Result<(), Error> {
        let d = Duration::from_millis(self.cfg.retry_backoff_ms.max(10) as u64);
        if wait::sleep(d, interrupted) {
            Ok(())
        } else {
            Err(Error::Interrupted)
        }
    }

    /// Per-topic outcome of CreateTopics / DeleteTopics against the
    /// controller, retrying NOT_CONTROLLER and retriable errors until `timeout`.
    fn controller_call(
        &self,
        what: &str,
        names: Vec<String>,
        timeout: Duration,
        make_body: &dyn Fn(Vec<String>) -> Body,
        parse: &dyn Fn(&ResponseKind) -> Option<TopicOutcomes>,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<String, Result<(), Error>>, Error> {
        let deadline = Instant::now() + timeout;
        let mut out: BTreeMap<String, Result<(), Error>> = BTreeMap::new();
        let mut todo = names;
        let mut last: Option<Error> = None;
        while !todo.is_empty() {
            if Instant::now() >= deadline {
                let e = timeout_err(what, timeout, last.clone());
                for t in todo {
                    out.insert(t, Err(e.clone()));
                }
                break;
            }
            let cluster = self.fresh_cluster(deadline, timeout, interrupted)?;
            let Some(controller) = cluster
                .controller()
                .cloned()
                .or_else(|| cluster.nodes().first().cloned())
            else {
                self.backoff(interrupted)?;
                continue;
            };
            let batch = todo.clone();
            match self.request(controller, make_body(batch.clone()), deadline, interrupted) {
                Ok(resp) => {
                    let Some(results) = parse(&resp) else {
                        return Err(Error::State {
                            detail: format!("unexpected answer to {what}"),
                        });
                    };
                    let mut retry = Vec::new();
                    let answered: HashSet<String> = results.iter().map(|r| r.0.clone()).collect();
                    for (name, code, msg) in results {
                        if code == 0 {
                            out.insert(name, Ok(()));
                            continue;
                        }
                        let e = Error::broker(
                            code,
                            Some(
                                msg.filter(|m| !m.is_empty())
                                    .unwrap_or_else(|| format!("{what} of topic {name}")),
                            ),
                        );
                        // Deleting a topic that does not exist is an answer,
                        // not stale metadata: report it at once.
                        let final_for_delete =
                            what == "DeleteTopics" && code == UNKNOWN_TOPIC_OR_PARTITION;
                        if code == NOT_CONTROLLER || (e.retriable() && !final_for_delete) {
                            last = Some(e);
                            retry.push(name);
                        } else {
                            out.insert(name, Err(e));
                        }
                    }
                    retry.extend(batch.into_iter().filter(|t| !answered.contains(t)));
                    if !retry.is_empty() {
                        self.metadata.request_update();
                        self.backoff(interrupted)?;
                    }
                    todo = retry;
                }
                Err(e) => {
                    // The controller went away: new metadata, new controller.
                    self.metadata.request_update();
                    if !(e.retriable()
                        || matches!(
                            e,
                            Error::Disconnected { .. }
                                | Error::Timeout { .. }
                                | Error::Transport { .. }
                        ))
                    {
                        return Err(e);
                    }
                    last = Some(e);
                    self.backoff(interrupted)?;
                }
            }
        }
        Ok(out)
    }

    /// CreateTopics: per-topic outcome (Ok, or the topic's error).
    pub fn create_topics(
        &self,
        topics: Vec<NewTopic>,
        timeout: Duration,
        validate_only: bool,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<String, Result<(), Error>>, Error> {
        let by_name: BTreeMap<String, NewTopic> =
            topics.into_iter().map(|t| (t.name.clone(), t)).collect();
        let names: Vec<String> = by_name.keys().cloned().collect();
        let tmo = timeout.as_millis().min(i32::MAX as u128) as i32;
        self.controller_call(
            "CreateTopics",
            names,
            timeout,
            &|names| {
                let ts: Vec<NewTopic> = names
                    .iter()
                    .filter_map(|n| by_name.get(n).cloned())
                    .collect();
                Body::Ready(RequestKind::CreateTopics(create_topics(
                    &ts,
                    tmo,
                    validate_only,
                )))
            },
            &|r| match r {
                ResponseKind::CreateTopics(r) => Some(parse_create_topics(r)),
                _ => None,
            },
            interrupted,
        )
    }

    /// DeleteTopics: per-topic outcome.
    pub fn delete_topics(
        &self,
        names: Vec<String>,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<String, Result<(), Error>>, Error> {
        let tmo = timeout.as_millis().min(i32::MAX as u128) as i32;
        self.controller_call(
            "DeleteTopics",
            names,
            timeout,
            &|names| Body::Versioned {
                api_key: ApiKey::DeleteTopics as i16,
                max_version: None,
                build: Box::new(move |v| RequestKind::DeleteTopics(delete_topics(&names, tmo, v))),
            },
            &|r| match r {
                ResponseKind::DeleteTopics(r) => Some(parse_delete_topics(r)),
                _ => None,
            },
            interrupted,
        )
    }

    /// Topic -> partition count (internal topics left out).
    pub fn list_topics(
        &self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<String, usize>, Error> {
        self.metadata.set_subscription(None)?;
        let cluster = self.fresh_cluster(Instant::now() + timeout, timeout, interrupted)?;
        Ok(cluster.user_topic_partition_counts())
    }

    pub fn describe_cluster(
        &self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<ClusterDescription, Error> {
        let cluster = self.fresh_cluster(Instant::now() + timeout, timeout, interrupted)?;
        Ok(ClusterDescription {
            nodes: cluster.nodes().to_vec(),
            controller: cluster.controller().cloned(),
            cluster_id: cluster.cluster_id().map(str::to_string),
        })
    }

    /// ListGroups on every broker, merged: (group id, protocol type, state).
    pub fn list_consumer_groups(
        &self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<(String, String, String)>, Error> {
        let deadline = Instant::now() + timeout;
        let cluster = self.fresh_cluster(deadline, timeout, interrupted)?;
        let mut out = BTreeMap::new();
        for node in cluster.nodes() {
            let mut attempt = 0;
            loop {
                attempt += 1;
                match self.request(
                    node.clone(),
                    Body::Ready(RequestKind::ListGroups(list_groups())),
                    deadline,
                    interrupted,
                ) {
                    Ok(ResponseKind::ListGroups(r)) => {
                        let (code, groups) = parse_list_groups(&r);
                        if code != 0 {
                            let e = Error::broker(
                                code,
                                Some(format!("listing groups on node {}", node.id)),
                            );
                            if e.retriable() && Instant::now() < deadline && attempt < 20 {
                                self.backoff(interrupted)?;
                                continue;
                            }
                            return Err(e);
                        }
                        for (g, p, s) in groups {
                            out.insert(g.clone(), (g, p, s));
                        }
                        break;
                    }
                    Ok(_) => {
                        return Err(Error::State {
                            detail: "unexpected ListGroups answer".into(),
                        })
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out.into_values().collect())
    }

    /// The group's committed offsets (FindCoordinator, then OffsetFetch of all).
    pub fn list_consumer_group_offsets(
        &self,
        group_id: &str,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<TopicPartition, OffsetAndMetadata>, Error> {
        let deadline = Instant::now() + timeout;
        let mut last: Option<Error> = None;
        loop {
            if Instant::now() >= deadline {
                return Err(timeout_err("listing group offsets", timeout, last));
            }
            let cluster = self.fresh_cluster(deadline, timeout, interrupted)?;
            let Some(any) = cluster.nodes().first().cloned() else {
                self.backoff(interrupted)?;
                continue;
            };
            let gid = group_id.to_string();
            let body = Body::Versioned {
                api_key: ApiKey::FindCoordinator as i16,
                max_version: None,
                build: Box::new(move |v| {
                    RequestKind::FindCoordinator(rq::find_coordinator(&gid, 0, v))
                }),
            };
            let coordinator = match self.request(any, body, deadline, interrupted) {
                Ok(ResponseKind::FindCoordinator(r)) => {
                    match rq::parse_find_coordinator(&r, group_id) {
                        Ok(n) => n,
                        Err(code) => {
                            last = Some(Error::broker(
                                code,
                                Some(format!("finding the coordinator of group {group_id}")),
                            ));
                            self.backoff(interrupted)?;
                            continue;
                        }
                    }
                }
                Ok(_) => {
                    return Err(Error::State {
                        detail: "unexpected FindCoordinator answer".into(),
                    })
                }
                Err(e @ Error::Interrupted) => return Err(e),
                Err(e) => {
                    last = Some(e);
                    self.backoff(interrupted)?;
                    continue;
                }
            };
            let gid = group_id.to_string();
            let body = Body::Versioned {
                api_key: ApiKey::OffsetFetch as i16,
                max_version: None,
                build: Box::new(move |v| {
                    RequestKind::OffsetFetch(rq::offset_fetch(&gid, None, true, v))
                }),
            };
            match self.request(coordinator, body, deadline, interrupted) {
                Ok(ResponseKind::OffsetFetch(r)) => {
                    let (code, parts) = rq::parse_offset_fetch(&r, group_id);
                    if code != 0 {
                        let e = Error::broker(
                            code,
                            Some(format!("fetching the offsets of group {group_id}")),
                        );
                        if e.retriable() {
                            last = Some(e);
                            self.backoff(interrupted)?;
                            continue;
                        }
                        return Err(e);
                    }
                    return Ok(parts
                        .into_iter()
                        .filter(|(_, o, c)| *c == 0 && o.offset >= 0)
                        .map(|(tp, o, _)| (tp, o))
                        .collect());
                }
                Ok(_) => {
                    return Err(Error::State {
                        detail: "unexpected OffsetFetch answer".into(),
                    })
                }
                Err(e @ Error::Interrupted) => return Err(e),
                Err(e) => {
                    last = Some(e);
                    self.backoff(interrupted)?;
                }
            }
        }
    }
}
