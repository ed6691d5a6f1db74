//! `Metadata` and `ProducerMetadata` for Python: thin wrappers over one
//! shared `Arc<ferrokafka_net::Metadata>` (which does its own locking, so
//! the classes are `frozen` and every method takes `&self`).
//!
//! Times: every `now_ms` argument is optional and defaults to the wall clock
//! in ms, so tests inject time and ordinary callers need not.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ferrokafka_net::metadata::{timeout_error, Metadata, MetadataConfig};
use ferrokafka_net::options::Client;
use ferrokafka_net::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PySet};

use crate::errors::{FkError, FkResult};
use crate::gil::wait_detached;
use crate::types::{extract_tp, PyCluster, PyMetadataResponse, PyNode, PyTopicPartition};

fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn now_or_wall(now_ms: Option<i64>) -> i64 {
    now_ms.unwrap_or_else(wall_ms)
}

/// Check the constructor options (keywords, plus a dict of dotted Java
/// names given positionally or as `config=`) against the option table as
/// `client` takes them. None means "not given" (the keyword defaults);
/// keywords override the dict.
fn metadata_config(
    py: Python<'_>,
    client: Client,
    config: Option<&Bound<'_, PyDict>>,
    kwargs: &Bound<'_, PyDict>,
) -> PyResult<(MetadataConfig, Option<i64>)> {
    let given = PyDict::new(py);
    for source in [config, Some(kwargs)].into_iter().flatten() {
        for (k, v) in source.iter() {
            if !v.is_none() {
                given.set_item(k, v)?;
            }
        }
    }
    let e = crate::config::effective(client, &given)?;
    let mcfg = e.metadata.ok_or_else(|| {
        PyValueError::new_err(format!("{} has no metadata config", client.name()))
    })?;
    Ok((mcfg, e.metadata_idle_ms))
}

/// Put the explicit keyword parameters into the kwargs dict so one code path
/// validates everything.
fn merge_kw<'py>(
    py: Python<'py>,
    kwargs: Option<&Bound<'py, PyDict>>,
    named: &[(&str, Option<Bound<'py, PyAny>>)],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in named {
        if let Some(v) = v {
            d.set_item(*k, v)?;
        }
    }
    if let Some(kw) = kwargs {
        for (k, v) in kw.iter() {
            if d.contains(&k)? {
                return Err(PyValueError::new_err(format!("option {k} given twice")));
            }
            d.set_item(k, v)?;
        }
    }
    Ok(d)
}

/// Cluster metadata state (docs/semantics.md §3): versions, refresh timing, the
/// cached `Cluster`. Keeps every topic; `ProducerMetadata` keeps only the
/// topics it is told to use.
#[pyclass(name = "Metadata", module = "ferrokafka", subclass, frozen)]
pub struct PyMetadata {
    pub inner: Arc<Metadata>,
}

