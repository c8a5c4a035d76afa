#include "queuelocation.h"

#include <QUrlQuery>

namespace once {

namespace {

constexpr int DefaultAmqpPort = 5672;
constexpr int DefaultManagementPort = 15672;
constexpr int DefaultRedisPort = 6379;

// Queue and stream names become parts of other names (NAME.dead, NAME:delayed), so they
// are kept to what every broker accepts without quoting.
bool isPlainName(const QString &name)
{
    if (name.isEmpty() || name.size() > 200)
        return false;
    for (const QChar c : name) {
        if (!((c.unicode() < 128 && c.isLetterOrNumber()) || c == QLatin1Char('-') || c == QLatin1Char('_') || c == QLatin1Char('.')))
            return false;
    }
    return true;
}

} // namespace

bool QueueLocation::isBrokerUrl(const QString &url)
{
    return url.startsWith(QLatin1String("amqp://")) || url.startsWith(QLatin1String("redis://"));
}

std::optional<QueueLocation> QueueLocation::parse(const QString &text, QString *error)
{
    const QUrl url(text, QUrl::StrictMode);
    QueueLocation location;
    if (url.scheme() == QLatin1String("amqp")) {
        location.kind = Kind::RabbitMq;
    } else if (url.scheme() == QLatin1String("redis")) {
        location.kind = Kind::Redis;
    } else {
        *error = QStringLiteral("the queue URL must start with amqp:// or redis://");
        return std::nullopt;
    }
    if (!url.isValid() || url.host().isEmpty()) {
        *error = location.kind == Kind::RabbitMq
                     ? QStringLiteral("not a RabbitMQ URL (amqp://USER:PASSWORD@HOST[:PORT]/VHOST?queue=NAME)")
                     : QStringLiteral("not a Redis URL (redis://[:PASSWORD@]HOST[:PORT]/DB?stream=NAME)");
        return std::nullopt;
    }
    location.host = url.host();
    location.user = url.userName(QUrl::FullyDecoded);
    location.password = url.password(QUrl::FullyDecoded);
    const QUrlQuery query(url);
    QString path = url.path(QUrl::FullyDecoded);
    if (path.startsWith(QLatin1Char('/')))
        path.remove(0, 1);
    if (location.kind == Kind::RabbitMq) {
        location.port = url.port(DefaultAmqpPort);
        location.vhost = path.isEmpty() ? QStringLiteral("/") : path;
        location.name = query.queryItemValue(QStringLiteral("queue"), QUrl::FullyDecoded);
        if (location.user.isEmpty()) {
            *error = QStringLiteral("the RabbitMQ URL names no user (amqp://USER:PASSWORD@HOST/VHOST?queue=NAME)");
            return std::nullopt;
        }
        const QString management = query.queryItemValue(QStringLiteral("management"), QUrl::FullyDecoded);
        if (management.isEmpty()) {
            // Built from parts, not text: an IPv6 host needs its brackets in a URL.
            location.managementUrl.setScheme(QStringLiteral("http"));
            location.managementUrl.setHost(location.host);
            location.managementUrl.setPort(DefaultManagementPort);
        } else {
            location.managementUrl = QUrl(management);
        }
        if (!location.managementUrl.isValid()
            || (location.managementUrl.scheme() != QLatin1String("http")
                && location.managementUrl.scheme() != QLatin1String("https"))
            || !location.managementUrl.userInfo().isEmpty()) {
            *error = QStringLiteral("management= must be an http:// or https:// URL without credentials");
            return std::nullopt;
        }
    } else {
        location.port = url.port(DefaultRedisPort);
        bool ok = true;
        location.database = path.isEmpty() ? 0 : path.toInt(&ok);
        if (!ok || location.database < 0) {
            *error = QStringLiteral("the Redis URL's path must be a database number (redis://HOST:PORT/0?stream=NAME)");
            return std::nullopt;
        }
        location.name = query.queryItemValue(QStringLiteral("stream"), QUrl::FullyDecoded);
    }
    if (!isPlainName(location.name)) {
        *error = location.kind == Kind::RabbitMq
                     ? QStringLiteral("the RabbitMQ URL needs ?queue=NAME (letters, digits, '-', '_', '.')")
                     : QStringLiteral("the Redis URL needs ?stream=NAME (letters, digits, '-', '_', '.')");
        return std::nullopt;
    }
    return location;
}

QString QueueLocation::displayName() const
{
    // Joined, not QString::arg'ed: a user named "%1" would be read as a placeholder. The
    // user is percent-encoded and an IPv6 host bracketed, so that the text reads back as
    // this same queue.
    const QString where = (host.contains(QLatin1Char(':')) ? QLatin1Char('[') + host + QLatin1Char(']') : host)
                          + QLatin1Char(':') + QString::number(port);
    if (kind == Kind::RabbitMq)
        return QStringLiteral("amqp://") + QString::fromLatin1(QUrl::toPercentEncoding(user)) + QLatin1Char('@') + where
               + QLatin1Char('/') + QString::fromLatin1(QUrl::toPercentEncoding(vhost)) + QStringLiteral("?queue=") + name;
    // Redis authenticates as the user when there is one (AUTH user password).
    const QString as = user.isEmpty() ? QString() : QString::fromLatin1(QUrl::toPercentEncoding(user)) + QLatin1Char('@');
    return QStringLiteral("redis://") + as + where + QLatin1Char('/') + QString::number(database)
           + QStringLiteral("?stream=") + name;
}

QString QueueLocation::brokerName() const
{
    return kind == Kind::RabbitMq ? QStringLiteral("RabbitMQ") : QStringLiteral("Redis Streams");
}

QString QueueLocation::deadLetterName() const
{
    return name + (kind == Kind::RabbitMq ? QStringLiteral(".dead") : QStringLiteral(":dead"));
}

} // namespace once
