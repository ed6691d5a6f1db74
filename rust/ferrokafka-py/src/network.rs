//! Bindings of the network client. The Python class `ferrokafka.NetworkClient`
//! (python/ferrokafka/network.py) wraps `_NetworkClient` and keeps the Python
//! callbacks, so this layer never calls into Python while the client's locks
//! are held: Rust returns the responses, Python runs the callbacks.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokafka_net::blocking::{now_ms, BlockingClient};
use ferrokafka_net::cluster::Node;
use ferrokafka_net::network_client::{ClientRequest, ClientResponse as CoreResponse};
use ferrokafka_net::options::Client;
use ferrokafka_net::simple_updater::SimpleUpdater;
use ferrokafka_net::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{FkError, FkResult};
use crate::gil::wait_detached;
use crate::requests::{response_to_py, Build, RawRequest};

fn parse_bootstrap(servers: &[String]) -> PyResult<Vec<Node>> {
    let mut out = Vec::new();
    for (i, s) in servers
        .iter()
        .flat_map(|s| s.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        let (host, port) = s.rsplit_once(':').ok_or_else(|| {
            PyValueError::new_err(format!(
                "invalid value for bootstrap_servers: {s:?} is not host:port"
            ))
        })?;
        let port: u16 = port.parse().map_err(|_| {
            PyValueError::new_err(format!(
                "invalid value for bootstrap_servers: bad port in {s:?}"
            ))
        })?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        // Bootstrap nodes get ids -1, -2, ... (never collide with real ids).
        out.push(Node::new(-(i as i32) - 1, host, port, None));
    }
    if out.is_empty() {
        return Err(PyValueError::new_err(
            "invalid value for bootstrap_servers: no address given",
        ));
    }
    Ok(out)
}

#[pyclass(module = "ferrokafka._core", name = "_NetworkClient")]
pub struct PyNetworkClient {
    inner: Arc<BlockingClient>,
}

/// A request built by `new_client_request`; `send` consumes it once.
#[pyclass(module = "ferrokafka._core", name = "ClientRequest")]
pub struct PyClientRequest {
    req: Mutex<Option<ClientRequest>>,
    /// Rebuilds the body for the version `send` finds usable.
    build: Build,
    #[pyo3(get)]
    destination: i32,
    #[pyo3(get)]
    correlation_id: i32,
    #[pyo3(get)]
    api_key: i16,
    #[pyo3(get)]
    expect_response: bool,
    #[pyo3(get)]
    created_time_ms: i64,
}

#[pymethods]
impl PyClientRequest {
    fn __repr__(&self) -> String {
        format!(
            "ClientRequest(destination={}, api_key={}, correlation_id={}, expect_response={})",
            self.destination,
            self.api_key,
            self.correlation_id,
            if self.expect_response {
                "True"
            } else {
                "False"
            }
        )
    }
}

#[pyclass(module = "ferrokafka._core", name = "RequestHeader", frozen)]
#[derive(Clone)]
pub struct PyRequestHeader {
    #[pyo3(get)]
    api_key: i16,
    #[pyo3(get)]
    api_version: i16,
    #[pyo3(get)]
    correlation_id: i32,
    #[pyo3(get)]
    client_id: Option<String>,
}

#[pymethods]
impl PyRequestHeader {
    fn __repr__(&self) -> String {
        format!(
            "RequestHeader(api_key={}, api_version={}, correlation_id={}, client_id={:?})",
            self.api_key, self.api_version, self.correlation_id, self.client_id
        )
    }
}

#[pyclass(module = "ferrokafka._core", name = "ClientResponse", frozen)]
pub struct PyClientResponse {
    #[pyo3(get)]
    request_header: Py<PyRequestHeader>,
    #[pyo3(get)]
    destination: i32,
    #[pyo3(get)]
    disconnected: bool,
    /// The `UnsupportedVersionError` when no common version existed, else None.
    #[pyo3(get)]
    version_mismatch: Option<Py<PyAny>>,
    /// Why the request failed (disconnect cause, timeout, corrupt answer).
    #[pyo3(get)]
    error: Option<Py<PyAny>>,
    #[pyo3(get)]
    response_body: Option<Py<PyAny>>,
    #[pyo3(get)]
    latency_ms: i64,
    #[pyo3(get)]
    received_time_ms: i64,
    #[pyo3(get)]
    created_time_ms: i64,
}

