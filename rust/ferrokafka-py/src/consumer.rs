//! `_Consumer`: the bindings of `ferrokafka_net::consumer::client::Consumer`,
//! plus `Message` and the Arrow batch `poll_arrow` returns.
//!
//! Records reach Python in one of two shapes, both built from the columnar
//! buffers the consumer thread decoded without the GIL: `Message` objects
//! (one per record, the only per-record cost being the key/value bytes
//! objects) or an Arrow struct array exported through the C Data Interface
//! (no Python object per record at all).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokafka_net::cluster::TopicPartition;
use ferrokafka_net::consumer::client::{Consumer, Polled, RebalanceEvent, RecordSlice};
use ferrokafka_net::consumer::records::RecordColumns;
use ferrokafka_net::consumer::requests::OffsetAndMetadata;
use ferrokafka_net::consumer::subscription::OffsetResetStrategy;
use ferrokafka_net::error::Error;
use ferrokafka_net::options::Client;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PyDict, PyList, PyString, PyTuple};

use crate::arrow::ExportedBatch;
use crate::arrow_stream::ArrowSlot;
use crate::errors::FkError;
use crate::gil::{interruptible, wait_detached};
use crate::types::{extract_tp, PyNode, PyTopicPartition};

// ----- Message -------------------------------------------------------------------------

/// Commit callbacks finished since the last poll: (commit id, the callback's
/// error object or None), handed to Python to run in the caller's thread.
type Completed = Vec<(u64, Option<Py<PyAny>>)>;
/// A committed offset and its metadata, or None when nothing was committed.
type CommittedOffset = Option<(i64, Option<String>)>;
/// An offset and its record's timestamp, or None when there is none.
type OffsetAndTimestamp = Option<(i64, i64)>;

/// One consumed record. Attributes: topic, partition, offset, key,
/// value, headers (list of (str, bytes | None)), timestamp_ms,
/// timestamp_type (0 CreateTime, 1 LogAppendTime, -1 none), leader_epoch,
/// delivery_count (share groups only: how often the broker delivered it).
#[pyclass(name = "Message", module = "ferrokafka", frozen)]
pub struct PyMessage {
    #[pyo3(get)]
    topic: Py<PyString>,
    #[pyo3(get)]
    partition: i32,
    #[pyo3(get)]
    offset: i64,
    #[pyo3(get)]
    key: Option<Py<PyBytes>>,
    #[pyo3(get)]
    value: Option<Py<PyBytes>>,
    #[pyo3(get)]
    timestamp_ms: i64,
    #[pyo3(get)]
    timestamp_type: i32,
    leader_epoch: i32,
    /// Set for records of a share group (KIP-932); None for the consumer's.
    #[pyo3(get)]
    delivery_count: Option<i16>,
    /// Built into a list on access: most applications never read headers,
    /// and an empty list per record would cost more than the record.
    cols: Arc<RecordColumns>,
    row: usize,
}

#[pymethods]
impl PyMessage {
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items: Vec<(Bound<'py, PyString>, Option<Bound<'py, PyBytes>>)> = self
            .cols
            .headers(self.row)
            .map(|(k, v)| {
                (
                    PyString::new(py, &String::from_utf8_lossy(k)),
                    v.map(|v| PyBytes::new(py, v)),
                )
            })
            .collect();
        PyList::new(py, items)
    }

    /// The record's timestamp in ms (the same as `timestamp_ms`).
    #[getter]
    fn timestamp(&self) -> i64 {
        self.timestamp_ms
    }

    /// None when the broker did not say (legacy formats).
    #[getter]
    fn leader_epoch(&self) -> Option<i32> {
        (self.leader_epoch >= 0).then_some(self.leader_epoch)
    }

    /// The error of this message: always None (errors are raised by poll);
    /// kept so confluent-kafka loops that check `msg.error()` keep working.
    fn error(&self) -> Option<Py<PyAny>> {
        None
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Message(topic={:?}, partition={}, offset={}, key={}, value={} bytes)",
            self.topic.bind(py).to_string(),
            self.partition,
            self.offset,
            match &self.key {
                Some(k) => format!("{} bytes", k.bind(py).as_bytes().len()),
                None => "None".into(),
            },
            self.value
                .as_ref()
                .map_or(0, |v| v.bind(py).as_bytes().len())
        )
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.value
            .as_ref()
            .map_or(0, |v| v.bind(py).as_bytes().len())
    }
}

