//! OffsetCommit sending, and asynchronous commits without a thread of their
//! own.
//!
//! `commit_async` queues its offsets here and the OffsetCommit goes out at
//! once when the coordinator is known. The rest is driven by the
//! application's own calls, `poll` and `close` (Java likewise completes
//! `commitAsync` callbacks inside `poll`): `drive` takes the answers that
//! have arrived, does the bookkeeping `commit_sync` does
//! (`Inner::commit_result`), retries retriable errors after the backoff
//! until `default_api_timeout_ms`, and reports each outcome through
//! `Polled::commits` with its token. An answer wakes a waiting `poll`
//! through the `data` condvar, so the callback runs without waiting out a
//! poll slice.
//!
//! An interrupted `commit_sync` whose OffsetCommit is in flight is adopted
//! here without a token: its answer still gets the bookkeeping (last
//! committed offsets, coordinator state), nobody is told.
//!
//! Locks: the list's mutex is never held while the state is locked
//! (`drive` takes the list out first), so `drive` may run on any
//! application thread, concurrently with the consumer thread.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{commit_body, coordinator_connection, Consumer, Inner};
use crate::cluster::{Node, TopicPartition};
use crate::consumer::coordinator::Generation;
use crate::consumer::requests::OffsetAndMetadata;
use crate::driver::Requester;
use crate::driver::{Reply, RequestOpts};
use crate::error::Error;
use crate::wait;

/// Send one OffsetCommit of `offsets` to `node` with the member's current
/// generation (generation -1 for a manually assigned consumer, as Java).
/// Returns the reply to wait for and the generation it carries, which
/// `commit_result` needs to tell a stale rebalance error from a live one.
/// `wake`: notify `data` when the answer arrives (for a `poll` waiting on
/// it); a caller that waits on the reply itself passes false.
pub(super) fn send(
    inner: &Inner,
    node: &Node,
    offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
    ready_timeout: Duration,
    wake: bool,
) -> Result<(Reply, Generation), Error> {
    let group_id = inner.group_id()?;
    let (generation, instance) = {
        let st = inner.lock();
        let g = st.group.as_ref().expect("group_id implies a membership");
        let gen = if st.subs.has_auto_assigned_partitions() {
            g.generation().clone()
        } else {
            Generation::none()
        };
        (gen, g.group_instance_id.clone())
    };
    let body = commit_body(
        &inner.metadata.fetch(),
        group_id,
        &generation,
        instance,
        offsets,
    );
    // The hook owns only the condvar, never `Inner`: it runs on the
    // consumer thread, which must not hold (and maybe drop) the last
    // reference to what owns it.
    let then: Option<Box<dyn FnOnce() + Send>> = wake.then(|| {
        let data = inner.data.clone();
        Box::new(move || data.notify_all()) as Box<dyn FnOnce() + Send>
    });
    let reply = inner.request(
        coordinator_connection(node),
        body,
        RequestOpts::default(),
        ready_timeout.as_millis() as i64,
        then,
    );
    Ok((reply, generation))
}

/// Commits the application is not waiting for.
#[derive(Default)]
pub(super) struct AsyncCommits {
    list: Mutex<Vec<Pending>>,
    /// `list.len()`, readable without the lock: `poll` looks at it after
    /// every wait slice.
    len: AtomicUsize,
}

struct Pending {
    /// None: an interrupted `commit_sync`; only its bookkeeping is left.
    token: Option<u64>,
    offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    /// Retries stop here (`default_api_timeout_ms` after `commit_async`).
    deadline: Instant,
    stage: Stage,
}

enum Stage {
    /// Waiting for the coordinator or for the retry backoff to pass.
    Waiting { not_before: Instant },
    InFlight {
        reply: Reply,
        generation: Generation,
    },
}

impl AsyncCommits {
    fn lock(&self) -> MutexGuard<'_, Vec<Pending>> {
        self.list.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn put_back(&self, mut keep: Vec<Pending>) {
        let mut list = self.lock();
        list.append(&mut keep);
        self.len.store(list.len(), Ordering::Release);
    }

    pub(super) fn pending(&self) -> bool {
        self.len.load(Ordering::Acquire) > 0
    }

