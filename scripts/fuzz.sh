#!/usr/bin/env bash
# Runs every cargo-fuzz target for N seconds each (default 60), one after
# the other. Needs the nightly toolchain and cargo-fuzz
# (`cargo install cargo-fuzz --locked`). The committed seeds in
# fuzz/corpus/<target>/ are read, never written: what the fuzzer finds goes
# to fuzz/target/corpus/<target>/ (gitignored), crashes to
# fuzz/artifacts/<target>/.
#
#   bash scripts/fuzz.sh            # 60 s per target
#   bash scripts/fuzz.sh 300        # 5 minutes per target
#   bash scripts/fuzz.sh 60 aggregate conditions
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(ingest_decode aggregate conditions manifest_reader)
fi
for t in "${targets[@]}"; do
    mkdir -p "target/corpus/$t"
    echo "== $t: ${seconds}s"
    cargo +nightly fuzz run "$t" "target/corpus/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1
done
echo "== ${targets[*]}: ${seconds}s each, no crash"
