"""The tables, plots and docs page of benches/compare.py, and the names both share.

Kept apart from the measuring code so that re-rendering (--from-json) reads
as one piece; nothing here measures anything.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOCS = os.path.join(ROOT, "docs")
IMG = os.path.join(DOCS, "img")

# Producer variants, in table order. The first one is the baseline of the ratios:
# librdkafka's fastest way, as most users write it.
PRODUCER_VARIANTS = [
    ("confluent", "produce", "confluent `produce()`, `poll(0)` every 50k"),
    ("confluent", "produce_cb", "confluent `produce(on_delivery=cb)`, `poll(0)` every 1k"),
    ("ferrokafka", "send", "ferrokafka `send()`, futures dropped"),
    ("ferrokafka", "send_keep", "ferrokafka `send()`, futures kept"),
    ("ferrokafka", "send_batch_list", "ferrokafka `send_batch(list)`, 10k per call"),
    ("ferrokafka", "send_batch_arrow", "ferrokafka `send_batch(pyarrow)`, 10k per call"),
]
CONSUMER_VARIANTS = [
    ("confluent", "consume", "confluent `consume(10000)`"),
    ("ferrokafka", "poll", "ferrokafka `poll(max_records=10000)`"),
    ("ferrokafka", "poll_arrow", "ferrokafka `poll_arrow()`"),
    # The knob under test: SO_RCVBUF at Java's 64 KiB (ferrokafka's default
    # until 2026-11-27) instead of the OS's autotuning, the default since.
    ("ferrokafka", "poll_arrow_rcvbuf64k", "ferrokafka `poll_arrow()`, `receive_buffer_bytes=65536`"),
]
LAYOUTS = [("single", 1, False), ("keyed6", 6, True)]  # name, partitions, keyed
LAYOUT_TEXT = {"single": "unkeyed, 1 partition", "keyed6": "keyed, 6 partitions"}
ACKS = ["1", "all"]  # "1": acks=1, idempotence off; "all": acks=all + idempotence
ACKS_TEXT = {"1": "acks=1", "all": "acks=all+idem"}
CODECS = ["none", "lz4"]
BATCH_CHUNK = 10_000

def _fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def _ratio(x: float) -> str:
    return f"{x:.2f}x"


def producer_table(summary: dict) -> list:
    rows = ["| layout | acks | codec | variant | records/s | CPU µs/record | wall spread | "
            "throughput vs confluent f&f | CPU/record vs confluent f&f |",
            "|---|---|---|---|---|---|---|---|---|"]
    for layout, _, _ in LAYOUTS:
        for acks in ACKS:
            for codec in CODECS:
                base = summary.get(f"producer/{layout}/{acks}/{codec}/confluent.produce", {})
                for client, api, label in PRODUCER_VARIANTS:
                    s = summary.get(f"producer/{layout}/{acks}/{codec}/{client}.{api}")
                    if s is None:
                        continue
                    head = f"| {LAYOUT_TEXT[layout]} | {ACKS_TEXT[acks]} | {codec} | {label} |"
                    if "rate" not in s:
                        rows.append(head + f" failed: {'; '.join(s['errors'])[:120]} | | | | |")
                        continue
                    spread = f"{(s['worst_wall'] / s['best_wall'] - 1) * 100:.0f} %" if s["runs_ok"] > 1 else "-"
                    if "rate" in base and api != "produce":
                        vs = f" {_ratio(s['rate'] / base['rate'])} | {_ratio(s['cpu_us'] / base['cpu_us'])} |"
                    else:
                        vs = " 1 | 1 |" if api == "produce" else " - | - |"
                    rows.append(head + f" {_fmt_rate(s['rate'])} | {s['cpu_us']:.2f} | {spread} |" + vs)
    return rows


def consumer_table(summary: dict) -> list:
    rows = ["| partitions | variant | records/s | CPU µs/record | first records after assign | wall spread | "
            "throughput vs confluent | CPU/record vs confluent |", "|---|---|---|---|---|---|---|---|"]
    for parts in (1, 6):
        base = summary.get(f"consumer/{parts}/confluent.consume", {})
        for client, api, label in CONSUMER_VARIANTS:
            s = summary.get(f"consumer/{parts}/{client}.{api}")
            if s is None:
                continue
            if "rate" not in s:
                rows.append(f"| {parts} | {label} | failed: {'; '.join(s['errors'])[:120]} | | | | | |")
                continue
            spread = f"{(s['worst_wall'] / s['best_wall'] - 1) * 100:.0f} %" if s["runs_ok"] > 1 else "-"
            if api == "consume":
                vs = " 1 | 1 |"
            elif "rate" in base:
                vs = f" {_ratio(s['rate'] / base['rate'])} | {_ratio(s['cpu_us'] / base['cpu_us'])} |"
            else:
                vs = " - | - |"
            rows.append(f"| {parts} | {label} | {_fmt_rate(s['rate'])} | {s['cpu_us']:.2f} | "
                        f"{s['first_ms']:.0f} ms | {spread} |" + vs)
    return rows


def latency_table(summary: dict) -> list:
    rows = ["| client | p50 | p99 | p99.9 | max | p50 over rounds | p99 over rounds | achieved rate |",
            "|---|---|---|---|---|---|---|---|"]
    for c in ("confluent", "ferrokafka"):
        s = summary.get(f"latency/{c}")
        if s is None:
            continue
        if "p50" not in s:
            rows.append(f"| {c} | failed: {'; '.join(s['errors'])[:120]} | | | | | | |")
            continue
        rng = lambda xs: f"{min(xs):.2f}-{max(xs):.2f} ms"  # noqa: E731
        rows.append(f"| {c} | {s['p50']:.2f} ms | {s['p99']:.2f} ms | {s['p999']:.2f} ms | {s['max']:.2f} ms | "
                    f"{rng(s['p50_all'])} | {rng(s['p99_all'])} | {s['achieved_rate']:,.0f}/s |")
    return rows


def ceiling_table(summary: dict, floor_us: float) -> list:
    """The ceiling rows; the kernel's part (system time) of each row's CPU is
    shown beside it, the goal stays on the whole CPU."""
    rows = ["| side | variant | records/s | CPU µs/record | of it in the kernel | CPU vs floor |",
            "|---|---|---|---|---|---|"]
    for kind, variants in (("producer", PRODUCER_VARIANTS), ("consumer", CONSUMER_VARIANTS)):
        for client, api, label in variants:
            s = summary.get(f"ceiling/{kind}/{client}.{api}")
            if s is None:
                continue
            if "rate" not in s:
                rows.append(f"| {kind} | {label} | failed: {'; '.join(s['errors'])[:120]} | | | |")
                continue
            kernel = f"{s['sys_us']:.3f}" if "sys_us" in s else "n/a"
            rows.append(f"| {kind} | {label} | {_fmt_rate(s['rate'])} | {s['cpu_us']:.3f} | {kernel} | "
                        f"{s['cpu_us'] / floor_us:.1f}x |")
    return rows


def aio_table(summary: dict) -> list:
    from _aio_children import AIO_VARIANTS

    rows = ["| mode | variant | records/s | CPU µs/record | wall spread | ferrokafka.aio vs this |",
            "|---|---|---|---|---|---|"]
    for client, mode, label in AIO_VARIANTS:
        s = summary.get(f"aio/{mode}/{client}")
        if s is None:
            continue
        if "rate" not in s:
            rows.append(f"| {mode} | {label} | failed: {'; '.join(s['errors'])[:120]} | | | |")
            continue
        spread = f"{(s['worst_wall'] / s['best_wall'] - 1) * 100:.0f} %" if s["runs_ok"] > 1 else "-"
        ours = summary.get(f"aio/{mode}/ferrokafka", {})
        vs = (f"{_ratio(ours['rate'] / s['rate'])} throughput, {_ratio(ours['cpu_us'] / s['cpu_us'])} CPU"
              if "rate" in ours and client != "ferrokafka" else "-")
        rows.append(f"| {mode} | {label} | {_fmt_rate(s['rate'])} | {s['cpu_us']:.2f} | {spread} | {vs} |")
    return rows


def txn_table(summary: dict) -> list:
    from _txn_children import TXN_VARIANTS

    rows = ["| commits asked/s | client | commits/s achieved | records/s | CPU µs/record | ferrokafka vs this |",
            "|---|---|---|---|---|---|"]
    for client, rate in TXN_VARIANTS:
        s = summary.get(f"txn/{rate}/{client}")
        if s is None:
            continue
        if "rate" not in s:
            rows.append(f"| {rate} | {client} | failed: {'; '.join(s['errors'])[:120]} | | | |")
            continue
        ours = summary.get(f"txn/{rate}/ferrokafka", {})
        vs = (f"{_ratio(ours['rate'] / s['rate'])} throughput, {_ratio(ours['cpu_us'] / s['cpu_us'])} CPU"
              if "rate" in ours and client != "ferrokafka" else "-")
        rows.append(f"| {rate} | {client} | {s['txn_rate']:.1f} | {_fmt_rate(s['rate'])} | "
                    f"{s['cpu_us']:.2f} | {vs} |")
    return rows


def goals_table(summary: dict, floor_us) -> list:
    """Issue 17's goals, checked against this run's figures (a goal with no figure
    in this run is left out)."""
    rows = ["| goal | where | figure | met |", "|---|---|---|---|"]

    def add(goal, where, figure, ok):
        rows.append(f"| {goal} | {where} | {figure} | {'yes' if ok else '**no**'} |")

    for layout, _, _ in LAYOUTS:
        for acks in ACKS:
            for codec in CODECS:
                pre = f"producer/{layout}/{acks}/{codec}/"
                base = summary.get(pre + "confluent.produce", {})
                where = f"{LAYOUT_TEXT[layout]}, {ACKS_TEXT[acks]}, {codec}"
                if "rate" not in base:
                    continue
                s = summary.get(pre + "ferrokafka.send", {})
                if "rate" in s:
                    t, c = s["rate"] / base["rate"], s["cpu_us"] / base["cpu_us"]
                    add("`send()` ≥ 1.0x confluent f&f throughput, ≤ 1.0x its CPU/record", where,
                        f"{t:.2f}x, {c:.2f}x", t >= 1.0 and c <= 1.0)
                s = summary.get(pre + "ferrokafka.send_batch_list", {})
                if "rate" in s:
                    t, c = s["rate"] / base["rate"], s["cpu_us"] / base["cpu_us"]
                    add("`send_batch` ≥ 1.5x confluent f&f throughput, ≤ 1/3 its CPU/record", where,
                        f"{t:.2f}x, {c:.2f}x", t >= 1.5 and c <= 1 / 3)
    for parts in (1, 6):
        base = summary.get(f"consumer/{parts}/confluent.consume", {})
        if "rate" not in base:
            continue
        for api, limit in (("poll", 0.7), ("poll_arrow", 0.2)):
            s = summary.get(f"consumer/{parts}/ferrokafka.{api}", {})
            if "rate" in s:
                c = s["cpu_us"] / base["cpu_us"]
                add(f"`{api}()` ≤ {limit}x confluent `consume` CPU/record", f"{parts} partition(s)", f"{c:.2f}x",
                    c <= limit)
    lc, lf = summary.get("latency/confluent", {}), summary.get("latency/ferrokafka", {})
    if "p50" in lc and "p50" in lf:
        add("acknowledgement latency p50 and p99 ≤ confluent's", "10k/s, linger 0, acks=all",
            f"p50 {lf['p50']:.2f} vs {lc['p50']:.2f} ms, p99 {lf['p99']:.2f} vs {lc['p99']:.2f} ms",
            lf["p50"] <= lc["p50"] and lf["p99"] <= lc["p99"])
    for mode in ("produce_each", "consume_each"):
        ours = summary.get(f"aio/{mode}/ferrokafka", {})
        for peer, goal in (("aiokafka", 5.0), ("confluent", 2.0)):
            s = summary.get(f"aio/{mode}/{peer}", {})
            if "rate" in ours and "rate" in s:
                x = ours["rate"] / s["rate"]
                add(f"asyncio per-record `{mode}` ≥ {goal:g}x {peer} throughput (issue 20)", "1 partition",
                    f"{x:.2f}x", x >= goal)
    for rate in (1, 10, 100):
        ours, ck = summary.get(f"txn/{rate}/ferrokafka", {}), summary.get(f"txn/{rate}/confluent", {})
        if "rate" in ours and "rate" in ck:
            x = ours["rate"] / ck["rate"]
            add("transactional throughput ≥ 1.0x confluent's (issue 18)", f"{rate} commits/s asked",
                f"{x:.2f}x", x >= 1.0)
    if floor_us:
        for api in ("send_batch_list", "send_batch_arrow", "poll_arrow"):
            kind = "consumer" if api.startswith("poll") else "producer"
            s = summary.get(f"ceiling/{kind}/ferrokafka.{api}", {})
            if "rate" in s:
                x = s["cpu_us"] / floor_us
                add("batches on the ceiling run: CPU/record within 10x of copy+CRC32C", f"`{api}`",
                    f"{s['cpu_us']:.3f} µs = {x:.1f}x floor", x <= 10)
    return rows


def make_plots(summary: dict, img_dir: str, smoke: bool) -> list:
    """PNG bar charts and the latency CDF. `compare.py --write-docs` checks for
    matplotlib before it runs; called without it, say so and return no images."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: plots skipped (pip install matplotlib)", file=sys.stderr)
        return []
    os.makedirs(img_dir, exist_ok=True)
    tag = " (SMOKE RUN, NOT EVIDENCE)" if smoke else ""
    made = []

    groups = [(lay, a, c) for lay, _, _ in LAYOUTS for a in ACKS for c in CODECS]
    groups = [g for g in groups if any(f"producer/{g[0]}/{g[1]}/{g[2]}/" in k for k in summary)]
    if groups:
        for metric, ylabel, fname in (("rate", "records/s", "producer_throughput.png"),
                                      ("cpu_us", "CPU µs per record (lower is better)", "producer_cpu.png")):
            fig, ax = plt.subplots(figsize=(12, 5))
            width = 0.8 / len(PRODUCER_VARIANTS)
            for j, (client, api, label) in enumerate(PRODUCER_VARIANTS):
                ys = [summary.get(f"producer/{lay}/{a}/{c}/{client}.{api}", {}).get(metric, 0) for lay, a, c in groups]
                ax.bar([i + (j - (len(PRODUCER_VARIANTS) - 1) / 2) * width for i in range(len(groups))], ys,
                       width, label=label.replace("`", ""))
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([f"{LAYOUT_TEXT[lay]}\n{ACKS_TEXT[a]}, {c}" for lay, a, c in groups], fontsize=8)
            ax.set_ylabel(ylabel)
            ax.set_title(f"Producer, {ylabel.split(' (')[0]}{tag}")
            ax.legend(fontsize=7)
            fig.tight_layout()
            fig.savefig(os.path.join(img_dir, fname), dpi=100)
            plt.close(fig)
            made.append(fname)

    def rate_and_cpu(fname: str, title: str, groups: list, group_label, variants: list, ylabel: str) -> None:
        """Two panels (throughput, CPU per record) of bars: one group per x
        value, one bar per (key function, label) variant."""
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        width = 0.8 / len(variants)
        for ax, metric, yl in ((axes[0], "rate", ylabel), (axes[1], "cpu_us", "CPU µs per record (lower is better)")):
            for j, (key, label) in enumerate(variants):
                ys = [summary.get(key(g), {}).get(metric, 0) for g in groups]
                ax.bar([i + (j - (len(variants) - 1) / 2) * width for i in range(len(groups))], ys, width,
                       label=label.replace("`", ""))
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([group_label(g) for g in groups])
            ax.set_ylabel(yl)
            ax.legend(fontsize=7)
        fig.suptitle(f"{title}{tag}")
        fig.tight_layout()
        fig.savefig(os.path.join(img_dir, fname), dpi=100)
        plt.close(fig)
        made.append(fname)

    cparts = [p for p in (1, 6) if any(k.startswith(f"consumer/{p}/") for k in summary)]
    if cparts:
        rate_and_cpu("consumer.png", "Consumer", cparts, lambda p: f"{p} partition{'s' if p > 1 else ''}",
                     [(lambda p, c=client, a=api: f"consumer/{p}/{c}.{a}", label)
                      for client, api, label in CONSUMER_VARIANTS], "records/s")
    rates = [r for r in (1, 10, 100) if any(k.startswith(f"txn/{r}/") for k in summary)]
    if rates:
        rate_and_cpu("txn.png", "Transactional producer", rates,
                     lambda r: f"{r} commit{'s' if r > 1 else ''}/s asked",
                     [(lambda r, c=client: f"txn/{r}/{c}", client) for client in ("confluent", "ferrokafka")],
                     "committed records/s")

    lat = [(c, summary[f"latency/{c}"]) for c in ("confluent", "ferrokafka") if "cdf_ms" in summary.get(f"latency/{c}", {})]
    if lat:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for c, s in lat:
            ax.plot(s["cdf_ms"], [i / 1000 for i in range(len(s["cdf_ms"]))], label=f"{c} (p50 {s['p50']:.2f} ms)")
        ax.set_xscale("log")
        ax.set_xlabel("send -> delivery report, ms (log)")
        ax.set_ylabel("fraction of records")
        ax.set_title(f"Acknowledgement latency CDF{tag}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(img_dir, "latency_cdf.png"), dpi=100)
        plt.close(fig)
        made.append("latency_cdf.png")
    return made


def render_docs(data: dict, images: list, runs_json: str) -> str:
    """The page; `runs_json` is the file that holds every single run."""
    env, a, summary = data["environment"], data["args"], data["summary"]
    smoke = data["smoke"]
    out = ["# Benchmarks: ferrokafka vs confluent-kafka", ""]
    if smoke:
        out += ["> **Smoke run, not evidence.** Generated with small numbers (`--quick`, fewer than 3 rounds",
                "> or fewer records than the default) to check the harness; the figures below say nothing",
                "> about either client. Rerun `python benches/compare.py --write-docs` for real figures.", ""]
    out += [
        f"Generated by `{data['command']}` on {env['date_utc']}. Every figure in this file is",
        f"produced only this way (the JSON with every single run is `{os.path.relpath(runs_json, ROOT)}`);",
        "do not edit it by hand, rerun the script. Figures of other parts (record codec, network",
        "core, metadata, Spark) come from other scripts: `docs/benchmarks-components.md`.",
        "",
    ]
    changed = env.get("changed_during_run") or []
    if changed == ["ferrokafka_commit"]:
        # The source tree was edited (or committed) while the runs went on, but
        # the extension every child imported was not rebuilt: one build.
        out += [f"> Note: the source tree changed during this run (commit at the end: "
                f"{env.get('ferrokafka_commit_end', '?')}) but the extension was not rebuilt "
                f"(built {env.get('ferrokafka_core_built')}, before the first run): every row "
                "measures that one build.", ""]
    elif changed:
        out += [f"> **Warning:** ferrokafka changed during this run ({', '.join(changed)} "
                "differ between start and end): rows may mix two builds. Rerun.", ""]
    out += [
        "## How measured",
        "",
        f"Machine: {env['nproc']} CPUs ({env['cpu_model']}), Linux {env['kernel']}, load average "
        f"{env['loadavg_start'][0]:.1f} at the start; a shared VM, so only figures of one run compare. "
        f"Python {env['python']}; ferrokafka {env['ferrokafka']} (source commit {env['ferrokafka_commit']}, "
        f"extension built {env.get('ferrokafka_core_built')}); "
        f"confluent-kafka {env['confluent_kafka']} (librdkafka {env['librdkafka']}); pyarrow {env['pyarrow']}. "
        f"Broker: {env['broker']}, on loopback.",
        "",
        f"Protocol (issue 17): {a['records']:,} records of {a['size']} B per run. Every run is a fresh child "
        "process (a fresh client) writing to or reading from a fresh topic, created with `fk.Admin` "
        "and deleted after. Both clients keep **their own defaults** except the knob under test: "
        "`acks=1` with idempotence off, or `acks=all` with idempotence on; compression `none` or "
        "`lz4`; nothing sets batch size or linger. One warm-up record per producer is "
        "acknowledged before the clock starts (connection, metadata, producer id); inputs (keys, "
        "lists, Arrow arrays) are built before it too. The clock runs from the first send to the "
        "return of `flush()`. CPU is `getrusage(RUSAGE_SELF)` of the child around the timed section: "
        "every thread of that client, not the broker. Runs are ordered by rotation over "
        f"{a['rounds']} round(s); per variant the best wall time and the lowest CPU time are kept "
        "(\"wall spread\" is the slowest round over the fastest). Ratios are against confluent "
        "fire-and-forget `produce()` in the same row group.",
        "",
        "Consumers: the topic is filled first (not timed), then each client reads every record "
        "from offset 0 with `assign()`, summing the length of every value; the clock starts at "
        "`assign()` (after a metadata warm-up) and stops at the last record. Each call asks for "
        "at most the records still missing (`consume(10000)`, `poll(max_records=10000)`, "
        "`poll_arrow()` with its default of 100,000), so no call waits out its timeout for "
        "records that will never come. confluent-kafka needs a `group.id` (a fresh one); "
        "nothing else is set but ferrokafka's `auto_offset_reset=earliest` (confluent: assign at "
        "`OFFSET_BEGINNING`). The rate includes the wait for the first records, also shown apart: a "
        "fixed cost that weighs less the larger N is (while this harness was built, "
        "confluent-kafka's first fetch of 6 partitions from Tansu waited out its default "
        "`fetch.wait.max.ms` of 500 ms; with 10 ms it did not).",
        "",
        f"Latency: {a['latency_rate']:,} records/s paced for {a['latency_seconds']} s, one partition, "
        "`linger.ms=0` / `linger_ms=0`, `acks=all` with idempotence on both; each client is "
        "busy-polled with `poll(0)` between sends in the sending thread, and the delivery callback "
        "stamps the time, so the resolution is the send interval for both. The row is the round "
        "with the lowest p50.",
        "",
    ]
    secs = {k.split("/")[0] for k in summary}
    if "producer" in secs:
        out += ["## Producer", ""] + producer_table(summary) + [""]
        out += [f"![{f}](img/{f})" for f in images if f.startswith("producer")] + [""]
    if "consumer" in secs:
        out += ["## Consumer", ""] + consumer_table(summary) + [""]
        out += [f"![{f}](img/{f})" for f in images if f.startswith("consumer")] + [""]
    if "latency" in secs:
        out += ["## Acknowledgement latency", ""] + latency_table(summary) + [""]
        out += [f"![{f}](img/{f})" for f in images if f.startswith("latency")] + [""]
    if "ceiling" in secs:
        floor = env.get("floor_us")
        out += ["## Ceiling: the client's own cost", "",
                "The same clients against a sink broker (`rust/ferrokafka-net/examples/fake_broker.rs`, "
                "started by `benches/_sink.py`): Produce is acknowledged at once, Fetch is served from one "
                "batch kept in memory, so nothing waits on storage and what the client process spends is "
                "its own cost. The sink copies no record: it reads each produced batch's header for its "
                "record count and has the kernel discard the rest (`MSG_TRUNC`), and writes Fetch answers "
                "from the one batch (vectored); on a two-core machine its copies would crowd the caches "
                "the client runs in and show up in the client's figures. One partition, `acks=1`, no compression, defaults otherwise; same "
                "protocol as above (fresh topic and process per run, rotation, lowest CPU), with "
                f"{a.get('ceiling_records', a['records']):,} records per run: a steady stream's cost, "
                "one-time start-up (a few ms) amortized as in a stream. The floor is "
                f"what copying a {a['size']} B record and CRC32C over it costs on this machine, "
                "with the CRC32C code the client uses (`record/crc.rs`) "
                f"(`fake_broker --floor`): {floor:.4f} µs per record, the least of "
                f"{len(env.get('floor_samples_us') or [floor])} samples (at the start and before each "
                "ceiling round, each the best of 20 runs).", ""]
        if env.get("tcp_send_us") is not None:
            out += ["Part of every row is the kernel's (its system time, in its own column): on loopback "
                    "mostly TCP's copies of the records into and out of the socket. Unless built with precise "
                    "accounting (`CONFIG_VIRT_CPU_ACCOUNTING_GEN`), Linux splits a process's CPU into user "
                    "and system time by sampling at each timer tick, so that column is an estimate; the "
                    "total is exact. "
                    "For scale, the same "
                    "bytes through a loopback socket with no client at all (`benches/_sink.py` "
                    f"`tcp_cost`, 1 MB writes and reads, the other end as the sink's, sampled as the floor "
                    f"is) cost the sending process "
                    f"{env['tcp_send_us']:.4f} µs a record ({env['tcp_send_us'] / floor:.1f}x the floor) and "
                    f"the receiving one {env['tcp_recv_us']:.4f} µs ({env['tcp_recv_us'] / floor:.1f}x): "
                    "a cost any client pays for moving its bytes, which the goal's 10x counts in.", ""]
        out += ceiling_table(summary, floor) + [""]
    if "aio" in secs:
        out += ["## asyncio: ferrokafka.aio vs aiokafka vs confluent-kafka's AIO classes", "",
                "One partition, each client with its defaults (issue 20). Per-record produce: every "
                "record through the client's per-record call, its delivery futures awaited once more "
                "than 10,000 are pending (the same window for all), clock to the last delivery. "
                "Per-record consume: one record per `await`. Batched forms where the client has "
                "one (confluent's `AIOProducer` has no batch call). Same protocol as above: fresh "
                "topic and child process per run, rotation, best wall, lowest CPU "
                "(`getrusage` of the child: the loop, the client's threads and executors).", ""]
        out += aio_table(summary) + [""]
    if "txn" in secs:
        out += ["## Transactions: ferrokafka vs confluent-kafka's transactional producer", "",
                f"One partition, each client with its defaults plus a `transactional_id` (issue 18). "
                f"Records of {a['size']} B are sent as fast as the per-record call takes them "
                "(confluent `produce()` fire-and-forget with `poll(0)` every 10,000, ferrokafka "
                "`send()`), and the transaction is committed each time 1/rate s have passed since "
                f"it began, for {a.get('txn_seconds', 5)} s; the last one is committed before the "
                "clock stops. Records/s counts committed records over the wall time; the achieved "
                "commit rate is lower than the one asked for when a commit (which waits for every "
                "record of the transaction to be acknowledged, then EndTxn) takes longer than the "
                "period. Same protocol as above: fresh topic and child process per run, rotation, "
                "best rate, lowest CPU per record.", ""]
        out += txn_table(summary) + [""]
        out += [f"![{f}](img/{f})" for f in images if f.startswith("txn")] + [""]
    out += ["## Goals of issues 17, 18 and 20, checked against this run", ""] + goals_table(summary, env.get("floor_us")) + [""]
    missing = [s for s in ("producer", "consumer", "latency", "ceiling", "aio", "txn") if s not in secs]
    if missing:
        out += [f"Not measured in this run: {', '.join(missing)}.", ""]
    return "\n".join(out)


def print_tables(summary: dict, floor_us=None) -> None:
    secs = {k.split("/")[0] for k in summary}
    for name, fn in (("producer", producer_table), ("consumer", consumer_table), ("latency", latency_table),
                     ("aio", aio_table), ("txn", txn_table)):
        if name in secs:
            print(f"\n## {name}\n" + "\n".join(fn(summary)))
    if "ceiling" in secs and floor_us:
        print("\n## ceiling\n" + "\n".join(ceiling_table(summary, floor_us)))
    print("\n## goals\n" + "\n".join(goals_table(summary, floor_us)))
