#!/usr/bin/env bash
# Sets up and runs Cask's test suite: every test in a debug build; the concurrency tests again
# under the thread sanitizer; the unit tests again under the address sanitizer; then each fuzz
# target for a fixed number of inputs, about 30 s (Tools/fuzz.sh --ci). Ends with one line
# "N passed, M failed" (a fuzz target counts as one test). Usage: Tools/test.sh
#
# The debug and address-sanitizer passes run one test process per core (swift test --parallel:
# each test in its own process, its output printed when it fails); their counts come from the
# xUnit reports. About 13 minutes on 2 cores once built (17 from a clean clone, whose sanitizer and
# fuzz builds take 5).
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/setup.sh
main_log=$(mktemp) tsan_log=$(mktemp) asan_log=$(mktemp) fuzz_log=$(mktemp)
main_xml=$(mktemp) asan_xml=$(mktemp)
trap 'rm -f "$main_log" "$tsan_log" "$asan_log" "$fuzz_log" "$main_xml" "$asan_xml"' EXIT
workers=$(nproc)

# Each part's wall-clock seconds, printed with the summary.
phase_start=$SECONDS timings=""
phase_done() { timings+=" $1 $((SECONDS - phase_start)) s,"; phase_start=$SECONDS; }
swift build --build-tests
phase_done "build"
status=0
swift test --skip-build --disable-swift-testing --parallel --num-workers "$workers" --xunit-output "$main_xml" 2>&1 | tee "$main_log" || status=$?
phase_done "debug tests"
echo "== concurrency tests under the thread sanitizer"
# No Swift backtracer under a sanitizer: when a test crashes, its memory server's reads of the stack
# trip the sanitizer, and the backtracer then waited forever (seen once, in the ASan pass).
export SWIFT_BACKTRACE=enable=no
swift test --sanitize=thread --scratch-path .build/tsan --disable-swift-testing --filter "ConcurrencyTests|ObjectsStoreTests|ListingTests.testListingsRacingWriters|ListingTests.testUnlockedListingsRacingSplitsAndMerges|LockFreeReadTests|SmallStoreCompactionTests.testLogoutCycles|RefreshTests.testRefreshesBesideALiveWriter|SuspendingTests|BackupTests.testBackupsBesideWritesAndCompactions|LowPriorityThreadTests" 2>&1 | tee "$tsan_log" || status=$?
phase_done "thread sanitizer (with its build)"
echo "== unit tests under the address sanitizer"
# Everything but the suites that mostly run child processes (crash tests, the tool, the Python
# second reader), the concurrency tests (the thread sanitizer's), the huge-page and index-memory
# figures (the kernel's pages and a count, slow under the sanitizer and no different with it), and
# the torn-tail garbage cases (the store-image fuzz target feeds recovery hostile bytes under the
# address sanitizer); the power-loss suite with a third of its random scenarios; and the long
# scenario runs that reach no code the shorter ones do not (the encrypted power-loss scenarios, the
# nonce ledger, the full-disk, logout and continuous-rewrite policies, a second cut while recovering,
# a reader in another process, and the racing listings the thread sanitizer runs), which the debug
# pass runs, to keep the suite inside its time. Leak checking is off: swift-corelibs-foundation
# (Data(contentsOf:)) and the runtime's weak references show up as leaks; memory errors are checked.
ASAN_OPTIONS=detect_leaks=0 CASK_POWERLOSS_SEEDS=4 swift test --sanitize=address --scratch-path .build/asan \
    --disable-swift-testing --parallel --num-workers "$workers" --xunit-output "$asan_xml" \
    --skip "CrashTests|ToolTests|ToolExportTests|ToolRecoverTests|ToolBackupTests|ToolEncryptionTests|ToolRekeyCrashTests|ConcurrencyTests|SecondReaderTests|HugePageTests|testMemoryOverheadPerKeyForAMillion16ByteKeys|testGarbageAfterTheLastRecordIsCut|ReaderAgreementTests|LiveReaderTests|testEncryptedScenariosCutAtEveryAndAtRandomCalls|EncryptionNonceTests|testAFullDiskFailsTheReservationAndLosesNothing|testContinuousRewritesStayBounded|testLogoutScenarioReclaimsTheSpace|testSecondCutWhileRecoveringAndWriting|testAReaderInAnotherProcessFollowsAWriterThatCompacts|testUnlockedListingsRacingSplitsAndMerges" 2>&1 | tee "$asan_log" || status=$?
