//! The option table (`ferrokafka_net::options`) for Python, and from an
//! options dict to the core's structures. Only translation lives here: the
//! checks, defaults and the field each option fills are in the net crate.

use std::sync::Arc;

use ferrokafka_net::blocking::BlockingClient;
use ferrokafka_net::metadata::default_updater::DefaultMetadataUpdater;
use ferrokafka_net::metadata::Metadata;
use ferrokafka_net::options::build::SetError;
use ferrokafka_net::options::{
    self, Client, Constraint, Default, Effect, Effective, Kind, Raw, Resolved, Value, OPTIONS,
};
use ferrokafka_net::security::TokenProvider;
use ferrokafka_net::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyString, PyTuple};

use crate::errors::FkError;

/// A Python value as the option checks see it.
pub fn raw(v: &Bound<'_, PyAny>) -> Raw {
    if v.is_none() {
        Raw::Null
    } else if v.is_instance_of::<PyBool>() {
        Raw::Bool(v.is_truthy().unwrap_or(false))
    } else if v.is_instance_of::<PyInt>() {
        v.extract::<i64>().map(Raw::Int).unwrap_or(Raw::BigInt)
    } else if v.is_instance_of::<PyFloat>() {
        v.extract::<f64>().map(Raw::Float).unwrap_or(Raw::Other)
    } else if let Ok(s) = v.cast::<PyString>() {
        s.to_str().map(|s| Raw::Str(s.into())).unwrap_or(Raw::Other)
    } else if v.is_callable() {
        Raw::Callable
    } else if let Ok(i) = v.extract::<i64>() {
        // Integer types other than int (numpy's) convert through __index__.
        Raw::Int(i)
    } else if let Ok(it) = v.try_iter() {
        // Lists, tuples, sets, generators: anything iterable but a string.
        Raw::List(
            it.map(|x| x.map(|x| raw(&x)).unwrap_or(Raw::Other))
                .collect(),
        )
    } else {
        Raw::Other
    }
}

fn value_to_py<'py>(
    py: Python<'py>,
    v: &Value,
    original: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Str(s) => PyString::new(py, s).into_any(),
        Value::List(l) => PyTuple::new(py, l)?.into_any(),
        Value::Object => original.clone(),
    })
}

fn invalid(key: &str, value: &Bound<'_, PyAny>, c: &Constraint<'_>) -> PyErr {
    let shown = if c.kind == Kind::Secret {
        "'<redacted>'".to_string()
    } else {
        value
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "?".into())
    };
    PyValueError::new_err(format!(
        "invalid value {shown} for option '{key}': expected {}",
        c.accepted()
    ))
}

fn unknown_client(name: &str) -> PyErr {
    PyValueError::new_err(format!("unknown client {name:?}"))
}

fn default_to_py<'py>(py: Python<'py>, d: Default) -> PyResult<Bound<'py, PyAny>> {
    match d.value() {
        Some(v) => value_to_py(py, &v, &py.None().into_bound(py)),
        None => Ok(py.None().into_bound(py)),
    }
}

/// Every option, as dicts (name, java, aliases, kind, default, required,
/// min, max, choices, nullable, clients, low_level_min, needs, effect,
/// effect_detail, doc). `_config.py` builds its tables from these.
#[pyfunction]
pub fn option_table(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    OPTIONS
        .iter()
        .map(|o| {
            let d = PyDict::new(py);
            d.set_item("name", o.name)?;
            d.set_item("java", o.java)?;
            d.set_item("aliases", PyTuple::new(py, o.aliases)?)?;
            d.set_item("kind", o.kind.name())?;
            d.set_item("default", default_to_py(py, o.default)?)?;
            d.set_item("required", o.default == Default::Required)?;
            d.set_item("min", o.min)?;
            d.set_item("max", o.max)?;
            d.set_item("choices", PyTuple::new(py, o.choices)?)?;
            d.set_item("nullable", o.nullable)?;
            let clients: Vec<&str> = o.clients().map(Client::name).collect();
            d.set_item("clients", PyTuple::new(py, clients)?)?;
            d.set_item("low_level_min", o.low_level_min)?;
            d.set_item("needs", PyTuple::new(py, o.needs)?)?;
            let (effect, detail): (&str, Bound<'_, PyAny>) = match o.effect {
                Effect::Core(f) => ("core", PyTuple::new(py, f)?.into_any()),
                Effect::Python(w) => ("python", PyString::new(py, w).into_any()),
                Effect::Refused(r) => ("refused", PyString::new(py, r).into_any()),
            };
            d.set_item("effect", effect)?;
            d.set_item("effect_detail", detail)?;
            d.set_item("accepted", o.constraint(None).accepted())?;
            d.set_item("doc", o.doc)?;
            Ok(d)
        })
        .collect()
}

