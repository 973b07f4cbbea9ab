#!/usr/bin/env bash
# Sets up and runs Cask's test suite: every test in a debug build, then the concurrency tests
# again under the thread sanitizer. Ends with one line "N passed, M failed". Usage: Tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/setup.sh
main_log=$(mktemp) tsan_log=$(mktemp)
trap 'rm -f "$main_log" "$tsan_log"' EXIT

swift build --build-tests
status=0
swift test --skip-build --disable-swift-testing 2>&1 | tee "$main_log" || status=$?
echo "== concurrency tests under the thread sanitizer"
swift test --sanitize=thread --scratch-path .build/tsan --disable-swift-testing --filter "ConcurrencyTests|ObjectsStoreTests" 2>&1 | tee "$tsan_log" || status=$?

# XCTest prints "Executed N tests, with F failures" per suite and for the whole run; the largest N
# (and F) of a run is its total, whatever order stdout and stderr interleave in.
totals() {
    awk '/Executed [0-9]+ tests?, with [0-9]+ failures?/ { if ($2 + 0 > n) n = $2 + 0; if ($5 + 0 > f) f = $5 + 0 }
         END { printf "%d %d", n, f }' "$1"
}
read -r main_executed main_failed <<<"$(totals "$main_log")"
read -r tsan_executed tsan_failed <<<"$(totals "$tsan_log")"
executed=$((main_executed + tsan_executed))
failed=$((main_failed + tsan_failed))
log="$tsan_log"
if grep -q "WARNING: ThreadSanitizer" "$log"; then
    echo "ThreadSanitizer reported a data race"
    failed=$((failed + 1))
    status=1
fi
echo "$((executed - failed)) passed, $failed failed"
exit "$status"
