//! The consumer thread: it owns the consumer's connections and carries out
//! what the sans-IO `ConsumerCore` decides (see the module comment of
//! `consumer::client` for the threads and locks). It only moves bytes and
//! wakes; every decision is the core's.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ferrokafka_protocol::kafka_protocol::messages::ResponseKind;

use crate::blocking::{now_ms, BlockingClient};
use crate::cluster::{Node, TopicPartition};
use crate::consumer::config::ConsumerConfig;
use crate::consumer::coordinator::{Generation, Reaction};
use crate::consumer::core::{prepare_answer, Action, ConsumerCore, Dest, Request, Tag};
use crate::consumer::pool::ColumnPool;
use crate::consumer::requests::OffsetAndMetadata;
use crate::driver::{try_send, Body, Done, Pending, Reply, RequestOpts, Requester};
use crate::error::Error;
use crate::metadata::Metadata;

/// Requests for the consumer thread to send.
#[derive(Default)]
pub(super) struct Outbox {
    requests: Vec<Outgoing>,
    /// The consumer thread has stopped: nothing more will be sent.
    closed: bool,
}

enum Outgoing {
    /// The core's, decided on the application thread (a command's action).
    Core(Request),
    /// The application thread's own; `reply` gets the answer.
    App {
        node: Node,
        body: Body,
        opts: RequestOpts,
        timeout_ms: i64,
        reply: Done,
    },
}

pub(super) struct Inner {
    pub(super) cfg: ConsumerConfig,
    pub(super) state: Mutex<ConsumerCore>,
    /// Signalled when records, events or errors arrive (poll waits on it).
    /// Shared so an async commit's answer can wake `poll` without holding
    /// `Inner` (see `client::commits`).
    pub(super) data: Arc<Condvar>,
    pub(super) metadata: Arc<Metadata>,
    /// Polled by the consumer thread only.
    pub(super) net: Arc<BlockingClient>,
    pub(super) outbox: Mutex<Outbox>,
    pub(super) stop: AtomicBool,
    /// Buffers of fetched runs the application let go of, for the next
    /// ones (docs/semantics.md §8.7).
    pub(super) pool: Arc<ColumnPool>,
}

impl Inner {
    pub(super) fn lock(&self) -> MutexGuard<'_, ConsumerCore> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn outbox(&self) -> MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The consumer thread should look at the state again: its poll returns.
    pub(super) fn wake(&self) {
        self.net.wakeup();
    }

    pub(super) fn group_id(&self) -> Result<&str, Error> {
        self.cfg.group_id.as_deref().ok_or_else(|| Error::Config {
            key: "group_id".into(),
            detail: "this operation needs a consumer group (group_id is None)".into(),
        })
    }

    /// Keep metadata for these topics too (assignment, lookups).
    pub(super) fn want_topics(
        &self,
        st: &mut ConsumerCore,
        topics: impl IntoIterator<Item = String>,
    ) {
        let actions = st.want_topics(topics);
        let _ = self.apply(actions);
    }

    /// Carry out the core's actions (never under the state lock). The first
    /// metadata error is returned (`subscribe` reports an invalid topic).
    pub(super) fn apply(&self, actions: Vec<Action>) -> Result<(), Error> {
        let mut result = Ok(());
        for a in actions {
            match a {
                Action::Send(req) => {
                    self.outbox().requests.push(Outgoing::Core(*req));
                    self.wake();
                }
                Action::WakeApplication => self.data.notify_all(),
                Action::MetadataUpdate => {
                    self.metadata.request_update();
                }
                Action::MetadataUpdateForTopic(t) => {
                    self.metadata.request_update_for_topic(&t);
                }
                Action::MetadataUpdateForNewTopics => {
                    self.metadata.request_update_for_new_topics();
                    self.wake();
                }
                Action::MetadataTopics(topics) => {
                    if let Err(e) = self.metadata.set_subscription(topics) {
                        if result.is_ok() {
                            result = Err(e);
                        }
                    }
                }
            }
        }
        result
    }

    /// Apply a coordinator-related reaction to the membership (see
    /// `ConsumerCore::apply_coordinator_reaction`).
    pub(super) fn apply_coordinator_reaction(
        &self,
        r: Reaction,
        what: &str,
        sent: Option<&Generation>,
    ) {
        let actions = {
            let mut st = self.lock();
            st.apply_coordinator_reaction(r, what, sent, now_ms());
            st.take_actions()
        };
        let _ = self.apply(actions);
        self.wake();
    }

    /// Commit answer -> Ok, or (error, retriable). `latency`: since the
    /// OffsetCommit was handed over (commit-latency).
    pub(super) fn commit_result(
        &self,
        r: Result<(ResponseKind, i16), Error>,
        offsets: &BTreeMap<TopicPartition, OffsetAndMetadata>,
        sent: &Generation,
        latency: Duration,
    ) -> Result<(), (Error, bool)> {
        let cluster = self.metadata.fetch();
        let (result, actions) = {
            let mut st = self.lock();
            let result = st.commit_result(r, offsets, sent, &cluster, now_ms());
            st.record_commit(latency.as_secs_f64() * 1000.0, result.is_ok());
            (result, st.take_actions())
        };
        let _ = self.apply(actions);
        self.wake();
        result
    }
}

// ----- the consumer thread ------------------------------------------------------------

/// Answers that arrived during the last `poll`, for the core.
type Answers = Arc<Mutex<Vec<(Tag, Result<(ResponseKind, i16), Error>)>>>;

