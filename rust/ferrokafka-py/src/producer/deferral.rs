//! `send(block=False)` records that could not be appended at once (metadata
//! unknown, buffer full): copied out of Python and appended, in call order,
//! by the producer's deferral thread, which may wait where the caller's
//! thread (an event loop) must not.

use super::*;

/// A record's key and value, copied out of Python for a deferred append.
type OwnedKeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A record (or the tail of a `send_batch` call) that `send(block=False)`
/// could not enqueue at once: copied out of the caller's buffers and
/// enqueued by the producer's deferral thread, which may wait for metadata
/// or buffer memory until the call's own `max_block_ms` deadline.
pub(super) enum Deferred {
    One {
        topic: String,
        partition: Option<i32>,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
        headers: Vec<(String, Option<Vec<u8>>)>,
        timestamp_ms: Option<i64>,
        completion: PyCompletion,
        deadline: Instant,
        bytes: usize,
    },
    Many {
        topic: String,
        partition: Option<i32>,
        records: Vec<OwnedKeyValue>,
        completions: Vec<PyCompletion>,
        deadline: Instant,
        bytes: usize,
    },
}

/// Shared between the producer binding and its deferral thread.
#[derive(Default)]
pub(super) struct DeferState {
    /// The payload bytes of the items handed over and not yet finished,
    /// held outside `buffer_memory`; bounded by it.
    pub(super) bytes: AtomicUsize,
    /// Set on close/drop: waits end, what is left fails with "closed".
    pub(super) stop: AtomicBool,
    /// Items handed to the thread so far, and items it finished (enqueued
    /// or failed): the thread numbers its items in the order they come
    /// (the channel's); the difference is what it still holds (`queued`).
    pub(super) handed: AtomicU64,
    pub(super) finished: AtomicU64,
    /// `purge(in_queue)`: items numbered below this fail with
    /// `Purged { in_flight: false }` (one waiting for metadata or memory
    /// stops waiting).
    pub(super) purge_below: AtomicU64,
}

impl DeferState {
    /// Items handed over and not yet finished by the thread.
    pub(super) fn queued(&self) -> u64 {
        // `finished` first: an item finished between the two reads then
        // counts as still queued, never as less than none.
        let finished = self.finished.load(Ordering::Acquire);
        self.handed.load(Ordering::Acquire).saturating_sub(finished)
    }

    /// Purge every item handed over so far; with `wait`, return once the
    /// thread is past them (each fails at once, or stops its wait within
    /// the wait's check interval), or after `limit`.
    pub(super) fn purge(&self, wait: bool, limit: Duration) {
        let upto = self.handed.load(Ordering::Acquire);
        self.purge_below.fetch_max(upto, Ordering::AcqRel);
        let until = Instant::now() + limit;
        while wait && self.finished.load(Ordering::Acquire) < upto && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

pub(super) struct Deferral {
    tx: mpsc::Sender<Deferred>,
    state: Arc<DeferState>,
    thread: Option<JoinHandle<()>>,
}

fn run_deferral(core: Arc<CoreProducer>, rx: mpsc::Receiver<Deferred>, st: Arc<DeferState>) {
    let mut number: u64 = 0;
    // Drains what is left after the sender side is gone, failing it (stop
    // is set before the channel is dropped).
    while let Ok(item) = rx.recv() {
        let mine = number;
        number += 1;
        let purged = || st.purge_below.load(Ordering::Acquire) > mine;
        let stopped = || st.stop.load(Ordering::Acquire) || purged();
        let closed = || {
            if purged() {
                Error::Purged { in_flight: false }
            } else {
                Error::Closed { what: "producer" }
            }
        };
        let fix = |e: Error| {
            if matches!(e, Error::Interrupted) {
                closed()
            } else {
                e
            }
        };
        match item {
            Deferred::One {
                topic,
                partition,
                key,
                value,
                headers,
                timestamp_ms,
                completion,
                deadline,
                bytes,
            } => {
                let r = if stopped() {
                    Err((closed(), completion))
                } else {
                    let hs: Vec<(&str, Option<&[u8]>)> = headers
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_deref()))
                        .collect();
                    core.send_until(
                        Outgoing {
                            topic: &topic,
                            partition,
                            key: key.as_deref(),
                            value: value.as_deref(),
                            headers: &hs,
                            timestamp_ms,
                        },
                        completion,
                        deadline,
                        &stopped,
                    )
                };
                if let Err((e, c)) = r {
                    c.complete(Err(fix(e)));
                }
                st.bytes.fetch_sub(bytes, Ordering::AcqRel);
            }
            Deferred::Many {
                topic,
                partition,
                records,
                completions,
                deadline,
                bytes,
            } => {
                let mut completions: Vec<Option<PyCompletion>> =
                    completions.into_iter().map(Some).collect();
                let failed = if stopped() {
                    completions
                        .iter_mut()
                        .filter_map(|c| c.take().map(|c| (closed(), c)))
                        .collect()
                } else {
                    core.send_many_until(
                        &topic,
                        partition,
                        records.len(),
                        |i| (records[i].0.as_deref(), records[i].1.as_deref()),
                        |i| {
                            completions[i]
                                .take()
                                .expect("each record's completion is taken once")
                        },
                        // Each record has its completion already.
                        None,
                        deadline,
                        &stopped,
                    )
                };
                for (e, c) in failed {
                    c.complete(Err(fix(e)));
                }
                st.bytes.fetch_sub(bytes, Ordering::AcqRel);
            }
        }
        st.finished.fetch_add(1, Ordering::AcqRel);
    }
}

