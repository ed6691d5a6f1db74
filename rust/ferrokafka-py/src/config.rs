//! From a resolved options dict (`_config.py`, snake_case keys) to the core's
//! structures: one place for what every client class builds the same way
//! (metadata, network client, security).

use std::sync::Arc;

use ferrokafka_net::blocking::BlockingClient;
use ferrokafka_net::metadata::default_updater::{DefaultMetadataUpdater, UpdaterConfig};
use ferrokafka_net::metadata::{Metadata, MetadataConfig};
use ferrokafka_net::network_client::ClientConfig;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::FkError;

/// One option, converted; a missing or ill-typed value is a ValueError naming it.
pub fn get<T: for<'a> FromPyObject<'a, 'a>>(cfg: &Bound<'_, PyDict>, key: &str) -> PyResult<T>
where
    for<'a> <T as FromPyObject<'a, 'a>>::Error: Into<PyErr>,
{
    let v = cfg
        .get_item(key)?
        .ok_or_else(|| PyValueError::new_err(format!("missing option {key}")))?;
    v.extract::<T>().map_err(|e| {
        let e: PyErr = e.into();
        PyValueError::new_err(format!("invalid value for {key}: {e}"))
    })
}

/// Which metadata a client keeps.
pub enum MetadataKind {
    /// The topics it is told about (consumer subscription, admin lookups).
    Base,
    /// ProducerMetadata: topics expire after `metadata_max_idle_ms`.
    Producer,
}

/// Metadata (bootstrapped) and a network client whose updater keeps it fresh.
pub fn metadata_and_network(
    cfg: &Bound<'_, PyDict>,
    kind: MetadataKind,
    request_timeout_ms: i64,
    max_in_flight: usize,
) -> PyResult<(Arc<Metadata>, Arc<BlockingClient>)> {
    let bootstrap: Vec<String> = get(cfg, "bootstrap_servers")?;
    let retry_backoff_ms: i64 = get(cfg, "retry_backoff_ms")?;
    let mcfg = MetadataConfig {
        refresh_backoff_ms: retry_backoff_ms,
        refresh_backoff_max_ms: get::<i64>(cfg, "retry_backoff_max_ms")?.max(retry_backoff_ms),
        metadata_expire_ms: get(cfg, "metadata_max_age_ms")?,
        rng_seed: None,
    };
    let md = match kind {
        MetadataKind::Base => Metadata::new(mcfg),
        MetadataKind::Producer => Metadata::new_producer(mcfg, get(cfg, "metadata_max_idle_ms")?),
    };
    let md = Arc::new(md.map_err(FkError)?);
    md.bootstrap(&bootstrap).map_err(FkError)?;
    let idle_ms: i64 = get(cfg, "connections_max_idle_ms")?;
    let max_response_size: i64 = get(cfg, "max_response_size")?;
    if max_response_size < 1024 {
        return Err(PyValueError::new_err(format!(
            "invalid value {max_response_size} for option 'max_response_size': expected an integer >= 1024"
        )));
    }
    // Every field spelled out (no `..Default`): an option the Python layer
    // accepts must reach the core, and a new field must be decided here.
    let defaults = ClientConfig::default();
    let netcfg = ClientConfig {
        client_id: get(cfg, "client_id")?,
        max_in_flight_requests_per_connection: max_in_flight,
        request_timeout_ms,
        reconnect_backoff_ms: get(cfg, "reconnect_backoff_ms")?,
        reconnect_backoff_max_ms: get(cfg, "reconnect_backoff_max_ms")?,
        // -1 (Java: never close idle connections).
        connections_max_idle_ms: if idle_ms < 0 { i64::MAX } else { idle_ms },
        socket_connection_setup_timeout_ms: get(cfg, "socket_connection_setup_timeout_ms")?,
        // Not options of Producer/Consumer/Admin (only of NetworkClient): the OS-tuned defaults.
        send_buffer_bytes: defaults.send_buffer_bytes,
        receive_buffer_bytes: defaults.receive_buffer_bytes,
        max_response_size: max_response_size as usize,
        security: crate::security::from_cfg(cfg)?,
    };
    let updater = DefaultMetadataUpdater::new(
        md.clone(),
        UpdaterConfig {
            request_timeout_ms,
            ..UpdaterConfig::default()
        },
    );
    let net = Arc::new(BlockingClient::new(netcfg, Box::new(updater)).map_err(FkError)?);
    Ok((md, net))
}
