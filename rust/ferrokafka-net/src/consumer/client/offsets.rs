//! Offset lookups by timestamp (ListOffsets), sent to each partition's
//! leader from the application's thread and waited for in slices that ask
//! `interrupted`.

use super::*;

impl Consumer {
    /// ListOffsets for each partition at `timestamp` (-2 earliest, -1
    /// latest, else the first offset with a timestamp >= it). Returns
    /// (offset, timestamp) or None when no such record exists (never for
    /// earliest and latest: an answer without an offset is asked again).
    pub fn list_offsets(
        &self,
        query: &[(TopicPartition, i64)],
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<BTreeMap<TopicPartition, Option<(i64, i64)>>, Error> {
        let deadline = Instant::now() + timeout;
        {
            let mut st = self.inner.lock();
            self.inner
                .want_topics(&mut st, query.iter().map(|(tp, _)| tp.topic.to_string()));
        }
        let mut out = BTreeMap::new();
        let mut todo: Vec<(TopicPartition, i64)> = query.to_vec();
        let mut last_err: Option<Error> = None;
        while !todo.is_empty() {
            if Instant::now() < deadline && interrupted() {
                return Err(Error::Interrupted);
            }
            if Instant::now() >= deadline {
                return Err(last_err.unwrap_or(Error::Timeout {
                    what: format!(
                        "listing offsets{}",
                        self.inner.metadata.connection_error_hint()
                    ),
                    timeout_ms: timeout.as_millis() as u64,
                }));
            }
            let cluster = self.inner.metadata.fetch();
            let mut by_leader: ByLeader = BTreeMap::new();
            let mut missing = false;
            for (tp, ts) in &todo {
                if let Some(err) = self.inner.metadata.error_for_topic(&tp.topic) {
                    return Err(err);
                }
                match cluster.leader_for(&tp.topic, tp.partition) {
                    Some(n) => {
                        let epoch = cluster
                            .leader_epoch_for(&tp.topic, tp.partition)
                            .unwrap_or(-1);
                        by_leader
                            .entry(n.id)
                            .or_insert_with(|| (n.clone(), vec![]))
                            .1
                            .push((tp.clone(), *ts, epoch));
                    }
                    None => missing = true,
                }
            }
            if missing {
                let v = self.inner.metadata.request_update();
                self.inner.wake();
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(200));
                if let Err(e @ Error::Authentication { .. }) =
                    self.inner.metadata.await_update(v, None, Some(left))
                {
                    return Err(e);
                }
                if by_leader.is_empty() {
                    continue;
                }
            }
            let isolation = if self.inner.cfg.read_committed {
                READ_COMMITTED
            } else {
                0
            };
            let mut retry = Vec::new();
            for (_, (node, parts)) in by_leader {
                let left = deadline.saturating_duration_since(Instant::now());
                let body = RequestKind::ListOffsets(build_list_offsets_request(
                    isolation,
                    &parts,
                    self.inner.cfg.request_timeout_ms as i32,
                ));
                match self.inner.request_blocking(
                    node,
                    Body::Ready(body),
                    RequestOpts::default(),
                    left.as_millis() as i64,
                    interrupted,
                ) {
                    // Nothing to undo: offset lookups change no state.
                    Err(Error::Interrupted) => return Err(Error::Interrupted),
                    Ok((ResponseKind::ListOffsets(resp), _)) => {
                        let mut answered = HashSet::new();
                        for r in parse_list_offsets_response(&resp) {
                            answered.insert(r.tp.clone());
                            let ts = parts
                                .iter()
                                .find(|p| p.0 == r.tp)
                                .map(|p| p.1)
                                .unwrap_or(LATEST_TIMESTAMP);
                            match r.error_code {
                                // docs/semantics.md §8.8: earliest and latest
                                // always have an offset (an empty log's is its
                                // end), so an answer without one is asked
                                // again until the deadline, whose error names
                                // it. Read as 0, it would make a Spark range empty
                                // with no error.
                                codes::NONE
                                    if r.offset < 0
                                        && (ts == EARLIEST_TIMESTAMP || ts == LATEST_TIMESTAMP) =>
                                {
                                    last_err = Some(Error::State {
                                        detail: format!(
                                            "the leader of {}-{} answered no {} offset",
                                            r.tp.topic,
                                            r.tp.partition,
                                            if ts == LATEST_TIMESTAMP {
                                                "latest"
                                            } else {
                                                "earliest"
                                            }
                                        ),
                                    });
                                    retry.push((r.tp, ts));
                                }
                                codes::NONE => {
                                    out.insert(
                                        r.tp,
                                        (r.offset >= 0).then_some((r.offset, r.timestamp)),
                                    );
                                }
                                code if Error::broker(code, None).retriable()
                                    || code == codes::UNKNOWN_TOPIC_OR_PARTITION =>
                                {
                                    self.inner.metadata.request_update();
                                    last_err = Some(Error::broker(code, None));
                                    retry.push((r.tp, ts));
                                }
                                code => {
                                    return Err(Error::broker(
                                        code,
                                        Some(format!(
                                            "listing offsets of {}-{}",
                                            r.tp.topic, r.tp.partition
                                        )),
                                    ))
                                }
                            }
                        }
                        for (tp, ts, _) in parts {
                            if !answered.contains(&tp) {
                                retry.push((tp, ts));
                            }
                        }
                    }
                    Ok(_) => {
                        return Err(Error::State {
                            detail: "unexpected ListOffsets answer".into(),
                        })
                    }
                    Err(e) => {
                        self.inner.metadata.request_update();
                        last_err = Some(e);
                        retry.extend(parts.into_iter().map(|(tp, ts, _)| (tp, ts)));
                    }
                }
            }
            if !retry.is_empty() {
                let backoff = Duration::from_millis(self.inner.cfg.retry_backoff_ms.max(10) as u64);
                if !wait::sleep(backoff, interrupted) {
                    return Err(Error::Interrupted);
                }
            }
            todo = retry;
        }
        Ok(out)
    }
}