pub(super) fn run(inner: Arc<Inner>) {
    // Filled by the reply callbacks, which run inside `net.poll` on this
    // very thread: the mutex is never contended, it only makes the
    // callbacks `Send` as the network client requires.
    let answers: Answers = Arc::default();
    // Requests waiting for their node's connection.
    let mut pending: Vec<Pending> = Vec::new();
    loop {
        if inner.stop.load(Ordering::Acquire) {
            shut_down(&inner, pending, &answers);
            return;
        }
        let now = now_ms();
        let arrived = std::mem::take(&mut *answers.lock().unwrap_or_else(|p| p.into_inner()));
        for (tag, result) in arrived {
            // Decode before taking the state lock: this is the heavy part,
            // and the application's poll waits on that lock.
            let answer = prepare_answer(&inner.cfg, &tag, result, Some(&inner.pool));
            let actions = {
                let mut st = inner.lock();
                st.set_metadata(inner.metadata.update_version(), inner.metadata.fetch());
                st.on_prepared(tag, answer, now)
            };
            carry_out(&inner, actions, &answers, &mut pending, now);
        }
        let (actions, wake_at) = {
            let mut st = inner.lock();
            st.set_metadata(inner.metadata.update_version(), inner.metadata.fetch());
            st.step(now)
        };
        carry_out(&inner, actions, &answers, &mut pending, now);
        take_outbox(&inner, &answers, &mut pending, now);
        pending = pending
            .into_iter()
            .filter_map(|p| try_send(&inner.net, p, now))
            .collect();
        // Sleep until the core wants to decide again, an answer arrives, or
        // the application wakes us. Reply callbacks run in here.
        let wait = (wake_at - now_ms()).clamp(0, 100);
        inner.net.poll(Duration::from_millis(wait as u64));
    }
}

/// The actions of the core, on the consumer thread: sends are queued for
/// `try_send` right away (no outbox, no wakeup needed).
fn carry_out(
    inner: &Inner,
    actions: Vec<Action>,
    answers: &Answers,
    pending: &mut Vec<Pending>,
    now: i64,
) {
    let mut rest = Vec::new();
    for a in actions {
        match a {
            Action::Send(req) => queue_core_request(inner, *req, answers, pending, now),
            other => rest.push(other),
        }
    }
    let _ = inner.apply(rest);
}

fn queue_core_request(
    inner: &Inner,
    req: Request,
    answers: &Answers,
    pending: &mut Vec<Pending>,
    now: i64,
) {
    let Request {
        dest,
        body,
        opts,
        tag,
    } = req;
    let node = match dest {
        Dest::Node(n) => n,
        Dest::LeastLoaded => match inner.net.least_loaded_node(now) {
            Some(n) => n,
            None => {
                // docs/semantics.md §2.2: no node to ask. The request fails
                // (the core retries after its backoff) and the metadata
                // looks for brokers.
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

/// The application thread's requests, into `pending`.
fn take_outbox(inner: &Inner, answers: &Answers, pending: &mut Vec<Pending>, now: i64) {
    let queued = std::mem::take(&mut inner.outbox().requests);
    for o in queued {
        match o {
            Outgoing::Core(req) => queue_core_request(inner, req, answers, pending, now),
            Outgoing::App {
                node,
                body,
                opts,
                timeout_ms,
                reply,
            } => pending.push(Pending::new(node, body, opts, now + timeout_ms, reply)),
        }
    }
}

/// The consumer is closed. What was queued before (a LeaveGroup whose
/// answer `close` did not wait for) is sent if its node is ready: the
/// bytes go to the connection's writer at once, so the group rebalances
/// now instead of after session_timeout_ms. Everything else fails,
/// nothing more is accepted, and waiting application threads are woken.
fn shut_down(inner: &Inner, pending: Vec<Pending>, answers: &Answers) {
    inner.lock().closed = true;
    let now = now_ms();
    let mut pending = pending;
    take_outbox(inner, answers, &mut pending, now);
    let unsent: Vec<Pending> = pending
        .into_iter()
        .filter_map(|p| try_send(&inner.net, p, now))
        .collect();
    inner.outbox().closed = true;
    // Anything queued between the drain above and `closed` fails too.
    let mut late = Vec::new();
    take_outbox(inner, answers, &mut late, now);
    for p in unsent.into_iter().chain(late) {
        p.fail(Error::Closed { what: "consumer" });
    }
    inner.data.notify_all();
}

impl Requester for Inner {
    /// Send one request for the application thread: the consumer thread
    /// sends it (once its node is ready, waiting at most `ready_timeout_ms`
    /// for that) and the answer arrives at the returned [`Reply`]. `then`
    /// runs on the consumer thread right after the answer is queued (to
    /// wake a thread waiting on something else); it must be short and own
    /// nothing that owns this consumer.
    fn request(
        &self,
        node: Node,
        body: Body,
        opts: RequestOpts,
        ready_timeout_ms: i64,
        then: Option<Box<dyn FnOnce() + Send>>,
    ) -> Reply {
        let (reply, out) = Reply::pair(
            &opts,
            self.net.core().config().request_timeout_ms,
            ready_timeout_ms,
            then,
        );
        {
            let mut outbox = self.outbox();
            if outbox.closed {
                drop(outbox);
                reply(Err(Error::Closed { what: "consumer" }));
                return out;
            }
            outbox.requests.push(Outgoing::App {
                node,
                body,
                opts,
                timeout_ms: ready_timeout_ms,
                reply,
            });
        }
        self.wake();
        out
    }
}
