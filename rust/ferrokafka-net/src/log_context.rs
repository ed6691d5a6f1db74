//! Which client a log record comes from: Java's `LogContext`, whose prefix
//! (`[Producer clientId=producer-1] `) starts every line a client logs.
//!
//! Without it, two clients in one process logged the same words for the
//! same event (a broker down, seen by a producer and a consumer), and the
//! log bridge, which lets an identical line through once per 10 s because
//! a dead broker is retried every few ms, kept the second client's line
//! back as a repeat of the first: that client's failure went unlogged for
//! up to 10 s (docs/metrics.md, "Logging").
//!
//! The `log` crate carries no context, so the client's is kept per thread:
//! a client's own threads (sender, consumer, driver, telemetry) take it
//! when they start, and every thread that works its network client takes
//! it for as long as it holds the client's lock (`BlockingClient::core`),
//! which is where the network's lines are logged from. A line logged
//! anywhere else has no prefix, as before.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// One client's identity in its log lines.
#[derive(Debug, PartialEq, Eq)]
pub struct LogContext {
    /// `[Kind clientId=…, groupId=…] `, with the trailing space.
    prefix: String,
    /// Distinct for every client made in the process: two clients with
    /// the same `client_id` (the default) still have their lines counted
    /// apart.
    id: u64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl LogContext {
    /// `kind` as Java names it (`Producer`, `Consumer`, `AdminClient`,
    /// `ShareConsumer`); `extra`: a `name=value` pair shown after the
    /// client id (`groupId`, `transactionalId`).
    pub fn new(kind: &str, client_id: &str, extra: Option<(&str, &str)>) -> Arc<Self> {
        let prefix = match extra {
            Some((k, v)) => format!("[{kind} clientId={client_id}, {k}={v}] "),
            None => format!("[{kind} clientId={client_id}] "),
        };
        Arc::new(LogContext {
            prefix,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn id(&self) -> u64 {
        self.id
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<LogContext>>> = const { RefCell::new(None) };
}

/// The context of the client this thread is working for, if any.
pub fn current() -> Option<Arc<LogContext>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Make `ctx` this thread's context for good (a client's own thread, at
/// its start).
pub fn set_thread(ctx: Option<Arc<LogContext>>) {
    CURRENT.with(|c| *c.borrow_mut() = ctx);
}

/// `ctx` as this thread's context until the returned guard drops, then
/// the previous one again (a shared thread working for a client a while).
/// `None` leaves the thread's context as it is.
pub fn enter(ctx: Option<&Arc<LogContext>>) -> Scope {
    let Some(ctx) = ctx else {
        return Scope {
            previous: None,
            set: false,
        };
    };
    let previous = CURRENT.with(|c| c.borrow_mut().replace(ctx.clone()));
    Scope {
        previous,
        set: true,
    }
}

/// Restores the previous context on drop (see `enter`).
#[must_use]
pub struct Scope {
    previous: Option<Arc<LogContext>>,
    set: bool,
}

impl Drop for Scope {
    fn drop(&mut self) {
        if self.set {
            let previous = self.previous.take();
            CURRENT.with(|c| *c.borrow_mut() = previous);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_is_javas_and_ids_are_distinct() {
        let a = LogContext::new("Consumer", "app", Some(("groupId", "g")));
        let b = LogContext::new("Consumer", "app", Some(("groupId", "g")));
        assert_eq!(a.prefix(), "[Consumer clientId=app, groupId=g] ");
        assert_eq!(
            LogContext::new("Producer", "p", None).prefix(),
            "[Producer clientId=p] "
        );
        assert_ne!(a.id(), b.id());
    }

    #[test]
    fn scopes_nest_and_restore() {
        let (a, b) = (
            LogContext::new("Producer", "a", None),
            LogContext::new("Producer", "b", None),
        );
        std::thread::spawn(move || {
            assert_eq!(current(), None);
            set_thread(Some(a.clone()));
            {
                let _outer = enter(Some(&b));
                assert_eq!(current().map(|c| c.id()), Some(b.id()));
                let _none = enter(None);
                assert_eq!(current().map(|c| c.id()), Some(b.id()));
            }
            assert_eq!(current().map(|c| c.id()), Some(a.id()));
        })
        .join()
        .unwrap();
    }
}
