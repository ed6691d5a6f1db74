//! Request/response framing: the 4-byte length prefix, request header v0-v2,
//! response header v0-v1 and the correlation id. Message bodies are the
//! `kafka-protocol` crate's generated schemas; everything around them is ours.
//!
//! Wire layout (all integers big-endian):
//!
//! ```text
//! request  = length:i32 | api_key:i16 | api_version:i16 | correlation_id:i32
//!            [v1+: client_id: nullable string (i16 length, -1 = null)]
//!            [v2:  tagged fields (unsigned varint count, then tag/size/bytes)]
//!            | body
//! response = length:i32 | correlation_id:i32 [v1: tagged fields] | body
//! ```
//!
//! Hostile input: a length prefix is checked against `max_response_size`
//! (negative or above the cap -> error) *before* anything is allocated; every
//! read is bounds-checked; no function here panics on input bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::{ProtocolError, Result};

/// Size of the length prefix.
pub const LENGTH_PREFIX: usize = 4;

/// The parts of a request header the client sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    pub api_key: i16,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
}

fn api_key(key: i16) -> Result<ApiKey> {
    ApiKey::try_from(key).map_err(|_| ProtocolError::Unsupported {
        what: "api key",
        detail: key.to_string(),
    })
}

/// Header version a request of `api_key` at `version` uses (0, 1 or 2).
pub fn request_header_version(key: i16, version: i16) -> Result<i16> {
    Ok(api_key(key)?.request_header_version(version))
}

