//! Cluster metadata state: Java's `Metadata` + `MetadataCache` and the
//! `ProducerMetadata` extension (docs/semantics.md §3.1-3.12), plus the background
//! refresh logic (`DefaultMetadataUpdater`, docs/semantics.md §1.2-1.3) in a submodule.
//!
//! # Locking
//!
//! One `Metadata` is shared (behind an `Arc`) by the selector loop, which
//! consults it on every `poll` without the GIL, by producer threads that
//! `add` topics and `await_update`, and by Python callers. All mutable state
//! sits in a single `Mutex<State>`; one `Condvar` (`changed`) paired with that
//! mutex is signalled whenever something a waiter may be waiting for changes
//! (a successful update, close, a fatal error).
//!
//! Rules that keep this simple and deadlock-free:
//! * every public method takes the lock exactly once, does bounded work
//!   (at most proportional to one Metadata response) and releases it; no
//!   method calls another public method while holding the lock (internal
//!   helpers take `&mut State` instead);
//! * no user code, Python, or I/O ever runs under the lock;
//! * readers do not lock while reading the cluster: `fetch()` clones an
//!   `Arc<Cluster>` under the lock (one refcount bump) and the snapshot is
//!   immutable afterwards. An update builds a fresh `Cluster` and swaps the
//!   `Arc`, so a reader keeps a consistent view for as long as it holds it;
//! * `notify_all` is called after the guard is dropped, so woken waiters do
//!   not immediately block on a mutex the notifier still holds;
//! * a poisoned mutex (a panic while holding it) is recovered rather than
//!   propagated: every mutation leaves `State` valid at each step, so the
//!   state after a panic is still a legal (if incomplete) one.

pub mod default_updater;
mod errors;
mod state;
mod waiting;
use errors::topic_error;
pub use errors::{invalidates_leader, is_invalid_metadata_error, parse_bootstrap, timeout_error};
use state::retain_in;
pub mod wire;

pub use default_updater::{DefaultMetadataUpdater, UpdaterConfig};

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::cluster::{Cluster, MetadataResponse, Node, PartitionMetadata, TopicPartition};
use crate::error::{Error, Result};
use crate::updater::MetadataRequestSpec;

/// Kafka error codes: the one table in the protocol crate.
pub use ferrokafka_protocol::codes;

/// Tunables of a `Metadata`. Times in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataConfig {
    /// Minimum gap between two refreshes (`retry.backoff.ms`), and the first
    /// backoff after a failed one.
    pub refresh_backoff_ms: i64,
    /// Cap of the exponential backoff after repeated failed refreshes
    /// (`retry.backoff.max.ms`).
    pub refresh_backoff_max_ms: i64,
    /// Refresh at least this often even when nothing asks (`metadata.max.age.ms`).
    pub metadata_expire_ms: i64,
    /// Seed of the RNG that shuffles bootstrap addresses and jitters backoff;
    /// None = from the OS. Tests set it for reproducible runs.
    pub rng_seed: Option<u64>,
}

impl Default for MetadataConfig {
    fn default() -> Self {
        MetadataConfig {
            refresh_backoff_ms: 100,
            refresh_backoff_max_ms: 1000,
            metadata_expire_ms: 300_000,
            rng_seed: None,
        }
    }
}

impl MetadataConfig {
    pub fn validate(&self) -> Result<()> {
        fn non_negative(key: &str, v: i64) -> Result<()> {
            if v < 0 {
                return Err(Error::Config {
                    key: key.to_string(),
                    detail: format!("{v} is negative; expected an integer >= 0"),
                });
            }
            Ok(())
        }
        non_negative("refresh_backoff_ms", self.refresh_backoff_ms)?;
        non_negative("refresh_backoff_max_ms", self.refresh_backoff_max_ms)?;
        non_negative("metadata_expire_ms", self.metadata_expire_ms)?;
        Ok(())
    }
}

