//! Bindings of the producer. `ferrokafka.Producer` (python/ferrokafka/producer.py)
//! validates options and wraps `_Producer`; everything on the record path is
//! here and in the net crate, with the GIL released while `send` may block.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokafka_net::producer::batch::ProducerRecordBatch;
use ferrokafka_net::producer::client::{Completion, DeliveredRecord, Producer, ProducerConfig};
use ferrokafka_net::protocol::compression::Compression;
use ferrokafka_net::Error;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::PyDict;

use crate::errors::FkError;
use crate::future::{run_callbacks, CallbackQueue, DeliveryFuture, FutureCell, RecordMetadata};
use crate::gil::wait_detached;

/// Completes a Python `DeliveryFuture` from the sender thread, or one
/// record's slot of a `send_batch` call.
enum PyCompletion {
    One {
        fut: Py<DeliveryFuture>,
        cell: Arc<FutureCell>,
    },
    Batch {
        batch: Arc<BatchState>,
        index: usize,
    },
}

fn to_metadata(d: DeliveredRecord) -> RecordMetadata {
    RecordMetadata {
        topic: d.topic,
        partition: d.partition,
        offset: d.offset,
        timestamp_ms: d.timestamp_ms,
        serialized_key_size: d.key_size,
        serialized_value_size: d.value_size,
    }
}

impl Completion for PyCompletion {
    fn complete(self, result: Result<DeliveredRecord, Error>) {
        match self {
            PyCompletion::One { fut, cell } => {
                DeliveryFuture::resolve(fut, &cell, result.map(to_metadata))
            }
            PyCompletion::Batch { batch, index } => batch.complete(index, result),
        }
    }
}

/// The outcomes of one `send_batch` call: one slot per record and one
/// future (`done`) resolved when the last slot is filled, instead of a
/// Python future per record. Slots are filled on the sender thread without
/// the GIL; Python objects are made only when the caller asks for results.
pub struct BatchState {
    slots: Mutex<Vec<Option<Result<DeliveredRecord, Error>>>>,
    remaining: AtomicUsize,
    /// Taken by whoever fills the last slot.
    done: Mutex<Option<(Py<DeliveryFuture>, Arc<FutureCell>)>>,
}

impl BatchState {
    fn complete(&self, index: usize, result: Result<DeliveredRecord, Error>) {
        {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            match slots.get_mut(index) {
                // Complete once: a record may be expired and answered in the
                // same instant; the first outcome stands.
                Some(slot @ None) => *slot = Some(result),
                _ => return,
            }
        }
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.resolve_done();
        }
    }

    fn resolve_done(&self) {
        let done = self.done.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((fut, cell)) = done {
            // The batch future's own value is a placeholder; results come
            // from the slots (`_BatchResult.outcomes`).
            let m = RecordMetadata {
                topic: String::new(),
                partition: -1,
                offset: -1,
                timestamp_ms: -1,
                serialized_key_size: -1,
                serialized_value_size: -1,
            };
            DeliveryFuture::resolve(fut, &cell, Ok(m));
        }
    }
}

/// Per-record outcomes of a `send_batch` call (python/ferrokafka/producer.py
/// `BatchFuture` reads them once its `done` future has resolved).
#[pyclass(module = "ferrokafka._core", name = "_BatchResult", frozen)]
pub struct PyBatchResult {
    state: Arc<BatchState>,
}

#[pymethods]
impl PyBatchResult {
    /// One entry per record, in input order: RecordMetadata, the KafkaError
    /// instance it failed with, or None while still pending.
    fn outcomes(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        let slots = self
            .state
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        slots
            .into_iter()
            .map(|s| match s {
                None => Ok(py.None()),
                Some(Ok(d)) => Ok(Py::new(py, to_metadata(d))?.into_any()),
                Some(Err(e)) => {
                    let err: PyErr = FkError(e).into();
                    Ok(err.into_value(py).into_any())
                }
            })
            .collect()
    }

    /// (index, error) of the first failed record, None when none failed:
    /// a check of a big batch without an object per record (Spark sink).
    fn first_error(&self, py: Python<'_>) -> Option<(usize, Py<PyAny>)> {
        let slots = self.state.slots.lock().unwrap_or_else(|p| p.into_inner());
        slots.iter().enumerate().find_map(|(i, s)| match s {
            Some(Err(e)) => {
                let err: PyErr = FkError(e.clone()).into();
                Some((i, err.into_value(py).into_any()))
            }
            _ => None,
        })
    }

    fn __len__(&self) -> usize {
        self.state
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }
}

type CoreProducer = Producer<ProducerRecordBatch, PyCompletion>;

#[pyclass(module = "ferrokafka._core", name = "_Producer")]
pub struct PyProducer {
    inner: Mutex<Option<Arc<CoreProducer>>>,
    callbacks: CallbackQueue,
}

use crate::config::get;

