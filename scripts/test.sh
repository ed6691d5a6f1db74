#!/usr/bin/env bash
# The whole test suite: installs test deps, builds ferrokafka, runs cargo test and pytest.
# Extra arguments go to pytest. Exits non-zero if anything fails.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
start=$SECONDS
./scripts/install-test-deps.sh
./scripts/build.sh
echo "== rustfmt --check ($((SECONDS - start))s)"
# Formatting and lint are gates.
cargo fmt -p ferrokafka-protocol -p ferrokafka-net -p ferrokafka-py --check
echo "== clippy -D warnings ($((SECONDS - start))s)"
cargo clippy -p ferrokafka-protocol -p ferrokafka-net -p ferrokafka-py --all-targets --quiet -- -D warnings
echo "== ruff ($((SECONDS - start))s)"
python -m ruff check .
echo "== cargo test ($((SECONDS - start))s)"
# No debug info in the test build: the step took 152-157 s on a clean clone
# against 163 s with it, and a failing test still names its file and line.
CARGO_PROFILE_DEV_DEBUG=0 cargo test --workspace --quiet
echo "== stubs: mypy.stubtest ferrokafka._core ($((SECONDS - start))s)"
# _core.pyi must match the compiled module exactly (names, signatures, defaults).
python -m mypy.stubtest ferrokafka._core
echo "== pytest ($((SECONDS - start))s)"
# Deps were just installed: a missing broker or confluent-kafka is a failure, not a skip.
export FERROKAFKA_REQUIRE_BROKERS=1
# One worker process per core (pytest-xdist), each test file kept on one worker
# so its module fixtures (a Spark session, a broker) start once. Most tests
# wait on brokers and timeouts rather than compute: on 2 cores the suite took
# 460 s against 821 s in one process. Tests marked `serial` measure latency
# (an event loop's lag under load), which the other worker's load would
# distort, and those marked `chaos` time their faults against the client's
# timeouts (an outage 2 s longer than request_timeout_ms): both run
# afterwards, alone, as they always had. With `-m` among the arguments the
# selection is the caller's: one run, in parallel. `-n 0` runs in one process
# (e.g. for --pdb).
phase() {
    local r=0
    python -m pytest -q "$@" || r=$?
    # 5: nothing collected in this part (e.g. -k matched only the other part).
    if [ "$r" = 5 ]; then empty=$((empty + 1)); r=0; fi
    [ "$r" = 0 ] || rc=$r
}
rc=0
empty=0
parts=2
case " $* " in
*" -m "* | *" -m"?*)
    parts=1
    phase -n auto --dist loadfile "$@"
    ;;
*)
    phase -n auto --dist loadfile -m "not serial and not chaos" "$@"
    echo "== pytest, the serial and chaos tests alone ($((SECONDS - start))s)"
    phase -m "serial or chaos" "$@"
    ;;
esac
if [ "$empty" = "$parts" ]; then
    echo "pytest collected no tests: treating as failure (the suite must not pass by running nothing)" >&2
    exit 1
fi
echo "== done in $((SECONDS - start))s (pytest exit $rc)"
exit "$rc"
