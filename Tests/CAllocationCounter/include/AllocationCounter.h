#ifndef CASK_ALLOCATION_COUNTER_H
#define CASK_ALLOCATION_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

/// Whether this process counts its allocations (not under a sanitizer, which replaces the allocator).
bool cask_allocation_counting_available(void);

/// The number of heap allocations (malloc, calloc, realloc, posix_memalign, aligned_alloc,
/// memalign) made so far by the calling thread. Deterministic: it counts calls, not bytes or time.
uint64_t cask_thread_allocations(void);

/// Gives freed heap memory back to the kernel (malloc_trim), so RSS measures what is in use.
void cask_release_free_memory(void);

#endif
