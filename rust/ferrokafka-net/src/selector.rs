//! The I/O side (Java's `Selector`): the process-wide tokio runtime and one
//! pair of tasks per broker connection. [`Selector`] implements the
//! [`Transport`] that the [`NetworkClient`] state machine writes through;
//! connection tasks report back only by pushing [`Event`]s into a channel,
//! never by touching the state machine. `blocking.rs` glues the two together.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use ferrokafka_protocol::frame::FrameDecoder;
use ferrokafka_protocol::produce_frame::Frame;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::mpsc as tmpsc;
use tokio::task::JoinHandle;

use crate::cluster::Node;
use crate::error::Error;
use crate::events::EventSender;
use crate::network_client::{ClientConfig, Event, Transport, WriteOutcome};

// ------------------------------------------------------------------ runtime

/// (pid that built it, runtime). Spark forks Python workers: a forked child
/// inherits this static but none of the runtime's threads, so a runtime from
/// another pid is abandoned (leaked on purpose: dropping it would wait for
/// worker threads that do not exist in this process) and a new one is built.
type PidRuntime = Option<(u32, Arc<Runtime>)>;
static RUNTIME: OnceLock<Mutex<PidRuntime>> = OnceLock::new();

pub fn runtime() -> Arc<Runtime> {
    let cell = RUNTIME.get_or_init(|| Mutex::new(None));
    // A poisoned lock only means a panic elsewhere while holding it; the
    // Option inside is still consistent.
    let mut g = cell.lock().unwrap_or_else(|p| p.into_inner());
    let pid = std::process::id();
    if let Some((owner, rt)) = g.as_ref() {
        if *owner == pid {
            return rt.clone();
        }
    }
    if let Some(old) = g.take() {
        std::mem::forget(old);
    }
    // One worker. Why not two: a task woken from outside the runtime (a
    // frame handed to a writer, a socket turning readable) unparks one
    // worker, and tokio's scheduler has that worker unpark the other to
    // keep a thread searching for more work, which there seldom is: a
    // wake-up, a search and a park on the other core per request and per
    // answer. On the ceiling run (`benches/ab_builds.py`, 6 rounds each,
    // session 33) one worker took `send_batch(list)` from 0.037 / 0.044 to
    // 0.034 / 0.038 µs a record (best / median), pyarrow 0.038 / 0.038 to
    // 0.035 / 0.036, `poll_arrow` 0.028 to 0.026 best, latency unchanged.
    // (In session 29 one worker lost, when a connection's reader still
    // waited behind its writer's lock and every frame went through the
    // writer task: both since changed.) A runtime task must never block:
    // it would stop every connection of the process (the driver and the
    // runner are threads of their own for that reason).
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ferrokafka-io")
            .enable_all()
            .build()
            .expect("cannot start the tokio runtime"),
    );
    *g = Some((pid, rt.clone()));
    rt
}

// ------------------------------------------------------------------ transport

struct ConnHandle {
    conn: u64,
    tx: tmpsc::UnboundedSender<Frame>,
    task: JoinHandle<()>,
    /// Frames handed to the writer so far (the next frame's seq is this + 1).
    queued: u64,
    shared: Arc<WriterShared>,
}

/// Written by the client thread (`write`) and the writer task; see
/// `Selector::write` for the protocol.
#[derive(Default)]
struct WriterShared {
    /// Bytes handed to the writer and not yet written to the socket: our
    /// user-space part of the socket send buffer.
    unwritten: AtomicUsize,
    /// Seq of a frame whose writer must report `SendDone` (0 = none). At most
    /// one such frame exists per connection: the core sends nothing more to a
    /// node until its newest send is done.
    notify_at: AtomicU64,
    /// A plain socket's write half, once connected, for `Selector::write`
    /// to write frames itself ("Direct writes").
    direct: OnceLock<Arc<tokio::net::tcp::OwnedWriteHalf>>,
}