/// Header version of the matching response (0 or 1). ApiVersions answers
/// always use v0 so a client that sent a too-new version can still read them.
pub fn response_header_version(key: i16, version: i16) -> Result<i16> {
    Ok(api_key(key)?.response_header_version(version))
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

fn get_uvarint(buf: &mut Bytes, what: &'static str) -> Result<u32> {
    let mut out: u32 = 0;
    for i in 0..5 {
        if !buf.has_remaining() {
            return Err(ProtocolError::truncated(what, 1, 0));
        }
        let b = buf.get_u8();
        // The fifth byte may only carry the top 4 bits of a u32.
        if i == 4 && b > 0x0f {
            return Err(ProtocolError::invalid(
                what,
                "unsigned varint overflows 32 bits",
            ));
        }
        out |= ((b & 0x7f) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(ProtocolError::invalid(
        what,
        "unsigned varint longer than 5 bytes",
    ))
}

/// Writes the header only (no length prefix).
pub fn encode_request_header(buf: &mut BytesMut, header: &RequestHeader) -> Result<()> {
    let hv = request_header_version(header.api_key, header.api_version)?;
    buf.put_i16(header.api_key);
    buf.put_i16(header.api_version);
    buf.put_i32(header.correlation_id);
    if hv >= 1 {
        // client_id stays a classic nullable string even in the flexible v2
        // header (KIP-482 kept it so brokers can parse it before knowing the version).
        match &header.client_id {
            None => buf.put_i16(-1),
            Some(s) => {
                let len = i16::try_from(s.len()).map_err(|_| ProtocolError::TooLarge {
                    what: "client id",
                    size: s.len(),
                    max: i16::MAX as usize,
                })?;
                buf.put_i16(len);
                buf.put_slice(s.as_bytes());
            }
        }
    }
    if hv >= 2 {
        put_uvarint(buf, 0); // no tagged fields
    }
    Ok(())
}

/// Appends one complete request frame (length prefix, header, body) to `buf`.
/// The length is patched in after the body is written, so the body is encoded
/// once, straight into the output buffer.
pub fn encode_request(
    buf: &mut BytesMut,
    header: &RequestHeader,
    body: &RequestKind,
) -> Result<()> {
    let start = buf.len();
    buf.put_i32(0);
    encode_request_header(buf, header)?;
    body.encode(buf, header.api_version).map_err(|e| {
        buf.truncate(start);
        ProtocolError::invalid("request body", e.to_string())
    })?;
    let len = buf.len() - start - LENGTH_PREFIX;
    let len = i32::try_from(len).map_err(|_| ProtocolError::TooLarge {
        what: "request",
        size: len,
        max: i32::MAX as usize,
    })?;
    buf[start..start + LENGTH_PREFIX].copy_from_slice(&len.to_be_bytes());
    Ok(())
}

/// Reads a request header back (for tests, tools and fake brokers).
pub fn decode_request_header(frame: &mut Bytes) -> Result<RequestHeader> {
    if frame.remaining() < 8 {
        return Err(ProtocolError::truncated(
            "request header",
            8,
            frame.remaining(),
        ));
    }
    let api_key_v = frame.get_i16();
    let api_version = frame.get_i16();
    let correlation_id = frame.get_i32();
    let hv = request_header_version(api_key_v, api_version)?;
    let mut client_id = None;
    if hv >= 1 {
        if frame.remaining() < 2 {
            return Err(ProtocolError::truncated(
                "client id length",
                2,
                frame.remaining(),
            ));
        }
        let len = frame.get_i16();
        if len >= 0 {
            let len = len as usize;
            if frame.remaining() < len {
                return Err(ProtocolError::truncated(
                    "client id",
                    len,
                    frame.remaining(),
                ));
            }
            let s = frame.split_to(len);
            client_id = Some(
                String::from_utf8(s.to_vec())
                    .map_err(|e| ProtocolError::invalid("client id", e.to_string()))?,
            );
        } else if len != -1 {
            return Err(ProtocolError::invalid("client id length", len.to_string()));
        }
    }
    if hv >= 2 {
        skip_tagged_fields(frame, "request header tagged fields")?;
    }
    Ok(RequestHeader {
        api_key: api_key_v,
        api_version,
        correlation_id,
        client_id,
    })
}

fn skip_tagged_fields(buf: &mut Bytes, what: &'static str) -> Result<()> {
    let n = get_uvarint(buf, what)?;
    for _ in 0..n {
        let _tag = get_uvarint(buf, what)?;
        let size = get_uvarint(buf, what)? as usize;
        if buf.remaining() < size {
            return Err(ProtocolError::truncated(what, size, buf.remaining()));
        }
        buf.advance(size);
    }
    Ok(())
}

/// Validates a length prefix read from the wire. Negative or above `max`
/// is an error; this runs before any buffer is sized by the value.
pub fn check_frame_length(raw: i32, max: usize) -> Result<usize> {
    if raw < 0 {
        return Err(ProtocolError::invalid(
            "frame length",
            format!("negative length {raw}"),
        ));
    }
    let len = raw as usize;
    if len > max {
        return Err(ProtocolError::TooLarge {
            what: "response frame",
            size: len,
            max,
        });
    }
    Ok(len)
}

/// The most [`FrameDecoder::decode`] reserves for a partial frame beyond the
/// bytes already buffered, while fewer than this have arrived (see there).
pub const RESERVE_CHUNK: usize = 1 << 20;

/// Incremental splitter of a byte stream into frames (without their prefix).
///
/// The reader appends socket bytes to a `BytesMut` and calls `decode` until it
/// returns `Ok(None)`. Each frame is split off the front without copying
/// (`BytesMut::split_to().freeze()`), so a body decoded from it can borrow the
/// socket buffer (the record batch path relies on that).
#[derive(Debug, Clone)]
pub struct FrameDecoder {
    max_frame: usize,
}

impl FrameDecoder {
    pub fn new(max_frame: usize) -> Self {
        FrameDecoder { max_frame }
    }

    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Next complete frame, `Ok(None)` if more bytes are needed. After an
    /// `Err` the stream is unrecoverable (we no longer know where frames
    /// start): the caller must close the connection.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>> {
        if buf.len() < LENGTH_PREFIX {
            return Ok(None);
        }
        let raw = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let len = check_frame_length(raw, self.max_frame)?;
        if buf.len() < LENGTH_PREFIX + len {
            // Room for the rest of the frame, up to RESERVE_CHUNK (1 MiB) or
            // as much as has arrived, whichever is more. The length is the
            // peer's word: reserving all of it up front let a peer that
            // sends a 4-byte prefix just under the cap (100 MiB by default)
            // and then stalls pin that much address space per connection
            // (20 such connections: 2 GiB; with strict overcommit the
            // allocation fails and aborts the process); this way it pins
            // 1 MiB, and memory stays within ~2x of what actually arrived.
            // A frame up to 1 MiB (a default fetch answer) gets its whole
            // room at once, so the socket is read into it in large reads
            // with no reallocation: grown 64 KiB at a time, such answers
            // were reallocated and copied as they arrived, and read in
            // smaller pieces (`thread_cpu.py poll_arrow`, six runs each
            // alternating builds: CPU a record, median 0.142 -> 0.131 µs;
            // with the whole frame reserved, 0.158 -> 0.136).
            let missing = LENGTH_PREFIX + len - buf.len();
            buf.reserve(missing.min(RESERVE_CHUNK.max(buf.len())));
            return Ok(None);
        }
        buf.advance(LENGTH_PREFIX);
        Ok(Some(buf.split_to(len).freeze()))
    }
}

/// Correlation id of a response frame, without consuming it.
pub fn peek_correlation_id(frame: &[u8]) -> Result<i32> {
    if frame.len() < 4 {
        return Err(ProtocolError::truncated(
            "response correlation id",
            4,
            frame.len(),
        ));
    }
    Ok(i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]))
}