/// A poll's records as runs of one partition, in order (a partition may
/// have two runs when its records came in two fetches).
type Runs = Vec<(PyTopicPartition, Vec<Py<PyMessage>>)>;

/// `ferrokafka.aio` buffers records per partition: handing them over grouped
/// spares it a `TopicPartition` and a lookup per record (docs/asyncio.md).
fn runs(py: Python<'_>, slices: Vec<RecordSlice>) -> PyResult<Runs> {
    let mut out = Vec::with_capacity(slices.len());
    for s in slices {
        let mut run = Vec::with_capacity(s.to - s.from);
        push_messages(py, &s, &mut run)?;
        out.push((PyTopicPartition { inner: s.tp }, run));
    }
    Ok(out)
}

fn messages(py: Python<'_>, slices: Vec<RecordSlice>) -> PyResult<Vec<Py<PyMessage>>> {
    let mut out = Vec::with_capacity(slices.iter().map(|s| s.to - s.from).sum());
    for s in &slices {
        push_messages(py, s, &mut out)?;
    }
    Ok(out)
}

/// The `Message`s of one slice, appended to `out` (one topic string shared
/// by all of them).
fn push_messages(py: Python<'_>, s: &RecordSlice, out: &mut Vec<Py<PyMessage>>) -> PyResult<()> {
    let topic = PyString::new(py, &s.tp.topic).unbind();
    for i in s.from..s.to {
        out.push(message(py, &topic, s.tp.partition, &s.cols, i, None)?);
    }
    Ok(())
}

/// One `Message` for row `i` of `cols` (the consumer's and the share
/// consumer's records alike).
pub(crate) fn message(
    py: Python<'_>,
    topic: &Py<PyString>,
    partition: i32,
    cols: &Arc<RecordColumns>,
    i: usize,
    delivery_count: Option<i16>,
) -> PyResult<Py<PyMessage>> {
    let c = cols;
    let m = Py::new(
        py,
        PyMessage {
            topic: topic.clone_ref(py),
            partition,
            offset: c.offsets[i],
            key: c.keys.get(i).map(|k| PyBytes::new(py, k).unbind()),
            value: c.values.get(i).map(|v| PyBytes::new(py, v).unbind()),
            timestamp_ms: c.timestamps[i],
            timestamp_type: c.timestamp_types[i],
            leader_epoch: c.leader_epochs[i],
            delivery_count,
            cols: cols.clone(),
            row: i,
        },
    )?;
    // A frozen Message refers only to str and bytes objects (no
    // containers), so it can never be part of a reference cycle;
    // yet pyo3 makes it a GC type, and the collector walked every
    // Message an application held on to: a third of poll()'s CPU
    // went to collections. Untracked, it is freed by reference
    // counting exactly as before.
    // SAFETY: a live object of a GC type; untracking an object twice
    // (its dealloc does it again) is allowed.
    unsafe { pyo3::ffi::PyObject_GC_UnTrack(m.as_ptr().cast()) };
    Ok(m)
}

// ----- _Consumer ---------------------------------------------------------------------

