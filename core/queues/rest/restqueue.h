#pragma once

#include "queues/brokerqueue.h"

#include <QJsonObject>
#include <QSslConfiguration>

#include <memory>

namespace once {

class BlockingHttpClient;
struct HttpRequest;
struct HttpResult;

// A queue behind a REST API (once serve's, docs/http-api.md): publish_batch, consume,
// ack / nack / dead_letter, stats, dead_letters and dlq/redrive|discard, each a JSON call
// with the bearer token from ONCE_QUEUE_TOKEN (or the URL's password, as the console
// passes a typed one). The ledger stays in the store; the server keeps the leases.
//
// A message's id is the server's message id and the delivery number its receive count;
// settling names both, so a settlement from a lease the server gave to another consumer
// is refused there (lease_lost) and ignored here, as the BrokerQueue contract says.
//
// A publish is never sent twice without its idempotency keys: every message gets one
// before the first try, so a retry after an answer that never came cannot add a copy.
// 429 and 503 from the queue itself are honoured: lease() returns nothing until the
// Retry-After has passed (five minutes at most), and says so in the log once per wait.
//
// A consume answer is the server's word on what this worker now holds, so it is bounded
// before it is read (a budget per message asked for) and checked after: messages beyond
// those asked for are left to come back when their lease ends, and a message without
// what settles it (its id, receive count and lease) makes the whole answer malformed.
//
// A token whose role may not read stats (a consumer's) still lets a worker run
// --until-idle: counts() then reports the backlog unknown, and the engine decides from
// what consume answers, as for a queue that cannot count.
class RestQueue final : public BrokerQueue
{
public:
    static std::unique_ptr<RestQueue> connect(const QueueLocation &location, QString *error);
    ~RestQueue() override;

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;

    bool declareTopology(const QueueTopology &topology, QString *error) override;
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override;
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;

private:
    // One call's answer, as far as it came.
    struct Reply
    {
        enum class Outcome
        {
            Ok,       // 2xx with a JSON object
            Refused,  // any other answer: code and message say why
            Busy,     // 429 or 503: retryAfterMs says when to ask again
            NotSent,  // nothing reached the server
            InDoubt,  // the request went out and no answer came back
        };
        Outcome outcome = Outcome::NotSent;
        int httpStatus = 0;
        QJsonObject body;
        QString code;    // the API's error code ("lease_lost", "unknown_queue")
        QString message; // one line, for errors
        qint64 retryAfterMs = 0;
    };

    RestQueue(QueueLocation location, QByteArray token, const QSslConfiguration &tls);

    Reply call(const QByteArray &method, const QString &endpoint, const QJsonObject &body = {},
               const QList<QPair<QString, QString>> &query = {});
    // body: the request's JSON text as it goes out; an answer over maxAnswerBytes is refused
    // unread (InDoubt, in the client's words).
    Reply call(const QByteArray &method, const QString &endpoint, const QByteArray &body,
               const QList<QPair<QString, QString>> &query, qint64 maxAnswerBytes);
    // The reply as an error line naming the queue; never holds the token.
    QString describe(const Reply &reply, const QString &what) const;
    // Waits out a Busy reply's Retry-After, at most capMs; false if it asks for longer.
    bool waitOut(const Reply &reply, qint64 capMs);
    bool publishBatch(const QByteArray &body, qsizetype first, qsizetype count, QString *error);
    bool settleOne(const Settlement &settlement, QString *error);
    std::optional<QList<DeadLetter>> takeDeadLetters(const QString &endpoint, int max,
                                                     const std::function<bool(const DeadLetter &)> &select,
                                                     QString *error);

    QByteArray m_token;
    std::unique_ptr<BlockingHttpClient> m_http;
    // The delivery id consume gave each leased message ("41.1.9f0c..."), by message id and
    // receive count: settling names the lease by it, as the server lets its holder only.
    static QString heldKey(const QString &messageId, int delivery)
    {
        return messageId + QLatin1Char('.') + QString::number(delivery);
    }
    QHash<QString, QString> m_deliveryIds;
    qint64 m_busyUntilMs = 0; // lease() asks nothing before this
    bool m_busyLogged = false;
    bool m_statsForbidden = false; // the token's role may not read stats: counts() asks no more
};

} // namespace once