// Direct writes. A frame that fits in the connection's send buffer
// (`Selector::send_buffer`: `send_buffer_bytes`, 1 MiB by default, a whole
// Produce request of a default batch) is written by the thread that sends
// it, when the connection's writer has nothing in hand; what the socket
// does not take at once goes to the writer. A thread inside
// `short_direct_writes` (a `send` made with the GIL held) writes at most
// `SHORT_DIRECT_MAX` itself.
//
// Why the sending thread: handed to the writer task, each request woke the
// io thread (an eventfd write, a scheduler wake-up) before its `writev`:
// about 25 µs of a produce request's round trip at 10k records a second,
// linger 0, on a 2-core machine (perf sched, issue 17). Frames up to 64 KiB
// were written so first.
//
// Why full batches too (session 35): left to the io thread, the producer
// went on appending while the io thread copied, so the queue of unsent
// batches ran ahead of the socket until it held `buffer_memory`. Each of
// its first 32 MiB of buffers was faulted in fresh, and the io thread then
// copied batches written ~32 MiB earlier, long out of the caches. Written
// by the thread that made it sendable (a `send_batch` call, the driver
// after an answer), a batch goes out while it is still in that core's
// cache, and the queue grows only while the socket is full. The ceiling
// run's `send_batch` (`benches/ab_builds.py`, client CPU a record, best /
// median of 10 alternating rounds): list 0.029 / 0.034 -> 0.027 / 0.029
// µs, pyarrow (8 rounds) 0.029 / 0.032 -> 0.028 / 0.029, at the same
// records a second or more; the io thread's ~10-19 ns a record became ~1,
// the calling thread's 18-31 became 25-32.
//
// The costs: the thread that makes a batch sendable spends the copy, ~0.1
// ms for a 1 MB request here, under the network client's lock (which keeps
// frames in the in-flight queue's order). And for one sending thread,
// appending and copying into the socket no longer overlap on two cores: it
// measured ~4.3 GB/s of records on this machine's loopback, no less than
// before, and more than a 25 Gb/s link carries.

/// The most a thread inside `short_direct_writes` writes itself: what it
/// wrote before full batches were written directly too.
const SHORT_DIRECT_MAX: usize = 64 * 1024;

thread_local! {
    /// This thread is inside `short_direct_writes`.
    static SHORT_DIRECT: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with this thread's direct writes bounded by `SHORT_DIRECT_MAX`
/// (a larger frame goes to the connection's writer, on the io thread): for
/// a call that must not spend ~0.1 ms copying a full batch into a socket,
/// such as a `send` made with the GIL held, which would stall every other
/// Python thread meanwhile.
pub fn short_direct_writes<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the flag however `f` ends.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SHORT_DIRECT.set(self.0);
        }
    }
    let _restore = Restore(SHORT_DIRECT.replace(true));
    f()
}

/// What a direct write did with a frame.
enum Direct {
    /// All of it is in the socket.
    All,
    /// Some or none of it: the rest, left in the frame, goes to the writer
    /// (which waits for room, or reports the socket's error).
    Rest,
}

/// Write what the socket takes of `frame` now, without waiting; what it
/// does not take stays in `frame`.
fn write_direct(w: &tokio::net::tcp::OwnedWriteHalf, frame: &mut Frame) -> Direct {
    let mut pieces: VecDeque<Bytes> = std::mem::take(&mut frame.pieces).into();
    pieces.retain(|p| !p.is_empty());
    let slices: Vec<std::io::IoSlice<'_>> =
        pieces.iter().map(|p| std::io::IoSlice::new(p)).collect();
    let tcp: &tokio::net::TcpStream = w.as_ref();
    let written = tcp.try_write_vectored(&slices);
    drop(slices);
    if let Ok(n) = written {
        drop_written(&mut pieces, n);
    }
    let all = pieces.is_empty();
    frame.pieces = pieces.into();
    if all {
        Direct::All
    } else {
        Direct::Rest
    }
}

/// Drop the first `n` bytes of `pieces`, which a write took.
fn drop_written(pieces: &mut VecDeque<Bytes>, mut n: usize) {
    while n > 0 {
        let Some(front) = pieces.front_mut() else {
            break;
        };
        if n >= front.len() {
            n -= front.len();
            pieces.pop_front();
        } else {
            front.advance(n);
            n = 0;
        }
    }
}

/// `Transport` over tokio: each connection is one task that connects, then
/// splits into a reader (this task) and a writer (a child task).
pub struct Selector {
    handle: Handle,
    events: EventSender,
    conns: HashMap<i32, ConnHandle>,
    cfg: ClientConfig,
}

impl Selector {
    pub fn new(handle: Handle, events: EventSender, cfg: ClientConfig) -> Self {
        Selector {
            handle,
            events,
            conns: HashMap::new(),
            cfg,
        }
    }

