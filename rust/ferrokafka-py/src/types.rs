//! Python faces of the cluster data types (`ferrokafka_net::cluster`):
//! frozen, hashable, repr-able value classes, and the read-only `Cluster`
//! snapshot. Each wraps the Rust value; no logic lives here.

use std::collections::HashMap;
use std::sync::Arc;

use ferrokafka_net::cluster::{
    Cluster, MetadataResponse, Node, PartitionMetadata, TopicMetadata, TopicPartition,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyFrozenSet, PyTuple};

fn py_str_repr(s: &str) -> String {
    // Python-style quoting for reprs ('...' with \' and \\ escaped).
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

fn opt_repr(s: &Option<String>) -> String {
    s.as_deref()
        .map(py_str_repr)
        .unwrap_or_else(|| "None".into())
}

fn list_repr<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    format!(
        "[{}]",
        names
            .into_iter()
            .map(py_str_repr)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn ints_repr(v: &[i32]) -> String {
    match v.len() {
        0 => "()".into(),
        1 => format!("({},)", v[0]),
        _ => format!(
            "({})",
            v.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

// ----- TopicPartition ----------------------------------------------------------

/// `TopicPartition(topic, partition)`: hashable, ordered by (topic, partition).
#[pyclass(
    name = "TopicPartition",
    module = "ferrokafka",
    frozen,
    eq,
    ord,
    hash,
    from_py_object
)]
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyTopicPartition {
    pub inner: TopicPartition,
}

#[pymethods]
impl PyTopicPartition {
    #[new]
    fn new(topic: &str, partition: i32) -> Self {
        PyTopicPartition {
            inner: TopicPartition::new(topic, partition),
        }
    }
    #[getter]
    fn topic(&self) -> &str {
        &self.inner.topic
    }
    #[getter]
    fn partition(&self) -> i32 {
        self.inner.partition
    }
    fn __repr__(&self) -> String {
        format!(
            "TopicPartition(topic={}, partition={})",
            py_str_repr(&self.inner.topic),
            self.inner.partition
        )
    }
    /// `match tp: case TopicPartition(topic, partition): ...`
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str) {
        ("topic", "partition")
    }
    fn __getnewargs__(&self) -> (String, i32) {
        (self.inner.topic.to_string(), self.inner.partition)
    }
}

/// A `TopicPartition` or a `(topic, partition)` tuple.
pub fn extract_tp(obj: &Bound<'_, PyAny>) -> PyResult<TopicPartition> {
    if let Ok(tp) = obj.cast::<PyTopicPartition>() {
        return Ok(tp.get().inner.clone());
    }
    match obj.extract::<(String, i32)>() {
        Ok((t, p)) => Ok(TopicPartition::new(t, p)),
        Err(_) => Err(PyTypeError::new_err(
            "expected a TopicPartition or a (topic, partition) tuple",
        )),
    }
}

// ----- Node ----------------------------------------------------------------------

/// `Node(id, host, port, rack=None)`: a broker. Bootstrap nodes have ids < 0.
#[pyclass(
    name = "Node",
    module = "ferrokafka",
    frozen,
    eq,
    ord,
    hash,
    from_py_object
)]
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyNode {
    pub inner: Node,
}

impl From<&Node> for PyNode {
    fn from(n: &Node) -> Self {
        PyNode { inner: n.clone() }
    }
}

#[pymethods]
impl PyNode {
    #[new]
    #[pyo3(signature = (id, host, port, rack=None))]
    fn new(id: i32, host: String, port: u16, rack: Option<String>) -> Self {
        PyNode {
            inner: Node::new(id, host, port, rack),
        }
    }
    #[getter]
    fn id(&self) -> i32 {
        self.inner.id
    }
    #[getter]
    fn host(&self) -> &str {
        &self.inner.host
    }
    #[getter]
    fn port(&self) -> u16 {
        self.inner.port
    }
    #[getter]
    fn rack(&self) -> Option<&str> {
        self.inner.rack.as_deref()
    }
    /// `host:port` (IPv6 hosts in brackets).
    #[getter]
    fn address(&self) -> String {
        self.inner.address()
    }
    fn __repr__(&self) -> String {
        format!(
            "Node(id={}, host={}, port={}, rack={})",
            self.inner.id,
            py_str_repr(&self.inner.host),
            self.inner.port,
            opt_repr(&self.inner.rack)
        )
    }
    #[classattr]
    fn __match_args__() -> (&'static str, &'static str, &'static str, &'static str) {
        ("id", "host", "port", "rack")
    }
    fn __getnewargs__(&self) -> (i32, String, u16, Option<String>) {
        (
            self.inner.id,
            self.inner.host.clone(),
            self.inner.port,
            self.inner.rack.clone(),
        )
    }
}

