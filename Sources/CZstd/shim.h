#ifndef CASK_CZSTD_SHIM_H
#define CASK_CZSTD_SHIM_H
// Only the dictionary trainer of the system zstd library (Debian: libzstd-dev): Cask compresses
// with LZ4, and trains the dictionaries its LZ4 blocks use with zstd's trainer.
#include <zdict.h>
#endif
