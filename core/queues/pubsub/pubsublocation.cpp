#include "queues/pubsub/pubsublocation.h"

#include <QRegularExpression>
#include <QUrlQuery>

namespace once {

namespace {

// Google's rules for a project id, and for topic and subscription names (3 to 255
// characters, a letter first; '%' and '+' are left out, '.' and '~' too, so that the
// name reads the same in a URL and in once's own names); "-dead" is added to both.
const QRegularExpression &projectPattern()
{
    static const QRegularExpression pattern(QStringLiteral("^[a-z][a-z0-9-]{4,28}[a-z0-9]$"));
    return pattern;
}

bool isResourceName(const QString &name)
{
    static const QRegularExpression pattern(QStringLiteral("^[A-Za-z][A-Za-z0-9_-]{2,249}$"));
    return pattern.match(name).hasMatch() && !name.startsWith(QLatin1String("goog"), Qt::CaseInsensitive);
}

bool parse(const QUrl &url, QueueLocation *location, QString *error)
{
    PubSubDetails details;
    details.project = url.host(QUrl::FullyDecoded);
    const QStringList path = url.path(QUrl::FullyDecoded).split(QLatin1Char('/'), Qt::SkipEmptyParts);
    if (path.size() != 1 || url.port() != -1) {
        *error = QStringLiteral("a Pub/Sub URL is pubsub://PROJECT/SUBSCRIPTION?topic=TOPIC");
        return false;
    }
    if (!projectPattern().match(details.project).hasMatch()) {
        *error = QStringLiteral("\"%1\" is not a Google Cloud project id (6 to 30 lower-case letters, digits and '-', a "
                                "letter first)")
                     .arg(details.project);
        return false;
    }
    location->name = path.constFirst();
    const QUrlQuery query(url);
    details.topic = query.queryItemValue(QStringLiteral("topic"), QUrl::FullyDecoded);
    for (const QString &name : {location->name, details.topic}) {
        if (!name.isEmpty() && !isResourceName(name)) {
            *error = QStringLiteral("a Pub/Sub topic or subscription name is 3 to 250 letters, digits, '-' and '_', a "
                                    "letter first and not goog...: \"%1\"")
                         .arg(name);
            return false;
        }
    }
    if (!location->user.isEmpty() || !location->password.isEmpty()) {
        *error = QStringLiteral("the Pub/Sub URL holds no credentials: they come from GOOGLE_APPLICATION_CREDENTIALS, "
                                "GOOGLE_OAUTH_ACCESS_TOKEN or the metadata server");
        return false;
    }
    // An emulator: the URL's endpoint=, else PUBSUB_EMULATOR_HOST, as Google's clients do.
    QString emulator = query.queryItemValue(QStringLiteral("endpoint"), QUrl::FullyDecoded);
    if (emulator.isEmpty())
        emulator = qEnvironmentVariable("PUBSUB_EMULATOR_HOST");
    if (emulator.isEmpty()) {
        details.apiUrl = QUrl(QStringLiteral("https://pubsub.googleapis.com"));
    } else {
        details.emulator = true;
        details.apiUrl = QUrl(QStringLiteral("http://") + emulator);
        if (!details.apiUrl.isValid() || details.apiUrl.host().isEmpty() || details.apiUrl.port() <= 0
            || details.apiUrl.path().size() > 0) {
            *error = QStringLiteral("the Pub/Sub emulator's address must be HOST:PORT, not \"%1\"").arg(emulator);
            return false;
        }
    }
    location->details = std::move(details);
    return true;
}

QString displayUrl(const QueueLocation &location)
{
    const PubSubDetails &details = pubSubDetails(location);
    QString url = QStringLiteral("pubsub://%1/%2").arg(details.project, location.name);
    QStringList query;
    if (!details.topic.isEmpty())
        query << QStringLiteral("topic=") + details.topic;
    if (details.emulator)
        query << QStringLiteral("endpoint=") + details.apiUrl.authority();
    return query.isEmpty() ? url : url + QLatin1Char('?') + query.join(QLatin1Char('&'));
}

QString deadLetterName(const QueueLocation &location)
{
    return pubSubDeadLetterName(location.name);
}

} // namespace

const PubSubDetails &pubSubDetails(const QueueLocation &location)
{
    return std::any_cast<const PubSubDetails &>(location.details);
}

QString pubSubDeadLetterName(const QString &name)
{
    return name + QStringLiteral("-dead");
}

QueueBackend pubSubUrlSyntax()
{
    QueueBackend backend;
    backend.id = QLatin1StringView("pubsub");
    backend.scheme = QLatin1StringView("pubsub");
    backend.name = QStringLiteral("Google Cloud Pub/Sub");
    backend.urlSyntax = QStringLiteral("pubsub://PROJECT/SUBSCRIPTION?topic=TOPIC[&endpoint=HOST:PORT]");
    backend.exampleUrl = QStringLiteral("pubsub://my-project/reminders-sub?topic=reminders");
    backend.urlNotes = QStringLiteral("topic= for enqueue, init and redrive; endpoint= or PUBSUB_EMULATOR_HOST for an "
                                      "emulator; credentials from GOOGLE_APPLICATION_CREDENTIALS (a service-account key "
                                      "file), GOOGLE_OAUTH_ACCESS_TOKEN or the metadata server on Google Cloud");
    backend.queueWord = QStringLiteral("subscription");
    backend.parse = &parse;
    backend.displayUrl = &displayUrl;
    backend.deadLetterName = &deadLetterName;
    return backend;
}

} // namespace once
