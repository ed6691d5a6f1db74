//! Request builders for `ferrokafka.protocol`'s request classes and the
//! conversion of decoded responses into Python objects (attribute access,
//! snake_case field names, as the schema names them).
//!
//! The Python classes (protocol.py) validate and hold their arguments; they
//! call one builder here to get a `RawRequest` holding the `kafka-protocol`
//! value, which is what `NetworkClient.new_client_request` consumes.

use bytes::Bytes;
use ferrokafka_net::protocol::kafka_protocol::messages::{
    create_topics_request::CreatableTopic, fetch_request::FetchPartition,
    fetch_request::FetchTopic, list_offsets_request::ListOffsetsPartition,
    list_offsets_request::ListOffsetsTopic, metadata_request::MetadataRequestTopic,
    produce_request::PartitionProduceData, produce_request::TopicProduceData, ApiVersionsRequest,
    BrokerId, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, FindCoordinatorRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, RequestKind, ResponseKind, TopicName,
    TransactionalId,
};
use ferrokafka_net::protocol::kafka_protocol::protocol::StrBytes;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

type FetchTopics = Vec<(String, Vec<(i32, i64, i32)>)>;
type ProduceTopics = Vec<(String, Vec<(i32, Vec<u8>)>)>;

/// A request body ready for `new_client_request` (immutable; reusable).
#[pyclass(module = "ferrokafka._core", frozen)]
#[derive(Clone)]
pub struct RawRequest {
    pub body: RequestKind,
    pub max_version: Option<i16>,
}

#[pymethods]
impl RawRequest {
    #[getter]
    fn api_key(&self) -> i16 {
        ferrokafka_net::protocol::frame::request_api_key(&self.body)
    }
    #[getter]
    fn max_version(&self) -> Option<i16> {
        self.max_version
    }
    fn __repr__(&self) -> String {
        format!(
            "RawRequest(api_key={}, max_version={:?})",
            self.api_key(),
            self.max_version
        )
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn topic(v: &str) -> TopicName {
    TopicName(s(v))
}

fn raw(body: RequestKind, max_version: Option<i16>) -> RawRequest {
    RawRequest { body, max_version }
}

#[pyfunction]
#[pyo3(signature = (topics, allow_auto_topic_creation))]
pub fn _metadata_request(
    topics: Option<Vec<String>>,
    allow_auto_topic_creation: bool,
) -> RawRequest {
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|t| MetadataRequestTopic::default().with_name(Some(topic(t))))
            .collect()
    });
    raw(
        RequestKind::Metadata(
            MetadataRequest::default()
                .with_topics(topics)
                .with_allow_auto_topic_creation(allow_auto_topic_creation),
        ),
        None,
    )
}

#[pyfunction]
pub fn _api_versions_request() -> RawRequest {
    raw(
        RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("ferrokafka"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION"))),
        ),
        None,
    )
}

#[pyfunction]
pub fn _find_coordinator_request(key: String, key_type: i8) -> RawRequest {
    // v4+ batches keys in `coordinator_keys`, v0-3 use `key`, and
    // kafka-protocol refuses to encode a non-default field the chosen version
    // lacks, so one body cannot serve both. We cap at v3 (single key), which
    // every broker since Kafka 2.0 supports.
    let r = FindCoordinatorRequest::default().with_key_type(key_type);
    raw(RequestKind::FindCoordinator(r.with_key(s(&key))), Some(3))
}

/// topics: [(topic, [(partition, timestamp)])]
#[pyfunction]
#[pyo3(signature = (topics, isolation_level, replica_id))]
pub fn _list_offsets_request(
    topics: Vec<(String, Vec<(i32, i64)>)>,
    isolation_level: i8,
    replica_id: i32,
) -> RawRequest {
    let topics = topics
        .iter()
        .map(|(t, ps)| {
            ListOffsetsTopic::default()
                .with_name(topic(t))
                .with_partitions(
                    ps.iter()
                        .map(|(p, ts)| {
                            ListOffsetsPartition::default()
                                .with_partition_index(*p)
                                .with_timestamp(*ts)
                                .with_current_leader_epoch(-1)
                        })
                        .collect(),
                )
        })
        .collect();
    raw(
        RequestKind::ListOffsets(
            ListOffsetsRequest::default()
                .with_replica_id(BrokerId(replica_id))
                .with_isolation_level(isolation_level)
                .with_topics(topics),
        ),
        None,
    )
}

