#!/usr/bin/env python
"""Writes the config mapping table of docs/compat-confluent.md from the one
table of the confluent-kafka facade
(python/ferrokafka/compat/confluent_kafka/_config.py, ``TABLE``).

``--check`` only compares (exit status 1 when the page is out of date);
tests/test_compat_confluent.py fails while it is.
"""

import pathlib
import sys

from ferrokafka.compat.confluent_kafka import _config

args = [a for a in sys.argv[1:] if a != "--check"]
path = pathlib.Path(args[0] if args else pathlib.Path(__file__).parent.parent / "docs/compat-confluent.md")
page = path.read_text(encoding="utf-8")
new = _config.splice_doc(page)
if "--check" in sys.argv:
    if new != page:
        print(f"{path} is out of date: run python scripts/gen-compat-doc.py")
        sys.exit(1)
    print(f"{path} is current")
else:
    path.write_text(new, encoding="utf-8")
    print(f"wrote {path}")
