#!/usr/bin/env bash
# Sets up (liblz4-dev and the peers' -dev packages, when missing) and runs the quick benchmark:
# Cask against SQLite, LMDB, LevelDB and RocksDB, 100,000 entries, release build, stores in a
# temporary directory, report in Benchmarks/results/<date>-quick/, one row per measured target
# appended to Benchmarks/results/headlines.csv. Builds the release `cask` binary first: the tool_*
# workloads time it.
# Usage: Tools/demo.sh [cask-bench options, e.g. --num 1000000 --runs 3 for the full suite]
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/bench-setup.sh
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--quick)
swift build -c release --product cask
swift run -c release --package-path Benchmarks cask-bench "${args[@]}"
