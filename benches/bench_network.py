"""Pipelined Metadata round trips per second over one connection, against Tansu.

ferrokafka's NetworkClient beside confluent-kafka's ``list_topics`` and
kafka-python's ``KafkaClient``, in the same run against the same broker.
Every client asks for all topics (the broker has none, so the answers are the
same size). Run after ``maturin develop --release``:

    python benches/bench_network.py [--seconds 3] [--in-flight 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))


def start_tansu():
    from test_network import Tansu  # the tests' launcher

    return Tansu().start()


def bench_ferrokafka(bs: str, seconds: float, in_flight: int) -> float:
    import ferrokafka as fk
    from ferrokafka.protocol import MetadataRequest

    nc = fk.NetworkClient(bs, max_in_flight_requests_per_connection=in_flight)
    node = nc.least_loaded_node()
    while not nc.ready(node):
        nc.poll(50)
    while nc.in_flight_request_count():
        nc.poll(50)
    raw = MetadataRequest()._build()  # built once, like a hot loop would
    done = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        while nc.ready(node):
            nc.send(nc.new_client_request(node.id, raw))
        done += len(nc.poll(100))
    while nc.in_flight_request_count():
        done += len(nc.poll(100))
    elapsed = time.perf_counter() - t0
    nc.close()
    return done / elapsed


def bench_confluent(bs: str, seconds: float) -> float | None:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError:
        return None
    a = AdminClient({"bootstrap.servers": bs})
    a.list_topics(timeout=10)
    done = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        a.list_topics(timeout=10)
        done += 1
    return done / (time.perf_counter() - t0)


def bench_kafka_python(bs: str, seconds: float, in_flight: int) -> tuple[float, str] | None:
    """kafka-python's low-level client: ``KafkaClient`` (2.x) or its 3.x drop-in
    ``kafka.net.compat.KafkaNetClient``; up to ``in_flight`` futures outstanding."""
    try:
        import kafka
    except ImportError:
        return None
    try:
        from kafka.client_async import KafkaClient as Client  # kafka-python 2.x
        from kafka.protocol.metadata import MetadataRequest

        req = MetadataRequest[1](topics=None)
        kw = {"max_in_flight_requests_per_connection": in_flight}
        node_of = lambda c: c.least_loaded_node()  # noqa: E731
    except ImportError:
        from kafka.net.compat import KafkaNetClient as Client  # kafka-python 3.x
        from kafka.protocol.metadata import MetadataRequest

        req = MetadataRequest(topics=None)
        kw = {"max_in_flight_requests_per_connection": in_flight}
        node_of = lambda c: c.least_loaded_node(bootstrap_fallback=True)  # noqa: E731
    c = Client(bootstrap_servers=bs, **kw)
    node = node_of(c)
    while not c.ready(node):
        c.poll(timeout_ms=50)
    futures: list = []
    done = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        while c.ready(node) and len(futures) < in_flight:
            futures.append(c.send(node, req))
        c.poll(timeout_ms=100, future=futures[0] if futures else None)
        left = []
        for f in futures:
            if f.is_done:
                done += 1
            else:
                left.append(f)
        futures = left
    elapsed = time.perf_counter() - t0
    c.close()
    return done / elapsed, f"kafka-python {kafka.__version__}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--in-flight", type=int, default=5)
    ap.add_argument("--bootstrap", default=os.environ.get("FERROKAFKA_BOOTSTRAP"))
    ap.add_argument("--fake", action="store_true",
                    help="use the in-memory fake broker (cargo build --release -p ferrokafka-net "
                         "--example fake_broker) to measure client cost instead of broker cost")
    args = ap.parse_args()
    broker = None
    fake = None
    bs = args.bootstrap
    if args.fake:
        exe = os.path.join(os.path.dirname(__file__), "..", "target", "release", "examples", "fake_broker")
        fake = subprocess.Popen([exe, "0"], stdout=subprocess.PIPE, text=True)
        bs = f"127.0.0.1:{fake.stdout.readline().strip()}"
    if bs is None:
        broker = start_tansu()
        bs = broker.bootstrap_servers
    try:
        fk_rate = bench_ferrokafka(bs, args.seconds, args.in_flight)
        ck_rate = bench_confluent(bs, args.seconds)
        kp_rate = bench_kafka_python(bs, args.seconds, args.in_flight)
    finally:
        if broker is not None:
            broker.stop()
        if fake is not None:
            fake.kill()
    where = "in-memory fake broker" if args.fake else ("Tansu" if broker else bs)
    print(f"Metadata round trips/s over one connection to {where} (in flight <= {args.in_flight}, {args.seconds:.0f} s each)")
    print(f"  ferrokafka NetworkClient      {fk_rate:10.0f}/s")
    if ck_rate is not None:
        print(f"  confluent-kafka list_topics   {ck_rate:10.0f}/s   ferrokafka x{fk_rate / ck_rate:.1f}")
    else:
        print("  confluent-kafka               not installed")
    if kp_rate is not None:
        rate, name = kp_rate
        print(f"  {name:<29} {rate:10.0f}/s   ferrokafka x{fk_rate / rate:.1f}")
    else:
        print("  kafka-python                  not installed")


if __name__ == "__main__":
    main()