// ----- PartitionMetadata ---------------------------------------------------------

/// One partition of a metadata answer. `leader_id` -1 = no leader,
/// `leader_epoch` -1 = unknown.
#[pyclass(
    name = "PartitionMetadata",
    module = "ferrokafka",
    frozen,
    eq,
    hash,
    from_py_object
)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyPartitionMetadata {
    pub inner: PartitionMetadata,
}

impl From<&PartitionMetadata> for PyPartitionMetadata {
    fn from(p: &PartitionMetadata) -> Self {
        PyPartitionMetadata { inner: p.clone() }
    }
}

#[pymethods]
impl PyPartitionMetadata {
    #[new]
    #[pyo3(
        signature = (partition, leader_id, leader_epoch=-1, replicas=Vec::new(), isr=Vec::new(), error_code=0, offline_replicas=Vec::new()),
        text_signature = "(partition, leader_id, leader_epoch=-1, replicas=(), isr=(), error_code=0, offline_replicas=())"
    )]
    fn new(
        partition: i32,
        leader_id: i32,
        leader_epoch: i32,
        replicas: Vec<i32>,
        isr: Vec<i32>,
        error_code: i16,
        offline_replicas: Vec<i32>,
    ) -> Self {
        PyPartitionMetadata {
            inner: PartitionMetadata {
                partition,
                leader_id,
                leader_epoch,
                replicas,
                isr,
                offline_replicas,
                error_code,
            },
        }
    }
    #[getter]
    fn partition(&self) -> i32 {
        self.inner.partition
    }
    #[getter]
    fn leader_id(&self) -> i32 {
        self.inner.leader_id
    }
    /// Alias of `leader_id` (kafka-python / Java `PartitionInfo.leader` naming).
    #[getter]
    fn leader(&self) -> i32 {
        self.inner.leader_id
    }
    #[getter]
    fn leader_epoch(&self) -> i32 {
        self.inner.leader_epoch
    }
    #[getter]
    fn replicas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.replicas)
    }
    #[getter]
    fn isr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.isr)
    }
    #[getter]
    fn offline_replicas<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.offline_replicas)
    }
    #[getter]
    fn error_code(&self) -> i16 {
        self.inner.error_code
    }
    fn __repr__(&self) -> String {
        let p = &self.inner;
        format!(
            "PartitionMetadata(partition={}, leader_id={}, leader_epoch={}, replicas={}, isr={}, error_code={})",
            p.partition,
            p.leader_id,
            p.leader_epoch,
            ints_repr(&p.replicas),
            ints_repr(&p.isr),
            p.error_code
        )
    }
    fn __getnewargs__(&self) -> (i32, i32, i32, Vec<i32>, Vec<i32>, i16, Vec<i32>) {
        let p = &self.inner;
        (
            p.partition,
            p.leader_id,
            p.leader_epoch,
            p.replicas.clone(),
            p.isr.clone(),
            p.error_code,
            p.offline_replicas.clone(),
        )
    }
}

// ----- TopicMetadata -------------------------------------------------------------

#[pyclass(
    name = "TopicMetadata",
    module = "ferrokafka",
    frozen,
    eq,
    hash,
    from_py_object
)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyTopicMetadata {
    pub inner: TopicMetadata,
}

fn topic_id_from(py_id: Option<Vec<u8>>) -> PyResult<Option<[u8; 16]>> {
    match py_id {
        None => Ok(None),
        Some(v) => <[u8; 16]>::try_from(v.as_slice()).map(Some).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err("invalid value for topic_id: expected 16 bytes")
        }),
    }
}

