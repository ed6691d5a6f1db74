#!/usr/bin/env bash
# kafka-python's own test suite against ferrokafka's kafka-python facade.
#
# At run time: downloads the sdist of the installed kafka-python version from
# PyPI (nothing upstream is committed here), unpacks it to a temp dir, and runs
# the test files that exercise kafka-python's public API with `import kafka`
# answered by ferrokafka.compat.kafka (scripts/peer-tests/kafka_python_hook.py)
# and the integration fixtures pointed at an embedded broker (Tansu).
# Prints per file: collected, passed, failed, skipped (with reasons).
#
# Environment: PYTHON (default: python), PEER_TIMEOUT (seconds per test, default 120),
# KEEP=1 keeps the temp dir, PEER_FILES="a.py b.py" runs only these files,
# PEER_STRICT=1 exits 1 when any of them fails (CI runs the files that need no broker
# and must all pass). Exit status: 0 when it ran (failures are figures, not errors),
# 2 when the sdist cannot be had.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python}"
export PYTHONPATH="$ROOT/python:$HERE${PYTHONPATH:+:$PYTHONPATH}"

VERSION="$("$PY" -c 'import importlib.metadata as m; print(m.version("kafka-python"))' 2>/dev/null)" || {
    echo "kafka-python is not installed: its version decides which test suite to fetch" >&2; exit 2; }
WORK="$(mktemp -d -t kafka-python-peer.XXXXXX)"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

echo "== kafka-python $VERSION: fetching its sdist"
if ! "$PY" -m pip download --quiet --no-binary :all: --no-deps "kafka-python==$VERSION" -d "$WORK" >"$WORK/pip.log" 2>&1; then
    echo "cannot download the kafka-python $VERSION sdist from PyPI (offline?):" >&2
    tail -3 "$WORK/pip.log" >&2
    exit 2
fi
tar -xzf "$WORK"/kafka_python-*.tar.gz -C "$WORK"
SRC="$(echo "$WORK"/kafka_python-*/)"
SRC="${SRC%/}"
export KAFKA_PYTHON_SDIST="$SRC"

# Public API: run. The rest tests kafka-python's internals, which the facade
# does not have (it has ferrokafka's Rust core instead).
IN_SCOPE=(
    test/test_package.py
    test/test_future.py
    test/test_serializer.py
    test/integration/test_producer_integration.py
    test/integration/test_consumer_integration.py
    test/integration/test_admin_integration.py
)
OUT_OF_SCOPE=(
    "test/test_cluster.py: kafka-python's ClusterMetadata internals"
    "test/test_codec.py: kafka-python's own compression codecs (ferrokafka compresses in Rust)"
    "test/test_metrics.py: kafka-python's metrics library (sensors, reporters)"
    "test/test_mock_broker.py: kafka-python's in-process protocol-level mock broker"
    "test/test_util.py: kafka-python's internal helpers"
    "test/net/*: kafka-python's connection, selector and transport stack"
    "test/integration/test_sasl_integration.py: needs a SASL listener (the embedded broker is plaintext)"
    "test/integration/test_ssl_integration.py: needs a TLS listener (the embedded broker is plaintext)"
)

if [ -n "${PEER_FILES:-}" ]; then
    read -r -a IN_SCOPE <<<"$PEER_FILES"
fi
failed_any=0

cd "$SRC"
printf '%-52s %9s %6s %6s %7s %7s\n' file collected passed failed errors skipped
for f in "${IN_SCOPE[@]}"; do
    xml="$WORK/$(basename "$f" .py).xml"
    broker=0
    case "$f" in test/integration/*) broker=1 ;; esac
    # KAFKA_VERSION 4.0: a KRaft broker (no ZooKeeper fixture); KAFKA_ROOT: any
    # existing directory, since no broker is spawned from it (KAFKA_URI is set).
    KAFKA_VERSION=4.0 KAFKA_ROOT="$WORK" KAFKA_PYTHON_PEER_BROKER=$broker "$PY" -m pytest -p kafka_python_hook -p no:cacheprovider -q \
        -o addopts="" -o log_level=WARNING --timeout="${PEER_TIMEOUT:-120}" --timeout-method=signal \
        --junitxml="$xml" "$f" >"$WORK/$(basename "$f" .py).log" 2>&1 || failed_any=1
    "$PY" "$HERE/junit_summary.py" "$f" "$xml" "$WORK/$(basename "$f" .py).log"
done
echo
echo "== out of scope (not run): kafka-python internals or listeners the embedded broker lacks"
for line in "${OUT_OF_SCOPE[@]}"; do echo "   $line"; done
[ "${KEEP:-0}" = 1 ] && echo "(logs kept in $WORK)"
if [ "${PEER_STRICT:-0}" = 1 ] && [ "$failed_any" = 1 ]; then
    exit 1
fi
exit 0
