#ifndef CASK_CSODIUM_SHIM_H
#define CASK_CSODIUM_SHIM_H
// The system libsodium (Debian: libsodium-dev), for encryption at rest only: the AEADs
// (AES-256-GCM, ChaCha20-Poly1305), HChaCha20 to derive a key per file, and random bytes.
#include <sodium.h>
#endif
