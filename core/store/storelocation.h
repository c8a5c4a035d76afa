#pragma once

#include <QString>
#include <QStringList>

#include <optional>

namespace once {

// Where a store lives: "sqlite:PATH", a plain PATH, or
// "postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?OPTION=VALUE&...]". Without a password in
// the URL, libpq looks in PGPASSWORD and ~/.pgpass, as psql does. Query options
// (sslmode, connect_timeout, ...) go to libpq quoted, so a value is only ever that
// option's value; options that would connect elsewhere than the store shown, or carry a
// secret, are refused (see storelocation.cpp).
struct StoreLocation
{
    enum class Kind { Sqlite, Postgres };
    Kind kind = Kind::Sqlite;
    QString path; // Sqlite
    // Postgres
    QString host;
    int port = 5432;
    QString user;
    QString password; // in memory only: never shown, logged or stored
    QString database;
    QStringList options; // libpq connection options as given, "key=value", checked by parse()

    static std::optional<StoreLocation> parse(const QString &text, QString *error);
    // What may be shown to a person: never a password.
    QString displayName() const;
    // The options for libpq's connection string (Qt's QPSQL setConnectOptions): every
    // value in single quotes with '\' and '\'' escaped, then connect_timeout=10 and
    // application_name=once unless the URL gave its own.
    QString libpqOptions() const;
};

// The default store: ONCE_STORE if set, else the default file.
QString defaultStoreUrl();
// once/once.sqlite in the user's data folder.
QString defaultStoreFile();

} // namespace once