/// Strips the response header (v0 or v1) off `frame`, returning its
/// correlation id; `frame` is left holding the body.
pub fn decode_response_header(frame: &mut Bytes, header_version: i16) -> Result<i32> {
    let cid = peek_correlation_id(frame)?;
    frame.advance(4);
    if header_version >= 1 {
        skip_tagged_fields(frame, "response header tagged fields")?;
    }
    Ok(cid)
}

/// UNSUPPORTED_VERSION.
pub const UNSUPPORTED_VERSION: i16 = 35;

/// Decodes a response body of `key` at `version`.
///
/// ApiVersions is special (KIP-511): when the broker does not support the
/// version we sent it answers UNSUPPORTED_VERSION *in v0 format* with its own
/// ApiVersions range in the key list, so an error code of 35 means "decode as
/// v0". Every ApiVersions version starts with the error code, so we can peek.
pub fn decode_response_body(
    key: i16,
    version: i16,
    mut body: Bytes,
) -> Result<(ResponseKind, i16)> {
    let k = api_key(key)?;
    if k == ApiKey::ApiVersions
        && version > 0
        && body.len() >= 2
        && i16::from_be_bytes([body[0], body[1]]) == UNSUPPORTED_VERSION
    {
        // Kafka brokers answer in v0 format; librdkafka's mock cluster
        // answers in the version we sent. Try v0 first, then ours.
        let mut v0 = body.clone();
        if let Ok(r) = ResponseKind::decode(k, &mut v0, 0) {
            return Ok((r, 0));
        }
    }
    let raw = body.clone();
    let decoded = match ResponseKind::decode(k, &mut body, version) {
        Ok(d) => d,
        Err(e) => {
            if let Some(r) = group_error_answer(k, version, &raw) {
                return Ok((r, version));
            }
            log::debug!(target: "ferrokafka::protocol", "undecodable {k:?} v{version}: {raw:02x?}");
            return Err(ProtocolError::invalid(
                "response body",
                format!("{k:?} v{version}: {e}"),
            ));
        }
    };
    Ok((decoded, version))
}

/// A JoinGroup or SyncGroup *error* answer whose other fields do not follow
/// the schema, read for its error code alone.
///
/// librdkafka's mock cluster (and so any broker built the same way) answers
/// a failed JoinGroup with null ProtocolName/MemberId and a failed SyncGroup
/// with a null Assignment, fields that are not nullable at the versions it
/// speaks. Java would throw; librdkafka reads the error code first. When the
/// code is readable and non-zero, the rest carries nothing we use, and
/// knowing it is REBALANCE_IN_PROGRESS rather than "undecodable" decides
/// whether the member rejoins at once or hunts for a new coordinator. A
/// success (code 0) must still decode in full: there the fields matter.
/// MEMBER_ID_REQUIRED (79) also needs its member id, so it is not read here.
fn group_error_answer(k: ApiKey, version: i16, body: &[u8]) -> Option<ResponseKind> {
    use kafka_protocol::messages::{JoinGroupResponse, SyncGroupResponse};
    // Both bodies begin with throttle_time_ms (JoinGroup v2+, SyncGroup v1+)
    // and then error_code.
    let throttled = match k {
        ApiKey::JoinGroup => version >= 2,
        ApiKey::SyncGroup => version >= 1,
        _ => return None,
    };
    let at = if throttled { 4 } else { 0 };
    let code = i16::from_be_bytes(body.get(at..at + 2)?.try_into().ok()?);
    if code == 0 || code == 79 {
        return None;
    }
    let throttle = if throttled {
        i32::from_be_bytes(body[..4].try_into().ok()?)
    } else {
        0
    };
    Some(match k {
        ApiKey::JoinGroup => ResponseKind::JoinGroup(
            JoinGroupResponse::default()
                .with_throttle_time_ms(throttle)
                .with_error_code(code)
                .with_generation_id(-1),
        ),
        _ => ResponseKind::SyncGroup(
            SyncGroupResponse::default()
                .with_throttle_time_ms(throttle)
                .with_error_code(code),
        ),
    })
}