    /// How much of a request counts as written once it is in ours, and the
    /// most a sending thread writes itself (see "Direct writes"): `send_buffer_bytes`,
    /// 128 KiB when the kernel sizes the buffer (docs/semantics.md §4.7).
    fn send_buffer(&self) -> usize {
        if self.cfg.send_buffer_bytes > 0 {
            self.cfg.send_buffer_bytes as usize
        } else {
            128 * 1024
        }
    }
}

impl Transport for Selector {
    fn connect(&mut self, node: &Node, conn: u64) {
        if let Some(old) = self.conns.remove(&node.id) {
            old.task.abort();
        }
        let (tx, rx) = tmpsc::unbounded_channel();
        let shared = Arc::new(WriterShared::default());
        let task = self.handle.spawn(run_connection(
            node.clone(),
            conn,
            self.events.clone(),
            rx,
            self.cfg.clone(),
            shared.clone(),
        ));
        self.conns.insert(
            node.id,
            ConnHandle {
                conn,
                tx,
                task,
                queued: 0,
                shared,
            },
        );
    }

    /// A frame that fits in the send buffer (`send_buffer_bytes`, as the
    /// kernel's SO_SNDBUF would) counts as sent at once: no round trip
    /// through the writer task before the next request may go, which is what
    /// makes pipelining cheap. A frame that does not fit is `Queued`: the
    /// writer reports when it is out, giving the same backpressure as a full
    /// socket buffer in Java's selector.
    fn write(&mut self, node_id: i32, conn: u64, frame: Frame) -> WriteOutcome {
        let limit = self.send_buffer();
        let direct_max = if SHORT_DIRECT.get() {
            limit.min(SHORT_DIRECT_MAX)
        } else {
            limit
        };
        let Some(c) = self.conns.get_mut(&node_id).filter(|c| c.conn == conn) else {
            return WriteOutcome::Closed;
        };
        let mut frame = frame;
        // Written here only while the writer holds nothing: `unwritten`
        // counts every byte handed to it until its write has returned, so
        // at zero it is not writing and nothing waits in its channel, and
        // nothing can be handed to it meanwhile (`write` takes `&mut
        // self`). Bytes reach the socket in the order they were sent.
        if frame.len() <= direct_max && c.shared.unwritten.load(Ordering::SeqCst) == 0 {
            if let Some(w) = c.shared.direct.get() {
                if let Direct::All = write_direct(w, &mut frame) {
                    // Not the writer's: its count of frames (`queued`,
                    // `written`) leaves this one out.
                    return WriteOutcome::Buffered;
                }
            }
        }
        c.queued += 1;
        let seq = c.queued;
        let len = frame.len();
        let before = c.shared.unwritten.fetch_add(len, Ordering::SeqCst);
        let buffered = before + len <= limit;
        if !buffered {
            // Set before the frame enters the channel, so the writer cannot
            // have written it without seeing the request for a report.
            c.shared.notify_at.store(seq, Ordering::SeqCst);
        }
        if c.tx.send(frame).is_err() {
            return WriteOutcome::Closed;
        }
        if buffered {
            WriteOutcome::Buffered
        } else {
            WriteOutcome::Queued(seq)
        }
    }

    fn unwritten(&self) -> usize {
        // A connection whose task ended (it failed) writes nothing more:
        // what it had left is not waited for.
        self.conns
            .values()
            .filter(|c| !c.task.is_finished())
            .map(|c| c.shared.unwritten.load(Ordering::SeqCst))
            .sum()
    }

    fn close(&mut self, node_id: i32, conn: u64) {
        if self.conns.get(&node_id).is_some_and(|c| c.conn == conn) {
            if let Some(c) = self.conns.remove(&node_id) {
                // Aborting the task drops the socket halves: the broker sees
                // the close at once. Events it already queued are stale now
                // (generation check in the core).
                c.task.abort();
            }
        }
    }
}

impl Drop for Selector {
    fn drop(&mut self) {
        for (_, c) in self.conns.drain() {
            c.task.abort();
        }
    }
}

fn transport_err(node: &Node, detail: impl std::fmt::Display) -> Error {
    Error::Transport {
        broker: format!("{}/{}", node.id, node.address()),
        detail: detail.to_string(),
    }
}

