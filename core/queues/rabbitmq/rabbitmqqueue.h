#pragma once

#include "queues/brokerqueue.h"

#include <map>
#include <memory>

namespace once {

namespace amqp {
class RabbitMqSession;
}

// For each delay tier (its seconds), when the last message this process sent there
// enters the main queue again.
using TierArrivals = std::map<int, qint64>;

// The queue in RabbitMQ (AMQP 0-9-1, through rabbitmq-c): a quorum queue with retry
// queues per delay tier and a dead-letter queue; see the top of rabbitmqqueue.cpp for
// the topology and the message format.
//
// A lease is a delivery this consumer has not settled yet. RabbitMQ has no lease
// timeout: a delivery stays with this consumer until it is settled or the connection
// closes (the broker then redelivers it), so leaseUntilMs is only advisory.
class RabbitMqQueue final : public BrokerQueue
{
public:
    static std::unique_ptr<RabbitMqQueue> connect(const QueueLocation &location, const QString &consumerName,
                                                  int prefetch, QString *error);
    ~RabbitMqQueue() override;

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;
    bool connectionLost() const override;

    bool declareTopology(const QueueTopology &topology, QString *error) override;
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override;
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;

private:
    enum class Take
    {
        Peek,
        Redrive,
        Discard
    };

    RabbitMqQueue(QueueLocation location, QString consumerName, int prefetch);

    // The session, reconnected once if the last one broke.
    amqp::RabbitMqSession *session(QString *error);
    bool startConsuming(amqp::RabbitMqSession &session, QString *error);
    std::optional<QList<DeadLetter>> takeDeadLetters(Take take, int max,
                                                     const std::function<bool(const DeadLetter &)> &select,
                                                     QString *error);

    QString m_consumerName;
    int m_prefetch = 1;
    std::unique_ptr<amqp::RabbitMqSession> m_session;
    TierArrivals m_tierArrivals;
};

} // namespace once
