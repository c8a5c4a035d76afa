#include "queues/redis/redislocation.h"

#include <QUrl>
#include <QUrlQuery>

namespace once {

namespace {

constexpr int DefaultRedisPort = 6379;

bool parse(const QUrl &url, QueueLocation *location, QString *error)
{
    QString path = url.path(QUrl::FullyDecoded);
    if (path.startsWith(QLatin1Char('/')))
        path.remove(0, 1);
    RedisDetails details;
    location->port = url.port(DefaultRedisPort);
    bool ok = true;
    details.database = path.isEmpty() ? 0 : path.toInt(&ok);
    if (!ok || details.database < 0) {
        *error = QStringLiteral("the Redis URL's path must be a database number (redis://HOST:PORT/0?stream=NAME)");
        return false;
    }
    location->name = QUrlQuery(url).queryItemValue(QStringLiteral("stream"), QUrl::FullyDecoded);
    if (!isPlainQueueName(location->name)) {
        *error = QStringLiteral("the Redis URL needs ?stream=NAME (letters, digits, '-', '_', '.')");
        return false;
    }
    location->details = details;
    return true;
}

QString displayUrl(const QueueLocation &location)
{
    // Redis authenticates as the user when there is one (AUTH user password).
    const QString as = location.user.isEmpty()
                           ? QString()
                           : QString::fromLatin1(QUrl::toPercentEncoding(location.user)) + QLatin1Char('@');
    return QStringLiteral("redis://") + as + hostAndPort(location.host, location.port) + QLatin1Char('/') +
           QString::number(redisDetails(location).database) + QStringLiteral("?stream=") + location.name;
}

QString deadLetterName(const QueueLocation &location)
{
    return location.name + QStringLiteral(":dead");
}

} // namespace

const RedisDetails &redisDetails(const QueueLocation &location)
{
    return std::any_cast<const RedisDetails &>(location.details);
}

QueueBackend redisStreamsUrlSyntax()
{
    QueueBackend backend;
    backend.id = QLatin1StringView("redis");
    backend.scheme = QLatin1StringView("redis");
    backend.name = QStringLiteral("Redis Streams");
    backend.urlSyntax = QStringLiteral("redis://[[USER]:PASSWORD@]HOST[:PORT]/DB?stream=NAME");
    backend.exampleUrl = QStringLiteral("redis://HOST:6379/0?stream=NAME");
    backend.queueWord = QStringLiteral("stream");
    backend.nameParameter = QLatin1StringView("stream");
    backend.parse = &parse;
    backend.displayUrl = &displayUrl;
    backend.deadLetterName = &deadLetterName;
    return backend;
}

} // namespace once
