//! `_ShareConsumer`: the bindings of `ferrokafka_net::share::client::ShareConsumer`
//! (KIP-932 share groups). Records come out as `Message` with `delivery_count`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferrokafka_net::cluster::TopicPartition;
use ferrokafka_net::consumer::client::RecordSlice;
use ferrokafka_net::error::Error;
use ferrokafka_net::options::Client;
use ferrokafka_net::share::acks::AckType;
use ferrokafka_net::share::client::ShareConsumer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::consumer::{message, ArrowBatch, PyMessage};
use crate::errors::FkError;
use crate::gil::interruptible;
use crate::types::PyTopicPartition;

/// Per-partition commit outcome: the partition and None or the error object.
type CommitOutcome = Vec<(PyTopicPartition, Option<Py<PyAny>>)>;

#[pyclass(module = "ferrokafka._core", name = "_ShareConsumer")]
pub struct PyShareConsumer {
    inner: Mutex<Option<Arc<ShareConsumer>>>,
}

impl PyShareConsumer {
    fn core(&self) -> PyResult<Arc<ShareConsumer>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| {
                FkError(Error::Closed {
                    what: "share consumer",
                })
                .into()
            })
    }
}

fn ms(timeout_ms: i64) -> Duration {
    Duration::from_millis(timeout_ms.max(0) as u64)
}

fn err(e: Error) -> PyErr {
    FkError(e).into()
}

#[pymethods]
impl PyShareConsumer {
    /// `cfg`: the validated options (snake_case keys) from share.py.
    #[new]
    fn new(cfg: &Bound<'_, PyDict>) -> PyResult<Self> {
        crate::logbridge::refresh_level(cfg.py());
        let e = crate::config::effective(Client::ShareConsumer, cfg)?;
        let scfg = e
            .share
            .clone()
            .ok_or_else(|| PyValueError::new_err("not a share consumer configuration"))?;
        let (md, net) = crate::config::metadata_and_network(&e)?;
        let sc = ShareConsumer::new(scfg, md, net).map_err(err)?;
        Ok(PyShareConsumer {
            inner: Mutex::new(Some(Arc::new(sc))),
        })
    }

    fn subscribe(&self, topics: Vec<String>) -> PyResult<()> {
        self.core()?.subscribe(topics).map_err(err)
    }

    fn unsubscribe(&self) -> PyResult<()> {
        self.core()?.unsubscribe().map_err(err)
    }

    fn subscription(&self) -> PyResult<Vec<String>> {
        Ok(self.core()?.subscription())
    }

    #[pyo3(signature = (timeout_ms=0, max_records=500))]
    fn poll(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
    ) -> PyResult<Vec<Py<PyMessage>>> {
        let core = self.core()?;
        let batches = interruptible(py, |interrupted| {
            core.poll(max_records, ms(timeout_ms), interrupted)
        })?
        .map_err(err)?;
        let mut out = Vec::with_capacity(batches.iter().map(|b| b.rows.len()).sum());
        for b in batches {
            let topic = PyString::new(py, &b.tp.topic).unbind();
            for (&row, &dc) in b.rows.iter().zip(&b.delivery_counts) {
                out.push(message(py, &topic, b.tp.partition, &b.cols, row, Some(dc))?);
            }
        }
        Ok(out)
    }

    /// Like `poll`, with the records as one Arrow batch (the consumer's
    /// columns) and their delivery counts, in the batch's row order.
    #[pyo3(signature = (timeout_ms=0, max_records=500))]
    fn poll_arrow(
        &self,
        py: Python<'_>,
        timeout_ms: i64,
        max_records: usize,
    ) -> PyResult<(ArrowBatch, Vec<i16>)> {
        let core = self.core()?;
        let batches = interruptible(py, |interrupted| {
            core.poll(max_records, ms(timeout_ms), interrupted)
        })?
        .map_err(err)?;
        // Acquired rows are runs of consecutive rows of a decoded fetch: each
        // run becomes one slice of the consumer's Arrow export.
        let mut slices = Vec::new();
        let mut counts = Vec::new();
        for b in batches {
            counts.extend_from_slice(&b.delivery_counts);
            let mut i = 0;
            while i < b.rows.len() {
                let from = b.rows[i];
                let mut to = from + 1;
                i += 1;
                while i < b.rows.len() && b.rows[i] == to {
                    to += 1;
                    i += 1;
                }
                slices.push(RecordSlice {
                    tp: b.tp.clone(),
                    cols: b.cols.clone(),
                    from,
                    to,
                });
            }
        }
        let batch = py.detach(move || ArrowBatch::gather(slices));
        Ok((batch, counts))
    }

    /// `ack_type`: "ACCEPT", "RELEASE" or "REJECT".
    fn acknowledge(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        ack_type: &str,
    ) -> PyResult<()> {
        let t = AckType::from_name(ack_type).ok_or_else(|| {
            PyValueError::new_err(format!(
                "invalid acknowledgement type {ack_type:?}: expected 'ACCEPT', 'RELEASE' or 'REJECT'"
            ))
        })?;
        self.core()?
            .acknowledge(&TopicPartition::new(topic, partition), offset, t)
            .map_err(err)
    }

    /// -> [(partition, None | error)] for every partition acknowledged.
    fn commit_sync(&self, py: Python<'_>, timeout_ms: i64) -> PyResult<CommitOutcome> {
        let core = self.core()?;
        let results = interruptible(py, |interrupted| {
            core.commit_sync(ms(timeout_ms), interrupted)
        })?
        .map_err(err)?;
        Ok(results
            .into_iter()
            .map(|(tp, e)| {
                (
                    PyTopicPartition { inner: tp },
                    e.map(|e| err(e).into_value(py).into_any()),
                )
            })
            .collect())
    }

    fn commit_async(&self) -> PyResult<()> {
        self.core()?.commit_async().map_err(err)
    }

    #[pyo3(signature = (timeout_ms=30_000))]
    fn close(&self, py: Python<'_>, timeout_ms: i64) -> PyResult<()> {
        let core = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(core) = core else { return Ok(()) };
        interruptible(py, move |interrupted| {
            let r = core.close(ms(timeout_ms), interrupted);
            // The thread is joined when the last Arc goes, without the GIL.
            drop(core);
            r
        })?
        .map_err(err)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyShareConsumer>()
}