    /// Queue an asynchronous commit and send it if the coordinator is known.
    pub(super) fn add(
        &self,
        c: &Consumer,
        token: u64,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    ) {
        let now = Instant::now();
        let timeout = Duration::from_millis(c.inner.cfg.default_api_timeout_ms.max(0) as u64);
        self.put_back(vec![Pending {
            token: Some(token),
            offsets,
            deadline: now + timeout,
            stage: Stage::Waiting { not_before: now },
        }]);
        self.drive(c);
    }

    /// Keep the in-flight OffsetCommit of an interrupted `commit_sync`, so
    /// its answer is still applied.
    pub(super) fn adopt(
        &self,
        reply: Reply,
        offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
        generation: Generation,
    ) {
        self.put_back(vec![Pending {
            token: None,
            offsets,
            deadline: Instant::now(),
            stage: Stage::InFlight { reply, generation },
        }]);
    }

    /// One non-blocking round over every pending commit. Must be called
    /// without the state locked (`commit_result` locks it).
    pub(super) fn drive(&self, c: &Consumer) {
        if !self.pending() {
            return;
        }
        let list = std::mem::take(&mut *self.lock());
        let mut keep = Vec::new();
        let mut done = Vec::new();
        for p in list {
            match self.step(c, p) {
                Ok(p) => keep.push(p),
                Err((Some(token), r)) => done.push((token, r)),
                Err((None, _)) => {}
            }
        }
        self.put_back(keep);
        if !done.is_empty() {
            c.inner.lock().commits_done.extend(done);
            c.inner.data.notify_all();
        }
    }

    /// Ok: still pending; Err: finished, with its token and outcome.
    fn step(&self, c: &Consumer, p: Pending) -> Result<Pending, (Option<u64>, Result<(), Error>)> {
        let inner = &c.inner;
        let now = Instant::now();
        let Pending {
            token,
            offsets,
            deadline,
            stage,
        } = p;
        let again = |offsets, stage| {
            Ok(Pending {
                token,
                offsets,
                deadline,
                stage,
            })
        };
        match stage {
            Stage::Waiting { not_before } if now < not_before => again(offsets, stage),
            Stage::Waiting { .. } if offsets.is_empty() => Err((token, Ok(()))),
            Stage::Waiting { .. } => {
                // A zero timeout looks once (and nudges the consumer thread
                // to find the coordinator) without waiting.
                let node = match c.ensure_coordinator_ready(Duration::ZERO, &wait::never) {
                    Ok(node) => node,
                    Err(Error::Timeout { .. }) if now < deadline => return again(offsets, stage),
                    Err(e) => return Err((token, Err(e))),
                };
                let left = deadline.saturating_duration_since(now);
                match send(inner, &node, &offsets, left, true) {
                    Ok((reply, generation)) => {
                        again(offsets, Stage::InFlight { reply, generation })
                    }
                    Err(e) => Err((token, Err(e))),
                }
            }
            Stage::InFlight { reply, generation } => {
                let Some(answer) = reply.try_take() else {
                    return again(offsets, Stage::InFlight { reply, generation });
                };
                match inner.commit_result(answer, &offsets, &generation, reply.age()) {
                    Ok(()) => Err((token, Ok(()))),
                    Err((e, retriable)) => {
                        let backoff =
                            Duration::from_millis(inner.cfg.retry_backoff_ms.max(0) as u64);
                        if token.is_some() && retriable && now + backoff < deadline {
                            again(
                                offsets,
                                Stage::Waiting {
                                    not_before: now + backoff,
                                },
                            )
                        } else {
                            Err((token, Err(e)))
                        }
                    }
                }
            }
        }
    }

    /// Drive until nothing is pending (true), `deadline` passes or
    /// `interrupted` says yes (false). For `close`, which lets queued
    /// commits land before the member leaves, as Java's close does.
    pub(super) fn finish(
        &self,
        c: &Consumer,
        deadline: Instant,
        interrupted: &dyn Fn() -> bool,
    ) -> bool {
        loop {
            self.drive(c);
            if !self.pending() {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || interrupted() {
                return false;
            }
            // Answers notify `data`; a retry backoff or coordinator lookup
            // ends within a slice.
            let st = c.inner.lock();
            drop(
                c.inner
                    .data
                    .wait_timeout(st, left.min(Duration::from_millis(20)))
                    .unwrap_or_else(|p| p.into_inner()),
            );
        }
    }
}
