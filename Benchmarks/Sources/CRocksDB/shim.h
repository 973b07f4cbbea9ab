// The system rocksdb C API (Debian: librocksdb-dev), for the benchmark's peer engine.
#include <rocksdb/c.h>