async fn connect_any(node: &Node, cfg: &ClientConfig) -> Result<tokio::net::TcpStream, Error> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((node.host.as_str(), node.port))
        .await
        .map_err(|e| transport_err(node, format!("cannot resolve {}: {e}", node.host)))?
        .collect();
    if addrs.is_empty() {
        return Err(transport_err(
            node,
            format!("{} resolves to no address", node.host),
        ));
    }
    let setup = Duration::from_millis(cfg.socket_connection_setup_timeout_ms.max(1) as u64);
    let mut last = None;
    // Every address in turn (IPv6 and IPv4 of a dual-stack name, several A
    // records): the first that accepts wins.
    for addr in addrs {
        let sock = if addr.is_ipv4() {
            TcpSocket::new_v4()
        } else {
            TcpSocket::new_v6()
        };
        let sock = match sock {
            Ok(s) => s,
            Err(e) => {
                last = Some(e.to_string());
                continue;
            }
        };
        if cfg.send_buffer_bytes > 0 {
            let _ = sock.set_send_buffer_size(cfg.send_buffer_bytes as u32);
        }
        if cfg.receive_buffer_bytes > 0 {
            let _ = sock.set_recv_buffer_size(cfg.receive_buffer_bytes as u32);
        }
        match tokio::time::timeout(setup, sock.connect(addr)).await {
            Ok(Ok(stream)) => {
                // Requests are small and latency-bound: no Nagle delay.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(e)) => last = Some(format!("{addr}: {e}")),
            Err(_) => {
                last = Some(format!(
                    "{addr}: connection setup timed out after {} ms",
                    setup.as_millis()
                ))
            }
        }
    }
    Err(transport_err(node, last.unwrap_or_default()))
}

