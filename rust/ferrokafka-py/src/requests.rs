//! Request builders for `ferrokafka.protocol`'s request classes and the
//! conversion of decoded responses into Python objects (attribute access,
//! snake_case field names, as the schema names them).
//!
//! The Python classes (protocol.py) validate and hold their arguments; they
//! call one function here to get a `RawRequest`. The bodies come from the
//! net crate's builders, the same ones the consumer, producer and admin
//! client use, so each request kind has one builder and one version policy.
//! Most of them take the version the request goes out at, so a `RawRequest`
//! holds a builder, run by `NetworkClient.send` once the version is known.

use std::sync::Arc;

use bytes::Bytes;
use ferrokafka_net::admin::{create_topics, delete_topics, NewTopic};
use ferrokafka_net::cluster::TopicPartition;
use ferrokafka_net::consumer::fetch::{
    build_list_offsets_request, fetch_max_version, fetch_request, FetchLimits, PartitionFetch,
};
use ferrokafka_net::consumer::requests::find_coordinator;
use ferrokafka_net::metadata::wire::build_metadata_request;
use ferrokafka_net::network_client::api_versions_request;
use ferrokafka_net::producer::request::{build_produce_request, BatchToSend};
use ferrokafka_net::protocol::frame::client_version_range;
use ferrokafka_net::protocol::kafka_protocol::messages::{
    ApiKey, BrokerId, RequestKind, ResponseKind,
};
use ferrokafka_net::protocol::kafka_protocol::protocol::StrBytes;
use ferrokafka_net::updater::MetadataRequestSpec;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

type FetchTopics = Vec<(String, Vec<(i32, i64, i32)>)>;
type ProduceTopics = Vec<(String, Vec<(i32, Vec<u8>)>)>;

/// Builds the body for the version it will be sent at.
pub type Build = Arc<dyn Fn(i16) -> RequestKind + Send + Sync>;

/// A request ready for `new_client_request` (immutable; reusable).
#[pyclass(module = "ferrokafka._core", frozen)]
#[derive(Clone)]
pub struct RawRequest {
    api_key: i16,
    pub build: Build,
    pub max_version: Option<i16>,
}

impl RawRequest {
    /// The body at the newest version this request may use, for a
    /// `ClientRequest` whose node's versions are not known yet (sending it
    /// then fails before the body matters: not ready, or no common version).
    pub fn newest_body(&self) -> RequestKind {
        let newest = client_version_range(self.api_key).map_or(0, |(_, hi)| hi);
        (self.build)(self.max_version.map_or(newest, |m| m.min(newest)))
    }
}

#[pymethods]
impl RawRequest {
    #[getter]
    fn api_key(&self) -> i16 {
        self.api_key
    }
    #[getter]
    fn max_version(&self) -> Option<i16> {
        self.max_version
    }
    fn __repr__(&self) -> String {
        format!(
            "RawRequest(api_key={}, max_version={:?})",
            self.api_key, self.max_version
        )
    }
}

fn raw(
    api_key: ApiKey,
    max_version: Option<i16>,
    build: impl Fn(i16) -> RequestKind + Send + Sync + 'static,
) -> RawRequest {
    RawRequest {
        api_key: api_key as i16,
        build: Arc::new(build),
        max_version,
    }
}

#[pyfunction]
#[pyo3(signature = (topics, allow_auto_topic_creation))]
pub fn _metadata_request(
    topics: Option<Vec<String>>,
    allow_auto_topic_creation: bool,
) -> RawRequest {
    let spec = MetadataRequestSpec {
        topics,
        allow_auto_topic_creation,
    };
    raw(ApiKey::Metadata, None, move |v| {
        RequestKind::Metadata(build_metadata_request(&spec, v))
    })
}

#[pyfunction]
pub fn _api_versions_request() -> RawRequest {
    raw(ApiKey::ApiVersions, None, |_| {
        RequestKind::ApiVersions(api_versions_request())
    })
}

#[pyfunction]
pub fn _find_coordinator_request(key: String, key_type: i8) -> RawRequest {
    // The Python class asks for one key and its users read the answer's
    // top-level node_id/host/port, which v4+ moved into `coordinators`: the
    // class stays at v3, a choice of its API, not of the builder.
    raw(ApiKey::FindCoordinator, Some(3), move |v| {
        RequestKind::FindCoordinator(find_coordinator(&key, key_type, v))
    })
}

/// topics: [(topic, [(partition, timestamp)])]
#[pyfunction]
#[pyo3(signature = (topics, isolation_level, replica_id))]
pub fn _list_offsets_request(
    topics: Vec<(String, Vec<(i32, i64)>)>,
    isolation_level: i8,
    replica_id: i32,
) -> RawRequest {
    let parts: Vec<(TopicPartition, i64, i32)> = topics
        .iter()
        .flat_map(|(t, ps)| {
            ps.iter()
                .map(move |(p, ts)| (TopicPartition::new(t.as_str(), *p), *ts, -1))
        })
        .collect();
    raw(ApiKey::ListOffsets, None, move |_| {
        // The protocol class has no timeout (v10's tiered-storage wait): 0,
        // the schema default, as before.
        RequestKind::ListOffsets(
            build_list_offsets_request(isolation_level, &parts, 0)
                .with_replica_id(BrokerId(replica_id)),
        )
    })
}

/// topics: [(name, num_partitions, replication_factor)]
#[pyfunction]
pub fn _create_topics_request(
    topics: Vec<(String, i32, i16)>,
    timeout_ms: i32,
    validate_only: bool,
) -> RawRequest {
    let topics: Vec<NewTopic> = topics
        .into_iter()
        .map(|(name, num_partitions, replication_factor)| NewTopic {
            name,
            num_partitions,
            replication_factor,
            config: Vec::new(),
        })
        .collect();
    raw(ApiKey::CreateTopics, None, move |_| {
        RequestKind::CreateTopics(create_topics(&topics, timeout_ms, validate_only))
    })
}

#[pyfunction]
pub fn _delete_topics_request(topics: Vec<String>, timeout_ms: i32) -> RawRequest {
    raw(ApiKey::DeleteTopics, None, move |v| {
        RequestKind::DeleteTopics(delete_topics(&topics, timeout_ms, v))
    })
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
    let parts: Vec<PartitionFetch> = topics
        .iter()
        .flat_map(|(t, ps)| {
            ps.iter().map(move |(p, off, mb)| PartitionFetch {
                tp: TopicPartition::new(t.as_str(), *p),
                // The protocol class names topics: no ids, so at most v12.
                topic_id: None,
                fetch_offset: *off,
                current_leader_epoch: -1,
                partition_max_bytes: *mb,
            })
        })
        .collect();
    let limits = FetchLimits {
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
    };
    raw(ApiKey::Fetch, fetch_max_version(&parts), move |v| {
        RequestKind::Fetch(fetch_request(limits, &parts, "", v))
    })
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
    let batches: Vec<BatchToSend> = topic_data
        .into_iter()
        .flat_map(|(t, ps)| {
            ps.into_iter().map(move |(p, rec)| BatchToSend {
                tp: TopicPartition::new(t.as_str(), p),
                topic_id: None,
                records: Bytes::from(rec),
            })
        })
        .collect();
    // Without topic ids the topics go by name, which v13+ no longer has.
    raw(ApiKey::Produce, Some(12), move |_| {
        RequestKind::Produce(build_produce_request(
            acks,
            timeout_ms,
            transactional_id.as_deref(),
            &batches,
        ))
    })
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
