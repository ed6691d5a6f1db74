//! The protocol crate's one error type. Every decoder returns these values;
//! nothing in this crate panics on input bytes.

use thiserror::Error;

pub type Result<T, E = ProtocolError> = std::result::Result<T, E>;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    /// The buffer ended before a field was complete.
    #[error("truncated {what}: needed {needed} bytes, {available} available")]
    Truncated {
        what: &'static str,
        needed: usize,
        available: usize,
    },
    /// A length or count read from the wire is above the configured cap.
    #[error("{what} of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        what: &'static str,
        size: usize,
        max: usize,
    },
    /// A field holds a value the protocol does not allow (negative length,
    /// bad UTF-8, unknown magic, overlong varint...).
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    /// A record batch whose stored CRC32C does not match its bytes.
    #[error("corrupt record batch: stored CRC {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    /// Compressing or decompressing failed.
    #[error("{codec} compression error: {detail}")]
    Compression { codec: &'static str, detail: String },
    /// An API key, version or feature we do not implement.
    #[error("unsupported {what}: {detail}")]
    Unsupported { what: &'static str, detail: String },
    /// The response's correlation id is not the one we expected next.
    #[error("correlation id mismatch: expected {expected}, got {actual}")]
    CorrelationMismatch { expected: i32, actual: i32 },
}

impl ProtocolError {
    pub fn invalid(what: &'static str, detail: impl Into<String>) -> Self {
        ProtocolError::Invalid {
            what,
            detail: detail.into(),
        }
    }

    pub fn truncated(what: &'static str, needed: usize, available: usize) -> Self {
        ProtocolError::Truncated {
            what,
            needed,
            available,
        }
    }
}