#[pymethods]
impl PyTopicMetadata {
    #[new]
    #[pyo3(signature = (name, partitions, error_code=0, is_internal=false, topic_id=None))]
    fn new(
        name: String,
        partitions: Vec<PyPartitionMetadata>,
        error_code: i16,
        is_internal: bool,
        topic_id: Option<Vec<u8>>,
    ) -> PyResult<Self> {
        Ok(PyTopicMetadata {
            inner: TopicMetadata {
                name,
                topic_id: topic_id_from(topic_id)?,
                partitions: partitions.into_iter().map(|p| p.inner).collect(),
                error_code,
                is_internal,
            },
        })
    }
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }
    /// Alias of `name` (Java's `TopicMetadata.topic()`).
    #[getter]
    fn topic(&self) -> &str {
        &self.inner.name
    }
    #[getter]
    fn partitions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            self.inner.partitions.iter().map(PyPartitionMetadata::from),
        )
    }
    #[getter]
    fn error_code(&self) -> i16 {
        self.inner.error_code
    }
    #[getter]
    fn is_internal(&self) -> bool {
        self.inner.is_internal
    }
    #[getter]
    fn topic_id(&self) -> Option<Vec<u8>> {
        self.inner.topic_id.map(|id| id.to_vec())
    }
    fn __repr__(&self) -> String {
        format!(
            "TopicMetadata(name={}, partitions=<{} partitions>, error_code={}, is_internal={})",
            py_str_repr(&self.inner.name),
            self.inner.partitions.len(),
            self.inner.error_code,
            if self.inner.is_internal {
                "True"
            } else {
                "False"
            }
        )
    }
}

// ----- MetadataResponse ----------------------------------------------------------

/// A Metadata answer, wire-version independent. Constructible for tests.
#[pyclass(
    name = "MetadataResponse",
    module = "ferrokafka",
    frozen,
    eq,
    hash,
    from_py_object
)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyMetadataResponse {
    pub inner: MetadataResponse,
}

#[pymethods]
impl PyMetadataResponse {
    #[new]
    #[pyo3(
        signature = (brokers, topics, cluster_id=None, controller_id=-1),
        text_signature = "(brokers, topics, cluster_id=None, controller_id=-1)"
    )]
    fn new(
        brokers: Vec<PyNode>,
        topics: Vec<PyTopicMetadata>,
        cluster_id: Option<String>,
        controller_id: i32,
    ) -> Self {
        PyMetadataResponse {
            inner: MetadataResponse {
                brokers: brokers.into_iter().map(|b| b.inner).collect(),
                topics: topics.into_iter().map(|t| t.inner).collect(),
                cluster_id,
                controller_id,
            },
        }
    }
    #[getter]
    fn brokers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.brokers.iter().map(PyNode::from))
    }
    #[getter]
    fn topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            self.inner
                .topics
                .iter()
                .map(|t| PyTopicMetadata { inner: t.clone() }),
        )
    }
    #[getter]
    fn cluster_id(&self) -> Option<&str> {
        self.inner.cluster_id.as_deref()
    }
    #[getter]
    fn controller_id(&self) -> i32 {
        self.inner.controller_id
    }
    fn __repr__(&self) -> String {
        format!(
            "MetadataResponse(brokers=<{} brokers>, topics={}, cluster_id={}, controller_id={})",
            self.inner.brokers.len(),
            list_repr(self.inner.topics.iter().map(|t| t.name.as_str())),
            opt_repr(&self.inner.cluster_id),
            self.inner.controller_id
        )
    }
}

// ----- Cluster -------------------------------------------------------------------

/// An immutable snapshot of the cluster from `Metadata.fetch()`. Lookups read
/// the shared Rust snapshot directly; nothing here locks.
#[pyclass(name = "Cluster", module = "ferrokafka", frozen)]
pub struct PyCluster {
    pub inner: Arc<Cluster>,
    /// Python Node objects by id, built on first lookup: `leader_for` is the
    /// hot call (once per record without a partition cache), and handing out
    /// a shared immutable Node is a refcount bump instead of an allocation.
    py_nodes: PyOnceLock<HashMap<i32, Py<PyNode>>>,
}

impl PyCluster {
    pub fn new(inner: Arc<Cluster>) -> Self {
        PyCluster {
            inner,
            py_nodes: PyOnceLock::new(),
        }
    }

    fn py_node(&self, py: Python<'_>, id: i32) -> PyResult<Option<Py<PyNode>>> {
        let nodes = self.py_nodes.get_or_try_init(py, || -> PyResult<_> {
            let mut m = HashMap::with_capacity(self.inner.nodes().len());
            for n in self.inner.nodes() {
                m.insert(n.id, Py::new(py, PyNode::from(n))?);
            }
            Ok(m)
        })?;
        Ok(nodes.get(&id).map(|n| n.clone_ref(py)))
    }

    fn leader_node(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
    ) -> PyResult<Option<Py<PyNode>>> {
        match self.inner.leader_for(topic, partition) {
            Some(n) => self.py_node(py, n.id),
            None => Ok(None),
        }
    }
}

fn frozenset_of<'py, 'a>(
    py: Python<'py>,
    it: impl IntoIterator<Item = &'a String>,
) -> PyResult<Bound<'py, PyFrozenSet>> {
    PyFrozenSet::new(py, it.into_iter().map(String::as_str))
}