/// topics: [(name, num_partitions, replication_factor)]
#[pyfunction]
pub fn _create_topics_request(
    topics: Vec<(String, i32, i16)>,
    timeout_ms: i32,
    validate_only: bool,
) -> RawRequest {
    let topics = topics
        .iter()
        .map(|(n, p, r)| {
            CreatableTopic::default()
                .with_name(topic(n))
                .with_num_partitions(*p)
                .with_replication_factor(*r)
        })
        .collect();
    raw(
        RequestKind::CreateTopics(
            CreateTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(timeout_ms)
                .with_validate_only(validate_only),
        ),
        None,
    )
}

#[pyfunction]
pub fn _delete_topics_request(topics: Vec<String>, timeout_ms: i32) -> RawRequest {
    // v0-5 carry names in `topic_names`, v6+ in `topics`; we cap at v5 so
    // the plain name list is always what is sent.
    let names = topics.iter().map(|t| topic(t)).collect();
    raw(
        RequestKind::DeleteTopics(
            DeleteTopicsRequest::default()
                .with_topic_names(names)
                .with_timeout_ms(timeout_ms),
        ),
        Some(5),
    )
}

/// topics: [(topic, [(partition, fetch_offset, partition_max_bytes)])]
#[pyfunction]
pub fn _fetch_request(
    topics: FetchTopics,
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
    isolation_level: i8,
) -> RawRequest {
    let topics = topics
        .iter()
        .map(|(t, ps)| {
            FetchTopic::default().with_topic(topic(t)).with_partitions(
                ps.iter()
                    .map(|(p, off, mb)| {
                        FetchPartition::default()
                            .with_partition(*p)
                            .with_fetch_offset(*off)
                            .with_partition_max_bytes(*mb)
                            .with_current_leader_epoch(-1)
                            .with_log_start_offset(-1)
                    })
                    .collect(),
            )
        })
        .collect();
    // Topic names exist up to v12; v13+ name topics by id only.
    raw(
        RequestKind::Fetch(
            FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(max_wait_ms)
                .with_min_bytes(min_bytes)
                .with_max_bytes(max_bytes)
                .with_isolation_level(isolation_level)
                .with_session_epoch(-1)
                .with_topics(topics),
        ),
        Some(12),
    )
}

/// topic_data: [(topic, [(partition, records)])], records = an encoded RecordBatch.
#[pyfunction]
#[pyo3(signature = (topic_data, acks, timeout_ms, transactional_id))]
pub fn _produce_request(
    topic_data: ProduceTopics,
    acks: i16,
    timeout_ms: i32,
    transactional_id: Option<String>,
) -> RawRequest {
    let topic_data = topic_data
        .into_iter()
        .map(|(t, ps)| {
            TopicProduceData::default()
                .with_name(topic(&t))
                .with_partition_data(
                    ps.into_iter()
                        .map(|(p, rec)| {
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(Bytes::from(rec)))
                        })
                        .collect(),
                )
        })
        .collect();
    raw(
        RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(acks)
                .with_timeout_ms(timeout_ms)
                .with_transactional_id(transactional_id.map(|t| TransactionalId(s(&t))))
                .with_topic_data(topic_data),
        ),
        // v13 names topics by id.
        Some(12),
    )
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RawRequest>()?;
    m.add_function(wrap_pyfunction!(_metadata_request, m)?)?;
    m.add_function(wrap_pyfunction!(_api_versions_request, m)?)?;
    m.add_function(wrap_pyfunction!(_find_coordinator_request, m)?)?;
    m.add_function(wrap_pyfunction!(_list_offsets_request, m)?)?;
    m.add_function(wrap_pyfunction!(_create_topics_request, m)?)?;
    m.add_function(wrap_pyfunction!(_delete_topics_request, m)?)?;
    m.add_function(wrap_pyfunction!(_fetch_request, m)?)?;
    m.add_function(wrap_pyfunction!(_produce_request, m)?)?;
    Ok(())
}

// ------------------------------------------------------------------ responses

/// Builds `ferrokafka.protocol.Struct(name, **fields)`.
struct Obj<'py> {
    py: Python<'py>,
    name: &'static str,
    d: Bound<'py, PyDict>,
}

