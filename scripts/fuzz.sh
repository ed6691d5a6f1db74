#!/usr/bin/env bash
# Coverage-guided fuzzing campaign (cargo-fuzz / libFuzzer, AddressSanitizer).
# Not part of CI (needs the nightly toolchain and minutes per target); the
# corpus it grows is replayed by `cargo test` (tests/fuzz_corpus.rs).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#
# The `response` target runs once per API the client speaks, pinned with
# FERROKAFKA_FUZZ_API, so every response decoder gets its own execution
# count. Prints one line per run: target, executions, crashes; writes the
# table to fuzz/report.md. Crashing inputs land in fuzz/artifacts/<target>/:
# copy them to fuzz/regressions/<target>/ (named for what they found) once
# fixed.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(response record_batches fetched_records frames decompression metadata_update group_assignment sasl_scram)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
cargo +nightly fuzz build -O
bin=target/x86_64-unknown-linux-gnu/release
report=report.md
if [ ! -f "$report" ]; then # accumulates over runs; delete it to start over
    echo "| target | api | seconds | executions | crashes |" > "$report"
    echo "|---|---|---|---|---|" >> "$report"
fi
# Key numbers of the APIs the client speaks (frame::CORE_APIS).
apis=(0 1 2 3 8 9 10 11 12 13 14 15 16 17 18 19 20 22 36)

run() { # target api(or -) corpus_dir
    local t="$1" api="$2" corpus="$3" log
    mkdir -p "$corpus" "artifacts/$t"
    log=$(mktemp)
    set +e
    FERROKAFKA_FUZZ_API=$([ "$api" = - ] || echo "$api") "$bin/$t" "$corpus" "seeds/$t" \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=131072 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
    local rc=$?
    set -e
    local execs crashes
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    crashes=$([ $rc -eq 0 ] && echo 0 || echo 1)
    echo "$t api=$api ${secs}s execs=$execs crashes=$crashes"
    echo "| $t | $api | $secs | $execs | $crashes |" >> "$report"
    if [ "$rc" -ne 0 ]; then
        tail -40 "$log"
    fi
    rm -f "$log"
}

for t in "${targets[@]}"; do
    if [ "$t" = response ]; then
        for a in "${apis[@]}"; do
            run response "$a" "corpus/response-$a"
        done
    else
        run "$t" - "corpus/$t"
    fi
done
echo "report: fuzz/$report"
