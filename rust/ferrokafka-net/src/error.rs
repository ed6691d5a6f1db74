//! The one error enum of the client core. The bindings crate turns it into the
//! Python `KafkaError` tree in a single `From` impl.

use ferrokafka_protocol::kafka_protocol::error::ResponseError;
use ferrokafka_protocol::ProtocolError;
use thiserror::Error;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Local (client-side) error codes. They are librdkafka's negative codes, so a
/// confluent-kafka user's `err.code()` checks keep their meaning.
pub mod local_code {
    pub const BAD_MSG: i16 = -199;
    pub const BAD_COMPRESSION: i16 = -198;
    pub const DESTROY: i16 = -197;
    pub const FAIL: i16 = -196;
    pub const TRANSPORT: i16 = -195;
    pub const RESOLVE: i16 = -193;
    pub const MSG_TIMED_OUT: i16 = -192;
    pub const UNKNOWN_PARTITION: i16 = -190;
    pub const UNKNOWN_TOPIC: i16 = -188;
    pub const ALL_BROKERS_DOWN: i16 = -187;
    pub const INVALID_ARG: i16 = -186;
    pub const TIMED_OUT: i16 = -185;
    pub const QUEUE_FULL: i16 = -184;
    pub const SSL: i16 = -181;
    pub const STATE: i16 = -172;
    pub const NOT_IMPLEMENTED: i16 = -170;
    pub const AUTHENTICATION: i16 = -169;
    pub const UNSUPPORTED_FEATURE: i16 = -165;
    pub const PURGE_QUEUE: i16 = -152;
    pub const PURGE_INFLIGHT: i16 = -151;

    /// Every local code with librdkafka's name and whether a retry may
    /// clear it: the table the Python exception tree is built from.
    pub const ALL: &[(i16, &str, bool)] = &[
        (BAD_MSG, "_BAD_MSG", false),
        (BAD_COMPRESSION, "_BAD_COMPRESSION", false),
        (DESTROY, "_DESTROY", false),
        (FAIL, "_FAIL", false),
        (TRANSPORT, "_TRANSPORT", true),
        (RESOLVE, "_RESOLVE", true),
        (MSG_TIMED_OUT, "_MSG_TIMED_OUT", true),
        (UNKNOWN_PARTITION, "_UNKNOWN_PARTITION", false),
        (UNKNOWN_TOPIC, "_UNKNOWN_TOPIC", false),
        (ALL_BROKERS_DOWN, "_ALL_BROKERS_DOWN", true),
        (INVALID_ARG, "_INVALID_ARG", false),
        (TIMED_OUT, "_TIMED_OUT", true),
        (QUEUE_FULL, "_QUEUE_FULL", true),
        (SSL, "_SSL", false),
        (STATE, "_STATE", false),
        (NOT_IMPLEMENTED, "_NOT_IMPLEMENTED", false),
        (AUTHENTICATION, "_AUTHENTICATION", false),
        (UNSUPPORTED_FEATURE, "_UNSUPPORTED_FEATURE", false),
        (PURGE_QUEUE, "_PURGE_QUEUE", false),
        (PURGE_INFLIGHT, "_PURGE_INFLIGHT", false),
    ];
}