/// Which topics this metadata keeps and asks for.
#[derive(Debug)]
enum TopicMode {
    /// Base `Metadata`: requests ask for all topics and every topic of an
    /// answer is kept; or, with a subscription (`set_subscription`), only
    /// those topics are asked for and kept (what Java's ConsumerMetadata
    /// does for a subscription without a pattern).
    All {
        subscription: Option<BTreeSet<String>>,
    },
    /// `ProducerMetadata` (docs/semantics.md §3.8): the topics the producer sends to,
    /// each with an expiry time, and those not yet answered for.
    Producer {
        idle_ms: i64,
        topics: rustc_hash::FxHashMap<String, i64>,
        new_topics: BTreeSet<String>,
    },
}

#[derive(Debug)]
struct State {
    update_version: i32,
    request_version: i32,
    /// The request version of the last applied answer: an answer to a
    /// request built before `set_subscription` changed the topic set moves
    /// `update_version` without covering the new set (§3.13).
    answered_request_version: i32,
    last_refresh_ms: i64,
    last_successful_refresh_ms: i64,
    need_full_update: bool,
    need_partial_update: bool,
    /// Consecutive failed refreshes since the last answer.
    attempts: u32,
    /// Backoff chosen (with jitter) at the last failure; used while attempts > 0.
    failure_backoff_ms: i64,
    /// Raised (once) by the next `await_update`: authentication failure etc.
    fatal_error: Option<Error>,
    /// Why the last connection to a broker failed: appended to "not in
    /// metadata" timeouts so they say what is wrong (refused, TLS, ...).
    last_connection_error: Option<String>,
    /// Errors for the application's `error_cb` (librdkafka's error events:
    /// `_TRANSPORT`, `_RESOLVE`, `_AUTHENTICATION`, `_ALL_BROKERS_DOWN`),
    /// taken by the client's poll. Bounded; identical ones within
    /// `CLIENT_ERROR_REPEAT` are dropped.
    client_errors: std::collections::VecDeque<(i16, String)>,
    last_client_error: Option<(i16, String, std::time::Instant)>,
    /// `_ALL_BROKERS_DOWN` was reported and no answer came since.
    all_down_reported: bool,
    cache: Arc<Cluster>,
    /// Highest leader epoch seen per partition (from metadata or from any
    /// response that carries one); an answer older than this is stale.
    last_seen_epochs: HashMap<TopicPartition, i32>,
    bootstrap_nodes: Vec<Node>,
    topics: TopicMode,
    closed: bool,
    rng: StdRng,
}

/// Thread-safe cluster metadata. Share it as `Arc<Metadata>`.
/// An identical error event is not queued again for `error_cb` within this
/// (a broker refusing connections is retried every reconnect backoff).
const CLIENT_ERROR_REPEAT: std::time::Duration = std::time::Duration::from_secs(30);
/// Error events kept when the application does not poll.
const CLIENT_ERRORS_MAX: usize = 100;

#[derive(Debug)]
pub struct Metadata {
    cfg: MetadataConfig,
    state: Mutex<State>,
    /// Signalled (after the lock is released) on update, close, fatal error.
    changed: Condvar,
}

impl Metadata {
    /// The base `Metadata`: keeps every topic.
    pub fn new(cfg: MetadataConfig) -> Result<Self> {
        Self::with_mode(cfg, TopicMode::All { subscription: None })
    }

    /// `ProducerMetadata`: keeps only the topics `add`ed, forgetting those
    /// unused for `metadata_idle_ms`.
    pub fn new_producer(cfg: MetadataConfig, metadata_idle_ms: i64) -> Result<Self> {
        if metadata_idle_ms < 0 {
            return Err(Error::Config {
                key: "metadata_idle_ms".into(),
                detail: format!("{metadata_idle_ms} is negative; expected an integer >= 0"),
            });
        }
        Self::with_mode(
            cfg,
            TopicMode::Producer {
                idle_ms: metadata_idle_ms,
                topics: Default::default(),
                new_topics: BTreeSet::new(),
            },
        )
    }

