#ifndef CASK_CLZ4_SHIM_H
#define CASK_CLZ4_SHIM_H
#include <lz4.h>
#endif
