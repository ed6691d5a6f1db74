#!/usr/bin/env bash
# Builds and installs ferrokafka, then runs the demo (an embedded broker unless
# FERROKAFKA_BOOTSTRAP is set). Extra arguments go to the demo.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
# The embedded broker: ferrokafka's Tansu build (cached after the first run).
[ -n "${FERROKAFKA_BOOTSTRAP:-}" ] || ./scripts/build-tansu.sh >/dev/null
./scripts/build.sh
python -m ferrokafka demo "$@"
