#pragma once

#include "queues/redis/redisconnection.h"

#include <QList>
#include <QString>

#include <optional>

namespace once {

// A BullMQ queue: its keys are "<prefix>:<name>:...".
struct BullMqQueueName
{
    QString prefix; // "bull" unless the team chose another
    QString name;
    friend bool operator==(const BullMqQueueName &, const BullMqQueueName &) = default;

    // "<prefix>:<name>:", what every key of the queue and every job id follows.
    QByteArray keyPrefix() const { return (prefix + u':' + name + u':').toUtf8(); }
    // A key's name within the queue: "<prefix>:<name>:<part>".
    QByteArray key(const QByteArray &part) const { return keyPrefix() + part; }
};

// A job id as once shows and keeps it (the message id, the ledger's owner, the console's
// rows): the id itself when it is UTF-8 without '%' or control characters. An id that is
// not text (a producer other than Node may write any bytes), or holds a '%' or a line
// break, is percent-encoded, every byte outside printable ASCII and '%' itself, so that
// two ids are never shown alike and bullMqJobId() gives back the bytes BullMQ's keys hold.
QString bullMqJobIdText(const QByteArray &id);
QByteArray bullMqJobId(const QString &text);

// What BullMQ's Queue.getJobCounts() reports, and whether the queue is paused.
struct BullMqCounts
{
    qint64 waiting = 0;
    qint64 active = 0;
    qint64 delayed = 0;
    qint64 prioritized = 0;
    qint64 completed = 0;
    qint64 failed = 0;
    qint64 waitingChildren = 0;
    bool paused = false;
    QString version; // who last wrote the queue's meta, "bullmq:6.7.0"; may be empty
};

// The BullMQ queues on a Redis server, read with plain Redis commands whose key layout
// every BullMQ release since 5 keeps (lists wait and active; sorted sets delayed,
// prioritized, completed, failed, waiting-children; hash meta), so that the console can
// show queues of any release, even one whose scripts once does not run. Reads only.
class BullMqQueues
{
public:
    explicit BullMqQueues(RedisEndpoint endpoint);

    // Every queue on the server's database, by its meta key (SCAN ... MATCH *:meta), sorted.
    std::optional<QList<BullMqQueueName>> discover(QString *error);
    // One queue's counts, read in one round trip.
    std::optional<BullMqCounts> counts(const BullMqQueueName &queue, QString *error);

private:
    RedisConnection m_connection;
};

} // namespace once