/// Write every piece in order, vectored (up to 64 a call), resuming after
/// a partial write where it stopped. A writer without vectored writes
/// (the default `poll_write_vectored`) takes the first piece of each call.
async fn write_pieces<W: AsyncWrite + Unpin>(
    wr: &mut W,
    pieces: &mut VecDeque<Bytes>,
) -> std::io::Result<()> {
    while !pieces.is_empty() {
        let n = {
            let slices: Vec<std::io::IoSlice<'_>> = pieces
                .iter()
                .take(64)
                .map(|p| std::io::IoSlice::new(p))
                .collect();
            wr.write_vectored(&slices).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        drop_written(pieces, n);
    }
    Ok(())
}

async fn run_connection(
    node: Node,
    conn: u64,
    events: EventSender,
    mut rx: tmpsc::UnboundedReceiver<Frame>,
    cfg: ClientConfig,
    shared: Arc<WriterShared>,
) {
    let id = node.id;
    let failed = |error| {
        let _ = events.send(Event::Disconnected {
            node: id,
            conn,
            error,
        });
    };
    let tcp = match connect_any(&node, &cfg).await {
        Ok(s) => s,
        Err(error) => return failed(error),
    };
    // TLS and SASL happen before the core hears of the connection, so it
    // never sends a request over an unauthenticated socket.
    let setup = Duration::from_millis(cfg.socket_connection_setup_timeout_ms.max(1) as u64)
        .max(Duration::from_millis(cfg.request_timeout_ms.max(1) as u64));
    let (stream, session_lifetime_ms) =
        match crate::security::secure(tcp, &node, &cfg.security, &cfg.client_id, setup).await {
            Ok(s) => s,
            Err(error) => return failed(error),
        };
    if events.send(Event::Connected { node: id, conn }).is_err() {
        return; // client gone
    }
    let reauth_at =
        crate::security::reauth_after(session_lifetime_ms).map(|d| tokio::time::Instant::now() + d);
    let plaintext = cfg.security.protocol == crate::security::SecurityProtocol::Plaintext;
    let mut got_frame = false;
    let (mut rd, mut wr, direct) = stream.split();
    if let Some(w) = direct {
        let _ = shared.direct.set(w);
    }
    let wevents = events.clone();
    let wnode = node.clone();
    // Writer: drains the queue, taking whatever frames are already waiting
    // (up to 1 MiB) into one vectored write: pipelined requests cost one
    // syscall and no copy (a Produce request's batches are pieces of their
    // own, produce_frame.rs; coalescing them into one buffer copied each
    // batch again). Then it reports how many frames are out. Errors are
    // reported as a disconnect; the reader side will usually notice too,
    // and the core ignores the second report.
    let writer = tokio::spawn(async move {
        let mut pieces: VecDeque<Bytes> = VecDeque::new();
        let mut written: u64 = 0;
        while let Some(first) = rx.recv().await {
            let mut count = 1u64;
            let mut bytes = first.len();
            // Empty pieces are dropped: a write of only those returns 0,
            // which `write_pieces` must read as the socket refusing bytes.
            pieces.extend(first.pieces.into_iter().filter(|p| !p.is_empty()));
            while bytes < 1 << 20 {
                match rx.try_recv() {
                    Ok(more) => {
                        count += 1;
                        bytes += more.len();
                        pieces.extend(more.pieces.into_iter().filter(|p| !p.is_empty()));
                    }
                    Err(_) => break,
                }
            }
            let res = write_pieces(&mut wr, &mut pieces).await;
            if let Err(e) = res {
                let _ = wevents.send(Event::Disconnected {
                    node: id,
                    conn,
                    error: transport_err(&wnode, format!("write failed: {e}")),
                });
                return;
            }
            written += count;
            shared.unwritten.fetch_sub(bytes, Ordering::SeqCst);
            // Report only when a queued frame is waiting for it: buffered
            // frames were already counted as sent, and an event per write
            // would wake the poller for nothing.
            let want = shared.notify_at.load(Ordering::SeqCst);
            if want != 0
                && written >= want
                && shared
                    .notify_at
                    .compare_exchange(want, 0, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                && wevents
                    .send(Event::SendDone {
                        node: id,
                        conn,
                        written,
                    })
                    .is_err()
            {
                return;
            }
        }
    });
    // Aborting this task (client close) must take the writer down too.
    struct AbortOnDrop(JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _guard = AbortOnDrop(writer);

    let decoder = FrameDecoder::new(cfg.max_response_size);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let error = loop {
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                got_frame = true;
                if events
                    .send(Event::Frame {
                        node: id,
                        conn,
                        frame,
                    })
                    .is_err()
                {
                    return;
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => break Error::Protocol(e),
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
        let read =
            match reauth_at {
                Some(at) => match tokio::time::timeout_at(at, rd.read_buf(&mut buf)).await {
                    Ok(r) => r,
                    Err(_) => break transport_err(
                        &node,
                        "SASL session lifetime reached: reconnecting to re-authenticate (KIP-368)",
                    ),
                },
                None => rd.read_buf(&mut buf).await,
            };
        match read {
            Ok(0) => {
                break transport_err(
                    &node,
                    if buf.is_empty() && !got_frame && plaintext {
                        // The classic symptom of PLAINTEXT against a TLS or
                        // SASL listener: say so instead of a bare EOF.
                        "connection closed by peer before any answer (is the listener TLS or SASL? security_protocol is PLAINTEXT)".to_string()
                    } else if buf.is_empty() {
                        "connection closed by peer".to_string()
                    } else {
                        format!("connection closed by peer in the middle of a frame ({} bytes buffered)", buf.len())
                    },
                )
            }
            Ok(_) => {}
            Err(e) if buf.is_empty() && !got_frame && plaintext => {
                break transport_err(&node, format!("read failed: {e} before any answer (is the listener TLS or SASL? security_protocol is PLAINTEXT)"))
            }
            Err(e) => break transport_err(&node, format!("read failed: {e}")),
        }
    };
    let _ = events.send(Event::Disconnected {
        node: id,
        conn,
        error,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventQueue;
    use std::io::Read;

    /// A selector connected (as node 0, connection 1) to a listener of the
    /// test's, the peer's end of that socket, and the selector's events.
    fn connected() -> (Selector, std::net::TcpStream, Arc<EventQueue>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let node = Node::new(0, "127.0.0.1", listener.local_addr().unwrap().port(), None);
        let rx = EventQueue::new();
        let mut sel = Selector::new(
            runtime().handle().clone(),
            rx.sender(),
            ClientConfig::default(),
        );
        sel.connect(&node, 1);
        let (peer, _) = listener.accept().unwrap();
        assert!(matches!(
            next_event(&rx),
            Event::Connected { node: 0, conn: 1 }
        ));
        (sel, peer, rx)
    }

    fn next_event(rx: &EventQueue) -> Event {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("an event within 10 s")
    }

    /// `unwritten` counts what the writer still holds while the broker does
    /// not read (what a close must wait for), and falls to zero once it
    /// does; frames past the send buffer are queued and reported out.
    #[test]
    fn unwritten_counts_what_a_stalled_broker_has_not_taken() {
        let (mut sel, mut peer, rx) = connected();
        // More than loopback's socket buffers hold (a few MB each way), in
        // frames a byte larger than the send buffer: none is written
        // directly, every one goes to the writer.
        let frames = 32;
        let size = ClientConfig::default().send_buffer_bytes as usize + 1;
        let mut last = WriteOutcome::Buffered;
        for _ in 0..frames {
            last = sel.write(0, 1, Frame::from(Bytes::from(vec![0u8; size])));
        }
        assert_eq!(last, WriteOutcome::Queued(frames));
        std::thread::sleep(Duration::from_millis(200));
        assert!(
            sel.unwritten() > 0,
            "the writer cannot have written 32 MB to a peer that reads nothing"
        );
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut got = 0usize;
            while let Ok(n @ 1..) = peer.read(&mut buf) {
                got += n;
            }
            got
        });
        // Earlier reports can come while the frames were being handed over
        // (the writer caught up with the newest one for a moment).
        loop {
            match next_event(&rx) {
                Event::SendDone { written, .. } if written == frames => break,
                Event::SendDone { .. } => {}
                e => panic!("{e:?}"),
            }
        }
        assert_eq!(sel.unwritten(), 0);
        drop(sel);
        assert_eq!(reader.join().unwrap(), frames as usize * size);
    }

    /// A frame that fits in the send buffer is written by the sending thread
    /// when the writer holds nothing; behind a frame the writer still holds
    /// it goes to the writer too, and the peer reads every frame in order.
    #[test]
    fn frames_written_directly_keep_their_order() {
        let (mut sel, mut peer, _events) = connected();
        // The connection task splits the socket right after reporting it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while sel.conns[&0].shared.direct.get().is_none() {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        let frame = |tag: u8, n: usize| Frame {
            pieces: vec![
                Bytes::from(vec![tag; 3]),
                Bytes::new(),
                Bytes::from(vec![tag; n - 3]),
            ],
        };
        assert_eq!(sel.write(0, 1, frame(1, 100)), WriteOutcome::Buffered);
        assert_eq!(
            sel.conns[&0].queued, 0,
            "written directly, not by the writer"
        );
        // 8 MB: more than loopback's buffers take at once, so the writer
        // still holds some when the next frames come.
        let big = 8 << 20;
        sel.write(0, 1, frame(2, big));
        sel.write(0, 1, frame(3, 100));
        sel.write(0, 1, frame(4, 200));
        assert_eq!(
            sel.conns[&0].queued, 3,
            "behind the big frame: the writer's"
        );
        let total = 100 + big + 100 + 200;
        let mut got = vec![0u8; total];
        peer.read_exact(&mut got).unwrap();
        let mut want = vec![1u8; 100];
        want.extend(std::iter::repeat_n(2u8, big));
        want.extend(std::iter::repeat_n(3u8, 100));
        want.extend(std::iter::repeat_n(4u8, 200));
        assert!(got == want, "frames out of order");
        // Once the writer has written everything, small frames go direct again.
        while sel.unwritten() > 0 {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sel.write(0, 1, frame(5, 4096)), WriteOutcome::Buffered);
        assert_eq!(sel.conns[&0].queued, 3);
        let mut last = vec![0u8; 4096];
        peer.read_exact(&mut last).unwrap();
        assert!(last.iter().all(|&b| b == 5));
        // A batch-sized frame too (a default Produce request of a full
        // batch is ~1 MB): 256 KiB, which an idle loopback socket takes whole.
        let batch = 256 << 10;
        assert_eq!(sel.write(0, 1, frame(6, batch)), WriteOutcome::Buffered);
        assert_eq!(sel.conns[&0].queued, 3, "written directly");
        let mut got = vec![0u8; batch];
        peer.read_exact(&mut got).unwrap();
        assert!(got.iter().all(|&b| b == 6));
        // On a thread inside `short_direct_writes` (a `send` with the GIL
        // held) a batch-sized frame goes to the writer; a small one is
        // still written directly.
        short_direct_writes(|| {
            assert_eq!(sel.write(0, 1, frame(7, 4096)), WriteOutcome::Buffered);
            assert_eq!(sel.conns[&0].queued, 3, "a small frame, directly");
            assert_eq!(sel.write(0, 1, frame(8, batch)), WriteOutcome::Buffered);
            assert_eq!(sel.conns[&0].queued, 4, "a batch, by the writer");
        });
        assert!(!SHORT_DIRECT.get(), "the flag is let go after the call");
        let mut got = vec![0u8; 4096 + batch];
        peer.read_exact(&mut got).unwrap();
        assert!(got[..4096].iter().all(|&b| b == 7) && got[4096..].iter().all(|&b| b == 8));
    }
}
