#!/usr/bin/env bash
# Run confluent-kafka-python's own unit tests (those that need no Kafka
# cluster) against ferrokafka's drop-in facade, ferrokafka.compat.confluent_kafka.
#
# The upstream tests are obtained at RUN TIME into a temporary directory and
# never committed here:
#   * by default: `git clone --depth 1` of the tag matching the installed
#     confluent-kafka (CONFLUENT_KAFKA_TAG overrides, e.g. v2.16.1);
#   * without network: CONFLUENT_KAFKA_PYTHON_GIT_DIR=<a git dir of the
#     repository> (e.g. a bare mirror) and optionally CONFLUENT_KAFKA_REF
#     (default: the tag if the mirror has it, else HEAD).
# `import confluent_kafka` is redirected to the facade by a sitecustomize
# module put first on PYTHONPATH. Submodules the facade does not provide
# (avro, schema_registry, aio, ...) become placeholders whose names raise
# NotImplementedError when used, so a test file that imports them at the top
# still runs its other tests; the tests that use them fail, as they should.
#
# Prints collected/passed/failed/skipped per file (docs/compat-confluent.md
# records the figures). Usage: scripts/peer-tests/confluent.sh [test files...]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"; else PY=python3; fi
fi
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(test_Producer.py test_Consumer.py test_misc.py test_kafka_error.py test_error.py
         test_topic_partition.py test_message.py test_Admin.py test_enums.py test_log.py
         test_threads.py test_serializer_error.py)
fi

INSTALLED="$("$PY" -c 'import importlib.metadata as m; print(m.version("confluent-kafka"))' 2>/dev/null || true)"
TAG="${CONFLUENT_KAFKA_TAG:-v${INSTALLED:-2.16.1}}"
WORK="$(mktemp -d -t ferrokafka-peer-confluent.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
SRC="$WORK/src"
mkdir -p "$SRC"

if [ -n "${CONFLUENT_KAFKA_PYTHON_GIT_DIR:-}" ]; then
  GD="$CONFLUENT_KAFKA_PYTHON_GIT_DIR"
  REF="${CONFLUENT_KAFKA_REF:-}"
  if [ -z "$REF" ]; then
    if git --git-dir="$GD" rev-parse -q --verify "refs/tags/$TAG" >/dev/null; then REF="$TAG"; else REF=HEAD; fi
  fi
  echo "upstream tests: $GD at $REF ($(git --git-dir="$GD" describe --tags "$REF" 2>/dev/null || echo '?'))"
  git --git-dir="$GD" archive "$REF" tests | tar -x -C "$SRC"
else
  echo "upstream tests: github.com/confluentinc/confluent-kafka-python at $TAG"
  git clone -q --depth 1 --branch "$TAG" https://github.com/confluentinc/confluent-kafka-python "$WORK/clone"
  cp -r "$WORK/clone/tests" "$SRC/tests"
fi

mkdir -p "$WORK/shim"
cat > "$WORK/shim/sitecustomize.py" <<'PYEOF'
# Peer-test harness only: make `import confluent_kafka` give ferrokafka's facade.
import sys
import types

import ferrokafka.compat.confluent_kafka as _facade

sys.modules["confluent_kafka"] = _facade
import ferrokafka.compat.confluent_kafka.cimpl  # noqa: E402,F401  (a submodule, imported to alias it)

for _name in ("admin", "serialization", "error", "cimpl"):
    sys.modules["confluent_kafka." + _name] = getattr(_facade, _name)


class _Missing(types.ModuleType):
    """A confluent-kafka submodule the facade does not provide."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        name = self.__name__

        def missing(*args, **kwargs):
            raise NotImplementedError(f"{name}.{attr} is not provided by ferrokafka's facade")

        return type(attr, (), {"__init__": missing, "__new__": lambda cls, *a, **k: missing()})


class _Finder:
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith("confluent_kafka.") and fullname not in sys.modules:
            import importlib.machinery as m
            return m.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _Missing(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
PYEOF

cd "$SRC"
printf '%-28s %9s %7s %7s %8s\n' file collected passed failed skipped
TOTAL=(0 0 0 0)
for f in "${FILES[@]}"; do
  [ -f "tests/$f" ] || { printf '%-28s %s\n' "$f" "(not in this version)"; continue; }
  PYTHONPATH="$WORK/shim:$ROOT/python:$SRC" timeout 600 "$PY" -m pytest -q -p no:cacheprovider \
    --junitxml="$WORK/$f.xml" "tests/$f" >"$WORK/$f.log" 2>&1 || true
  read -r c p fl s < <("$PY" - "$WORK/$f.xml" <<'PYEOF'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0, 0, 0, 0)
    raise SystemExit
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
t = sum(int(s.get("tests", 0)) for s in suites)
f = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
k = sum(int(s.get("skipped", 0)) for s in suites)
print(t, t - f - k, f, k)
PYEOF
)
  printf '%-28s %9s %7s %7s %8s\n' "$f" "$c" "$p" "$fl" "$s"
  TOTAL=($((TOTAL[0]+c)) $((TOTAL[1]+p)) $((TOTAL[2]+fl)) $((TOTAL[3]+s)))
  if [ -n "${PEER_TESTS_VERBOSE:-}" ]; then grep -E '^(FAILED|ERROR)' "$WORK/$f.log" || true; fi
  if [ -n "${PEER_TESTS_KEEP_LOGS:-}" ]; then mkdir -p "$PEER_TESTS_KEEP_LOGS"; cp "$WORK/$f.log" "$WORK/$f.xml" "$PEER_TESTS_KEEP_LOGS/" 2>/dev/null || true; fi
done
printf '%-28s %9s %7s %7s %8s\n' TOTAL "${TOTAL[0]}" "${TOTAL[1]}" "${TOTAL[2]}" "${TOTAL[3]}"
