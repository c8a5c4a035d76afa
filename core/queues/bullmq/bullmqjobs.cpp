// The console's side of a BullMQ queue. Reads use plain Redis commands on the layout every
// release since 5 keeps; each action is the script, KEYS and ARGV that BullMQ 6.7's own
// Queue and Job call for it (dist/cjs/classes/redis-queue-backend.js), so that Node's
// getJobCounts() and getState() agree with what the console did.
#include "queues/bullmq/bullmqjobs.h"

#include "model/clock.h"
#include "model/reminder.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>

namespace once {

using namespace redisreply;

namespace {

const char *const ActionScripts[] = {"reprocessJob",   "moveJobsToWait", "promote", "removeJob",
                                     "cleanJobsInSet", "pause",          "drain",   "obliterate"};

QList<QByteArrayList> connectionSetup(const std::optional<BullMqScripts> &scripts)
{
    QList<QByteArrayList> setup{{"CLIENT", "SETNAME", "once:console"}};
    if (scripts) {
        for (const char *name : ActionScripts)
            setup.append({"SCRIPT", "LOAD", scripts->script(QLatin1StringView(name))->lua});
    }
    return setup;
}

// The key of a state's list or sorted set, and whether it is a list.
QByteArray stateKeyPart(BullMqState state, bool *isList)
{
    *isList = state == BullMqState::Waiting || state == BullMqState::Active;
    switch (state) {
    case BullMqState::Waiting:
        return "wait";
    case BullMqState::Active:
        return "active";
    case BullMqState::Delayed:
        return "delayed";
    case BullMqState::Prioritized:
        return "prioritized";
    case BullMqState::Completed:
        return "completed";
    case BullMqState::Failed:
        return "failed";
    case BullMqState::WaitingChildren:
        return "waiting-children";
    case BullMqState::Unknown:
        break;
    }
    return {};
}

QByteArray number(qint64 value)
{
    return QByteArray::number(value);
}

} // namespace

QString bullMqStateName(BullMqState state)
{
    switch (state) {
    case BullMqState::Waiting:
        return QStringLiteral("waiting");
    case BullMqState::Active:
        return QStringLiteral("active");
    case BullMqState::Delayed:
        return QStringLiteral("delayed");
    case BullMqState::Prioritized:
        return QStringLiteral("prioritized");
    case BullMqState::Completed:
        return QStringLiteral("completed");
    case BullMqState::Failed:
        return QStringLiteral("failed");
    case BullMqState::WaitingChildren:
        return QStringLiteral("waiting-children");
    case BullMqState::Unknown:
        break;
    }
    return QStringLiteral("unknown");
}

QList<BullMqState> bullMqListedStates()
{
    return {BullMqState::Waiting,   BullMqState::Active, BullMqState::Prioritized,    BullMqState::Delayed,
            BullMqState::Completed, BullMqState::Failed, BullMqState::WaitingChildren};
}

BullMqJobs::BullMqJobs(RedisEndpoint endpoint, BullMqQueueName queue, std::optional<BullMqScripts> scripts,
                       QString readOnlyReason)
    : m_connection(std::move(endpoint), connectionSetup(scripts)), m_queue(std::move(queue)),
      m_scripts(std::move(scripts)), m_readOnlyReason(std::move(readOnlyReason))
{
}

QByteArray BullMqJobs::keyPrefix() const
{
    return m_queue.keyPrefix();
}

QByteArray BullMqJobs::key(const QByteArray &part) const
{
    return m_queue.key(part);
}

QByteArrayList BullMqJobs::script(const char *name, const QByteArrayList &keysAndArguments) const
{
    return m_scripts->evalsha(name, keysAndArguments);
}

bool BullMqJobs::refuseWithoutScripts(QString *error) const
{
    if (m_scripts)
        return false;
    *error = QStringLiteral("the queue is shown read-only: %1").arg(m_readOnlyReason);
    return true;
}

// Runs the commands in one round trip; their integer replies (0 for any other), or the
// first error reply as a one-line error.
std::optional<QList<qint64>> BullMqJobs::run(const QList<QByteArrayList> &commands, const QString &what,
                                             QString *error)
{
    const auto replies = m_connection.pipeline(commands, error);
    if (!replies)
        return std::nullopt;
    QList<qint64> results;
    for (const auto &reply : *replies) {
        if (isError(reply.get())) {
            const QByteArray text = errorText(reply.get());
            if (text.startsWith("NOSCRIPT"))
                m_connection.close(); // reconnecting loads the scripts again
            *error =
                m_connection.describe(QStringLiteral("%1 %2:%3 failed: %4")
                                          .arg(what, m_queue.prefix, m_queue.name, QString::fromUtf8(text)));
            return std::nullopt;
        }
        results.append(integer(reply.get())
                           .value_or(elementCount(reply.get()) > 0 ? qint64(elementCount(reply.get())) : 0));
    }
    return results;
}

std::optional<QByteArrayList> BullMqJobs::ids(BullMqState state, qint64 offset, int limit, QString *error)
{
    bool isList = false;
    const QByteArray part = stateKeyPart(state, &isList);
    if (part.isEmpty() || limit <= 0)
        return QByteArrayList();
    // A list gets new jobs at its head (LPUSH), a set by score: newest first either way.
    const QByteArrayList command =
        isList ? QByteArrayList{"LRANGE", key(part), number(offset), number(offset + limit - 1)}
               : QByteArrayList{"ZREVRANGE", key(part), number(offset), number(offset + limit - 1)};
    const auto replies = m_connection.pipeline({command}, error);
    if (!replies)
        return std::nullopt;
    const redisReply *reply = replies->front().get();
    if (isError(reply)) {
        *error = m_connection.describe(QString::fromUtf8(errorText(reply)));
        return std::nullopt;
    }
    QByteArrayList found;
    for (size_t i = 0; i < elementCount(reply); ++i) {
        const QByteArray id = bytes(element(reply, i));
        if (!id.startsWith("0:")) // a wait-list marker of BullMQ before 5
            found.append(id);
    }
    return found;
}

std::optional<QList<BullMqJobRow>> BullMqJobs::rows(const QByteArrayList &jobIds, QString *error)
{
    QList<QByteArrayList> reads;
    for (const QByteArray &id : jobIds)
        reads.append({"HMGET", keyPrefix() + id, "name", "timestamp", "processedOn", "finishedOn", "atm",
                      "failedReason"});
    QList<BullMqJobRow> found;
    if (reads.isEmpty())
        return found;
    const auto replies = m_connection.pipeline(reads, error);
    if (!replies)
        return std::nullopt;
    for (qsizetype i = 0; i < jobIds.size(); ++i) {
        const redisReply *job = replies->at(size_t(i)).get();
        if (isError(job) || bytes(element(job, 1)).isEmpty())
            continue; // removed meanwhile
        found.append({bullMqJobIdText(jobIds.at(i)), QString::fromUtf8(bytes(element(job, 0))),
                      bytes(element(job, 1)).toLongLong(), bytes(element(job, 2)).toLongLong(),
                      bytes(element(job, 3)).toLongLong(), bytes(element(job, 4)).toInt(),
                      QString::fromUtf8(bytes(element(job, 5)))});
    }
    return found;
}

std::optional<QList<BullMqJobRow>> BullMqJobs::list(BullMqState state, qint64 offset, int limit,
                                                    QString *error)
{
    const auto found = ids(state, offset, limit, error);
    if (!found)
        return std::nullopt;
    return rows(*found, error);
}

std::optional<BullMqJobDetails> BullMqJobs::details(const QString &jobId, QString *error)
{
    const QByteArray id = bullMqJobId(jobId);
    const QByteArray jobKey = keyPrefix() + id;
    const auto replies = m_connection.pipeline({{"HGETALL", jobKey},
                                                {"LRANGE", jobKey + ":logs", "0", "-1"},
                                                {"EXISTS", jobKey + ":lock"},
                                                {"ZSCORE", key("completed"), id},
                                                {"ZSCORE", key("failed"), id},
                                                {"ZSCORE", key("delayed"), id},
                                                {"ZSCORE", key("prioritized"), id},
                                                {"ZSCORE", key("waiting-children"), id},
                                                {"LPOS", key("active"), id},
                                                {"LPOS", key("wait"), id}},
                                               error);
    if (!replies)
        return std::nullopt;
    for (const auto &reply : *replies) {
        if (isError(reply.get())) {
            *error = m_connection.describe(QString::fromUtf8(errorText(reply.get())));
            return std::nullopt;
        }
    }
    BullMqJobDetails job;
    const QHash<QByteArray, QByteArray> fields = fieldMap(replies->at(0).get());
    job.exists = !fields.isEmpty();
    job.row = {jobId,
               QString::fromUtf8(fields.value("name")),
               fields.value("timestamp").toLongLong(),
               fields.value("processedOn").toLongLong(),
               fields.value("finishedOn").toLongLong(),
               fields.value("atm").toInt(),
               QString::fromUtf8(fields.value("failedReason"))};
    job.data = fields.value("data");
    job.opts = fields.value("opts");
    job.returnValue = fields.value("returnvalue");
    job.processedBy = QString::fromUtf8(fields.value("pb"));
    for (const QJsonValue entry : QJsonDocument::fromJson(fields.value("stacktrace")).array())
        job.stacktrace.append(entry.toString());
    for (size_t i = 0; i < elementCount(replies->at(1).get()); ++i)
        job.logs.append(QString::fromUtf8(bytes(element(replies->at(1).get(), i))));
    job.locked = integer(replies->at(2).get()).value_or(0) == 1;
    const BullMqState byReply[] = {
        BullMqState::Completed,       BullMqState::Failed, BullMqState::Delayed, BullMqState::Prioritized,
        BullMqState::WaitingChildren, BullMqState::Active, BullMqState::Waiting};
    for (size_t i = 0; i < std::size(byReply); ++i) {
        const redisReply *found = replies->at(3 + i).get();
        if (!bytes(found).isEmpty() || integer(found)) {
            job.state = byReply[i];
            break;
        }
    }
    if (const auto parsed = parseReminder(job.data); parsed.reminder)
        job.sendKey = parsed.reminder->sendKey;
    return job;
}

std::optional<QList<BullMqJobRow>> BullMqJobs::search(const QString &text, int limit, qint64 maxScanned,
                                                      const std::atomic<bool> &cancelled, QString *error)
{
    QList<BullMqJobRow> found;
    // An id first: the one look-up people make most.
    const QByteArray id = bullMqJobId(text);
    const auto exact = rows({id}, error);
    if (!exact)
        return std::nullopt;
    found += *exact;
    const QByteArray needle = text.toUtf8().toLower();
    constexpr int Batch = 500;
    qint64 scanned = 0;
    for (const BullMqState state : bullMqListedStates()) {
        for (qint64 offset = 0; found.size() < limit && scanned < maxScanned && !cancelled; offset += Batch) {
            const auto batch = ids(state, offset, int(std::min<qint64>(Batch, maxScanned - scanned)), error);
            if (!batch)
                return std::nullopt;
            if (batch->isEmpty())
                break;
            scanned += batch->size();
            QList<QByteArrayList> reads;
            for (const QByteArray &id : *batch)
                reads.append({"HMGET", keyPrefix() + id, "name", "data", "failedReason"});
            const auto replies = m_connection.pipeline(reads, error);
            if (!replies)
                return std::nullopt;
            QByteArrayList matches;
            for (qsizetype i = 0; i < batch->size(); ++i) {
                const redisReply *job = replies->at(size_t(i)).get();
                for (size_t field = 0; field < 3; ++field) {
                    if (bytes(element(job, field)).toLower().contains(needle)) {
                        if (batch->at(i) != id)
                            matches.append(batch->at(i));
                        break;
                    }
                }
            }
            const auto matched = rows(matches, error);
            if (!matched)
                return std::nullopt;
            found += *matched;
        }
    }
    if (found.size() > limit)
        found.resize(limit);
    return found;
}

std::optional<int> BullMqJobs::retry(const QStringList &failedJobIds, QString *error)
{
    if (refuseWithoutScripts(error))
        return std::nullopt;
    QList<QByteArrayList> commands;
    for (const QString &jobId : failedJobIds) {
        const QByteArray id = bullMqJobId(jobId);
        // Job.retry('failed'): its attempts made are kept, as Node keeps them.
        commands.append(script("reprocessJob", {keyPrefix() + id, key("events"), key("failed"), key("wait"),
                                                key("meta"), key("active"), key("marker"), key("prioritized"),
                                                key("pc"), id, "LPUSH", "failedReason", "failed", "0", "0"}));
    }
    const auto results = run(commands, QStringLiteral("retrying jobs of"), error);
    if (!results)
        return std::nullopt;
    return int(std::count(results->cbegin(), results->cend(), 1));
}

std::optional<int> BullMqJobs::retryAllFailed(QString *error)
{
    if (refuseWithoutScripts(error))
        return std::nullopt;
    int moved = 0;
    // Queue.retryJobs(): a thousand a call, until none is left.
    for (;;) {
        const auto results =
            run({{"ZCARD", key("failed")},
                 script("moveJobsToWait",
                        {keyPrefix(), key("events"), key("failed"), key("wait"), key("paused"), key("meta"),
                         key("active"), key("marker"), "1000", number(nowMs()), "failed"}),
                 {"ZCARD", key("failed")}},
                QStringLiteral("retrying every failed job of"), error);
        if (!results)
            return std::nullopt;
        moved += int(results->at(0) - results->at(2));
        if (results->at(1) == 0 || results->at(0) == results->at(2))
            return moved;
    }
}

std::optional<int> BullMqJobs::promote(const QStringList &delayedJobIds, QString *error)
{
    if (refuseWithoutScripts(error))
        return std::nullopt;
    QList<QByteArrayList> commands;
    for (const QString &jobId : delayedJobIds)
        commands.append(script("promote", {key("delayed"), key("wait"), key("paused"), key("meta"),
                                           key("prioritized"), key("active"), key("pc"), key("events"),
                                           key("marker"), keyPrefix(), bullMqJobId(jobId)}));
    const auto results = run(commands, QStringLiteral("promoting jobs of"), error);
    if (!results)
        return std::nullopt;
    return int(std::count(results->cbegin(), results->cend(), 0));
}

std::optional<int> BullMqJobs::remove(const QStringList &jobIds, QString *error)
{
    if (refuseWithoutScripts(error))
        return std::nullopt;
    QList<QByteArrayList> commands;
    for (const QString &jobId : jobIds)
        commands.append(script("removeJob", {keyPrefix() + bullMqJobId(jobId), key("repeat"),
                                             bullMqJobId(jobId), "0", keyPrefix()}));
    const auto results = run(commands, QStringLiteral("removing jobs of"), error);
    if (!results)
        return std::nullopt;
    return int(std::count(results->cbegin(), results->cend(), 1)); // 0: locked by a worker
}

std::optional<int> BullMqJobs::clean(BullMqState state, qint64 olderThanMs, QString *error)
{
    if (refuseWithoutScripts(error))
        return std::nullopt;
    bool isList = false;
    const QByteArray part = stateKeyPart(state, &isList);
    // Queue.clean(grace, limit, type): the jobs finished (or added) before now - grace.
    const auto results = run({script("cleanJobsInSet", {key(part), key("events"), key("repeat"), keyPrefix(),
                                                        number(nowMs() - olderThanMs), "0", part})},
                             QStringLiteral("cleaning"), error);
    if (!results)
        return std::nullopt;
    return int(results->front());
}

bool BullMqJobs::pause(bool paused, QString *error)
{
    if (refuseWithoutScripts(error))
        return false;
    const QByteArray from = paused ? "wait" : "paused";
    const QByteArray to = paused ? "paused" : "wait";
    // Resuming moves a legacy paused list back in parts: again until nothing is left.
    for (int pass = 0; pass < 100000; ++pass) {
        const auto results = run({script("pause", {key(from), key(to), key("meta"), key("prioritized"),
                                                   key("events"), key("delayed"), key("marker"),
                                                   paused ? "paused" : "resumed", pass == 0 ? "1" : "0"})},
                                 paused ? QStringLiteral("pausing") : QStringLiteral("resuming"), error);
        if (!results)
            return false;
        if (paused || results->front() <= 0)
            return true;
    }
    return true;
}

std::optional<int> BullMqJobs::drain(bool delayedToo, QString *error)
{
    if (refuseWithoutScripts(error))
        return std::nullopt;
    const auto results = run({{"LLEN", key("wait")},
                              {"ZCARD", key("prioritized")},
                              {"ZCARD", key("delayed")},
                              script("drain", {key("wait"), key("paused"), key("delayed"), key("prioritized"),
                                               key("repeat"), keyPrefix(), delayedToo ? "1" : "0"}),
                              {"LLEN", key("wait")},
                              {"ZCARD", key("prioritized")},
                              {"ZCARD", key("delayed")}},
                             QStringLiteral("draining"), error);
    if (!results)
        return std::nullopt;
    const auto &r = *results;
    return int(r[0] + r[1] + r[2] - r[4] - r[5] - r[6]);
}

bool BullMqJobs::obliterate(QString *error)
{
    if (refuseWithoutScripts(error))
        return false;
    for (;;) {
        const auto results = run({script("obliterate", {key("meta"), keyPrefix(), "1000", ""})},
                                 QStringLiteral("obliterating"), error);
        if (!results)
            return false;
        const qint64 cursor = results->front();
        if (cursor == -1 || cursor == -2) {
            *error = cursor == -1
                         ? QStringLiteral("pause the queue before you obliterate it")
                         : QStringLiteral("the queue has active jobs: obliterate it when they are done");
            return false;
        }
        if (cursor == 0)
            return true;
    }
}

} // namespace once
