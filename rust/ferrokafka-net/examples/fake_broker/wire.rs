//! The sink's reading side: a connection's bytes read no further than the
//! frame being parsed, and Produce requests parsed as they arrive, their
//! record batches discarded in the kernel (`recv` with `MSG_TRUNC`) after
//! each batch's header is read for its record count.
//!
//! Why: read whole, a Produce request's megabyte of records was copied into
//! this process only to be dropped. That copy was the largest item of the
//! ceiling run's profile (a fifth of the machine's samples), and on a
//! two-core machine it ran beside the measured client, sharing its caches:
//! the sink's work showed up in the client's figures. A broker keeps the
//! bytes; a sink that measures a client's cost should not touch them.

use std::io;
use std::os::fd::AsRawFd;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

/// How far past what it needs a read may go inside a Produce request: its
/// fields before the records are small, so a few reads take them all, and
/// at most this much of a batch is copied instead of discarded.
const READ_AHEAD: usize = 512;

/// A record batch's header up to and including its record count.
const BATCH_HEAD: usize = 61;

/// A connection and the bytes read from it not yet parsed.
pub struct Wire {
    pub s: TcpStream,
    pub buf: BytesMut,
}

impl Wire {
    pub fn new(s: TcpStream) -> Self {
        Wire {
            s,
            buf: BytesMut::with_capacity(1 << 16),
        }
    }

    /// At least `n` bytes buffered, no read asking for more than `limit`
    /// bytes past the buffered ones (`limit` >= `n`): reads never run into
    /// bytes that are to be discarded.
    pub async fn fill(&mut self, n: usize, limit: usize) -> io::Result<()> {
        while self.buf.len() < n {
            let want = limit.max(n) - self.buf.len();
            self.buf.reserve(want);
            let got = (&mut self.s)
                .take(want as u64)
                .read_buf(&mut self.buf)
                .await?;
            if got == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        Ok(())
    }

    /// The next `n` bytes.
    pub async fn take(&mut self, n: usize, limit: usize) -> io::Result<Bytes> {
        self.fill(n, limit).await?;
        Ok(self.buf.split_to(n).freeze())
    }

    /// Drop the next `n` bytes: what is buffered, then the rest in the
    /// kernel without copying it (`MSG_TRUNC` on a TCP socket discards).
    pub async fn discard(&mut self, n: usize) -> io::Result<()> {
        let k = n.min(self.buf.len());
        self.buf.advance(k);
        let mut left = n - k;
        let fd = self.s.as_raw_fd();
        while left > 0 {
            self.s.readable().await?;
            let r = self.s.try_io(Interest::READABLE, || {
                // SAFETY: with MSG_TRUNC a TCP socket discards the bytes
                // and writes nothing to the (null) buffer.
                let r = unsafe { libc::recv(fd, std::ptr::null_mut(), left, libc::MSG_TRUNC) };
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(r as usize)
                }
            });
            match r {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(m) => left -= m.min(left),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// What the sink answers a Produce request from.
pub struct Produced {
    pub acks: i16,
    /// (topic, [(partition, records received)]).
    pub topics: Vec<(String, Vec<(i32, i64)>)>,
}

/// The rest of a Produce request (`left` bytes of its frame, after its api
/// key, version and correlation id), read field by field (versions 3 to 12;
/// 9 on are flexible). A malformed request is an `InvalidData` error.
pub async fn read_produce(w: &mut Wire, left: usize, version: i16) -> io::Result<Produced> {
    let mut r = Fields {
        w,
        left,
        flexible: version >= 9,
    };
    // Request header: client id (a nullable string in both header
    // versions), then tagged fields in the flexible one.
    let id = r.i16().await?;
    r.skip(id.max(0) as usize).await?;
    r.tagged().await?;
    // transactional_id
    if r.flexible {
        let l = r.uvarint().await?;
        r.skip(l.saturating_sub(1)).await?;
    } else {
        let l = r.i16().await?;
        r.skip(l.max(0) as usize).await?;
    }
    let acks = r.i16().await?;
    let _timeout = r.i32().await?;
    let mut topics = Vec::new();
    for _ in 0..r.count().await? {
        let name = r.string().await?;
        let mut parts = Vec::new();
        for _ in 0..r.count().await? {
            let index = r.i32().await?;
            let len = if r.flexible {
                r.uvarint().await?.checked_sub(1)
            } else {
                usize::try_from(r.i32().await?).ok()
            };
            parts.push((index, r.batches(len.unwrap_or(0)).await?));
            r.tagged().await?;
        }
        topics.push((name, parts));
        r.tagged().await?;
    }
    r.tagged().await?;
    // Fields of a later version than parsed: not read, not needed.
    let rest = r.left;
    r.skip(rest).await?;
    Ok(Produced { acks, topics })
}

/// A Produce request's fields in order, `left` of its bytes unread.
struct Fields<'w> {
    w: &'w mut Wire,
    left: usize,
    flexible: bool,
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("Produce request: {what}"),
    )
}

impl Fields<'_> {
    async fn take(&mut self, n: usize) -> io::Result<Bytes> {
        if n > self.left {
            return Err(malformed("field past the frame's end"));
        }
        let b = self.w.take(n, self.left.min(READ_AHEAD)).await?;
        self.left -= n;
        Ok(b)
    }

    async fn skip(&mut self, n: usize) -> io::Result<()> {
        if n > self.left {
            return Err(malformed("field past the frame's end"));
        }
        self.w.discard(n).await?;
        self.left -= n;
        Ok(())
    }

    async fn i16(&mut self) -> io::Result<i16> {
        Ok(self.take(2).await?.get_i16())
    }

    async fn i32(&mut self) -> io::Result<i32> {
        Ok(self.take(4).await?.get_i32())
    }

    async fn uvarint(&mut self) -> io::Result<usize> {
        let mut v = 0usize;
        for shift in (0..35).step_by(7) {
            let b = self.take(1).await?[0];
            v |= ((b & 0x7f) as usize) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(malformed("varint too long"))
    }

    /// An array's length (a null array counts as empty).
    async fn count(&mut self) -> io::Result<usize> {
        if self.flexible {
            Ok(self.uvarint().await?.saturating_sub(1))
        } else {
            Ok(self.i32().await?.max(0) as usize)
        }
    }

    async fn string(&mut self) -> io::Result<String> {
        let n = if self.flexible {
            self.uvarint().await?.saturating_sub(1)
        } else {
            self.i16().await?.max(0) as usize
        };
        let b = self.take(n).await?;
        String::from_utf8(b.to_vec()).map_err(|_| malformed("topic name not UTF-8"))
    }

    async fn tagged(&mut self) -> io::Result<()> {
        if self.flexible {
            for _ in 0..self.uvarint().await? {
                let _tag = self.uvarint().await?;
                let size = self.uvarint().await?;
                self.skip(size).await?;
            }
        }
        Ok(())
    }

    /// `len` bytes of record batches: each batch's header read for its
    /// record count, the rest discarded. A batch cut short by the end of
    /// `len` (none from a client) counts what its header says.
    async fn batches(&mut self, mut len: usize) -> io::Result<i64> {
        let mut n = 0;
        while len >= BATCH_HEAD {
            let mut h = self.take(BATCH_HEAD).await?;
            let batch = (i32::from_be_bytes([h[8], h[9], h[10], h[11]]).max(0) as usize + 12)
                .clamp(BATCH_HEAD, len);
            h.advance(57);
            n += h.get_i32() as i64;
            self.skip(batch - BATCH_HEAD).await?;
            len -= batch;
        }
        self.skip(len).await?;
        Ok(n)
    }
}
