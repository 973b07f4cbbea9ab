#ifndef CASK_BENCH_ALLOCATION_COUNTER_H
#define CASK_BENCH_ALLOCATION_COUNTER_H

#include <stdint.h>

/// The number of heap allocations (malloc, calloc, realloc, posix_memalign, aligned_alloc,
/// memalign) made so far by the calling thread. Deterministic: it counts calls, not bytes or time.
uint64_t cask_bench_thread_allocations(void);

/// Gives freed heap memory back to the kernel (malloc_trim), so RSS measures what is in use.
void cask_bench_release_free_memory(void);

#endif
