#!/usr/bin/env bash
# Sets up and runs the quick benchmark (100,000 entries, release build) in a temporary directory.
# Usage: Tools/demo.sh [cask-bench options, e.g. --num 1000000 --runs 5]
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/setup.sh
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--quick)
swift run -c release --package-path Benchmarks cask-bench "${args[@]}"
