//! The share consumer: the application's face (`poll`, `acknowledge`,
//! `commit_sync`, `close`) and the thread that carries out what the
//! sans-IO [`ShareCore`] decides. Same threads and locks as the consumer
//! (`consumer::client`): one mutex holds the core, nobody does I/O under
//! it, the share consumer thread alone polls the network client, and the
//! application thread blocks only on `data` (records, errors, commit
//! results, close progress).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ferrokafka_protocol::kafka_protocol::messages::ResponseKind;

use crate::blocking::{now_ms, BlockingClient};
use crate::cluster::TopicPartition;
use crate::driver::{try_send, Done, Pending, RequestOpts};
use crate::error::Error;
use crate::metadata::Metadata;
use crate::share::acks::AckType;
use crate::share::config::ShareConfig;
use crate::share::core::{Action, CommitResults, Dest, Request, ShareBatch, ShareCore, Tag};

struct Inner {
    cfg: ShareConfig,
    state: Mutex<ShareCore>,
    /// Signalled when records, errors, commit results or close progress
    /// arrive.
    data: Condvar,
    metadata: Arc<Metadata>,
    net: Arc<BlockingClient>,
    stop: AtomicBool,
    /// commit_async ids whose results nobody waits for.
    async_commits: Mutex<Vec<u64>>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, ShareCore> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The share consumer thread should look at the state again.
    fn wake(&self) {
        self.net.wakeup();
    }
}

pub struct ShareConsumer {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

fn closed() -> Error {
    Error::Closed {
        what: "share consumer",
    }
}

impl ShareConsumer {
    /// `metadata` must be base (non-producer) metadata driven by `net`'s updater.
    pub fn new(
        cfg: ShareConfig,
        metadata: Arc<Metadata>,
        net: Arc<BlockingClient>,
    ) -> Result<Self, Error> {
        cfg.validate()?;
        metadata.set_subscription(Some(vec![]))?;
        let inner = Arc::new(Inner {
            state: Mutex::new(ShareCore::new(cfg.clone())),
            cfg,
            data: Condvar::new(),
            metadata,
            net,
            stop: AtomicBool::new(false),
            async_commits: Mutex::default(),
        });
        let worker = inner.clone();
        let log = inner.net.log_context();
        let thread = std::thread::Builder::new()
            .name("ferrokafka-share".into())
            .spawn(move || {
                crate::log_context::set_thread(log);
                run(worker)
            })
            .map_err(|e| Error::State {
                detail: format!("cannot start the share consumer thread: {e}"),
            })?;
        Ok(ShareConsumer {
            inner,
            thread: Some(thread),
        })
    }

    pub fn config(&self) -> &ShareConfig {
        &self.inner.cfg
    }

    fn open(&self) -> Result<MutexGuard<'_, ShareCore>, Error> {
        let st = self.inner.lock();
        if st.closing || st.closed {
            return Err(closed());
        }
        Ok(st)
    }

    pub fn subscribe(&self, topics: Vec<String>) -> Result<(), Error> {
        let mut st = self.open()?;
        st.subscribe(topics)?;
        drop(st);
        self.inner.wake();
        Ok(())
    }

    pub fn unsubscribe(&self) -> Result<(), Error> {
        self.open()?.unsubscribe();
        self.inner.wake();
        Ok(())
    }

    pub fn subscription(&self) -> Vec<String> {
        self.inner
            .lock()
            .member
            .subscription()
            .iter()
            .cloned()
            .collect()
    }

