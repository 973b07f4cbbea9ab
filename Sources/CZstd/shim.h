#ifndef CASK_CZSTD_SHIM_H
#define CASK_CZSTD_SHIM_H
// The system zstd library (Debian: libzstd-dev): its dictionary trainer, for the LZ4 dictionaries
// records are compressed against, and its frames, for the blocks of hint files.
#include <zdict.h>
#include <zstd.h>
#endif
