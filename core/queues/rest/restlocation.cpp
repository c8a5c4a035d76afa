#include "queues/rest/restlocation.h"

#include <QUrlQuery>

namespace once {

namespace {

const QLatin1StringView PlainScheme("rest+http");
const QLatin1StringView TlsScheme("rest+https");

bool isTls(const QueueLocation &location)
{
    return restDetails(location).apiUrl.scheme() == QLatin1String("https");
}

bool parse(const QUrl &url, QueueLocation *location, QString *error)
{
    const bool tls = url.scheme() == TlsScheme;
    location->port = url.port(tls ? 443 : 80);
    QString path = url.path(QUrl::FullyDecoded);
    while (path.endsWith(QLatin1Char('/')))
        path.chop(1);
    if (path.isEmpty())
        path = QStringLiteral("/v1");
    location->name = QUrlQuery(url).queryItemValue(QStringLiteral("queue"), QUrl::FullyDecoded);
    if (!isPlainQueueName(location->name)) {
        *error = QStringLiteral("the REST queue URL needs ?queue=NAME (letters, digits, '-', '_', '.')");
        return false;
    }
    if (!location->user.isEmpty()) {
        *error = QStringLiteral("the REST queue URL names no user: its token comes from ONCE_QUEUE_TOKEN");
        return false;
    }
    RestDetails details;
    details.caFile = QUrlQuery(url).queryItemValue(QStringLiteral("ca"), QUrl::FullyDecoded);
    if (!details.caFile.isEmpty() && !tls) {
        *error = QStringLiteral("ca= names the CAs to trust for TLS: it goes with rest+https://, not rest+http://");
        return false;
    }
    details.apiUrl.setScheme(tls ? QStringLiteral("https") : QStringLiteral("http"));
    details.apiUrl.setHost(location->host);
    details.apiUrl.setPort(location->port);
    details.apiUrl.setPath(path);
    location->details = std::move(details);
    return true;
}

QString displayUrl(const QueueLocation &location)
{
    // Never the token (a password typed into the console travels as the URL's password).
    const RestDetails &details = restDetails(location);
    QString url = QString(isTls(location) ? TlsScheme : PlainScheme) + QStringLiteral("://")
                  + hostAndPort(location.host, location.port) + details.apiUrl.path(QUrl::FullyEncoded)
                  + QStringLiteral("?queue=") + location.name;
    if (!details.caFile.isEmpty())
        url += QStringLiteral("&ca=") + QString::fromLatin1(QUrl::toPercentEncoding(details.caFile, "/"));
    return url;
}

QString deadLetterName(const QueueLocation &location)
{
    // Where the API lists them: GET .../queue/dead_letters?queue=NAME.
    return location.name + QStringLiteral("/dead_letters");
}

} // namespace

const RestDetails &restDetails(const QueueLocation &location)
{
    return std::any_cast<const RestDetails &>(location.details);
}

QueueBackend restQueueUrlSyntax()
{
    QueueBackend backend;
    backend.id = QLatin1StringView("rest");
    backend.scheme = PlainScheme;
    backend.moreSchemes = {TlsScheme};
    backend.name = QStringLiteral("REST API");
    backend.urlSyntax = QStringLiteral("rest+http://HOST[:PORT]/v1?queue=NAME[&ca=FILE]");
    backend.exampleUrl = QStringLiteral("rest+https://HOST/v1?queue=NAME");
    backend.urlNotes = QStringLiteral("rest+https:// over TLS (ca=FILE: trust the CAs in that PEM file instead of the "
                                      "system's); a queue served over HTTP/JSON, such as once serve's; "
                                      "its bearer token comes from ONCE_QUEUE_TOKEN (or the password field)");
    backend.queueWord = QStringLiteral("queue");
    backend.nameParameter = QLatin1StringView("queue");
    backend.parse = &parse;
    backend.displayUrl = &displayUrl;
    backend.deadLetterName = &deadLetterName;
    return backend;
}

} // namespace once
