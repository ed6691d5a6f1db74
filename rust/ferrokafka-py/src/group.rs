//! Group helpers exposed at the package top level.

use ferrokafka_net::consumer::group;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// The `__consumer_offsets` partition holding `group_id`'s offsets; its leader
/// is the group coordinator (docs/semantics.md §2.4).
#[pyfunction]
#[pyo3(signature = (group_id, num_partitions=50))]
pub fn coordinator_partition_for(group_id: &str, num_partitions: i32) -> PyResult<i32> {
    if num_partitions <= 0 {
        return Err(PyValueError::new_err(format!(
            "invalid value for num_partitions: must be > 0, got {num_partitions}"
        )));
    }
    Ok(group::coordinator_partition_for(group_id, num_partitions))
}

/// Java's `String.hashCode` (UTF-16 code units), for tools and tests.
#[pyfunction]
pub fn java_string_hash(s: &str) -> i32 {
    group::java_string_hash(s)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(coordinator_partition_for, m)?)?;
    m.add_function(wrap_pyfunction!(java_string_hash, m)?)?;
    Ok(())
}
