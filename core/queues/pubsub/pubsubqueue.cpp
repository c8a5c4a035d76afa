#include "queues/pubsub/pubsubqueue.h"

#include "http/blockinghttpclient.h"
#include "model/clock.h"
#include "model/reminder.h"
#include "queues/deadletteraccount.h"
#include "queues/messageattributes.h"
#include "queues/pubsub/googlecredentials.h"
#include "queues/pubsub/pubsublocation.h"
#include "text/quotedtext.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QSet>
#include <QUuid>

#include <algorithm>

namespace once {

Q_LOGGING_CATEGORY(lcPubSubQueue, "once.queues.pubsub")

namespace {

// Pub/Sub's limits: an ack deadline of 10 to 600 s (the emulator takes 1 s and up, which
// keeps the crash tests short); 5 to 100 delivery attempts before a dead-letter policy
// takes a message; this many messages a publish and a pull here (the API allows 1,000 a
// publish).
constexpr int MinAckDeadlineSeconds = 10;
constexpr int MinEmulatorAckDeadlineSeconds = 1;
constexpr int MaxAckDeadlineSeconds = 600;
constexpr int MinDeliveryAttempts = 5;
constexpr int MaxDeliveryAttempts = 100;
constexpr int MaxPublish = 100;
constexpr int MaxPull = 100;
constexpr int MaxListedDeadLetters = 10000;
constexpr int CallTimeoutMs = 20000;
// A pull answers with at most about 10 MB of messages, in base64.
constexpr qint64 MaxResponseBodyBytes = 32 * 1024 * 1024;

QJsonObject pubSubMessage(const QByteArray &payload, const QJsonObject &attributes)
{
    return {{QStringLiteral("data"), QString::fromLatin1(payload.toBase64())}, {QStringLiteral("attributes"), attributes}};
}

} // namespace

PubSubQueue::PubSubQueue(QueueLocation location, std::unique_ptr<GoogleCredentials> credentials)
    : BrokerQueue(std::move(location)), m_credentials(std::move(credentials)), m_http(std::make_unique<BlockingHttpClient>())
{
}

PubSubQueue::~PubSubQueue() = default;

std::unique_ptr<PubSubQueue> PubSubQueue::connect(const QueueLocation &location, QString *error)
{
    // An emulator takes no credentials, as with Google's own clients.
    std::unique_ptr<GoogleCredentials> credentials;
    if (!pubSubDetails(location).emulator) {
        credentials = GoogleCredentials::fromEnvironment(error);
        if (!credentials) {
            *error = QStringLiteral("%1: %2").arg(location.displayName(), *error);
            return nullptr;
        }
    }
    return std::unique_ptr<PubSubQueue>(new PubSubQueue(location, std::move(credentials)));
}

QString PubSubQueue::topicPath(const QString &topic) const
{
    return QStringLiteral("projects/%1/topics/%2").arg(pubSubDetails(location()).project, topic);
}

QString PubSubQueue::subscriptionPath(const QString &subscription) const
{
    return QStringLiteral("projects/%1/subscriptions/%2").arg(pubSubDetails(location()).project, subscription);
}

bool PubSubQueue::needTopic(QString *error) const
{
    if (!pubSubDetails(location()).topic.isEmpty())
        return true;
    *error = QStringLiteral("%1 names no topic: add ?topic=TOPIC to publish, create or redrive").arg(location().displayName());
    return false;
}

PubSubQueue::Reply PubSubQueue::call(const QByteArray &method, const QString &path, const QJsonObject &body)
{
    HttpRequest request;
    request.url = pubSubDetails(location()).apiUrl;
    request.url.setPath(QStringLiteral("/v1/") + path);
    request.method = method;
    request.timeoutMs = CallTimeoutMs;
    request.maxResponseBodyBytes = MaxResponseBodyBytes;
    if (method != "GET" && method != "DELETE") {
        request.body = QJsonDocument(body).toJson(QJsonDocument::Compact);
        request.headers.append({QByteArrayLiteral("Content-Type"), QByteArrayLiteral("application/json")});
    }
    Reply reply;
    if (m_credentials) {
        QString why;
        const QByteArray token = m_credentials->accessToken(&why);
        if (token.isEmpty()) {
            reply.message = why;
            return reply;
        }
        request.headers.append({QByteArrayLiteral("Authorization"), "Bearer " + token});
    }
    const HttpResult result = m_http->send(request);
    if (result.status != HttpResult::Status::Response) {
        reply.message = (result.status == HttpResult::Status::InDoubt ? QStringLiteral("no answer: ")
                                                                      : QStringLiteral("not reachable: "))
                        + result.error;
        return reply;
    }
    reply.httpStatus = result.httpStatus;
    const QJsonDocument document = QJsonDocument::fromJson(result.body);
    reply.body = document.object();
    if (result.httpStatus >= 200 && result.httpStatus < 300) {
        // Every answer of the API is a JSON object: anything else (a proxy's page, a
        // server that is not Pub/Sub) is not taken for an empty one.
        reply.ok = document.isObject() || result.body.trimmed().isEmpty(); // no answer is an empty one
        if (!reply.ok)
            reply.message = QStringLiteral("the answer is not a JSON object: ") + QString::fromUtf8(result.body.left(200));
        return reply;
    }
    // {"error": {"code": 404, "message": "...", "status": "NOT_FOUND"}}
    const QJsonObject error = reply.body.value(QLatin1String("error")).toObject();
    reply.status = error.value(QLatin1String("status")).toString();
    reply.message = error.value(QLatin1String("message")).toString();
    if (reply.message.isEmpty())
        reply.message = QString::fromUtf8(result.body.left(200));
    return reply;
}

QString PubSubQueue::describe(const Reply &reply, const QString &what) const
{
    QString why = reply.httpStatus == 0 ? reply.message
                                         : QStringLiteral("HTTP %1: %2")
                                               .arg(QString(QString::number(reply.httpStatus) + QLatin1Char(' ') + reply.status).trimmed(),
                                                    reply.message);
    if ((reply.httpStatus == 401 || reply.httpStatus == 403) && m_credentials)
        why += QStringLiteral(" (the credentials are %1: check its Pub/Sub roles)").arg(m_credentials->source());
    // The API never echoes the token; the server's words are still not trusted with it.
    return asOneLine(QStringLiteral("%1 at the Pub/Sub subscription %2: %3").arg(what, location().displayName(), why));
}

int PubSubQueue::ackDeadlineSeconds(qint64 ms) const
{
    const int least = pubSubDetails(location()).emulator ? MinEmulatorAckDeadlineSeconds : MinAckDeadlineSeconds;
    return std::clamp(wholeSecondsUp(ms), least, MaxAckDeadlineSeconds);
}

int PubSubQueue::deliveryAttempts(const QueueTopology &topology)
{
    return std::clamp(topology.deliveryLimit(), MinDeliveryAttempts, MaxDeliveryAttempts);
}

QString PubSubQueue::describeTopology(const QueueTopology &topology) const
{
    const int attempts = deliveryAttempts(topology);
    QString line = QStringLiteral("Pub/Sub moves a message delivered %1 times without being settled to %2; the ack "
                                  "deadline is %3 s")
                       .arg(attempts)
                       .arg(pubSubDeadLetterName(pubSubDetails(location()).topic))
                       .arg(ackDeadlineSeconds(topology.leaseMs));
    if (attempts > topology.deliveryLimit())
        line += QStringLiteral(" (Pub/Sub's least is %1 deliveries: the workers still dead-letter after %2 sends)")
                    .arg(MinDeliveryAttempts)
                    .arg(topology.maxAttempts);
    else
        line += QStringLiteral(" (the workers' --max-attempts %1, and two deliveries for crashes)").arg(topology.maxAttempts);
    return line;
}

bool PubSubQueue::declareTopology(const QueueTopology &topology, QString *error)
{
    if (!needTopic(error))
        return false;
    const PubSubDetails &details = pubSubDetails(location());
    const QString deadTopic = pubSubDeadLetterName(details.topic);
    const QString deadSubscription = pubSubDeadLetterName(location().name);
    const QJsonObject deadLetterPolicy{{QStringLiteral("deadLetterTopic"), topicPath(deadTopic)},
                                       {QStringLiteral("maxDeliveryAttempts"), deliveryAttempts(topology)}};
    const auto create = [this, error](const QString &path, const QJsonObject &body, const QString &what) {
        const Reply reply = call("PUT", path, body);
        if (reply.ok || reply.status == QLatin1String("ALREADY_EXISTS"))
            return true;
        *error = describe(reply, QStringLiteral("creating ") + what);
        return false;
    };
    if (!(create(topicPath(details.topic), {}, QStringLiteral("the topic ") + details.topic)
          && create(topicPath(deadTopic), {}, QStringLiteral("the dead-letter topic ") + deadTopic)
          && create(subscriptionPath(deadSubscription),
                    {{QStringLiteral("topic"), topicPath(deadTopic)},
                     {QStringLiteral("ackDeadlineSeconds"), 60},
                     // Seven days, Pub/Sub's longest: dead letters wait for an operator.
                     {QStringLiteral("messageRetentionDuration"), QStringLiteral("604800s")}},
                    QStringLiteral("the dead-letter subscription ") + deadSubscription)))
        return false;
    // The ack deadline holds a delivery between the pull and the worker's own deadline
    // for it (its --lease), should the worker die in between.
    QJsonObject subscription{{QStringLiteral("topic"), topicPath(details.topic)},
                             {QStringLiteral("ackDeadlineSeconds"), ackDeadlineSeconds(topology.leaseMs)},
                             {QStringLiteral("deadLetterPolicy"), deadLetterPolicy}};
    const Reply created = call("PUT", subscriptionPath(location().name), subscription);
    if (created.ok)
        return true;
    if (created.status != QLatin1String("ALREADY_EXISTS")) {
        *error = describe(created, QStringLiteral("creating the subscription ") + location().name);
        return false;
    }
    // Run again, perhaps with another --lease or --max-attempts: the subscription takes them.
    subscription.remove(QStringLiteral("topic"));
    const Reply updated = call("PATCH", subscriptionPath(location().name),
                               {{QStringLiteral("subscription"), subscription},
                                {QStringLiteral("updateMask"), QStringLiteral("ackDeadlineSeconds,deadLetterPolicy")}});
    if (!updated.ok) {
        *error = describe(updated, QStringLiteral("updating the subscription ") + location().name);
        return false;
    }
    return true;
}

bool PubSubQueue::publish(const QString &topic, const QList<QJsonObject> &messages, QString *error)
{
    for (qsizetype start = 0; start < messages.size(); start += MaxPublish) {
        QJsonArray batch;
        for (qsizetype i = start; i < std::min(messages.size(), start + MaxPublish); ++i)
            batch.append(messages.at(i));
        // Never sent twice on its own: a publish whose answer was lost may have been taken.
        const Reply reply = call("POST", topicPath(topic) + QStringLiteral(":publish"), {{QStringLiteral("messages"), batch}});
        if (!reply.ok) {
            *error = describe(reply, QStringLiteral("publishing %1 messages to %2").arg(batch.size()).arg(topic));
            return false;
        }
    }
    return true;
}

bool PubSubQueue::enqueue(const QList<OutgoingMessage> &messages, QString *error)
{
    if (!needTopic(error))
        return false;
    const qint64 now = nowMs();
    QList<QJsonObject> published;
    for (const OutgoingMessage &message : messages) {
        QJsonObject attributes{{attribute::Id, QUuid::createUuid().toString(QUuid::WithoutBraces)},
                               {attribute::Redrives, QString::number(message.redriveCount)},
                               {attribute::EnqueuedAt, QString::number(now)}};
        if (message.delayMs > 0) {
            attributes.insert(attribute::VisibleAt, QString::number(now + message.delayMs));
            attributes.insert(attribute::Hold, QStringLiteral("1"));
        }
        published.append(pubSubMessage(message.payload, attributes));
    }
    return publish(pubSubDetails(location()).topic, published, error);
}

std::optional<QList<PubSubQueue::Received>> PubSubQueue::pull(const QString &subscription, int max, QString *error)
{
    // Never a blocking empty pull: the engine polls an idle queue on its own schedule.
    const Reply reply = call("POST", subscriptionPath(subscription) + QStringLiteral(":pull"),
                             {{QStringLiteral("maxMessages"), std::clamp(max, 1, MaxPull)},
                              {QStringLiteral("returnImmediately"), true}});
    if (!reply.ok) {
        *error = describe(reply, QStringLiteral("pulling from %1").arg(subscription));
        return std::nullopt;
    }
    QList<Received> received;
    for (const auto &value : reply.body.value(QLatin1String("receivedMessages")).toArray()) {
        const QJsonObject row = value.toObject();
        const QJsonObject message = row.value(QLatin1String("message")).toObject();
        Received one;
        one.ackId = row.value(QLatin1String("ackId")).toString().toUtf8();
        one.pubSubMessageId = message.value(QLatin1String("messageId")).toString();
        one.attributes = message.value(QLatin1String("attributes")).toObject();
        QueueMessage &leased = one.message;
        leased.id = one.attributes.value(attribute::Id).toString();
        if (leased.id.isEmpty())
            leased.id = one.pubSubMessageId; // published by another client
        leased.payload = QByteArray::fromBase64(message.value(QLatin1String("data")).toString().toLatin1());
        // Pub/Sub's deliveryAttempt (sent where a dead-letter policy is) counts this copy's
        // deliveries, the hold of a copy published to be held among them; once-receives
        // the deliveries of the copies before it.
        one.deliveryAttempt = std::max(1, row.value(QLatin1String("deliveryAttempt")).toInt(1));
        const int held = one.attributes.contains(attribute::Hold) && one.deliveryAttempt > 1 ? 1 : 0;
        leased.delivery = std::max(1, one.deliveryAttempt - held + one.attributes.value(attribute::Receives).toString().toInt());
        leased.redriveCount = one.attributes.value(attribute::Redrives).toString().toInt();
        leased.enqueuedAtMs = one.attributes.value(attribute::EnqueuedAt).toString().toLongLong();
        if (leased.enqueuedAtMs == 0)
            leased.enqueuedAtMs = QDateTime::fromString(message.value(QLatin1String("publishTime")).toString(), Qt::ISODateWithMs)
                                      .toMSecsSinceEpoch();
        // Nothing can be settled, or known in the ledger, without these: not taken.
        if (one.ackId.isEmpty() || leased.id.isEmpty()) {
            qCWarning(lcPubSubQueue, "Pub/Sub answered a message without %s: left alone",
                      one.ackId.isEmpty() ? "an ackId" : "a messageId");
            continue;
        }
        received.append(std::move(one));
    }
    return received;
}

bool PubSubQueue::acknowledge(const QString &subscription, const QList<QByteArray> &ackIds, QString *error)
{
    if (ackIds.isEmpty())
        return true;
    QJsonArray ids;
    for (const QByteArray &id : ackIds)
        ids.append(QString::fromUtf8(id));
    // An acknowledgement whose answer was lost is safe to send again.
    Reply reply = call("POST", subscriptionPath(subscription) + QStringLiteral(":acknowledge"), {{QStringLiteral("ackIds"), ids}});
    if (!reply.ok && reply.httpStatus == 0)
        reply = call("POST", subscriptionPath(subscription) + QStringLiteral(":acknowledge"), {{QStringLiteral("ackIds"), ids}});
    if (!reply.ok) {
        *error = describe(reply, QStringLiteral("acknowledging %1 messages").arg(ids.size()));
        return false;
    }
    return true;
}

bool PubSubQueue::modifyDeadline(const QString &subscription, const QList<QByteArray> &ackIds, int seconds, QString *error)
{
    if (ackIds.isEmpty())
        return true;
    QJsonArray ids;
    for (const QByteArray &id : ackIds)
        ids.append(QString::fromUtf8(id));
    const QJsonObject body{{QStringLiteral("ackIds"), ids},
                           {QStringLiteral("ackDeadlineSeconds"), std::clamp(seconds, 0, MaxAckDeadlineSeconds)}};
    Reply reply = call("POST", subscriptionPath(subscription) + QStringLiteral(":modifyAckDeadline"), body);
    if (!reply.ok && reply.httpStatus == 0)
        reply = call("POST", subscriptionPath(subscription) + QStringLiteral(":modifyAckDeadline"), body);
    if (!reply.ok) {
        *error = describe(reply, QStringLiteral("changing the ack deadline of %1 messages").arg(ids.size()));
        return false;
    }
    return true;
}

QList<QueueMessage> PubSubQueue::lease(int max, qint64 leaseMs, const QString &, QString *error)
{
    QList<QueueMessage> leased;
    const auto received = pull(location().name, max, error);
    if (!received)
        return leased;
    const qint64 now = nowMs();
    QList<QByteArray> leasedIds;
    QHash<int, QList<QByteArray>> holds; // by seconds
    QList<QByteArray> earlyIds;
    QList<QJsonObject> early;
    for (const Received &one : *received) {
        const qint64 visibleAt = one.attributes.value(attribute::VisibleAt).toString().toLongLong();
        if (visibleAt > now + 1000) {
            // Not due yet (Pub/Sub delays nothing). The first delivery of a copy published
            // to be held is held with its ack deadline, for at most 600 s; a copy delivered
            // early again (held 600 s and still not due, or first held by a worker that
            // died) is published anew and acknowledged, so holding never spends the
            // delivery attempts the dead-letter policy counts.
            m_dueAtMs.insert(one.message.id, visibleAt);
            if (one.attributes.contains(attribute::Hold) && one.deliveryAttempt <= 1) {
                holds[ackDeadlineSeconds(std::min(visibleAt - now, qint64(MaxAckDeadlineSeconds) * 1000))].append(one.ackId);
                continue;
            }
            QJsonObject attributes = one.attributes;
            attributes.insert(attribute::Hold, QStringLiteral("1"));
            attributes.insert(attribute::Receives, QString::number(one.message.delivery - 1));
            early.append(pubSubMessage(one.message.payload, attributes));
            earlyIds.append(one.ackId);
            continue;
        }
        m_dueAtMs.remove(one.message.id);
        QueueMessage message = one.message;
        message.leaseUntilMs = now + leaseMs;
        m_held.insert(message.id, {message.delivery, one.ackId, message.payload, one.attributes});
        leasedIds.append(one.ackId);
        leased.append(std::move(message));
    }
    QString late;
    if (!early.isEmpty() && needTopic(&late) && publish(pubSubDetails(location()).topic, early, &late))
        acknowledge(location().name, earlyIds, &late);
    for (auto it = holds.cbegin(); it != holds.cend() && late.isEmpty(); ++it)
        modifyDeadline(location().name, it.value(), it.key(), &late);
    // The lease is the ack deadline (at most 600 s: a longer lease is extended by nobody,
    // so it ends at 600 s and the message is delivered again, which the ledger answers).
    if (late.isEmpty())
        modifyDeadline(location().name, leasedIds, ackDeadlineSeconds(leaseMs), &late);
    if (!late.isEmpty())
        qCWarning(lcPubSubQueue, "%s", qPrintable(late));
    return leased;
}

bool PubSubQueue::settle(const QList<Settlement> &settlements, QString *error)
{
    QList<QByteArray> acks;
    QHash<int, QList<QByteArray>> retries; // by delay in seconds
    QList<QJsonObject> republished;
    QList<QJsonObject> buried;
    const qint64 now = nowMs();
    for (const Settlement &settlement : settlements) {
        const auto found = m_held.constFind(settlement.messageId);
        if (found == m_held.cend() || found->delivery != settlement.delivery) {
            qCInfo(lcPubSubQueue, "delivery %s.%d was no longer ours to settle", qPrintable(settlement.messageId),
                   settlement.delivery);
            continue;
        }
        const Held held = *found;
        m_held.erase(found);
        switch (settlement.kind) {
        case Settlement::Kind::Ack:
            acks.append(held.ackId);
            break;
        case Settlement::Kind::Retry: {
            m_dueAtMs.insert(settlement.messageId, now + settlement.delayMs);
            const int seconds = wholeSecondsUp(settlement.delayMs);
            if (seconds <= MaxAckDeadlineSeconds) {
                retries[seconds].append(held.ackId);
                break;
            }
            // Longer than an ack deadline may last: published again, held when due.
            QJsonObject attributes = held.attributes;
            attributes.insert(attribute::VisibleAt, QString::number(now + settlement.delayMs));
            attributes.insert(attribute::Hold, QStringLiteral("1"));
            attributes.insert(attribute::Receives, QString::number(settlement.delivery));
            republished.append(pubSubMessage(held.payload, attributes));
            acks.append(held.ackId);
            break;
        }
        case Settlement::Kind::DeadLetter: {
            QJsonObject attributes;
            for (const QString &name : {attribute::Id, attribute::Redrives, attribute::EnqueuedAt})
                if (held.attributes.contains(name))
                    attributes.insert(name, held.attributes.value(name));
            if (!attributes.contains(attribute::Id))
                attributes.insert(attribute::Id, settlement.messageId);
            attributes.insert(attribute::DeadLetter,
                              QString::fromUtf8(QJsonDocument(deadLetterAccount(settlement, now)).toJson(QJsonDocument::Compact)));
            buried.append(pubSubMessage(held.payload, attributes));
            acks.append(held.ackId);
            break;
        }
        }
    }
    // Published on before the original is acknowledged: a crash between the two leaves a
    // copy in both, which the ledger answers, and never none.
    if (!republished.isEmpty() && !(needTopic(error) && publish(pubSubDetails(location()).topic, republished, error)))
        return false;
    if (!buried.isEmpty()
        && !(needTopic(error) && publish(pubSubDeadLetterName(pubSubDetails(location()).topic), buried, error)))
        return false;
    for (auto it = retries.cbegin(); it != retries.cend(); ++it)
        if (!modifyDeadline(location().name, it.value(), it.key(), error))
            return false;
    return acknowledge(location().name, acks, error);
}

// The subscription's own ack deadline, read once: what hides a pulled message until the
// worker sets its lease, should the worker die in between. Pub/Sub's longest while unread.
qint64 PubSubQueue::subscriptionAckDeadlineMs()
{
    if (m_subscriptionAckDeadlineMs == 0) {
        const Reply reply = call("GET", subscriptionPath(location().name));
        const int seconds = reply.body.value(QLatin1String("ackDeadlineSeconds")).toInt();
        if (!reply.ok || seconds <= 0)
            return qint64(MaxAckDeadlineSeconds) * 1000;
        m_subscriptionAckDeadlineMs = qint64(std::min(seconds, MaxAckDeadlineSeconds)) * 1000;
    }
    return m_subscriptionAckDeadlineMs;
}

std::optional<QueueCounts> PubSubQueue::counts(QString *)
{
    QueueCounts counts;
    counts.backlogUnknown = true;
    counts.unavailable = QStringLiteral("Pub/Sub reports its backlog, the messages in flight and the oldest one's age "
                                        "only to Cloud Monitoring; the dead letters are listed on the Dead letters page");
    counts.hiddenUpToMs = subscriptionAckDeadlineMs();
    // What this process itself holds back: its retries and the early copies it holds.
    const qint64 now = nowMs();
    for (auto it = m_dueAtMs.begin(); it != m_dueAtMs.end();) {
        if (it.value() <= now) {
            it = m_dueAtMs.erase(it);
            continue;
        }
        ++counts.delayed;
        counts.nextVisibleInMs = std::min(counts.nextVisibleInMs.value_or(it.value() - now), it.value() - now);
        ++it;
    }
    return counts;
}

DeadLetter PubSubQueue::deadLetterOf(const Received &received)
{
    DeadLetter letter;
    letter.id = received.message.id;
    letter.payload = received.message.payload;
    letter.redriveCount = received.message.redriveCount;
    letter.enqueuedAtMs = received.message.enqueuedAtMs;
    const QJsonObject account = QJsonDocument::fromJson(received.attributes.value(attribute::DeadLetter).toString().toUtf8()).object();
    if (!account.isEmpty()) {
        readDeadLetterAccount(account, &letter);
        return letter;
    }
    // Pub/Sub moved it here itself: delivered too often without being settled.
    letter.errorClass = QStringLiteral("max-receives");
    // Pub/Sub says how often it delivered it (the copies before it counted by once-receives).
    const int deliveries = received.attributes.value(QLatin1String("CloudPubSubDeadLetterSourceDeliveryCount")).toString().toInt();
    letter.receiveCount = deliveries + received.attributes.value(attribute::Receives).toString().toInt();
    letter.lastError = QStringLiteral("delivered %1 times without being settled (the subscription's dead-letter policy)")
                           .arg(letter.receiveCount);
    if (const auto parsed = parseReminder(letter.payload); parsed.reminder) {
        letter.sendKey = parsed.reminder->sendKey;
        letter.eventId = parsed.reminder->eventId;
    }
    return letter;
}

std::optional<QList<DeadLetter>> PubSubQueue::deadLetters(int limit, QString *error)
{
    return takeDeadLetters(std::min(limit, MaxListedDeadLetters), [](const DeadLetter &) { return false; }, Take::List, error);
}

std::optional<QList<DeadLetter>> PubSubQueue::redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                                      QString *error)
{
    return takeDeadLetters(max, select, Take::Redrive, error);
}

