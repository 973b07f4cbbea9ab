#!/usr/bin/env bash
# Sets up and runs Cask's test suite: every test in a debug build, then the concurrency tests
# again under the thread sanitizer. Ends with one line "N passed, M failed". Usage: Tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/setup.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT

swift build --build-tests
status=0
swift test --skip-build --disable-swift-testing 2>&1 | tee -a "$log" || status=$?
echo "== concurrency tests under the thread sanitizer"
swift test --sanitize=thread --scratch-path .build/tsan --disable-swift-testing --filter "ConcurrencyTests|ObjectsStoreTests" 2>&1 | tee -a "$log" || status=$?

# XCTest prints "Executed N tests, with F failures" per suite; the last of each run is its total.
summary=$(awk '/^\t? *Executed [0-9]+ tests?, with [0-9]+ failures?/ { total = $2; failed = $5 }
               /^Test Suite .(All tests|Selected tests). (passed|failed)/ { runs_total += total; runs_failed += failed; total = 0; failed = 0 }
               END { printf "%d %d", runs_total, runs_failed }' "$log")
read -r executed failed <<<"$summary"
if grep -q "WARNING: ThreadSanitizer" "$log"; then
    echo "ThreadSanitizer reported a data race"
    failed=$((failed + 1))
    status=1
fi
echo "$((executed - failed)) passed, $failed failed"
exit "$status"
