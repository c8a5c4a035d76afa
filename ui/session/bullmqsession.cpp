#include "session/bullmqsession.h"

#include <QHash>
#include <QPointer>

#include <unordered_map>

namespace once::ui {

using namespace once;

QString bullMqActionName(BullMqAction action)
{
    switch (action) {
    case BullMqAction::Retry:
        return QStringLiteral("bullmq-retry");
    case BullMqAction::RetryAllFailed:
        return QStringLiteral("bullmq-retry-all-failed");
    case BullMqAction::Promote:
        return QStringLiteral("bullmq-promote");
    case BullMqAction::Remove:
        return QStringLiteral("bullmq-remove");
    case BullMqAction::Clean:
        return QStringLiteral("bullmq-clean");
    case BullMqAction::Pause:
        return QStringLiteral("bullmq-pause");
    case BullMqAction::Resume:
        return QStringLiteral("bullmq-resume");
    case BullMqAction::Drain:
        return QStringLiteral("bullmq-drain");
    case BullMqAction::Obliterate:
        return QStringLiteral("bullmq-obliterate");
    }
    return {};
}

// Lives on the session's thread: the Redis connections and what they read.
class BullMqSession::Worker final : public QObject
{
public:
    Worker(RedisEndpoint endpoint, QString scriptsFolder)
        : m_endpoint(std::move(endpoint)), m_scriptsFolder(std::move(scriptsFolder)), m_queues(m_endpoint)
    {
    }

    // Loads the team's scripts once, on this thread (files on a disk that may be slow).
    QString checkScripts()
    {
        if (!m_checked) {
            m_checked = true;
            m_scripts = BullMqScripts::load(m_scriptsFolder, &m_readOnlyReason);
        }
        return m_scripts ? QString() : m_readOnlyReason;
    }

    BullMqQueues &queues() { return m_queues; }

    BullMqJobs &jobs(const BullMqQueueName &queue)
    {
        checkScripts();
        const QString key = queue.prefix + u':' + queue.name;
        auto found = m_jobs.find(key);
        if (found == m_jobs.end())
            found = m_jobs
                        .emplace(key,
                                 std::make_unique<BullMqJobs>(m_endpoint, queue, m_scripts, m_readOnlyReason))
                        .first;
        return *found->second;
    }

private:
    RedisEndpoint m_endpoint;
    QString m_scriptsFolder;
    BullMqQueues m_queues;
    bool m_checked = false;
    std::optional<BullMqScripts> m_scripts;
    QString m_readOnlyReason;
    std::unordered_map<QString, std::unique_ptr<BullMqJobs>> m_jobs;
};

BullMqSession::BullMqSession(RedisEndpoint endpoint, QString scriptsFolder, QObject *parent)
    : QObject(parent), m_serverName(endpoint.label),
      m_searchCancelled(std::make_shared<std::atomic<bool>>(false))
{
    m_worker = new Worker(std::move(endpoint), std::move(scriptsFolder));
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread.setObjectName(QStringLiteral("once-bullmq"));
    m_thread.start();
    onWorker([this](Worker &worker) {
        const QString reason = worker.checkScripts();
        QMetaObject::invokeMethod(this, [this, reason] { emit scriptsChecked(reason); });
    });
}

BullMqSession::~BullMqSession()
{
    m_searchCancelled->store(true);
    m_thread.quit();
    m_thread.wait();
}

// Runs job on the worker's thread; what it posts back to this object arrives only while
// this object lives (a queued call to a deleted receiver is dropped).
void BullMqSession::onWorker(std::function<void(Worker &)> job)
{
    QMetaObject::invokeMethod(m_worker, [worker = m_worker, job = std::move(job)] { job(*worker); });
}

void BullMqSession::discover()
{
    onWorker([this](Worker &worker) {
        QString error;
        QList<BullMqQueueSummary> summaries;
        const auto found = worker.queues().discover(&error);
        if (found) {
            for (const BullMqQueueName &queue : *found) {
                const auto counts = worker.queues().counts(queue, &error);
                if (!counts)
                    break;
                summaries.append({queue, *counts});
            }
        }
        const bool ok = found && summaries.size() == found->size();
        QMetaObject::invokeMethod(this, [this, ok, summaries, error] {
            if (ok)
                emit queuesLoaded(summaries);
            else
                emit failed(error);
        });
    });
}

void BullMqSession::list(const BullMqQueueName &queue, BullMqState state, qint64 offset, int limit)
{
    onWorker([this, queue, state, offset, limit](Worker &worker) {
        QString error;
        const auto rows = worker.jobs(queue).list(state, offset, limit, &error);
        QMetaObject::invokeMethod(this, [this, queue, state, offset, rows, error] {
            if (rows)
                emit jobsListed(queue, state, offset, *rows);
            else
                emit failed(error);
        });
    });
}

void BullMqSession::details(const BullMqQueueName &queue, const QString &jobId)
{
    onWorker([this, queue, jobId](Worker &worker) {
        QString error;
        const auto job = worker.jobs(queue).details(jobId, &error);
        QMetaObject::invokeMethod(this, [this, job, error] {
            if (job)
                emit detailsLoaded(*job);
            else
                emit failed(error);
        });
    });
}

void BullMqSession::search(const BullMqQueueName &queue, const QString &text)
{
    // The search before this one stops where it is; this one gets a flag of its own.
    m_searchCancelled->store(true);
    m_searchCancelled = std::make_shared<std::atomic<bool>>(false);
    onWorker([this, queue, text, cancelled = m_searchCancelled](Worker &worker) {
        QString error;
        const auto rows = worker.jobs(queue).search(text, SearchLimit, SearchMaxScanned, *cancelled, &error);
        const bool wasCancelled = cancelled->load();
        QMetaObject::invokeMethod(this, [this, text, rows, error, wasCancelled] {
            if (rows)
                emit searchDone(text, *rows, wasCancelled);
            else
                emit failed(error);
        });
    });
}

void BullMqSession::cancelSearch()
{
    m_searchCancelled->store(true);
}

void BullMqSession::act(BullMqAction action, const QList<BullMqQueueName> &queues, const QStringList &ids,
                        BullMqState state, qint64 olderThanMs)
{
    onWorker([this, action, queues, ids, state, olderThanMs](Worker &worker) {
        QString error;
        int moved = 0;
        bool ok = true;
        for (const BullMqQueueName &queue : queues) {
            BullMqJobs &jobs = worker.jobs(queue);
            std::optional<int> count;
            switch (action) {
            case BullMqAction::Retry:
                count = jobs.retry(ids, &error);
                break;
            case BullMqAction::RetryAllFailed:
                count = jobs.retryAllFailed(&error);
                break;
            case BullMqAction::Promote:
                count = jobs.promote(ids, &error);
                break;
            case BullMqAction::Remove:
                count = jobs.remove(ids, &error);
                break;
            case BullMqAction::Clean:
                count = jobs.clean(state, olderThanMs, &error);
                break;
            case BullMqAction::Pause:
            case BullMqAction::Resume:
                count =
                    jobs.pause(action == BullMqAction::Pause, &error) ? std::optional<int>(0) : std::nullopt;
                break;
            case BullMqAction::Drain:
                count = jobs.drain(true, &error);
                break;
            case BullMqAction::Obliterate:
                count = jobs.obliterate(&error) ? std::optional<int>(0) : std::nullopt;
                break;
            }
            if (!count) {
                ok = false;
                break;
            }
            moved += *count;
        }
        if (ok)
            error.clear();
        QMetaObject::invokeMethod(this, [this, action, moved, error] { emit acted(action, moved, error); });
    });
}

} // namespace once::ui
