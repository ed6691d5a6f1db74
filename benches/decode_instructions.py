"""Instructions a record in the consumer's decode, counted by callgrind.

A diagnostic for the consumer thread's hot loop (issue 17), as
``benches/instructions.py`` is for the producer's calling thread: CPU time on
a shared VM varies too much between runs to show a change of a few percent,
an instruction count does not. It runs cargo bench ``fetched`` (a Fetch
answer of 10 batches of 1,000 records of 100 B into the consumer's columns,
CRCs checked) under callgrind, counting only inside ``decode_fetched``, and
divides by the records decoded (1,000 for each batch parsed):

    python benches/decode_instructions.py

Needs valgrind (Debian: ``apt-get install valgrind``) and the Rust toolchain.
Fewer instructions is not the same as less time; a change is kept on this and
on ``benches/ab_builds.py --mode poll_arrow``.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import tempfile

from instructions import callgrind, total

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    subprocess.run(["cargo", "bench", "-q", "-p", "ferrokafka-net", "--bench", "network", "--no-run"],
                   cwd=ROOT, check=True)
    benches = [p for p in glob.glob(os.path.join(ROOT, "target", "release", "deps", "network-*"))
               if os.access(p, os.X_OK) and not p.endswith(".d")]
    binary = max(benches, key=os.path.getmtime)
    with tempfile.TemporaryDirectory() as tmp:
        text = callgrind([binary, "--bench", "fetched", "--profile-time", "2"],
                         "ferrokafka_net::consumer::records::decode_fetched*", tmp,
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    instructions = total(text)
    # Every call made while counting is listed as "cfn=(id) name" (the name
    # only the first time), then "calls=N ...".
    names = dict(re.findall(r"^c?fn=\((\d+)\) (.+)$", text, re.M))
    parse = {i for i, name in names.items() if name.endswith("RecordBatch::parse_exact")}
    batches = sum(int(n) for i, n in re.findall(r"^cfn=\((\d+)\).*\ncalls=(\d+)", text, re.M) if i in parse)
    records = batches * 1000
    print(f"{instructions:,} instructions over {records:,} records: {instructions / records:.1f} a record")


if __name__ == "__main__":
    main()