#[pymethods]
impl PyClientResponse {
    #[getter]
    fn has_response(&self) -> bool {
        self.response_body.is_some()
    }
    fn __repr__(&self, py: Python<'_>) -> String {
        let h = self.request_header.get();
        let _ = py;
        format!(
            "ClientResponse(destination={}, api_key={}, api_version={}, correlation_id={}, disconnected={}, version_mismatch={}, latency_ms={})",
            self.destination,
            h.api_key,
            h.api_version,
            h.correlation_id,
            if self.disconnected { "True" } else { "False" },
            if self.version_mismatch.is_some() { "True" } else { "False" },
            self.latency_ms
        )
    }
}

fn err_to_py(py: Python<'_>, e: &Error) -> Py<PyAny> {
    let pyerr: PyErr = FkError(e.clone()).into();
    pyerr.into_value(py).into_any()
}

fn convert(py: Python<'_>, r: CoreResponse) -> PyResult<PyClientResponse> {
    let header = PyRequestHeader {
        api_key: r.request_header.api_key,
        api_version: r.request_header.api_version,
        correlation_id: r.request_header.correlation_id,
        client_id: r.request_header.client_id.clone(),
    };
    let body = match &r.body {
        Some(b) => Some(response_to_py(py, b)?.unbind()),
        None => None,
    };
    Ok(PyClientResponse {
        request_header: Py::new(py, header)?,
        destination: r.destination,
        disconnected: r.disconnected,
        version_mismatch: r.version_mismatch.as_ref().map(|e| err_to_py(py, e)),
        error: r.error.as_ref().map(|e| err_to_py(py, e)),
        response_body: body,
        latency_ms: r.latency_ms(),
        received_time_ms: r.received_ms,
        created_time_ms: r.created_ms,
    })
}

fn node_tuple(n: &Node) -> (i32, String, u16, Option<String>) {
    (n.id, n.host.clone(), n.port, n.rack.clone())
}

#[pymethods]
impl PyNetworkClient {
    /// `cfg`: the options (any accepted spelling), checked against the
    /// option table as the NetworkClient takes them.
    #[new]
    fn new(cfg: &Bound<'_, PyDict>) -> PyResult<Self> {
        crate::logbridge::refresh_level(cfg.py());
        let e = crate::config::effective(Client::NetworkClient, cfg)?;
        let nodes = parse_bootstrap(&e.bootstrap)?;
        let cfg = e.client_config().map_err(FkError)?;
        let inner =
            BlockingClient::new(cfg, Box::new(SimpleUpdater::new(nodes))).map_err(FkError)?;
        Ok(PyNetworkClient {
            inner: Arc::new(inner),
        })
    }

    #[pyo3(signature = (now_ms=None))]
    fn least_loaded_node(&self, now_ms: Option<i64>) -> Option<(i32, String, u16, Option<String>)> {
        self.inner
            .least_loaded_node(now_ms.unwrap_or_else(self::now_ms))
            .as_ref()
            .map(node_tuple)
    }

    /// Nodes the client chooses among (bootstrap, then the latest brokers).
    fn nodes(&self) -> Vec<(i32, String, u16, Option<String>)> {
        self.inner
            .core()
            .known_nodes()
            .iter()
            .map(node_tuple)
            .collect()
    }

    fn node_by_id(&self, node_id: i32) -> Option<(i32, String, u16, Option<String>)> {
        self.inner.core().node(node_id).map(node_tuple)
    }

    #[pyo3(signature = (node_id, host, port, rack=None, now_ms=None))]
    fn ready(
        &self,
        node_id: i32,
        host: String,
        port: u16,
        rack: Option<String>,
        now_ms: Option<i64>,
    ) -> bool {
        self.inner.ready(
            &Node::new(node_id, host, port, rack),
            now_ms.unwrap_or_else(self::now_ms),
        )
    }