impl<'py> Obj<'py> {
    fn new(py: Python<'py>, name: &'static str) -> Self {
        Obj {
            py,
            name,
            d: PyDict::new(py),
        }
    }
    fn f<T: IntoPyObject<'py>>(self, k: &str, v: T) -> PyResult<Self> {
        self.d.set_item(k, v)?;
        Ok(self)
    }
    fn done(self) -> PyResult<Bound<'py, PyAny>> {
        let m = self.py.import("ferrokafka.protocol")?;
        m.getattr("_make")?.call1((self.name, self.d))
    }
}

fn opt_str(v: &Option<StrBytes>) -> Option<String> {
    v.as_ref().map(|x| x.as_str().to_owned())
}

fn list<'py, T>(
    py: Python<'py>,
    items: &[T],
    f: impl Fn(&T) -> PyResult<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for i in items {
        out.append(f(i)?)?;
    }
    Ok(out)
}

fn uuid(u: &impl std::fmt::Display) -> String {
    u.to_string()
}

/// The decoded response as a Python object; `None` for message kinds we do
/// not convert yet (the raw decode still succeeded).
pub fn response_to_py<'py>(py: Python<'py>, r: &ResponseKind) -> PyResult<Bound<'py, PyAny>> {
    match r {
        ResponseKind::Metadata(m) => Obj::new(py, "MetadataResponse")
            .f("throttle_time_ms", m.throttle_time_ms)?
            .f(
                "brokers",
                list(py, &m.brokers, |b| {
                    Obj::new(py, "MetadataResponseBroker")
                        .f("node_id", b.node_id.0)?
                        .f("host", b.host.as_str())?
                        .f("port", b.port)?
                        .f("rack", opt_str(&b.rack))?
                        .done()
                })?,
            )?
            .f("cluster_id", opt_str(&m.cluster_id))?
            .f("controller_id", m.controller_id.0)?
            .f(
                "topics",
                list(py, &m.topics, |t| {
                    Obj::new(py, "MetadataResponseTopic")
                        .f("error_code", t.error_code)?
                        .f("name", t.name.as_ref().map(|n| n.0.as_str().to_owned()))?
                        .f("topic_id", uuid(&t.topic_id))?
                        .f("is_internal", t.is_internal)?
                        .f(
                            "partitions",
                            list(py, &t.partitions, |p| {
                                Obj::new(py, "MetadataResponsePartition")
                                    .f("error_code", p.error_code)?
                                    .f("partition_index", p.partition_index)?
                                    .f("leader_id", p.leader_id.0)?
                                    .f("leader_epoch", p.leader_epoch)?
                                    .f(
                                        "replica_nodes",
                                        p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                                    )?
                                    .f(
                                        "isr_nodes",
                                        p.isr_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                                    )?
                                    .f(
                                        "offline_replicas",
                                        p.offline_replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                                    )?
                                    .done()
                            })?,
                        )?
                        .done()
                })?,
            )?
            .done(),
        ResponseKind::ApiVersions(a) => Obj::new(py, "ApiVersionsResponse")
            .f("error_code", a.error_code)?
            .f(
                "api_keys",
                list(py, &a.api_keys, |k| {
                    Obj::new(py, "ApiVersion")
                        .f("api_key", k.api_key)?
                        .f("min_version", k.min_version)?
                        .f("max_version", k.max_version)?
                        .done()
                })?,
            )?
            .f("throttle_time_ms", a.throttle_time_ms)?
            .done(),
        ResponseKind::FindCoordinator(c) => Obj::new(py, "FindCoordinatorResponse")
            .f("throttle_time_ms", c.throttle_time_ms)?
            .f("error_code", c.error_code)?
            .f("error_message", opt_str(&c.error_message))?
            .f("node_id", c.node_id.0)?
            .f("host", c.host.as_str())?
            .f("port", c.port)?
            .f(
                "coordinators",
                list(py, &c.coordinators, |k| {
                    Obj::new(py, "Coordinator")
                        .f("key", k.key.as_str())?
                        .f("node_id", k.node_id.0)?
                        .f("host", k.host.as_str())?
                        .f("port", k.port)?
                        .f("error_code", k.error_code)?
                        .f("error_message", opt_str(&k.error_message))?
                        .done()
                })?,
            )?
            .done(),
        ResponseKind::ListOffsets(l) => Obj::new(py, "ListOffsetsResponse")
            .f("throttle_time_ms", l.throttle_time_ms)?
            .f(
                "topics",
                list(py, &l.topics, |t| {
                    Obj::new(py, "ListOffsetsTopicResponse")
                        .f("name", t.name.0.as_str())?
                        .f(
                            "partitions",
                            list(py, &t.partitions, |p| {
                                Obj::new(py, "ListOffsetsPartitionResponse")
                                    .f("partition_index", p.partition_index)?
                                    .f("error_code", p.error_code)?
                                    .f("timestamp", p.timestamp)?
                                    .f("offset", p.offset)?
                                    .f("leader_epoch", p.leader_epoch)?
                                    .done()
                            })?,
                        )?
                        .done()
                })?,
            )?
            .done(),
        ResponseKind::CreateTopics(c) => Obj::new(py, "CreateTopicsResponse")
            .f("throttle_time_ms", c.throttle_time_ms)?
            .f(
                "topics",
                list(py, &c.topics, |t| {
                    Obj::new(py, "CreatableTopicResult")
                        .f("name", t.name.0.as_str())?
                        .f("topic_id", uuid(&t.topic_id))?
                        .f("error_code", t.error_code)?
                        .f("error_message", opt_str(&t.error_message))?
                        .f("num_partitions", t.num_partitions)?
                        .f("replication_factor", t.replication_factor)?
                        .done()
                })?,
            )?
            .done(),
        ResponseKind::DeleteTopics(d) => Obj::new(py, "DeleteTopicsResponse")
            .f("throttle_time_ms", d.throttle_time_ms)?
            .f(
                "responses",
                list(py, &d.responses, |t| {
                    Obj::new(py, "DeletableTopicResult")
                        .f("name", t.name.as_ref().map(|n| n.0.as_str().to_owned()))?
                        .f("topic_id", uuid(&t.topic_id))?
                        .f("error_code", t.error_code)?
                        .f("error_message", opt_str(&t.error_message))?
                        .done()
                })?,
            )?
            .done(),
        ResponseKind::Fetch(f) => Obj::new(py, "FetchResponse")
            .f("throttle_time_ms", f.throttle_time_ms)?
            .f("error_code", f.error_code)?
            .f("session_id", f.session_id)?
            .f(
                "responses",
                list(py, &f.responses, |t| {
                    Obj::new(py, "FetchableTopicResponse")
                        .f("topic", t.topic.0.as_str())?
                        .f("topic_id", uuid(&t.topic_id))?
                        .f(
                            "partitions",
                            list(py, &t.partitions, |p| {
                                Obj::new(py, "PartitionData")
                                    .f("partition_index", p.partition_index)?
                                    .f("error_code", p.error_code)?
                                    .f("high_watermark", p.high_watermark)?
                                    .f("last_stable_offset", p.last_stable_offset)?
                                    .f("log_start_offset", p.log_start_offset)?
                                    .f("preferred_read_replica", p.preferred_read_replica.0)?
                                    .f("records", p.records.as_ref().map(|r| PyBytes::new(py, r)))?
                                    .done()
                            })?,
                        )?
                        .done()
                })?,
            )?
            .done(),
        ResponseKind::Produce(p) => Obj::new(py, "ProduceResponse")
            .f("throttle_time_ms", p.throttle_time_ms)?
            .f(
                "responses",
                list(py, &p.responses, |t| {
                    Obj::new(py, "TopicProduceResponse")
                        .f("name", t.name.0.as_str())?
                        .f(
                            "partition_responses",
                            list(py, &t.partition_responses, |r| {
                                Obj::new(py, "PartitionProduceResponse")
                                    .f("index", r.index)?
                                    .f("error_code", r.error_code)?
                                    .f("base_offset", r.base_offset)?
                                    .f("log_append_time_ms", r.log_append_time_ms)?
                                    .f("log_start_offset", r.log_start_offset)?
                                    .f("error_message", opt_str(&r.error_message))?
                                    .done()
                            })?,
                        )?
                        .done()
                })?,
            )?
            .done(),
        other => Obj::new(py, "Response")
            .f("repr", format!("{other:?}"))?
            .done(),
    }
}
