#include "queues/queuebackend.h"

namespace once {

const QueueBackend *queueBackendForScheme(QAnyStringView scheme)
{
    for (const QueueBackend *backend : queueBackends()) {
        for (const QLatin1StringView known : backend->schemes()) {
            if (scheme == known)
                return backend;
        }
    }
    return nullptr;
}

const QueueBackend *queueBackendForId(QAnyStringView id)
{
    for (const QueueBackend *backend : queueBackends()) {
        if (id == backend->id)
            return backend;
    }
    return nullptr;
}

const QueueBackend *queueBackendOfUrl(QStringView url)
{
    const qsizetype end = url.indexOf(QLatin1String("://"));
    return end > 0 ? queueBackendForScheme(url.left(end)) : nullptr;
}

QString queueUrlSyntaxes(const QString &separator)
{
    QStringList syntaxes;
    for (const QueueBackend *backend : queueBackends())
        syntaxes.append(backend->urlSyntax);
    return syntaxes.join(separator);
}

} // namespace once