type EventList = Vec<(&'static str, Vec<PyTopicPartition>)>;
/// A poll's records as one batch to export, and its row count.
type Gathered = (ExportedBatch, usize);

#[pyclass(module = "ferrokafka._core", name = "_Consumer")]
pub struct PyConsumer {
    inner: Mutex<Option<Arc<Consumer>>>,
    /// The batch `poll_arrow_next` built, for the consumer's Arrow stream
    /// (`arrow_stream.rs`).
    arrow_slot: Arc<ArrowSlot>,
    /// This client's id in its log records (`logbridge.rs`).
    #[pyo3(get, name = "_log_id")]
    log_id: u64,
}

impl PyConsumer {
    fn core(&self) -> PyResult<Arc<Consumer>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| FkError(Error::Closed { what: "consumer" }).into())
    }

    /// One poll of the core, split as every poll method returns it: the
    /// events, the records (as the core's slices), the commit outcomes.
    fn poll_parts(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
        arrow: bool,
    ) -> PyResult<(EventList, Vec<RecordSlice>, Completed)> {
        let core = self.core()?;
        let mut p = poll_core(py, &core, timeout_ms, max_records.max(1), arrow)?;
        let events = events_of(&mut p);
        let commits = commits_of(py, &mut p);
        Ok((events, std::mem::take(&mut p.records), commits))
    }

    /// A poll's records gathered into one batch to export (built without
    /// the GIL) and its row count; `None` when there were none.
    fn poll_exported(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
    ) -> PyResult<(EventList, Option<Gathered>, Completed)> {
        let (events, slices, commits) = self.poll_parts(py, timeout_ms, max_records, true)?;
        let batch =
            (!slices.is_empty()).then(|| py.detach(move || ArrowBatch::gather_exported(slices)));
        Ok((events, batch, commits))
    }
}

fn tps(v: Vec<TopicPartition>) -> Vec<PyTopicPartition> {
    v.into_iter()
        .map(|inner| PyTopicPartition { inner })
        .collect()
}

fn extract_tps(obj: &Bound<'_, PyAny>) -> PyResult<Vec<TopicPartition>> {
    obj.try_iter()?.map(|o| extract_tp(&o?)).collect()
}

fn ms(timeout_ms: i64) -> Duration {
    Duration::from_millis(timeout_ms.max(0) as u64)
}

/// Split a poll into (events, records, commit outcomes) for Python.
fn events_of(p: &mut Polled) -> EventList {
    p.events
        .drain(..)
        .map(|e| match e {
            RebalanceEvent::Revoked(v) => ("revoked", tps(v)),
            RebalanceEvent::Assigned(v) => ("assigned", tps(v)),
            RebalanceEvent::Lost(v) => ("lost", tps(v)),
        })
        .collect()
}

fn commits_of(py: Python<'_>, p: &mut Polled) -> Vec<(u64, Option<Py<PyAny>>)> {
    p.commits
        .drain(..)
        .map(|(t, r)| {
            (
                t,
                r.err().map(|e| {
                    let e: PyErr = FkError(e).into();
                    e.into_value(py).into_any()
                }),
            )
        })
        .collect()
}

fn poll_core(
    py: Python<'_>,
    core: &Arc<Consumer>,
    timeout_ms: i64,
    max_records: usize,
    arrow: bool,
) -> PyResult<Polled> {
    interruptible(py, |interrupted| {
        if arrow {
            core.poll_for_arrow(max_records, ms(timeout_ms), interrupted)
        } else {
            core.poll(max_records, ms(timeout_ms), interrupted)
        }
    })?
    .map_err(|e| FkError(e).into())
}

#[pymethods]
impl PyConsumer {
    /// `cfg`: the validated options (snake_case keys) from consumer.py.
    #[new]
    fn new(cfg: &Bound<'_, PyDict>) -> PyResult<Self> {
        crate::logbridge::refresh_level(cfg.py());
        let e = crate::config::effective(Client::Consumer, cfg)?;
        let ccfg = e
            .consumer
            .clone()
            .ok_or_else(|| PyValueError::new_err("not a consumer configuration"))?;
        let (md, net) = crate::config::metadata_and_network(&e)?;
        let log_id = crate::logbridge::client_log_id(&net);
        let consumer = Consumer::new(ccfg, md, net).map_err(FkError)?;
        Ok(PyConsumer {
            inner: Mutex::new(Some(Arc::new(consumer))),
            arrow_slot: Arc::default(),
            log_id,
        })
    }

    fn subscribe(&self, topics: Vec<String>) -> PyResult<()> {
        self.core()?
            .subscribe(topics)
            .map_err(|e| FkError(e).into())
    }

