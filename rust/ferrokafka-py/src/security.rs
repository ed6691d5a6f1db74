//! TLS/SASL settings from a resolved options dict (the `COMMON` options of
//! `_config.py`) to the core's `Security`. One place for every client class.

use std::sync::Arc;

use ferrokafka_net::protocol::sasl::Mechanism;
use ferrokafka_net::security::{SaslOptions, Security, SecurityProtocol, TlsOptions};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::FkError;

fn opt<T: for<'a> FromPyObject<'a, 'a>>(cfg: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<T>>
where
    for<'a> <T as FromPyObject<'a, 'a>>::Error: Into<PyErr>,
{
    match cfg.get_item(key)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v.extract::<T>().map(Some).map_err(|e| {
            let e: PyErr = e.into();
            PyValueError::new_err(format!("invalid value for {key}: {e}"))
        }),
    }
}

pub fn from_cfg(cfg: &Bound<'_, PyDict>) -> PyResult<Security> {
    let proto: String = opt(cfg, "security_protocol")?.unwrap_or_else(|| "PLAINTEXT".into());
    let protocol = SecurityProtocol::from_name(&proto).ok_or_else(|| {
        PyValueError::new_err(format!(
            "invalid value {proto:?} for option 'security_protocol': expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
        ))
    })?;
    let tls = TlsOptions {
        ca_file: opt(cfg, "ssl_cafile")?,
        cert_file: opt(cfg, "ssl_certfile")?,
        key_file: opt(cfg, "ssl_keyfile")?,
        check_hostname: opt(cfg, "ssl_check_hostname")?.unwrap_or(true),
    };
    let sasl = if protocol.uses_sasl() {
        let name: String = opt(cfg, "sasl_mechanism")?.unwrap_or_else(|| "PLAIN".into());
        let mechanism = Mechanism::from_name(&name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "invalid value {name:?} for option 'sasl_mechanism': expected one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"
            ))
        })?;
        let provider: Option<Py<PyAny>> = opt(cfg, "sasl_oauth_token_provider")?;
        let token_provider = provider.map(|f| {
            // Called on an I/O thread when a connection authenticates: takes
            // the GIL only for the call.
            let f = Arc::new(f);
            let p: ferrokafka_net::security::TokenProvider = Arc::new(move || {
                Python::attach(|py| {
                    let r = f.call0(py).map_err(|e| format!("{e}"))?;
                    r.extract::<String>(py)
                        .map_err(|_| "the token provider must return a str".to_string())
                })
            });
            p
        });
        Some(SaslOptions {
            mechanism,
            username: opt(cfg, "sasl_username")?.unwrap_or_default(),
            password: opt(cfg, "sasl_password")?.unwrap_or_default(),
            token_provider,
        })
    } else {
        None
    };
    Security::new(protocol, tls, sasl).map_err(|e| FkError(e).into())
}
