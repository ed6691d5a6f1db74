"""Issue 8, hostile input: the fake-server matrix beyond test_network.py's cases.

Every case must end in a clear ``KafkaError`` or a timeout: no panic, no hang,
no unbounded allocation, and the clients recover once a good broker answers.
Timeouts are small (request 1 s) so the whole file runs in well under a minute.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import pytest
from _hostile import (
    GARBAGE_FRAME,
    Hostile,
    SwitchProxy,
    api_versions_answer,
    api_versions_v0_answer,
    frame,
    metadata_v4_answer,
    read_request,
    read_request_body,
)

import ferrokafka as fk
from ferrokafka.protocol import FindCoordinatorRequest, MetadataRequest
from ferrokafka.testing import EmbeddedBroker
from ferrokafka.testing._broker import free_port

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10

# What a sane broker announces in these tests: FindCoordinator to carry a user
# request, no Metadata so the client's own refresh never reaches the wire
# (it completes locally as unsupported) and the fake sees only user traffic.
NO_METADATA = [(API_VERSIONS, 0, 3), (FIND_COORDINATOR, 0, 4)]


def _client(port, request_timeout_ms=1000, **kw):
    return fk.NetworkClient(f"127.0.0.1:{port}", request_timeout_ms=request_timeout_ms,
                            reconnect_backoff_ms=10_000, reconnect_backoff_max_ms=10_000, **kw)


def _watch(nc, node, limit_s):
    """Poll until the connection went somewhere and came back DISCONNECTED (or
    `limit_s` passed). Returns (final state, states seen, seconds taken)."""
    t0 = time.monotonic()
    # The state before the first poll too (CONNECTING after ready()): one poll
    # can take a fast connection all the way to DISCONNECTED, and a watch that
    # saw only that would wait out `limit_s` (a CI flake, 2026-11-24).
    saw = {nc.connection_state(node.id)}
    while time.monotonic() - t0 < limit_s:
        nc.poll(20)
        state = nc.connection_state(node.id)
        saw.add(state)
        if state == "DISCONNECTED" and len(saw) > 1:
            break
    return nc.connection_state(node.id), saw, time.monotonic() - t0


def _negotiated(srv, **kw):
    nc = _client(srv.port, **kw)
    node = nc.least_loaded_node()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not nc.ready(node):
        nc.poll(20)
    assert nc.is_ready(node), nc.connection_state(node.id)
    return nc, node


# --- 1. slowloris ---------------------------------------------------------------------


def _trickle(c, data, every=0.2):
    for i in range(len(data)):
        c.sendall(data[i:i + 1])
        time.sleep(every)


def test_slowloris_api_versions_times_out_despite_progress():
    """A valid ApiVersions answer, one byte every 200 ms (6 s in all): bytes keep
    arriving, yet the request deadline (1 s from the send) must close the connection."""
    answer = api_versions_answer(0, NO_METADATA)
    assert len(answer) * 0.2 > 5  # would complete long after timeout + slack

    def slowloris(c):
        _, _, cid = read_request(c)
        _trickle(c, api_versions_answer(cid, NO_METADATA))

    srv = Hostile(slowloris)
    nc = _client(srv.port, request_timeout_ms=1000)
    node = nc.least_loaded_node()
    nc.ready(node)
    state, saw, elapsed = _watch(nc, node, 6)
    nc.close()
    srv.close()
    assert state == "DISCONNECTED" and "READY" not in saw, saw
    assert "CHECKING_API_VERSIONS" in saw
    assert 0.9 < elapsed < 2.5, elapsed


def test_slowloris_user_request_times_out_with_timeout_error():
    """The same trickle on a user request after a good negotiation: the request
    completes disconnected with a KafkaTimeoutError at request_timeout_ms."""
    started = threading.Event()

    def evil(c):
        _, _, cid = read_request(c)
        c.sendall(api_versions_answer(cid, NO_METADATA))
        _, _, cid = read_request(c)
        started.set()
        # A plausible 40-byte answer, never finished in time.
        _trickle(c, frame(struct.pack(">i", cid) + b"\x00" * 36))

    srv = Hostile(evil)
    nc, node = _negotiated(srv, request_timeout_ms=1000)
    req = nc.new_client_request(node.id, FindCoordinatorRequest("g"))
    t0 = time.monotonic()
    nc.send(req)
    out = []
    while time.monotonic() - t0 < 6 and not out:
        out += nc.poll(50)
    elapsed = time.monotonic() - t0
    assert started.is_set()
    (r,) = out
    assert r.request_header.correlation_id == req.correlation_id
    assert r.disconnected and r.response_body is None
    assert isinstance(r.error, fk.KafkaTimeoutError), repr(r.error)
    assert 0.9 < elapsed < 2.5, elapsed
    assert nc.in_flight_request_count() == 0
    assert nc.connection_state(node.id) == "DISCONNECTED"
    nc.close()
    srv.close()


# --- 2. close mid-frame on a user request ------------------------------------------------


def test_close_mid_frame_on_user_request():
    """Negotiation is fine; the answer to the user's request stops after 10 of its
    promised 64 bytes and the server closes: a disconnect, nothing left in flight."""

    def evil(c):
        _, _, cid = read_request(c)
        c.sendall(api_versions_answer(cid, NO_METADATA))
        _, _, cid = read_request(c)
        c.sendall(struct.pack(">ii", 64, cid) + b"\x00\x00")
        c.shutdown(socket.SHUT_RDWR)
        c.close()

    srv = Hostile(evil)
    nc, node = _negotiated(srv)
    req = nc.new_client_request(node.id, FindCoordinatorRequest("g"))
    nc.send(req)
    assert nc.in_flight_request_count() == 1
    out = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3 and not out:
        out += nc.poll(50)
    # Well before the 1 s request timeout: the close itself ended it.
    assert time.monotonic() - t0 < 0.9
    (r,) = out
    assert r.request_header.correlation_id == req.correlation_id
    assert r.disconnected and r.response_body is None
    assert isinstance(r.error, fk.KafkaError) and not isinstance(r.error, fk.KafkaTimeoutError), repr(r.error)
    assert "middle of a frame" in str(r.error), str(r.error)
    assert nc.in_flight_request_count() == 0
    assert nc.connection_state(node.id) == "DISCONNECTED"
    nc.close()
    srv.close()


# --- 3. wrong ApiVersions answers --------------------------------------------------------


def _api_versions_case(answer_for, limit_s=4):
    """Every connection gets `answer_for(cid, version)` to each ApiVersions request
    (the server keeps reading: a client that retries forever is visible)."""
    asked = []

    def evil(c):
        while True:
            key, version, cid = read_request(c)
            asked.append((key, version))
            c.sendall(answer_for(cid, version))

    srv = Hostile(evil)
    nc = _client(srv.port)
    node = nc.least_loaded_node()
    nc.ready(node)
    state, saw, elapsed = _watch(nc, node, limit_s)
    nc.close()
    srv.close()
    return state, saw, elapsed, asked


@pytest.mark.parametrize("error_code", [35, 1, 42])
def test_api_versions_error_code_fails_the_connection(error_code):
    """UNSUPPORTED_VERSION with no key list (so no version to fall back to), or any
    other error: DISCONNECTED, never READY, and quickly (not at the request timeout,
    and not after an endless chain of retries)."""
    state, saw, elapsed, asked = _api_versions_case(
        lambda cid, v: api_versions_v0_answer(cid, [], error_code))
    assert state == "DISCONNECTED" and "READY" not in saw, saw
    assert elapsed < 0.9, elapsed
    # UNSUPPORTED_VERSION may buy one retry at v0 (KIP-511 fallback), no more.
    assert 1 <= len(asked) <= 2, asked
    assert all(k == API_VERSIONS for k, _ in asked)


def test_api_versions_unsupported_naming_our_own_version_is_not_a_loop():
    """UNSUPPORTED_VERSION whose key list says ApiVersions 0..3, i.e. the version we
    sent: retrying at the same version can never succeed."""
    state, saw, elapsed, asked = _api_versions_case(
        lambda cid, v: api_versions_v0_answer(cid, [(API_VERSIONS, 0, 3)], 35))
    assert state == "DISCONNECTED" and "READY" not in saw, saw
    assert elapsed < 0.9, elapsed
    assert 1 <= len(asked) <= 2, asked


def test_api_versions_unsupported_then_retry_succeeds():
    """The legitimate KIP-511 path still works: v3 refused with 'I speak 0..2',
    the retry at v2 is answered normally -> READY."""
    asked = []

    def broker(c):
        while True:
            key, version, cid = read_request(c)
            asked.append(version)
            if version > 2:
                c.sendall(api_versions_v0_answer(cid, [(API_VERSIONS, 0, 2)], 35))
            else:
                # v2 answer: non-flexible, int32 array, throttle.
                keys = NO_METADATA
                body = struct.pack(">ihi", cid, 0, len(keys))
                for k, lo, hi in keys:
                    body += struct.pack(">hhh", k, lo, hi)
                c.sendall(frame(body + struct.pack(">i", 0)))

    srv = Hostile(broker)
    nc, node = _negotiated(srv)
    assert asked == [3, 2]
    assert nc.api_versions(node.id)[FIND_COORDINATOR] == (0, 4)
    nc.close()
    srv.close()


@pytest.mark.parametrize("keys", [
    pytest.param([(API_VERSIONS, 0, 3)], id="no-metadata"),
    pytest.param([(API_VERSIONS, 0, 3), (METADATA, 100, 200)], id="metadata-above-ours"),
])
def test_api_versions_without_usable_metadata(keys):
    """A well-formed answer without a Metadata range we share: the connection is
    READY (the broker did answer), and a Metadata request completes locally with
    UnsupportedVersionError (code 35) without touching the socket."""
    received = []

    def broker(c):
        while True:
            key, _, cid = read_request(c)
            received.append(key)
            if key == API_VERSIONS:
                c.sendall(api_versions_answer(cid, keys))

    srv = Hostile(broker)
    nc, node = _negotiated(srv)
    req = nc.new_client_request(node.id, MetadataRequest())
    nc.send(req)
    out = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2 and not out:
        out += nc.poll(50)
    (r,) = out
    assert isinstance(r.version_mismatch, fk.UnsupportedVersionError) and r.version_mismatch.code == 35
    assert not r.disconnected and r.response_body is None
    assert "Metadata" in str(r.version_mismatch), str(r.version_mismatch)
    time.sleep(0.1)
    assert received == [API_VERSIONS], "nothing but ApiVersions reached the server"
    assert nc.connection_state(node.id) == "READY"
    nc.close()
    srv.close()


@pytest.mark.parametrize("count", [
    pytest.param(50, id="50-entries"),
    pytest.param(0xFFFFFFFF, id="u32-max-entries"),
])
def test_api_versions_compact_array_length_lies(count):
    """A v3 answer whose compact array claims far more entries than the body holds
    (up to 2^32-1: a reservation sized from it would abort the process): a decode
    error, DISCONNECTED, never READY."""

    def uvarint(v):
        out = b""
        while v >= 0x80:
            out += bytes([(v & 0x7F) | 0x80])
            v >>= 7
        return out + bytes([v])

    def answer(cid, _v):
        body = struct.pack(">ih", cid, 0) + uvarint(count + 1 if count < 0xFFFFFFFF else count)
        body += struct.pack(">hhh", API_VERSIONS, 0, 3) + b"\x00" + struct.pack(">i", 0) + b"\x00"
        return frame(body)

    state, saw, elapsed, asked = _api_versions_case(answer)
    assert state == "DISCONNECTED" and "READY" not in saw, saw
    assert elapsed < 0.9, elapsed
    assert len(asked) == 1


# --- 4. huge length prefix without allocation ----------------------------------------------


def _statm():
    with open("/proc/self/statm") as f:
        size, resident = f.read().split()[:2]
    import resource
    page = resource.getpagesize()
    return int(size) * page, int(resident) * page


MAX_RESPONSE = 100 * 1024 * 1024  # ferrokafka_protocol::DEFAULT_MAX_RESPONSE_SIZE


def test_huge_length_under_the_cap_allocates_as_bytes_arrive():
    """20 connections each announce a frame of 100 MiB - 16 (legal: under the cap),
    then send a few bytes and stall. Held open together, they must not reserve 20 x
    100 MiB: neither resident (RSS growth < 50 MB) nor virtual (< 1 GiB; an
    up-front Vec of the announced length is 2 GiB of address space)."""
    n = 20
    stalled = threading.Semaphore(0)
    release = threading.Event()

    def huge(c):
        _, _, cid = read_request(c)
        c.sendall(struct.pack(">ii", MAX_RESPONSE - 16, cid) + b"\x00" * 64)
        stalled.release()
        release.wait(10)

    srv = Hostile(huge)
    clients = []
    vm0, rss0 = _statm()
    try:
        for _ in range(n):
            nc = _client(srv.port, request_timeout_ms=5000)
            node = nc.least_loaded_node()
            nc.ready(node)
            clients.append((nc, node))
            # Connected events are handled in poll, which then sends ApiVersions.
            deadline = time.monotonic() + 2
            while nc.connection_state(node.id) != "CHECKING_API_VERSIONS" and time.monotonic() < deadline:
                nc.poll(10)
        for _ in range(n):
            assert stalled.acquire(timeout=5)
        time.sleep(0.2)  # let the readers take the bytes in
        for nc, _ in clients:
            nc.poll(0)
        vm1, rss1 = _statm()
        assert all(nc.connection_state(node.id) == "CHECKING_API_VERSIONS" for nc, node in clients)
    finally:
        release.set()
        for nc, _ in clients:
            nc.close()
        srv.close()
    print(f"\n20 stalled 100 MiB frames: VmSize +{(vm1 - vm0) >> 20} MiB, RSS +{(rss1 - rss0) >> 20} MiB")
    assert rss1 - rss0 < 50 * 1024 * 1024
    assert vm1 - vm0 < 1024 * 1024 * 1024


def test_length_just_above_the_cap_fails_the_connection():
    def huge(c):
        _, _, cid = read_request(c)
        c.sendall(struct.pack(">ii", MAX_RESPONSE + 1, cid))
        time.sleep(3)

    srv = Hostile(huge)
    nc = _client(srv.port, request_timeout_ms=5000)
    node = nc.least_loaded_node()
    nc.ready(node)
    state, saw, elapsed = _watch(nc, node, 4)
    nc.close()
    srv.close()
    assert state == "DISCONNECTED" and "READY" not in saw
    assert elapsed < 1.0, elapsed  # the prefix alone ends it, not the 5 s timeout


# --- 5. recovery when a good broker returns (high-level clients) --------------------------

# Small timeouts: every hostile phase ends in seconds, and reconnects are quick.
FAST = dict(request_timeout_ms=1000, retry_backoff_ms=50, reconnect_backoff_ms=50, reconnect_backoff_max_ms=200)


@pytest.fixture(scope="module")
def proxied(embedded_broker):
    """A Tansu of our own behind a SwitchProxy; it advertises the proxy's port, so
    every connection the clients open (bootstrap and leaders) goes through the
    proxy. `embedded_broker` is there for its skip/fail logic and its binary."""
    proxy = SwitchProxy(target_port=0, mode="pass")
    broker = EmbeddedBroker(port=free_port(), advertised_port=proxy.port,
                                       binary=embedded_broker.binary)
    proxy.target_port = broker.port
    try:
        yield proxy
    finally:
        proxy.close()
        broker.close()


@pytest.fixture
def proxy_topic(proxied):
    proxied.set_mode("pass")
    name = f"hostile-{uuid.uuid4().hex[:8]}"
    with fk.Admin(f"127.0.0.1:{proxied.port}", **FAST) as a:
        a.create_topics([fk.NewTopic(name, 1, 1)], timeout_ms=10_000)
    return name


@pytest.mark.parametrize("hostile", ["garbage", "http", "close"])
def test_producer_recovers_when_the_broker_returns(proxied, proxy_topic, hostile):
    proxied.set_mode(hostile)
    p = fk.Producer(f"127.0.0.1:{proxied.port}", linger_ms=0, max_block_ms=1500,
                    delivery_timeout_ms=15_000, **FAST)
    try:
        # Hostile from the start: no metadata, so send() gives up at max_block_ms.
        t0 = time.monotonic()
        with pytest.raises(fk.KafkaError) as ei:
            p.send(proxy_topic, b"never").result(5)
        assert isinstance(ei.value, fk.KafkaTimeoutError), repr(ei.value)
        assert time.monotonic() - t0 < 3
        assert proxied.accepted.get(hostile, 0) >= 1

        # The broker comes back: the same producer delivers.
        proxied.set_mode("pass")
        first = p.send(proxy_topic, b"r0").result(10)

        # Hostile again with metadata known: records wait (none fails, none
        # succeeds falsely), then all arrive once the broker is back.
        seen = proxied.accepted.get(hostile, 0)
        proxied.set_mode(hostile)
        futs = [p.send(proxy_topic, f"r{i}".encode()) for i in range(1, 6)]
        time.sleep(1.5)
        assert not any(f.done() for f in futs), [f.exception(0) if f.done() else None for f in futs]
        assert proxied.accepted.get(hostile, 0) > seen, "the producer did meet the hostile server"
        proxied.set_mode("pass")
        offsets = [f.result(10).offset for f in futs]
        assert offsets == sorted(offsets) and len(set(offsets)) == 5
        assert offsets[0] > first.offset
    finally:
        t0 = time.monotonic()
        proxied.set_mode("pass")
        p.close(5)
        assert time.monotonic() - t0 < 5


def test_consumer_recovers_when_the_broker_returns(proxied, proxy_topic):
    bs = f"127.0.0.1:{proxied.port}"
    tp = fk.TopicPartition(proxy_topic, 0)
    with fk.Producer(bs, linger_ms=0, **FAST) as p:
        for i in range(5):
            p.send(proxy_topic, f"a{i}".encode())
        assert p.flush(10) == 0

    def poll_during_hostile(c, seconds):
        got, errors = [], []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                got += c.poll(200)
            except fk.KafkaError as e:  # allowed; anything else fails the test
                errors.append(e)
        return got, errors

    def poll_until(c, n, seconds=10):
        got = []
        end = time.monotonic() + seconds
        while len(got) < n and time.monotonic() < end:
            got += c.poll(200)
        return got

    proxied.set_mode("garbage")
    c = fk.Consumer(bs, auto_offset_reset="earliest", default_api_timeout_ms=2000, **FAST)
    try:
        c.assign([tp])
        got, _ = poll_during_hostile(c, 1.5)
        assert got == []
        assert proxied.accepted.get("garbage", 0) >= 1

        proxied.set_mode("pass")
        got = poll_until(c, 5)
        assert [(m.offset, m.value) for m in got] == [(i, f"a{i}".encode()) for i in range(5)]

        # Hostile again mid-stream: nothing new (there is nothing to fetch
        # anyway, and no garbage must turn into records), position kept.
        seen = proxied.accepted.get("close", 0)
        proxied.set_mode("close")
        got, _ = poll_during_hostile(c, 1.5)
        assert got == []
        assert proxied.accepted.get("close", 0) > seen, "the consumer did meet the hostile server"
        proxied.set_mode("pass")
        with fk.Producer(bs, linger_ms=0, **FAST) as p:
            for i in range(5, 8):
                p.send(proxy_topic, f"a{i}".encode())
            assert p.flush(10) == 0
        got = poll_until(c, 3)
        assert [(m.offset, m.value) for m in got] == [(i, f"a{i}".encode()) for i in range(5, 8)]
    finally:
        proxied.set_mode("pass")
        t0 = time.monotonic()
        c.close()
        assert time.monotonic() - t0 < 5


# --- 6. high-level clients against a pure garbage server -----------------------------------


@pytest.fixture
def garbage_server():
    def garbage(c):
        while True:
            read_request(c)
            c.sendall(GARBAGE_FRAME)

    srv = Hostile(garbage)
    yield f"127.0.0.1:{srv.port}"
    srv.close()


def test_producer_against_garbage(garbage_server):
    p = fk.Producer(garbage_server, max_block_ms=2000, delivery_timeout_ms=3000, linger_ms=0, **FAST)
    t0 = time.monotonic()
    with pytest.raises(fk.KafkaError) as ei:
        p.send("t", b"v").result(10)
    elapsed = time.monotonic() - t0
    assert 1.9 < elapsed < 3.5, elapsed  # max_block_ms, not the 10 s result timeout
    assert isinstance(ei.value, fk.KafkaTimeoutError)
    assert "correlation id mismatch" in str(ei.value), str(ei.value)  # the cause is named
    t0 = time.monotonic()
    p.close()
    assert time.monotonic() - t0 < 1


def test_admin_against_garbage(garbage_server):
    a = fk.Admin(garbage_server, **FAST)
    t0 = time.monotonic()
    with pytest.raises(fk.KafkaError) as ei:
        a.list_topics(timeout_ms=2000)
    elapsed = time.monotonic() - t0
    assert 1.9 < elapsed < 3.5, elapsed
    assert isinstance(ei.value, fk.KafkaTimeoutError)
    msg = str(ei.value)
    assert "2000 ms" in msg and "correlation id mismatch" in msg, msg
    t0 = time.monotonic()
    a.close()
    assert time.monotonic() - t0 < 1


def test_consumer_against_garbage(garbage_server):
    c = fk.Consumer(garbage_server, auto_offset_reset="earliest", default_api_timeout_ms=2000, **FAST)
    c.assign([fk.TopicPartition("t", 0)])
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        try:
            assert c.poll(200) == []
        except fk.KafkaError:
            pass
    # A blocking call that needs the broker fails within its timeout.
    t0 = time.monotonic()
    with pytest.raises(fk.KafkaError):
        c.end_offsets([fk.TopicPartition("t", 0)])
    assert time.monotonic() - t0 < 3.5
    t0 = time.monotonic()
    c.close()
    assert time.monotonic() - t0 < 1


def _list_offsets_broker(latest_answers):
    """A broker answering ApiVersions, Metadata v4 (topic "t", one partition)
    and ListOffsets v1 for partition 0 with the offsets of `latest_answers`
    in turn (the last one repeated); returns (server, number answered)."""
    answered = [0]

    def serve(c):
        while True:
            key, _ver, cid, body = read_request_body(c)
            if key == 18:
                c.sendall(api_versions_answer(cid, [(18, 0, 3), (3, 4, 4), (2, 1, 1)]))
            elif key == 3:
                c.sendall(metadata_v4_answer(cid, server.port, ["t"]))
            elif key == 2:
                offset = latest_answers[min(answered[0], len(latest_answers) - 1)]
                answered[0] += 1
                # v1: [topic name, [partition, error code, timestamp, offset]]
                c.sendall(frame(struct.pack(">ii", cid, 1) + struct.pack(">h", 1) + b"t"
                                + struct.pack(">iihqq", 1, 0, 0, -1, offset)))

    server = Hostile(serve)
    return server, answered


def test_an_end_offset_answered_without_an_offset_is_asked_again():
    """Latest and earliest always have an offset; an answer of -1 with no
    error is asked again, never read as 0 (a silent empty Spark range)."""
    server, answered = _list_offsets_broker([-1, -1, 42])
    try:
        with fk.Consumer(f"127.0.0.1:{server.port}") as c:
            assert c.end_offsets([fk.TopicPartition("t", 0)], timeout_ms=10_000) == {fk.TopicPartition("t", 0): 42}
        assert answered[0] == 3
    finally:
        server.close()


def test_an_end_offset_never_answered_is_a_timeout_naming_why():
    server, _ = _list_offsets_broker([-1])
    try:
        with fk.Consumer(f"127.0.0.1:{server.port}") as c:
            with pytest.raises(fk.KafkaError, match="t-0 answered no earliest offset"):
                c.beginning_offsets([fk.TopicPartition("t", 0)], timeout_ms=1_000)
    finally:
        server.close()