/// The one value check: `value` for option `key` of the given kind, range
/// and choices; the checked value, or ValueError naming `key`.
#[pyfunction]
#[pyo3(signature = (kind, key, value, min=None, max=None, choices=None, nullable=false))]
// The Python keywords, one argument each.
#[allow(clippy::too_many_arguments)]
pub fn coerce_option<'py>(
    py: Python<'py>,
    kind: &str,
    key: &str,
    value: &Bound<'py, PyAny>,
    min: Option<i64>,
    max: Option<i64>,
    choices: Option<Vec<String>>,
    nullable: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let choices = choices.unwrap_or_default();
    let choices: Vec<&str> = choices.iter().map(String::as_str).collect();
    let c = constraint(kind, min, max, &choices, nullable)?;
    let v = c
        .coerce(&raw(value))
        .map_err(|()| invalid(key, value, &c))?;
    value_to_py(py, &v, value)
}

/// The constraint named by the Python-side arguments of `coerce_option` /
/// `option_accepted`.
fn constraint<'a>(
    kind: &str,
    min: Option<i64>,
    max: Option<i64>,
    choices: &'a [&'a str],
    nullable: bool,
) -> PyResult<Constraint<'a>> {
    let kind = Kind::from_name(kind)
        .ok_or_else(|| PyValueError::new_err(format!("unknown option kind {kind:?}")))?;
    Ok(Constraint {
        kind,
        min,
        max,
        choices,
        nullable,
    })
}

/// What an option of this kind, range and choices accepts (error messages, docs).
#[pyfunction]
#[pyo3(signature = (kind, min=None, max=None, choices=None, nullable=false))]
pub fn option_accepted(
    kind: &str,
    min: Option<i64>,
    max: Option<i64>,
    choices: Option<Vec<String>>,
    nullable: bool,
) -> PyResult<String> {
    let choices = choices.unwrap_or_default();
    let choices: Vec<&str> = choices.iter().map(String::as_str).collect();
    let c = constraint(kind, min, max, &choices, nullable)?;
    Ok(c.accepted())
}

/// The token provider: called on an I/O thread when a connection
/// authenticates, taking the GIL only for the call.
fn token_provider(f: Py<PyAny>) -> TokenProvider {
    Arc::new(move || {
        Python::attach(|py| {
            let r = f.call0(py).map_err(|e| format!("{e}"))?;
            r.extract::<String>(py)
                .map_err(|_| "the token provider must return a str".to_string())
        })
    })
}

/// Check every entry of `cfg` (any accepted spelling) as `client` takes it
/// and build the core's structures from them (defaults for the rest).
pub fn effective(client: Client, cfg: &Bound<'_, PyDict>) -> PyResult<Effective> {
    let mut r = Resolved::new(client);
    let mut provider = None;
    for (k, v) in cfg.iter() {
        let key: String = k
            .extract()
            .map_err(|_| PyValueError::new_err("option names must be strings"))?;
        match r.set(&key, &raw(&v)) {
            Ok(spec) => {
                if spec.name == "sasl_oauth_token_provider" && !v.is_none() {
                    provider = Some(token_provider(v.unbind()));
                }
            }
            Err(SetError::Invalid(c)) => return Err(invalid(&key, &v, &c)),
            Err(e @ SetError::Unknown) => return Err(FkError(e.into_error(client, &key)).into()),
        }
    }
    r.check_required().map_err(FkError)?;
    Ok(options::build(&r, provider).map_err(FkError)?)
}

/// The fields the options fill for `client` given `cfg`, as
/// `{"Struct.field": repr}`: how tests see that no option is accepted and
/// ignored.
#[pyfunction]
pub fn effective_config<'py>(
    py: Python<'py>,
    client: &str,
    cfg: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let client = Client::from_name(client).ok_or_else(|| unknown_client(client))?;
    let e = effective(client, cfg)?;
    let d = PyDict::new(py);
    for (k, v) in e.fields() {
        d.set_item(k, v)?;
    }
    Ok(d)
}

/// Metadata (bootstrapped) and a network client whose updater keeps it fresh.
pub fn metadata_and_network(e: &Effective) -> PyResult<(Arc<Metadata>, Arc<BlockingClient>)> {
    let missing = |what: &str| {
        FkError(Error::Config {
            key: "bootstrap_servers".into(),
            detail: format!("{} has no {what}", e.client.name()),
        })
    };
    let mcfg = e.metadata.clone().ok_or_else(|| missing("metadata"))?;
    let md = match e.metadata_idle_ms {
        None => Metadata::new(mcfg),
        Some(idle) => Metadata::new_producer(mcfg, idle),
    };
    let md = Arc::new(md.map_err(FkError)?);
    md.bootstrap(&e.bootstrap).map_err(FkError)?;
    let netcfg = e.client_config().map_err(FkError)?;
    let ucfg = e
        .updater
        .clone()
        .ok_or_else(|| missing("metadata updater"))?;
    let updater = DefaultMetadataUpdater::new(md.clone(), ucfg);
    let net = Arc::new(BlockingClient::new(netcfg, Box::new(updater)).map_err(FkError)?);
    Ok((md, net))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(option_table, m)?)?;
    m.add_function(wrap_pyfunction!(coerce_option, m)?)?;
    m.add_function(wrap_pyfunction!(option_accepted, m)?)?;
    m.add_function(wrap_pyfunction!(effective_config, m)?)?;
    Ok(())
}
