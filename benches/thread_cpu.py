"""Where a batch path's CPU goes, per thread, against the sink broker.

A diagnostic, not the benchmark protocol (that is ``benches/compare.py``): one
process, one partition, defaults, and for each of ferrokafka's threads the CPU
time (``/proc/self/task/*/schedstat``, ns), minor page faults and context
switches it spent
in the timed section, per record. For the producer modes also the calling
thread's CPU inside the ``send_batch`` calls, to the nanosecond
(``time.thread_time_ns``), the figure to compare builds by
(``benches/ab_builds.py``); for ``poll_arrow`` the calling thread's CPU inside
``poll_arrow`` and in reading the value column, and that read timed again
alone after the run. Used to decide where the ceiling run's cost sits
(issue 17); run after ``./scripts/build.sh``:

    python benches/thread_cpu.py [send_batch_list|send_batch_arrow|poll_arrow] [--records N]
        [--set KEY=VALUE ...] [--per-call]

``--set`` gives the client an option other than its default (an integer
value is passed as one), to weigh a default against another value.

``--per-call`` (producer modes) also prints the calling thread, call by
call: the median and mean CPU a record (``time.thread_time_ns``) and the
minor faults of each stretch of 50 ``send_batch`` calls, to tell a run's
start (the queue of unsent batches growing into fresh memory, which shows
in the mean more than in the median) from its steady state. Reading the
thread's fault count costs a file read per call.

``--perf-ctl FIFO`` profiles the timed section only: the script writes
``enable`` and ``disable`` to perf's control FIFO around it, for

    mkfifo /tmp/ctl /tmp/ack
    perf record -D -1 --control fifo:/tmp/ctl,/tmp/ack -g -o perf.data -- \
        python benches/thread_cpu.py MODE --perf-ctl /tmp/ctl
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

BATCH = 10_000


def threads() -> dict:
    """{name:tid: (cpu seconds, minor faults, context switches)} of this
    process's threads."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            # Time on a CPU in ns (the scheduler's own count), where
            # `stat`'s user and system time are 10 ms ticks: too coarse for
            # a thread that runs ~30 ms of a run.
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                on_cpu = int(f.read().split()[0]) / 1e9
            with open(f"/proc/self/task/{tid}/status") as f:
                switches = sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:  # the thread ended meanwhile
            continue
        out[f"{name}:{tid}"] = (on_cpu, int(fields[7]), switches)
    return out


class PerfControl:
    """Enables a `perf record -D -1 --control fifo:...` run around the timed
    section (the set-up's imports and allocations left out of the profile)."""

    def __init__(self, path: str | None) -> None:
        self.f = open(path, "w") if path else None  # held open for the run

    def say(self, what: str) -> None:
        if self.f:
            self.f.write(what + "\n")
            self.f.flush()