#[pymethods]
impl PyCluster {
    #[getter]
    fn nodes(&self, py: Python<'_>) -> PyResult<Vec<Py<PyNode>>> {
        self.inner
            .nodes()
            .iter()
            .map(|n| {
                self.py_node(py, n.id)
                    .map(|o| o.expect("node of this snapshot"))
            })
            .collect()
    }
    fn node_by_id(&self, py: Python<'_>, id: i32) -> PyResult<Option<Py<PyNode>>> {
        self.py_node(py, id)
    }
    #[getter]
    fn topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        PyFrozenSet::new(py, self.inner.topics())
    }
    fn partitions_for_topic(&self, topic: &str) -> Vec<PyPartitionMetadata> {
        self.inner
            .partitions_for_topic(topic)
            .iter()
            .map(PyPartitionMetadata::from)
            .collect()
    }
    fn available_partitions_for_topic(&self, topic: &str) -> Vec<PyPartitionMetadata> {
        self.inner
            .available_partitions_for_topic(topic)
            .into_iter()
            .map(PyPartitionMetadata::from)
            .collect()
    }
    fn partition_count_for_topic(&self, topic: &str) -> Option<usize> {
        self.inner.partition_count_for_topic(topic)
    }
    /// The partition's metadata, None if unknown. Takes a TopicPartition or
    /// a (topic, partition) tuple.
    fn partition(&self, tp: &Bound<'_, PyAny>) -> PyResult<Option<PyPartitionMetadata>> {
        let tp = extract_tp(tp)?;
        Ok(self
            .inner
            .partition(&tp.topic, tp.partition)
            .map(PyPartitionMetadata::from))
    }
    /// The leader Node, None when unknown.
    fn leader_for(&self, tp: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyNode>>> {
        let py = tp.py();
        // Fast path without allocating a TopicPartition for the common case.
        if let Ok(tp) = tp.cast::<PyTopicPartition>() {
            let tp = &tp.get().inner;
            return self.leader_node(py, &tp.topic, tp.partition);
        }
        let tp = extract_tp(tp)?;
        self.leader_node(py, &tp.topic, tp.partition)
    }
    /// The cached leader epoch, None when unknown.
    fn leader_epoch_for(&self, tp: &Bound<'_, PyAny>) -> PyResult<Option<i32>> {
        let tp = extract_tp(tp)?;
        Ok(self.inner.leader_epoch_for(&tp.topic, tp.partition))
    }
    #[getter]
    fn controller(&self, py: Python<'_>) -> PyResult<Option<Py<PyNode>>> {
        match self.inner.controller() {
            // The controller is normally among the nodes; if not, a fresh one.
            Some(c) => match self.py_node(py, c.id)? {
                Some(n) => Ok(Some(n)),
                None => Ok(Some(Py::new(py, PyNode::from(c))?)),
            },
            None => Ok(None),
        }
    }
    #[getter]
    fn cluster_id(&self) -> Option<&str> {
        self.inner.cluster_id()
    }
    #[getter]
    fn internal_topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        frozenset_of(py, self.inner.internal_topics())
    }
    #[getter]
    fn invalid_topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        frozenset_of(py, self.inner.invalid_topics())
    }
    #[getter]
    fn unauthorized_topics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        frozenset_of(py, self.inner.unauthorized_topics())
    }
    /// True while this snapshot holds only the seed (bootstrap) brokers.
    #[getter]
    fn is_bootstrap_configured(&self) -> bool {
        self.inner.is_bootstrap_configured()
    }
    fn __repr__(&self) -> String {
        let mut topics: Vec<&str> = self.inner.topics().into_iter().collect();
        topics.sort();
        format!(
            "Cluster(cluster_id={}, nodes={:?}, topics={}{})",
            self.inner
                .cluster_id()
                .map(py_str_repr)
                .unwrap_or_else(|| "None".into()),
            self.inner.nodes().iter().map(|n| n.id).collect::<Vec<_>>(),
            list_repr(topics),
            if self.inner.is_bootstrap_configured() {
                ", bootstrap"
            } else {
                ""
            }
        )
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyTopicPartition>()?;
    m.add_class::<PyNode>()?;
    m.add_class::<PyPartitionMetadata>()?;
    m.add_class::<PyTopicMetadata>()?;
    m.add_class::<PyMetadataResponse>()?;
    m.add_class::<PyCluster>()?;
    Ok(())
}
