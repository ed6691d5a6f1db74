//! Rust `log` records -> Python `logging` (logger `ferrokafka` and children:
//! target `ferrokafka::network` becomes logger `ferrokafka.network`).
//!
//! Records are made on Rust threads that must never wait for the GIL (the
//! driver, the sender), so they are queued here and handed to Python by
//! whichever thread next holds the GIL in a ferrokafka call (every blocking
//! wait comes back at least every 100 ms, `gil::wait_detached`; polls and
//! client constructors drain too). The level is checked in Rust first
//! (`log::max_level`, refreshed from the `ferrokafka` logger's effective
//! level), so a filtered record costs an atomic load and nothing is
//! formatted. Identical records are rate-limited: one per `REPEAT` with a
//! count of the ones dropped, since a dead broker is retried every few ms.
//! A record logged for a client starts with that client's prefix
//! (`[Producer clientId=app] `, Java's) and counts as identical only to the
//! same client's (ferrokafka-net `log_context.rs`).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use log::{Level, LevelFilter, Log, Metadata, Record};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// An identical record (same client, target and text) is logged at most
/// once per this.
const REPEAT: Duration = Duration::from_secs(10);
/// Records kept while no Python thread drains them; the oldest go first.
const QUEUE_MAX: usize = 1000;
/// How often a drain re-reads the Python logger's level.
const LEVEL_REFRESH: Duration = Duration::from_secs(1);

struct Queued {
    level: Level,
    target: String,
    message: String,
    /// The client's log context id, 0 for none.
    client: u64,
}

#[derive(Default)]
struct Bridge {
    queue: VecDeque<Queued>,
    /// (target, client, message) -> (last time logged, records dropped
    /// since). The client is its log context's id, 0 for none.
    seen: HashMap<(String, u64, String), (Instant, u32)>,
    dropped_full: u64,
    level_checked: Option<Instant>,
}

static BRIDGE: Mutex<Option<Bridge>> = Mutex::new(None);
/// Something is queued: lets a drain skip the lock and the GIL work.
static PENDING: AtomicBool = AtomicBool::new(false);

struct PyLogger;

impl Log for PyLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        metadata.level() <= log::max_level() && metadata.target().starts_with("ferrokafka")
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let ctx = ferrokafka_net::log_context::current();
        let message = match &ctx {
            Some(c) => format!("{}{}", c.prefix(), record.args()),
            None => record.args().to_string(),
        };
        let client = ctx.as_ref().map_or(0, |c| c.id());
        let target = record.target().to_string();
        let now = Instant::now();
        let mut g = BRIDGE.lock().unwrap_or_else(|p| p.into_inner());
        let b = g.get_or_insert_with(Bridge::default);
        let key = (target.clone(), client, message.clone());
        let suppressed = match b.seen.get_mut(&key) {
            Some((last, n)) if now.duration_since(*last) < REPEAT => {
                *n += 1;
                return;
            }
            Some((last, n)) => {
                *last = now;
                std::mem::take(n)
            }
            None => {
                if b.seen.len() > 4096 {
                    b.seen.retain(|_, (t, _)| now.duration_since(*t) < REPEAT);
                }
                b.seen.insert(key, (now, 0));
                0
            }
        };
        let message = if suppressed > 0 {
            format!(
                "{message} (repeated {suppressed} more times in the last {} s)",
                REPEAT.as_secs()
            )
        } else {
            message
        };
        if b.queue.len() >= QUEUE_MAX {
            b.queue.pop_front();
            b.dropped_full += 1;
        }
        b.queue.push_back(Queued {
            level: record.level(),
            target,
            message,
            client,
        });
        PENDING.store(true, Ordering::Release);
    }

    fn flush(&self) {}
}

static LOGGER: PyLogger = PyLogger;

fn py_level(l: Level) -> i32 {
    match l {
        Level::Error => 40,
        Level::Warn => 30,
        Level::Info => 20,
        Level::Debug | Level::Trace => 10,
    }
}

fn filter_for(py_level: i32) -> LevelFilter {
    match py_level {
        l if l <= 5 => LevelFilter::Trace,
        l if l <= 10 => LevelFilter::Debug,
        l if l <= 20 => LevelFilter::Info,
        l if l <= 30 => LevelFilter::Warn,
        l if l <= 50 => LevelFilter::Error,
        _ => LevelFilter::Off,
    }
}

