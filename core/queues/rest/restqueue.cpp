#include "queues/rest/restqueue.h"

#include "http/blockinghttpclient.h"
#include "http/pemfiles.h"
#include "http/retryafter.h"
#include "model/clock.h"
#include "model/reminder.h"
#include "queues/rest/restlocation.h"
#include "text/jsonvalues.h"
#include "text/quotedtext.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QLoggingCategory>
#include <QSet>
#include <QThread>
#include <QUrlQuery>
#include <QUuid>

#include <algorithm>
#include <limits>

namespace once {

Q_LOGGING_CATEGORY(lcRestQueue, "once.queues.rest")

namespace {

// once serve's limits (docs/http-api.md): a publish_batch holds at most 500 messages in
// a request body of at most 8 MiB, as sent (payloads escaped as JSON strings), a consume
// at most 100, a dead-letter listing at most 100000.
constexpr int MaxBatchMessages = 500;
constexpr qsizetype MaxBatchRequestBytes = 8 * 1024 * 1024;
constexpr int MaxConsumeMessages = 100;
// What one consumed message may take in the answer: its payload of at most 256 KiB twice
// (as text and as the body object), each at most doubled by escaping, and its fields. A
// consume answer is refused unread beyond this for every message asked for, plus the
// first again (the answer's `message`) and the envelope.
constexpr qint64 MaxConsumedMessageBytes = 4 * 256 * 1024 + 16 * 1024;
constexpr qint64 ConsumeEnvelopeBytes = 64 * 1024;
// A dead-letter listing may be long; the answer is the API's own, not a partner's.
constexpr qint64 MaxAnswerBytes = 256 * 1024 * 1024;
constexpr int MaxListedDeadLetters = 100000;
// The largest page `once serve` answers (QueueServer::MaxDeadLetterPage).
constexpr int DeadLetterPage = 1000;
constexpr int CallTimeoutMs = 10000;
// How often a publish or a settlement is tried before it is reported as failed, and the
// longest Retry-After either waits out on the caller's thread.
constexpr int Tries = 3;
constexpr qint64 MaxPublishWaitMs = 30000;
constexpr qint64 MaxSettleWaitMs = 5000;
// A 429 or 503 without a Retry-After: ask again after this.
constexpr qint64 DefaultRetryAfterMs = 1000;
// The longest a worker stops consuming for one Retry-After: parseRetryAfterMs allows a
// partner a day, but one queue answer (a maintenance page's date in 9999, a server's
// bug) must not stop a worker for that long. Asking again after five minutes costs one
// call.
constexpr qint64 MaxBusyWaitMs = 5 * 60 * 1000;
// With stats forbidden, while the queue asks to wait: nothing can be seen, so nothing
// is idle. A year, for the engine's quiet before it calls a queue that cannot count idle.
constexpr qint64 HiddenWhileBusyMs = 365LL * 24 * 3600 * 1000;

qint64 timeField(const QJsonObject &object, const QString &field)
{
    const auto time = parseRfc3339(object.value(field).toString());
    return time ? time->utc.toMSecsSinceEpoch() : 0;
}

std::optional<qint64> secondsField(const QJsonObject &object, const QString &field)
{
    const QJsonValue value = object.value(field);
    if (!value.isDouble())
        return std::nullopt;
    return qint64(value.toDouble() * 1000.0);
}

DeadLetter deadLetterFromJson(const QJsonObject &row)
{
    DeadLetter letter;
    letter.id = row.value(QLatin1String("message_id")).toString();
    letter.payload = row.value(QLatin1String("payload")).toString().toUtf8();
    letter.sendKey = row.value(QLatin1String("key")).toString().toLatin1();
    letter.eventId = row.value(QLatin1String("event_id")).toString();
    letter.errorClass = row.value(QLatin1String("error_class")).toString();
    letter.lastError = row.value(QLatin1String("last_error")).toString();
    letter.attempts = row.value(QLatin1String("attempts")).toInt();
    letter.receiveCount = row.value(QLatin1String("deliveries")).toInt();
    letter.redriveCount = row.value(QLatin1String("redrives")).toInt();
    letter.firstAttemptAtMs = timeField(row, QStringLiteral("first_attempt_at"));
    letter.lastAttemptAtMs = timeField(row, QStringLiteral("last_attempt_at"));
    letter.deadAtMs = timeField(row, QStringLiteral("dead_at"));
    letter.enqueuedAtMs = timeField(row, QStringLiteral("enqueued_at"));
    return letter;
}

} // namespace

RestQueue::RestQueue(QueueLocation location, QByteArray token, const QSslConfiguration &tls)
    : BrokerQueue(std::move(location)), m_token(std::move(token)), m_http(std::make_unique<BlockingHttpClient>(tls))
{
}

RestQueue::~RestQueue() = default;

std::unique_ptr<RestQueue> RestQueue::connect(const QueueLocation &location, QString *error)
{
    QSslConfiguration tls = QSslConfiguration::defaultConfiguration();
    if (const QString &caFile = restDetails(location).caFile; !caFile.isEmpty()) {
        const auto certificates = readPemCertificates(caFile, error);
        if (!certificates) {
            *error = QStringLiteral("the REST queue's ca=: ") + *error;
            return nullptr;
        }
        tls.setCaCertificates(*certificates);
    }
    // A password typed into the console travels as the URL's; the command line reads the
    // environment, so the token is never on a command line for ps to show.
    QByteArray token = location.password.toUtf8();
    if (token.isEmpty())
        token = qgetenv("ONCE_QUEUE_TOKEN");
    // Nothing to connect yet: the first call opens the connection, and says if it cannot.
    return std::unique_ptr<RestQueue>(new RestQueue(location, std::move(token), tls));
}

RestQueue::Reply RestQueue::call(const QByteArray &method, const QString &endpoint, const QJsonObject &body,
                                 const QList<QPair<QString, QString>> &query)
{
    return call(method, endpoint, method == "GET" ? QByteArray() : QJsonDocument(body).toJson(QJsonDocument::Compact),
                query, MaxAnswerBytes);
}

RestQueue::Reply RestQueue::call(const QByteArray &method, const QString &endpoint, const QByteArray &body,
                                 const QList<QPair<QString, QString>> &query, qint64 maxAnswerBytes)
{
    HttpRequest request;
    request.url = restDetails(location()).apiUrl;
    request.url.setPath(request.url.path() + endpoint);
    QUrlQuery urlQuery;
    for (const auto &[name, value] : query)
        urlQuery.addQueryItem(name, QString::fromLatin1(QUrl::toPercentEncoding(value)));
    request.url.setQuery(urlQuery);
    request.method = method;
    request.timeoutMs = CallTimeoutMs;
    request.maxResponseBodyBytes = maxAnswerBytes;
    if (method != "GET") {
        request.body = body;
        request.headers.append(qMakePair(QByteArray("Content-Type"), QByteArray("application/json")));
    }
    if (!m_token.isEmpty())
        request.headers.append(qMakePair(QByteArray("Authorization"), QByteArray("Bearer " + m_token)));
    const HttpResult result = m_http->send(request);
    Reply reply;
    switch (result.status) {
    case HttpResult::Status::NotSent:
        reply.outcome = Reply::Outcome::NotSent;
        reply.message = result.error;
        return reply;
    case HttpResult::Status::InDoubt:
        reply.outcome = Reply::Outcome::InDoubt;
        reply.message = result.error;
        return reply;
    case HttpResult::Status::Response:
        break;
    }
    reply.httpStatus = result.httpStatus;
    const QJsonDocument document = QJsonDocument::fromJson(result.body);
    reply.body = document.object();
    if (result.httpStatus >= 200 && result.httpStatus < 300 && document.isObject()) {
        reply.outcome = Reply::Outcome::Ok;
        return reply;
    }
    const QJsonObject error = reply.body.value(QLatin1String("error")).toObject();
    reply.code = error.value(QLatin1String("code")).toString();
    reply.message = error.value(QLatin1String("message")).toString();
    if (reply.message.isEmpty())
        reply.message = result.httpStatus >= 200 && result.httpStatus < 300
                            ? QStringLiteral("the answer is not a JSON object")
                            : QString::fromUtf8(result.body.left(200));
    if (result.httpStatus == 429 || result.httpStatus == 503) {
        reply.outcome = Reply::Outcome::Busy;
        reply.retryAfterMs = parseRetryAfterMs(result.header("Retry-After"), nowMs()).value_or(DefaultRetryAfterMs);
        return reply;
    }
    reply.outcome = Reply::Outcome::Refused;
    return reply;
}

QString RestQueue::describe(const Reply &reply, const QString &what) const
{
    QString why;
    switch (reply.outcome) {
    case Reply::Outcome::Ok:
        why = QStringLiteral("no error");
        break;
    case Reply::Outcome::NotSent:
        why = QStringLiteral("not reachable: ") + reply.message;
        // The certificate was refused (the client's own words start so): a server with its
        // own certificate is trusted by naming it, never by turning verification off.
        if (reply.message.startsWith(QLatin1String("TLS handshake")) && restDetails(location()).caFile.isEmpty())
            why += QStringLiteral(" (a server whose certificate is its own or a private CA's: add &ca=FILE to the "
                                  "queue URL, FILE the PEM of the CA)");
        break;
    case Reply::Outcome::InDoubt:
        why = QStringLiteral("no answer: ") + reply.message;
        break;
    case Reply::Outcome::Busy:
    case Reply::Outcome::Refused:
        why = QStringLiteral("HTTP %1%2: %3")
                  .arg(QString::number(reply.httpStatus),
                       reply.code.isEmpty() ? QString() : QString(QLatin1Char(' ') + reply.code), reply.message);
        if (reply.httpStatus == 401)
            why += QStringLiteral(" (set ONCE_QUEUE_TOKEN to a token of the queue)");
        break;
    }
    QString line = asOneLine(QStringLiteral("%1 at the REST queue %2: %3").arg(what, location().displayName(), why));
    // A server or a proxy in between may echo the request's Authorization header.
    if (!m_token.isEmpty())
        line.replace(QString::fromUtf8(m_token), QStringLiteral("[token]"));
    return line;
}

bool RestQueue::waitOut(const Reply &reply, qint64 capMs)
{
    if (reply.retryAfterMs > capMs)
        return false;
    // A short, bounded wait on the caller's thread: the queue asked for it, and asking
    // again sooner would only be refused again.
    QThread::msleep(quint64(std::max<qint64>(reply.retryAfterMs, 0)));
    return true;
}

bool RestQueue::declareTopology(const QueueTopology &, QString *error)
{
    // Nothing to declare: the server owns its queue. Checks that it serves this one.
    const Reply reply = call("GET", QStringLiteral("/queue/stats"), {}, {{QStringLiteral("queue"), location().name}});
    if (reply.outcome == Reply::Outcome::Ok)
        return true;
    if (reply.code == QLatin1String("unknown_queue"))
        *error = QStringLiteral("the REST queue server at %1 serves no queue named %2")
                     .arg(restDetails(location()).apiUrl.toString(QUrl::RemoveUserInfo), location().name);
    else if (reply.httpStatus == 404)
        *error = QStringLiteral("%1 has no REST queue API (HTTP 404 for %2/queue/stats)")
                     .arg(location().displayName(), restDetails(location()).apiUrl.path());
    else
        *error = describe(reply, QStringLiteral("checking the queue"));
    return false;
}

bool RestQueue::enqueue(const QList<OutgoingMessage> &messages, QString *error)
{
    // The API carries payloads as JSON text: bytes that are not UTF-8 would arrive with
    // U+FFFD in their place, as another message. Refused here, before anything is sent.
    for (qsizetype i = 0; i < messages.size(); ++i) {
        if (!QUtf8StringView(messages.at(i).payload).isValidUtf8()) {
            *error = QStringLiteral("message %1 is not UTF-8 text, which the REST queue %2 cannot carry; nothing "
                                    "was published")
                         .arg(QString::number(i + 1), location().displayName());
            return false;
        }
    }
    // The batches are cut by the request's size as it goes out: a payload full of quotes
    // or backslashes doubles when escaped, and a bound on the payloads' own size let such
    // batches reach the server's 8 MiB limit (413 for the whole batch).
    const QByteArray head = "{\"messages\":[";
    const QByteArray tail =
        "]," + QJsonDocument(QJsonObject{{QStringLiteral("queue"), location().name}}).toJson(QJsonDocument::Compact).mid(1);
    QByteArray body = head;
    qsizetype first = 0;
    int count = 0;
    for (qsizetype i = 0; i < messages.size(); ++i) {
        const OutgoingMessage &message = messages.at(i);
        // The key is made once, before the first try: a retry after an answer that never
        // came is then turned away as a duplicate instead of adding a copy.
        const QByteArray entry = QJsonDocument(QJsonObject{
                                                   {QStringLiteral("payload"), QString::fromUtf8(message.payload)},
                                                   {QStringLiteral("delay_seconds"), wholeSecondsUp(message.delayMs)},
                                                   {QStringLiteral("idempotency_key"),
                                                    QUuid::createUuid().toString(QUuid::WithoutBraces)},
                                               })
                                     .toJson(QJsonDocument::Compact);
        // A message too large for any batch goes alone: the server says what is wrong with it.
        if (count > 0
            && (count == MaxBatchMessages || body.size() + 1 + entry.size() + tail.size() > MaxBatchRequestBytes)) {
            if (!publishBatch(body + tail, first, count, error))
                return false;
            body = head;
            first = i;
            count = 0;
        }
        if (count > 0)
            body += ',';
        body += entry;
        ++count;
    }
    return count == 0 || publishBatch(body + tail, first, count, error);
}

// body holds messages first .. first + count - 1 of the caller's list.
bool RestQueue::publishBatch(const QByteArray &body, qsizetype first, qsizetype count, QString *error)
{
    Reply reply;
    for (int attempt = 1; attempt <= Tries; ++attempt) {
        reply = call("POST", QStringLiteral("/queue/publish_batch"), body, {}, MaxAnswerBytes);
        const bool again = reply.outcome == Reply::Outcome::NotSent || reply.outcome == Reply::Outcome::InDoubt
                           || (reply.outcome == Reply::Outcome::Busy && waitOut(reply, MaxPublishWaitMs));
        if (!again || attempt == Tries)
            break;
        qCInfo(lcRestQueue, "%s", qPrintable(describe(reply, QStringLiteral("publishing; trying again"))));
    }
    if (reply.outcome != Reply::Outcome::Ok) {
        *error = describe(reply, QStringLiteral("publishing %1 messages").arg(count));
        return false;
    }
    // Every entry answers for itself: the first refused one is the error.
    const QJsonArray results = reply.body.value(QLatin1String("results")).toArray();
    for (qsizetype i = 0; i < results.size(); ++i) {
        const QJsonObject refused = results.at(i).toObject().value(QLatin1String("error")).toObject();
        if (refused.isEmpty())
            continue;
        Reply entry;
        entry.outcome = Reply::Outcome::Refused;
        entry.httpStatus = results.at(i).toObject().value(QLatin1String("status")).toInt();
        entry.code = refused.value(QLatin1String("code")).toString();
        entry.message = refused.value(QLatin1String("message")).toString();
        *error = describe(entry, QStringLiteral("publishing message %1").arg(first + i + 1));
        return false;
    }
    return true;
}

QList<QueueMessage> RestQueue::lease(int max, qint64 leaseMs, const QString &, QString *error)
{
    QList<QueueMessage> leased;
    if (nowMs() < m_busyUntilMs)
        return leased;
    // No long polling: the engine's turn also settles and records, and it polls an idle
    // queue on its own schedule.
    const int asked = std::clamp(max, 1, MaxConsumeMessages);
    const QJsonObject request{{QStringLiteral("queue"), location().name},
                              {QStringLiteral("max_messages"), asked},
                              {QStringLiteral("visibility_timeout"), std::max<qint64>(1, wholeSecondsUp(leaseMs))},
                              {QStringLiteral("wait_seconds"), 0}};
    const Reply reply = call("POST", QStringLiteral("/queue/consume"), QJsonDocument(request).toJson(QJsonDocument::Compact),
                             {}, (asked + 1) * MaxConsumedMessageBytes + ConsumeEnvelopeBytes);
    if (reply.outcome == Reply::Outcome::Busy) {
        const qint64 waitMs = std::min(reply.retryAfterMs, MaxBusyWaitMs);
        m_busyUntilMs = nowMs() + waitMs;
        if (!m_busyLogged) {
            const QString capped = waitMs < reply.retryAfterMs
                                       ? QStringLiteral(" (it asked for %1 s; a queue is waited %2 s at most)")
                                             .arg(QString::number(wholeSecondsUp(reply.retryAfterMs)),
                                                  QString::number(wholeSecondsUp(MaxBusyWaitMs)))
                                       : QString();
            qCWarning(lcRestQueue, "%s; consuming nothing for %d s%s (said once until the queue answers again)",
                      qPrintable(describe(reply, QStringLiteral("the queue asks to wait"))), wholeSecondsUp(waitMs),
                      qPrintable(capped));
        }
        m_busyLogged = true;
        return leased;
    }
    if (reply.outcome != Reply::Outcome::Ok) {
        *error = describe(reply, QStringLiteral("consuming"));
        return leased;
    }
    if (m_busyLogged)
        qCInfo(lcRestQueue, "the REST queue %s answers again", qPrintable(location().displayName()));
    m_busyLogged = false;
    const QJsonValue messages = reply.body.value(QLatin1String("messages"));
    const auto malformed = [&](const QString &why) {
        *error = asOneLine(QStringLiteral("consuming at the REST queue %1: the answer is malformed (%2); nothing "
                                          "was taken, and what it leased comes back when its lease ends")
                               .arg(location().displayName(), why));
        return QList<QueueMessage>();
    };
    if (!messages.isArray())
        return malformed(QStringLiteral("no messages list"));
    const QJsonArray rows = messages.toArray();
    // Whatever it sent beyond what was asked for is not ours to work on: it is neither
    // taken nor given back (a nack would count as a delivery), and comes back when the
    // lease the server gave it ends.
    if (rows.size() > asked)
        qCWarning(lcRestQueue, "the REST queue %s answered %lld messages to a consume of %d: took the first %d, "
                               "the other %lld come back when their lease ends",
                  qPrintable(location().displayName()), qint64(rows.size()), asked, asked,
                  qint64(rows.size() - asked));
    QList<std::pair<QString, QString>> deliveryIds; // what settling each needs
    for (qsizetype i = 0; i < std::min<qsizetype>(rows.size(), asked); ++i) {
        const QJsonObject row = rows.at(i).toObject();
        QueueMessage message;
        message.id = row.value(QLatin1String("message_id")).toString();
        const QJsonValue payload = row.value(QLatin1String("payload"));
        const QJsonValue body = row.value(QLatin1String("body"));
        const auto leaseUntil = parseRfc3339(row.value(QLatin1String("lease_until")).toString());
        const qint64 delivery = row.value(QLatin1String("receive_count")).toInteger(0);
        const QString deliveryId = row.value(QLatin1String("id")).toString();
        // Each of these settles the message or tells when its lease ends: without one, the
        // delivery could never be acked, or would look expired and never be sent.
        QString missing;
        if (message.id.isEmpty())
            missing = QStringLiteral("message_id");
        else if (deliveryId.isEmpty())
            missing = QStringLiteral("id");
        else if (delivery < 1 || delivery > std::numeric_limits<int>::max())
            missing = QStringLiteral("receive_count");
        else if (!leaseUntil)
            missing = QStringLiteral("lease_until");
        else if (!payload.isString() && !body.isObject())
            missing = QStringLiteral("payload");
        if (!missing.isEmpty())
            return malformed(QStringLiteral("message %1 of %2 has no valid %3")
                                 .arg(QString::number(i + 1), QString::number(rows.size()), missing));
        message.payload = payload.isString() ? payload.toString().toUtf8()
                                             : QJsonDocument(body.toObject()).toJson(QJsonDocument::Compact);
        message.delivery = int(delivery);
        message.enqueuedAtMs = timeField(row, QStringLiteral("enqueued_at"));
        message.leaseUntilMs = leaseUntil->utc.toMSecsSinceEpoch();
        message.redriveCount = row.value(QLatin1String("redrive_count")).toInt();
        deliveryIds.append({heldKey(message.id, message.delivery), deliveryId});
        leased.append(std::move(message));
    }
    // Only a whole answer is taken: a malformed one above leaves nothing behind.
    for (const auto &[held, id] : std::as_const(deliveryIds))
        m_deliveryIds.insert(held, id);
    return leased;
}

bool RestQueue::settle(const QList<Settlement> &settlements, QString *error)
{
    for (const auto &settlement : settlements) {
        if (!settleOne(settlement, error))
            return false;
    }
    return true;
}

bool RestQueue::settleOne(const Settlement &settlement, QString *error)
{
    // A delivery this queue object did not lease (or settled already) has no id here: it
    // is no longer ours to settle, as the server would answer.
    const QString held = heldKey(settlement.messageId, settlement.delivery);
    const QString deliveryId = m_deliveryIds.value(held);
    if (deliveryId.isEmpty()) {
        qCInfo(lcRestQueue, "delivery %s was not leased here, or was settled already", qPrintable(held));
        return true;
    }
    QJsonObject body{{QStringLiteral("queue"), location().name}, {QStringLiteral("message_id"), deliveryId}};
    QString endpoint;
    switch (settlement.kind) {
    case Settlement::Kind::Ack:
        endpoint = QStringLiteral("/queue/ack");
        break;
    case Settlement::Kind::Retry:
        endpoint = QStringLiteral("/queue/nack");
        body.insert(QStringLiteral("delay_seconds"), wholeSecondsUp(settlement.delayMs));
        break;
    case Settlement::Kind::DeadLetter: {
        const DeadLetterInfo &info = settlement.deadLetter;
        endpoint = QStringLiteral("/queue/dead_letter");
        body.insert(QStringLiteral("error_class"), info.errorClass);
        body.insert(QStringLiteral("last_error"), info.lastError.left(4096));
        body.insert(QStringLiteral("attempts"), info.attempts);
        if (info.firstAttemptAtMs)
            body.insert(QStringLiteral("first_attempt_at"), formatTime(info.firstAttemptAtMs));
        if (info.lastAttemptAtMs)
            body.insert(QStringLiteral("last_attempt_at"), formatTime(info.lastAttemptAtMs));
        break;
    }
    }
    // Settling twice is safe: the second finds the delivery settled (lease_lost). So a
    // settlement whose answer was lost is simply tried again.
    Reply reply;
    for (int attempt = 1; attempt <= Tries; ++attempt) {
        reply = call("POST", endpoint, body);
        const bool again = reply.outcome == Reply::Outcome::NotSent || reply.outcome == Reply::Outcome::InDoubt
                           || (reply.outcome == Reply::Outcome::Busy && waitOut(reply, MaxSettleWaitMs));
        if (!again)
            break;
    }
    if (reply.outcome == Reply::Outcome::Ok) {
        m_deliveryIds.remove(held);
        return true;
    }
    // The lease went to another consumer: this delivery's settlement no longer counts.
    if (reply.code == QLatin1String("lease_lost")) {
        m_deliveryIds.remove(held);
        qCInfo(lcRestQueue, "delivery %s.%d was no longer ours to settle", qPrintable(settlement.messageId),
               settlement.delivery);
        return true;
    }
    *error = describe(reply, QStringLiteral("settling message %1").arg(settlement.messageId));
    return false;
}

std::optional<QueueCounts> RestQueue::counts(QString *error)
{
    // A consumer's token may not read stats (403). Its worker still needs counts for
    // --until-idle: the backlog is then unknown, and the engine calls the queue idle once a
    // whole lease has passed with nothing to consume, as for a queue that cannot count.
    // What waits at the server with a delay is not seen then until it is due.
    const auto unknown = [this] {
        QueueCounts counts;
        counts.backlogUnknown = true;
        counts.unavailable = QStringLiteral("the token's role may not read the queue's stats (HTTP 403 forbidden)");
        if (nowMs() < m_busyUntilMs)
            counts.hiddenUpToMs = HiddenWhileBusyMs;
        return counts;
    };
    if (m_statsForbidden)
        return unknown();
    const Reply reply = call("GET", QStringLiteral("/queue/stats"), {}, {{QStringLiteral("queue"), location().name}});
    if (reply.httpStatus == 403 && reply.outcome == Reply::Outcome::Refused) {
        m_statsForbidden = true;
        qCInfo(lcRestQueue, "%s; the backlog is unknown then, and --until-idle ends once a whole lease has passed "
                            "with nothing consumed",
               qPrintable(describe(reply, QStringLiteral("reading the counts"))));
        return unknown();
    }
    if (reply.outcome != Reply::Outcome::Ok) {
        *error = describe(reply, QStringLiteral("reading the counts"));
        return std::nullopt;
    }
    const QJsonObject &stats = reply.body;
    QueueCounts counts;
    counts.ready = stats.value(QLatin1String("ready")).toInteger();
    counts.inFlight = stats.value(QLatin1String("in_flight")).toInteger();
    counts.delayed = stats.value(QLatin1String("delayed")).toInteger();
    counts.dead = stats.value(QLatin1String("dead")).toInteger();
    if (counts.ready > 0)
        counts.oldestReadyAgeMs = secondsField(stats, QStringLiteral("oldest_ready_age_s"));
    counts.nextVisibleInMs = secondsField(stats, QStringLiteral("next_visible_in_s"));
    counts.nextDelayedInMs = secondsField(stats, QStringLiteral("next_delayed_in_s"));
    if (stats.contains(QLatin1String("delayed_retries")))
        counts.delayedRetries = stats.value(QLatin1String("delayed_retries")).toInteger();
    return counts;
}

// The server answers a page at a time (at most DeadLetterPage letters, and fewer when
// they are large): the pages are followed until the limit or the last one.
std::optional<QList<DeadLetter>> RestQueue::deadLetters(int limit, QString *error)
{
    limit = std::clamp(limit, 1, MaxListedDeadLetters);
    QList<DeadLetter> letters;
    QString after;
    while (letters.size() < limit) {
        QList<QPair<QString, QString>> query{
            {QStringLiteral("queue"), location().name},
            {QStringLiteral("limit"), QString::number(std::min<qsizetype>(DeadLetterPage, limit - letters.size()))}};
        if (!after.isEmpty())
            query.append({QStringLiteral("after"), after});
        const Reply reply = call("GET", QStringLiteral("/queue/dead_letters"), {}, query);
        if (reply.outcome != Reply::Outcome::Ok) {
            *error = describe(reply, QStringLiteral("listing the dead letters"));
            return std::nullopt;
        }
        const QJsonArray rows = reply.body.value(QLatin1String("dead_letters")).toArray();
        for (const auto &row : rows)
            letters.append(deadLetterFromJson(row.toObject()));
        after = reply.body.value(QLatin1String("next_after")).toString();
        if (after.isEmpty() || rows.isEmpty())
            break;
    }
    return letters;
}

std::optional<QList<DeadLetter>> RestQueue::redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                                    QString *error)
{
    return takeDeadLetters(QStringLiteral("/queue/dlq/redrive"), max, select, error);
}

