//! Request frames as pieces, and Produce written without copying its batches.
//!
//! A Produce request is mostly record batches (up to `max_request_size`,
//! 1 MB by default), each already encoded in a buffer of its own by the
//! producer. Encoded through kafka-protocol the batches are copied into the
//! request buffer, and they were then copied again when the connection's
//! writer coalesced queued frames: at 100 B records, perf of the ceiling run
//! put those copies of data no longer in cache at about 20 ns a record, more
//! than building the batch. Here the fields around the batches are encoded
//! into small buffers and each batch is a piece of its own, written with one
//! vectored write. Every other request is one piece from `encode_request`.
//! The layout is Kafka's ProduceRequest v3-v13 (flexible from v9, topic ids
//! instead of names from v13); `tests::pieces_are_byte_for_byte_what_kafka_protocol_writes`
//! holds it to kafka-protocol's encoder for every version.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ProduceRequest, RequestKind};

use crate::frame::{encode_request, encode_request_header, RequestHeader, LENGTH_PREFIX};
use crate::primitives::put_uvarint;
use crate::{ProtocolError, Result};

/// One request frame (length prefix included) as the buffers it is written
/// from, in order.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    pub pieces: Vec<Bytes>,
}

impl Frame {
    /// Bytes in the frame.
    pub fn len(&self) -> usize {
        self.pieces.iter().map(Bytes::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The frame in one buffer (tests, tools; copies when in pieces).
    pub fn to_bytes(&self) -> Bytes {
        match self.pieces.as_slice() {
            [one] => one.clone(),
            pieces => {
                let mut b = BytesMut::with_capacity(self.len());
                for p in pieces {
                    b.extend_from_slice(p);
                }
                b.freeze()
            }
        }
    }
}

impl From<Bytes> for Frame {
    fn from(b: Bytes) -> Self {
        Frame { pieces: vec![b] }
    }
}

/// Encode a request frame: in pieces for Produce, one piece otherwise.
pub fn encode_request_frame(header: &RequestHeader, body: &RequestKind) -> Result<Frame> {
    if let RequestKind::Produce(p) = body {
        if let Some(f) = encode_produce(header, p)? {
            return Ok(f);
        }
    }
    let mut buf = BytesMut::with_capacity(64);
    encode_request(&mut buf, header, body)?;
    Ok(buf.freeze().into())
}

/// Writes fields into the current small buffer and cuts it into a piece
/// before each batch.
struct Pieces {
    pieces: Vec<Bytes>,
    cur: BytesMut,
}

impl Pieces {
    fn batch(&mut self, b: &Bytes) {
        self.pieces.push(self.cur.split().freeze());
        self.pieces.push(b.clone());
    }
}

fn too_long(what: &'static str, size: usize) -> ProtocolError {
    ProtocolError::TooLarge {
        what,
        size,
        max: i32::MAX as usize,
    }
}

/// Array length: compact (length + 1, varint) when flexible, else i32.
fn put_len(buf: &mut BytesMut, flexible: bool, n: usize, what: &'static str) -> Result<()> {
    let n32 = u32::try_from(n)
        .ok()
        .filter(|n| *n < i32::MAX as u32)
        .ok_or_else(|| too_long(what, n))?;
    if flexible {
        put_uvarint(buf, n32 + 1);
    } else {
        buf.put_i32(n32 as i32);
    }
    Ok(())
}

fn put_string(buf: &mut BytesMut, flexible: bool, s: Option<&str>) -> Result<()> {
    match (s, flexible) {
        (None, true) => put_uvarint(buf, 0),
        (None, false) => buf.put_i16(-1),
        (Some(s), true) => {
            put_len(buf, true, s.len(), "string")?;
            buf.put_slice(s.as_bytes());
        }
        (Some(s), false) => {
            let n = i16::try_from(s.len()).map_err(|_| too_long("string", s.len()))?;
            buf.put_i16(n);
            buf.put_slice(s.as_bytes());
        }
    }
    Ok(())
}

/// `None` when the request has what this encoder leaves to kafka-protocol
/// (unknown tagged fields, a version outside 3-13).
fn encode_produce(header: &RequestHeader, req: &ProduceRequest) -> Result<Option<Frame>> {
    let v = header.api_version;
    let tagged = !req.unknown_tagged_fields.is_empty()
        || req.topic_data.iter().any(|t| {
            !t.unknown_tagged_fields.is_empty()
                || t.partition_data
                    .iter()
                    .any(|p| !p.unknown_tagged_fields.is_empty())
        });
    if !(3..=13).contains(&v) || tagged {
        return Ok(None);
    }
    let flexible = v >= 9;
    let mut w = Pieces {
        pieces: Vec::with_capacity(2 * req.topic_data.len() + 2),
        cur: BytesMut::with_capacity(256),
    };
    w.cur.put_i32(0); // the length, patched below
    encode_request_header(&mut w.cur, header)?;
    put_string(
        &mut w.cur,
        flexible,
        req.transactional_id.as_deref().map(|s| s.as_str()),
    )?;
    w.cur.put_i16(req.acks);
    w.cur.put_i32(req.timeout_ms);
    put_len(&mut w.cur, flexible, req.topic_data.len(), "topics")?;
    for t in &req.topic_data {
        if v >= 13 {
            w.cur.put_slice(t.topic_id.as_bytes());
        } else {
            put_string(&mut w.cur, flexible, Some(t.name.as_str()))?;
        }
        put_len(&mut w.cur, flexible, t.partition_data.len(), "partitions")?;
        for p in &t.partition_data {
            w.cur.put_i32(p.index);
            match &p.records {
                None if flexible => put_uvarint(&mut w.cur, 0),
                None => w.cur.put_i32(-1),
                Some(r) => {
                    put_len(&mut w.cur, flexible, r.len(), "records")?;
                    w.batch(r);
                }
            }
            if flexible {
                put_uvarint(&mut w.cur, 0); // no tagged fields
            }
        }
        if flexible {
            put_uvarint(&mut w.cur, 0);
        }
    }
    if flexible {
        put_uvarint(&mut w.cur, 0);
    }
    w.pieces.push(w.cur.split().freeze());
    let mut frame = Frame { pieces: w.pieces };
    let body = frame.len() - LENGTH_PREFIX;
    let body = i32::try_from(body).map_err(|_| too_long("request", body))?;
    // The length prefix is in the first piece, which no one shares yet.
    let mut first = BytesMut::from(&frame.pieces[0][..]);
    first[..LENGTH_PREFIX].copy_from_slice(&body.to_be_bytes());
    frame.pieces[0] = first.freeze();
    Ok(Some(frame))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{TopicName, TransactionalId};
    use kafka_protocol::protocol::StrBytes;

    fn request(txn: Option<&str>) -> ProduceRequest {
        let batch = |n: u8, len: usize| Some(Bytes::from(vec![n; len]));
        let topic = |name: &str, id: u8, parts: Vec<PartitionProduceData>| {
            let mut t = TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_partition_data(parts);
            t.topic_id = uuid::Uuid::from_bytes([id; 16]);
            t
        };
        ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_transactional_id(txn.map(|t| TransactionalId(StrBytes::from_string(t.into()))))
            .with_topic_data(vec![
                topic(
                    "orders",
                    1,
                    vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(batch(7, 300)),
                        PartitionProduceData::default()
                            .with_index(3)
                            .with_records(None),
                        PartitionProduceData::default()
                            .with_index(5)
                            .with_records(batch(9, 70_000)),
                    ],
                ),
                topic(
                    "t",
                    2,
                    vec![PartitionProduceData::default()
                        .with_index(1)
                        .with_records(batch(1, 1))],
                ),
            ])
    }

    #[test]
    fn pieces_are_byte_for_byte_what_kafka_protocol_writes() {
        for version in 3..=13 {
            for txn in [None, Some("tx-1")] {
                let body = RequestKind::Produce(request(txn));
                let header = RequestHeader {
                    api_key: 0,
                    api_version: version,
                    correlation_id: 42,
                    client_id: Some("ferrokafka".into()),
                };
                let mut whole = BytesMut::new();
                encode_request(&mut whole, &header, &body).unwrap();
                let f = encode_request_frame(&header, &body).unwrap();
                assert!(
                    f.pieces.len() > 1,
                    "v{version}: the batches are pieces of their own"
                );
                assert_eq!(f.to_bytes(), whole.freeze(), "v{version} txn={txn:?}");
            }
        }
    }

    #[test]
    fn other_requests_and_unknown_tags_are_one_piece() {
        let header = RequestHeader {
            api_key: 0,
            api_version: 9,
            correlation_id: 1,
            client_id: None,
        };
        let mut r = request(None);
        r.unknown_tagged_fields.insert(7, Bytes::from_static(b"x"));
        let body = RequestKind::Produce(r);
        let f = encode_request_frame(&header, &body).unwrap();
        assert_eq!(f.pieces.len(), 1);
        let mut whole = BytesMut::new();
        encode_request(&mut whole, &header, &body).unwrap();
        assert_eq!(f.to_bytes(), whole.freeze());
    }
}