PERF = PerfControl(None)
PER_CALL = False


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(mode: str, n: int, bootstrap: str, knobs: dict) -> tuple:
    import ferrokafka as fk

    if mode == "poll_arrow":
        import pyarrow.compute as pc

        time.sleep(0.5)  # numpy's thread pool settles (see compare.py)
        c = fk.Consumer(bootstrap, auto_offset_reset="earliest", **knobs)
        c.partitions_for("t")
        PERF.say("enable")
        before, c0, t0 = threads(), cpu(), time.perf_counter()
        c.assign([fk.TopicPartition("t", 0)])
        got = calls = polling = reading = 0
        tt = time.thread_time_ns
        while got < n:
            a = tt()
            b = c.poll_arrow(1000, max_records=min(100_000, n - got))
            m = tt()
            if b.num_rows:
                pc.sum(pc.binary_length(b.column("value")))
                got += b.num_rows
                calls += 1
            polling, reading = polling + m - a, reading + tt() - m
        wall, used, after = time.perf_counter() - t0, cpu() - c0, threads()
        PERF.say("disable")
        c.close()
        # The same read of the last batch again, now that nothing else runs:
        # what the step costs without the client's and the sink's threads
        # competing for the two cores and their caches.
        rounds, a = 200, tt()
        for _ in range(rounds):
            pc.sum(pc.binary_length(b.column("value")))
        alone = (tt() - a) / rounds / max(b.num_rows, 1)
        print(f"calling thread: {got / max(calls, 1):,.0f} records a batch; inside poll_arrow {polling / n:.1f} ns "
              f"a record, reading the values {reading / n:.1f} ns ({alone:.1f} ns for the same read alone, "
              "after the run)")
        return wall, used, before, after, None
    # As the ceiling run: acks=1, idempotence off, defaults otherwise.
    p = fk.Producer(bootstrap, acks=1, enable_idempotence=False, **knobs)
    p.send("t", b"w").result(30)
    if mode == "send_batch_arrow":
        import pyarrow as pa

        # One array at a time from a list freed at once, as compare.py
        # builds them: all the lists first and then the arrays left ~30 MB
        # of freed heap that the batch buffers then took without a page
        # fault, which the benchmark's run does not have.
        chunks = [pa.array([b"x" * 100] * BATCH, pa.binary()) for _ in range(0, n, BATCH)]
    else:
        chunks = [[b"x" * 100] * BATCH for _ in range(0, n, BATCH)]
    calling = 0
    calls = []  # (ns, minor faults) of each call, with --per-call
    stat = f"/proc/self/task/{threading.get_native_id()}/stat"
    PERF.say("enable")
    before, c0, t0 = threads(), cpu(), time.perf_counter()
    for v in chunks:
        f0 = _minor_faults(stat) if PER_CALL else 0
        a = time.thread_time_ns()
        p.send_batch("t", v)
        spent = time.thread_time_ns() - a
        calling += spent
        if PER_CALL:
            calls.append((spent, _minor_faults(stat) - f0))
    p.flush(300)
    wall, used, after = time.perf_counter() - t0, cpu() - c0, threads()
    PERF.say("disable")
    p.close()
    for at in range(0, len(calls), 50):
        part = calls[at:at + 50]
        median = statistics.median(ns for ns, _ in part) / BATCH
        mean = sum(ns for ns, _ in part) / len(part) / BATCH
        print(f"calls {at}-{at + len(part)}: median {median:.1f} mean {mean:.1f} ns CPU a record, "
              f"{sum(f for _, f in part)} minor faults")
    return wall, used, before, after, calling


def _minor_faults(stat: str) -> int:
    """The calling thread's minor faults so far (`/proc/.../stat`)."""
    with open(stat) as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", nargs="?", default="send_batch_list",
                    choices=["send_batch_list", "send_batch_arrow", "poll_arrow"])
    ap.add_argument("--records", type=int, default=3_000_000)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--perf-ctl", metavar="FIFO", help="perf's control FIFO (see above)")
    ap.add_argument("--per-call", action="store_true",
                    help="the calling thread's CPU and faults by stretches of 50 send_batch calls")
    args = ap.parse_args()
    global PERF, PER_CALL
    PERF = PerfControl(args.perf_ctl)
    PER_CALL = args.per_call
    from _sink import Sink

    knobs = {}
    for kv in args.set:
        key, _, value = kv.partition("=")
        knobs[key] = int(value) if value.lstrip("-").isdigit() else value
    with Sink(100) as sink:
        wall, used, before, after, calling = run(args.mode, args.records, sink.bootstrap, knobs)
    n = args.records
    print(f"{args.mode}: {n / wall:,.0f} records/s, {used / n * 1e6:.3f} µs CPU a record (getrusage)")
    if calling is not None:
        print(f"calling thread inside send_batch: {calling / n:.1f} ns CPU a record (thread_time_ns)")
    # Context switches (voluntary and not): on a VM each wake-up across
    # cores is an interrupt through the hypervisor, a cost no profile of
    # the thread's own code shows.
    print("thread            ns CPU/record  minor faults/1k records  switches/10k records")
    for key, (secs, faults, sw) in sorted(after.items()):
        s0, f0, w0 = before.get(key, (0.0, 0, 0))
        if secs - s0 > 0 or faults - f0 > 0:
            print(f"{key.split(':')[0]:<17} {(secs - s0) / n * 1e9:>13.1f}  {(faults - f0) / n * 1000:>10.1f}"
                  f"  {(sw - w0) / n * 10_000:>22.1f}")


if __name__ == "__main__":
    main()
