//! The producer's settings, as the binding hands them over (already
//! defaulted and cross-checked in `_config.py`).

use crate::error::Error;
use crate::producer::partitioner::Partitioner;

#[derive(Debug, Clone)]
pub struct ProducerConfig {
    pub acks: i16,
    pub linger_ms: i64,
    pub batch_size: usize,
    pub buffer_memory: usize,
    pub max_block_ms: i64,
    pub enable_idempotence: bool,
    pub retries: u32,
    pub retry_backoff_ms: i64,
    pub retry_backoff_max_ms: i64,
    pub request_timeout_ms: i64,
    pub delivery_timeout_ms: i64,
    pub max_request_size: usize,
    /// Where records without an explicit partition go.
    pub partitioner: Partitioner,
    /// Uniform sticky (KIP-794 off) when false.
    pub partitioner_adaptive: bool,
    /// Idempotence: batches of one partition in flight at once. 1 keeps
    /// order on brokers that do not check sequences (docs/semantics.md
    /// §5.2); Kafka itself checks, so more is safe there.
    pub max_in_flight_per_partition: usize,
    /// Transactions (docs/semantics.md §7): the id, and how long the
    /// coordinator lets a transaction stay open before aborting it.
    pub transactional_id: Option<String>,
    pub transaction_timeout_ms: i32,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: -1,
            linger_ms: 5,
            batch_size: 1_000_000,
            buffer_memory: 33_554_432,
            max_block_ms: 60_000,
            enable_idempotence: true,
            retries: i32::MAX as u32,
            retry_backoff_ms: 100,
            retry_backoff_max_ms: 1000,
            request_timeout_ms: 30_000,
            delivery_timeout_ms: 120_000,
            max_request_size: 1_048_576,
            partitioner: Partitioner::default(),
            partitioner_adaptive: true,
            max_in_flight_per_partition: 1,
            transactional_id: None,
            transaction_timeout_ms: 60_000,
        }
    }
}

impl ProducerConfig {
    /// Java's checks: idempotence needs acks=all, retries > 0 and at most 5
    /// in flight; delivery timeout must cover linger + request timeout.
    /// (Which of these are errors and which quietly change a default is
    /// decided before, in `_config.py`, where it is known what the user set.)
    /// `batch_size` 0 is allowed as in Java: every record gets a batch of its
    /// own (the accumulator reserves `max(batch_size, record size)`).
    pub fn validate(&self, max_in_flight: usize) -> Result<(), Error> {
        let bad = |key: &str, detail: String| {
            Err(Error::Config {
                key: key.into(),
                detail,
            })
        };
        if ![0, 1, -1].contains(&self.acks) {
            return bad(
                "acks",
                format!("must be 0, 1 or all (-1), got {}", self.acks),
            );
        }
        if self.enable_idempotence {
            if self.acks != -1 {
                return bad(
                    "acks",
                    "must be 'all' when enable_idempotence is true".into(),
                );
            }
            if max_in_flight > 5 {
                return bad(
                    "max_in_flight_requests_per_connection",
                    format!(
                        "must be at most 5 when enable_idempotence is true, got {max_in_flight}"
                    ),
                );
            }
            if self.retries == 0 {
                return bad(
                    "retries",
                    "must be greater than 0 when enable_idempotence is true".into(),
                );
            }
        }
        if let Some(id) = &self.transactional_id {
            if id.is_empty() {
                return bad("transactional_id", "must not be empty".into());
            }
            if !self.enable_idempotence {
                // Java: "Cannot set a transactional.id without also enabling idempotence."
                return bad(
                    "enable_idempotence",
                    "must be true when transactional_id is set (transactions build on idempotence)"
                        .into(),
                );
            }
        }
        if self.transaction_timeout_ms <= 0 {
            return bad(
                "transaction_timeout_ms",
                format!("must be positive, got {}", self.transaction_timeout_ms),
            );
        }
        if self.buffer_memory < self.batch_size {
            return bad(
                "buffer_memory",
                format!("must be at least batch_size ({})", self.batch_size),
            );
        }
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms {
            return bad(
                "delivery_timeout_ms",
                format!(
                    "must be >= linger_ms + request_timeout_ms ({})",
                    self.linger_ms + self.request_timeout_ms
                ),
            );
        }
        Ok(())
    }
}
