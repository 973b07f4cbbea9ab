#include <stdint.h>
#include "CaskAtomic.h"

static uint32_t cask_next_thread_number = 0;
static _Thread_local uint32_t cask_this_thread_number = 0;
static _Thread_local int cask_this_thread_numbered = 0;

uint32_t cask_thread_number(void) {
    if (!cask_this_thread_numbered) {
        cask_this_thread_number = __atomic_fetch_add(&cask_next_thread_number, 1, __ATOMIC_RELAXED);
        cask_this_thread_numbered = 1;
    }
    return cask_this_thread_number;
}
