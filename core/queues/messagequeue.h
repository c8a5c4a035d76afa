#pragma once

#include <QByteArray>
#include <QList>
#include <QString>

#include "model/retryrule.h"

#include <optional>

namespace once {

// A message to put on the queue. sendKey and eventId are copies of what the payload
// says, kept beside it so operators can search a queue without parsing every body;
// both are empty for a payload that does not parse.
struct OutgoingMessage
{
    QByteArray payload;
    QByteArray sendKey;
    QString eventId;
    qint64 delayMs = 0;
    int redriveCount = 0;
};

// One delivery of a message to one worker. A redelivery of the same message has the
// same id and a higher delivery number.
struct QueueMessage
{
    QString id;
    QByteArray payload;
    int delivery = 0;
    qint64 enqueuedAtMs = 0;
    qint64 leaseUntilMs = 0;
    int redriveCount = 0;
    // Where the message carries its own attempts and backoff (a BullMQ job): the engine
    // follows them. Absent: the worker's own.
    std::optional<RetryRule> retryRule;
    // The queue's own verdict that this delivery fails unsent (BullMQ: the job stalled
    // more often than maxStalledCount allows), with its reason. The engine still claims
    // its key, so that the ledger says what became of it: dead, or in doubt where an
    // earlier claim ended without an outcome. Empty for a delivery to send.
    QString failUnsent = {};
};

struct DeadLetterInfo
{
    QString errorClass;
    QString lastError;
    int attempts = 0;
    qint64 firstAttemptAtMs = 0;
    qint64 lastAttemptAtMs = 0;
    QByteArray sendKey;
    QString eventId;
};

// What becomes of a leased message. Only the lease holder may settle it: a settlement
// for a delivery whose lease was lost (expired and taken by another worker) is ignored.
struct Settlement
{
    enum class Kind { Ack, Retry, DeadLetter };
    Kind kind = Kind::Ack;
    QString messageId;
    int delivery = 0;
    qint64 delayMs = 0;  // Retry: when the message becomes visible again
    DeadLetterInfo deadLetter; // DeadLetter only
    // Retry after a failed send: why it failed, for a queue that keeps a message's
    // failures with it (BullMQ's failedReason). Empty for a delivery handed back unsent,
    // which is no attempt.
    // Ack of a message that leaves the queue without having taken effect (its key held in
    // doubt for an operator, or dead-lettered): why, for a queue that shows each message's
    // fate (BullMQ: failed, not completed). Empty for one that took effect.
    QString failure = {};
};

// One partition of a partitioned log (Kafka): where it ends, where the consumer group
// has committed, and the lag between them.
struct PartitionLag
{
    int partition = 0;
    qint64 endOffset = 0;
    std::optional<qint64> committedOffset; // none: the group has committed nothing there
    qint64 lag = 0; // what is left to read: from the commit, or the oldest message left
    // Messages past the commit that the cluster deleted (retention) before the group read
    // them: reminders lost before any worker saw them.
    qint64 deletedUnread = 0;
};

struct QueueCounts
{
    qint64 ready = 0;
    qint64 inFlight = 0;
    qint64 delayed = 0;
    qint64 dead = 0;
    std::optional<qint64> oldestReadyAgeMs;
    std::optional<qint64> nextVisibleInMs; // earliest delayed or leased message, from now
    // What a broker could not report, and why (e.g. its management API is unreachable);
    // the fields it names are 0 or empty then, not measured.
    QString unavailable;
    // Of the delayed messages, those waiting for a retry (delivered before) and when the
    // first delayed one is due, from now; not known at every broker.
    std::optional<qint64> delayedRetries;
    std::optional<qint64> nextDelayedInMs;
    // The broker cannot count what waits or is in flight (Pub/Sub, without Cloud
    // Monitoring): ready and inFlight are 0, not measured; delayed and nextVisibleInMs
    // are only what this process itself holds back.
    bool backlogUnknown = false;
    // How long a delivery can stay hidden there without any worker's lease (a pulled
    // message's first ack deadline, should its worker die at once): a queue that cannot
    // count is idle only after this long, or a lease, without finding anything.
    qint64 hiddenUpToMs = 0;
    // The queue's own partitions, where it has them (Kafka); empty elsewhere.
    QList<PartitionLag> partitions;
};

// The queue side of the store. The engine speaks only this interface, so the queue can
// live in the embedded store or in a broker while the ledger stays where it is.
class MessageQueue
{
public:
    virtual ~MessageQueue() = default;

    virtual bool enqueue(const QList<OutgoingMessage> &messages, QString *error) = 0;
    // Leases up to max visible messages for leaseMs; each lease is one delivery.
    virtual QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) = 0;
    virtual bool settle(const QList<Settlement> &settlements, QString *error) = 0;
    virtual std::optional<QueueCounts> counts(QString *error) = 0;
};

} // namespace once
