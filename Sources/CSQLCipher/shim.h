#ifndef PROTECTEDSTORE_CSQLCIPHER_SHIM_H
#define PROTECTEDSTORE_CSQLCIPHER_SHIM_H

/// SQLCipher declares sqlite3_key/sqlite3_rekey only when SQLITE_HAS_CODEC is defined.
#ifndef SQLITE_HAS_CODEC
#define SQLITE_HAS_CODEC 1
#endif

/// Include SQLCipher's header by its full path: plain SQLite's <sqlite3.h> is also installed on these
/// machines and must never be picked up (it declares no codec API, and its library would store plaintext).
#include <sqlcipher/sqlite3.h>

/// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift cannot import.
static inline sqlite3_destructor_type _ps_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

#endif