/// Read the `ferrokafka` logger's effective level into `log::max_level`.
/// Also called when a client is made: an application sets its logging up
/// first, and the client's first lines (connecting, ApiVersions) come
/// before any drain would re-read the level.
pub(crate) fn refresh_level(py: Python<'_>) {
    let level = py
        .import("logging")
        .and_then(|m| m.call_method1("getLogger", ("ferrokafka",)))
        .and_then(|l| l.call_method0("getEffectiveLevel"))
        .and_then(|v| v.extract::<i32>());
    if let Ok(l) = level {
        log::set_max_level(filter_for(l));
    }
}

/// Install the bridge (once per process; the module init calls it).
pub fn install(py: Python<'_>) {
    if log::set_logger(&LOGGER).is_ok() {
        refresh_level(py);
    }
}

/// Hand queued records to Python logging, from the thread holding the GIL.
/// Cheap when nothing is queued. Errors in handlers are reported by logging
/// itself (`Handler.handleError`), never raised into the caller.
pub fn drain(py: Python<'_>) {
    let now = Instant::now();
    let (items, dropped, refresh) = {
        let mut g = BRIDGE.lock().unwrap_or_else(|p| p.into_inner());
        let b = g.get_or_insert_with(Bridge::default);
        let refresh = b
            .level_checked
            .is_none_or(|t| now.duration_since(t) >= LEVEL_REFRESH);
        if refresh {
            b.level_checked = Some(now);
        }
        if !PENDING.swap(false, Ordering::AcqRel) {
            (Vec::new(), 0, refresh)
        } else {
            (
                b.queue.drain(..).collect::<Vec<_>>(),
                std::mem::take(&mut b.dropped_full),
                refresh,
            )
        }
    };
    if refresh {
        refresh_level(py);
    }
    if items.is_empty() {
        return;
    }
    let Ok(logging) = py.import("logging") else {
        return;
    };
    if dropped > 0 {
        if let Ok(l) = logging.call_method1("getLogger", ("ferrokafka",)) {
            let _ = l.call_method1(
                "warning",
                (format!(
                    "{dropped} log records dropped: nothing drained them (call poll)"
                ),),
            );
        }
    }
    for q in items {
        let name = q.target.replace("::", ".");
        if let Ok(l) = logging.call_method1("getLogger", (name,)) {
            // The client's id as the record's `ferrokafka_client` attribute:
            // the confluent facade's `logger` takes its own client's records
            // by it (the clients' `_log_id`).
            let kwargs = (q.client != 0)
                .then(|| {
                    let extra = PyDict::new(py);
                    extra.set_item("ferrokafka_client", q.client)?;
                    let kw = PyDict::new(py);
                    kw.set_item("extra", extra)?;
                    Ok::<_, PyErr>(kw)
                })
                .and_then(Result::ok);
            let _ = l.call_method("log", (py_level(q.level), q.message), kwargs.as_ref());
        }
    }
}

/// A client's id in its log records (0: it logs without a context).
pub(crate) fn client_log_id(net: &ferrokafka_net::BlockingClient) -> u64 {
    net.log_context().map_or(0, |c| c.id())
}

/// `_core._drain_logs()`: for the Python layer's own drain points.
#[pyfunction]
pub fn _drain_logs(py: Python<'_>) {
    drain(py);
}

/// `_core._log_level_changed()`: re-read the `ferrokafka` logger's level now
/// (otherwise it is re-read at most once a second, at drains).
#[pyfunction]
pub fn _log_level_changed(py: Python<'_>) {
    refresh_level(py);
}

/// Test hook: log `message` from Rust at `level` (Python's numbers) on
/// `target` (e.g. "ferrokafka::network"), as the network code does.
#[pyfunction]
pub fn _test_log(level: i32, target: &str, message: &str) {
    let l = match level {
        l if l >= 40 => Level::Error,
        l if l >= 30 => Level::Warn,
        l if l >= 20 => Level::Info,
        _ => Level::Debug,
    };
    log::log!(target: target, l, "{message}");
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install(m.py());
    m.add_function(wrap_pyfunction!(_drain_logs, m)?)?;
    m.add_function(wrap_pyfunction!(_test_log, m)?)?;
    m.add_function(wrap_pyfunction!(_log_level_changed, m)?)
}
