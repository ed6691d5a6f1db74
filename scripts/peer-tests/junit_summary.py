"""One line of figures for a peer-test file from pytest's JUnit XML:
collected, passed, failed, errors, skipped; then the skip reasons (counted)
and the failing tests with the first line of their error.

usage: junit_summary.py FILE JUNIT_XML LOG
"""

from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET


def main(name: str, xml_path: str, log_path: str) -> None:
    try:
        root = ET.parse(xml_path).getroot()
    except (OSError, ET.ParseError):
        print(f"{name:<52} did not run (no JUnit report); the log's tail:")
        try:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                for line in f.read().splitlines()[-8:]:
                    print(f"    {line}")
        except OSError:
            pass
        return
    cases = root.iter("testcase")
    passed = failed = errors = skipped = 0
    reasons: collections.Counter = collections.Counter()
    failures = []
    for case in cases:
        kinds = {child.tag: child for child in case}
        if "skipped" in kinds:
            skipped += 1
            reasons[(kinds["skipped"].get("message") or "").strip()[:110]] += 1
        elif "failure" in kinds:
            failed += 1
            failures.append((case.get("name"), (kinds["failure"].get("message") or "").splitlines()[:1]))
        elif "error" in kinds:
            errors += 1
            failures.append((case.get("name"), (kinds["error"].get("message") or "").splitlines()[:1]))
        else:
            passed += 1
    total = passed + failed + errors + skipped
    print(f"{name:<52} {total:>9} {passed:>6} {failed:>6} {errors:>7} {skipped:>7}")
    for reason, n in reasons.most_common():
        print(f"    skipped x{n}: {reason}")
    for test, msg in failures:
        print(f"    FAILED {test}: {(msg[0] if msg else '')[:150]}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
