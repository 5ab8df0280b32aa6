#!/usr/bin/env bash
# CI: a bounded fuzzing pass over every decoder of bytes from strangers (fuzz/: frame
# headers, handshake messages, control messages) and the check nodes run on the schedules
# they are sent (schedule_check), 30 s per target under libFuzzer with
# memory limits, so a hostile length that makes a decoder allocate gigabytes fails CI.
# Needs a nightly toolchain (cargo-fuzz is installed if missing); without one it says so
# and passes: proto/tests/hostile_bytes.rs, run by `cargo test`, covers the same inputs
# on stable. Exits non-zero on any crash, panic, broken round trip or OOM.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${FUZZ_SECONDS:-30}"
# Any single allocation of this many MiB or more is a failure (a hostile length prefix).
MALLOC_LIMIT_MB="${FUZZ_MALLOC_LIMIT_MB:-16}"
TARGETS=(frame_header handshake control schedule_check)

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "== fuzz: no nightly toolchain, so no cargo-fuzz; skipped."
  echo "   The property-test fallback covers the same decoders and inputs on stable:"
  echo "   cargo test -p topocomm-proto --test hostile_bytes"
  exit 0
fi

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "== fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

echo "== fuzz: seed corpora (valid encodings of sample messages)"
mkdir -p fuzz/corpus
FUZZ_SEED_DIR="$PWD/fuzz/corpus" cargo test -q -p topocomm-proto --test hostile_bytes --locked write_fuzz_seeds

echo "== fuzz: build ${TARGETS[*]}"
(cd fuzz && cargo +nightly fuzz build)

for target in "${TARGETS[@]}"; do
  echo "== fuzz: $target for ${SECONDS_PER_TARGET}s"
  # The outer timeout only guards against a hang libFuzzer itself does not catch.
  if ! (cd fuzz && timeout $((SECONDS_PER_TARGET + 120)) cargo +nightly fuzz run "$target" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 -malloc_limit_mb="$MALLOC_LIMIT_MB" -timeout=10 \
    -print_final_stats=1 2>&1 | grep -v '^#[0-9]*	\(NEW\|REDUCE\|pulse\)'; exit "${PIPESTATUS[0]}"); then
    echo "== fuzz: $target FAILED; the input that did it is in fuzz/artifacts/$target/" >&2
    ls -l "fuzz/artifacts/$target/" >&2 || true
    exit 1
  fi
done
echo "== fuzz: no crash in ${#TARGETS[@]} targets"
