#include "queues/rabbitmq/rabbitmqlocation.h"

#include <QUrlQuery>

namespace once {

namespace {

constexpr int DefaultAmqpPort = 5672;
constexpr int DefaultManagementPort = 15672;

bool parse(const QUrl &url, QueueLocation *location, QString *error)
{
    const QUrlQuery query(url);
    QString path = url.path(QUrl::FullyDecoded);
    if (path.startsWith(QLatin1Char('/')))
        path.remove(0, 1);
    RabbitMqDetails details;
    location->port = url.port(DefaultAmqpPort);
    details.vhost = path.isEmpty() ? QStringLiteral("/") : path;
    location->name = query.queryItemValue(QStringLiteral("queue"), QUrl::FullyDecoded);
    if (location->user.isEmpty()) {
        *error = QStringLiteral("the RabbitMQ URL names no user (amqp://USER:PASSWORD@HOST/VHOST?queue=NAME)");
        return false;
    }
    const QString management = query.queryItemValue(QStringLiteral("management"), QUrl::FullyDecoded);
    if (management.isEmpty()) {
        // Built from parts, not text: an IPv6 host needs its brackets in a URL.
        details.managementUrl.setScheme(QStringLiteral("http"));
        details.managementUrl.setHost(location->host);
        details.managementUrl.setPort(DefaultManagementPort);
    } else {
        details.managementUrl = QUrl(management);
    }
    if (!details.managementUrl.isValid() ||
        (details.managementUrl.scheme() != QLatin1String("http") &&
         details.managementUrl.scheme() != QLatin1String("https")) ||
        !details.managementUrl.userInfo().isEmpty()) {
        *error = QStringLiteral("management= must be an http:// or https:// URL without credentials");
        return false;
    }
    if (!isPlainQueueName(location->name)) {
        *error = QStringLiteral("the RabbitMQ URL needs ?queue=NAME (letters, digits, '-', '_', '.')");
        return false;
    }
    location->details = std::move(details);
    return true;
}

QString displayUrl(const QueueLocation &location)
{
    // Joined, not QString::arg'ed: a user named "%1" would be read as a placeholder. The
    // user is percent-encoded and an IPv6 host bracketed, so that the text reads back as
    // this same queue.
    return QStringLiteral("amqp://") + QString::fromLatin1(QUrl::toPercentEncoding(location.user)) +
           QLatin1Char('@') + hostAndPort(location.host, location.port) + QLatin1Char('/') +
           QString::fromLatin1(QUrl::toPercentEncoding(rabbitMqDetails(location).vhost)) +
           QStringLiteral("?queue=") + location.name;
}

QString deadLetterName(const QueueLocation &location)
{
    return location.name + QStringLiteral(".dead");
}

} // namespace

const RabbitMqDetails &rabbitMqDetails(const QueueLocation &location)
{
    return std::any_cast<const RabbitMqDetails &>(location.details);
}

QueueBackend rabbitMqUrlSyntax()
{
    QueueBackend backend;
    backend.id = QLatin1StringView("rabbitmq");
    backend.scheme = QLatin1StringView("amqp");
    backend.name = QStringLiteral("RabbitMQ");
    backend.urlSyntax = QStringLiteral("amqp://USER:PASSWORD@HOST[:PORT]/VHOST?queue=NAME[&management=URL]");
    backend.exampleUrl = QStringLiteral("amqp://USER@HOST:5672/%2F?queue=NAME");
    backend.urlNotes = QStringLiteral("&management=http://HOST:15672 names its management API, for the messages in "
                                      "flight and the oldest one's age (default: port 15672 on the same host)");
    backend.queueWord = QStringLiteral("queue");
    backend.nameParameter = QLatin1StringView("queue");
    backend.parse = &parse;
    backend.displayUrl = &displayUrl;
    backend.deadLetterName = &deadLetterName;
    return backend;
}

} // namespace once