#[derive(Debug, Error, Clone)]
pub enum Error {
    /// Bytes that do not parse: a framing error, corrupt batch, bad compression.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// The broker answered with a Kafka error code.
    #[error("{error} (code {code}){}", fmt_msg(.message))]
    Broker {
        code: i16,
        error: ResponseError,
        message: Option<String>,
    },
    /// Socket-level failure: connect refused, reset, EOF, DNS.
    #[error("connection to {broker} failed: {detail}")]
    Transport { broker: String, detail: String },
    /// The request was in flight when its connection went away.
    #[error("disconnected from node {node_id} before a response arrived")]
    Disconnected { node_id: i32 },
    /// A deadline passed (request timeout, max_block_ms, await_update...).
    #[error("timed out after {timeout_ms} ms: {what}")]
    Timeout { what: String, timeout_ms: u64 },
    /// No version of an API is supported by both sides.
    #[error("{api} is not supported by node {node_id} (broker range {broker_min}..={broker_max}, client range {client_min}..={client_max})")]
    UnsupportedVersion {
        api: String,
        node_id: i32,
        broker_min: i16,
        broker_max: i16,
        client_min: i16,
        client_max: i16,
    },
    /// An option had a value we refuse; the Python layer raises ValueError.
    #[error("invalid value for {key}: {detail}")]
    Config { key: String, detail: String },
    /// The client (or the metadata) was closed while the call waited.
    #[error("{what} is closed")]
    Closed { what: &'static str },
    /// SASL or TLS refused us.
    #[error("authentication failed: {detail}")]
    Authentication { detail: String },
    /// A state-machine precondition was not met.
    #[error("illegal state: {detail}")]
    State { detail: String },
    /// The caller's interrupt check (Ctrl-C in Python) stopped a wait; the
    /// binding raises the pending KeyboardInterrupt instead of this.
    #[error("interrupted")]
    Interrupted,
    /// The record's transaction was aborted before it was sent (Java's
    /// `TransactionAbortedException`; librdkafka's `_PURGE_QUEUE`).
    #[error("transaction aborted: {detail}")]
    Aborted { detail: String },
    /// The application purged the record (`Producer.purge`): from the queue
    /// before it was sent (librdkafka's `_PURGE_QUEUE`), or while its
    /// request was in flight, whose answer is then ignored: it may or may
    /// not have been written (`_PURGE_INFLIGHT`).
    #[error("{}", if *.in_flight { "purged while in flight: it may or may not have been written" } else { "purged from the queue before it was sent" })]
    Purged { in_flight: bool },
}

fn fmt_msg(m: &Option<String>) -> String {
    match m {
        Some(m) if !m.is_empty() => format!(": {m}"),
        _ => String::new(),
    }
}

impl Error {
    pub fn broker(code: i16, message: Option<String>) -> Self {
        let error = ResponseError::try_from_code(code).unwrap_or(ResponseError::Unknown(0));
        Error::Broker {
            code,
            error,
            message,
        }
    }

    /// Kafka error code for broker errors, librdkafka local code otherwise.
    pub fn code(&self) -> i16 {
        use local_code::*;
        match self {
            Error::Protocol(ProtocolError::Compression { .. }) => BAD_COMPRESSION,
            Error::Protocol(ProtocolError::CrcMismatch { .. }) => 2, // CORRUPT_MESSAGE
            Error::Protocol(_) => BAD_MSG,
            Error::Broker { code, .. } => *code,
            Error::Transport { .. } | Error::Disconnected { .. } => TRANSPORT,
            Error::Timeout { .. } => TIMED_OUT,
            Error::UnsupportedVersion { .. } => 35, // UNSUPPORTED_VERSION
            Error::Config { .. } => INVALID_ARG,
            Error::Closed { .. } => DESTROY,
            Error::Authentication { .. } => AUTHENTICATION,
            Error::State { .. } => STATE,
            Error::Interrupted => FAIL,
            Error::Aborted { .. } => PURGE_QUEUE,
            Error::Purged { in_flight: false } => PURGE_QUEUE,
            Error::Purged { in_flight: true } => PURGE_INFLIGHT,
        }
    }

    /// Whether retrying the same operation may succeed.
    pub fn retriable(&self) -> bool {
        match self {
            Error::Broker { error, .. } => error.is_retriable(),
            Error::Transport { .. } | Error::Disconnected { .. } | Error::Timeout { .. } => true,
            Error::Protocol(ProtocolError::CrcMismatch { .. }) => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::local_code::ALL;
    use super::*;

    #[test]
    fn local_code_table_is_unique_and_agrees_with_the_errors() {
        let codes: std::collections::BTreeSet<i16> = ALL.iter().map(|e| e.0).collect();
        assert_eq!(codes.len(), ALL.len(), "one entry per code");
        assert!(ALL.iter().all(|&(c, n, _)| c < -1 && n.starts_with('_')));
        let s = String::new;
        for e in [
            Error::Transport {
                broker: s(),
                detail: s(),
            },
            Error::Disconnected { node_id: 1 },
            Error::Timeout {
                what: s(),
                timeout_ms: 1,
            },
            Error::Config {
                key: s(),
                detail: s(),
            },
            Error::Closed { what: "x" },
            Error::Authentication { detail: s() },
            Error::State { detail: s() },
            Error::Interrupted,
            Error::Purged { in_flight: false },
            Error::Purged { in_flight: true },
        ] {
            let entry = ALL.iter().find(|c| c.0 == e.code());
            let (_, name, retriable) =
                entry.unwrap_or_else(|| panic!("{e:?}: code not in the table"));
            assert_eq!(*retriable, e.retriable(), "{e:?} ({name})");
        }
    }
}
