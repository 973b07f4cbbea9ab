#!/usr/bin/env bash
# Sets up and runs Cask's test suite: every test in a debug build, then the concurrency tests
# again under the thread sanitizer. Usage: Tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/setup.sh
swift build --build-tests
swift test --skip-build
echo "== concurrency tests under the thread sanitizer"
swift test --sanitize=thread --scratch-path .build/tsan --filter ConcurrencyTests