    fn with_mode(cfg: MetadataConfig, topics: TopicMode) -> Result<Self> {
        cfg.validate()?;
        let rng = match cfg.rng_seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_entropy(),
        };
        Ok(Metadata {
            state: Mutex::new(State {
                update_version: 0,
                request_version: 0,
                answered_request_version: 0,
                last_refresh_ms: 0,
                last_successful_refresh_ms: 0,
                need_full_update: false,
                need_partial_update: false,
                attempts: 0,
                failure_backoff_ms: 0,
                fatal_error: None,
                last_connection_error: None,
                client_errors: std::collections::VecDeque::new(),
                last_client_error: None,
                all_down_reported: false,
                cache: Arc::new(Cluster::empty()),
                last_seen_epochs: HashMap::new(),
                bootstrap_nodes: Vec::new(),
                topics,
                closed: false,
                rng,
            }),
            cfg,
            changed: Condvar::new(),
        })
    }

    pub fn config(&self) -> &MetadataConfig {
        &self.cfg
    }

    pub fn is_producer(&self) -> bool {
        matches!(self.lock().topics, TopicMode::Producer { .. })
    }

    /// Take the state lock. Poisoning is recovered (see the module docs).
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    // ----- bootstrap ---------------------------------------------------------

    /// docs/semantics.md §3.1 + 1.2: the seed brokers, in random order, with ids -1,
    /// -2, ... (by position in `addresses`, so an address keeps its id across
    /// re-bootstraps). Each entry may itself be a comma-separated list.
    pub fn bootstrap<S: AsRef<str>>(&self, addresses: &[S]) -> Result<()> {
        let nodes = parse_bootstrap(addresses)?;
        self.bootstrap_nodes(nodes);
        Ok(())
    }

    /// `bootstrap` with nodes already parsed.
    pub fn bootstrap_nodes(&self, nodes: Vec<Node>) {
        let mut st = self.lock();
        st.bootstrap_nodes = nodes;
        st.need_full_update = true;
        st.update_version += 1;
        st.install_bootstrap();
        drop(st);
        self.changed.notify_all();
    }

    /// Go back to the seed brokers (Java's `metadata.recovery.strategy=
    /// rebootstrap`): every broker we learnt of is unreachable. Unlike
    /// `bootstrap` it does not bump `update_version`: nothing was learnt, and
    /// a bump would wake `await_update` callers with no new metadata.
    /// Returns false (and does nothing) when there are no seed brokers.
    pub fn rebootstrap(&self) -> bool {
        let mut st = self.lock();
        if st.bootstrap_nodes.is_empty() || st.closed {
            return false;
        }
        st.install_bootstrap();
        st.need_full_update = true;
        true
    }

    // ----- requests for updates ----------------------------------------------

    /// docs/semantics.md §3.2.
    pub fn request_update(&self) -> i32 {
        let mut st = self.lock();
        st.need_full_update = true;
        st.update_version
    }

    /// docs/semantics.md §3.3.
    pub fn request_update_for_new_topics(&self) -> i32 {
        self.lock().request_update_for_new_topics()
    }

    /// docs/semantics.md §3.10 (base metadata: always a full update).
    pub fn request_update_for_topic(&self, topic: &str) -> i32 {
        let mut st = self.lock();
        let is_new = matches!(&st.topics, TopicMode::Producer { new_topics, .. } if new_topics.contains(topic));
        if is_new {
            st.request_update_for_new_topics()
        } else {
            st.need_full_update = true;
            st.update_version
        }
    }

    /// docs/semantics.md §3.7: an update is due.
    pub fn update_requested(&self) -> bool {
        let st = self.lock();
        st.need_full_update || st.need_partial_update
    }

    /// docs/semantics.md §3.7, with the failure backoff: ms until an update may (and
    /// should) be sent, never negative.
    pub fn time_to_next_update(&self, now_ms: i64) -> i64 {
        self.lock().time_to_next_update(&self.cfg, now_ms)
    }

    /// Java's `newMetadataRequestAndVersion`: what to ask for, the
    /// request_version to pass back to `update`, and whether it is partial.
    /// Partial (only the new topics) when no full update is requested and the
    /// last full one has not expired; else full (all retained topics, or all
    /// topics for the base metadata).
    pub fn new_metadata_request(&self, now_ms: i64) -> (MetadataRequestSpec, i32, bool) {
        let st = self.lock();
        let partial_ok = !st.need_full_update
            && st
                .last_successful_refresh_ms
                .saturating_add(self.cfg.metadata_expire_ms)
                > now_ms;
        match &st.topics {
            TopicMode::All { subscription } => (
                MetadataRequestSpec {
                    topics: subscription.as_ref().map(|s| s.iter().cloned().collect()),
                    allow_auto_topic_creation: false,
                },
                st.request_version,
                false,
            ),
            TopicMode::Producer {
                new_topics, topics, ..
            } => {
                if partial_ok {
                    let names = new_topics.iter().cloned().collect();
                    (
                        MetadataRequestSpec {
                            topics: Some(names),
                            allow_auto_topic_creation: true,
                        },
                        st.request_version,
                        true,
                    )
                } else {
                    let mut names: Vec<String> = topics.keys().cloned().collect();
                    names.sort();
                    (
                        MetadataRequestSpec {
                            topics: Some(names),
                            allow_auto_topic_creation: true,
                        },
                        st.request_version,
                        false,
                    )
                }
            }
        }
    }

    // ----- answers -----------------------------------------------------------

    /// docs/semantics.md §3.4, 3.5, 3.11: apply a Metadata answer.
    pub fn update(
        &self,
        request_version: i32,
        response: &MetadataResponse,
        is_partial_update: bool,
        now_ms: i64,
    ) -> Result<()> {
        let mut st = self.lock();
        if st.closed {
            return Err(Error::State {
                detail: "metadata update after close".into(),
            });
        }
        st.need_partial_update = request_version < st.request_version;
        st.answered_request_version = st.answered_request_version.max(request_version);
        st.last_refresh_ms = now_ms;
        st.attempts = 0;
        st.failure_backoff_ms = 0;
        st.last_connection_error = None;
        st.all_down_reported = false;
        st.last_client_error = None;
        st.update_version += 1;
        if !is_partial_update {
            st.need_full_update = false;
            st.last_successful_refresh_ms = now_ms;
        }
        // Forget epochs of topics we no longer keep, so a topic that comes
        // back later is not compared with an epoch from its previous life.
        {
            let State {
                last_seen_epochs,
                topics,
                ..
            } = &mut *st;
            last_seen_epochs.retain(|tp, _| retain_in(topics, &tp.topic, now_ms));
        }
        let cluster = st.handle_response(response, is_partial_update, now_ms);
        st.cache = Arc::new(cluster);
        // 3.11: every topic named in the answer has been answered for.
        if let TopicMode::Producer { new_topics, .. } = &mut st.topics {
            if !new_topics.is_empty() {
                for t in &response.topics {
                    new_topics.remove(&t.name);
                }
            }
        }
        drop(st);
        self.changed.notify_all();
        Ok(())
    }

    /// A refresh failed (no answer): back off before the next, exponentially
    /// with +-20% jitter up to `refresh_backoff_max_ms`.
    pub fn failed_update(&self, now_ms: i64) {
        let mut st = self.lock();
        st.last_refresh_ms = now_ms;
        st.attempts = st.attempts.saturating_add(1);
        let base = self.cfg.refresh_backoff_ms as f64;
        let cap = self
            .cfg
            .refresh_backoff_max_ms
            .max(self.cfg.refresh_backoff_ms) as f64;
        let exp = (st.attempts - 1).min(62) as i32;
        let jitter: f64 = st.rng.gen_range(0.8..1.2);
        st.failure_backoff_ms = (base * 2f64.powi(exp) * jitter).min(cap) as i64;
    }

    /// Remember why a connection failed (see `last_connection_error`);
    /// cleared by the next successful update.
    pub fn set_connection_error(&self, error: Option<String>) {
        self.lock().last_connection_error = error;
    }

    /// Queue an error event for the client's `error_cb` (see
    /// `client_errors`). `all_down`: the `_ALL_BROKERS_DOWN` event, reported
    /// once until the next answer. Returns whether it was queued.
    pub fn report_client_error(&self, code: i16, message: String, all_down: bool) -> bool {
        let mut st = self.lock();
        if all_down {
            if st.all_down_reported {
                return false;
            }
            st.all_down_reported = true;
        }
        let now = std::time::Instant::now();
        if let Some((c, m, t)) = &st.last_client_error {
            if *c == code && *m == message && now.duration_since(*t) < CLIENT_ERROR_REPEAT {
                return false;
            }
        }
        st.last_client_error = Some((code, message.clone(), now));
        if st.client_errors.len() >= CLIENT_ERRORS_MAX {
            st.client_errors.pop_front();
        }
        st.client_errors.push_back((code, message));
        true
    }

    /// The queued error events, oldest first (see `report_client_error`).
    pub fn take_client_errors(&self) -> Vec<(i16, String)> {
        self.lock().client_errors.drain(..).collect()
    }

    /// " (last connection error: ...)" or "" (for timeout messages).
    pub fn connection_error_hint(&self) -> String {
        match &self.lock().last_connection_error {
            Some(e) => format!(" (last connection error: {e})"),
            None => String::new(),
        }
    }

    /// Record an error every `await_update` caller should see (authentication
    /// failure, unsupported version...). Raised once, then cleared (as Java).
    pub fn fatal_error(&self, error: Error) {
        self.lock().fatal_error = Some(error);
        self.changed.notify_all();
    }

    // ----- producer topics ---------------------------------------------------

    /// docs/semantics.md §3.8. Error::State on base metadata (it keeps every topic).
    pub fn add(&self, topic: &str, now_ms: i64) -> Result<()> {
        add_topic(&mut self.lock(), topic, now_ms)
    }

    /// `add` then `fetch`, under one hold of the lock: the producer's `send`
    /// does both for every record.
    pub fn add_and_fetch(&self, topic: &str, now_ms: i64) -> Result<Arc<Cluster>> {
        let mut st = self.lock();
        add_topic(&mut st, topic, now_ms)?;
        Ok(st.cache.clone())
    }

    /// docs/semantics.md §3.9 (base metadata: always true). May forget an expired topic.
    pub fn retain_topic(&self, topic: &str, is_internal: bool, now_ms: i64) -> bool {
        self.lock().retain_topic(topic, is_internal, now_ms)
    }

    /// Producer topics with their expiry time (empty for base metadata).
    pub fn topics(&self) -> BTreeMap<String, i64> {
        match &self.lock().topics {
            TopicMode::All { .. } => BTreeMap::new(),
            TopicMode::Producer { topics, .. } => {
                topics.iter().map(|(k, v)| (k.clone(), *v)).collect()
            }
        }
    }

    pub fn new_topics(&self) -> BTreeSet<String> {
        match &self.lock().topics {
            TopicMode::All { .. } => BTreeSet::new(),
            TopicMode::Producer { new_topics, .. } => new_topics.clone(),
        }
    }

    /// Base metadata only: ask for (and keep) just these topics; `None` =
    /// all topics. A change asks for an update at once. Returns
    /// update_version; Error::State on producer metadata.
    pub fn set_subscription(&self, topics: Option<Vec<String>>) -> Result<i32> {
        let mut st = self.lock();
        let TopicMode::All { subscription } = &mut st.topics else {
            return Err(Error::State {
                detail: "set_subscription() is for Metadata; ProducerMetadata uses add()".into(),
            });
        };
        let new: Option<BTreeSet<String>> = topics.map(|t| t.into_iter().collect());
        if *subscription == new {
            return Ok(st.update_version);
        }
        *subscription = new;
        Ok(st.request_update_for_new_topics())
    }

    /// The base metadata's subscription (None = all topics, or producer).
    pub fn subscription(&self) -> Option<BTreeSet<String>> {
        match &self.lock().topics {
            TopicMode::All { subscription } => subscription.clone(),
            TopicMode::Producer { .. } => None,
        }
    }

    /// `Some(metadata_idle_ms)` for producer metadata.
    pub fn metadata_idle_ms(&self) -> Option<i64> {
        match &self.lock().topics {
            TopicMode::All { .. } => None,
            TopicMode::Producer { idle_ms, .. } => Some(*idle_ms),
        }
    }

    pub fn contains_topic(&self, topic: &str) -> bool {
        match &self.lock().topics {
            TopicMode::All { subscription } => {
                !matches!(subscription, Some(s) if !s.contains(topic))
            }
            TopicMode::Producer { topics, .. } => topics.contains_key(topic),
        }
    }

    // ----- reading -----------------------------------------------------------

    /// docs/semantics.md §3.6: the current snapshot, without blocking on I/O.
    pub fn fetch(&self) -> Arc<Cluster> {
        // The lock is held for one Arc clone; the snapshot is read lock-free.
        self.lock().cache.clone()
    }

    pub fn update_version(&self) -> i32 {
        self.lock().update_version
    }
    pub fn request_version(&self) -> i32 {
        self.lock().request_version
    }
    pub fn need_full_update(&self) -> bool {
        self.lock().need_full_update
    }
    pub fn need_partial_update(&self) -> bool {
        self.lock().need_partial_update
    }
    pub fn last_refresh_ms(&self) -> i64 {
        self.lock().last_refresh_ms
    }
    pub fn last_successful_refresh_ms(&self) -> i64 {
        self.lock().last_successful_refresh_ms
    }
    /// Consecutive failed refreshes since the last answer.
    pub fn failed_attempts(&self) -> u32 {
        self.lock().attempts
    }
    pub fn invalid_topics(&self) -> BTreeSet<String> {
        self.lock().cache.invalid_topics().clone()
    }
    pub fn unauthorized_topics(&self) -> BTreeSet<String> {
        self.lock().cache.unauthorized_topics().clone()
    }
    pub fn bootstrap_addresses(&self) -> Vec<Node> {
        self.lock().bootstrap_nodes.clone()
    }

    /// The error a send to `topic` must fail with (the topic is invalid or we
    /// may not use it), from the latest answer that named it. Unlike Java it
    /// is not cleared by reading: it holds until an answer says otherwise.
    pub fn error_for_topic(&self, topic: &str) -> Option<Error> {
        topic_error(&self.lock().cache, Some(topic))
    }

    // ----- leader epochs and stale leaders -----------------------------------

    /// Record an epoch seen in some response (fetch, list offsets...). True
    /// when it is newer than what we had; an update with an older epoch for
    /// this partition will then be ignored.
    pub fn update_last_seen_epoch_if_newer(&self, tp: &TopicPartition, leader_epoch: i32) -> bool {
        if leader_epoch < 0 {
            return false;
        }
        let mut st = self.lock();
        match st.last_seen_epochs.get(tp) {
            Some(&cur) if cur >= leader_epoch => false,
            _ => {
                st.last_seen_epochs.insert(tp.clone(), leader_epoch);
                // A newer epoch than the cache means the cached leader is stale.
                if st
                    .cache
                    .leader_epoch_for(&tp.topic, tp.partition)
                    .is_some_and(|e| e < leader_epoch)
                {
                    st.need_full_update = true;
                }
                true
            }
        }
    }

    pub fn last_seen_leader_epoch(&self, tp: &TopicPartition) -> Option<i32> {
        self.lock().last_seen_epochs.get(tp).copied()
    }

    /// A request to the partition's leader failed with NOT_LEADER_OR_FOLLOWER,
    /// FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH: the leader becomes unknown
    /// in the snapshot (so nobody routes there again) and a full update is
    /// requested. Returns the update_version to await.
    pub fn fail_partition_leader(&self, topic: &str, partition: i32) -> i32 {
        let mut st = self.lock();
        if let Some(c) = st.cache.with_leader_unknown(topic, partition) {
            st.cache = Arc::new(c);
        }
        st.need_full_update = true;
        st.update_version
    }

    /// KIP-951: a Produce or Fetch answer named the new leader (and its
    /// node) of partitions whose leader moved. Apply those whose epoch is
    /// newer than the cached one, whose partition is cached and whose leader
    /// node is known (from `leader_nodes` or the cache), without a metadata
    /// round trip (Java's `updatePartitionLeadership`). Returns the
    /// partitions updated. Versions are not bumped: nothing waits on this.
    pub fn update_partition_leadership(
        &self,
        leaders: &[(TopicPartition, i32, i32)],
        leader_nodes: &[Node],
    ) -> Vec<TopicPartition> {
        let mut st = self.lock();
        let cache = st.cache.clone();
        let known =
            |id: i32| leader_nodes.iter().any(|n| n.id == id) || cache.node_by_id(id).is_some();
        let mut applied = Vec::new();
        let mut updates = Vec::new();
        for (tp, leader, epoch) in leaders {
            if *leader < 0 || *epoch < 0 || !known(*leader) {
                continue;
            }
            let Some(current) = cache.partition(&tp.topic, tp.partition) else {
                continue;
            };
            if current.leader_epoch >= 0 && *epoch <= current.leader_epoch {
                continue;
            }
            updates.push((tp.topic.clone(), tp.partition, *leader, *epoch));
            st.last_seen_epochs.insert(tp.clone(), *epoch);
            applied.push(tp.clone());
        }
        if !applied.is_empty() {
            st.cache = Arc::new(cache.with_leaders(&updates, leader_nodes));
        }
        applied
    }

    /// Any request's partition-level error: leader-invalidating errors fail
    /// the leader, other invalid-metadata errors request an update. True when
    /// the error was a metadata one (the caller should retry after the update).
    pub fn handle_partition_error(&self, topic: &str, partition: i32, error_code: i16) -> bool {
        if invalidates_leader(error_code) {
            self.fail_partition_leader(topic, partition);
            true
        } else if is_invalid_metadata_error(error_code) {
            self.request_update();
            true
        } else {
            false
        }
    }

    /// Wake every waiter; they raise `Closed`. Updates after close fail.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }
}

/// `Metadata::add` on the locked state.
fn add_topic(st: &mut State, topic: &str, now_ms: i64) -> Result<()> {
    let is_new = match &mut st.topics {
        TopicMode::All { .. } => {
            return Err(Error::State {
                detail: "add() needs ProducerMetadata; Metadata keeps every topic".into(),
            })
        }
        TopicMode::Producer {
            idle_ms,
            topics,
            new_topics,
        } => {
            let expiry = now_ms.saturating_add(*idle_ms);
            // Every `send` lands here: refresh a known topic's expiry in
            // place rather than allocating its name for `insert`.
            if let Some(e) = topics.get_mut(topic) {
                *e = expiry;
                false
            } else {
                topics.insert(topic.to_string(), expiry);
                new_topics.insert(topic.to_string());
                true
            }
        }
    };
    if is_new {
        st.request_update_for_new_topics();
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod broker_tests;
