#include "queues/kafka/kafkalocation.h"

#include "text/quantities.h"

#include <QRegularExpression>
#include <QUrl>
#include <QUrlQuery>

namespace once {

namespace {

constexpr int DefaultKafkaPort = 9092;
// Kafka's topic names are at most 249 characters; the retry topic adds "-retry".
constexpr int MaxTopicLength = 249 - 6;
// Kafka's own bounds for session.timeout.ms are the broker's settings (6 s to 30 min by
// default); below a second the heartbeats could not keep up.
constexpr qint64 MinSessionMs = 1000;
constexpr qint64 MaxSessionMs = 30 * 60 * 1000;

bool parse(const QUrl &url, QueueLocation *location, QString *error)
{
    static const QRegularExpression topicName(QStringLiteral("^[A-Za-z0-9._-]+$"));
    static const QRegularExpression hostPort(QStringLiteral("^([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\]):[0-9]{1,5}$"));
    QString path = url.path(QUrl::FullyDecoded);
    if (path.startsWith(QLatin1Char('/')))
        path.remove(0, 1);
    if (path.isEmpty() || path.contains(QLatin1Char('/'))) {
        *error = QStringLiteral("a Kafka URL is kafka://HOST:PORT/TOPIC?group=GROUP, such as "
                                "kafka://127.0.0.1:9092/reminders?group=once");
        return false;
    }
    if (!topicName.match(path).hasMatch() || path.size() > MaxTopicLength || path == QLatin1String(".")
        || path == QLatin1String("..")) {
        *error = QStringLiteral("a Kafka topic is letters, digits, '.', '_' and '-', at most %1 characters (its "
                                "retry topic adds -retry)")
                     .arg(MaxTopicLength);
        return false;
    }
    location->name = path;
    location->port = url.port(DefaultKafkaPort);
    const QUrlQuery query(url);
    const QStringList known{QStringLiteral("group"), QStringLiteral("brokers"), QStringLiteral("security"),
                            QStringLiteral("mechanism"), QStringLiteral("ca"), QStringLiteral("session")};
    for (const auto &item : query.queryItems()) {
        if (!known.contains(item.first)) {
            *error = QStringLiteral("the Kafka URL says \"%1\", which is none of %2").arg(item.first, known.join(u", "));
            return false;
        }
    }
    KafkaDetails details;
    details.group = query.queryItemValue(QStringLiteral("group"), QUrl::FullyDecoded);
    if (details.group.isEmpty())
        details.group = QStringLiteral("once");
    if (!topicName.match(details.group).hasMatch()) {
        *error = QStringLiteral("the Kafka URL's group is letters, digits, '.', '_' and '-'");
        return false;
    }
    details.bootstrap << hostAndPort(location->host, location->port);
    const QString brokers = query.queryItemValue(QStringLiteral("brokers"), QUrl::FullyDecoded);
    for (const QString &broker : brokers.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        if (!hostPort.match(broker.trimmed()).hasMatch()) {
            *error = QStringLiteral("the Kafka URL's brokers are HOST:PORT,HOST:PORT, not \"%1\"").arg(broker);
            return false;
        }
        if (!details.bootstrap.contains(broker.trimmed()))
            details.bootstrap << broker.trimmed();
    }
    details.security = query.queryItemValue(QStringLiteral("security"), QUrl::FullyDecoded).toLower();
    const QStringList securities{QStringLiteral("plaintext"), QStringLiteral("ssl"), QStringLiteral("sasl_plaintext"),
                                 QStringLiteral("sasl_ssl")};
    if (!details.security.isEmpty() && !securities.contains(details.security)) {
        *error = QStringLiteral("the Kafka URL's security is one of %1").arg(securities.join(u", "));
        return false;
    }
    details.mechanism = query.queryItemValue(QStringLiteral("mechanism"), QUrl::FullyDecoded).toUpper();
    const QStringList mechanisms{QStringLiteral("SCRAM-SHA-256"), QStringLiteral("SCRAM-SHA-512"),
                                 QStringLiteral("PLAIN")};
    if (!details.mechanism.isEmpty() && !mechanisms.contains(details.mechanism)) {
        *error = QStringLiteral("the Kafka URL's mechanism is one of %1").arg(mechanisms.join(u", "));
        return false;
    }
    const bool sasl = details.security.startsWith(QLatin1String("sasl"));
    if (sasl && location->user.isEmpty()) {
        *error = QStringLiteral("a Kafka URL with security=%1 names its user: kafka://USER@HOST:PORT/TOPIC (the "
                                "password from ONCE_KAFKA_PASSWORD)")
                     .arg(details.security);
        return false;
    }
    if (!sasl && (!location->user.isEmpty() || !details.mechanism.isEmpty())) {
        *error = QStringLiteral("a Kafka user or mechanism needs security=sasl_ssl (or sasl_plaintext)");
        return false;
    }
    if (sasl && details.mechanism.isEmpty())
        details.mechanism = QStringLiteral("SCRAM-SHA-512");
    details.caFile = query.queryItemValue(QStringLiteral("ca"), QUrl::FullyDecoded);
    if (!details.caFile.isEmpty() && !details.security.endsWith(QLatin1String("ssl"))) {
        *error = QStringLiteral("the Kafka URL's ca goes with security=ssl or sasl_ssl");
        return false;
    }
    const QString session = query.queryItemValue(QStringLiteral("session"), QUrl::FullyDecoded);
    if (!session.isEmpty()) {
        const std::optional<qint64> ms = parseDurationSetting(session);
        if (!ms || *ms < MinSessionMs || *ms > MaxSessionMs) {
            *error = QStringLiteral("the Kafka URL's session is a duration from 1s to 30m, such as session=10s");
            return false;
        }
        details.sessionTimeoutMs = int(*ms);
    }
    location->details = std::move(details);
    return true;
}

QString displayUrl(const QueueLocation &location)
{
    const KafkaDetails &details = kafkaDetails(location);
    const QString as = location.user.isEmpty()
                           ? QString()
                           : QString::fromLatin1(QUrl::toPercentEncoding(location.user)) + QLatin1Char('@');
    QString url = QStringLiteral("kafka://") + as + hostAndPort(location.host, location.port) + QLatin1Char('/')
                  + location.name + QStringLiteral("?group=") + details.group;
    if (details.bootstrap.size() > 1)
        url += QStringLiteral("&brokers=") + details.bootstrap.mid(1).join(QLatin1Char(','));
    if (!details.security.isEmpty())
        url += QStringLiteral("&security=") + details.security;
    if (!details.mechanism.isEmpty())
        url += QStringLiteral("&mechanism=") + details.mechanism;
    if (!details.caFile.isEmpty())
        url += QStringLiteral("&ca=") + QString::fromLatin1(QUrl::toPercentEncoding(details.caFile, "/"));
    if (details.sessionTimeoutMs != DefaultKafkaSessionMs)
        url += QStringLiteral("&session=%1s").arg(details.sessionTimeoutMs / 1000);
    return url;
}

QString deadLetterName(const QueueLocation &location)
{
    return kafkaDeadTopic(location.name);
}

} // namespace

const KafkaDetails &kafkaDetails(const QueueLocation &location)
{
    return std::any_cast<const KafkaDetails &>(location.details);
}

QString kafkaRetryTopic(const QString &topic)
{
    return topic + QStringLiteral("-retry");
}

QString kafkaDeadTopic(const QString &topic)
{
    return topic + QStringLiteral("-dead");
}

QueueBackend kafkaUrlSyntax()
{
    QueueBackend backend;
    backend.id = QLatin1StringView("kafka");
    backend.scheme = QLatin1StringView("kafka");
    backend.name = QStringLiteral("Apache Kafka");
    backend.urlSyntax = QStringLiteral("kafka://[USER@]HOST:PORT/TOPIC?group=GROUP[&brokers=HOST:PORT,...]");
    backend.exampleUrl = QStringLiteral("kafka://HOST:9092/reminders?group=once");
    backend.urlNotes = QStringLiteral("retries wait in TOPIC-retry and dead letters in TOPIC-dead; security=sasl_ssl "
                                      "with mechanism=SCRAM-SHA-512 and the password in ONCE_KAFKA_PASSWORD");
    backend.queueWord = QStringLiteral("topic");
    backend.parse = &parse;
    backend.displayUrl = &displayUrl;
    backend.deadLetterName = &deadLetterName;
    return backend;
}

} // namespace once
