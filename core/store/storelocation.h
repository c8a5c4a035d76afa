#pragma once

#include <QString>
#include <QStringList>

#include <optional>

namespace once {

// Where a store lives: "sqlite:PATH", a plain PATH, or
// "postgres://USER[:PASSWORD]@HOST[:PORT][,HOST[:PORT]...]/DB[?OPTION=VALUE&...]". Without
// a password in the URL, libpq looks in PGPASSWORD and ~/.pgpass, as psql does. Several
// hosts are libpq's own high availability (Patroni and the like): it tries them in turn
// and keeps the first that suits target_session_attrs (read-write: the primary). Query options
// (sslmode, connect_timeout, ...) go to libpq quoted, so a value is only ever that
// option's value; options that would connect elsewhere than the store shown, or carry a
// secret, are refused (see storelocation.cpp).
struct StoreLocation
{
    enum class Kind { Sqlite, Postgres };
    Kind kind = Kind::Sqlite;
    QString path; // Sqlite
    // Postgres
    struct Server
    {
        QString host;
        int port = 5432;
        bool operator==(const Server &) const = default;
    };
    QList<Server> servers; // at least one, in the URL's order
    QString user;
    QString password; // in memory only: never shown, logged or stored
    QString database;
    QStringList options; // libpq connection options as given, "key=value", checked by parse()

    static std::optional<StoreLocation> parse(const QString &text, QString *error);
    // What may be shown to a person: never a password.
    QString displayName() const;
    // libpq's host keyword: the servers' hosts, separated by commas.
    QString libpqHosts() const;
    // The port for Qt's QPSQL setPort(): the one server's, or -1 with several servers,
    // whose ports libpqOptions() gives.
    int qpsqlPort() const;
    // The options for libpq's connection string (Qt's QPSQL setConnectOptions): every
    // value in single quotes with '\' and '\'' escaped; then, with several servers, their
    // ports; then connect_timeout=10, application_name=once and the dead-connection
    // settings below, each unless the URL gave its own.
    QString libpqOptions() const;

    // A connection whose packets are silently dropped (a cut cable, a firewall, a failed
    // host that sends no reset) would otherwise wait for TCP to give up: about 15 minutes
    // with data unacknowledged, two hours idle. With these, libpq's socket fails within
    // TcpUserTimeoutMs of a request going unanswered (and an idle one within the
    // keepalives' 5 + 3 x 1 s), so the worker reconnects (and says so) within seconds, and
    // its reconnect attempts stop waiting on SYNs sent before the network came back.
    // A server slow to answer is not dead: TCP acknowledges the request at once, and the
    // keepalives' probes while a long query runs.
    static constexpr int KeepalivesIdleS = 5;
    static constexpr int KeepalivesIntervalS = 1;
    static constexpr int KeepalivesCount = 3;
    static constexpr int TcpUserTimeoutMs = 5000;
};

// Where a URL's authority holds its hosts: after "scheme://" and any "USER[:PASSWORD]@",
// up to the path, query or fragment ("h1:5432,h2:5432" in postgres://u@h1:5432,h2:5432/db).
// QUrl reads one host only: with several, callers put one in their place for QUrl.
struct UrlHostList
{
    qsizetype start = 0;
    qsizetype size = 0;
};
UrlHostList urlHostList(const QString &url);

// The default store: ONCE_STORE if set, else the default file.
QString defaultStoreUrl();
// once/once.sqlite in the user's data folder.
QString defaultStoreFile();

} // namespace once