    fn subscribe_pattern(&self, pattern: &str) -> PyResult<()> {
        self.core()?
            .subscribe_pattern(pattern)
            .map_err(|e| FkError(e).into())
    }

    fn assign(&self, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = extract_tps(partitions)?;
        self.core()?.assign(v).map_err(|e| FkError(e).into())
    }

    fn unsubscribe(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.core()?;
        interruptible(py, |interrupted| core.unsubscribe(interrupted))?
            .map_err(|e| FkError(e).into())
    }

    fn assignment(&self) -> PyResult<Vec<PyTopicPartition>> {
        Ok(tps(self.core()?.assignment()))
    }

    fn subscription(&self) -> PyResult<Vec<String>> {
        Ok(self.core()?.subscription())
    }

    /// -> (events, messages, commit outcomes). Events come alone; the caller
    /// runs the callbacks and then calls `ack_events`.
    #[pyo3(signature = (timeout_ms=0, max_records=500))]
    fn poll(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
    ) -> PyResult<(EventList, Vec<Py<PyMessage>>, Completed)> {
        let (events, records, commits) = self.poll_parts(py, timeout_ms, max_records, false)?;
        Ok((events, messages(py, records)?, commits))
    }

    /// Like `poll`, with the records in runs of one partition:
    /// (events, [(TopicPartition, [Message])], commit outcomes).
    #[pyo3(signature = (timeout_ms=0, max_records=500))]
    fn poll_runs(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
    ) -> PyResult<(EventList, Runs, Completed)> {
        let (events, records, commits) = self.poll_parts(py, timeout_ms, max_records, false)?;
        Ok((events, runs(py, records)?, commits))
    }

    /// Like `poll`, with the records as one Arrow batch (an object with
    /// `__arrow_c_array__`), or None when there are none.
    #[pyo3(signature = (timeout_ms=0, max_records=100_000))]
    fn poll_arrow(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
    ) -> PyResult<(EventList, Option<ArrowBatch>, Completed)> {
        let (events, batch, commits) = self.poll_exported(py, timeout_ms, max_records)?;
        // An empty poll gives an empty batch built here too: pyarrow's own
        // ways to make one import pandas the first time (0.3 s of CPU).
        let batch = batch.unwrap_or_else(|| (ExportedBatch::empty(), 0));
        Ok((events, Some(ArrowBatch::of(batch)), commits))
    }

    /// `poll_arrow` for the consumer's Arrow stream (`arrow_stream`): the
    /// batch is left for the stream's next `get_next` instead of returned;
    /// the row count comes back in its place.
    #[pyo3(signature = (timeout_ms=0, max_records=100_000))]
    fn poll_arrow_next(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
    ) -> PyResult<(EventList, usize, Completed)> {
        let (events, batch, commits) = self.poll_exported(py, timeout_ms, max_records)?;
        let rows = batch.as_ref().map_or(0, |(_, n)| *n);
        self.arrow_slot.put(batch.map(|(b, _)| b));
        Ok((events, rows, commits))
    }

