//! The one conversion from core errors to Python exceptions.
//!
//! The exception classes live in Python (`ferrokafka/errors.py`) so users can
//! subclass, pickle and `except` them like any other class; this module only
//! asks that tree for the class of a code. The error-code table the tree is
//! built from comes from here (`error_codes()`), so Rust and Python cannot
//! disagree on names or retriability.

use ferrokafka_net::protocol::kafka_protocol::error::ResponseError;
use ferrokafka_net::protocol::ProtocolError;
use ferrokafka_net::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Newtype so the orphan rule allows `From<..> for PyErr`; `?` converts any core
/// error through it.
pub struct FkError(pub Error);

impl From<Error> for FkError {
    fn from(e: Error) -> Self {
        FkError(e)
    }
}

impl From<ProtocolError> for FkError {
    fn from(e: ProtocolError) -> Self {
        FkError(Error::Protocol(e))
    }
}

impl From<FkError> for PyErr {
    fn from(FkError(e): FkError) -> PyErr {
        if let Error::Config { key, detail } = &e {
            return PyValueError::new_err(format!("invalid value for {key}: {detail}"));
        }
        let code = e.code();
        let retriable = e.retriable();
        let message = e.to_string();
        Python::attach(|py| {
            let make = || -> PyResult<PyErr> {
                let module = py.import("ferrokafka.errors")?;
                let exc =
                    module
                        .getattr("_from_core")?
                        .call1((code, message.clone(), retriable))?;
                Ok(PyErr::from_value(exc))
            };
            make().unwrap_or_else(|err| err)
        })
    }
}

pub type FkResult<T> = Result<T, FkError>;

/// UPPER_SNAKE name of a Kafka error, as the Java `Errors` enum spells it.
pub fn error_name(err: &ResponseError) -> String {
    let camel = err.to_string();
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, ch) in camel.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

/// `[(code, name, retriable)]` for every Kafka error code known to the schema
/// crate, then every local (negative, librdkafka) code of the core.
#[pyfunction]
pub fn error_codes() -> Vec<(i16, String, bool)> {
    (-1i16..=1000)
        .filter_map(ResponseError::try_from_code)
        .filter(|e| !matches!(e, ResponseError::Unknown(_)))
        .map(|e| (e.code(), error_name(&e), e.is_retriable()))
        .chain(
            ferrokafka_net::error::local_code::ALL
                .iter()
                .map(|&(code, name, retriable)| (code, name.to_string(), retriable)),
        )
        .collect()
}
