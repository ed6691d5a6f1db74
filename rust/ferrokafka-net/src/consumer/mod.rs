//! Consumer core: partition assignors, fetch and group state.

pub mod assignor;
