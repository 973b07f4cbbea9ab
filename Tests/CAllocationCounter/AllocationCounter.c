// Counts heap allocations per thread by defining the allocator's entry points in the executable
// that links this (the benchmark, the test runner): the dynamic linker binds every malloc call in
// the process (the Swift runtime, Cask, Foundation, the benchmark's peers) to these, and each
// forwards to glibc's own allocator (__libc_*), so memory from either side can be freed by the
// other. glibc documents this kind of replacement. The cost is one thread-local increment per
// allocation. Under a sanitizer, which replaces the allocator itself, nothing is defined and the
// count stays unavailable.
#include "AllocationCounter.h"

#include <malloc.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CASK_SANITIZER_ALLOCATOR 1
#endif
#endif

#ifdef CASK_SANITIZER_ALLOCATOR

bool cask_allocation_counting_available(void) { return false; }
uint64_t cask_thread_allocations(void) { return 0; }
void cask_release_free_memory(void) {}

#else

#include <errno.h>
#include <malloc.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static __thread uint64_t allocations;

bool cask_allocation_counting_available(void) { return true; }

uint64_t cask_thread_allocations(void) { return allocations; }

void cask_release_free_memory(void) { malloc_trim(0); }

void *malloc(size_t size) {
    allocations++;
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    allocations++;
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    allocations++;
    return __libc_realloc(pointer, size);
}

void free(void *pointer) { __libc_free(pointer); }

void *memalign(size_t alignment, size_t size) {
    allocations++;
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    allocations++;
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size) {
    // The checks glibc's posix_memalign makes before allocating.
    if (alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0 || alignment == 0) return EINVAL;
    allocations++;
    void *memory = __libc_memalign(alignment, size);
    if (memory == NULL) return ENOMEM;
    *result = memory;
    return 0;
}

#endif
