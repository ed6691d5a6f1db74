//! Tokio network core: per-broker connections, ApiVersions negotiation, the
//! in-flight request deque, timeouts and reconnect backoff, and the cluster
//! metadata state machine that the selector consults without the GIL.

pub mod admin;
pub mod blocking;
pub mod cluster;
pub mod consumer;
pub mod driver;
pub mod error;
pub mod events;
#[doc(hidden)]
pub mod fuzzing;
pub mod inflight;
pub mod log_context;
pub mod metadata;
pub mod network_client;
pub mod options;
pub mod producer;
pub mod security;
pub mod selector;
pub mod share;
pub mod simple_updater;
pub mod states;
pub mod telemetry;
pub mod updater;
pub mod wait;

pub use blocking::BlockingClient;
pub use driver::AsyncClient;
pub use network_client::{
    ClientConfig, ClientRequest, ClientResponse, Event, NetworkClient, Transport, WriteOutcome,
};
pub use selector::Selector;
pub use states::ConnectionState;

pub use error::{Error, Result};
pub use ferrokafka_protocol as protocol;
pub use metadata::{DefaultMetadataUpdater, Metadata, MetadataConfig, UpdaterConfig};
