#!/usr/bin/env bash
# Builds the libFuzzer targets in Tests/Fuzz (one binary, with the address sanitizer) and runs
# each for a bounded time, starting from the seed corpus in Tests/Fuzz/Corpus/<target>.
#
#   Tools/fuzz.sh                        # every target, 60 s each
#   Tools/fuzz.sh --time 3600            # longer runs
#   Tools/fuzz.sh --target object-decoder
#   Tools/fuzz.sh --runs 1500            # a fixed number of inputs per target, from a fixed seed
#   Tools/fuzz.sh --ci                   # what Tools/test.sh runs: fixed counts, about 30 s a target
#   Tools/fuzz.sh --write-seeds          # regenerate Tests/Fuzz/Corpus from the seed writers
#
# The binary is built from Tests/Fuzz/*.swift together with the library's sources, with
# -D FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION: checksums are all zero in that build and encryption
# seals nothing (every tag is zero and opens), so mutations reach the parsers behind them (the seeds
# are written by the same build). New inputs the fuzzer
# finds go to a scratch corpus (CASK_FUZZ_SCRATCH, default /tmp/cask-fuzz), not into the
# repository; a crash leaves its input there and the script exits 1. Prints one line per target:
#   FUZZ target=<name> seconds=<n> runs=<n> coverage=<n> crashes=0
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
runs=""
ci=0
only=""
write_seeds=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --time) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --ci) ci=1; shift ;;
    --target) only="$2"; shift 2 ;;
    --write-seeds) write_seeds=1; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "Error: unknown argument '$1'" >&2; exit 64 ;;
  esac
done

Tools/setup.sh

scratch="${CASK_FUZZ_SCRATCH:-/tmp/cask-fuzz}"
mkdir -p "$scratch"
binary="$scratch/cask-fuzz"
# The tool's JSON Lines reader and writer need nothing of the tool: they join the build.
mapfile -t sources < <({ find Sources/Cask Tests/Fuzz -name '*.swift'; ls Tools/cask/ExportLineParser.swift Tools/cask/ExportLineParser+Cursor.swift Tools/cask/ExportLineWriter.swift Tools/cask/ByteScan.swift Tools/cask/ByteSink.swift; } | sort)
echo "== building $binary" >&2
# The library's C files (CRC-32C with the CPU's instruction, `fallocate`; CCaskCPU's prefetch and
# atomics are headers), then everything else, linked with the system libraries the library uses
# (Package.swift's system library targets): liblz4, libzstd (the dictionary trainer) and
# libsodium (encryption at rest). One whole-module compilation on every core: a third quicker
# than file by file.
objects=()
for c in Sources/CCaskCPU/*.c; do
  object="$scratch/$(basename "${c%.c}").o"
  clang -O2 -c "$c" -I Sources/CCaskCPU/include -o "$object"
  objects+=("$object")
done
swiftc -sanitize=fuzzer,address -O -wmo -num-threads "$(nproc)" -parse-as-library -module-name CaskFuzz -package-name cask \
  -D FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION -suppress-warnings \
  -I Sources/CLZ4 -llz4 -I Sources/CZstd -lzstd -I Sources/CSodium -lsodium -I Sources/CCaskCPU/include "${objects[@]}" \
  "${sources[@]}" -o "$binary" 2> >(grep -v "Cannot export local symbol" >&2)

# The Swift runtime's backtracer would race the sanitizer's report; leaks are not checked
# (the runtime's caches look like leaks), memory use is.
export SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0
status=0
for target in store-image object-decoder lz4-expander json-lines property-list; do
  [[ -n "$only" && "$only" != "$target" ]] && continue
  seeds="Tests/Fuzz/Corpus/$target"
  if [[ $write_seeds == 1 ]]; then
    rm -rf "$seeds"
    CASK_FUZZ_TARGET=$target CASK_FUZZ_WRITE_SEEDS="$seeds" "$binary"
    echo "== $target: wrote $(ls "$seeds" | wc -l) seeds to $seeds" >&2
    continue
  fi
  corpus="$scratch/corpus-$target"
  log="$scratch/$target.log"
  mkdir -p "$corpus"
  # CI: a fixed number of inputs from a fixed seed, so that a run is reproducible (and cannot fail
  # by chance); about 30 s each on a 2-core machine.
  declare -A ci_runs=([store-image]=1500 [object-decoder]=300000 [lz4-expander]=500000 [json-lines]=1000000 [property-list]=400000)
  [[ $ci == 1 ]] && runs="${ci_runs[$target]}"
  if [[ -n "$runs" ]]; then
    limit=(-runs="$runs" -seed=1)
    echo "== $target: fuzzing $runs inputs" >&2
  else
    limit=(-max_total_time="$seconds")
    echo "== $target: fuzzing for ${seconds}s" >&2
  fi
  # -rss_limit_mb / -malloc_limit_mb: a length field must never make us allocate without bound.
  # -timeout: an input that takes over 10 s is a hang.
  started=$SECONDS
  if CASK_FUZZ_TARGET=$target "$binary" "$corpus" "$seeds" \
      "${limit[@]}" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=512 \
      -artifact_prefix="$scratch/$target-" -print_final_stats=1 >"$log" 2>&1; then
    elapsed=$((SECONDS - started))
    executed=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
    echo "FUZZ target=$target seconds=$elapsed runs=$executed coverage=$coverage crashes=0"
  else
    elapsed=$((SECONDS - started))
    echo "FUZZ target=$target seconds=$elapsed FAILED (log: $log)"
    grep -E "ERROR|Fatal error|SUMMARY|Test unit written" "$log" | head -20 >&2 || true
    status=1
  fi
done
rm -rf /dev/shm/cask-fuzz-* 2>/dev/null || true
exit $status
