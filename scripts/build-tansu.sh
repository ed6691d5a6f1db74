#!/usr/bin/env bash
# Builds (or finds) the Tansu broker EmbeddedBroker runs and prints its path; the
# script ships inside the package so pip users can run it too
# (`python -m ferrokafka.testing.build_tansu`). Arguments pass through (--id).
exec bash "$(dirname "${BASH_SOURCE[0]}")/../python/ferrokafka/testing/build_tansu.sh" "$@"
