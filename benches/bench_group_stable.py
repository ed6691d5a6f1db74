"""Time to a stable group: classic cooperative-sticky vs KIP-848, on the mock cluster.

Three ferrokafka members (classic cooperative-sticky, classic eager range, KIP-848) subscribe at once to a 6-partition topic; the clock stops
when every partition is owned by exactly one member and every member owns at least one
(checked after each round of polls); a phase that does not settle within 30 s counts
as a timeout and is left out of the median. Then a fourth member joins and the clock measures
the move to 4 members the same way, and then one member leaves.

Both protocols use the same heartbeat interval (`--heartbeat-ms`; Java's default is
3000): the classic members set heartbeat_interval_ms, the KIP-848 coordinator (the
mock) hands it out. The mock's classic groups start without an initial rebalance delay.

    PYTHONPATH=python python benches/bench_group_stable.py [--runs 3] [--heartbeat-ms 3000]

Measured 2026-11-24 (2 shared cores under load, librdkafka 2.16.0 mock), median seconds:
heartbeat 500 ms: KIP-848 join 0.53-1.01, 4th joins 0.53-0.55, one leaves 0.97-1.01;
heartbeat 3000 ms: KIP-848 join 4.53, 4th joins 3.01, one leaves 3.01. The classic
members (cooperative-sticky, and eager range) did not settle within 30 s in almost every
run: the mock answers a SyncGroup that arrives once the group is up with
INVALID_REQUEST, the member rejoins, and the group rebalances again (seen with main's
build too).
"""

from __future__ import annotations

import argparse
import statistics
import time

import ferrokafka as fk
from ferrokafka.testing import MockCluster

TOPIC = "stable"
RAISED: list = []
PARTITIONS = 6


def make(bs: str, protocol: str, heartbeat_ms: int) -> fk.Consumer:
    if protocol == "consumer":
        return fk.Consumer(bs, group_id="g", group_protocol="consumer", enable_auto_commit=False)
    strategy = "range" if protocol == "classic-range" else "cooperative-sticky"
    return fk.Consumer(bs, group_id="g", enable_auto_commit=False,
                       partition_assignment_strategy=strategy,
                       heartbeat_interval_ms=heartbeat_ms, session_timeout_ms=max(10_000, 4 * heartbeat_ms))


def stable(members: list) -> bool:
    owned = [{tp.partition for tp in m.assignment()} for m in members]
    if any(not o for o in owned):
        return False
    total = sum(len(o) for o in owned)
    return total == PARTITIONS and set().union(*owned) == set(range(PARTITIONS))


TIMEOUT_S = 30.0


def wait_stable(members: list, timeout: float = TIMEOUT_S) -> float:
    """Seconds to a stable group; inf when it did not settle within `timeout`."""
    t0 = time.monotonic()
    while not stable(members):
        if time.monotonic() - t0 > timeout:
            return float("inf")
        for m in members:
            try:
                m.poll(10)
            except fk.KafkaError as e:
                # The mock answers a SyncGroup that arrives after the leader's with
                # INVALID_REQUEST; the member raises it once and rejoins.
                RAISED.append(e.code() if callable(getattr(e, "code", None)) else e)
    return time.monotonic() - t0


def one_run(protocol: str, heartbeat_ms: int) -> tuple[float, float, float]:
    with MockCluster(3) as mock:
        mock.set_group_consumer_heartbeat_interval_ms(heartbeat_ms)
        mock.create_topic(TOPIC, PARTITIONS)
        bs = mock.bootstrap_servers
        members = [make(bs, protocol, heartbeat_ms) for _ in range(3)]
        for m in members:
            m.subscribe([TOPIC])
        try:
            first = wait_stable(members)
            if first == float("inf"):
                return first, first, first
            fourth = make(bs, protocol, heartbeat_ms)
            fourth.subscribe([TOPIC])
            members.append(fourth)
            grow = wait_stable(members)
            members.pop(0).close()
            shrink = wait_stable(members)
            return first, grow, shrink
        finally:
            for m in members:
                m.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--heartbeat-ms", type=int, default=3000)
    ap.add_argument("--only", nargs="*", help="classic, classic-range, consumer")
    args = ap.parse_args()
    print(f"heartbeat {args.heartbeat_ms} ms, {args.runs} runs, median (min-max) seconds")
    print(f"{'protocol':<28}{'3 members join':>26}{'4th joins':>26}{'one leaves':>26}")
    variants = (("classic", "classic cooperative-sticky"), ("classic-range", "classic range (eager)"),
                ("consumer", "KIP-848 (consumer)"))
    for protocol, label in variants:
        if args.only and protocol not in args.only:
            continue
        runs = [one_run(protocol, args.heartbeat_ms) for _ in range(args.runs)]
        cols = []
        for i in range(3):
            xs = [r[i] for r in runs if r[i] != float("inf")]
            missed = len(runs) - len(xs)
            col = f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})" if xs else "-"
            cols.append(col + (f" {missed}x>{TIMEOUT_S:.0f}s" if missed else ""))
        print(f"{label:<28}" + "".join(f"{c:>26}" for c in cols) + f"   errors raised by poll: {len(RAISED)}")
        RAISED.clear()


if __name__ == "__main__":
    main()
