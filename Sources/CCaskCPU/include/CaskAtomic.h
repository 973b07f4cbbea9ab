#ifndef CASK_ATOMIC_H
#define CASK_ATOMIC_H

#include <stdint.h>

/// Loads the 8-byte word at `address` (8-byte aligned) in one piece, with no ordering: a word that
/// another thread may store to at the same time (`cask_store_word_relaxed`) is seen whole, old or
/// new. One plain load on x86-64 and AArch64.
static inline uint64_t cask_load_word_relaxed(const void *address) {
    return __atomic_load_n((const uint64_t *)address, __ATOMIC_RELAXED);
}

/// Stores `value` to the 8-byte word at `address` (8-byte aligned) in one piece, with no ordering.
static inline void cask_store_word_relaxed(void *address, uint64_t value) {
    __atomic_store_n((uint64_t *)address, value, __ATOMIC_RELAXED);
}

#endif