impl PyProducer {
    /// Hand `item` to the deferral thread (started on first use). Fails the
    /// item's records at once when the deferred bytes would exceed
    /// `buffer_memory` (the bound a blocking send has too).
    pub(super) fn defer(&self, core: &Arc<CoreProducer>, item: Deferred) {
        let bytes = match &item {
            Deferred::One { bytes, .. } | Deferred::Many { bytes, .. } => *bytes,
        };
        let st = &self.defer_state;
        let held = st.bytes.fetch_add(bytes, Ordering::AcqRel);
        if held > 0 && held + bytes > self.buffer_memory {
            st.bytes.fetch_sub(bytes, Ordering::AcqRel);
            let e = Error::Timeout {
                what: format!(
                    "send(block=False): {held} bytes already wait for metadata or memory \
                     and buffer_memory is {}; send with block=True or raise buffer_memory",
                    self.buffer_memory
                ),
                timeout_ms: 0,
            };
            fail_deferred(item, e);
            return;
        }
        let mut d = self.deferral.lock().unwrap_or_else(|p| p.into_inner());
        if d.is_none() {
            let (tx, rx) = mpsc::channel();
            let (c, s) = (core.clone(), st.clone());
            match std::thread::Builder::new()
                .name("ferrokafka-deferred".into())
                .spawn(move || run_deferral(c, rx, s))
            {
                Ok(t) => {
                    *d = Some(Deferral {
                        tx,
                        state: st.clone(),
                        thread: Some(t),
                    })
                }
                Err(e) => {
                    st.bytes.fetch_sub(bytes, Ordering::AcqRel);
                    fail_deferred(
                        item,
                        Error::State {
                            detail: format!("cannot start the producer's deferral thread: {e}"),
                        },
                    );
                    return;
                }
            }
        }
        let dd = d.as_ref().expect("started above");
        // Numbered under the `deferral` lock, in the channel's order.
        dd.state.handed.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::SendError(item)) = dd.tx.send(item) {
            dd.state.handed.fetch_sub(1, Ordering::AcqRel);
            st.bytes.fetch_sub(bytes, Ordering::AcqRel);
            fail_deferred(item, Error::Closed { what: "producer" });
        }
    }

    /// Stop the deferral thread: what it still holds fails with "closed".
    /// `join` waits for it (close); Drop does not (it may run on any thread).
    pub(super) fn stop_deferral(&self, join: bool) -> Option<JoinHandle<()>> {
        self.defer_state.stop.store(true, Ordering::Release);
        let d = self
            .deferral
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let mut t = d.and_then(|mut d| d.thread.take());
        if join {
            if let Some(t) = t.take() {
                let _ = t.join();
            }
        }
        t
    }
}

fn fail_deferred(item: Deferred, e: Error) {
    match item {
        Deferred::One { completion, .. } => completion.complete(Err(e)),
        Deferred::Many { completions, .. } => {
            for c in completions {
                c.complete(Err(e.clone()));
            }
        }
    }
}

pub(super) fn flush_step(core: &CoreProducer, deferred: &DeferState, slice: Duration) -> bool {
    if deferred.queued() > 0 {
        std::thread::sleep(slice.min(Duration::from_millis(5)));
        return false;
    }
    core.flush_step(slice) == 0 && deferred.queued() == 0
}
