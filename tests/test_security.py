"""TLS and SASL against real servers: stunnel (OpenSSL) in front of Tansu for
TLS; Tansu's own SCRAM for refusals; scramp's SCRAM server (via
ferrokafka.testing.ScramFront) for good credentials, cross-checked with
confluent-kafka (librdkafka's SCRAM client)."""

from __future__ import annotations

import contextlib
import shutil
import time
import uuid

import pytest
from conftest import IN_CI, _unavailable

import ferrokafka as fk
from ferrokafka.testing import EmbeddedBroker
from ferrokafka.testing._broker import free_port

TP = fk.TopicPartition


def _need(tool: str):
    if shutil.which(tool) is None:
        _unavailable(tool, "not on PATH")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    _need("openssl")
    from ferrokafka.testing._security import make_certs

    return make_certs(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture(scope="module")
def tls_broker(certs, embedded_broker):
    """Tansu advertising a TLS port that stunnel serves (server auth only)."""
    _need("stunnel4")
    from ferrokafka.testing._security import StunnelTLS

    tls_port = free_port()
    with EmbeddedBroker(advertised_port=tls_port) as b:
        with StunnelTLS(b.port, certs.server_cert, certs.server_key, port=tls_port) as t:
            yield t


@pytest.fixture(scope="module")
def mtls_broker(certs):
    _need("stunnel4")
    from ferrokafka.testing._security import StunnelTLS

    tls_port = free_port()
    with EmbeddedBroker(advertised_port=tls_port) as b:
        with StunnelTLS(b.port, certs.server_cert, certs.server_key, port=tls_port, client_ca=certs.ca) as t:
            yield t


def _round_trip(bs, topic, **sec):
    with fk.Producer(bs, max_block_ms=15_000, **sec) as p:
        md = p.send(topic, value=b"secret-payload", key=b"k").result(20)
    c = fk.Consumer(bs, auto_offset_reset="earliest", **sec)
    c.assign([TP(topic, md.partition)])
    got = []
    deadline = time.time() + 20
    while not got and time.time() < deadline:
        got = c.poll(200)
    c.close()
    assert [m.value for m in got] == [b"secret-payload"]


def test_tls_produce_consume(tls_broker, certs, topic_name):
    _round_trip(tls_broker.bootstrap_servers, topic_name, security_protocol="SSL", ssl_cafile=certs.ca)


def test_tls_ca_directory(tls_broker, certs, topic_name, tmp_path):
    """ssl_cafile may name a directory of CA files (librdkafka's
    ssl.ca.location, OpenSSL's CApath): files that are not certificates are
    skipped; a directory without any certificate is a ValueError."""
    import shutil

    d = tmp_path / "cas"
    d.mkdir()
    shutil.copy(certs.ca, d / "ca.pem")
    (d / "README").write_text("not a certificate\n")
    _round_trip(tls_broker.bootstrap_servers, topic_name, security_protocol="SSL", ssl_cafile=str(d))
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "README").write_text("nothing here\n")
    with pytest.raises(ValueError, match="ssl_cafile"):
        fk.Producer(tls_broker.bootstrap_servers, security_protocol="SSL", ssl_cafile=str(empty))


def test_tls_hostname_verification(tls_broker, certs, topic_name):
    """The certificate names localhost and 127.0.0.1: both verify; with
    checks off the chain must still be trusted."""
    port = tls_broker.port
    _round_trip(f"localhost:{port}", topic_name, security_protocol="SSL", ssl_cafile=certs.ca)
    _round_trip(tls_broker.bootstrap_servers, topic_name + "-nc", security_protocol="SSL", ssl_cafile=certs.ca,
                ssl_check_hostname=False)


def test_untrusted_certificate_is_refused_fast(certs, embedded_broker):
    _need("stunnel4")
    from ferrokafka.testing._security import StunnelTLS

    with StunnelTLS(embedded_broker.port, certs.rogue_cert, certs.rogue_key) as rogue:
        t0 = time.time()
        with pytest.raises(fk.AuthenticationError, match="(?i)certificate|issuer"):
            with fk.Producer(rogue.bootstrap_servers, security_protocol="SSL", ssl_cafile=certs.ca, max_block_ms=20_000) as p:
                p.send("t", value=b"x").result(20)
        assert time.time() - t0 < 10


