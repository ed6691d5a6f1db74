"""Resource soak (issue 8): client open/close cycles and an RSS soak.

    python benches/soak.py --cycles 1000            # fd / thread counts
    python benches/soak.py --minutes 10              # RSS while producing and consuming
    python benches/soak.py --cycles 1000 --minutes 10 [--bootstrap host:port]

Without --bootstrap an embedded Tansu broker is started. Prints tables for
docs/reliability.md. The CI-sized versions are in tests/test_resources.py.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import ferrokafka as fk

TP = fk.TopicPartition


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def native_threads() -> int:
    return len(os.listdir("/proc/self/task"))


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cycles(bs: str, n: int) -> None:
    topic = "soak-cycles"
    with fk.Producer(bs) as p:  # warm-up: runtime threads, the topic
        p.send(topic, b"x", partition=0).result(10)
    base = (fds(), threading.active_count(), native_threads(), rss_mb())
    print(f"{'cycle':>6} {'fds':>5} {'py threads':>10} {'native threads':>14} {'rss MB':>8}")
    print(f"{0:>6} {base[0]:>5} {base[1]:>10} {base[2]:>14} {base[3]:>8.1f}")
    t0 = time.time()
    worst = [0, 0, 0]
    for i in range(1, n + 1):
        p = fk.Producer(bs, linger_ms=0)
        p.send(topic, b"%d" % i, partition=0).result(10)
        p.close()
        c = fk.Consumer(bs, auto_offset_reset="earliest")
        c.assign([TP(topic, 0)])
        c.poll(20)
        c.close()
        a = fk.Admin(bs)
        a.list_topics()
        a.close()
        now = (fds(), threading.active_count(), native_threads())
        worst = [max(w, x - b) for w, x, b in zip(worst, now, base)]
        if i % (n // 10 or 1) == 0:
            print(f"{i:>6} {now[0]:>5} {now[1]:>10} {now[2]:>14} {rss_mb():>8.1f}")
    time.sleep(0.5)
    end = (fds(), threading.active_count(), native_threads(), rss_mb())
    print(f"{n} cycles (3 clients each, {3 * n} clients) in {time.time() - t0:.0f} s: "
          f"fds {base[0]} -> {end[0]}, python threads {base[1]} -> {end[1]}, native threads {base[2]} -> {end[2]}, "
          f"rss {base[3]:.1f} -> {end[3]:.1f} MB; worst growth while cycling: fds +{worst[0]}, "
          f"python threads +{worst[1]}, native threads +{worst[2]}")


def soak(bs: str, minutes: float) -> None:
    topic = f"soak-rss-{int(time.time())}"
    p = fk.Producer(bs, linger_ms=5)
    c = fk.Consumer(bs, auto_offset_reset="earliest")
    c.assign([TP(topic, 0)])
    # create the topic before the consumer's first fetch
    p.send(topic, b"start", partition=0).result(10)
    sent = got = 0
    samples: list[tuple[float, float, int]] = []
    t0 = time.time()
    warm = 60.0 if minutes >= 3 else minutes * 60 / 5
    next_sample = t0 + warm
    end = t0 + minutes * 60
    while time.time() < end:
        for i in range(5000):
            p.send(topic, value=b"%d-%d" % (sent, i) * 8, partition=0)
        sent += 5000
        p.flush(60)
        while got < sent:
            got += len(c.poll(200, max_records=5000))
        if time.time() >= next_sample:
            samples.append((time.time() - t0, rss_mb(), got))
            next_sample += 15
    p.close()
    c.close()
    xs = [s[0] for s in samples]
    ys = [s[1] for s in samples]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / (sum((x - mx) ** 2 for x in xs) or 1)
    print(f"RSS soak: {minutes:.0f} min, {got:,} records produced and consumed ({got / (end - t0):,.0f}/s), "
          f"{n} samples after a {warm:.0f} s warm-up")
    print(f"  first {ys[0]:.1f} MB, last {ys[-1]:.1f} MB, min {min(ys):.1f}, max {max(ys):.1f}; "
          f"trend {slope * 600:+.2f} MB per 10 min")
    for t, r, g in samples[:: max(1, n // 10)]:
        print(f"  t={t:6.0f}s rss={r:7.1f} MB records={g:,}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=0)
    ap.add_argument("--minutes", type=float, default=0)
    ap.add_argument("--bootstrap")
    a = ap.parse_args()
    if not a.cycles and not a.minutes:
        a.cycles, a.minutes = 1000, 10
    broker = None
    bs = a.bootstrap
    if not bs:
        from ferrokafka.testing import EmbeddedBroker

        broker = EmbeddedBroker()
        bs = broker.bootstrap_servers
    try:
        if a.cycles:
            cycles(bs, a.cycles)
        if a.minutes:
            soak(bs, a.minutes)
    finally:
        if broker:
            broker.close()


if __name__ == "__main__":
    main()
