//! `ferrokafka._core`: thin PyO3 bindings over the protocol and network crates.
//!
//! Each submodule owns the bindings of one concept and registers itself here;
//! logic lives in the Rust crates, not in this crate.

use pyo3::prelude::*;

pub mod admin;
pub mod aio_delivery;
pub mod arrow;
pub mod arrow_stream;
pub mod config;
pub mod consumer;
pub mod errors;
pub mod future;
pub mod gil;
pub mod group;
pub mod logbridge;
pub mod metadata;
pub mod network;
pub mod producer;
pub mod records;
pub mod requests;
pub mod share;
pub mod types;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    logbridge::register(m)?;
    m.add_function(wrap_pyfunction!(errors::error_codes, m)?)?;
    config::register(m)?;
    m.add_function(wrap_pyfunction!(arrow::record_batch_schema, m)?)?;
    network::register(m)?;
    requests::register(m)?;
    m.add_class::<future::RecordMetadata>()?;
    m.add_class::<future::DeliveryFuture>()?;
    m.add_class::<aio_delivery::Delivery>()?;
    m.add_function(wrap_pyfunction!(future::_test_future, m)?)?;
    m.add_function(wrap_pyfunction!(future::_test_run_callbacks, m)?)?;
    types::register(m)?;
    metadata::register(m)?;
    group::register(m)?;
    producer::register(m)?;
    records::register(m)?;
    consumer::register(m)?;
    admin::register(m)?;
    share::register(m)?;
    Ok(())
}
