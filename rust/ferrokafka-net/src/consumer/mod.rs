//! Consumer core: partition assignors, fetch and group state.

pub mod assignor;
pub mod coordinator;
pub mod fetch;
pub mod fetcher;
pub mod group;
pub mod heartbeat;
pub mod protocol;
pub mod requests;
pub mod subscription;
