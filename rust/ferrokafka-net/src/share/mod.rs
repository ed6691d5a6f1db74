//! Share groups (KIP-932): queue-like consumption where the broker hands
//! each record to one member at a time under an acquisition lock, and the
//! member acknowledges it (accept, release, reject). Rules in
//! docs/semantics.md §11 (Share groups).
//!
//! Split like the consumer: sans-IO decisions in `membership` (the
//! ShareGroupHeartbeat protocol), `session` (one share session per leader:
//! ShareFetch / ShareAcknowledge bodies and their epochs), `acks` (how
//! acknowledgements become wire batches) and `core` (the glue: what to
//! send, what answers change, what poll returns); `client` is the
//! application's face and the thread that moves the bytes.

pub mod acks;
pub mod client;
pub mod config;
pub mod core;
pub mod membership;
pub mod session;

#[cfg(test)]
mod tests;
