#ifndef CASK_PREFETCH_H
#define CASK_PREFETCH_H

/// Asks the CPU to start loading the cache line at `address` for a write soon. Never faults, even
/// for an address that is not mapped.
static inline void cask_prefetch_for_write(const void *address) { __builtin_prefetch(address, 1, 3); }

/// Asks the CPU to start loading the cache line at `address` for a read soon. Never faults.
static inline void cask_prefetch_for_read(const void *address) { __builtin_prefetch(address, 0, 3); }

#endif
