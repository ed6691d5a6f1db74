//! How the metadata state changes (docs/semantics.md §3.1-§3.11): applying
//! an answer to the cache, deciding what to ask next, and which topics to
//! keep. The public face and its locking are in `metadata.rs`; these are the
//! pure steps it calls with the lock held.

use super::*;

impl State {
    pub(super) fn install_bootstrap(&mut self) {
        let mut nodes = self.bootstrap_nodes.clone();
        nodes.shuffle(&mut self.rng);
        self.cache = Arc::new(Cluster::bootstrap(nodes));
    }

    pub(super) fn request_update_for_new_topics(&mut self) -> i32 {
        // Clear the last refresh time so the update may go out at once.
        self.last_refresh_ms = 0;
        self.need_partial_update = true;
        self.request_version += 1;
        self.update_version
    }

    pub(super) fn time_to_next_update(&self, cfg: &MetadataConfig, now_ms: i64) -> i64 {
        let time_to_expire = if self.need_full_update || self.need_partial_update {
            0
        } else {
            (self
                .last_successful_refresh_ms
                .saturating_add(cfg.metadata_expire_ms)
                - now_ms)
                .max(0)
        };
        let backoff = if self.attempts == 0 {
            cfg.refresh_backoff_ms
        } else {
            self.failure_backoff_ms
        };
        let time_to_allow = (self.last_refresh_ms.saturating_add(backoff) - now_ms).max(0);
        time_to_expire.max(time_to_allow)
    }

    pub(super) fn retain_topic(&mut self, topic: &str, _is_internal: bool, now_ms: i64) -> bool {
        retain_in(&mut self.topics, topic, now_ms)
    }

    /// Java's `updateLatestMetadata`: take the answered partition unless its
    /// leader epoch is older than one we have seen, in which case keep the
    /// cached entry (or none).
    pub(super) fn update_latest(
        &mut self,
        topic: &Arc<str>,
        p: &PartitionMetadata,
        topic_recreated: bool,
        old: &Cluster,
    ) -> Option<PartitionMetadata> {
        // One shared Arc<str> per topic: no allocation per partition.
        let tp = TopicPartition {
            topic: topic.clone(),
            partition: p.partition,
        };
        if p.leader_epoch < 0 {
            // No epoch (old broker, or an error entry): take it as is.
            self.last_seen_epochs.remove(&tp);
            return Some(p.clone());
        }
        match self.last_seen_epochs.get(&tp) {
            Some(&cur) if !topic_recreated && p.leader_epoch < cur => {
                old.partition(topic, p.partition).cloned()
            }
            _ => {
                self.last_seen_epochs.insert(tp, p.leader_epoch);
                Some(p.clone())
            }
        }
    }

    /// docs/semantics.md §3.5: the new cache from an answer.
    pub(super) fn handle_response(
        &mut self,
        response: &MetadataResponse,
        is_partial: bool,
        now_ms: i64,
    ) -> Cluster {
        let old = self.cache.clone();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut internal = BTreeSet::new();
        let mut unauthorized = BTreeSet::new();
        let mut invalid = BTreeSet::new();
        let mut partitions: HashMap<String, Vec<PartitionMetadata>> = HashMap::new();
        let mut topic_ids: HashMap<String, [u8; 16]> = HashMap::new();

        for t in &response.topics {
            seen.insert(t.name.as_str());
            if !self.retain_topic(&t.name, t.is_internal, now_ms) {
                continue;
            }
            if t.is_internal {
                internal.insert(t.name.clone());
            }
            // An all-zero id is the wire's "no id".
            let new_id = t.topic_id.filter(|id| id.iter().any(|b| *b != 0));
            if let Some(id) = new_id {
                topic_ids.insert(t.name.clone(), id);
            }
            let recreated = new_id.is_some() && new_id != old.topic_id(&t.name);
            if t.error_code == codes::NONE {
                let mut parts = Vec::with_capacity(t.partitions.len());
                let name: Arc<str> = Arc::from(t.name.as_str());
                for p in &t.partitions {
                    if let Some(pm) = self.update_latest(&name, p, recreated, &old) {
                        parts.push(pm);
                    }
                    if is_invalid_metadata_error(p.error_code) {
                        self.need_full_update = true;
                    }
                }
                if !parts.is_empty() {
                    partitions.insert(t.name.clone(), parts);
                }
            } else {
                if is_invalid_metadata_error(t.error_code) {
                    self.need_full_update = true;
                }
                if t.error_code == codes::INVALID_TOPIC_EXCEPTION {
                    invalid.insert(t.name.clone());
                } else if t.error_code == codes::TOPIC_AUTHORIZATION_FAILED {
                    unauthorized.insert(t.name.clone());
                }
            }
        }

        if is_partial {
            // Merge: keep what the cache knew of retained topics the answer
            // did not name (Java's MetadataCache.mergeWith).
            for (name, state) in old.topic_states() {
                if seen.contains(name.as_str())
                    || !self.retain_topic(name, old.internal_topics().contains(name), now_ms)
                {
                    continue;
                }
                partitions
                    .entry(name.clone())
                    .or_insert_with(|| state.partitions.clone());
                if let Some(id) = state.topic_id {
                    topic_ids.entry(name.clone()).or_insert(id);
                }
            }
            for (set, old_set) in [
                (&mut internal, old.internal_topics()),
                (&mut invalid, old.invalid_topics()),
                (&mut unauthorized, old.unauthorized_topics()),
            ] {
                for name in old_set {
                    if !seen.contains(name.as_str()) && self.retain_topic(name, false, now_ms) {
                        set.insert(name.clone());
                    }
                }
            }
        }

        Cluster::new(
            response.cluster_id.clone(),
            response.brokers.clone(),
            partitions,
            &topic_ids,
            internal,
            invalid,
            unauthorized,
            response.controller().cloned(),
        )
    }

    pub(super) fn check_wait(
        &mut self,
        last_version: i32,
        topic: Option<&str>,
    ) -> Option<Result<()>> {
        if let Some(e) = self.fatal_error.take() {
            return Some(Err(e));
        }
        if self.closed {
            return Some(Err(Error::Closed { what: "metadata" }));
        }
        if self.update_version > last_version {
            return Some(match topic_error(&self.cache, topic) {
                Some(e) => Err(e),
                None => Ok(()),
            });
        }
        None
    }

    /// `check_wait` that also wants the applied answer to come from a
    /// request built at `want_request` or later (§3.13); an older one moves
    /// `last_version` on so the next answer is waited for.
    pub(super) fn check_wait_covering(
        &mut self,
        last_version: &mut i32,
        want_request: i32,
    ) -> Option<Result<()>> {
        match self.check_wait(*last_version, None) {
            Some(Ok(())) if self.answered_request_version < want_request => {
                *last_version = self.update_version;
                None
            }
            r => r,
        }
    }
}

/// docs/semantics.md §3.9 over the topic set alone (so callers can hold other State
/// fields borrowed at the same time).
pub(super) fn retain_in(topics: &mut TopicMode, topic: &str, now_ms: i64) -> bool {
    match topics {
        TopicMode::All { subscription } => !matches!(subscription, Some(s) if !s.contains(topic)),
        TopicMode::Producer {
            topics, new_topics, ..
        } => match topics.get(topic) {
            None => false,
            Some(_) if new_topics.contains(topic) => true,
            Some(&expiry) if expiry <= now_ms => {
                topics.remove(topic);
                false
            }
            Some(_) => true,
        },
    }
}
