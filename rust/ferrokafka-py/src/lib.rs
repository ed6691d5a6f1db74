//! `ferrokafka._core`: thin PyO3 bindings over the protocol and network crates.
//!
//! Each submodule owns the bindings of one concept and registers itself here;
//! logic lives in the Rust crates, not in this crate.

use pyo3::prelude::*;

pub mod errors;
pub mod gil;
pub mod records;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(errors::error_codes, m)?)?;
    records::register(m)?;
    Ok(())
}
