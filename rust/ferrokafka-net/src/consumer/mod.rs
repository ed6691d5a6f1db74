//! Consumer core: partition assignors, fetch and group state.

pub mod assignor;
pub mod client;
pub mod coordinator;
pub mod core;
pub mod fetch;
pub mod fetcher;
pub mod group;
pub mod heartbeat;
pub mod protocol;
pub mod records;
pub mod requests;
pub mod subscription;
