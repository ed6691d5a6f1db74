//! Tokio network core: per-broker connections, ApiVersions negotiation, the
//! in-flight request deque, timeouts and reconnect backoff, and the cluster
//! metadata state machine that the selector consults without the GIL.

pub mod admin;
pub mod cluster;
pub mod consumer;
pub mod error;
pub mod metadata;
pub mod producer;
pub mod updater;

pub use error::{Error, Result};
pub use metadata::{DefaultMetadataUpdater, Metadata, MetadataConfig, UpdaterConfig};
pub use ferrokafka_protocol as protocol;
