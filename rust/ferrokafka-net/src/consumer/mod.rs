//! Consumer core: partition assignors, fetch and group state.

pub mod assignor;
pub mod client;
pub mod config;
pub mod coordinator;
pub mod core;
pub mod fetch;
pub mod fetcher;
pub mod group;
pub mod heartbeat;
pub mod member;
pub mod pool;
pub mod protocol;
pub mod records;
pub mod requests;
mod rows;
mod shell;
pub mod subscription;
