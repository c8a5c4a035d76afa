#pragma once

#include <QString>

namespace once::ui {

// A store URL may carry a PostgreSQL password (postgres://USER:PASSWORD@HOST/DB). The
// console keeps that URL in memory to open connections, and passes every other use
// through these: nothing it shows, logs or saves holds the password.

// What a person may see: StoreLocation::displayName() ("postgres://once@db:5432/once",
// "sqlite:/path/once.sqlite"); text that does not parse loses any password it has.
QString storeDisplayName(const QString &url);
// What may be saved (the recent stores): the same URL, options and all, without its
// password. Reopening it lets libpq find the password in PGPASSWORD or ~/.pgpass, as
// psql does.
QString storeUrlWithoutPassword(const QString &url);
// The password a PostgreSQL URL carries, if any.
QString storePassword(const QString &url);
// A saved URL (without password) with this one, to open it: a remembered password.
QString storeUrlWithPassword(const QString &url, const QString &password);
// A short name for a window title: the file name, or "DB on HOST".
QString storeShortName(const QString &url);
// Whether the URL names a PostgreSQL store.
bool isPostgresUrl(const QString &url);

} // namespace once::ui