std::optional<QList<DeadLetter>> RestQueue::discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                                    QString *error)
{
    return takeDeadLetters(QStringLiteral("/queue/dlq/discard"), max, select, error);
}

// The server moves (or drops) the letters named by id, in its own transactions and
// audited under this token's name; the letters it no longer had are not returned.
std::optional<QList<DeadLetter>> RestQueue::takeDeadLetters(const QString &endpoint, int max,
                                                            const std::function<bool(const DeadLetter &)> &select,
                                                            QString *error)
{
    const auto head = deadLetters(max, error);
    if (!head)
        return std::nullopt;
    QList<DeadLetter> selected;
    QJsonArray ids;
    for (const auto &letter : *head) {
        if (select(letter)) {
            selected.append(letter);
            ids.append(letter.id);
        }
    }
    if (selected.isEmpty())
        return selected;
    // Never repeated on its own: a redrive whose answer was lost may have happened.
    const Reply reply = call("POST", endpoint, {{QStringLiteral("queue"), location().name}, {QStringLiteral("ids"), ids}});
    if (reply.outcome != Reply::Outcome::Ok) {
        *error = describe(reply, endpoint.endsWith(QLatin1String("redrive")) ? QStringLiteral("redriving")
                                                                             : QStringLiteral("discarding"));
        return std::nullopt;
    }
    const qint64 taken = reply.body.value(QLatin1String("redriven")).toInteger(
        reply.body.value(QLatin1String("discarded")).toInteger());
    if (taken == selected.size())
        return selected;
    // Some were gone already (another operator): those still listed were not taken either.
    const auto still = deadLetters(MaxListedDeadLetters, error);
    if (!still)
        return std::nullopt;
    QSet<QString> left;
    for (const auto &letter : *still)
        left.insert(letter.id);
    selected.removeIf([&left](const DeadLetter &letter) { return left.contains(letter.id); });
    return selected;
}

} // namespace once
