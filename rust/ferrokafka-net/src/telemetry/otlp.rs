//! The OpenTelemetry metrics payload of PushTelemetry (KIP-714): an OTLP
//! `MetricsData` protobuf message, encoded by hand.
//!
//! Why by hand: we only ever *encode*, five message types and a dozen
//! fields, and the schema crates (`opentelemetry-proto` with prost) would
//! pull a code generator and the OpenTelemetry SDK into every build for
//! that. The field numbers are those of
//! `opentelemetry/proto/metrics/v1/metrics.proto` (cited per field); the
//! tests decode the output with a minimal reader to pin the layout.

/// One metric value as the client reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The OTLP name, e.g. `org.apache.kafka.producer.record.send.rate`.
    pub name: String,
    pub attributes: Vec<(String, String)>,
    pub value: f64,
    /// A monotonic counter (`*-total`): an OTLP Sum; otherwise a Gauge.
    pub counter: bool,
}

/// Wire types of the protobuf encoding.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn message(out: &mut Vec<u8>, field: u32, build: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    build(&mut inner);
    bytes_field(out, field, &inner);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// `KeyValue { key = 1; AnyValue value = 2 { string_value = 1 } }`
fn key_value(out: &mut Vec<u8>, field: u32, k: &str, v: &str) {
    message(out, field, |kv| {
        bytes_field(kv, 1, k.as_bytes());
        message(kv, 2, |any| bytes_field(any, 1, v.as_bytes()));
    });
}

/// `MetricsData { repeated ResourceMetrics resource_metrics = 1 }` holding one
/// resource (the client's identity attributes) with one scope.
///
/// `start_ns` is the start of the interval the counters cover (the first
/// push's start for cumulative temporality, the previous push for delta),
/// `now_ns` the time of this collection. `delta` selects
/// AGGREGATION_TEMPORALITY_DELTA (1) over CUMULATIVE (2) for counters, as
/// the subscription asks; the values given must already be deltas then.
pub fn encode(
    resource: &[(String, String)],
    points: &[Point],
    start_ns: u64,
    now_ns: u64,
    delta: bool,
) -> Vec<u8> {
    let mut out = Vec::new();
    // MetricsData.resource_metrics = 1
    message(&mut out, 1, |rm| {
        // ResourceMetrics.resource = 1 { attributes = 1 }
        message(rm, 1, |res| {
            for (k, v) in resource {
                key_value(res, 1, k, v);
            }
        });
        // ResourceMetrics.scope_metrics = 2
        message(rm, 2, |sm| {
            // ScopeMetrics.scope = 1 { name = 1 }
            message(sm, 1, |scope| bytes_field(scope, 1, b"ferrokafka"));
            for p in points {
                // ScopeMetrics.metrics = 2
                message(sm, 2, |m| {
                    bytes_field(m, 1, p.name.as_bytes()); // Metric.name = 1
                    let data_point = |dp: &mut Vec<u8>| {
                        // NumberDataPoint: start_time_unix_nano = 2, time_unix_nano = 3,
                        // as_double = 4, attributes = 7
                        if p.counter {
                            fixed64(dp, 2, start_ns);
                        }
                        fixed64(dp, 3, now_ns);
                        fixed64(dp, 4, p.value.to_bits());
                        for (k, v) in &p.attributes {
                            key_value(dp, 7, k, v);
                        }
                    };
                    if p.counter {
                        // Metric.sum = 7 { data_points = 1, aggregation_temporality = 2,
                        // is_monotonic = 3 }
                        message(m, 7, |sum| {
                            message(sum, 1, data_point);
                            tag(sum, 2, VARINT);
                            varint(sum, if delta { 1 } else { 2 });
                            tag(sum, 3, VARINT);
                            varint(sum, 1);
                        });
                    } else {
                        // Metric.gauge = 5 { data_points = 1 }
                        message(m, 5, |g| message(g, 1, data_point));
                    }
                });
            }
        });
    });
    out
}

#[cfg(test)]
pub(crate) mod reader {
    //! Just enough of a protobuf reader to check what `encode` wrote.

    #[derive(Debug, Clone, PartialEq)]
    pub enum Field<'a> {
        Varint(u64),
        Fixed64(u64),
        Bytes(&'a [u8]),
    }

    pub fn fields(mut b: &[u8]) -> Vec<(u32, Field<'_>)> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let (key, rest) = read_varint(b);
            b = rest;
            let (field, wire) = ((key >> 3) as u32, (key & 7) as u8);
            match wire {
                0 => {
                    let (v, rest) = read_varint(b);
                    b = rest;
                    out.push((field, Field::Varint(v)));
                }
                1 => {
                    let v = u64::from_le_bytes(b[..8].try_into().unwrap());
                    b = &b[8..];
                    out.push((field, Field::Fixed64(v)));
                }
                2 => {
                    let (n, rest) = read_varint(b);
                    let (v, rest) = rest.split_at(n as usize);
                    b = rest;
                    out.push((field, Field::Bytes(v)));
                }
                w => panic!("wire type {w}"),
            }
        }
        out
    }

    fn read_varint(b: &[u8]) -> (u64, &[u8]) {
        let (mut v, mut shift, mut i) = (0u64, 0, 0);
        loop {
            let byte = b[i];
            v |= u64::from(byte & 0x7f) << shift;
            i += 1;
            if byte < 0x80 {
                return (v, &b[i..]);
            }
            shift += 7;
        }
    }

    pub fn one<'a>(fs: &[(u32, Field<'a>)], n: u32) -> Field<'a> {
        fs.iter()
            .find(|(f, _)| *f == n)
            .unwrap_or_else(|| panic!("no field {n}"))
            .1
            .clone()
    }

    pub fn bytes<'a>(fs: &[(u32, Field<'a>)], n: u32) -> &'a [u8] {
        match one(fs, n) {
            Field::Bytes(b) => b,
            f => panic!("field {n} is {f:?}"),
        }
    }
}
