#!/usr/bin/env bash
# Installs what the tests need: the Tansu broker (built from crates.io with our patch by
# scripts/build-tansu.sh, cached), confluent-kafka, pytest, ...
# Idempotent: pip skips what is already satisfied, build-tansu.sh what is already built.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
python -m pip install -q --upgrade pip >/dev/null
python -m pip install -q "maturin>=1.5,<2" "confluent-kafka>=2.4" \
    "pytest>=8" "pytest-timeout>=2" "pytest-xdist>=3.5" "pyarrow>=14" \
    "kafka-python==3.0.12" "aiokafka>=0.12" "uvloop>=0.19" "lz4>=4" "python-snappy>=0.7" "zstandard>=0.22" "xxhash>=3" "mypy>=1.10" "ruff==0.17.6" \
    "scramp>=1.4" "pyspark>=4.2" "pandas>=2.2,<3"
# rustfmt and clippy are gates in scripts/test.sh: make sure the toolchain has them.
if command -v rustup >/dev/null 2>&1; then
    rustup component add rustfmt clippy >/dev/null 2>&1 || echo "warning: could not add rustfmt/clippy" >&2
fi
# The embedded broker: built now (cold: minutes; then cached) so a failure shows here.
echo "tansu: $(./scripts/build-tansu.sh | tail -n 1)"

# TLS tests put stunnel (OpenSSL) in front of the broker; certificates are made
# with the openssl tool. Debian packages: installed when missing and possible.
if ! command -v stunnel4 >/dev/null 2>&1 && ! command -v stunnel >/dev/null 2>&1 || ! command -v openssl >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
    if command -v apt-get >/dev/null 2>&1; then
        ($SUDO apt-get install -y -q stunnel4 openssl >/dev/null 2>&1 \
            || ($SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q stunnel4 openssl >/dev/null 2>&1)) \
            || echo "warning: could not install stunnel4/openssl; TLS tests will fail under CI" >&2
    fi
fi
