#!/usr/bin/env bash
# Installs what Cask needs to build on Debian/Ubuntu: the system LZ4 library (liblz4-dev), zstd
# (libzstd-dev: its dictionary trainer, and hint blocks), and libsodium (libsodium-dev) for encryption at rest; for the
# tests' second reader, Python's `cryptography` package.
# Idempotent: does nothing when it is already there. Usage: Tools/setup.sh
set -euo pipefail

missing=()
[ -f /usr/include/lz4.h ] || missing+=(liblz4-dev)
[ -f /usr/include/zdict.h ] || missing+=(libzstd-dev)
[ -f /usr/include/sodium.h ] || missing+=(libsodium-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)

if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null 2>&1 || { echo "setup: the Swift 6 toolchain (swift) is not on PATH" >&2; exit 1; }
# The second reader (Tests/FormatReader) decrypts encrypted stores with Python's `cryptography`.
if command -v python3 >/dev/null 2>&1 && ! python3 -c "import cryptography" >/dev/null 2>&1; then
    echo "setup: installing the Python package cryptography" >&2
    python3 -m pip install -q cryptography >/dev/null
fi