    /// Records acquired for this member, at most `max_records`, waiting up
    /// to `timeout` for some. The previous poll's records are acknowledged
    /// first (docs/semantics.md §11.5).
    pub fn poll(
        &self,
        max_records: usize,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<Vec<ShareBatch>, Error> {
        let deadline = Instant::now() + timeout;
        let mut st = self.open()?;
        if st.member.subscription().is_empty() && st.buffer.is_empty() {
            // Java's KafkaShareConsumer.poll: IllegalStateException.
            return Err(Error::State {
                detail: "the share consumer is not subscribed to any topic".into(),
            });
        }
        self.drain_async_commits(&mut st);
        if st.begin_poll()? {
            self.inner.wake();
        }
        loop {
            if let Some(e) = st.errors.pop_front() {
                return Err(e);
            }
            if !st.buffer.is_empty() {
                let out = st.take_records(max_records.max(1));
                drop(st);
                // The buffer may be empty now: the thread fetches again.
                self.inner.wake();
                return Ok(out);
            }
            if st.closed {
                return Err(closed());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            if interrupted() {
                return Err(Error::Interrupted);
            }
            st = self
                .inner
                .data
                .wait_timeout(st, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Log what commit_async results arrived (nobody waits for them).
    fn drain_async_commits(&self, st: &mut ShareCore) {
        let mut ids = self
            .inner
            .async_commits
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        ids.retain(|id| match st.take_commit(*id) {
            Some(results) => {
                for (tp, e) in results {
                    if let Some(e) = e {
                        log::warn!(target: "ferrokafka::share", "commit_async: acknowledging {}-{} failed: {e}", tp.topic, tp.partition);
                    }
                }
                false
            }
            None => true,
        });
    }

    pub fn acknowledge(&self, tp: &TopicPartition, offset: i64, t: AckType) -> Result<(), Error> {
        self.open()?.acknowledge(tp, offset, t)
    }

    /// Send the acknowledgements decided so far and wait for the leaders'
    /// answers: the outcome per partition.
    pub fn commit_sync(
        &self,
        timeout: Duration,
        interrupted: &dyn Fn() -> bool,
    ) -> Result<CommitResults, Error> {
        let deadline = Instant::now() + timeout;
        let mut st = self.open()?;
        let id = st.commit();
        self.inner.wake();
        loop {
            if let Some(r) = st.take_commit(id) {
                return Ok(r);
            }
            if st.closed {
                return Err(closed());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                st.forget_commit(id);
                return Err(Error::Timeout {
                    what: "commit_sync: waiting for the acknowledgement answers".into(),
                    timeout_ms: timeout.as_millis() as u64,
                });
            }
            if interrupted() {
                return Err(Error::Interrupted);
            }
            st = self
                .inner
                .data
                .wait_timeout(st, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Send the acknowledgements decided so far without waiting; failures
    /// are logged.
    pub fn commit_async(&self) -> Result<(), Error> {
        let id = self.open()?.commit();
        self.inner
            .async_commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(id);
        self.inner.wake();
        Ok(())
    }

    /// Acknowledge what was decided (implicit mode: the last poll's records
    /// are accepted), release what was acquired but never returned, close
    /// every share session and leave the group; waits up to `timeout`.
    pub fn close(&self, timeout: Duration, interrupted: &dyn Fn() -> bool) -> Result<(), Error> {
        let deadline = Instant::now() + timeout;
        {
            let mut st = self.inner.lock();
            if st.closed {
                return Ok(());
            }
            st.begin_close();
        }
        self.inner.wake();
        let mut st = self.inner.lock();
        let mut outcome = Ok(());
        while !st.close_done() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                outcome = Err(Error::Timeout {
                    what: "close: closing the share sessions and leaving the group".into(),
                    timeout_ms: timeout.as_millis() as u64,
                });
                break;
            }
            if interrupted() {
                outcome = Err(Error::Interrupted);
                break;
            }
            st = self
                .inner
                .data
                .wait_timeout(st, left.min(Duration::from_millis(50)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        st.closed = true;
        drop(st);
        self.stop();
        outcome
    }

    fn stop(&self) {
        self.inner.stop.store(true, Ordering::Release);
        self.inner.wake();
    }
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ----- the share consumer thread -----------------------------------------------------

type Answers = Arc<Mutex<Vec<(Tag, Result<(ResponseKind, i16), Error>)>>>;

fn run(inner: Arc<Inner>) {
    let answers: Answers = Arc::default();
    let mut pending: Vec<Pending> = Vec::new();
    let mut topics: Option<BTreeSet<String>> = None;
    loop {
        if inner.stop.load(Ordering::Acquire) {
            for p in pending {
                p.fail(closed());
            }
            inner.lock().closed = true;
            inner.data.notify_all();
            return;
        }
        let now = now_ms();
        let arrived = std::mem::take(&mut *answers.lock().unwrap_or_else(|p| p.into_inner()));
        for (tag, result) in arrived {
            let actions = {
                let mut st = inner.lock();
                st.set_cluster(inner.metadata.fetch());
                st.on_answer(tag, result, now)
            };
            carry_out(&inner, actions, &answers, &mut pending, &mut topics, now);
        }
        let (actions, wake_at) = {
            let mut st = inner.lock();
            st.set_cluster(inner.metadata.fetch());
            let r = st.step(now);
            if st.close_done() {
                inner.data.notify_all();
            }
            r
        };
        carry_out(&inner, actions, &answers, &mut pending, &mut topics, now);
        pending = pending
            .into_iter()
            .filter_map(|p| try_send(&inner.net, p, now))
            .collect();
        let wait = (wake_at - now_ms()).clamp(0, 100);
        inner.net.poll(Duration::from_millis(wait as u64));
    }
}

fn carry_out(
    inner: &Inner,
    actions: Vec<Action>,
    answers: &Answers,
    pending: &mut Vec<Pending>,
    topics: &mut Option<BTreeSet<String>>,
    now: i64,
) {
    for a in actions {
        match a {
            Action::Send(req) => queue(inner, *req, answers, pending, now),
            Action::WakeApplication => inner.data.notify_all(),
            Action::MetadataUpdate => {
                inner.metadata.request_update();
            }
            Action::MetadataTopics(t) => {
                let set: BTreeSet<String> = t.iter().cloned().collect();
                if topics.as_ref() != Some(&set) {
                    *topics = Some(set);
                    if let Err(e) = inner.metadata.set_subscription(Some(t)) {
                        let mut st = inner.lock();
                        st.errors.push_back(e);
                        inner.data.notify_all();
                    } else {
                        inner.metadata.request_update_for_new_topics();
                    }
                }
            }
        }
    }
}

fn queue(inner: &Inner, req: Request, answers: &Answers, pending: &mut Vec<Pending>, now: i64) {
    let Request { dest, body, tag } = req;
    let node = match dest {
        Dest::Node(n) => n,
        Dest::LeastLoaded => match inner.net.least_loaded_node(now) {
            Some(n) => n,
            None => {
                inner.metadata.request_update();
                answers.lock().unwrap_or_else(|p| p.into_inner()).push((
                    tag,
                    Err(Error::State {
                        detail: "no broker to send the request to".into(),
                    }),
                ));
                return;
            }
        },
    };
    // A ShareFetch waits up to fetch_max_wait_ms on the broker before it
    // answers: its timeout covers that wait.
    let opts = RequestOpts {
        request_timeout_ms: matches!(tag, Tag::Fetch { .. })
            .then(|| inner.cfg.request_timeout_ms + inner.cfg.fetch_max_wait_ms as i64),
        max_version: None,
    };
    let answers = answers.clone();
    let reply: Done = Box::new(move |result| {
        answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((tag, result));
    });
    pending.push(Pending::new(
        node,
        body,
        opts,
        now + inner.cfg.request_timeout_ms,
        reply,
    ));
}
