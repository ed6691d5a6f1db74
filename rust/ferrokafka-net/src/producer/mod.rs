//! Producer core: partitioners, the record accumulator, the sender's
//! decisions and the state machine over them (`core`), the thread that runs
//! it (`runner`) and the `Producer` facade (`client`).

pub mod accumulator;
pub mod batch;
pub mod buffer_pool;
pub mod client;
pub mod config;
pub mod core;
pub mod handles;
mod handover;
pub mod idempotence;
pub mod partitioner;
pub mod request;
pub mod runner;
pub mod sender;
mod stats;
pub mod txn;