impl PyProducer {
    fn core(&self) -> PyResult<Arc<CoreProducer>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| FkError(Error::Closed { what: "producer" }).into())
    }
}

#[pymethods]
impl PyProducer {
    /// `cfg`: the validated options (snake_case keys) from producer.py.
    #[new]
    fn new(cfg: &Bound<'_, PyDict>) -> PyResult<Self> {
        let compression_name: String = get(cfg, "compression_type")?;
        let compression = Compression::from_name(&compression_name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "invalid value for compression_type: {compression_name:?}; accepted: none, gzip, snappy, lz4, zstd"
            ))
        })?;
        let level: i32 = get(cfg, "compression_level")?;
        let level = (level >= 0).then_some(level);
        let acks: i16 = get(cfg, "acks")?;
        let max_in_flight: usize = get(cfg, "max_in_flight_requests_per_connection")?;
        let pcfg = ProducerConfig {
            acks,
            linger_ms: get(cfg, "linger_ms")?,
            batch_size: get(cfg, "batch_size")?,
            buffer_memory: get(cfg, "buffer_memory")?,
            max_block_ms: get(cfg, "max_block_ms")?,
            enable_idempotence: get(cfg, "enable_idempotence")?,
            retries: get::<i64>(cfg, "retries")?.clamp(0, u32::MAX as i64) as u32,
            retry_backoff_ms: get(cfg, "retry_backoff_ms")?,
            retry_backoff_max_ms: get(cfg, "retry_backoff_max_ms")?,
            request_timeout_ms: get(cfg, "request_timeout_ms")?,
            delivery_timeout_ms: get(cfg, "delivery_timeout_ms")?,
            max_request_size: get(cfg, "max_request_size")?,
            partitioner_adaptive: true,
            ..ProducerConfig::default()
        };
        pcfg.validate(max_in_flight).map_err(FkError)?;
        let (md, net) = crate::config::metadata_and_network(
            cfg,
            crate::config::MetadataKind::Producer,
            pcfg.request_timeout_ms,
            max_in_flight,
        )?;
        let producer = Producer::new(
            pcfg,
            md,
            net,
            Box::new(move |cap| ProducerRecordBatch::new(compression, level, cap)),
        )
        .map_err(FkError)?;
        Ok(PyProducer {
            inner: Mutex::new(Some(Arc::new(producer))),
            callbacks: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Append one record; returns its DeliveryFuture. Blocks (without the
    /// GIL) up to max_block_ms for metadata or buffer memory; a record that
    /// cannot be sent fails its own future.
    #[pyo3(signature = (topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None))]
    fn send(
        &self,
        py: Python<'_>,
        topic: PyBackedStr,
        value: Option<PyBackedBytes>,
        key: Option<PyBackedBytes>,
        partition: Option<i32>,
        timestamp_ms: Option<i64>,
        headers: Option<Vec<(PyBackedStr, Option<PyBackedBytes>)>>,
    ) -> PyResult<Py<DeliveryFuture>> {
        let core = self.core()?;
        let (fut, cell) = DeliveryFuture::new(Some(self.callbacks.clone()));
        let fut = Py::new(py, fut)?;
        let completion = PyCompletion::One {
            fut: fut.clone_ref(py),
            cell: cell.clone(),
        };
        let headers = headers.unwrap_or_default();
        let result = py.detach(|| {
            let hs: Vec<(&str, Option<&[u8]>)> =
                headers.iter().map(|(k, v)| (&**k, v.as_deref())).collect();
            core.send(
                &topic,
                partition,
                key.as_deref(),
                value.as_deref(),
                &hs,
                timestamp_ms,
                completion,
            )
        });
        if let Err((e, completion)) = result {
            if let Error::Config { .. } = e {
                return Err(FkError(e).into());
            }
            completion.complete(Err(e));
        }
        Ok(fut)
    }

    /// Append many records with one GIL release (the batch path of
    /// `send_batch`). `keys` is None or as long as `values`. Returns a future
    /// resolved when every record is done, and the per-record outcomes.
    #[pyo3(signature = (topic, values, keys=None, partition=None))]
    fn send_many(
        &self,
        py: Python<'_>,
        topic: PyBackedStr,
        values: Vec<Option<PyBackedBytes>>,
        keys: Option<Vec<Option<PyBackedBytes>>>,
        partition: Option<i32>,
    ) -> PyResult<(Py<DeliveryFuture>, PyBatchResult)> {
        check_key_count(keys.as_ref().map(Vec::len), values.len())?;
        self.send_each(py, &topic, partition, values.len(), |i| {
            (
                keys.as_ref().and_then(|k| k[i].as_deref()),
                values[i].as_deref(),
            )
        })
    }

    /// `send_many` for Arrow columns (PyCapsule interface): keys and values
    /// are read from the Arrow buffers in place, no Python object per record.
    #[pyo3(signature = (topic, values, keys=None, partition=None))]
    fn send_many_arrow(
        &self,
        py: Python<'_>,
        topic: PyBackedStr,
        values: &Bound<'_, PyAny>,
        keys: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
    ) -> PyResult<(Py<DeliveryFuture>, PyBatchResult)> {
        let values = crate::arrow::BinaryColumn::from_pycapsule(values, "values")?;
        let keys = keys
            .map(|k| crate::arrow::BinaryColumn::from_pycapsule(k, "keys"))
            .transpose()?;
        check_key_count(keys.as_ref().map(|k| k.len()), values.len())?;
        self.send_each(py, &topic, partition, values.len(), |i| {
            (keys.as_ref().and_then(|k| k.get(i)), values.get(i))
        })
    }

    /// Run delivery callbacks that are due; waits up to `timeout` seconds for
    /// at least one when none is. Returns how many ran.
    #[pyo3(signature = (timeout=0.0))]
    fn poll(&self, py: Python<'_>, timeout: f64) -> PyResult<usize> {
        let n = run_callbacks(py, &self.callbacks);
        if n > 0 || timeout <= 0.0 {
            return Ok(n);
        }
        let q = self.callbacks.clone();
        wait_detached(py, Some(Duration::from_secs_f64(timeout)), move |slice| {
            if !q.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
                return Some(());
            }
            std::thread::sleep(slice.min(Duration::from_millis(5)));
            None
        })?;
        Ok(run_callbacks(py, &self.callbacks))
    }

    /// Send everything now and wait for it (up to `timeout` seconds); runs
    /// delivery callbacks. Returns the number of records still not delivered.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<usize> {
        let core = self.core()?;
        core.begin_flush();
        let c2 = core.clone();
        let waited = wait_detached(py, timeout.map(Duration::from_secs_f64), move |slice| {
            (c2.flush_step(slice) == 0).then_some(())
        });
        core.end_flush();
        waited?;
        run_callbacks(py, &self.callbacks);
        Ok(core.pending())
    }

    fn partitions_for(&self, py: Python<'_>, topic: PyBackedStr) -> PyResult<Vec<i32>> {
        let core = self.core()?;
        py.detach(|| core.partitions_for(&topic))
            .map_err(|e| FkError(e).into())
    }

    /// The producer's live `ProducerMetadata` (shared with its sender).
    fn metadata(&self, py: Python<'_>) -> PyResult<Py<crate::metadata::PyProducerMetadata>> {
        crate::metadata::PyProducerMetadata::wrap(py, self.core()?.metadata().clone())
    }

    fn metrics(&self) -> PyResult<Vec<(&'static str, f64)>> {
        Ok(self.core()?.metrics())
    }

    /// Flush up to `timeout` seconds, then fail what is left and stop.
    #[pyo3(signature = (timeout=None))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let core = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(core) = core else { return Ok(()) };
        if timeout != Some(0.0) {
            core.begin_flush();
            let c2 = core.clone();
            let _ = wait_detached(py, timeout.map(Duration::from_secs_f64), move |slice| {
                (c2.flush_step(slice) == 0).then_some(())
            });
        }
        // Last reference: dropping closes (fails the rest, joins threads).
        py.detach(move || drop(core));
        run_callbacks(py, &self.callbacks);
        Ok(())
    }
}

