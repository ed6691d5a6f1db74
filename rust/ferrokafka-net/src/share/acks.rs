//! Acknowledgements and their wire form (docs/semantics.md
//! §11.5): per partition a map offset -> type, sent as batches of
//! consecutive offsets that share one type.

use std::collections::BTreeMap;

/// KIP-932's acknowledge types (the wire values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AckType {
    /// An acquired offset with no record behind it (a control record, a
    /// compacted hole): acknowledged so the broker can move on.
    Gap = 0,
    Accept = 1,
    Release = 2,
    Reject = 3,
}

impl AckType {
    pub fn from_name(s: &str) -> Option<AckType> {
        match s.to_ascii_uppercase().as_str() {
            "ACCEPT" => Some(AckType::Accept),
            "RELEASE" => Some(AckType::Release),
            "REJECT" => Some(AckType::Reject),
            _ => None,
        }
    }

    pub fn wire(self) -> i8 {
        self as i8
    }
}

/// (first offset, last offset, type): one acknowledgement batch.
pub type AckBatch = (i64, i64, i8);

/// Runs of consecutive offsets with the same type become one batch with a
/// single type, the most compact form every broker version accepts.
pub fn batches(acks: &BTreeMap<i64, AckType>) -> Vec<AckBatch> {
    let mut out: Vec<AckBatch> = Vec::new();
    for (&off, &t) in acks {
        match out.last_mut() {
            Some((_, last, ty)) if *last + 1 == off && *ty == t.wire() => *last = off,
            _ => out.push((off, off, t.wire())),
        }
    }
    out
}
