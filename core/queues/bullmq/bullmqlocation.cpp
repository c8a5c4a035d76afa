#include "queues/bullmq/bullmqlocation.h"

#include <QUrl>
#include <QUrlQuery>

#include <algorithm>

namespace once {

namespace {

constexpr int DefaultRedisPort = 6379;
const BullMqDetails Defaults;

// BullMQ refuses ':' in a queue name (it separates the parts of every key), and queues
// are found by their keys' first ':' (BullMqQueues), so a prefix holds none either. Both
// become parts of keys and of the worker's client name: no spaces or control characters.
bool isKeyPart(const QString &text)
{
    if (text.isEmpty() || text.size() > 200)
        return false;
    return std::none_of(text.cbegin(), text.cend(),
                        [](QChar c) { return c.unicode() <= u' ' || c.unicode() == 0x7f || c == u':'; });
}

bool positiveNumber(const QUrlQuery &query, const QString &name, qint64 least, qint64 *value, QString *error)
{
    if (!query.hasQueryItem(name))
        return true;
    bool ok = false;
    const qint64 read = query.queryItemValue(name).toLongLong(&ok);
    if (!ok || read < least) {
        *error =
            QStringLiteral("the BullMQ URL's %1 must be a whole number of at least %2").arg(name).arg(least);
        return false;
    }
    *value = read;
    return true;
}

bool parse(const QUrl &url, QueueLocation *location, QString *error)
{
    QString path = url.path(QUrl::FullyDecoded);
    if (path.startsWith(QLatin1Char('/')))
        path.remove(0, 1);
    BullMqDetails details;
    location->port = url.port(DefaultRedisPort);
    bool ok = true;
    details.database = path.isEmpty() ? 0 : path.toInt(&ok);
    if (!ok || details.database < 0) {
        *error = QStringLiteral(
            "the BullMQ URL's path must be a Redis database number (bullmq://HOST:PORT/0?queue=NAME)");
        return false;
    }
    const QUrlQuery query(url);
    location->name = query.queryItemValue(QStringLiteral("queue"), QUrl::FullyDecoded);
    if (!isKeyPart(location->name)) {
        *error = QStringLiteral("the BullMQ URL needs ?queue=NAME (no ':', spaces or control characters)");
        return false;
    }
    if (query.hasQueryItem(QStringLiteral("prefix"))) {
        details.prefix = query.queryItemValue(QStringLiteral("prefix"), QUrl::FullyDecoded);
        if (!isKeyPart(details.prefix)) {
            *error = QStringLiteral(
                "the BullMQ URL's prefix may not be empty or hold ':', spaces or control characters");
            return false;
        }
    }
    qint64 stalls = details.maxStalledCount;
    if (!positiveNumber(query, QStringLiteral("stalledInterval"), 1, &details.stalledIntervalMs, error) ||
        !positiveNumber(query, QStringLiteral("maxStalledCount"), 0, &stalls, error))
        return false;
    details.maxStalledCount = int(std::min<qint64>(stalls, 1000000));
    location->details = details;
    return true;
}

QString displayUrl(const QueueLocation &location)
{
    const BullMqDetails &details = bullMqDetails(location);
    const QString as = location.user.isEmpty()
                           ? QString()
                           : QString::fromLatin1(QUrl::toPercentEncoding(location.user)) + QLatin1Char('@');
    QString url = QStringLiteral("bullmq://") + as + hostAndPort(location.host, location.port) +
                  QLatin1Char('/') + QString::number(details.database) + QStringLiteral("?queue=") +
                  QString::fromLatin1(QUrl::toPercentEncoding(location.name));
    if (details.prefix != Defaults.prefix)
        url += QStringLiteral("&prefix=") + QString::fromLatin1(QUrl::toPercentEncoding(details.prefix));
    if (details.stalledIntervalMs != Defaults.stalledIntervalMs)
        url += QStringLiteral("&stalledInterval=") + QString::number(details.stalledIntervalMs);
    if (details.maxStalledCount != Defaults.maxStalledCount)
        url += QStringLiteral("&maxStalledCount=") + QString::number(details.maxStalledCount);
    return url;
}

// BullMQ keeps a job that failed for good in the queue's failed set.
QString deadLetterName(const QueueLocation &location)
{
    return bullMqDetails(location).prefix + QLatin1Char(':') + location.name + QStringLiteral(":failed");
}

} // namespace

const BullMqDetails &bullMqDetails(const QueueLocation &location)
{
    return std::any_cast<const BullMqDetails &>(location.details);
}

QueueBackend bullMqUrlSyntax()
{
    QueueBackend backend;
    backend.id = QLatin1StringView("bullmq");
    backend.scheme = QLatin1StringView("bullmq");
    backend.name = QStringLiteral("BullMQ");
    backend.urlSyntax = QStringLiteral("bullmq://[[USER]:PASSWORD@]HOST[:PORT]/DB?queue=NAME[&prefix=bull]");
    backend.exampleUrl = QStringLiteral("bullmq://HOST:6379/0?queue=NAME");
    backend.urlNotes =
        QStringLiteral("stalledInterval=MS and maxStalledCount=N are BullMQ's worker options of "
                       "those names; the scripts come from --bullmq-scripts DIR");
    backend.queueWord = QStringLiteral("queue");
    backend.nameParameter = QLatin1StringView("queue");
    backend.parse = &parse;
    backend.displayUrl = &displayUrl;
    backend.deadLetterName = &deadLetterName;
    return backend;
}

} // namespace once
