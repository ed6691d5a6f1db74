#!/usr/bin/env python
"""Writes docs/options.md from the option table (rust/ferrokafka-net/src/options/table.rs).

Run after changing the table and rebuilding (./scripts/build.sh);
tests/test_options.py fails while the page is out of date.
"""

import pathlib
import sys

from ferrokafka import _config

path = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "docs/options.md")
_config.write_docs(str(path))
print(f"wrote {path}")
