#pragma once

#include "queues/brokerqueue.h"
#include "queues/redis/redisconnection.h"

#include <QByteArray>
#include <QByteArrayList>
#include <QHash>
#include <QPair>

#include <memory>
#include <vector>

namespace once {

// The queue in a Redis stream, read by the consumer group "once" (key layout and entry
// format at the top of redisstreamqueue.cpp). One synchronous connection, used from one
// thread; it reconnects on the next call after the connection broke. Without a consumer
// name it serves producers and operators: everything but lease().
class RedisStreamQueue final : public BrokerQueue
{
    Q_DISABLE_COPY_MOVE(RedisStreamQueue)

public:
    static std::unique_ptr<RedisStreamQueue> connect(const QueueLocation &location,
                                                     const QString &consumerName, QString *error);
    ~RedisStreamQueue() override;

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;
    bool connectionLost() const override { return !m_connection.isOpen(); }

    bool declareTopology(const QueueTopology &topology, QString *error) override;
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override;
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;

private:
    using Reply = RedisConnection::Reply;
    // What settle() needs to find a delivery again: the stream entry, and how many times
    // the group had delivered it when we got it (the ownership token).
    struct Lease
    {
        QByteArray entryId;
        qint64 groupDeliveries = 0;
        qint64 leaseUntilMs = 0;
    };
    struct StreamEntry;
    struct DeadEntry
    {
        QByteArray entryId; // in NAME:dead
        DeadLetter letter;
    };

    RedisStreamQueue(QueueLocation location, const QString &consumerName);

    bool open(QString *error);
    std::optional<std::vector<Reply>> pipeline(const QList<QByteArrayList> &commands, QString *error);
    // As pipeline, but any error reply fails it all.
    std::optional<std::vector<Reply>> checkedPipeline(const QList<QByteArrayList> &commands, QString *error);
    bool failed(const redisReply *reply, QString *error);
    QString describe(const QString &what) const;
    QString noGroupError() const;

    QList<QueueMessage> remember(const QList<StreamEntry> &entries, qint64 leaseMs);
    QByteArrayList settlementScript(const Settlement &settlement, const Lease &lease) const;
    std::optional<QList<DeadEntry>> headOfDeadLetters(int limit, QString *error);
    std::optional<QList<DeadLetter>> takeDeadLetters(int max,
                                                     const std::function<bool(const DeadLetter &)> &select,
                                                     bool redrive, QString *error);

    QByteArray m_consumer;
    QByteArray m_stream;
    QByteArray m_delayed;
    QByteArray m_dead;
    RedisConnection m_connection; // after m_consumer, which names it
    QByteArray m_claimCursor = "0-0";
    QHash<QPair<QString, int>, Lease> m_leases; // (message id, delivery)
};

} // namespace once
