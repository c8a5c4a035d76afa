#include "queues/sqs/sqsqueue.h"

#include "http/blockinghttpclient.h"
#include "model/clock.h"
#include "model/reminder.h"
#include "queues/deadletteraccount.h"
#include "queues/messageattributes.h"
#include "queues/sqs/sqslocation.h"
#include "text/jsonvalues.h"
#include "text/quotedtext.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QRegularExpression>
#include <QSet>
#include <QUuid>

#include <algorithm>

namespace once {

Q_LOGGING_CATEGORY(lcSqsQueue, "once.queues.sqs")

namespace {

// SQS's limits: ten messages a receive or a batch, 256 KiB a batch, visibility and a
// retry's delay at most 12 h, a send's delay at most 15 min.
constexpr int MaxBatch = 10;
constexpr qsizetype MaxBatchBytes = 256 * 1024 - 16 * 1024; // leaves room for the attributes
constexpr int MaxVisibilitySeconds = 12 * 3600;
constexpr int MaxSendDelaySeconds = 15 * 60;
// How long an idle worker's receive waits for a message (long polling; SQS allows 20 s):
// short, as the engine's turn waits with it, and SIGTERM too.
constexpr int IdleWaitSeconds = 2;
// A lease of more than ten receives them ten at a time, at most this many times a turn.
constexpr int MaxReceivesPerLease = 5;
// SQS's range for a redrive policy's maxReceiveCount.
constexpr int MaxReceiveCountLimit = 1000;
// Dead letters being listed, redriven or discarded are hidden from others this long.
constexpr int ListingVisibilitySeconds = 30;
constexpr int MaxListedDeadLetters = 10000;
constexpr int CallTimeoutMs = 20000;
// A receive of ten messages of 256 KiB, each character escaped in JSON at worst.
constexpr qint64 MaxResponseBodyBytes = 32 * 1024 * 1024;

// SQS only: a payload SQS could not carry as text travels as base64.
const QString BodyEncodingAttribute = QStringLiteral("once-body-encoding");

QJsonObject stringAttribute(const QString &value)
{
    return {{QStringLiteral("DataType"), QStringLiteral("String")}, {QStringLiteral("StringValue"), value}};
}

QJsonObject numberAttribute(qint64 value)
{
    return {{QStringLiteral("DataType"), QStringLiteral("Number")}, {QStringLiteral("StringValue"), QString::number(value)}};
}

// An SQS body is text of the characters XML allows, and some emulators allow fewer (not
// beyond U+FFFD): a payload of other bytes or characters (ids that are not valid text, a
// control character) travels as base64, said so by once-body-encoding, and is decoded on
// receipt, so every payload arrives as the bytes it was.
bool travelsAsText(const QByteArray &payload)
{
    if (!QUtf8StringView(payload).isValidUtf8())
        return false;
    for (const char32_t c : QString::fromUtf8(payload).toUcs4()) {
        const bool allowed = c == 0x9 || c == 0xA || c == 0xD || (c >= 0x20 && c <= 0xD7FF) || (c >= 0xE000 && c <= 0xFFFD);
        if (!allowed)
            return false;
    }
    return true;
}

// A message entry of SendMessageBatch: the payload as its body, and the attributes.
QJsonObject messageEntry(const QByteArray &payload, QJsonObject attributes)
{
    if (travelsAsText(payload))
        return {{QStringLiteral("MessageBody"), QString::fromUtf8(payload)}, {QStringLiteral("MessageAttributes"), attributes}};
    attributes.insert(BodyEncodingAttribute, stringAttribute(QStringLiteral("base64")));
    return {{QStringLiteral("MessageBody"), QString::fromLatin1(payload.toBase64())}, {QStringLiteral("MessageAttributes"), attributes}};
}

// A message to wait longer than SQS can hide one (12 h), or sent with a delay longer than
// a send's 15 minutes: sent with the longest send delay, its not-before time and the
// deliveries of the copies before it. A worker that receives it early hides it until it
// is due if that is 12 h or less away, else sends it on again (lease()), so no copy is
// received more than twice and SQS's redrive policy never counts a wait.
QJsonObject delayedCopy(const QByteArray &payload, QJsonObject attributes, qint64 visibleAtMs, int receives, qint64 now)
{
    attributes.remove(BodyEncodingAttribute); // messageEntry() says it again if need be
    attributes.insert(attribute::VisibleAt, numberAttribute(visibleAtMs));
    attributes.insert(attribute::Hold, stringAttribute(QStringLiteral("1")));
    if (receives > 0)
        attributes.insert(attribute::Receives, numberAttribute(receives));
    QJsonObject entry = messageEntry(payload, attributes);
    entry.insert(QStringLiteral("DelaySeconds"), std::clamp(wholeSecondsUp(visibleAtMs - now), 0, MaxSendDelaySeconds));
    return entry;
}

QString attributeText(const QJsonObject &attributes, const QString &name)
{
    return attributes.value(name).toObject().value(QLatin1String("StringValue")).toString();
}

// What the Host header will say: the HTTP client writes it so, and it is signed.
QByteArray hostHeader(const QUrl &url)
{
    const bool tls = url.scheme() == QLatin1String("https");
    QByteArray host = url.host().contains(QLatin1Char(':')) ? '[' + url.host().toLatin1() + ']' : url.host().toLatin1();
    const int port = url.port(tls ? 443 : 80);
    if (port != (tls ? 443 : 80))
        host += ':' + QByteArray::number(port);
    return host;
}

} // namespace

SqsQueue::SqsQueue(QueueLocation location, AwsCredentials credentials)
    : BrokerQueue(std::move(location)),
      m_credentials(std::move(credentials)),
      m_signer(sqsDetails(this->location()).region, QStringLiteral("sqs")),
      m_http(std::make_unique<BlockingHttpClient>())
{
}

SqsQueue::~SqsQueue() = default;

std::unique_ptr<SqsQueue> SqsQueue::connect(const QueueLocation &location, QString *error)
{
    auto credentials = loadAwsCredentials(error);
    if (!credentials)
        return nullptr;
    // Nothing to connect yet: the first call opens the connection, and says if it cannot.
    return std::unique_ptr<SqsQueue>(new SqsQueue(location, std::move(*credentials)));
}

SqsQueue::Reply SqsQueue::call(const QByteArray &action, const QJsonObject &body)
{
    const QUrl endpoint = sqsDetails(location()).endpoint;
    SignableRequest signable;
    signable.method = "POST";
    signable.path = endpoint.path().isEmpty() ? QStringLiteral("/") : endpoint.path();
    signable.headers = {{"Host", hostHeader(endpoint)},
                        {"Content-Type", "application/x-amz-json-1.0"},
                        {"X-Amz-Target", "AmazonSQS." + action}};
    signable.body = QJsonDocument(body).toJson(QJsonDocument::Compact);
    m_signer.sign(signable, m_credentials, QDateTime::currentDateTimeUtc());

    HttpRequest request;
    request.url = endpoint;
    request.url.setPath(signable.path);
    request.method = signable.method;
    request.body = signable.body;
    request.timeoutMs = CallTimeoutMs;
    request.maxResponseBodyBytes = MaxResponseBodyBytes;
    for (const auto &header : std::as_const(signable.headers))
        request.headers.append(header); // the client writes its own Host, the same
    const HttpResult result = m_http->send(request);

    Reply reply;
    if (result.status != HttpResult::Status::Response) {
        reply.inDoubt = result.status == HttpResult::Status::InDoubt;
        reply.message = (reply.inDoubt ? QStringLiteral("no answer: ") : QStringLiteral("not reachable: ")) + result.error;
        return reply;
    }
    reply.httpStatus = result.httpStatus;
    const QJsonDocument document = QJsonDocument::fromJson(result.body);
    reply.body = document.object();
    if (result.httpStatus >= 200 && result.httpStatus < 300) {
        // Every answer of the API is a JSON object: anything else (a proxy's page, a
        // server that is not SQS) is not taken for an empty one.
        reply.ok = document.isObject() || result.body.trimmed().isEmpty(); // no answer is an empty one
        if (!reply.ok)
            reply.message = QStringLiteral("the answer is not a JSON object: ") + QString::fromUtf8(result.body.left(200));
        return reply;
    }
    // {"__type": "com.amazonaws.sqs#QueueDoesNotExist", "message": "..."}
    const QString type = reply.body.value(QLatin1String("__type")).toString();
    reply.errorType = type.mid(type.lastIndexOf(QLatin1Char('#')) + 1);
    reply.message = reply.body.value(QLatin1String("message")).toString();
    if (reply.message.isEmpty())
        reply.message = reply.body.value(QLatin1String("Message")).toString();
    if (reply.errorType.isEmpty() && reply.message.isEmpty())
        reply.message = QString::fromUtf8(result.body.left(200));
    return reply;
}

QString SqsQueue::describe(const Reply &reply, const QString &what) const
{
    QString why = reply.httpStatus == 0 ? reply.message
                                         : QStringLiteral("HTTP %1: %2")
                                               .arg(QString(QString::number(reply.httpStatus) + QLatin1Char(' ') + reply.errorType).trimmed(),
                                                    reply.message);
    if (reply.errorType == QLatin1String("InvalidClientTokenId") || reply.errorType == QLatin1String("SignatureDoesNotMatch")
        || reply.errorType == QLatin1String("UnrecognizedClientException"))
        why += QStringLiteral(" (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)");
    // Never a secret: the signature is not echoed, but the key id may be, and that is all.
    QString line = asOneLine(QStringLiteral("%1 at the SQS queue %2: %3").arg(what, location().displayName(), why));
    line.replace(QString::fromUtf8(m_credentials.secretAccessKey), QStringLiteral("[secret]"));
    // A server that echoes a request shows its signature, good for a replay for minutes.
    static const QRegularExpression signature(QStringLiteral("Signature=[0-9A-Fa-f]+"));
    line.replace(signature, QStringLiteral("Signature=[redacted]"));
    if (!m_credentials.sessionToken.isEmpty())
        line.replace(QString::fromUtf8(m_credentials.sessionToken), QStringLiteral("[token]"));
    return line;
}

QString SqsQueue::queueUrl(const QString &name, QString *error)
{
    if (const auto known = m_queueUrls.constFind(name); known != m_queueUrls.cend())
        return *known;
    const Reply reply = call("GetQueueUrl", {{QStringLiteral("QueueName"), name},
                                             {QStringLiteral("QueueOwnerAWSAccountId"), sqsDetails(location()).account}});
    if (!reply.ok) {
        *error = reply.errorType.contains(QLatin1String("NonExistentQueue")) || reply.errorType.contains(QLatin1String("QueueDoesNotExist"))
                     ? QStringLiteral("the SQS queue %1 does not exist (once init --queue %2 creates it)").arg(name, location().displayName())
                     : describe(reply, QStringLiteral("looking up the queue %1").arg(name));
        return {};
    }
    const QString url = reply.body.value(QLatin1String("QueueUrl")).toString();
    m_queueUrls.insert(name, url);
    return url;
}

QString SqsQueue::describeTopology(const QueueTopology &topology) const
{
    return QStringLiteral("SQS moves a message received %1 times without being settled to %2 (its redrive policy: "
                          "the workers' --max-attempts %3, and two deliveries for crashes)")
        .arg(std::min(topology.deliveryLimit(), MaxReceiveCountLimit))
        .arg(sqsDeadLetterQueueName(location().name))
        .arg(topology.maxAttempts);
}

bool SqsQueue::declareTopology(const QueueTopology &topology, QString *error)
{
    const QString deadName = sqsDeadLetterQueueName(location().name);
    // Fourteen days, SQS's longest: dead letters wait for an operator.
    const QJsonObject retention{{QStringLiteral("MessageRetentionPeriod"), QStringLiteral("1209600")}};
    Reply reply = call("CreateQueue", {{QStringLiteral("QueueName"), deadName}, {QStringLiteral("Attributes"), retention}});
    if (!reply.ok && reply.errorType != QLatin1String("QueueAlreadyExists") && reply.errorType != QLatin1String("QueueNameExists")) {
        *error = describe(reply, QStringLiteral("creating the dead-letter queue %1").arg(deadName));
        return false;
    }
    const QString deadUrl = queueUrl(deadName, error);
    if (deadUrl.isEmpty())
        return false;
    reply = call("GetQueueAttributes", {{QStringLiteral("QueueUrl"), deadUrl}, {QStringLiteral("AttributeNames"), QJsonArray{QStringLiteral("QueueArn")}}});
    const QString deadArn = reply.body.value(QLatin1String("Attributes")).toObject().value(QLatin1String("QueueArn")).toString();
    if (!reply.ok || deadArn.isEmpty()) {
        *error = reply.ok ? QStringLiteral("the SQS queue %1 reports no QueueArn").arg(deadName)
                          : describe(reply, QStringLiteral("reading the ARN of %1").arg(deadName));
        return false;
    }
    QJsonObject attributes = retention;
    attributes.insert(QStringLiteral("RedrivePolicy"),
                      QString::fromUtf8(QJsonDocument(QJsonObject{{QStringLiteral("deadLetterTargetArn"), deadArn},
                                                                  {QStringLiteral("maxReceiveCount"),
                                                                   QString::number(std::min(topology.deliveryLimit(), MaxReceiveCountLimit))}})
                                            .toJson(QJsonDocument::Compact)));
    reply = call("CreateQueue", {{QStringLiteral("QueueName"), location().name}, {QStringLiteral("Attributes"), attributes}});
    if (reply.ok)
        return !queueUrl(location().name, error).isEmpty();
    if (reply.errorType != QLatin1String("QueueAlreadyExists") && reply.errorType != QLatin1String("QueueNameExists")) {
        *error = describe(reply, QStringLiteral("creating the queue"));
        return false;
    }
    // It exists with other attributes: give it the redrive policy this needs.
    const QString url = queueUrl(location().name, error);
    if (url.isEmpty())
        return false;
    reply = call("SetQueueAttributes", {{QStringLiteral("QueueUrl"), url}, {QStringLiteral("Attributes"), attributes}});
    if (!reply.ok) {
        *error = describe(reply, QStringLiteral("setting the queue's redrive policy"));
        return false;
    }
    return true;
}

bool SqsQueue::send(const QString &url, const QList<QJsonObject> &entries, QString *error)
{
    for (qsizetype start = 0; start < entries.size();) {
        QJsonArray batch;
        qsizetype bytes = 0;
        qsizetype end = start;
        while (end < entries.size() && batch.size() < MaxBatch) {
            const qsizetype size = entries.at(end).value(QLatin1String("MessageBody")).toString().toUtf8().size();
            if (!batch.isEmpty() && bytes + size > MaxBatchBytes)
                break;
            QJsonObject entry = entries.at(end);
            entry.insert(QStringLiteral("Id"), QString::number(batch.size()));
            batch.append(entry);
            bytes += size;
            ++end;
        }
        // Never sent twice on its own: a batch whose answer was lost may have been taken,
        // and the ledger answers for a copy, but a copy should not be made on purpose.
        const Reply reply = call("SendMessageBatch", {{QStringLiteral("QueueUrl"), url}, {QStringLiteral("Entries"), batch}});
        if (!reply.ok) {
            *error = describe(reply, QStringLiteral("sending %1 messages").arg(batch.size()));
            return false;
        }
        const QJsonArray failed = reply.body.value(QLatin1String("Failed")).toArray();
        if (!failed.isEmpty()) {
            const QJsonObject first = failed.first().toObject();
            *error = asOneLine(QStringLiteral("the SQS queue %1 refused message %2 of a batch (%3: %4)")
                                 .arg(location().displayName(), QString::number(start + first.value(QLatin1String("Id")).toString().toInt() + 1),
                                      first.value(QLatin1String("Code")).toString(), first.value(QLatin1String("Message")).toString()));
            return false;
        }
        start = end;
    }
    return true;
}

bool SqsQueue::enqueue(const QList<OutgoingMessage> &messages, QString *error)
{
    const QString url = queueUrl(location().name, error);
    if (url.isEmpty())
        return false;
    const qint64 now = nowMs();
    QList<QJsonObject> entries;
    for (const OutgoingMessage &message : messages) {
        QJsonObject entry = messageEntry(message.payload,
                                         {{attribute::Id, stringAttribute(QUuid::createUuid().toString(QUuid::WithoutBraces))},
                                          {attribute::Redrives, numberAttribute(message.redriveCount)},
                                          {attribute::EnqueuedAt, numberAttribute(now)}});
        // SQS delays a send by 15 minutes at most; a longer delay is kept by the worker,
        // which hides a message received early until it is due (lease()).
        if (message.delayMs > 0)
            entry.insert(QStringLiteral("DelaySeconds"), std::min(wholeSecondsUp(message.delayMs), MaxSendDelaySeconds));
        if (message.delayMs > qint64(MaxSendDelaySeconds) * 1000)
            entry = delayedCopy(message.payload, entry.value(QLatin1String("MessageAttributes")).toObject(),
                                now + message.delayMs, 0, now);
        entries.append(entry);
    }
    return send(url, entries, error);
}

std::optional<QList<SqsQueue::Received>> SqsQueue::receive(const QString &url, int max, int visibilitySeconds, int waitSeconds,
                                                           QString *error)
{
    const Reply reply = call("ReceiveMessage",
                             {{QStringLiteral("QueueUrl"), url},
                              {QStringLiteral("MaxNumberOfMessages"), std::clamp(max, 1, MaxBatch)},
                              {QStringLiteral("VisibilityTimeout"), std::clamp(visibilitySeconds, 0, MaxVisibilitySeconds)},
                              {QStringLiteral("WaitTimeSeconds"), waitSeconds},
                              // Both spellings: older and newer SQS, and emulators that
                              // return the receive count only when asked for All.
                              {QStringLiteral("AttributeNames"), QJsonArray{QStringLiteral("All")}},
                              {QStringLiteral("MessageSystemAttributeNames"), QJsonArray{QStringLiteral("All")}},
                              {QStringLiteral("MessageAttributeNames"), QJsonArray{QStringLiteral("All")}}});
    if (!reply.ok) {
        *error = describe(reply, QStringLiteral("receiving"));
        return std::nullopt;
    }
    QList<Received> received;
    for (const auto &value : reply.body.value(QLatin1String("Messages")).toArray()) {
        const QJsonObject row = value.toObject();
        Received one;
        one.receiptHandle = row.value(QLatin1String("ReceiptHandle")).toString().toUtf8();
        one.sqsMessageId = row.value(QLatin1String("MessageId")).toString();
        one.attributes = row.value(QLatin1String("MessageAttributes")).toObject();
        one.systemAttributes = row.value(QLatin1String("Attributes")).toObject();
        QueueMessage &message = one.message;
        message.id = attributeText(one.attributes, attribute::Id);
        if (message.id.isEmpty())
            message.id = one.sqsMessageId; // sent by a producer of the team's own
        message.payload = row.value(QLatin1String("Body")).toString().toUtf8();
        if (attributeText(one.attributes, BodyEncodingAttribute) == QLatin1String("base64"))
            message.payload = QByteArray::fromBase64(message.payload);
        // SQS's receive count of this copy, less the early receive that hid a delayed copy,
        // plus the deliveries of the copies before it.
        const int receives = std::max(1, one.systemAttributes.value(QLatin1String("ApproximateReceiveCount")).toString().toInt());
        const int hidden = one.attributes.contains(attribute::Hold) && receives > 1 ? 1 : 0;
        message.delivery = std::max(1, receives - hidden + attributeText(one.attributes, attribute::Receives).toInt());
        message.redriveCount = attributeText(one.attributes, attribute::Redrives).toInt();
        message.enqueuedAtMs = attributeText(one.attributes, attribute::EnqueuedAt).toLongLong();
        if (message.enqueuedAtMs == 0)
            message.enqueuedAtMs = one.systemAttributes.value(QLatin1String("SentTimestamp")).toString().toLongLong();
        // Nothing can be settled, or known in the ledger, without these: not taken.
        if (one.receiptHandle.isEmpty() || message.id.isEmpty()) {
            qCWarning(lcSqsQueue, "SQS answered a message without a %s: left alone",
                      one.receiptHandle.isEmpty() ? "ReceiptHandle" : "MessageId");
            continue;
        }
        received.append(std::move(one));
    }
    return received;
}

QList<QueueMessage> SqsQueue::lease(int max, qint64 leaseMs, const QString &, QString *error)
{
    QList<QueueMessage> leased;
    const QString url = queueUrl(location().name, error);
    if (url.isEmpty())
        return leased;
    const qint64 now = nowMs();
    QList<QPair<QByteArray, int>> early;
    QList<QJsonObject> sentOn;
    QList<QByteArray> sentOnHandles;
    for (int call = 0; call < MaxReceivesPerLease && leased.size() < max; ++call) {
        const int want = std::min(MaxBatch, int(max - leased.size()));
        QString failure;
        // Long polling, only while this worker holds nothing: a receive that waits for
        // messages holds up the turn that would record outcomes, and a worker with sends
        // in flight is asked again at every turn anyway. Idle, it spares SQS (and the
        // bill) the empty receives of the engine's polls, and asks every SQS host.
        const int wait = call == 0 && m_held.isEmpty() && m_lastReceiveWasEmpty ? IdleWaitSeconds : 0;
        const auto received = receive(url, want, std::max(1, wholeSecondsUp(leaseMs)), wait, &failure);
        if (call == 0)
            m_lastReceiveWasEmpty = received && received->isEmpty();
        if (!received) {
            // What was received before the failure is worked on; the next turn asks again.
            if (leased.isEmpty())
                *error = failure;
            else
                qCWarning(lcSqsQueue, "%s", qPrintable(failure));
            break;
        }
        for (const Received &one : *received) {
            // Delayed longer than SQS's 15 minutes: hidden again until it is due, or sent on
            // when that is further than SQS can hide it (delayedCopy()).
            const qint64 visibleAt = attributeText(one.attributes, attribute::VisibleAt).toLongLong();
            if (visibleAt > now + 1000) {
                if (visibleAt - now <= qint64(MaxVisibilitySeconds) * 1000) {
                    early.append({one.receiptHandle, wholeSecondsUp(visibleAt - now)});
                } else {
                    sentOn.append(delayedCopy(one.message.payload, one.attributes, visibleAt, one.message.delivery - 1, now));
                    sentOnHandles.append(one.receiptHandle);
                }
                continue;
            }
            QueueMessage message = one.message;
            message.leaseUntilMs = now + leaseMs;
            m_held.insert(message.id, {message.delivery, one.receiptHandle, message.payload, one.attributes});
            leased.append(std::move(message));
        }
        if (received->size() < want)
            break;
    }
    QString hideError;
    if (!early.isEmpty() && !changeVisibility(url, early, &hideError))
        qCWarning(lcSqsQueue, "%s", qPrintable(hideError));
    // The copy first, then the original: a crash between them leaves two, never none.
    if (!sentOn.isEmpty() && !(send(url, sentOn, &hideError) && deleteMessages(url, sentOnHandles, &hideError)))
        qCWarning(lcSqsQueue, "%s", qPrintable(hideError));
    return leased;
}

bool SqsQueue::deleteMessages(const QString &url, const QList<QByteArray> &receiptHandles, QString *error)
{
    for (qsizetype start = 0; start < receiptHandles.size(); start += MaxBatch) {
        QJsonArray entries;
        for (qsizetype i = start; i < std::min(receiptHandles.size(), start + MaxBatch); ++i)
            entries.append(QJsonObject{{QStringLiteral("Id"), QString::number(i - start)},
                                       {QStringLiteral("ReceiptHandle"), QString::fromUtf8(receiptHandles.at(i))}});
        // A delete whose answer was lost is safe to send again.
        Reply reply = call("DeleteMessageBatch", {{QStringLiteral("QueueUrl"), url}, {QStringLiteral("Entries"), entries}});
        if (!reply.ok && reply.httpStatus == 0)
            reply = call("DeleteMessageBatch", {{QStringLiteral("QueueUrl"), url}, {QStringLiteral("Entries"), entries}});
        if (!reply.ok) {
            *error = describe(reply, QStringLiteral("deleting %1 messages").arg(entries.size()));
            return false;
        }
        // A handle no longer valid (the lease passed to another consumer) is a redelivery
        // the ledger answers: noted, not an error.
        for (const auto &failed : reply.body.value(QLatin1String("Failed")).toArray())
            qCInfo(lcSqsQueue, "a delete was refused (%s): the message will be received again and the ledger answers it",
                   qPrintable(failed.toObject().value(QLatin1String("Code")).toString()));
    }
    return true;
}

bool SqsQueue::changeVisibility(const QString &url, const QList<QPair<QByteArray, int>> &handles, QString *error)
{
    for (qsizetype start = 0; start < handles.size(); start += MaxBatch) {
        QJsonArray entries;
        for (qsizetype i = start; i < std::min(handles.size(), start + MaxBatch); ++i)
            entries.append(QJsonObject{{QStringLiteral("Id"), QString::number(i - start)},
                                       {QStringLiteral("ReceiptHandle"), QString::fromUtf8(handles.at(i).first)},
                                       {QStringLiteral("VisibilityTimeout"), std::clamp(handles.at(i).second, 0, MaxVisibilitySeconds)}});
        Reply reply = call("ChangeMessageVisibilityBatch", {{QStringLiteral("QueueUrl"), url}, {QStringLiteral("Entries"), entries}});
        if (!reply.ok && reply.httpStatus == 0)
            reply = call("ChangeMessageVisibilityBatch", {{QStringLiteral("QueueUrl"), url}, {QStringLiteral("Entries"), entries}});
        if (!reply.ok) {
            *error = describe(reply, QStringLiteral("changing the visibility of %1 messages").arg(entries.size()));
            return false;
        }
        for (const auto &failed : reply.body.value(QLatin1String("Failed")).toArray())
            qCInfo(lcSqsQueue, "a visibility change was refused (%s): the message is visible again already",
                   qPrintable(failed.toObject().value(QLatin1String("Code")).toString()));
    }
    return true;
}

bool SqsQueue::settle(const QList<Settlement> &settlements, QString *error)
{
    const QString url = queueUrl(location().name, error);
    if (url.isEmpty())
        return false;
    QList<QByteArray> deletes;
    QList<QPair<QByteArray, int>> retries;
    QList<QJsonObject> buried;
    QList<QJsonObject> sentOn; // long retries, sent again with a delay
    QList<QByteArray> buriedHandles;
    for (const Settlement &settlement : settlements) {
        const auto found = m_held.constFind(settlement.messageId);
        if (found == m_held.cend() || found->delivery != settlement.delivery) {
            // Received again since (its lease ran out): this delivery no longer counts.
            qCInfo(lcSqsQueue, "delivery %s.%d was no longer ours to settle", qPrintable(settlement.messageId), settlement.delivery);
            continue;
        }
        const Held held = *found;
        m_held.erase(found);
        switch (settlement.kind) {
        case Settlement::Kind::Ack:
            deletes.append(held.receiptHandle);
            break;
        case Settlement::Kind::Retry:
            if (settlement.delayMs > qint64(MaxVisibilitySeconds) * 1000) {
                // Longer than SQS can hide a message: sent on with the delay (delayedCopy()).
                sentOn.append(delayedCopy(held.payload, held.attributes, nowMs() + settlement.delayMs, settlement.delivery, nowMs()));
                deletes.append(held.receiptHandle);
                break;
            }
            retries.append({held.receiptHandle, wholeSecondsUp(settlement.delayMs)});
            break;
        case Settlement::Kind::DeadLetter: {
            const QJsonObject account = deadLetterAccount(settlement, nowMs());
            // The message as it was (body, id, redrives, first enqueue) and the account.
            QJsonObject attributes;
            for (const QString &name : {attribute::Id, attribute::Redrives, attribute::EnqueuedAt})
                if (held.attributes.contains(name))
                    attributes.insert(name, held.attributes.value(name));
            if (!attributes.contains(attribute::Id))
                attributes.insert(attribute::Id, stringAttribute(settlement.messageId));
            attributes.insert(attribute::DeadLetter, stringAttribute(QString::fromUtf8(QJsonDocument(account).toJson(QJsonDocument::Compact))));
            buried.append(messageEntry(held.payload, attributes));
            buriedHandles.append(held.receiptHandle);
            break;
        }
        }
    }
    // A copy is sent (a long retry's here, a dead letter to QUEUE-dead) before the original
    // is deleted: a crash between the two leaves it in both, and the ledger answers its
    // next delivery.
    if (!sentOn.isEmpty() && !send(url, sentOn, error))
        return false;
    if (!buried.isEmpty()) {
        const QString deadUrl = queueUrl(sqsDeadLetterQueueName(location().name), error);
        if (deadUrl.isEmpty() || !send(deadUrl, buried, error))
            return false;
        deletes += buriedHandles;
    }
    return (deletes.isEmpty() || deleteMessages(url, deletes, error)) && (retries.isEmpty() || changeVisibility(url, retries, error));
}

std::optional<QueueCounts> SqsQueue::counts(QString *error)
{
    QueueCounts counts;
    const QJsonArray names{QStringLiteral("ApproximateNumberOfMessages"), QStringLiteral("ApproximateNumberOfMessagesNotVisible"),
                           QStringLiteral("ApproximateNumberOfMessagesDelayed")};
    for (const QString &name : {location().name, sqsDeadLetterQueueName(location().name)}) {
        const QString url = queueUrl(name, error);
        if (url.isEmpty())
            return std::nullopt;
        const Reply reply = call("GetQueueAttributes", {{QStringLiteral("QueueUrl"), url}, {QStringLiteral("AttributeNames"), names}});
        if (!reply.ok) {
            *error = describe(reply, QStringLiteral("reading the counts of %1").arg(name));
            return std::nullopt;
        }
        const QJsonObject attributes = reply.body.value(QLatin1String("Attributes")).toObject();
        const auto number = [&attributes](const char *key) { return attributes.value(QLatin1String(key)).toString().toLongLong(); };
        if (name == location().name) {
            counts.ready = number("ApproximateNumberOfMessages");
            counts.inFlight = number("ApproximateNumberOfMessagesNotVisible");
            counts.delayed = number("ApproximateNumberOfMessagesDelayed");
        } else {
            counts.dead = number("ApproximateNumberOfMessages") + number("ApproximateNumberOfMessagesNotVisible");
        }
    }
    // No oldest age: SQS reports it only to CloudWatch. Left unset, it reads "not
    // reported by the broker" wherever messages wait.
    return counts;
}

DeadLetter SqsQueue::deadLetterOf(const Received &received)
{
    DeadLetter letter;
    letter.id = received.message.id;
    letter.payload = received.message.payload;
    letter.redriveCount = received.message.redriveCount;
    letter.enqueuedAtMs = received.message.enqueuedAtMs;
    const QJsonObject account = QJsonDocument::fromJson(attributeText(received.attributes, attribute::DeadLetter).toUtf8()).object();
    if (account.isEmpty()) {
        // SQS moved it here itself: received too often without being settled.
        letter.errorClass = QStringLiteral("max-receives");
        letter.lastError = QStringLiteral("received more often than the queue's redrive policy allows, without being settled");
        letter.receiveCount = received.message.delivery;
        letter.deadAtMs = received.systemAttributes.value(QLatin1String("DeadLetterQueueSourceArn")).isString()
                              ? received.systemAttributes.value(QLatin1String("SentTimestamp")).toString().toLongLong()
                              : 0;
        if (const auto parsed = parseReminder(letter.payload); parsed.reminder) {
            letter.sendKey = parsed.reminder->sendKey;
            letter.eventId = parsed.reminder->eventId;
        }
        return letter;
    }
    readDeadLetterAccount(account, &letter);
    return letter;
}

std::optional<QList<DeadLetter>> SqsQueue::deadLetters(int limit, QString *error)
{
    return takeDeadLetters(std::min(limit, MaxListedDeadLetters), [](const DeadLetter &) { return false; }, Take::List, error);
}

std::optional<QList<DeadLetter>> SqsQueue::redrive(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeDeadLetters(max, select, Take::Redrive, error);
}

std::optional<QList<DeadLetter>> SqsQueue::discard(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeDeadLetters(max, select, Take::Discard, error);
}

// SQS has no peek: a dead letter is listed by receiving it, which hides it from others for
// ListingVisibilitySeconds and counts a receive on the dead-letter queue (which has no
// redrive policy of its own, so nothing else follows), then releasing it. What select
// takes is sent back to the main queue (redrive) or not (discard), and only then deleted
// from the dead letters.
std::optional<QList<DeadLetter>> SqsQueue::takeDeadLetters(int max, const std::function<bool(const DeadLetter &)> &select,
                                                           Take take, QString *error)
{
    const QString deadUrl = queueUrl(sqsDeadLetterQueueName(location().name), error);
    if (deadUrl.isEmpty())
        return std::nullopt;
    QList<DeadLetter> listed;
    QList<DeadLetter> taken;
    QList<QByteArray> takenHandles;
    QList<QPair<QByteArray, int>> release;
    QList<QJsonObject> resend;
    QSet<QString> seen;
    QString failure;
    while (listed.size() < max) {
        const auto received = receive(deadUrl, MaxBatch, ListingVisibilitySeconds, 0, &failure);
        if (!received)
            break;
        if (received->isEmpty())
            break;
        for (const Received &one : *received) {
            if (seen.contains(one.sqsMessageId)) {
                release.append({one.receiptHandle, 0});
                continue;
            }
            seen.insert(one.sqsMessageId);
            const DeadLetter letter = deadLetterOf(one);
            listed.append(letter);
            if (!select(letter)) {
                release.append({one.receiptHandle, 0});
                continue;
            }
            taken.append(letter);
            takenHandles.append(one.receiptHandle);
            if (take == Take::Redrive)
                resend.append(messageEntry(letter.payload,
                                           {{attribute::Id, stringAttribute(letter.id)},
                                            {attribute::Redrives, numberAttribute(letter.redriveCount + 1)},
                                            {attribute::EnqueuedAt, numberAttribute(letter.enqueuedAtMs ? letter.enqueuedAtMs : nowMs())}}));
        }
    }
    QString releaseError;
    // Released whatever happened: a failed listing must not hide the letters for long.
    if (!release.isEmpty() && !changeVisibility(deadUrl, release, &releaseError))
        qCWarning(lcSqsQueue, "%s", qPrintable(releaseError));
    if (!failure.isEmpty()) {
        *error = failure;
        return std::nullopt;
    }
    if (take == Take::List)
        return listed;
    if (taken.isEmpty())
        return taken;
    // Sent back before it is deleted: a crash between the two leaves a copy in both, and
    // the ledger answers the second delivery.
    if (take == Take::Redrive) {
        const QString url = queueUrl(location().name, error);
        if (url.isEmpty() || !send(url, resend, error))
            return std::nullopt;
    }
    if (!deleteMessages(deadUrl, takenHandles, error))
        return std::nullopt;
    return taken;
}

} // namespace once
