#include "display/queueurl.h"

#include "display/storeurl.h"
#include "queues/queuebackend.h"
#include "queues/queuelocation.h"

#include <QCoreApplication>
#include <QUrl>

namespace once::ui {

namespace {

std::optional<QueueLocation> parsed(const QString &url)
{
    QString ignored;
    return QueueLocation::parse(url, &ignored);
}

// "RabbitMQ queue NAME", "Redis Streams stream NAME": each backend's word for a queue.
QString brokerPlace(const QueueLocation &location, const QString &name)
{
    return QCoreApplication::translate("once::ui", "%1 %2 %3")
        .arg(location.brokerName(), location.backend->queueWord, name);
}

} // namespace

bool isQueueUrl(const QString &url)
{
    return QueueLocation::isBrokerUrl(url);
}

QString queueDisplayName(const QString &url)
{
    if (const auto location = parsed(url))
        return location->displayName();
    return queueUrlWithoutPassword(url);
}

QString queueBrokerName(const QString &url)
{
    if (const auto location = parsed(url))
        return location->brokerName();
    // A URL with a mistake in it still names its broker: say which in the error.
    const QueueBackend *backend = queueBackendOfUrl(url);
    return backend ? backend->name : QString();
}

QString queueName(const QString &url)
{
    const auto location = parsed(url);
    return location ? location->name : QString();
}

QString queuePlace(const QString &url)
{
    const auto location = parsed(url);
    return location ? brokerPlace(*location, location->name) : queueDisplayName(url);
}

QString deadLetterPlace(const QString &url)
{
    const auto location = parsed(url);
    return location ? brokerPlace(*location, location->deadLetterName()) : queueDisplayName(url);
}

QString queueUrlWithoutPassword(const QString &url)
{
    QUrl parsedUrl(url, QUrl::StrictMode);
    if (!parsedUrl.isValid() || parsedUrl.password().isEmpty())
        return storeUrlWithoutPassword(url);
    parsedUrl.setPassword(QString());
    // A Redis URL has a password and no user: drop the "@" that would be left.
    if (parsedUrl.userName().isEmpty())
        parsedUrl.setUserInfo(QString());
    return parsedUrl.toString(QUrl::FullyEncoded);
}

QString queueUrlWithPassword(const QString &url, const QString &password)
{
    QUrl parsedUrl(url, QUrl::StrictMode);
    if (!parsedUrl.isValid() || password.isEmpty())
        return url;
    parsedUrl.setPassword(password, QUrl::DecodedMode);
    return parsedUrl.toString(QUrl::FullyEncoded);
}

QString queuePassword(const QString &url)
{
    const QUrl parsedUrl(url, QUrl::StrictMode);
    return parsedUrl.isValid() ? parsedUrl.password(QUrl::FullyDecoded) : QString();
}

QString queueUrlForReopening(const QString &savedUrl)
{
    const QString fromEnvironment = qEnvironmentVariable("ONCE_QUEUE");
    if (!fromEnvironment.isEmpty() &&
        queueUrlWithoutPassword(fromEnvironment) == queueUrlWithoutPassword(savedUrl))
        return fromEnvironment;
    return savedUrl;
}

} // namespace once::ui
