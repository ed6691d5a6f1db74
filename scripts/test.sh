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
cargo test --workspace --quiet
echo "== stubs: mypy.stubtest ferrokafka._core ($((SECONDS - start))s)"
# _core.pyi must match the compiled module exactly (names, signatures, defaults).
python -m mypy.stubtest ferrokafka._core
echo "== pytest ($((SECONDS - start))s)"
# Deps were just installed: a missing broker or confluent-kafka is a failure, not a skip.
export FERROKAFKA_REQUIRE_BROKERS=1
rc=0
python -m pytest -q "$@" || rc=$?
if [ "$rc" = 5 ]; then
    echo "pytest collected no tests: treating as failure (the suite must not pass by running nothing)" >&2
    exit 1
fi
echo "== done in $((SECONDS - start))s (pytest exit $rc)"
exit "$rc"
