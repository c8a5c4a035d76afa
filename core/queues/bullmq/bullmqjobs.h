#pragma once

#include "queues/bullmq/bullmqqueues.h"
#include "queues/bullmq/bullmqscripts.h"

#include <QByteArray>
#include <QList>
#include <QString>
#include <QStringList>

#include <atomic>
#include <optional>

namespace once {

// Where a BullMQ job is, as Job.getState() names it.
enum class BullMqState
{
    Waiting,
    Active,
    Delayed,
    Prioritized,
    Completed,
    Failed,
    WaitingChildren,
    Unknown
};
QString bullMqStateName(BullMqState state); // "waiting", "waiting-children"
QList<BullMqState> bullMqListedStates();    // the states a console lists, waiting first

// A job as a list shows it, without its data.
struct BullMqJobRow
{
    QString id;
    QString name;
    qint64 timestampMs = 0;   // when it was added
    qint64 processedOnMs = 0; // when a worker last took it
    qint64 finishedOnMs = 0;
    int attemptsMade = 0;
    QString failedReason;
};

// A job whole, as the console's details show it.
struct BullMqJobDetails
{
    BullMqJobRow row;
    BullMqState state = BullMqState::Unknown;
    QByteArray data;
    QByteArray opts;
    QByteArray returnValue;
    QStringList stacktrace;
    QStringList logs;
    QString processedBy;
    bool locked = false; // a worker holds its lock now
    QByteArray sendKey;  // what once claims for its data; empty when it is no reminder
    bool exists = false;
};

// One BullMQ queue's jobs, for the console: lists by state, a job's details and a search
// read with plain Redis commands (any release); actions run BullMQ's own scripts, with
// the same version gate as the worker, and are refused, saying why, without them. One
// instance is used from one thread (the console's BullMQ thread), never the GUI's.
class BullMqJobs
{
public:
    // scripts: null when the team's scripts are missing or of another release; then
    // readOnlyReason says why, and every action is refused with it.
    BullMqJobs(RedisEndpoint endpoint, BullMqQueueName queue, std::optional<BullMqScripts> scripts,
               QString readOnlyReason);

    const BullMqQueueName &queue() const { return m_queue; }
    bool canAct() const { return m_scripts.has_value(); }
    QString readOnlyReason() const { return m_readOnlyReason; }

    // Up to limit jobs of the state from offset, newest first.
    std::optional<QList<BullMqJobRow>> list(BullMqState state, qint64 offset, int limit, QString *error);
    std::optional<BullMqJobDetails> details(const QString &jobId, QString *error);
    // The job of that id, if any; then jobs whose name, data or failure reason hold the
    // text (case-insensitive), looking at no more than maxScanned jobs, newest first in
    // each state, and stopping when cancelled turns true. At most limit rows.
    std::optional<QList<BullMqJobRow>> search(const QString &text, int limit, qint64 maxScanned,
                                              const std::atomic<bool> &cancelled, QString *error);

    // Each returns how many jobs it moved (or nullopt and a one-line error).
    std::optional<int> retry(const QStringList &failedJobIds, QString *error); // reprocessJob
    std::optional<int> retryAllFailed(QString *error);                         // moveJobsToWait
    std::optional<int> promote(const QStringList &delayedJobIds, QString *error);
    std::optional<int> remove(const QStringList &jobIds, QString *error); // not active ones
    std::optional<int> clean(BullMqState state, qint64 olderThanMs, QString *error);
    bool pause(bool paused, QString *error);
    std::optional<int> drain(bool delayedToo, QString *error);
    // Only a paused queue without active jobs, as BullMQ's obliterate() without force.
    bool obliterate(QString *error);

private:
    QByteArray key(const QByteArray &part) const;
    QByteArray keyPrefix() const;
    QByteArrayList script(const char *name, const QByteArrayList &keysAndArguments) const;
    bool refuseWithoutScripts(QString *error) const;
    std::optional<QList<qint64>> run(const QList<QByteArrayList> &commands, const QString &what,
                                     QString *error);
    std::optional<QList<BullMqJobRow>> rows(const QByteArrayList &ids, QString *error);
    std::optional<QByteArrayList> ids(BullMqState state, qint64 offset, int limit, QString *error);

    RedisConnection m_connection;
    BullMqQueueName m_queue;
    std::optional<BullMqScripts> m_scripts;
    QString m_readOnlyReason;
};

} // namespace once
