#ifndef CASK_ATOMIC_H
#define CASK_ATOMIC_H

#include <stdint.h>

// Atomic loads and stores of words in memory that Swift holds through raw pointers (the index's
// tables, the segment table's extents), for the data that readers without a lock load while the
// writer stores to it. Each is one plain instruction on x86-64 (the sequentially consistent store
// an `xchg`, the read-modify-writes a `lock` prefix); they exist so that the compiler neither tears
// nor reorders the accesses and the thread sanitizer sees them for what they are.

/// Loads the 8-byte word at `address` (8-byte aligned) in one piece, with no ordering: a word that
/// another thread may store to at the same time (`cask_store_word_relaxed`) is seen whole, old or
/// new. One plain load on x86-64 and AArch64.
static inline uint64_t cask_load_word_relaxed(const void *address) {
    return __atomic_load_n((const uint64_t *)address, __ATOMIC_RELAXED);
}

/// Loads the 8-byte word at `address` (8-byte aligned): what the thread that stored it with
/// `cask_store_word_release` wrote before that store is visible after this load.
static inline uint64_t cask_load_word_acquire(const void *address) {
    return __atomic_load_n((const uint64_t *)address, __ATOMIC_ACQUIRE);
}

/// Stores `value` to the 8-byte word at `address` (8-byte aligned) in one piece, with no ordering.
static inline void cask_store_word_relaxed(void *address, uint64_t value) {
    __atomic_store_n((uint64_t *)address, value, __ATOMIC_RELAXED);
}

/// Stores `value` to the 8-byte word at `address` after every store the thread made before.
static inline void cask_store_word_release(void *address, uint64_t value) {
    __atomic_store_n((uint64_t *)address, value, __ATOMIC_RELEASE);
}

static inline uint32_t cask_load_u32_relaxed(const void *address) {
    return __atomic_load_n((const uint32_t *)address, __ATOMIC_RELAXED);
}

static inline void cask_store_u32_relaxed(void *address, uint32_t value) {
    __atomic_store_n((uint32_t *)address, value, __ATOMIC_RELAXED);
}

/// Loads the 4-byte word at `address` (4-byte aligned): what the thread that stored it with
/// `cask_store_u32_release` wrote before that store is visible after this load.
static inline uint32_t cask_load_u32_acquire(const void *address) {
    return __atomic_load_n((const uint32_t *)address, __ATOMIC_ACQUIRE);
}

static inline void cask_store_u32_release(void *address, uint32_t value) {
    __atomic_store_n((uint32_t *)address, value, __ATOMIC_RELEASE);
}

static inline uint16_t cask_load_u16_relaxed(const void *address) {
    return __atomic_load_n((const uint16_t *)address, __ATOMIC_RELAXED);
}

static inline void cask_store_u16_relaxed(void *address, uint16_t value) {
    __atomic_store_n((uint16_t *)address, value, __ATOMIC_RELAXED);
}

/// Loads a pointer that `cask_store_pointer_release` stored, with what was written before it.
static inline void *cask_load_pointer_acquire(void *const *address) {
    return __atomic_load_n(address, __ATOMIC_ACQUIRE);
}

static inline void cask_store_pointer_release(void **address, void *value) {
    __atomic_store_n(address, value, __ATOMIC_RELEASE);
}

/// A fence: the thread's later stores are not seen before its earlier loads and stores (the
/// writer's side of a version word, after making it odd).
static inline void cask_fence_release(void) { __atomic_thread_fence(__ATOMIC_RELEASE); }

/// A fence: the thread's earlier loads are done before its later loads (a reader's side of a
/// version word, before loading it again to validate what it read).
static inline void cask_fence_acquire(void) { __atomic_thread_fence(__ATOMIC_ACQUIRE); }

/// Stores one byte after every store the thread made before (a control byte after its entry).
static inline void cask_store_byte_release(void *address, uint8_t value) {
    __atomic_store_n((uint8_t *)address, value, __ATOMIC_RELEASE);
}

/// Loads a pointer that `cask_store_pointer_seq_cst` publishes, in the single total order of
/// sequentially consistent operations (see `ReaderRegistry`).
static inline void *cask_load_pointer_seq_cst(void *const *address) {
    return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}

static inline void cask_store_pointer_seq_cst(void **address, void *value) {
    __atomic_store_n(address, value, __ATOMIC_SEQ_CST);
}

/// Adds `delta` to the word at `address`, in the single total order of sequentially consistent
/// operations.
static inline void cask_add_word_seq_cst(int64_t *address, int64_t delta) {
    __atomic_fetch_add(address, delta, __ATOMIC_SEQ_CST);
}

/// Adds `delta` to the word at `address` after every access the thread made before.
static inline void cask_add_word_release(int64_t *address, int64_t delta) {
    __atomic_fetch_add(address, delta, __ATOMIC_RELEASE);
}

static inline int64_t cask_load_int_seq_cst(const int64_t *address) {
    return __atomic_load_n(address, __ATOMIC_SEQ_CST);
}

/// Tells the CPU that the thread is spinning on a lock word (x86 `pause`, AArch64 `yield`): the
/// loop runs slower and leaves the core's resources to its sibling.
static inline void cask_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/// A small number for the calling thread, the same on every call from it and different for
/// threads that asked one after another (handed out in turn, modulo 2^32): the stripe of
/// `ReaderRegistry` it counts itself in.
uint32_t cask_thread_number(void);

/// Names the calling thread as `top -H`, `ps -L` and /proc show it (`pthread_setname_np`: at most
/// 15 bytes); 0 on success, else an errno value.
int cask_name_this_thread(const char *name);

#endif
