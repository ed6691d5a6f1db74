//! A broker that answers from memory, for measuring *client* cost: ApiVersions
//! (any version, answered v0-v3 format) and Metadata v1-v12 (one broker, no
//! topics), every request answered as soon as it is parsed, so pipelined
//! requests are not serialised behind broker work.
//!
//!     cargo run --release -p ferrokafka-net --example fake_broker -- PORT

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn api_versions(cid: i32, version: i16) -> BytesMut {
    let flexible = version >= 3;
    let keys: &[(i16, i16, i16)] = &[(18, 0, 3), (3, 1, 12)];
    let mut b = BytesMut::new();
    b.put_i32(cid); // response header v0, always
    b.put_i16(0);
    if flexible {
        b.put_u8(keys.len() as u8 + 1);
    } else {
        b.put_i32(keys.len() as i32);
    }
    for (k, lo, hi) in keys {
        b.put_i16(*k);
        b.put_i16(*lo);
        b.put_i16(*hi);
        if flexible {
            b.put_u8(0);
        }
    }
    if version >= 1 {
        b.put_i32(0);
    }
    if flexible {
        b.put_u8(0);
    }
    b
}

fn metadata(cid: i32, version: i16, port: u16) -> BytesMut {
    let flexible = version >= 9;
    let mut b = BytesMut::new();
    b.put_i32(cid);
    if flexible {
        b.put_u8(0); // header tagged fields
    }
    if version >= 3 {
        b.put_i32(0); // throttle
    }
    let host = b"127.0.0.1";
    if flexible {
        b.put_u8(2); // 1 broker
    } else {
        b.put_i32(1);
    }
    b.put_i32(1); // node id
    if flexible {
        b.put_u8(host.len() as u8 + 1);
    } else {
        b.put_i16(host.len() as i16);
    }
    b.put_slice(host);
    b.put_i32(port as i32);
    if version >= 1 {
        if flexible {
            b.put_u8(0); // rack null
        } else {
            b.put_i16(-1);
        }
    }
    if flexible {
        b.put_u8(0);
    }
    if version >= 2 {
        if flexible {
            b.put_u8(0); // cluster id null
        } else {
            b.put_i16(-1);
        }
    }
    if version >= 1 {
        b.put_i32(1); // controller
    }
    if flexible {
        b.put_u8(1); // no topics
    } else {
        b.put_i32(0);
    }
    if (8..=10).contains(&version) {
        b.put_i32(-2147483648); // cluster authorized operations
    }
    if flexible {
        b.put_u8(0);
    }
    b
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let port: u16 = std::env::args()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let l = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    let port = l.local_addr().unwrap().port();
    println!("{port}");
    loop {
        let (mut s, _) = l.accept().await.unwrap();
        let _ = s.set_nodelay(true);
        tokio::spawn(async move {
            let mut buf = BytesMut::with_capacity(1 << 16);
            let mut out = BytesMut::new();
            loop {
                if s.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
                while buf.len() >= 4 {
                    let n = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                    if buf.len() < 4 + n {
                        break;
                    }
                    let req = buf.split_to(4 + n);
                    let (key, ver) = (
                        i16::from_be_bytes([req[4], req[5]]),
                        i16::from_be_bytes([req[6], req[7]]),
                    );
                    let cid = i32::from_be_bytes([req[8], req[9], req[10], req[11]]);
                    let body = match key {
                        18 => api_versions(cid, ver.min(3)),
                        3 => metadata(cid, ver, port),
                        _ => return,
                    };
                    out.put_i32(body.len() as i32);
                    out.put_slice(&body);
                }
                if !out.is_empty() && s.write_all(&out).await.is_err() {
                    return;
                }
                out.clear();
            }
        });
    }
}
