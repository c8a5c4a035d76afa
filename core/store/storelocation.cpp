#include "store/storelocation.h"

#include "text/quotedtext.h"

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <QUrl>
#include <QUrlQuery>

#include <algorithm>

namespace once {

namespace {

// Query options the URL may not set, and why. libpq lets a later keyword win, and QPSQL
// puts the query options after host, port, dbname, user and password, so any of these
// would quietly replace what the URL (and so displayName()) says:
//   host, hostaddr, port, dbname, user: another server, database or role;
//   service: a pg_service.conf entry, which may name all of those;
//   options: server settings at connection start, such as search_path, which can point
//     the store's unqualified table names at other tables;
//   password, sslpassword: secrets, and a URL is shown, remembered and logged.
// Everything else (sslmode, sslrootcert, connect_timeout, application_name, keepalives,
// passfile, ...) only tunes how the one connection is made, and goes to libpq quoted.
QString refusal(const QString &name)
{
    if (name == QLatin1String("password"))
        return QStringLiteral("the PostgreSQL URL's query cannot hold a password: put it in the URL's user part, "
                              "PGPASSWORD or ~/.pgpass");
    if (name == QLatin1String("sslpassword"))
        return QStringLiteral("the PostgreSQL URL's query cannot hold \"sslpassword\": a URL is shown and remembered, "
                              "so it must hold no passphrase");
    for (const auto where : {"host", "hostaddr", "port", "dbname", "user", "service"}) {
        if (name == QLatin1String(where))
            return QStringLiteral("the PostgreSQL URL's query cannot set \"%1\": the server, port, database and user "
                                  "come from the URL itself (postgres://USER@HOST[:PORT]/DB), so that the store "
                                  "shown is the store used")
                .arg(name);
    }
    if (name == QLatin1String("options"))
        return QStringLiteral("the PostgreSQL URL's query cannot set \"options\": server settings such as search_path "
                              "could point the store at other tables");
    return {};
}

bool isOptionName(const QString &name)
{
    return !name.isEmpty() && std::all_of(name.cbegin(), name.cend(), [](QChar c) {
        return (c >= QLatin1Char('a') && c <= QLatin1Char('z')) || c == QLatin1Char('_');
    });
}

// A value for libpq's keyword=value syntax: in single quotes, with '\' and '\'' escaped.
QString quotedForLibpq(QString value)
{
    value.replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    value.replace(QLatin1Char('\''), QLatin1String("\\'"));
    return QLatin1Char('\'') + value + QLatin1Char('\'');
}

// QUrl takes one host: a URL with several (postgres://h1:5432,h2:5432/db) is read as one
// URL per host, each checked as a URL of one host is.
std::optional<StoreLocation> parsePostgres(const QString &text, QString *error)
{
    const UrlHostList hostList = urlHostList(text);
    const QStringList hosts = text.mid(hostList.start, hostList.size).split(QLatin1Char(','));
    // Errors quote the URL without its password: a typo must not put a secret in a log.
    QString first = text;
    const QUrl url(first.replace(hostList.start, hostList.size, hosts.constFirst()), QUrl::StrictMode);
    QUrl shown = url;
    shown.setPassword(QString());
    if (!url.isValid()) {
        *error = QStringLiteral("the PostgreSQL URL is not valid: %1").arg(shown.toDisplayString());
        return std::nullopt;
    }
    StoreLocation location;
    location.kind = StoreLocation::Kind::Postgres;
    location.user = url.userName();
    location.password = url.password();
    location.database = url.path().mid(1);
    for (const QString &host : hosts) {
        // Only the host part is shown: the rest of the URL may hold a password.
        const QUrl one(QStringLiteral("postgres://") + host, QUrl::StrictMode);
        // A host that decodes to a comma would be two hosts to libpq.
        if (host.isEmpty() || !one.isValid() || one.host().isEmpty() || one.host().contains(QLatin1Char(','))
            || !one.userInfo().isEmpty() || !one.path().isEmpty()) {
            *error = hosts.size() == 1 ? QStringLiteral("the PostgreSQL URL names no host (postgres://USER@HOST[:PORT]/DB)")
                                       : QStringLiteral("the PostgreSQL URL's host list has %1, which is not HOST[:PORT] "
                                                        "(postgres://USER@HOST1[:PORT1],HOST2[:PORT2]/DB)")
                                             .arg(host.isEmpty() ? QStringLiteral("an empty entry") : quotedForError(host));
            return std::nullopt;
        }
        location.servers.append({one.host(), one.port(5432)});
    }
    if (location.database.isEmpty() || location.database.contains(QLatin1Char('/'))) {
        *error = QStringLiteral("the PostgreSQL URL names no database (postgres://USER@HOST[:PORT]/DB)");
        return std::nullopt;
    }
    // libpq reads C strings: whatever follows a NUL would be cut off.
    for (const auto &[part, value] : {std::pair{"user", location.user},
                                      {"password", location.password},
                                      {"database", location.database}}) {
        if (value.contains(QChar(0))) {
            *error = QStringLiteral("the PostgreSQL URL's %1 contains U+0000").arg(QLatin1String(part));
            return std::nullopt;
        }
    }
    const auto items = QUrlQuery(url).queryItems(QUrl::FullyDecoded);
    QStringList names;
    for (const auto &[name, value] : items) {
        // The name is shown only once it is known to be a plain word: a pasted secret
        // without "=" would otherwise be repeated back. Values are never shown.
        if (!isOptionName(name)) {
            *error = QStringLiteral("the PostgreSQL URL's query options must be libpq's, named with lower-case "
                                    "letters and '_' (such as sslmode=verify-full)");
            return std::nullopt;
        }
        if (const QString why = refusal(name); !why.isEmpty()) {
            *error = why;
            return std::nullopt;
        }
        if (names.contains(name)) {
            *error = QStringLiteral("the PostgreSQL URL's query gives \"%1\" twice").arg(name);
            return std::nullopt;
        }
        names.append(name);
        // Qt's PostgreSQL driver turns every ';' of the options into a space, and libpq
        // reads C strings: neither can reach libpq as written.
        if (value.contains(QLatin1Char(';')) || value.contains(QChar(0))) {
            *error = QStringLiteral("the value of the PostgreSQL URL's query option \"%1\" contains %2, which "
                                    "cannot be passed to libpq")
                         .arg(name, value.contains(QChar(0)) ? QStringLiteral("U+0000") : QStringLiteral("';'"));
            return std::nullopt;
        }
        location.options.append(name + QLatin1Char('=') + value);
    }
    return location;
}

} // namespace

std::optional<StoreLocation> StoreLocation::parse(const QString &text, QString *error)
{
    if (text.startsWith(QLatin1String("postgres://")) || text.startsWith(QLatin1String("postgresql://")))
        return parsePostgres(text, error);
    StoreLocation location;
    QString path = text;
    if (path.startsWith(QLatin1String("sqlite:")))
        path = path.mid(int(qstrlen("sqlite:")));
    if (path.isEmpty()) {
        *error = QStringLiteral("the store path is empty");
        return std::nullopt;
    }
    // SQLite opens a C string: the file would be the path cut at the NUL.
    if (path.contains(QChar(0))) {
        *error = QStringLiteral("the store path contains U+0000");
        return std::nullopt;
    }
    if (path.contains(QLatin1String("://"))) {
        *error = QStringLiteral("unknown store URL scheme in %1 (use sqlite:PATH or postgres://USER@HOST/DB)")
                     .arg(quotedForError(text.section(QLatin1Char(':'), 0, 0)));
        return std::nullopt;
    }
    // Joined to the current folder by hand: QFileInfo takes ":name" for a Qt resource and
    // leaves it relative, and SQLite would open ":memory:" as a database in memory.
    if (!path.startsWith(QLatin1Char('/')))
        path = QDir::currentPath() + QLatin1Char('/') + path;
    location.path = QFileInfo(path).absoluteFilePath();
    return location;
}

QString StoreLocation::displayName() const
{
    if (kind == Kind::Postgres) {
        // Each host as QUrl shows one (an IPv6 address in brackets), then the hosts joined
        // as libpq's URLs take them.
        QStringList hosts;
        for (const Server &server : servers) {
            QUrl one;
            one.setScheme(QStringLiteral("postgres"));
            one.setHost(server.host);
            one.setPort(server.port);
            hosts.append(one.authority(QUrl::EncodeSpaces));
        }
        QUrl url;
        url.setScheme(QStringLiteral("postgres"));
        url.setUserName(user);
        url.setHost(QStringLiteral("host.invalid"));
        url.setPath(QLatin1Char('/') + database);
        // Spaces encoded: the text must read back as this same store.
        QString shown = url.toDisplayString(QUrl::EncodeSpaces);
        const UrlHostList hostList = urlHostList(shown);
        return shown.replace(hostList.start, hostList.size, hosts.join(QLatin1Char(',')));
    }
    return QStringLiteral("sqlite:") + path;
}

QString StoreLocation::libpqHosts() const
{
    QStringList hosts;
    for (const Server &server : servers)
        hosts.append(server.host);
    return hosts.join(QLatin1Char(','));
}

int StoreLocation::qpsqlPort() const
{
    return servers.size() == 1 ? servers.constFirst().port : -1;
}

QString StoreLocation::libpqOptions() const
{
    QStringList quoted;
    QStringList given;
    // After the host, where Qt's driver puts it; "port" is refused in the URL's query.
    if (servers.size() > 1) {
        QStringList ports;
        for (const Server &server : servers)
            ports.append(QString::number(server.port));
        quoted.append(QStringLiteral("port=") + quotedForLibpq(ports.join(QLatin1Char(','))));
    }
    for (const QString &option : options) {
        const qsizetype equals = option.indexOf(QLatin1Char('='));
        const QString name = option.left(equals);
        given.append(name);
        quoted.append(name + QLatin1Char('=') + quotedForLibpq(option.mid(equals + 1)));
    }
    const std::pair<const char *, QString> defaults[] = {
        {"connect_timeout", QStringLiteral("10")},
        // Names each connection in pg_stat_activity, so a DBA can tell once's from others.
        {"application_name", QStringLiteral("once")},
        {"keepalives", QStringLiteral("1")},
        {"keepalives_idle", QString::number(KeepalivesIdleS)},
        {"keepalives_interval", QString::number(KeepalivesIntervalS)},
        {"keepalives_count", QString::number(KeepalivesCount)},
        {"tcp_user_timeout", QString::number(TcpUserTimeoutMs)},
    };
    for (const auto &[name, value] : defaults) {
        if (!given.contains(QLatin1String(name)))
            quoted.append(QLatin1String(name) + QLatin1Char('=') + quotedForLibpq(value));
    }
    return quoted.join(QLatin1Char(';'));
}

UrlHostList urlHostList(const QString &url)
{
    const qsizetype scheme = url.indexOf(QLatin1String("://"));
    if (scheme < 0)
        return {};
    const qsizetype authority = scheme + 3;
    qsizetype end = authority;
    while (end < url.size() && url.at(end) != QLatin1Char('/') && url.at(end) != QLatin1Char('?')
           && url.at(end) != QLatin1Char('#'))
        ++end;
    const qsizetype at = end > authority ? url.lastIndexOf(QLatin1Char('@'), end - 1) : -1;
    const qsizetype start = at >= authority ? at + 1 : authority;
    return {start, end - start};
}

QString defaultStoreUrl()
{
    const QString fromEnvironment = qEnvironmentVariable("ONCE_STORE");
    if (!fromEnvironment.isEmpty())
        return fromEnvironment;
    return defaultStoreFile();
}

QString defaultStoreFile()
{
    // Not AppDataLocation: that differs between `once` and `once-console`, and both must
    // find the same store.
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + QStringLiteral("/once/once.sqlite");
}

} // namespace once
