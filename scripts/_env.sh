# Sourced by the other scripts: cd to the repo root and activate a Python environment.
# Uses the active virtualenv if there is one; otherwise creates/reuses ./.venv, because a
# fresh machine's system Python may be "externally managed" (PEP 668) and refuse pip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

_apt_install() {
    # Only on Debian/Ubuntu, only as root (or with passwordless sudo), only when missing.
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo -n"
    command -v apt-get >/dev/null || return 1
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if [ -z "${VIRTUAL_ENV:-}" ]; then
    PY="${PYTHON:-python3}"
    if [ ! -x .venv/bin/python ]; then
        if ! "$PY" -m venv .venv 2>/dev/null; then
            rm -rf .venv
            _apt_install "python3-venv" || { echo "cannot create a virtualenv: install python3-venv" >&2; exit 1; }
            "$PY" -m venv .venv
        fi
    fi
    # shellcheck disable=SC1091
    source .venv/bin/activate
fi

# Native deps of the Rust crates (zstd/lz4 build C code).
if ! command -v cc >/dev/null; then
    _apt_install build-essential || { echo "a C compiler (cc) is required" >&2; exit 1; }
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