impl PyProducer {
    /// Send `n` records whose key and value come from `record(i)`, with one
    /// GIL release, one metadata lookup and a few lock holds for all of them
    /// (`Producer::send_many`), and one completion future for the call.
    fn send_each<'a>(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: Option<i32>,
        n: usize,
        record: impl Fn(usize) -> (Option<&'a [u8]>, Option<&'a [u8]>) + Sync,
    ) -> PyResult<(Py<DeliveryFuture>, PyBatchResult)> {
        let core = self.core()?;
        let (fut, cell) = DeliveryFuture::new(Some(self.callbacks.clone()));
        let fut = Py::new(py, fut)?;
        let state = Arc::new(BatchState {
            slots: Mutex::new(vec![None; n]),
            remaining: AtomicUsize::new(n),
            done: Mutex::new(Some((fut.clone_ref(py), cell))),
        });
        if n == 0 {
            state.resolve_done();
        }
        let failed = py.detach(|| {
            core.send_many(topic, partition, n, &record, |index| PyCompletion::Batch {
                batch: state.clone(),
                index,
            })
        });
        if let Some((Error::Config { .. }, _)) = failed.first() {
            let (e, _) = failed.into_iter().next().expect("checked non-empty");
            return Err(FkError(e).into());
        }
        for (e, completion) in failed {
            completion.complete(Err(e));
        }
        Ok((fut, PyBatchResult { state }))
    }
}

fn check_key_count(keys: Option<usize>, values: usize) -> PyResult<()> {
    match keys {
        Some(k) if k != values => Err(PyValueError::new_err(format!(
            "invalid value for keys: {k} keys for {values} values"
        ))),
        _ => Ok(()),
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProducer>()?;
    m.add_class::<PyBatchResult>()
}