def test_mutual_tls(mtls_broker, certs, topic_name):
    _round_trip(mtls_broker.bootstrap_servers, topic_name, security_protocol="SSL", ssl_cafile=certs.ca,
                ssl_certfile=certs.client_cert, ssl_keyfile=certs.client_key)
    # without a client certificate the server refuses (TLS 1.3 reports it
    # after the handshake, as an alert on the first read)
    with pytest.raises(fk.KafkaError, match="(?i)certificate|alert|closed|timed out"):
        with fk.Producer(mtls_broker.bootstrap_servers, security_protocol="SSL", ssl_cafile=certs.ca, max_block_ms=3000) as p:
            p.send(topic_name, value=b"x").result(10)


def test_plaintext_to_tls_port_fails_clearly(tls_broker):
    with pytest.raises(fk.KafkaTimeoutError, match="TLS or SASL"):
        with fk.Producer(tls_broker.bootstrap_servers, max_block_ms=2000) as p:
            p.send("t", value=b"x").result(10)


def test_bad_tls_files_are_config_errors(tmp_path):
    with pytest.raises(ValueError, match="ssl_cafile"):
        fk.Producer("localhost:1", security_protocol="SSL", ssl_cafile=str(tmp_path / "missing.pem"))
    empty = tmp_path / "empty.pem"
    empty.write_text("not a certificate")
    with pytest.raises(ValueError, match="ssl_cafile"):
        fk.Consumer("localhost:1", security_protocol="SSL", ssl_cafile=str(empty))
    with pytest.raises(ValueError, match="ssl_keyfile"):
        fk.Producer("localhost:1", security_protocol="SSL", ssl_certfile=str(empty))
    with pytest.raises(ValueError, match="security_protocol"):
        fk.Producer("localhost:1", security_protocol="TLS")


# ----- SASL -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def scram_broker():
    pytest.importorskip("scramp") if not IN_CI else __import__("scramp")
    from ferrokafka.testing._security import ScramFront

    port = free_port()
    with EmbeddedBroker(advertised_port=port) as b:
        with ScramFront(b.port, {"alice": "wonderland", "bob": "b,o=b"}, port=port) as front:
            yield front


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_good_credentials(scram_broker, topic_name, mechanism):
    before = scram_broker.auth_ok
    _round_trip(scram_broker.bootstrap_servers, topic_name, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_username="alice", sasl_password="wonderland")
    assert scram_broker.auth_ok > before


def test_scram_front_is_a_real_scram_server(scram_broker, confluent_kafka, topic_name):
    """librdkafka's SCRAM client authenticates against the same front, so a
    pass above is not two halves of our own mistake."""
    p = confluent_kafka.Producer({"bootstrap.servers": scram_broker.bootstrap_servers,
                                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                                  "sasl.username": "bob", "sasl.password": "b,o=b"})
    p.produce(topic_name, b"from-librdkafka")
    assert p.flush(20) == 0


def test_scram_group_consumption(scram_broker, topic_name):
    sec = dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
               sasl_username="bob", sasl_password="b,o=b")
    with fk.Producer(scram_broker.bootstrap_servers, **sec) as p:
        for i in range(10):
            p.send(topic_name, value=b"%d" % i, partition=0)
        p.flush()
    c = fk.Consumer(scram_broker.bootstrap_servers, group_id=f"g-{uuid.uuid4().hex[:6]}", auto_offset_reset="earliest",
                    session_timeout_ms=6000, heartbeat_interval_ms=300, **sec)
    c.subscribe([topic_name])
    got = []
    deadline = time.time() + 30
    while len(got) < 10 and time.time() < deadline:
        got += c.poll(200)
    c.commit()
    assert len(got) == 10 and c.committed([TP(topic_name, 0)])[TP(topic_name, 0)].offset == 10
    c.close()


