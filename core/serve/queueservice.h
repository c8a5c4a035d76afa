#pragma once

#include "serve/apierror.h"
#include "operator/inspector.h"
#include "partners/partnerevents.h"
#include "queues/messagequeue.h"

#include <QJsonObject>
#include <QMutex>
#include <QObject>

#include <functional>
#include <memory>
#include <optional>

namespace once {

class Store;

// An answer of the HTTP API: a status and a JSON body, or an error.
struct ApiReply
{
    int status = 200;
    QJsonObject body;
    int retryAfterSeconds = 0; // > 0: sent as Retry-After
    // A body that is not JSON (GET /metrics), sent as it is with this content type.
    QByteArray text;
    QByteArray textType;

    static ApiReply ok(const QJsonObject &body) { return {200, body, 0, {}, {}}; }
    static ApiReply okText(const QByteArray &text, const QByteArray &type) { return {200, {}, 0, text, type}; }
    static ApiReply failed(const ApiError &error);
};

// One message of a publish, already validated as a reminder on the way in.
struct PublishEntry
{
    OutgoingMessage message;
    QString idempotencyKey; // empty: none
    // Whose key it is: the token's name ('' without tokens). Two producers' keys never
    // meet, whatever their text.
    QString producer;
};

struct PublishResult
{
    QString messageId;
    bool duplicate = false; // the key was seen within 24 h: messageId is the first one's
    // The producer used the key within 24 h for a different message: nothing was
    // published, and messageId is empty.
    bool keyReused = false;
};

// A delivery as consume hands it out: the message id, its receive count and a secret
// drawn for that lease ("41.1.9f0c..."). Ack, nack, extend and dead_letter name the
// delivery, and only its holder can: the secret is unguessable, and it is checked with the
// token that consumed (the lease's owner in the store is both). A delivery whose lease went
// to another consumer, or that was settled already, is told apart from the current one.
struct DeliveryId
{
    qint64 messageId = 0;
    int receiveCount = 0;
    QString leaseSecret; // 32 lowercase hex digits

    static std::optional<DeliveryId> parse(const QString &text);
    // A secret for a new lease, from the system's random source.
    static QString newLeaseSecret();
    QString toString() const { return QStringLiteral("%1.%2.%3").arg(messageId).arg(receiveCount).arg(leaseSecret); }
    // The lease's owner as the store keeps it: the consumer (its token's name) and the
    // secret, so that neither a guessed id nor another token's consumer settles it.
    static QString leaseOwner(const QString &consumer, const QString &secret)
    {
        return consumer + QLatin1Char('#') + secret;
    }
    QString leaseOwner(const QString &consumer) const { return leaseOwner(consumer, leaseSecret); }
};

// What `POST /v1/queue/dlq/redrive` or `/dlq/discard` asked for, validated.
struct RedriveRequest
{
    DeadLetterFilter filter;
    QStringList ids; // non-empty: only these dead letters (message ids) of those the filter finds
    bool discard = false; // drop the letters instead of putting them back
    bool dryRun = false;
    int ratePerSecond = 0;
    QString reason;
    QString actor; // the token's name, for the audit log
    // As `once redrive` has them (RedriveOptions); rate above is the ceiling.
    int canary = 0;
    int stopAfterFailures = 0;
    bool includeExpired = false;
};

// A page's cursor in the dead letters' order ("DEADAT:ID"), as `after` takes it back.
QString deadLetterCursor(const DeadLetter &letter);
// Sets the filter to continue after the cursor; false when it is not one.
bool continueAfterCursor(const QString &cursor, DeadLetterFilter &filter);

// The queue operations of `once serve` on the store's own queue: the object lives on a
// thread of its own with its own store connection, so the HTTP server's event loop never
// waits on the store. Publishes are group-committed: they arrive in an inbox that the
// store thread empties only once it holds the store's write lock, so every publish that
// came while it waited for the lock (behind a worker's commit) or while the previous
// commit ran goes into this one. Under load one commit answers many requests, and none
// is answered before its commit.
class QueueService final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(QueueService)

public:
    QueueService(const QString &storeUrl, const QString &queueName, QObject *parent = nullptr);
    ~QueueService() override;

