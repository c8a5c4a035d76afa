// A store URL (--store, ONCE_STORE, the console's Open dialogs): StoreLocation::parse
// either refuses it in one line that never repeats the password, or accepts it so that
// the connection string Qt's PostgreSQL driver hands libpq, read back with libpq's own
// rules, holds exactly the URL's host, database, user, password and port and its query
// options, nothing more: no value can add a keyword. What is shown never holds the
// password and reads back as the same store.
#include "fuzzcheck.h"
#include "store/storelocation.h"

#include <QList>
#include <QUrl>

#include <utility>

using namespace once;

namespace {

using Pair = std::pair<QByteArray, QByteArray>;

// Qt's QPSQL driver (QPSQLDriver::open): each part single-quoted with '\' and '\''
// escaped, then the options with every ';' turned into a space.
QString qpsqlQuote(QString value)
{
    value.replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    value.replace(QLatin1Char('\''), QLatin1String("\\'"));
    return QLatin1Char('\'') + value + QLatin1Char('\'');
}

QByteArray connectString(const StoreLocation &location)
{
    QString text;
    if (!location.libpqHosts().isEmpty())
        text += QStringLiteral("host=") + qpsqlQuote(location.libpqHosts());
    if (!location.database.isEmpty())
        text += QStringLiteral(" dbname=") + qpsqlQuote(location.database);
    if (!location.user.isEmpty())
        text += QStringLiteral(" user=") + qpsqlQuote(location.user);
    if (!location.password.isEmpty())
        text += QStringLiteral(" password=") + qpsqlQuote(location.password);
    if (location.qpsqlPort() != -1)
        text += QStringLiteral(" port=") + qpsqlQuote(QString::number(location.qpsqlPort()));
    QString options = location.libpqOptions();
    options.replace(QLatin1Char(';'), QLatin1Char(' '));
    text += QLatin1Char(' ') + options;
    return text.toUtf8(); // what libpq reads: a C string
}

bool isSpace(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

// libpq's conninfo_parse (fe-connect.c): keyword = value, the value single-quoted or
// bare, backslash escaping the next character in both. Empty on a syntax error.
std::optional<QList<Pair>> libpqRead(const QByteArray &text)
{
    QList<Pair> read;
    const char *p = text.constData(); // NUL-terminated, as libpq sees it
    while (*p) {
        if (isSpace(*p)) {
            ++p;
            continue;
        }
        QByteArray name;
        while (*p && *p != '=' && !isSpace(*p))
            name += *p++;
        while (*p && isSpace(*p))
            ++p;
        if (*p != '=')
            return std::nullopt;
        ++p;
        while (*p && isSpace(*p))
            ++p;
        QByteArray value;
        if (*p != '\'') {
            while (*p && !isSpace(*p)) {
                if (*p == '\\' && p[1])
                    ++p;
                else if (*p == '\\')
                    break;
                value += *p++;
            }
        } else {
            ++p;
            for (;;) {
                if (!*p)
                    return std::nullopt; // unterminated
                if (*p == '\\') {
                    ++p;
                    if (*p)
                        value += *p++;
                    continue;
                }
                if (*p == '\'') {
                    ++p;
                    break;
                }
                value += *p++;
            }
        }
        read.append(Pair{name, value});
    }
    return read;
}

void checkConnectString(const StoreLocation &location)
{
    QList<Pair> expected;
    QStringList ports;
    for (const auto &server : location.servers)
        ports.append(QString::number(server.port));
    expected.append(Pair{"host", location.libpqHosts().toUtf8()});
    if (!location.database.isEmpty())
        expected.append(Pair{"dbname", location.database.toUtf8()});
    if (!location.user.isEmpty())
        expected.append(Pair{"user", location.user.toUtf8()});
    if (!location.password.isEmpty())
        expected.append(Pair{"password", location.password.toUtf8()});
    // One server's port as Qt's own keyword; several servers' as a list among the options.
    expected.append(Pair{"port", ports.join(QLatin1Char(',')).toUtf8()});
    QList<QByteArray> given;
    for (const QString &option : location.options) {
        const qsizetype equals = option.indexOf(QLatin1Char('='));
        FUZZ_CHECK(equals > 0, option);
        const QByteArray key = option.left(equals).toUtf8();
        given.append(key);
        expected.append(Pair{key, option.mid(equals + 1).toUtf8()});
    }
    const std::pair<QByteArray, QByteArray> defaults[] = {
        {"connect_timeout", "10"},
        {"application_name", "once"},
        {"keepalives", "1"},
        {"keepalives_idle", QByteArray::number(StoreLocation::KeepalivesIdleS)},
        {"keepalives_interval", QByteArray::number(StoreLocation::KeepalivesIntervalS)},
        {"keepalives_count", QByteArray::number(StoreLocation::KeepalivesCount)},
        {"tcp_user_timeout", QByteArray::number(StoreLocation::TcpUserTimeoutMs)},
    };
    for (const auto &[key, value] : defaults) {
        if (!given.contains(key))
            expected.append(Pair{key, value});
    }
    const QByteArray text = connectString(location);
    const auto read = libpqRead(text);
    FUZZ_CHECK(read, QStringLiteral("libpq cannot read the connection string"));
    FUZZ_CHECK(*read == expected, QStringLiteral("libpq reads other keywords than the URL gave"));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QString text = QString::fromUtf8(oncefuzz::bytes(data, size));
    // The same URL with a marker for a password: nothing once says may hold the marker.
    if (const QString marked = oncefuzz::withPasswordMarker(text, oncefuzz::PasswordMarker); !marked.isEmpty()) {
        QString error;
        const auto location = StoreLocation::parse(marked, &error);
        FUZZ_CHECK(!error.contains(oncefuzz::PasswordMarker), error);
        // (A SQLite path is shown whole: what QUrl reads as a password there is a folder.)
        FUZZ_CHECK(!location || location->kind == StoreLocation::Kind::Sqlite
                       || !location->displayName().contains(oncefuzz::PasswordMarker),
                   location->displayName());
    }
    QString error;
    const auto location = StoreLocation::parse(text, &error);
    if (!location) {
        FUZZ_CHECK(oncefuzz::isOneLine(error), error);
        return 0;
    }
    FUZZ_CHECK(error.isEmpty(), error);
    if (location->kind == StoreLocation::Kind::Sqlite) {
        FUZZ_CHECK(!location->path.isEmpty() && location->path.startsWith(QLatin1Char('/')), location->path);
        return 0;
    }
    FUZZ_CHECK(!location->servers.isEmpty() && !location->database.isEmpty(), text);
    for (const auto &server : location->servers)
        FUZZ_CHECK(!server.host.isEmpty() && !server.host.contains(QLatin1Char(',')), text);
    checkConnectString(*location);
    // What is shown does not depend on the password, and names the same store.
    StoreLocation other = *location;
    other.password = QStringLiteral("other");
    const QString shown = location->displayName();
    FUZZ_CHECK(shown == other.displayName(), shown);
    const auto again = StoreLocation::parse(shown, &error);
    FUZZ_CHECK(again, shown + QStringLiteral(": ") + error);
    FUZZ_CHECK(again->servers == location->servers && again->user == location->user
                   && again->database == location->database,
               shown);
    return 0;
}
