//! `encode_record_batch` / `decode_record_batch`: the record batch codec for
//! tests and tools (the producer and consumer use the Rust codec directly).
//!
//! The GIL is held only to read Python inputs and build Python results; CRC,
//! compression and decompression, the expensive parts, run detached.

use crate::errors::FkError;
use crate::gil::detached;
use ferrokafka_protocol::compression::Compression;
use ferrokafka_protocol::record::{
    Batch, BatchHeader, Batches, DecodeOptions, Header, OwnedRecord, RecordBatch,
    RecordBatchBuilder,
};
use ferrokafka_protocol::ProtocolError;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};
use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

/// One decoded record, with the batch-level facts a tool usually wants.
#[pyclass(module = "ferrokafka._core", name = "Record", frozen)]
pub struct PyRecord {
    #[pyo3(get)]
    offset: i64,
    #[pyo3(get)]
    timestamp_ms: i64,
    /// -1 none (magic 0), 0 CreateTime, 1 LogAppendTime, as Java's `TimestampType.id`.
    #[pyo3(get)]
    timestamp_type: i8,
    #[pyo3(get)]
    key: Option<Py<PyBytes>>,
    #[pyo3(get)]
    value: Option<Py<PyBytes>>,
    #[pyo3(get)]
    headers: Py<PyList>,
    #[pyo3(get)]
    magic: i8,
    #[pyo3(get)]
    compression: &'static str,
    #[pyo3(get)]
    producer_id: i64,
    #[pyo3(get)]
    producer_epoch: i16,
    /// Sequence number of this record (batch base sequence + offset delta), or -1.
    #[pyo3(get)]
    sequence: i32,
    #[pyo3(get)]
    partition_leader_epoch: i32,
    #[pyo3(get)]
    is_transactional: bool,
    #[pyo3(get)]
    is_control: bool,
}

#[pymethods]
impl PyRecord {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let show = |b: &Option<Py<PyBytes>>| -> PyResult<String> {
            match b {
                None => Ok("None".into()),
                Some(b) => Ok(b.bind(py).repr()?.to_string()),
            }
        };
        Ok(format!(
            "Record(offset={}, timestamp_ms={}, key={}, value={}, headers={})",
            self.offset,
            self.timestamp_ms,
            show(&self.key)?,
            show(&self.value)?,
            self.headers.bind(py).repr()?
        ))
    }
}

fn opt_bytes(py: Python<'_>, b: Option<&[u8]>) -> Option<Py<PyBytes>> {
    b.map(|b| PyBytes::new(py, b).unbind())
}

struct BatchMeta {
    magic: i8,
    compression: &'static str,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    partition_leader_epoch: i32,
    transactional: bool,
    control: bool,
}

impl BatchMeta {
    fn v2(h: &BatchHeader) -> Result<Self, ProtocolError> {
        Ok(BatchMeta {
            magic: h.magic,
            compression: h.compression()?.name(),
            producer_id: h.producer_id,
            producer_epoch: h.producer_epoch,
            base_sequence: h.base_sequence,
            partition_leader_epoch: h.partition_leader_epoch,
            transactional: h.is_transactional(),
            control: h.is_control(),
        })
    }

    fn sequence(&self, offset_delta: i64) -> i32 {
        if self.base_sequence < 0 {
            -1
        } else {
            // Sequences wrap at i32::MAX like the Java DefaultRecordBatch.
            ((self.base_sequence as i64 + offset_delta) % (i32::MAX as i64 + 1)) as i32
        }
    }
}

enum Decoded<'a> {
    V2 {
        batch: RecordBatch<'a>,
        payload: Cow<'a, [u8]>,
    },
    Legacy {
        magic: i8,
        compression: &'static str,
        records: Vec<OwnedRecord>,
    },
}