#[pymethods]
impl PyMetadata {
    #[new]
    #[pyo3(
        signature = (refresh_backoff_ms=None, metadata_expire_ms=None, *, config=None, **kwargs),
        text_signature = "(refresh_backoff_ms=100, metadata_expire_ms=300000, *, config=None, **kwargs)"
    )]
    fn new<'py>(
        py: Python<'py>,
        refresh_backoff_ms: Option<Bound<'py, PyAny>>,
        metadata_expire_ms: Option<Bound<'py, PyAny>>,
        config: Option<Bound<'py, PyDict>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Self> {
        // Metadata({"retry.backoff.ms": ...}) works like config=.
        let (first, config) = split_dict_arg(refresh_backoff_ms, config)?;
        let kw = merge_kw(
            py,
            kwargs,
            &[
                ("refresh_backoff_ms", first),
                ("metadata_expire_ms", metadata_expire_ms),
            ],
        )?;
        let (mcfg, _) = metadata_config(py, Client::Metadata, config.as_ref(), &kw)?;
        let md = Metadata::new(mcfg).map_err(FkError)?;
        Ok(PyMetadata {
            inner: Arc::new(md),
        })
    }

    /// docs/semantics.md §3.1: seed brokers ("host:port" strings, or one
    /// comma-separated string), shuffled, ids -1, -2, ...
    fn bootstrap(&self, addresses: &Bound<'_, PyAny>) -> FkResult<()> {
        let list: Vec<String> = if let Ok(s) = addresses.extract::<String>() {
            vec![s]
        } else {
            addresses.extract().map_err(|_| {
                FkError(Error::Config {
                    key: "bootstrap_servers".into(),
                    detail: "expected a list of \"host:port\" strings".into(),
                })
            })?
        };
        self.inner.bootstrap(&list)?;
        Ok(())
    }

    /// docs/semantics.md §3.2. Returns update_version.
    fn request_update(&self) -> i32 {
        self.inner.request_update()
    }

    /// docs/semantics.md §3.3. Returns update_version.
    fn request_update_for_new_topics(&self) -> i32 {
        self.inner.request_update_for_new_topics()
    }

    /// docs/semantics.md §3.10. Returns update_version.
    fn request_update_for_topic(&self, topic: &str) -> i32 {
        self.inner.request_update_for_topic(topic)
    }

    /// docs/semantics.md §3.4, 3.5, 3.11.
    #[pyo3(signature = (request_version, response, is_partial_update=false, now_ms=None))]
    fn update(
        &self,
        py: Python<'_>,
        request_version: i32,
        response: PyRef<'_, PyMetadataResponse>,
        is_partial_update: bool,
        now_ms: Option<i64>,
    ) -> FkResult<()> {
        let now = now_or_wall(now_ms);
        let md = self.inner.clone();
        let resp = &response.inner;
        // Building the new snapshot is O(response); let other threads run.
        py.detach(|| md.update(request_version, resp, is_partial_update, now))?;
        Ok(())
    }

    /// A refresh attempt failed; back off (exponentially) before the next.
    #[pyo3(signature = (now_ms=None))]
    fn failed_update(&self, now_ms: Option<i64>) {
        self.inner.failed_update(now_or_wall(now_ms));
    }

    /// docs/semantics.md §3.9 (base Metadata keeps every topic: always True).
    #[pyo3(signature = (topic, is_internal=false, now_ms=None))]
    fn retain_topic(&self, topic: &str, is_internal: bool, now_ms: Option<i64>) -> bool {
        self.inner
            .retain_topic(topic, is_internal, now_or_wall(now_ms))
    }

    /// Ask for (and keep) only these topics; None = all topics (default).
    /// Not for ProducerMetadata (use add()). Returns update_version.
    #[pyo3(signature = (topics=None))]
    fn set_subscription(&self, topics: Option<Vec<String>>) -> FkResult<i32> {
        Ok(self.inner.set_subscription(topics)?)
    }

    /// The topics set with set_subscription (None = all topics).
    #[getter]
    fn subscription<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PySet>>> {
        self.inner
            .subscription()
            .map(|s| PySet::new(py, s))
            .transpose()
    }

    /// docs/semantics.md §3.6: the current snapshot, without blocking.
    fn fetch(&self) -> PyCluster {
        PyCluster::new(self.inner.fetch())
    }

    /// docs/semantics.md §3.7.
    fn update_requested(&self) -> bool {
        self.inner.update_requested()
    }

    /// docs/semantics.md §3.7: ms until the next update may go out (>= 0).
    #[pyo3(signature = (now_ms=None))]
    fn time_to_next_update(&self, now_ms: Option<i64>) -> i64 {
        self.inner.time_to_next_update(now_or_wall(now_ms))
    }

    /// What the next Metadata request asks for: `(topics, request_version,
    /// is_partial_update)`; `topics` None = all topics.
    #[pyo3(signature = (now_ms=None))]
    fn new_metadata_request(&self, now_ms: Option<i64>) -> (Option<Vec<String>>, i32, bool) {
        let (spec, v, partial) = self.inner.new_metadata_request(now_or_wall(now_ms));
        (spec.topics, v, partial)
    }

    /// docs/semantics.md §3.12: wait (GIL released) until `update_version >
    /// last_version`. Raises KafkaTimeoutError at the deadline (None = no
    /// deadline), KafkaClosedError after close(), a stored fatal error, and
    /// the topic error (invalid / unauthorized) of the new answer: for
    /// `topic` only when given, else for any topic in use.
    #[pyo3(signature = (last_version, timeout_ms=None, topic=None))]
    fn await_update(
        &self,
        py: Python<'_>,
        last_version: i32,
        timeout_ms: Option<i64>,
        topic: Option<String>,
    ) -> PyResult<()> {
        let timeout = timeout_ms.map(|t| Duration::from_millis(t.max(0) as u64));
        let md = self.inner.clone();
        let topic = topic.as_deref();
        let r = wait_detached(py, timeout, |slice| {
            md.await_update_step(last_version, topic, slice)
        })?;
        match r {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(FkError(e).into()),
            None => Err(FkError(timeout_error(timeout.unwrap_or_default())).into()),
        }
    }

    /// Wake every waiter with KafkaClosedError; later updates fail.
    fn close(&self) {
        self.inner.close();
    }

    fn is_closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// Store an error every `await_update` raises (once): e.g. an
    /// authentication failure seen by the network client.
    #[pyo3(signature = (error_code, message=None))]
    fn fatal_error(&self, error_code: i16, message: Option<String>) {
        self.inner.fatal_error(Error::broker(error_code, message));
    }

    /// The error (an exception instance) a send to `topic` must fail with,
    /// or None.
    fn error_for_topic(&self, py: Python<'_>, topic: &str) -> Option<Py<PyAny>> {
        self.inner
            .error_for_topic(topic)
            .map(|e| PyErr::from(FkError(e)).into_value(py).into_any())
    }

    /// Raise `error_for_topic(topic)` if there is one.
    fn maybe_throw_exception_for_topic(&self, topic: &str) -> FkResult<()> {
        match self.inner.error_for_topic(topic) {
            Some(e) => Err(FkError(e)),
            None => Ok(()),
        }
    }

    /// A request to the partition's leader failed with NOT_LEADER_OR_FOLLOWER
    /// / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: mark the leader unknown
    /// and request an update. Returns update_version.
    fn fail_partition_leader(&self, tp: &Bound<'_, PyAny>) -> PyResult<i32> {
        let tp = extract_tp(tp)?;
        Ok(self.inner.fail_partition_leader(&tp.topic, tp.partition))
    }

    /// KIP-951 leader hints from a Produce/Fetch answer: `{tp: (leader_id,
    /// leader_epoch)}` plus the leaders' nodes. Applies those newer than the
    /// cache; returns the set of TopicPartitions updated.
    #[pyo3(signature = (leaders, leader_nodes=Vec::new()))]
    fn update_partition_leadership<'py>(
        &self,
        py: Python<'py>,
        leaders: &Bound<'py, PyDict>,
        leader_nodes: Vec<PyNode>,
    ) -> PyResult<Bound<'py, PySet>> {
        let mut updates = Vec::with_capacity(leaders.len());
        for (k, v) in leaders.iter() {
            let (leader, epoch): (i32, i32) = v.extract()?;
            updates.push((extract_tp(&k)?, leader, epoch));
        }
        let nodes: Vec<_> = leader_nodes.into_iter().map(|n| n.inner).collect();
        let applied = self.inner.update_partition_leadership(&updates, &nodes);
        PySet::new(
            py,
            applied.into_iter().map(|tp| PyTopicPartition { inner: tp }),
        )
    }

    /// Any request's partition error code: True when it was a metadata error
    /// (leader marked unknown and/or update requested).
    fn handle_partition_error(&self, tp: &Bound<'_, PyAny>, error_code: i16) -> PyResult<bool> {
        let tp = extract_tp(tp)?;
        Ok(self
            .inner
            .handle_partition_error(&tp.topic, tp.partition, error_code))
    }

    /// Record a leader epoch seen elsewhere; True if newer than known.
    fn update_last_seen_epoch_if_newer(
        &self,
        tp: &Bound<'_, PyAny>,
        leader_epoch: i32,
    ) -> PyResult<bool> {
        let tp = extract_tp(tp)?;
        Ok(self
            .inner
            .update_last_seen_epoch_if_newer(&tp, leader_epoch))
    }

    fn last_seen_leader_epoch(&self, tp: &Bound<'_, PyAny>) -> PyResult<Option<i32>> {
        let tp = extract_tp(tp)?;
        Ok(self.inner.last_seen_leader_epoch(&tp))
    }

    #[getter]
    fn update_version(&self) -> i32 {
        self.inner.update_version()
    }
    #[getter]
    fn request_version(&self) -> i32 {
        self.inner.request_version()
    }
    #[getter]
    fn need_full_update(&self) -> bool {
        self.inner.need_full_update()
    }
    #[getter]
    fn need_partial_update(&self) -> bool {
        self.inner.need_partial_update()
    }
    #[getter]
    fn last_refresh_ms(&self) -> i64 {
        self.inner.last_refresh_ms()
    }
    #[getter]
    fn last_successful_refresh_ms(&self) -> i64 {
        self.inner.last_successful_refresh_ms()
    }
    #[getter]
    fn invalid_topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PySet>> {
        PySet::new(py, self.inner.invalid_topics())
    }
    #[getter]
    fn unauthorized_topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PySet>> {
        PySet::new(py, self.inner.unauthorized_topics())
    }
    #[getter]
    fn refresh_backoff_ms(&self) -> i64 {
        self.inner.config().refresh_backoff_ms
    }
    #[getter]
    fn refresh_backoff_max_ms(&self) -> i64 {
        self.inner.config().refresh_backoff_max_ms
    }
    #[getter]
    fn metadata_expire_ms(&self) -> i64 {
        self.inner.config().metadata_expire_ms
    }
    /// Consecutive failed refreshes since the last answer.
    #[getter]
    fn failed_attempts(&self) -> u32 {
        self.inner.failed_attempts()
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let name = slf.get_type().qualname()?;
        let md = &slf.get().inner;
        Ok(format!(
            "<{} update_version={} request_version={} need_full_update={} need_partial_update={}{}>",
            name,
            md.update_version(),
            md.request_version(),
            py_bool(md.need_full_update()),
            py_bool(md.need_partial_update()),
            if md.is_closed() { " closed" } else { "" }
        ))
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// (first positional option, config dict).
type FirstAndConfig<'py> = (Option<Bound<'py, PyAny>>, Option<Bound<'py, PyDict>>);

/// `Metadata({...})`: a dict in the first positional slot is the config dict.
fn split_dict_arg<'py>(
    first: Option<Bound<'py, PyAny>>,
    config: Option<Bound<'py, PyDict>>,
) -> PyResult<FirstAndConfig<'py>> {
    match first {
        Some(f) if f.is_instance_of::<PyDict>() => {
            if config.is_some() {
                return Err(PyValueError::new_err("config given twice"));
            }
            let d = f.cast_into::<PyDict>().map_err(PyErr::from)?;
            Ok((None, Some(d)))
        }
        other => Ok((other, config)),
    }
}