/// A whole response frame (without length prefix): header then body.
/// Returns `(correlation_id, body, version actually decoded)`.
pub fn decode_response(
    key: i16,
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, ResponseKind, i16)> {
    let hv = response_header_version(key, version)?;
    let cid = decode_response_header(&mut frame, hv)?;
    let (body, v) = decode_response_body(key, version, frame)?;
    Ok((cid, body, v))
}

/// The APIs the client speaks and the version range it implements for each
/// (the `kafka-protocol` schema range, capped where we have not tested newer
/// versions against a broker).
pub fn client_version_range(key: i16) -> Option<(i16, i16)> {
    let k = ApiKey::try_from(key).ok()?;
    let r = k.valid_versions();
    Some((r.min, r.max))
}

/// The message kinds the issue lists, in API-key order.
pub const CORE_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::SyncGroup,
    ApiKey::DescribeGroups,
    ApiKey::ListGroups,
    ApiKey::SaslHandshake,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::InitProducerId,
    ApiKey::SaslAuthenticate,
];

/// The API key of a request value.
pub fn request_api_key(req: &RequestKind) -> i16 {
    use RequestKind as R;
    let k = match req {
        R::Produce(_) => ApiKey::Produce,
        R::Fetch(_) => ApiKey::Fetch,
        R::ListOffsets(_) => ApiKey::ListOffsets,
        R::Metadata(_) => ApiKey::Metadata,
        R::OffsetCommit(_) => ApiKey::OffsetCommit,
        R::OffsetFetch(_) => ApiKey::OffsetFetch,
        R::FindCoordinator(_) => ApiKey::FindCoordinator,
        R::JoinGroup(_) => ApiKey::JoinGroup,
        R::Heartbeat(_) => ApiKey::Heartbeat,
        R::LeaveGroup(_) => ApiKey::LeaveGroup,
        R::SyncGroup(_) => ApiKey::SyncGroup,
        R::DescribeGroups(_) => ApiKey::DescribeGroups,
        R::ListGroups(_) => ApiKey::ListGroups,
        R::SaslHandshake(_) => ApiKey::SaslHandshake,
        R::ApiVersions(_) => ApiKey::ApiVersions,
        R::CreateTopics(_) => ApiKey::CreateTopics,
        R::DeleteTopics(_) => ApiKey::DeleteTopics,
        R::DeleteRecords(_) => ApiKey::DeleteRecords,
        R::InitProducerId(_) => ApiKey::InitProducerId,
        R::OffsetForLeaderEpoch(_) => ApiKey::OffsetForLeaderEpoch,
        R::AddPartitionsToTxn(_) => ApiKey::AddPartitionsToTxn,
        R::AddOffsetsToTxn(_) => ApiKey::AddOffsetsToTxn,
        R::EndTxn(_) => ApiKey::EndTxn,
        R::TxnOffsetCommit(_) => ApiKey::TxnOffsetCommit,
        R::DescribeConfigs(_) => ApiKey::DescribeConfigs,
        R::AlterConfigs(_) => ApiKey::AlterConfigs,
        R::SaslAuthenticate(_) => ApiKey::SaslAuthenticate,
        R::CreatePartitions(_) => ApiKey::CreatePartitions,
        R::DeleteGroups(_) => ApiKey::DeleteGroups,
        R::IncrementalAlterConfigs(_) => ApiKey::IncrementalAlterConfigs,
        R::OffsetDelete(_) => ApiKey::OffsetDelete,
        R::DescribeCluster(_) => ApiKey::DescribeCluster,
        R::DescribeProducers(_) => ApiKey::DescribeProducers,
        R::DescribeTransactions(_) => ApiKey::DescribeTransactions,
        R::ListTransactions(_) => ApiKey::ListTransactions,
        R::ConsumerGroupHeartbeat(_) => ApiKey::ConsumerGroupHeartbeat,
        R::ConsumerGroupDescribe(_) => ApiKey::ConsumerGroupDescribe,
        R::DescribeTopicPartitions(_) => ApiKey::DescribeTopicPartitions,
        R::GetTelemetrySubscriptions(_) => ApiKey::GetTelemetrySubscriptions,
        R::PushTelemetry(_) => ApiKey::PushTelemetry,
        R::ShareGroupHeartbeat(_) => ApiKey::ShareGroupHeartbeat,
        R::ShareFetch(_) => ApiKey::ShareFetch,
        R::ShareAcknowledge(_) => ApiKey::ShareAcknowledge,
        _ => return -1,
    };
    k as i16
}

#[cfg(test)]
mod tests;
