#ifndef CASK_CRC32C_H
#define CASK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/// 1 when this CPU has a CRC-32C instruction (x86-64: SSE4.2; AArch64: the CRC extension), else 0.
/// Thread-safe; the answer does not change while the process runs.
int cask_crc32c_hardware_available(void);

/// Folds `count` bytes at `bytes` into the CRC-32C register value `crc` with the CPU's
/// instruction: no inversion before or after (the caller does that). Call it only when
/// `cask_crc32c_hardware_available()` returned 1. Reads exactly `count` bytes; any alignment.
uint32_t cask_crc32c_hardware(uint32_t crc, const void *bytes, size_t count);

#endif