    /// An `arrow_array_stream` capsule whose batches are what
    /// `poll_arrow_next` leaves (an empty batch when it left none). Each
    /// call makes a new stream over the same slot.
    fn arrow_stream<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        crate::arrow_stream::stream_capsule(py, self.arrow_slot.clone())
    }

    fn ack_events(&self) -> PyResult<()> {
        self.core()?.ack_events();
        Ok(())
    }

    fn seek(&self, tp: &Bound<'_, PyAny>, offset: i64) -> PyResult<()> {
        self.core()?
            .seek(&extract_tp(tp)?, offset)
            .map_err(|e| FkError(e).into())
    }

    #[pyo3(signature = (partitions=None, to_end=false))]
    fn seek_to(&self, partitions: Option<&Bound<'_, PyAny>>, to_end: bool) -> PyResult<()> {
        let v = partitions.map(extract_tps).transpose()?;
        let s = if to_end {
            OffsetResetStrategy::Latest
        } else {
            OffsetResetStrategy::Earliest
        };
        self.core()?.seek_to(v, s).map_err(|e| FkError(e).into())
    }

    fn position(&self, py: Python<'_>, tp: &Bound<'_, PyAny>, timeout_ms: i64) -> PyResult<i64> {
        let core = self.core()?;
        let tp = extract_tp(tp)?;
        interruptible(py, |interrupted| {
            core.position(&tp, ms(timeout_ms), interrupted)
        })?
        .map_err(|e| FkError(e).into())
    }

    fn pause(&self, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        self.core()?
            .pause(&extract_tps(partitions)?)
            .map_err(|e| FkError(e).into())
    }

    fn resume(&self, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        self.core()?
            .resume(&extract_tps(partitions)?)
            .map_err(|e| FkError(e).into())
    }

    fn paused(&self) -> PyResult<Vec<PyTopicPartition>> {
        Ok(tps(self.core()?.paused()))
    }

    /// (log start, high watermark) from the last fetch; None if not assigned.
    fn watermarks(&self, tp: &Bound<'_, PyAny>) -> PyResult<Option<(i64, i64)>> {
        Ok(self.core()?.watermarks(&extract_tp(tp)?))
    }

    /// [(name, value)] with Java's metric names (docs/metrics.md).
    fn metrics(&self) -> PyResult<Vec<(String, f64)>> {
        Ok(self.core()?.metrics())
    }

    /// [(tp, lag)] from the last fetch high watermark; no request.
    fn lag(&self) -> PyResult<Vec<(PyTopicPartition, i64)>> {
        Ok(self
            .core()?
            .lag()
            .into_iter()
            .map(|(inner, l)| (PyTopicPartition { inner }, l))
            .collect())
    }

    /// `offsets`: None (consumed positions) or {tp: offset | (offset, metadata)}.
    #[pyo3(signature = (offsets=None, asynchronous=false, token=0, timeout_ms=60_000))]
    fn commit(
        &self,
        py: Python<'_>,
        offsets: Option<&Bound<'_, PyDict>>,
        asynchronous: bool,
        token: u64,
        timeout_ms: i64,
    ) -> PyResult<()> {
        let core = self.core()?;
        let offsets = match offsets {
            None => None,
            Some(d) => {
                let mut m = BTreeMap::new();
                for (k, v) in d.iter() {
                    let tp = extract_tp(&k)?;
                    let (offset, metadata) = match v.extract::<i64>() {
                        Ok(o) => (o, None),
                        Err(_) => v.extract::<(i64, Option<String>)>()?,
                    };
                    if offset < 0 {
                        return Err(PyValueError::new_err(format!(
                            "invalid offset {offset} for {}-{}: must be >= 0",
                            tp.topic, tp.partition
                        )));
                    }
                    m.insert(
                        tp,
                        OffsetAndMetadata {
                            offset,
                            leader_epoch: -1,
                            metadata,
                        },
                    );
                }
                Some(m)
            }
        };
        if asynchronous {
            return core
                .commit_async(offsets, token)
                .map_err(|e| FkError(e).into());
        }
        interruptible(py, |interrupted| {
            core.commit_sync(offsets, ms(timeout_ms), interrupted)
        })?
        .map_err(|e| FkError(e).into())
    }

    /// {tp: (offset, metadata) | None}
    fn committed(
        &self,
        py: Python<'_>,
        partitions: &Bound<'_, PyAny>,
        timeout_ms: i64,
    ) -> PyResult<Vec<(PyTopicPartition, CommittedOffset)>> {
        let core = self.core()?;
        let v = extract_tps(partitions)?;
        let r = interruptible(py, |interrupted| {
            core.committed(&v, ms(timeout_ms), interrupted)
        })?
        .map_err(FkError)?;
        Ok(r.into_iter()
            .map(|(tp, o)| {
                (
                    PyTopicPartition { inner: tp },
                    o.map(|o| (o.offset, o.metadata)),
                )
            })
            .collect())
    }

    /// ListOffsets: [(tp, timestamp)] -> [(tp, (offset, timestamp) | None)].
    fn list_offsets(
        &self,
        py: Python<'_>,
        query: Vec<(Bound<'_, PyAny>, i64)>,
        timeout_ms: i64,
    ) -> PyResult<Vec<(PyTopicPartition, OffsetAndTimestamp)>> {
        let core = self.core()?;
        let q: Vec<(TopicPartition, i64)> = query
            .iter()
            .map(|(tp, ts)| Ok((extract_tp(tp)?, *ts)))
            .collect::<PyResult<_>>()?;
        let r = interruptible(py, |interrupted| {
            core.list_offsets(&q, ms(timeout_ms), interrupted)
        })?
        .map_err(FkError)?;
        Ok(r.into_iter()
            .map(|(tp, o)| (PyTopicPartition { inner: tp }, o))
            .collect())
    }

    fn ensure_coordinator_ready(&self, py: Python<'_>, timeout_ms: i64) -> PyResult<bool> {
        let core = self.core()?;
        match interruptible(py, |interrupted| {
            core.ensure_coordinator_ready(ms(timeout_ms), interrupted)
        })? {
            Ok(_) => Ok(true),
            Err(Error::Timeout { .. }) => Ok(false),
            Err(e) => Err(FkError(e).into()),
        }
    }

    fn coordinator(&self) -> PyResult<Option<PyNode>> {
        Ok(self.core()?.coordinator().as_ref().map(PyNode::from))
    }

    fn mark_coordinator_unknown(&self, reason: &str) -> PyResult<()> {
        self.core()?.mark_coordinator_unknown(reason);
        Ok(())
    }

    /// (generation id, member id, protocol name, member state)
    fn generation(&self) -> PyResult<(i32, String, Option<String>, &'static str)> {
        Ok(self.core()?.generation())
    }

    /// Topic -> partition count from the consumer's metadata (all topics
    /// after a pattern subscription); `refresh` waits for a fresh update.
    /// `strict`: raise KafkaTimeoutError (naming the last connection error)
    /// when no fresh answer came in `timeout_ms`, instead of returning what
    /// is cached (list_topics is strict; a pattern subscription is not).
    #[pyo3(signature = (refresh=false, timeout_ms=10_000, strict=false))]
    fn topics(
        &self,
        py: Python<'_>,
        refresh: bool,
        timeout_ms: i64,
        strict: bool,
    ) -> PyResult<(i32, Vec<(String, usize)>)> {
        let core = self.core()?;
        let md = core.metadata().clone();
        if refresh {
            let md2 = md.clone();
            // The answer must cover the topic set as it is now: right after
            // construction the first request (for no topics) may still be in
            // flight when `watch_all_topics` widened it (docs/semantics.md
            // §3.13); its answer once made a Spark read plan no partitions.
            let want = md.request_version();
            let mut v = md.request_update();
            let r = wait_detached(py, Some(ms(timeout_ms)), move |slice| {
                md2.await_covering_update_step(&mut v, want, slice)
            })?;
            match r {
                Some(Ok(())) => {}
                Some(Err(e)) if strict => return Err(FkError(e).into()),
                None if strict => {
                    return Err(FkError(Error::Timeout {
                        what: format!("listing topics{}", md.connection_error_hint()),
                        timeout_ms: timeout_ms.max(0) as u64,
                    })
                    .into())
                }
                _ => {}
            }
        }
        let cluster = md.fetch();
        let topics = cluster.user_topic_partition_counts().into_iter().collect();
        Ok((md.update_version(), topics))
    }

    /// Follow every topic (pattern subscriptions read the full topic list).
    fn watch_all_topics(&self) -> PyResult<()> {
        self.core()?
            .metadata()
            .set_subscription(None)
            .map(|_| ())
            .map_err(|e| FkError(e).into())
    }

    /// Error events for `error_cb` since the last call, oldest first:
    /// (librdkafka local code, message). Also hands queued log records to
    /// Python logging (this runs in the application's poll).
    fn take_errors(&self, py: Python<'_>) -> Vec<(i16, String)> {
        crate::logbridge::drain(py);
        match self.core() {
            Ok(c) => c.metadata().take_client_errors(),
            Err(_) => Vec::new(),
        }
    }

    fn metadata(&self, py: Python<'_>) -> PyResult<Py<crate::metadata::PyMetadata>> {
        Py::new(
            py,
            crate::metadata::PyMetadata {
                inner: self.core()?.metadata().clone(),
            },
        )
    }

    #[pyo3(signature = (timeout_ms=30_000))]
    fn close(&self, py: Python<'_>, timeout_ms: i64) -> PyResult<()> {
        let core = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(core) = core else { return Ok(()) };
        interruptible(py, move |interrupted| {
            let r = core.close(ms(timeout_ms), interrupted);
            // Joining the threads happens when the last Arc goes, here,
            // without the GIL (the consumer thread may be waiting for it).
            drop(core);
            r
        })?
        .map_err(|e| FkError(e).into())
    }
}