/// Decode every batch (v2 or legacy v0/v1) in `data`, e.g. a Fetch
/// response's records blob. A truncated trailing batch is dropped silently, as
/// brokers send partial last batches. Control batches are skipped unless
/// `include_control`.
#[pyfunction]
#[pyo3(signature = (data, *, verify_crc = true, include_control = false, max_decompressed = ferrokafka_protocol::compression::DEFAULT_MAX_DECOMPRESSED))]
pub fn decode_record_batch<'py>(
    py: Python<'py>,
    data: &[u8],
    verify_crc: bool,
    include_control: bool,
    max_decompressed: usize,
) -> PyResult<Bound<'py, PyList>> {
    let opts = DecodeOptions {
        verify_crc,
        max_decompressed,
    };
    // Heavy part (CRC, decompression) without the GIL.
    let decoded: Vec<Decoded<'_>> = detached(py, || -> Result<_, ProtocolError> {
        let mut out = Vec::new();
        for b in Batches::new(data, opts) {
            match b? {
                Batch::V2(batch) => {
                    if batch.header.is_control() && !include_control {
                        continue;
                    }
                    let payload = batch.payload(&opts)?;
                    out.push(Decoded::V2 { batch, payload });
                }
                Batch::Legacy(m) => {
                    let mut records = Vec::new();
                    m.decode_into(&opts, &mut records)?;
                    let compression = m.compression()?.name();
                    out.push(Decoded::Legacy {
                        magic: m.magic,
                        compression,
                        records,
                    });
                }
            }
        }
        Ok(out)
    })
    .map_err(fk)?;

    let list = PyList::empty(py);
    for d in &decoded {
        match d {
            Decoded::V2 { batch, payload } => {
                let meta = BatchMeta::v2(&batch.header).map_err(fk)?;
                let tt = batch.header.timestamp_type().id();
                for rec in batch.records(payload).map_err(fk)? {
                    let rec = rec.map_err(fk)?;
                    let headers = PyList::empty(py);
                    for h in &rec.headers {
                        headers.append((h.key, opt_bytes(py, h.value)))?;
                    }
                    let r = PyRecord {
                        offset: rec.offset,
                        timestamp_ms: rec.timestamp,
                        timestamp_type: tt,
                        key: opt_bytes(py, rec.key),
                        value: opt_bytes(py, rec.value),
                        headers: headers.unbind(),
                        magic: meta.magic,
                        compression: meta.compression,
                        producer_id: meta.producer_id,
                        producer_epoch: meta.producer_epoch,
                        sequence: meta.sequence(rec.offset.wrapping_sub(batch.header.base_offset)),
                        partition_leader_epoch: meta.partition_leader_epoch,
                        is_transactional: meta.transactional,
                        is_control: meta.control,
                    };
                    list.append(Py::new(py, r)?)?;
                }
            }
            Decoded::Legacy {
                magic,
                compression,
                records,
            } => {
                for rec in records {
                    let r = PyRecord {
                        offset: rec.offset,
                        timestamp_ms: rec.timestamp,
                        timestamp_type: rec.timestamp_type.id(),
                        key: opt_bytes(py, rec.key.as_deref()),
                        value: opt_bytes(py, rec.value.as_deref()),
                        headers: PyList::empty(py).unbind(),
                        magic: *magic,
                        compression,
                        producer_id: -1,
                        producer_epoch: -1,
                        sequence: -1,
                        partition_leader_epoch: -1,
                        is_transactional: false,
                        is_control: false,
                    };
                    list.append(Py::new(py, r)?)?;
                }
            }
        }
    }
    Ok(list)
}

/// Bytes-like or None; str is taken as UTF-8 for convenience. Copied, so the
/// encode can run without the GIL.
fn field(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<Vec<u8>>> {
    if obj.is_none() {
        return Ok(None);
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Some(b.as_bytes().to_vec()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Some(s.to_str()?.as_bytes().to_vec()));
    }
    match obj.extract::<Vec<u8>>() {
        Ok(v) => Ok(Some(v)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "record {what} must be bytes, str or None, not {}",
            obj.get_type().name()?
        ))),
    }
}

struct InRecord {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp: Option<i64>,
}

/// key, value, headers, timestamp_ms as given (headers/timestamp may be absent).
type RawFields<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<Bound<'py, PyAny>>,
    Option<Bound<'py, PyAny>>,
);

