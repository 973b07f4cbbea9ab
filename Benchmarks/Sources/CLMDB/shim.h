// The system lmdb C API (Debian: liblmdb-dev), for the benchmark's peer engine.
#include <lmdb.h>