def test_wrong_password_fails_fast_without_reconnect_storm(scram_broker):
    before = scram_broker.connections
    t0 = time.time()
    with pytest.raises(fk.AuthenticationError) as ei:
        with fk.Producer(scram_broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism="SCRAM-SHA-256", sasl_username="alice", sasl_password="not-the-password",
                         max_block_ms=10_000, reconnect_backoff_ms=200, reconnect_backoff_max_ms=1000) as p:
            p.send("t", value=b"x").result(10)
    took = time.time() - t0
    assert took < 5
    assert "not-the-password" not in str(ei.value) and "not-the-password" not in repr(ei.value)
    time.sleep(1.0)
    # one failed attempt, plus at most a couple of backed-off retries
    assert scram_broker.connections - before <= 4


def test_tansu_scram_refusal_is_an_authentication_error():
    """Tansu's own SCRAM (--authentication): with no user provisioned every
    login is refused, which is what a wrong password looks like to a client."""
    with EmbeddedBroker(extra_args=["--authentication"]) as b:
        t0 = time.time()
        with pytest.raises(fk.AuthenticationError, match="(?i)unknown|auth"):
            c = fk.Consumer(b.bootstrap_servers, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                            sasl_username="mallory", sasl_password="guess", default_api_timeout_ms=10_000)
            try:
                c.end_offsets([TP("t", 0)])
            finally:
                c.close()
        assert time.time() - t0 < 5


def test_secrets_never_in_reprs():
    p = fk.Producer("localhost:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                    sasl_username="u", sasl_password="hunter2")
    assert "hunter2" not in repr(p.config) and "hunter2" not in str(p.config)
    p.close(0)


def test_consumer_poll_raises_on_wrong_password(scram_broker, topic_name):
    c = fk.Consumer(scram_broker.bootstrap_servers, group_id="g-wrong", security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="SCRAM-SHA-512", sasl_username="bob", sasl_password="nope")
    c.subscribe([topic_name])
    t0 = time.time()
    with pytest.raises(fk.AuthenticationError):
        while time.time() - t0 < 10:
            c.poll(200)
    assert time.time() - t0 < 5
    c.close()


# ----- self-signed broker certificates, and refusals that say what to do -------------

def _self_signed(directory, name, subj, san):
    import subprocess

    cert, key = str(directory / f"{name}.pem"), str(directory / f"{name}.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", subj, "-addext", f"subjectAltName={san}", "-keyout", key, "-out", cert],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return cert, key


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory):
    _need("openssl")
    d = tmp_path_factory.mktemp("selfsigned")
    return {
        # What the openssl command makes: a CA:TRUE certificate that
        # the broker presents as its own and the user gives as ssl_cafile.
        "good": _self_signed(d, "good", "/CN=localhost", "DNS:localhost,IP:127.0.0.1"),
        "othername": _self_signed(d, "other", "/CN=other.example", "DNS:other.example"),
    }


@pytest.fixture(scope="module")
def self_signed_broker(self_signed):
    _need("stunnel4")
    from ferrokafka.testing._security import StunnelTLS

    cert, key = self_signed["good"]
    tls_port = free_port()
    with EmbeddedBroker(advertised_port=tls_port) as b:
        with StunnelTLS(b.port, cert, key, port=tls_port) as t:
            yield t


def test_self_signed_certificate_as_cafile_is_trusted(self_signed_broker, self_signed, topic_name):
    """Java's PKIX trust manager and OpenSSL accept a server certificate that
    is itself a configured trust anchor (rustls/webpki alone refuse it with
    CaUsedAsEndEntity); its names are still checked."""
    cert, _ = self_signed["good"]
    _round_trip(self_signed_broker.bootstrap_servers, topic_name, security_protocol="SSL", ssl_cafile=cert)
    _round_trip(f"localhost:{self_signed_broker.port}", topic_name + "-h", security_protocol="SSL",
                ssl_cafile=cert)