// ----- Arrow export ------------------------------------------------------------------

/// One `poll_arrow` result: the columns of Spark's Kafka source, owned by
/// Rust until a consumer (pyarrow, polars, ...) imports them through
/// `__arrow_c_array__`, after which the buffers are shared, not copied.
#[pyclass(module = "ferrokafka._core", name = "ArrowBatch")]
pub struct ArrowBatch {
    parts: Mutex<Option<crate::arrow::ExportedBatch>>,
    #[pyo3(get)]
    num_rows: usize,
}

impl ArrowBatch {
    pub(crate) fn gather(slices: Vec<RecordSlice>) -> ArrowBatch {
        ArrowBatch::of(ArrowBatch::gather_exported(slices))
    }

    fn of((batch, n): Gathered) -> ArrowBatch {
        ArrowBatch {
            parts: Mutex::new(Some(batch)),
            num_rows: n,
        }
    }

    /// The slices as one batch to export, and its row count.
    pub(crate) fn gather_exported(mut slices: Vec<RecordSlice>) -> Gathered {
        let n: usize = slices.iter().map(|s| s.to - s.from).sum();
        // One whole fetched run that nobody else holds (the common case when
        // the application keeps up): its columns become the batch as they
        // are, without the copy below.
        if slices.len() == 1 && slices[0].from == 0 && slices[0].to == slices[0].cols.len() {
            let s = slices.pop().expect("one slice");
            match Arc::try_unwrap(s.cols) {
                Ok(cols) => {
                    let runs = [(s.tp.topic.clone(), s.tp.partition, n)];
                    return (ExportedBatch::new(cols, &runs), n);
                }
                Err(cols) => slices.push(RecordSlice { cols, ..s }),
            }
        }
        let bytes: usize = slices
            .iter()
            .map(|s| (s.cols.values.offsets[s.to] - s.cols.values.offsets[s.from]) as usize)
            .sum();
        // From the consumer's column pool (all slices share it), as the
        // runs it copies go back there as they are dropped.
        let pool = slices.first().and_then(|s| s.cols.pool.clone());
        let mut cols = RecordColumns::with_capacity(pool.as_ref(), n, bytes);
        let mut runs = Vec::with_capacity(slices.len());
        for s in &slices {
            cols.extend_range(&s.cols, s.from, s.to);
            runs.push((s.tp.topic.clone(), s.tp.partition, s.to - s.from));
        }
        (ExportedBatch::new(cols, &runs), n)
    }
}

#[pymethods]
impl ArrowBatch {
    /// Arrow PyCapsule interface: (schema capsule, array capsule) of a
    /// struct array. Single use: the buffers move to the importer.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Py<PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema;
        let b = self
            .parts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| PyValueError::new_err("this ArrowBatch was already imported"))?;
        b.into_capsules(py)
    }

    fn __len__(&self) -> usize {
        self.num_rows
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyConsumer>()?;
    m.add_class::<PyMessage>()?;
    m.add_class::<ArrowBatch>()
}
