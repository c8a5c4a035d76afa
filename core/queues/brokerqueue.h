#pragma once

#include "model/deadletter.h"
#include "queues/messagequeue.h"
#include "queues/queuelocation.h"

#include <functional>
#include <memory>
#include <optional>

namespace once {

// What `once init --queue` declares where a broker takes it (SQS, Pub/Sub): the worker's
// own --lease and --max-attempts.
struct QueueTopology
{
    qint64 leaseMs = 30000;
    int maxAttempts = 8;

    // The broker's own limit on deliveries, which catches a message whose workers die
    // before they settle it. The worker dead-letters after maxAttempts sends, with its
    // account of why; two deliveries more are left for crashes and lost leases, so that
    // the broker never takes a message the worker would still retry.
    int deliveryLimit() const { return maxAttempts + 2; }
};

// A queue at a broker. The engine sees the MessageQueue side; the operator commands
// and the console see the rest. One instance is used from one thread.
//
// Message ids are the producer's (AMQP message_id, the stream entry's "id" field) and
// survive retries and redrives, so the ledger can tell a retry of a message from
// another message carrying the same send key. The delivery number grows with every
// delivery of one id, including the broker's redeliveries after a crash.
class BrokerQueue : public MessageQueue
{
public:
    const QueueLocation &location() const { return m_location; }

    // Declares what the queue needs at the broker (queues, exchanges, retry and
    // dead-letter queues, consumer group). Safe to run again: once init --queue.
    virtual bool declareTopology(const QueueTopology &topology, QString *error) = 0;
    // One line on what declareTopology makes of topology where the broker takes it, for
    // the operator (the broker's delivery limit, a value it raised to its least); empty
    // where the broker takes none of it.
    virtual QString describeTopology(const QueueTopology &) const { return {}; }

    // Up to limit dead letters, oldest first, left where they are.
    virtual std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) = 0;

    // Takes up to max dead letters from the head of the dead-letter queue. Those select
    // accepts go back on the main queue unchanged (same id, headers and body; redrive
    // count + 1) and are returned; the others stay dead letters. A letter is removed
    // from the dead-letter queue only after the broker has taken its copy.
    virtual std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                                     QString *error) = 0;
    // As redrive, but the selected letters are dropped.
    virtual std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                                     QString *error) = 0;

    // Where the broker announces what it has for workers (BullMQ's marker): a watch on a
    // thread and connection of its own that calls wake, from that thread, whenever a lease
    // may find something; destroying it stops it. Null where a worker polls.
    class MessageWatch
    {
    public:
        virtual ~MessageWatch() = default;
    };
    // Whether the broker's connection is gone (lost, or not made again since): the last
    // failure was the network's or the server's going, not an answer, and the next call
    // connects afresh. The worker says such a spell once, as it starts and as it ends.
    virtual bool connectionLost() const { return false; }

    virtual std::unique_ptr<MessageWatch> watchMessages(std::function<void()> wake) const
    {
        Q_UNUSED(wake);
        return nullptr;
    }

protected:
    explicit BrokerQueue(QueueLocation location) : m_location(std::move(location)) {}

private:
    QueueLocation m_location;
};

// Connects to the broker. consumerName names this process's consumer (the worker id);
// prefetch is how many deliveries the broker may hand this consumer ahead of its acks
// (the worker's concurrency).
std::unique_ptr<BrokerQueue> openBrokerQueue(const QueueLocation &location, const QString &consumerName,
                                             int prefetch, QString *error);

} // namespace once