/// `Metadata` for a producer (docs/semantics.md §3.8-3.11): keeps only the topics
/// `add`ed, asks only for new ones in partial updates, forgets topics idle
/// for `metadata_idle_ms`.
#[pyclass(name = "ProducerMetadata", module = "ferrokafka", extends = PyMetadata, frozen)]
pub struct PyProducerMetadata {
    inner: Arc<Metadata>,
}

impl PyProducerMetadata {
    /// A Python view of a producer's live metadata (`Producer.metadata`).
    pub fn wrap(py: Python<'_>, md: Arc<Metadata>) -> PyResult<Py<PyProducerMetadata>> {
        let init = PyClassInitializer::from(PyMetadata { inner: md.clone() })
            .add_subclass(PyProducerMetadata { inner: md });
        Py::new(py, init)
    }
}

#[pymethods]
impl PyProducerMetadata {
    #[new]
    #[pyo3(
        signature = (refresh_backoff_ms=None, metadata_expire_ms=None, metadata_idle_ms=None, *, config=None, **kwargs),
        text_signature = "(refresh_backoff_ms=100, metadata_expire_ms=300000, metadata_idle_ms=300000, *, config=None, **kwargs)"
    )]
    fn new<'py>(
        py: Python<'py>,
        refresh_backoff_ms: Option<Bound<'py, PyAny>>,
        metadata_expire_ms: Option<Bound<'py, PyAny>>,
        metadata_idle_ms: Option<Bound<'py, PyAny>>,
        config: Option<Bound<'py, PyDict>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let (first, config) = split_dict_arg(refresh_backoff_ms, config)?;
        let kw = merge_kw(
            py,
            kwargs,
            &[
                ("refresh_backoff_ms", first),
                ("metadata_expire_ms", metadata_expire_ms),
                ("metadata_idle_ms", metadata_idle_ms),
            ],
        )?;
        let (mcfg, idle) = metadata_config(py, Client::ProducerMetadata, config.as_ref(), &kw)?;
        let idle = idle.ok_or_else(|| PyValueError::new_err("metadata_idle_ms missing"))?;
        let md = Arc::new(Metadata::new_producer(mcfg, idle).map_err(FkError)?);
        Ok(PyClassInitializer::from(PyMetadata { inner: md.clone() })
            .add_subclass(PyProducerMetadata { inner: md }))
    }

    /// docs/semantics.md §3.8: use `topic` (new: partial update requested; known:
    /// expiry pushed to now + metadata_idle_ms).
    #[pyo3(signature = (topic, now_ms=None))]
    fn add(&self, topic: &str, now_ms: Option<i64>) -> FkResult<()> {
        self.inner.add(topic, now_or_wall(now_ms))?;
        Ok(())
    }

    /// Topics not yet answered for.
    #[getter]
    fn new_topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PySet>> {
        PySet::new(py, self.inner.new_topics())
    }

    /// topic -> expiry time (ms).
    #[getter]
    fn topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (t, e) in self.inner.topics() {
            d.set_item(t, e)?;
        }
        Ok(d)
    }

    fn contains_topic(&self, topic: &str) -> bool {
        self.inner.contains_topic(topic)
    }

    #[getter]
    fn metadata_idle_ms(&self) -> i64 {
        self.inner.metadata_idle_ms().unwrap_or(0)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMetadata>()?;
    m.add_class::<PyProducerMetadata>()?;
    Ok(())
}
