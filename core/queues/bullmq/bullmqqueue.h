#pragma once

#include "queues/brokerqueue.h"
#include "queues/bullmq/bullmqscripts.h"
#include "queues/redis/redisconnection.h"

#include <QHash>
#include <QJsonArray>
#include <QJsonObject>

#include <memory>

class QTimer;

namespace once {

// A BullMQ queue, worked as a BullMQ worker works it: every transition of a job is one of
// BullMQ's own scripts (see BullMqScripts), so Node producers, Node workers, Queue,
// QueueEvents and Bull Board see once as one more worker. A job is one reminder (its
// data); its id is the message id, its attempts started ("ats") the delivery number.
//
// What BullMQ leaves to the worker, this class does on the thread that uses it (which
// needs an event loop, as the engine's store thread has): renew the locks of the jobs it
// holds every half lock (the lease), and run the stalled checker every stalledInterval.
class BullMqQueue final : public BrokerQueue
{
    Q_DISABLE_COPY_MOVE(BullMqQueue)

public:
    static std::unique_ptr<BullMqQueue> connect(const QueueLocation &location, const QString &consumerName,
                                                QString *error);
    ~BullMqQueue() override;

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override;
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override;
    bool settle(const QList<Settlement> &settlements, QString *error) override;
    std::optional<QueueCounts> counts(QString *error) override;
    bool connectionLost() const override { return !m_connection.isOpen(); }

    bool declareTopology(const QueueTopology &topology, QString *error) override;
    QString describeTopology(const QueueTopology &topology) const override;
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override;
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override;

    // Blocks on the queue's marker as a Node worker does (BullMqMarkerWatch).
    std::unique_ptr<MessageWatch> watchMessages(std::function<void()> wake) const override;

    // The jobs the stalled checker found without a lock and put back (or failed), by id.
    // Runs by itself every stalledInterval once the queue leases; public for operators.
    std::optional<QByteArrayList> moveStalledJobsToWait(QString *error);

private:
    // A job this worker holds: the lock's token, and what its settlement writes back.
    struct ActiveJob
    {
        QByteArray token;
        int delivery = 0;
        QJsonObject opts;
        QJsonArray stacktrace;
    };

    BullMqQueue(QueueLocation location, const QString &consumerName, BullMqScripts scripts);

    RedisEndpoint endpoint() const; // of the worker's connection and the marker watch's
    QByteArray key(const QByteArray &part) const;
    QByteArray keyPrefix() const; // "<prefix>:<name>:", what a job id follows
    QByteArrayList script(const char *name, const QByteArrayList &keysAndArguments) const;
    QString describe(const QString &what) const;
    QByteArray finishOptions(const ActiveJob &job, bool completed) const;
    QByteArrayList settlementScript(const QString &jobId, const ActiveJob &job,
                                    const Settlement &settlement) const;
    std::optional<QList<DeadLetter>> failedJobs(int limit, QString *error);
    std::optional<QList<DeadLetter>>
    takeFailed(int max, const std::function<bool(const DeadLetter &)> &select, bool redrive, QString *error);
    void startWorkerTimers(qint64 lockMs);
    qint64 stalledIntervalMs() const;
    void renewLocks();

    BullMqScripts m_scripts;
    QByteArray m_workerName; // what "processedBy" says: the worker id
    RedisConnection m_connection;
    QHash<QString, ActiveJob> m_active; // by job id
    QByteArray m_tokenBase;
    quint64 m_tokens = 0;
    qint64 m_lockMs = 0;
    std::unique_ptr<QTimer> m_lockTimer;
    std::unique_ptr<QTimer> m_stalledTimer;
};

} // namespace once
