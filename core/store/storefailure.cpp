#include "store/storefailure.h"

#include <sqlite3.h>

namespace once {

StoreFailure classifyStoreFailure(bool postgres, const QString &nativeCode)
{
    if (postgres) {
        // SQLSTATE classes: https://www.postgresql.org/docs/current/errcodes-appendix.html
        if (nativeCode.isEmpty() || nativeCode.startsWith(QLatin1String("08")))
            return StoreFailure::ConnectionLost; // connection exception, or libpq lost it
        if (nativeCode == QLatin1String("57P01") || nativeCode == QLatin1String("57P02")
            || nativeCode == QLatin1String("57P03") || nativeCode == QLatin1String("53300"))
            return StoreFailure::ConnectionLost; // shutdown, crash, starting up, too many connections
        if (nativeCode.startsWith(QLatin1String("40")) || nativeCode == QLatin1String("55P03")
            || nativeCode == QLatin1String("57014"))
            return StoreFailure::Contention; // serialization failure, deadlock, lock or statement timeout
        // Disk full (53100), read-only transaction (25006), corruption (XX001, XX002),
        // I/O error (58030), a table or column that is gone (42P01, 42703), no privilege.
        return StoreFailure::Permanent;
    }
    bool ok = false;
    const int code = nativeCode.toInt(&ok) & 0xff; // the primary code of an extended one
    if (!ok)
        return StoreFailure::Permanent;
    switch (code) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_SCHEMA: // another connection changed the schema: prepare again
        return StoreFailure::Contention;
    default:
        // SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_CANTOPEN,
        // SQLITE_NOTADB, SQLITE_PERM, and SQLITE_ERROR (a table that is not there: the
        // file at the path is no longer this store) do not pass by themselves.
        return StoreFailure::Permanent;
    }
}

const char *storeFailureName(StoreFailure failure)
{
    switch (failure) {
    case StoreFailure::None:
        return "none";
    case StoreFailure::Contention:
        return "contention";
    case StoreFailure::ConnectionLost:
        return "connection lost";
    case StoreFailure::Permanent:
        return "permanent";
    }
    return "unknown";
}

} // namespace once
