#!/usr/bin/env bash
# Runs every peer test suite in turn (scripts/peer-tests/*.sh): other clients'
# own tests against ferrokafka's drop-in facades. Each prints its figures; a
# suite that cannot run (e.g. no PyPI access) says so and the next one runs.
# Exit status: 1 if any suite could not run, else 0.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rc=0
for suite in "$HERE"/peer-tests/*.sh; do
    [ -e "$suite" ] || continue
    echo "=== $(basename "$suite")"
    bash "$suite" "$@" || { echo "=== $(basename "$suite") could not run (exit $?)"; rc=1; }
    echo
done
exit "$rc"
