//! Sans-IO Kafka wire protocol.
//!
//! No tokio, no pyo3: everything here turns bytes into values and back, so it
//! can be tested with plain buffers and reused by any I/O layer.
//!
//! * [`primitives`]: fixed-width ints, varints, strings/bytes/arrays (classic and
//!   compact), tagged fields, UUID.
//! * [`frame`]: length-prefixed request/response framing and headers; message
//!   bodies come from the `kafka-protocol` crate's generated schemas.
//! * [`record`]: RecordBatch v2 (and legacy MessageSet v0/v1 decode), hand-written
//!   for speed since it is the hot path.
//! * [`compression`]: gzip, snappy (raw and xerial), lz4 (Kafka framing), zstd.

pub mod codes;
pub mod compat;
pub mod compression;
pub mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod primitives;
pub mod produce_frame;
pub mod record;
pub mod sasl;

pub use error::{ProtocolError, Result};

/// Re-export of the generated message schemas so the upper crates depend on one
/// version of them through us.
pub use kafka_protocol;

/// Default cap on a single response frame (Java: no cap; librdkafka:
/// `receive.message.max.bytes`). Lengths read from the wire above this are
/// refused before anything is allocated.
pub const DEFAULT_MAX_RESPONSE_SIZE: usize = 100 * 1024 * 1024;
