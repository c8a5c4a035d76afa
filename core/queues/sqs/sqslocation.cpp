#include "queues/sqs/sqslocation.h"

#include <QRegularExpression>
#include <QUrlQuery>

namespace once {

namespace {

// A queue name at SQS: letters, digits, '-' and '_', at most 80 characters; the dead
// letters' queue adds "-dead" to it.
constexpr int MaxQueueNameLength = 80 - 5;

bool parse(const QUrl &url, QueueLocation *location, QString *error)
{
    static const QRegularExpression region(QStringLiteral("^[a-z]{2}(-[a-z]+)+-\\d+$"));
    static const QRegularExpression account(QStringLiteral("^[0-9]{12}$"));
    static const QRegularExpression name(QStringLiteral("^[A-Za-z0-9_-]+$"));
    SqsDetails details;
    details.region = url.host(QUrl::FullyDecoded);
    const QStringList path = url.path(QUrl::FullyDecoded).split(QLatin1Char('/'), Qt::SkipEmptyParts);
    if (!region.match(details.region).hasMatch() || path.size() != 2 || url.port() != -1) {
        *error = QStringLiteral("an SQS URL is sqs://REGION/ACCOUNT/QUEUE, such as sqs://eu-west-1/123456789012/reminders");
        return false;
    }
    details.account = path.at(0);
    location->name = path.at(1);
    if (!account.match(details.account).hasMatch()) {
        *error = QStringLiteral("the SQS URL's account must be the 12-digit AWS account id, not \"%1\"").arg(details.account);
        return false;
    }
    if (!name.match(location->name).hasMatch() || location->name.size() > MaxQueueNameLength) {
        *error = QStringLiteral("an SQS queue name is letters, digits, '-' and '_', at most %1 characters (its dead "
                                "letters' queue adds -dead)")
                     .arg(MaxQueueNameLength);
        return false;
    }
    if (!location->user.isEmpty() || !location->password.isEmpty()) {
        *error = QStringLiteral("the SQS URL holds no credentials: they come from AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY, or the AWS_PROFILE of ~/.aws/credentials");
        return false;
    }
    const QString endpoint = QUrlQuery(url).queryItemValue(QStringLiteral("endpoint"), QUrl::FullyDecoded);
    details.endpoint = endpoint.isEmpty() ? QUrl(QStringLiteral("https://sqs.%1.amazonaws.com").arg(details.region))
                                          : QUrl(endpoint, QUrl::StrictMode);
    if (!details.endpoint.isValid() || details.endpoint.host().isEmpty()
        || (details.endpoint.scheme() != QLatin1String("http") && details.endpoint.scheme() != QLatin1String("https"))
        || !details.endpoint.userInfo().isEmpty() || details.endpoint.hasQuery()) {
        *error = QStringLiteral("the SQS URL's endpoint must be an http:// or https:// URL without credentials, such as "
                                "endpoint=http://127.0.0.1:4566");
        return false;
    }
    location->details = std::move(details);
    return true;
}

QString displayUrl(const QueueLocation &location)
{
    const SqsDetails &details = sqsDetails(location);
    QString url = QStringLiteral("sqs://%1/%2/%3").arg(details.region, details.account, location.name);
    if (details.endpoint != QUrl(QStringLiteral("https://sqs.%1.amazonaws.com").arg(details.region)))
        url += QStringLiteral("?endpoint=") + details.endpoint.toString();
    return url;
}

QString deadLetterName(const QueueLocation &location)
{
    return sqsDeadLetterQueueName(location.name);
}

} // namespace

const SqsDetails &sqsDetails(const QueueLocation &location)
{
    return std::any_cast<const SqsDetails &>(location.details);
}

QString sqsDeadLetterQueueName(const QString &queueName)
{
    return queueName + QStringLiteral("-dead");
}

QueueBackend sqsUrlSyntax()
{
    QueueBackend backend;
    backend.id = QLatin1StringView("sqs");
    backend.scheme = QLatin1StringView("sqs");
    backend.name = QStringLiteral("Amazon SQS");
    backend.urlSyntax = QStringLiteral("sqs://REGION/ACCOUNT/QUEUE[?endpoint=URL]");
    backend.exampleUrl = QStringLiteral("sqs://eu-west-1/123456789012/reminders");
    backend.urlNotes = QStringLiteral("a Standard queue; credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or "
                                      "the AWS_PROFILE of ~/.aws/credentials; endpoint= for an emulator or a VPC endpoint");
    backend.queueWord = QStringLiteral("queue");
    backend.parse = &parse;
    backend.displayUrl = &displayUrl;
    backend.deadLetterName = &deadLetterName;
    return backend;
}

} // namespace once
