#pragma once

#include "queues/bullmq/bullmqjobs.h"

#include <QObject>
#include <QThread>

#include <atomic>
#include <functional>
#include <memory>

namespace once::ui {

// One BullMQ queue as the console's list shows it.
struct BullMqQueueSummary
{
    once::BullMqQueueName queue;
    once::BullMqCounts counts;
};

// What an operator may do to BullMQ jobs from the console.
enum class BullMqAction
{
    Retry,
    RetryAllFailed,
    Promote,
    Remove,
    Clean,
    Pause,
    Resume,
    Drain,
    Obliterate
};
QString bullMqActionName(BullMqAction action); // "retry", "retry-all-failed": the audit log's words

// The console's handle on the BullMQ queues of one Redis server. Every request runs on a
// thread of the session's own (BullMQ's Redis may be far, slow or gone), and answers by
// a signal; the GUI thread never waits on Redis. Actions run BullMQ's own scripts when
// the team's scripts are of a release once implements; without them the session says
// why (readOnly) and the page offers no action.
class BullMqSession final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(BullMqSession)

public:
    BullMqSession(once::RedisEndpoint endpoint, QString scriptsFolder, QObject *parent = nullptr);
    ~BullMqSession() override;

    // Where the server is, without a password: for titles and the audit log.
    QString serverName() const { return m_serverName; }

    void discover();
    void list(const once::BullMqQueueName &queue, once::BullMqState state, qint64 offset, int limit);
    void details(const once::BullMqQueueName &queue, const QString &jobId);
    // A bounded search (by id, then name, data and failure reason), cancelled by the next
    // search or by cancelSearch().
    void search(const once::BullMqQueueName &queue, const QString &text);
    void cancelSearch();
    // ids: the selected jobs (Retry, Promote, Remove); olderThanMs: Clean's age.
    void act(BullMqAction action, const QList<once::BullMqQueueName> &queues, const QStringList &ids,
             once::BullMqState state = once::BullMqState::Completed, qint64 olderThanMs = 0);

    static constexpr int SearchLimit = 200;
    static constexpr qint64 SearchMaxScanned = 200000;

signals:
    // Empty reason: actions are possible.
    void scriptsChecked(const QString &readOnlyReason);
    void queuesLoaded(const QList<once::ui::BullMqQueueSummary> &queues);
    void jobsListed(const once::BullMqQueueName &queue, once::BullMqState state, qint64 offset,
                    const QList<once::BullMqJobRow> &rows);
    void detailsLoaded(const once::BullMqJobDetails &job);
    void searchDone(const QString &text, const QList<once::BullMqJobRow> &rows, bool cancelled);
    // An action ran: how many jobs it moved, and why it stopped short if it did (error
    // empty when it went through). Actions answer in the order they were asked.
    void acted(once::ui::BullMqAction action, int jobs, const QString &error);
    void failed(const QString &error);

private:
    class Worker;
    void onWorker(std::function<void(Worker &)> job);

    QString m_serverName;
    QThread m_thread;
    Worker *m_worker = nullptr;
    std::shared_ptr<std::atomic<bool>> m_searchCancelled;
};

} // namespace once::ui
