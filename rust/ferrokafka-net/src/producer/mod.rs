//! Producer core: partitioners, the record accumulator and the sender.

pub mod accumulator;
pub mod batch;
pub mod client;
pub mod idempotence;
pub mod partitioner;
pub mod request;
pub mod sender;