def test_self_signed_certificate_name_still_checked(self_signed, embedded_broker, topic_name):
    _need("stunnel4")
    from ferrokafka.testing._security import StunnelTLS

    cert, key = self_signed["othername"]
    tls_port = free_port()
    with EmbeddedBroker(advertised_port=tls_port) as b:
        with StunnelTLS(b.port, cert, key, port=tls_port) as t:
            with pytest.raises(fk.AuthenticationError) as ei:
                with fk.Producer(t.bootstrap_servers, security_protocol="SSL", ssl_cafile=cert,
                                 max_block_ms=10_000) as p:
                    p.send(topic_name, b"x").result(10)
            msg = str(ei.value)
            assert "ssl_check_hostname" in msg and "endpoint.identification" in msg, msg
            _round_trip(t.bootstrap_servers, topic_name, security_protocol="SSL", ssl_cafile=cert,
                        ssl_check_hostname=False)


def test_untrusted_certificate_refusal_says_what_to_do(certs, embedded_broker):
    _need("stunnel4")
    from ferrokafka.testing._security import StunnelTLS

    with StunnelTLS(embedded_broker.port, certs.rogue_cert, certs.rogue_key) as rogue:
        with pytest.raises(fk.AuthenticationError) as ei:
            with fk.Producer(rogue.bootstrap_servers, security_protocol="SSL", ssl_cafile=certs.ca,
                             max_block_ms=10_000) as p:
                p.send("t", value=b"x").result(10)
        assert "set ssl_cafile to the CA" in str(ei.value), str(ei.value)


def test_authentication_failure_reaches_error_cb(scram_broker):
    """A refused login reaches error_cb as librdkafka's _AUTHENTICATION
    (-169), besides the AuthenticationError the calls raise (Java's poll
    raises it too)."""
    got = []
    c = fk.Consumer(scram_broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="SCRAM-SHA-256", sasl_username="alice", sasl_password="not-the-password",
                    error_cb=got.append)
    try:
        deadline = time.time() + 10
        while not any(e.code == -169 for e in got) and time.time() < deadline:
            with contextlib.suppress(fk.KafkaError):
                c.list_topics(timeout_ms=500)
            with contextlib.suppress(fk.KafkaError):
                c.poll(100)
        e = next(e for e in got if e.code == -169)
        assert e.name == "_AUTHENTICATION" and isinstance(e, fk.AuthenticationError)
        assert "not-the-password" not in str(e)
    finally:
        c.close(0)


@pytest.mark.parametrize("tls,sasl", [(True, None), (False, "SCRAM-SHA-256"), (True, "SCRAM-SHA-512")])
def test_embedded_broker_tls_and_sasl_options(tls, sasl, topic_name):
    """EmbeddedBroker(tls=..., sasl=..., users=...) for users' own tests: a
    round trip with b.client_config(); a wrong password is refused."""
    _need("openssl")
    if tls:
        _need("stunnel4")
    users = {"alice": "alice-secret", "bob": "bob-secret"} if sasl else None
    with EmbeddedBroker(tls=tls, sasl=sasl, users=users) as b:
        cfg = b.client_config("bob" if sasl else None)
        bs = cfg.pop("bootstrap_servers")
        assert cfg["security_protocol"] == {(True, None): "SSL", (False, "SCRAM-SHA-256"): "SASL_PLAINTEXT",
                                            (True, "SCRAM-SHA-512"): "SASL_SSL"}[(tls, sasl)]
        _round_trip(bs, topic_name, **cfg)
        if sasl:
            cfg["sasl_password"] = "wrong"
            with pytest.raises(fk.AuthenticationError):
                with fk.Producer(bs, max_block_ms=5_000, **cfg) as p:
                    p.send(topic_name, value=b"x").result(10)
        else:
            with pytest.raises(fk.KafkaError):  # plaintext client against the TLS port
                with fk.Producer(bs, max_block_ms=3_000) as p:
                    p.send(topic_name, value=b"x").result(5)