    #[pyo3(signature = (node_id, now_ms=None))]
    fn is_ready(&self, node_id: i32, now_ms: Option<i64>) -> bool {
        self.inner
            .is_ready(node_id, now_ms.unwrap_or_else(self::now_ms))
    }

    fn connection_state(&self, node_id: i32) -> &'static str {
        self.inner.connection_state(node_id).as_str()
    }

    #[pyo3(signature = (node_id, now_ms=None))]
    fn connection_delay(&self, node_id: i32, now_ms: Option<i64>) -> i64 {
        self.inner
            .core()
            .connection_delay(node_id, now_ms.unwrap_or_else(self::now_ms))
    }

    fn api_versions<'py>(&self, py: Python<'py>, node_id: i32) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let mut v: Vec<_> = self
            .inner
            .core()
            .api_versions(node_id)
            .into_iter()
            .collect();
        v.sort();
        for (k, r) in v {
            d.set_item(k, r)?;
        }
        Ok(d)
    }

    #[pyo3(signature = (node_id, request, expect_response=true, now_ms=None))]
    fn new_client_request(
        &self,
        node_id: i32,
        request: &RawRequest,
        expect_response: bool,
        now_ms: Option<i64>,
    ) -> PyClientRequest {
        let now = now_ms.unwrap_or_else(self::now_ms);
        let mut r = self.inner.new_client_request(
            node_id,
            request.newest_body(),
            expect_response,
            None,
            now,
        );
        r.max_version = request.max_version;
        PyClientRequest {
            build: request.build.clone(),
            destination: r.destination,
            correlation_id: r.correlation_id,
            api_key: r.api_key,
            expect_response,
            created_time_ms: now,
            req: Mutex::new(Some(r)),
        }
    }

    #[pyo3(signature = (request, now_ms=None))]
    fn send(&self, request: &PyClientRequest, now_ms: Option<i64>) -> FkResult<()> {
        let r = request
            .req
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| {
                FkError(Error::State {
                    detail: "this ClientRequest was already sent".into(),
                })
            })?;
        let mut r = r;
        {
            // Version choice, body and send under one core lock, so the
            // version the body was built for is the one it goes out at.
            let mut core = self.inner.core();
            if let Some(v) = core.usable_version(r.destination, r.api_key, r.max_version) {
                r.body = (request.build)(v);
                r.max_version = Some(v);
            }
            core.send(r, now_ms.unwrap_or_else(self::now_ms))?;
        }
        // As `BlockingClient::send`: a request completed locally (no common
        // version) must not wait for a socket event to be seen by poll.
        self.inner.wakeup();
        Ok(())
    }

    /// Waits (GIL released, Ctrl-C honoured) until something happens or
    /// `timeout_ms` passes; returns the completed responses.
    #[pyo3(signature = (timeout_ms, now_ms=None))]
    fn poll(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        now_ms: Option<i64>,
    ) -> PyResult<Vec<PyClientResponse>> {
        let inner = self.inner.clone();
        let fixed = now_ms;
        let now = move || fixed.unwrap_or_else(self::now_ms);
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        let got = wait_detached(py, Some(timeout), |slice| {
            let (rs, any) = inner.poll_with(slice, &now);
            if any {
                Some(rs)
            } else {
                None
            }
        })?;
        got.unwrap_or_default()
            .into_iter()
            .map(|r| convert(py, r))
            .collect()
    }

    #[pyo3(signature = (node_id=None))]
    fn in_flight_request_count(&self, node_id: Option<i32>) -> usize {
        self.inner.in_flight_request_count(node_id)
    }

    fn close_node(&self, py: Python<'_>, node_id: i32) -> PyResult<Vec<PyClientResponse>> {
        let rs = self.inner.core().close_node(node_id, now_ms());
        rs.into_iter().map(|r| convert(py, r)).collect()
    }

    fn close(&self, py: Python<'_>) -> PyResult<Vec<PyClientResponse>> {
        let rs = self.inner.close();
        rs.into_iter().map(|r| convert(py, r)).collect()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNetworkClient>()?;
    m.add_class::<PyClientRequest>()?;
    m.add_class::<PyClientResponse>()?;
    m.add_class::<PyRequestHeader>()?;
    Ok(())
}