phase_done "address sanitizer (with its build)"
unset SWIFT_BACKTRACE
echo "== fuzzing"
CASK_FUZZ_SCRATCH=.build/fuzz Tools/fuzz.sh --ci 2>&1 | tee "$fuzz_log" || status=$?
phase_done "fuzzing (with its build)"

# XCTest prints "Executed N tests, with F failures" per suite and for the whole run; the largest N
# (and F) of a run is its total, whatever order stdout and stderr interleave in.
totals() {
    awk '/Executed [0-9]+ tests?, with [0-9]+ failures?/ { if ($2 + 0 > n) n = $2 + 0; if ($5 + 0 > f) f = $5 + 0 }
         END { printf "%d %d", n, f }' "$1"
}
# A parallel run's xUnit report: its test count, and its failures and errors (a test process
# that crashed); "0 1" when there is no report (the run did not get as far as the tests).
xunit_totals() {
    local summary
    summary=$(grep -o '<testsuite name="TestResults"[^>]*>' "$1" 2>/dev/null) || { echo "0 1"; return; }
    field() { sed -n "s/.* $1=\"\([0-9]*\)\".*/\1/p" <<<"$summary"; }
    echo "$(field tests) $(( $(field failures) + $(field errors) ))"
}
# The tests that failed, named at the end so that the last lines of a long log say which: an xUnit
# report's test cases with a failure or an error, and XCTest's "Test Case '…' failed" lines.
failed_in_xunit() {
    awk '/<testcase / { name = $0; sub(/.*classname="/, "", name); sub(/" name="/, ".", name); sub(/".*/, "", name) }
         /<(failure|error)/ { print "  " name }' "$1" 2>/dev/null
}
failed_in_log() {
    sed -n "s/.*Test Case '\(.*\)' failed.*/  \1/p" "$1" | sort -u
}
read -r main_executed main_failed <<<"$(xunit_totals "$main_xml")"
read -r tsan_executed tsan_failed <<<"$(totals "$tsan_log")"
read -r asan_executed asan_failed <<<"$(xunit_totals "$asan_xml")"
fuzz_passed=$(grep -c "^FUZZ .* crashes=0" "$fuzz_log" || true)
fuzz_failed=$(grep -c "^FUZZ .* FAILED" "$fuzz_log" || true)
executed=$((main_executed + tsan_executed + asan_executed + fuzz_passed + fuzz_failed))
failed=$((main_failed + tsan_failed + asan_failed + fuzz_failed))
if grep -q "WARNING: ThreadSanitizer" "$tsan_log"; then
    echo "ThreadSanitizer reported a data race"
    failed=$((failed + 1))
    status=1
fi
if grep -q "ERROR: AddressSanitizer" "$asan_log"; then
    echo "AddressSanitizer reported a memory error"
    failed=$((failed + 1))
    status=1
fi
if [[ $((fuzz_passed + fuzz_failed)) -lt 3 ]]; then
    echo "the fuzz targets did not run"
    failed=$((failed + 1))
    status=1
fi
if [[ $failed -gt 0 ]]; then
    echo "failed:"
    { failed_in_xunit "$main_xml" | sed 's/$/ (debug)/'
      failed_in_log "$tsan_log" | sed 's/$/ (thread sanitizer)/'
      failed_in_xunit "$asan_xml" | sed 's/$/ (address sanitizer)/'
      grep "^FUZZ .* FAILED" "$fuzz_log" | sed 's/^/  /' || true; }
fi
echo "took:${timings%,}"
echo "$((executed - failed)) passed, $failed failed"
exit "$status"
