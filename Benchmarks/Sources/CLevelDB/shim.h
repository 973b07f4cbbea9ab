// The system leveldb C API (Debian: libleveldb-dev), for the benchmark's peer engine.
#include <leveldb/c.h>
