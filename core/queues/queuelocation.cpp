#include "queues/queuelocation.h"

#include "queues/queuebackend.h"

#include <QUrl>

namespace once {

bool isPlainQueueName(const QString &name)
{
    if (name.isEmpty() || name.size() > 200)
        return false;
    for (const QChar c : name) {
        if (!((c.unicode() < 128 && c.isLetterOrNumber()) || c == QLatin1Char('-') || c == QLatin1Char('_') ||
              c == QLatin1Char('.')))
            return false;
    }
    return true;
}

QString hostAndPort(const QString &host, int port)
{
    // Joined, not QString::arg'ed: a host is text from outside.
    return (host.contains(QLatin1Char(':')) ? QLatin1Char('[') + host + QLatin1Char(']') : host) + QLatin1Char(':') +
           QString::number(port);
}

bool QueueLocation::isBrokerUrl(const QString &url)
{
    return queueBackendOfUrl(url) != nullptr;
}

std::optional<QueueLocation> QueueLocation::parse(const QString &text, QString *error)
{
    const QUrl url(text, QUrl::StrictMode);
    QueueLocation location;
    location.backend = queueBackendForScheme(url.scheme());
    if (!location.backend) {
        QStringList schemes;
        for (const QueueBackend *backend : queueBackends()) {
            for (const QLatin1StringView scheme : backend->schemes())
                schemes.append(scheme + QLatin1String("://"));
        }
        *error = QStringLiteral("the queue URL must start with %1").arg(schemes.join(QLatin1String(" or ")));
        return std::nullopt;
    }
    if (!url.isValid() || url.host().isEmpty()) {
        *error = QStringLiteral("not a %1 URL (%2)").arg(location.backend->name, location.backend->urlSyntax);
        return std::nullopt;
    }
    location.host = url.host();
    location.user = url.userName(QUrl::FullyDecoded);
    location.password = url.password(QUrl::FullyDecoded);
    if (!location.backend->parse(url, &location, error))
        return std::nullopt;
    return location;
}

QString QueueLocation::displayName() const
{
    return backend ? backend->displayUrl(*this) : QString();
}

QString QueueLocation::brokerName() const
{
    return backend ? backend->name : QString();
}

QString QueueLocation::deadLetterName() const
{
    return backend ? backend->deadLetterName(*this) : QString();
}

} // namespace once