    // On the service's thread, before anything else; false with error set when the store
    // cannot be opened.
    bool open(QString *error);
    // Before the service moves to its thread: a message consume would hand out for the
    // (maxReceives + 1)th time goes to the dead letters instead (0: no limit), so a
    // message that crashes every consumer stops being handed out.
    void setMaxReceives(int maxReceives) { m_maxReceives = maxReceives; }

    // Publish requests handed over together (one per HTTP request): their answers come
    // back together too, so the HTTP thread is woken once per commit, not once per request.
    using PublishDone = std::function<void(const QList<QList<PublishResult>> &, const std::optional<ApiError> &)>;
    // Thread-safe: call it from the HTTP thread. done runs on the service's thread once
    // the entries are committed (or not), with each request's results in the order of
    // its entries.
    void publish(const QList<QList<PublishEntry>> &requests, PublishDone done);

    // consumer names who consumes (the token's name); the settlements below take the same
    // name and succeed only for the holder of the delivery's lease.
    ApiReply consume(int maxMessages, qint64 visibilityMs, const QString &consumer);
    ApiReply ack(const DeliveryId &delivery, const QString &consumer);
    ApiReply nack(const DeliveryId &delivery, const QString &consumer, qint64 delayMs);
    // Moves a leased delivery to the dead letters with the worker's account of it (its
    // send key and event id are the message's own, as the queue holds them).
    ApiReply deadLetter(const DeliveryId &delivery, const QString &consumer, const DeadLetterInfo &info);
    ApiReply extend(const DeliveryId &delivery, const QString &consumer, qint64 visibilityMs);
    ApiReply stats();
    // A page of dead letters, oldest first: at most filter.limit and about
    // MaxDeadLetterPageBytes, with the cursor of the next page (next_after) when one follows.
    ApiReply deadLetters(const DeadLetterFilter &filter);
    static constexpr qsizetype MaxDeadLetterPageBytes = 8 * 1024 * 1024;
    // done runs on the service's thread when the redrive has finished, paced by timers
    // (never a sleep) so the other requests go on meanwhile.
    void redrive(const RedriveRequest &request, std::function<void(const ApiReply &)> done);
    ApiReply readiness();
    // A provider's delivery events, their signature checked already (QueueServer): each
    // recorded once in its key's history (Operations::recordPartnerEvent). An event for a
    // key the ledger does not know is answered 200 too, so that the provider does not
    // retry it for days, and logged.
    ApiReply partnerEvents(const QList<PartnerEvent> &events, const QString &partner, const QString &profile,
                           const QString &providerName);
    // The store-wide Prometheus exposition (core/monitoring), as `once stats` reads it.
    ApiReply metrics();

    // How long idempotency keys are kept.
    static constexpr qint64 IdempotencyWindowMs = 24 * 3600 * 1000LL;

Q_SIGNALS:
    // Messages were committed to the queue: waiting consumers may find them now.
    void published();

private:
    void flushPublishes();
    // Inside the flush's transaction.
    bool commitPublishes(const QList<PublishEntry *> &entries, QList<PublishResult *> &results, QString *error);
    // A failed store call as the API answers it.
    ApiError storeError(const QString &error) const;
    std::optional<ApiError> storeMoved();
    // Settles a delivery if it is still the current one; lease_lost otherwise.
    ApiReply settleHeld(const DeliveryId &delivery, const QString &consumer, const Settlement &settlement,
                        const QJsonObject &answer);
    bool buryOverReceived(QList<QueueMessage> &leased, QString *error);

    QString m_storeUrl;
    QString m_queueName;
    std::unique_ptr<Store> m_store;
    struct PendingPublish
    {
        QList<QList<PublishEntry>> requests;
        PublishDone done;
    };
    QMutex m_inboxMutex;
    QList<PendingPublish> m_inbox; // guarded by m_inboxMutex
    qint64 m_lastPurgeMs = 0;
    int m_maxReceives = 0;
};

} // namespace once