fn parse_record(obj: &Bound<'_, PyAny>) -> PyResult<InRecord> {
    let (key, value, headers, ts): RawFields<'_> = if let Ok(t) = obj.cast::<PyTuple>() {
        let n = t.len();
        if !(2..=4).contains(&n) {
            return Err(PyValueError::new_err(
                "a record tuple is (key, value[, headers[, timestamp_ms]])",
            ));
        }
        (
            t.get_item(0)?,
            t.get_item(1)?,
            t.get_item(2).ok(),
            t.get_item(3).ok(),
        )
    } else if let Ok(d) = obj.cast::<PyDict>() {
        let py = obj.py();
        let get = |k: &str| -> PyResult<Bound<PyAny>> {
            Ok(d.get_item(k)?.unwrap_or_else(|| py.None().into_bound(py)))
        };
        (
            get("key")?,
            get("value")?,
            d.get_item("headers")?,
            d.get_item("timestamp_ms")?,
        )
    } else {
        (
            obj.getattr("key")?,
            obj.getattr("value")?,
            obj.getattr("headers").ok(),
            obj.getattr("timestamp_ms").ok(),
        )
    };
    let mut hs = Vec::new();
    if let Some(h) = headers.filter(|h| !h.is_none()) {
        // Accept a dict or any iterable of (str, bytes|None) pairs.
        let items = match h.cast::<PyDict>() {
            Ok(d) => d.items().into_any(),
            Err(_) => h,
        };
        for item in items.try_iter()? {
            let (k, v): (String, Bound<PyAny>) = item?.extract()?;
            hs.push((k, field(&v, "header value")?));
        }
    }
    let timestamp = match ts.filter(|t| !t.is_none()) {
        Some(t) => Some(t.extract::<i64>()?),
        None => None,
    };
    Ok(InRecord {
        key: field(&key, "key")?,
        value: field(&value, "value")?,
        headers: hs,
        timestamp,
    })
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Encode records into one RecordBatch v2. `records` are `(key, value[,
/// headers[, timestamp_ms]])` tuples, dicts or objects with those attributes;
/// headers are `[(str, bytes | None)]` or a dict. Records without a timestamp
/// get the current time.
#[pyfunction]
#[pyo3(signature = (
    records, compression = "none", base_offset = 0, *, compression_level = None,
    producer_id = -1, producer_epoch = -1, base_sequence = -1, transactional = false,
    partition_leader_epoch = -1, log_append_time = false,
))]
#[allow(clippy::too_many_arguments)]
pub fn encode_record_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    compression: &str,
    base_offset: i64,
    compression_level: Option<i32>,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
    partition_leader_epoch: i32,
    log_append_time: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let codec = Compression::from_name(compression).ok_or_else(|| {
        PyValueError::new_err(format!(
            "invalid value for compression: {compression:?} (accepted: none, gzip, snappy, lz4, zstd)"
        ))
    })?;
    let mut parsed = Vec::new();
    for r in records.try_iter()? {
        parsed.push(parse_record(&r?)?);
    }
    let default_ts = now_ms();
    let batch = detached(py, move || -> Result<_, ProtocolError> {
        let mut b = RecordBatchBuilder::with_capacity(codec, 256 + parsed.len() * 64)
            .compression_level(compression_level)
            .base_offset(base_offset)
            .producer(producer_id, producer_epoch, base_sequence)
            .transactional(transactional)
            .partition_leader_epoch(partition_leader_epoch)
            .log_append_time(log_append_time);
        let mut headers = Vec::new();
        for r in &parsed {
            headers.clear();
            headers.extend(r.headers.iter().map(|(k, v)| Header {
                key: k,
                value: v.as_deref(),
            }));
            b.append(
                r.timestamp.unwrap_or(default_ts),
                r.key.as_deref(),
                r.value.as_deref(),
                &headers,
            )?;
        }
        b.finish()
    })
    .map_err(fk)?;
    Ok(PyBytes::new(py, &batch))
}

/// Corrupt or unencodable bytes become a `ferrokafka.KafkaError` subclass.
fn fk(e: ProtocolError) -> PyErr {
    PyErr::from(FkError::from(e))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecord>()?;
    m.add_function(wrap_pyfunction!(encode_record_batch, m)?)?;
    m.add_function(wrap_pyfunction!(decode_record_batch, m)?)?;
    Ok(())
}
