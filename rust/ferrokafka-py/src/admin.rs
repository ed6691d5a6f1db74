//! `_Admin`: bindings of `ferrokafka_net::admin::client::AdminClient`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokafka_net::admin::client::AdminClient;
use ferrokafka_net::admin::NewTopic;
use ferrokafka_net::error::Error;
use ferrokafka_net::options::Client;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::FkError;
use crate::gil::interruptible;
use crate::types::{PyNode, PyTopicPartition};

/// (name, partitions, replication factor, [(config key, value)]).
type NewTopicSpec = (String, i32, i16, Vec<(String, String)>);

#[pyclass(module = "ferrokafka._core", name = "_Admin")]
pub struct PyAdmin {
    inner: Mutex<Option<Arc<AdminClient>>>,
    /// This client's id in its log records (`logbridge.rs`).
    #[pyo3(get, name = "_log_id")]
    log_id: u64,
}

impl PyAdmin {
    fn core(&self) -> PyResult<Arc<AdminClient>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                FkError(Error::Closed {
                    what: "admin client",
                })
                .into()
            })
    }
}

fn ms(t: i64) -> Duration {
    Duration::from_millis(t.max(0) as u64)
}

type TopicResults = Vec<(String, Option<Py<PyAny>>)>;

fn results(
    py: Python<'_>,
    r: std::collections::BTreeMap<String, Result<(), Error>>,
) -> TopicResults {
    r.into_iter()
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

#[pymethods]
impl PyAdmin {
    #[new]
    fn new(cfg: &Bound<'_, PyDict>) -> PyResult<Self> {
        crate::logbridge::refresh_level(cfg.py());
        let e = crate::config::effective(Client::Admin, cfg)?;
        let acfg = e
            .admin
            .clone()
            .ok_or_else(|| PyValueError::new_err("not an admin configuration"))?;
        let (md, net) = crate::config::metadata_and_network(&e)?;
        let log_id = crate::logbridge::client_log_id(&net);
        Ok(PyAdmin {
            inner: Mutex::new(Some(Arc::new(AdminClient::new(acfg, md, net)))),
            log_id,
        })
    }

    /// topics: [(name, partitions, replication, [(key, value)])] -> [(name, error | None)]
    fn create_topics(
        &self,
        py: Python<'_>,
        topics: Vec<NewTopicSpec>,
        timeout_ms: i64,
        validate_only: bool,
    ) -> PyResult<TopicResults> {
        let core = self.core()?;
        let ts: Vec<NewTopic> = topics
            .into_iter()
            .map(
                |(name, num_partitions, replication_factor, config)| NewTopic {
                    name,
                    num_partitions,
                    replication_factor,
                    config,
                },
            )
            .collect();
        let r = interruptible(py, |interrupted| {
            core.create_topics(ts, ms(timeout_ms), validate_only, interrupted)
        })?
        .map_err(FkError)?;
        Ok(results(py, r))
    }

    fn delete_topics(
        &self,
        py: Python<'_>,
        names: Vec<String>,
        timeout_ms: i64,
    ) -> PyResult<TopicResults> {
        let core = self.core()?;
        let r = interruptible(py, |interrupted| {
            core.delete_topics(names, ms(timeout_ms), interrupted)
        })?
        .map_err(FkError)?;
        Ok(results(py, r))
    }

    fn list_topics(&self, py: Python<'_>, timeout_ms: i64) -> PyResult<Vec<(String, usize)>> {
        let core = self.core()?;
        let r = interruptible(py, |interrupted| {
            core.list_topics(ms(timeout_ms), interrupted)
        })?
        .map_err(FkError)?;
        Ok(r.into_iter().collect())
    }

    /// (nodes, controller, cluster id)
    fn describe_cluster(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
    ) -> PyResult<(Vec<PyNode>, Option<PyNode>, Option<String>)> {
        let core = self.core()?;
        let d = interruptible(py, |interrupted| {
            core.describe_cluster(ms(timeout_ms), interrupted)
        })?
        .map_err(FkError)?;
        Ok((
            d.nodes.iter().map(PyNode::from).collect(),
            d.controller.as_ref().map(PyNode::from),
            d.cluster_id,
        ))
    }

    fn list_consumer_groups(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
    ) -> PyResult<Vec<(String, String, String)>> {
        let core = self.core()?;
        interruptible(py, |interrupted| {
            core.list_consumer_groups(ms(timeout_ms), interrupted)
        })?
        .map_err(|e| FkError(e).into())
    }

    /// [(tp, offset, metadata)]
    fn list_consumer_group_offsets(
        &self,
        py: Python<'_>,
        group_id: String,
        timeout_ms: i64,
    ) -> PyResult<Vec<(PyTopicPartition, i64, Option<String>)>> {
        let core = self.core()?;
        let r = interruptible(py, |interrupted| {
            core.list_consumer_group_offsets(&group_id, ms(timeout_ms), interrupted)
        })?
        .map_err(FkError)?;
        Ok(r.into_iter()
            .map(|(tp, o)| (PyTopicPartition { inner: tp }, o.offset, o.metadata))
            .collect())
    }

    /// Error events for `error_cb` since the last call, oldest first
    /// (librdkafka local code, message); drains queued log records too.
    fn take_errors(&self, py: Python<'_>) -> Vec<(i16, String)> {
        crate::logbridge::drain(py);
        match self.core() {
            Ok(c) => c.metadata().take_client_errors(),
            Err(_) => Vec::new(),
        }
    }

    /// [(name, value)] with Java's metric names (docs/metrics.md).
    fn metrics(&self) -> PyResult<Vec<(String, f64)>> {
        Ok(self.core()?.metrics())
    }

    fn close(&self) {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyAdmin>()
}
