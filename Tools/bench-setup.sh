#!/usr/bin/env bash
# Installs what the benchmark suite needs on Debian/Ubuntu, on top of Tools/setup.sh (liblz4-dev):
# the peers it compares Cask with, driven through their C APIs — SQLite (libsqlite3-dev),
# LMDB (liblmdb-dev), LevelDB (libleveldb-dev) and RocksDB (librocksdb-dev); and LMDB's command-line
# tools (lmdb-utils: mdb_load, mdb_dump, mdb_copy), the peers of the `cask` tool's import and export
# and of the `backup` workload.
# Idempotent: does nothing when everything is there. Usage: Tools/bench-setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
Tools/setup.sh

missing=()
[ -f /usr/include/sqlite3.h ] || missing+=(libsqlite3-dev)
[ -f /usr/include/lmdb.h ] || missing+=(liblmdb-dev)
[ -f /usr/include/leveldb/c.h ] || missing+=(libleveldb-dev)
[ -f /usr/include/rocksdb/c.h ] || missing+=(librocksdb-dev)
command -v mdb_load >/dev/null && command -v mdb_dump >/dev/null && command -v mdb_copy >/dev/null || missing+=(lmdb-utils)

if [ ${#missing[@]} -gt 0 ]; then
    echo "bench-setup: installing ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