std::optional<QList<DeadLetter>> PubSubQueue::discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                                      QString *error)
{
    return takeDeadLetters(max, select, Take::Discard, error);
}

// Pub/Sub has no peek: dead letters are pulled from the dead-letter subscription (hidden
// from another listing until released) and released at once with an ack deadline of 0.
// What select takes is published back to the topic (redrive) or not (discard), and only
// then acknowledged.
std::optional<QList<DeadLetter>> PubSubQueue::takeDeadLetters(int max, const std::function<bool(const DeadLetter &)> &select,
                                                              Take take, QString *error)
{
    const QString deadSubscription = pubSubDeadLetterName(location().name);
    QList<DeadLetter> listed;
    QList<DeadLetter> taken;
    QList<QByteArray> takenIds;
    QList<QByteArray> release;
    QList<QJsonObject> resend;
    QSet<QString> seen;
    QString failure;
    while (listed.size() < max) {
        const auto received = pull(deadSubscription, std::min(MaxPull, int(max - listed.size())), &failure);
        if (!received || received->isEmpty())
            break;
        for (const Received &one : *received) {
            if (seen.contains(one.pubSubMessageId)) {
                release.append(one.ackId);
                continue;
            }
            seen.insert(one.pubSubMessageId);
            const DeadLetter letter = deadLetterOf(one);
            listed.append(letter);
            if (!select(letter)) {
                release.append(one.ackId);
                continue;
            }
            taken.append(letter);
            takenIds.append(one.ackId);
            if (take == Take::Redrive)
                resend.append(pubSubMessage(letter.payload,
                                            {{attribute::Id, letter.id},
                                             {attribute::Redrives, QString::number(letter.redriveCount + 1)},
                                             {attribute::EnqueuedAt, QString::number(letter.enqueuedAtMs ? letter.enqueuedAtMs : nowMs())}}));
        }
    }
    QString releaseError;
    if (!modifyDeadline(deadSubscription, release, 0, &releaseError))
        qCWarning(lcPubSubQueue, "%s", qPrintable(releaseError));
    if (!failure.isEmpty()) {
        *error = failure;
        return std::nullopt;
    }
    if (take == Take::List)
        return listed;
    if (taken.isEmpty())
        return taken;
    if (take == Take::Redrive && !(needTopic(error) && publish(pubSubDetails(location()).topic, resend, error)))
        return std::nullopt;
    if (!acknowledge(deadSubscription, takenIds, error))
        return std::nullopt;
    return taken;
}

} // namespace once
