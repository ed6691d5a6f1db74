#!/usr/bin/env bash
# Builds ferrokafka's Rust extension and installs the package (editable) into the environment.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
python -m pip install -q "maturin>=1.5,<2"
# maturin develop reuses ./target between runs; pip install -e would build in isolation.
maturin develop --release -q ${MATURIN_ARGS:-}
python -c "import ferrokafka; print('ferrokafka', ferrokafka.__version__, 'installed from', ferrokafka.__file__)"
