#pragma once

#include <QString>

namespace once {

// How a failed store call should be met. Contention and a lost connection pass (another
// writer commits, the server comes back, a failover ends): try again. A permanent failure
// stays until somebody acts (a corrupt or foreign file, a read-only or full disk, a
// persistent I/O error, a store replaced or deleted under a running worker, tables that
// are gone): a worker stops with one clear line instead of retrying for ever.
enum class StoreFailure { None, Contention, ConnectionLost, Permanent };

// nativeCode as QSqlError::nativeErrorCode() gives it: SQLite's result code (a number),
// PostgreSQL's SQLSTATE (five characters; empty when the connection broke before the
// server could answer).
StoreFailure classifyStoreFailure(bool postgres, const QString &nativeCode);

const char *storeFailureName(StoreFailure failure);

} // namespace once
