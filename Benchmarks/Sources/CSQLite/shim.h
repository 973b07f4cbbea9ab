// The system sqlite3 C API (Debian: libsqlite3-dev), for the benchmark's peer engine.
#include <sqlite3.h>
