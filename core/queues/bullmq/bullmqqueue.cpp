// A BullMQ queue (--queue bullmq://HOST:PORT/DB?queue=NAME[&prefix=bull]), worked through
// BullMQ's own Lua scripts as a Node worker of release 6.7 calls them. The KEYS and ARGV
// of each call below are that release's contracts (dist/cjs/classes/redis-queue-backend.js);
// BullMqScripts refuses any other release, so a contract that changed never runs.
//
// What once adds to a BullMQ worker: every job's send key is claimed in the ledger before
// its POST, so a job that comes back (a stall, a lost lock, a retry from the console)
// never takes effect twice. A job id is shown, never trusted as the identity.
#include "queues/bullmq/bullmqqueue.h"

#include "model/clock.h"
#include "model/reminder.h"
#include "queues/bullmq/bullmqlocation.h"
#include "queues/bullmq/bullmqmarkerwatch.h"
#include "queues/bullmq/bullmqqueues.h"
#include "queues/bullmq/msgpackwriter.h"
#include "queues/deadletteraccount.h"

#include <QJsonDocument>
#include <QLoggingCategory>
#include <QTimer>
#include <QUuid>

#include <algorithm>
#include <climits>
#include <cmath>

namespace once {

using namespace redisreply;

namespace {

Q_LOGGING_CATEGORY(lcBullMq, "once.core.bullmq")

// The scripts a worker runs; loaded on every (re)connection, so that EVALSHA finds them.
const char *const WorkerScripts[] = {"moveToActive",   "moveToFinished",        "moveToDelayed", "retryJob",
                                     "extendLocks",    "moveStalledJobsToWait", "reprocessJob",  "removeJob",
                                     "addStandardJob", "addDelayedJob"};

// BullMQ's own failure codes (finishedErrors in its Node sources).
QString scriptCodeText(qint64 code)
{
    switch (code) {
    case -1:
        return QStringLiteral("the job is gone");
    case -2:
        return QStringLiteral("its lock is gone (it stalled and another worker may have it)");
    case -3:
        return QStringLiteral("it is no longer active");
    case -6:
        return QStringLiteral("another worker holds its lock now");
    default:
        return QStringLiteral("BullMQ refused it with code %1").arg(code);
    }
}

// "<prefix>:<base64(queue)>:w:<worker>": the client name by which Queue.getWorkers()
// finds a queue's workers. Redis refuses spaces and control characters in one.
QByteArray clientName(const QueueLocation &location, const QByteArray &worker)
{
    QByteArray name = worker.isEmpty() ? QByteArray("once") : worker;
    for (char &c : name) {
        if (c < '!' || c > '~')
            c = '_';
    }
    return bullMqDetails(location).prefix.toUtf8() + ':' + location.name.toUtf8().toBase64() + ":w:" + name;
}

QList<QByteArrayList> connectionSetup(const QueueLocation &location, const QByteArray &worker,
                                      const BullMqScripts &scripts)
{
    QList<QByteArrayList> setup{{"CLIENT", "SETNAME", clientName(location, worker)}};
    for (const char *name : WorkerScripts)
        setup.append({"SCRIPT", "LOAD", scripts.script(QLatin1StringView(name))->lua});
    return setup;
}

QByteArray number(qint64 value)
{
    return QByteArray::number(value);
}

// A number of a job's opts, within [low, high]; fallback for what is no number. A job is
// the producer's word: a "delay" of 1e300 must not overflow into the past.
qint64 boundedInteger(const QJsonValue &value, qint64 low, qint64 high, qint64 fallback)
{
    const double number = value.toDouble(std::nan(""));
    if (!std::isfinite(number))
        return fallback;
    return qint64(std::clamp(number, double(low), double(high)));
}

constexpr qint64 DayMs = 24 * 3600 * 1000;
constexpr qint64 LargestCount = qint64(1) << 53; // what a JSON number holds exactly

// The job's own attempts and backoff, as its opts (JSON in the job hash) say them. A job
// without "attempts" was not added by BullMQ's Queue (which always writes it): the
// worker's own rule applies.
std::optional<RetryRule> retryRuleOf(const QJsonObject &opts, int attemptsMade)
{
    if (!opts.contains(QLatin1String("attempts")))
        return std::nullopt;
    RetryRule rule;
    rule.attempts = int(boundedInteger(opts.value(QLatin1String("attempts")), 1, INT_MAX, 1));
    rule.attemptsMade = attemptsMade;
    const QJsonValue backoff = opts.value(QLatin1String("backoff"));
    if (backoff.isDouble()) {
        rule.backoff = RetryRule::Backoff::Fixed;
        rule.delayMs = boundedInteger(backoff, 0, DayMs, 0);
    } else if (backoff.isObject()) {
        const QJsonObject strategy = backoff.toObject();
        // A custom strategy is a function in the Node worker's own code; once waits the
        // delay it names, if any, as a fixed one.
        rule.backoff = strategy.value(QLatin1String("type")).toString() == QLatin1String("exponential")
                           ? RetryRule::Backoff::Exponential
                           : RetryRule::Backoff::Fixed;
        rule.delayMs = boundedInteger(strategy.value(QLatin1String("delay")), 0, DayMs, 0);
        rule.jitter = strategy.value(QLatin1String("jitter")).toDouble();
    }
    return rule;
}

// What the job asks of finished jobs of its kind (removeOnComplete / removeOnFail), as
// BullMQ's getKeepJobs() reads it: absent or false keeps all, true none, a number that
// many, an object {age, count, limit} as it says.
void writeKeepJobs(MsgPackWriter &writer, const QJsonValue &remove)
{
    if (remove.isObject()) {
        const QJsonObject keep = remove.toObject();
        QList<QPair<QByteArray, qint64>> entries;
        for (const char *name : {"age", "count", "limit"}) {
            if (keep.contains(QLatin1StringView(name)))
                entries.append(
                    {name, boundedInteger(keep.value(QLatin1StringView(name)), -1, LargestCount, -1)});
        }
        writer.map(int(entries.size()));
        for (const auto &[name, value] : entries)
            writer.string(name).integer(value);
        return;
    }
    const qint64 count = remove.isDouble() ? boundedInteger(remove, -1, LargestCount, -1)
                         : remove.toBool() ? 0
                                           : -1;
    writer.map(1).string("count").integer(count);
}

} // namespace

BullMqQueue::BullMqQueue(QueueLocation location, const QString &consumerName, BullMqScripts scripts)
    : BrokerQueue(std::move(location)), m_scripts(std::move(scripts)), m_workerName(consumerName.toUtf8()),
      m_connection(endpoint(), connectionSetup(this->location(), m_workerName, m_scripts)),
      m_tokenBase(QUuid::createUuid().toByteArray(QUuid::WithoutBraces))
{
}

BullMqQueue::~BullMqQueue() = default;

std::unique_ptr<BullMqQueue> BullMqQueue::connect(const QueueLocation &location, const QString &consumerName,
                                                  QString *error)
{
    auto scripts = BullMqScripts::load(BullMqScripts::commandsFolder(), error);
    if (!scripts)
        return nullptr;
    std::unique_ptr<BullMqQueue> queue(new BullMqQueue(location, consumerName, std::move(*scripts)));
    if (!queue->m_connection.open(error))
        return nullptr;
    qCDebug(lcBullMq).noquote() << "connected to" << location.displayName() << "with BullMQ"
                                << queue->m_scripts.version() << "scripts from" << queue->m_scripts.folder();
    return queue;
}

RedisEndpoint BullMqQueue::endpoint() const
{
    return RedisEndpoint::of(location(), bullMqDetails(location()).database);
}

QByteArray BullMqQueue::keyPrefix() const
{
    return BullMqQueueName{bullMqDetails(location()).prefix, location().name}.keyPrefix();
}

QByteArray BullMqQueue::key(const QByteArray &part) const
{
    return keyPrefix() + part;
}

QByteArrayList BullMqQueue::script(const char *name, const QByteArrayList &keysAndArguments) const
{
    return m_scripts.evalsha(name, keysAndArguments);
}

QString BullMqQueue::describe(const QString &what) const
{
    return m_connection.describe(what);
}

std::unique_ptr<BrokerQueue::MessageWatch> BullMqQueue::watchMessages(std::function<void()> wake) const
{
    return std::make_unique<BullMqMarkerWatch>(
        endpoint(), key("marker"), std::move(wake));
}

bool BullMqQueue::declareTopology(const QueueTopology &, QString *)
{
    return true; // BullMQ's scripts make every key as they need it
}

QString BullMqQueue::describeTopology(const QueueTopology &) const
{
    return QStringLiteral(
        "BullMQ needs nothing declared: its scripts make every key as a job needs it; a job's "
        "own attempts and backoff override --max-attempts");
}

// Adds each message as a job, as Queue.add(name, data) does: addStandardJob, or
// addDelayedJob for a delay. The job carries no "attempts", so the worker's own
// --max-attempts applies to it, and its id is BullMQ's own counter.
bool BullMqQueue::enqueue(const QList<OutgoingMessage> &messages, QString *error)
{
    if (messages.isEmpty())
        return true;
    const qint64 now = nowMs();
    QList<QByteArrayList> commands;
    for (const OutgoingMessage &message : messages) {
        MsgPackWriter arguments;
        arguments.array(10).string(keyPrefix()).string({}).string("reminder").integer(now);
        for (int i = 0; i < 6; ++i)
            arguments.nil(); // parent key, dependencies key, parent, repeat key, dedup key, defer
        MsgPackWriter opts;
        if (message.delayMs > 0)
            opts.map(1).string("delay").integer(message.delayMs);
        else
            opts.map(0);
        const QByteArray data = message.payload;
        commands.append(
            message.delayMs > 0
                ? script("addDelayedJob",
                         {key("marker"), key("meta"), key("id"), key("delayed"), key("completed"),
                          key("events"), arguments.bytes(), data, opts.bytes()})
                : script("addStandardJob", {key("wait"), key("paused"), key("meta"), key("id"),
                                            key("completed"), key("delayed"), key("active"), key("events"),
                                            key("marker"), arguments.bytes(), data, opts.bytes()}));
    }
    const auto replies = m_connection.pipeline(commands, error);
    if (!replies)
        return false;
    for (const auto &reply : *replies) {
        if (isError(reply.get())) {
            *error = describe(QStringLiteral("BullMQ did not add a job: %1")
                                  .arg(QString::fromUtf8(errorText(reply.get()))));
            return false;
        }
    }
    return true;
}

// moveToActive, as Worker.moveToActive calls it; it also promotes the delayed jobs that
// are due, and returns nothing while the queue is paused or rate limited.
QList<QueueMessage> BullMqQueue::lease(int max, qint64 leaseMs, const QString &, QString *error)
{
    if (max <= 0)
        return {};
    startWorkerTimers(leaseMs);
    const qint64 now = nowMs();
    QByteArrayList tokens; // of the moveToActive calls in commands, in order
    const auto moveToActive = [&] {
        tokens.append(m_tokenBase + ':' + number(qint64(++m_tokens)));
        MsgPackWriter opts;
        opts.map(3)
            .string("token")
            .string(tokens.last())
            .string("lockDuration")
            .integer(leaseMs)
            .string("name")
            .string(m_workerName);
        return script("moveToActive",
                      {key("wait"), key("active"), key("prioritized"), key("events"), key("stalled"),
                       key("limiter"), key("delayed"), key("paused"), key("meta"), key("pc"), key("marker"),
                       keyPrefix(), number(now), opts.bytes()});
    };
    // First one job and how many wait; then as many more as wait and fit, in one trip.
    QList<QByteArrayList> commands{{"LLEN", key("wait")}, {"ZCARD", key("prioritized")}};
    commands.append(moveToActive());
    QList<QueueMessage> messages;
    // The jobs of the first round are locked with this worker's tokens and renewed by it:
    // if the second round fails, they are handed to the engine all the same (an error
    // would make it drop them, and the lock timer would keep them active for good).
    const auto failed = [&](const QString &why) {
        if (messages.isEmpty())
            *error = why;
        else
            qCWarning(lcBullMq).noquote() << "took" << messages.size() << "jobs, then:" << why;
        return messages;
    };
    for (int round = 0; round < 2 && !commands.isEmpty(); ++round) {
        const size_t firstScript = size_t(commands.size() - tokens.size());
        QString roundError;
        const auto replies = m_connection.pipeline(commands, &roundError);
        if (!replies)
            return failed(roundError);
        for (const auto &reply : *replies) {
            if (isError(reply.get())) {
                const QByteArray text = errorText(reply.get());
                if (text.startsWith("NOSCRIPT"))
                    m_connection.close(); // reconnecting loads them again
                return failed(
                    describe(QStringLiteral("moveToActive failed: %1").arg(QString::fromUtf8(text))));
            }
        }
        const qint64 waiting =
            round == 0 ? integer(replies->at(0).get()).value_or(0) + integer(replies->at(1).get()).value_or(0)
                       : 0;
        const QByteArrayList tokensOfRound = tokens;
        commands.clear();
        tokens.clear();
        bool gotOne = false;
        for (size_t i = firstScript; i < replies->size(); ++i) {
            const redisReply *reply = replies->at(i).get();
            const redisReply *job = element(reply, 0);
            if (elementCount(job) == 0)
                continue; // {0, 0, rate limit, next delayed}: nothing for us
            const QHash<QByteArray, QByteArray> fields = fieldMap(job);
            const QString jobId = bullMqJobIdText(bytes(element(reply, 1)));
            ActiveJob active;
            active.token = tokensOfRound.at(qsizetype(i - firstScript));
            active.delivery = std::max(1, fields.value("ats").toInt());
            active.opts = QJsonDocument::fromJson(fields.value("opts")).object();
            active.stacktrace = QJsonDocument::fromJson(fields.value("stacktrace")).array();
            QueueMessage message;
            // Stalled more often than maxStalledCount allows: the stalled checker put it back
            // with a deferred failure ("defa"), which the worker that takes it must apply
            // instead of running the job, as Worker.getUnrecoverableErrorMessage does. The
            // engine fails it, after the ledger has said what became of its key.
            message.failUnsent = QString::fromUtf8(fields.value("defa"));
            message.id = jobId;
            message.payload = fields.value("data");
            message.delivery = active.delivery;
            message.enqueuedAtMs = fields.value("timestamp").toLongLong();
            message.leaseUntilMs = now + leaseMs;
            message.retryRule = retryRuleOf(active.opts, fields.value("atm").toInt());
            m_active.insert(jobId, std::move(active));
            messages.append(std::move(message));
            gotOne = true;
        }
        const qint64 more = std::min<qint64>(max - messages.size(), waiting - 1);
        if (round == 0 && gotOne) {
            for (qint64 i = 0; i < more; ++i)
                commands.append(moveToActive());
        }
    }
    if (!messages.isEmpty())
        qCDebug(lcBullMq) << "took" << messages.size() << "jobs";
    return messages;
}

// The opts of moveToFinished, as Worker's moveToFinishedArgs packs them.
QByteArray BullMqQueue::finishOptions(const ActiveJob &job, bool completed) const
{
    MsgPackWriter opts;
    opts.map(10).string("token").string(job.token).string("name").string(m_workerName).string("keepJobs");
    writeKeepJobs(
        opts, job.opts.value(completed ? QLatin1String("removeOnComplete") : QLatin1String("removeOnFail")));
    opts.string("lockDuration")
        .integer(m_lockMs)
        .string("attempts")
        .integer(job.opts.value(QLatin1String("attempts")).toInt())
        .string("maxMetricsSize")
        .string({}) // no metrics kept, as a worker without metrics options
        .string("fpof")
        .boolean(job.opts.value(QLatin1String("fpof")).toBool())
        .string("cpof")
        .boolean(job.opts.value(QLatin1String("cpof")).toBool())
        .string("idof")
        .boolean(job.opts.value(QLatin1String("idof")).toBool())
        .string("rdof")
        .boolean(job.opts.value(QLatin1String("rdof")).toBool());
    return opts.bytes();
}

QByteArrayList BullMqQueue::settlementScript(const QString &jobIdText, const ActiveJob &job,
                                             const Settlement &settlement) const
{
    const QByteArray jobId = bullMqJobId(jobIdText);
    const QByteArray now = number(nowMs());
    // A failure goes where a Node worker writes its error: failedReason, and one more
    // entry of the stack trace list (within the job's stackTraceLimit).
    const auto failureFields = [&](const QString &reason, const QByteArrayList &more = {}) {
        QJsonArray stacktrace = job.stacktrace;
        stacktrace.append(
            QStringLiteral("Error: %1\n    at once worker %2").arg(reason, QString::fromUtf8(m_workerName)));
        const QJsonValue limit = job.opts.value(QLatin1String("stackTraceLimit"));
        if (limit.isDouble()) {
            while (stacktrace.size() > boundedInteger(limit, 0, INT_MAX, 0))
                stacktrace.removeFirst();
        }
        return MsgPackWriter::stringArray(
            QByteArrayList{"failedReason", reason.toUtf8(), "stacktrace",
                           QJsonDocument(stacktrace).toJson(QJsonDocument::Compact)} +
            more);
    };
    // moveToFinished to completed or failed, as Worker's moveToFinishedArgs builds it.
    const auto moveToFinished = [&](bool completed, const QByteArray &value, const QByteArray &fields) {
        const QByteArray target = completed ? "completed" : "failed";
        return script("moveToFinished",
                      {key("wait"), key("active"), key("prioritized"), key("events"), key("stalled"), key("limiter"),
                       key("delayed"), key("paused"), key("meta"), key("pc"), key(target), keyPrefix() + jobId,
                       key("metrics:" + target), key("marker"), jobId, now,
                       completed ? "returnvalue" : "failedReason", value, target, "0", keyPrefix(),
                       finishOptions(job, completed), fields});
    };
    switch (settlement.kind) {
    case Settlement::Kind::Ack:
        // One that did not take effect (held in doubt, its key dead-lettered) is failed, not
        // completed: Bull Board and QueueEvents must not show a reminder as done that was not.
        if (!settlement.failure.isEmpty())
            return moveToFinished(false, settlement.failure.toUtf8(), failureFields(settlement.failure));
        return moveToFinished(true, "null", {});
    case Settlement::Kind::DeadLetter: {
        const DeadLetterInfo &info = settlement.deadLetter;
        const QString reason = info.lastError.isEmpty() ? info.errorClass : info.lastError;
        // once's account of the letter (send key, error class, attempts) rides in the job
        // hash beside BullMQ's fields, for `once dead-letters` and the console.
        const QByteArray account =
            QJsonDocument(deadLetterAccount(settlement, nowMs())).toJson(QJsonDocument::Compact);
        return moveToFinished(false, reason.toUtf8(), failureFields(reason, {"onceDeadLetter", account}));
    }
    case Settlement::Kind::Retry:
        break;
    }
    // A send that failed is an attempt, as a Node worker's thrown error is: after a delay
    // the job waits in delayed (moveToDelayed), else it goes back to wait (retryJob). A
    // delivery handed back unsent is none: moveToDelayed skips the attempt.
    if (!settlement.failure.isEmpty() && settlement.delayMs <= 0) {
        const bool lifo = job.opts.value(QLatin1String("lifo")).toBool();
        return script("retryJob", {key("active"), key("wait"), key("paused"), keyPrefix() + jobId,
                                   key("meta"), key("events"), key("delayed"), key("prioritized"), key("pc"),
                                   key("marker"), key("stalled"), keyPrefix(), now, lifo ? "RPUSH" : "LPUSH",
                                   jobId, job.token, failureFields(settlement.failure)});
    }
    return script("moveToDelayed",
                  {key("marker"),
                   key("active"),
                   key("prioritized"),
                   key("delayed"),
                   keyPrefix() + jobId,
                   key("events"),
                   key("meta"),
                   key("stalled"),
                   key("wait"),
                   key("limiter"),
                   key("pc"),
                   keyPrefix(),
                   now,
                   jobId,
                   job.token,
                   number(std::max<qint64>(0, settlement.delayMs)),
                   settlement.failure.isEmpty() ? "1" : "0",
                   settlement.failure.isEmpty() ? QByteArray() : failureFields(settlement.failure),
                   "0",
                   {}});
}

bool BullMqQueue::settle(const QList<Settlement> &settlements, QString *error)
{
    QList<QByteArrayList> commands;
    QStringList jobIds;
    for (const Settlement &settlement : settlements) {
        const auto job = m_active.constFind(settlement.messageId);
        if (job == m_active.cend() || job->delivery != settlement.delivery) {
            qCDebug(lcBullMq) << "no lock of job" << settlement.messageId << "delivery" << settlement.delivery
                              << "to settle";
            continue;
        }
        commands.append(settlementScript(job.key(), *job, settlement));
        jobIds.append(job.key());
    }
    if (commands.isEmpty())
        return true;
    // The engine does not settle a job twice: whatever happens below, its lock is no
    // longer renewed, so that a job whose settlement failed runs out of lock, the stalled
    // checker puts it back, and the ledger answers it as a duplicate.
    for (const QString &jobId : std::as_const(jobIds))
        m_active.remove(jobId);
    const auto replies = m_connection.pipeline(commands, error);
    if (!replies)
        return false;
    bool ok = true;
    for (size_t i = 0; i < replies->size(); ++i) {
        const redisReply *reply = replies->at(i).get();
        const QString &jobId = jobIds.at(qsizetype(i));
        if (isError(reply)) {
            const QByteArray text = errorText(reply);
            if (text.startsWith("NOSCRIPT"))
                m_connection.close();
            *error =
                describe(QStringLiteral("settling job %1 failed: %2").arg(jobId, QString::fromUtf8(text)));
            ok = false;
            continue;
        }
        // A lost lock: another worker took the job after it stalled here. The ledger
        // holds its send key, so that worker's delivery is a recorded no-op or a resend
        // with the same Idempotency-Key: left to it.
        if (const auto code = integer(reply); code && *code < 0)
            qCWarning(lcBullMq).noquote() << "job" << jobId << "was not settled:" << scriptCodeText(*code);
    }
    return ok;
}

std::optional<QueueCounts> BullMqQueue::counts(QString *error)
{
    const auto replies = m_connection.pipeline({{"LLEN", key("wait")},
                                                {"ZCARD", key("prioritized")},
                                                {"LLEN", key("active")},
                                                {"ZCARD", key("delayed")},
                                                {"ZCARD", key("failed")},
                                                {"ZRANGE", key("delayed"), "0", "0", "WITHSCORES"},
                                                {"LINDEX", key("wait"), "-1"}},
                                               error);
    if (!replies)
        return std::nullopt;
    for (const auto &reply : *replies) {
        if (isError(reply.get())) {
            *error = describe(
                QStringLiteral("cannot count the queue: %1").arg(QString::fromUtf8(errorText(reply.get()))));
            return std::nullopt;
        }
    }
    const auto count = [&](size_t i) { return integer(replies->at(i).get()).value_or(0); };
    QueueCounts counts;
    counts.ready = count(0) + count(1);
    counts.inFlight = count(2);
    counts.delayed = count(3);
    counts.dead = count(4);
    const qint64 now = nowMs();
    // A delayed job's score is its due time times 4096, plus a counter (getDelayedScore).
    const QByteArray score = bytes(element(replies->at(5).get(), 1));
    if (!score.isEmpty()) {
        counts.nextDelayedInMs = std::max<qint64>(0, qint64(score.toDouble() / 4096) - now);
        counts.nextVisibleInMs = counts.nextDelayedInMs;
    }
    const QByteArray oldest = bytes(replies->at(6).get());
    if (!oldest.isEmpty()) {
        const auto timestamp = m_connection.pipeline({{"HGET", keyPrefix() + oldest, "timestamp"}}, error);
        if (timestamp && !isError(timestamp->front().get())) {
            const qint64 at = bytes(timestamp->front().get()).toLongLong();
            if (at > 0)
                counts.oldestReadyAgeMs = std::max<qint64>(0, now - at);
        }
    }
    return counts;
}

std::optional<QByteArrayList> BullMqQueue::moveStalledJobsToWait(QString *error)
{
    const BullMqDetails &details = bullMqDetails(location());
    const auto replies = m_connection.pipeline(
        {script("moveStalledJobsToWait",
                {key("stalled"), key("wait"), key("active"), key("stalled-check"), key("meta"), key("paused"),
                 key("marker"), key("events"), key("repeat"), number(details.maxStalledCount), keyPrefix(),
                 number(nowMs()), number(stalledIntervalMs())})},
        error);
    if (!replies)
        return std::nullopt;
    const redisReply *reply = replies->front().get();
    if (isError(reply)) {
        *error =
            describe(QStringLiteral("the stalled check failed: %1").arg(QString::fromUtf8(errorText(reply))));
        return std::nullopt;
    }
    QByteArrayList stalled;
    for (size_t i = 0; i < elementCount(reply); ++i)
        stalled.append(bytes(element(reply, i)));
    return stalled;
}

qint64 BullMqQueue::stalledIntervalMs() const
{
    constexpr qint64 BullMqDefaultMs = 30000; // before the first lease says the lock
    const qint64 chosen = bullMqDetails(location()).stalledIntervalMs;
    return chosen > 0 ? chosen : m_lockMs > 0 ? m_lockMs : BullMqDefaultMs;
}

// As a Node worker: locks renewed every half lock, the stalled checker at once and then
// every stalledInterval. The timers live on the thread that leases.
void BullMqQueue::startWorkerTimers(qint64 lockMs)
{
    m_lockMs = lockMs;
    if (m_lockTimer)
        return;
    m_lockTimer = std::make_unique<QTimer>();
    m_lockTimer->setInterval(std::chrono::milliseconds(std::max<qint64>(1, lockMs / 2)));
    QObject::connect(m_lockTimer.get(), &QTimer::timeout, m_lockTimer.get(), [this] { renewLocks(); });
    m_lockTimer->start();
    m_stalledTimer = std::make_unique<QTimer>();
    m_stalledTimer->setInterval(std::chrono::milliseconds(stalledIntervalMs()));
    const auto check = [this] {
        QString error;
        const auto stalled = moveStalledJobsToWait(&error);
        if (!stalled) {
            qCWarning(lcBullMq).noquote() << error;
        } else if (!stalled->isEmpty()) {
            QStringList ids; // as text: a job id may hold any byte, a line break too
            for (const QByteArray &id : *stalled)
                ids.append(bullMqJobIdText(id));
            qCInfo(lcBullMq).noquote() << "stalled jobs put back or failed:" << ids.join(u", ");
        }
    };
    QObject::connect(m_stalledTimer.get(), &QTimer::timeout, m_stalledTimer.get(), check);
    m_stalledTimer->start();
    check();
}

void BullMqQueue::renewLocks()
{
    if (m_active.isEmpty())
        return;
    QByteArrayList tokens;
    QByteArrayList jobIds;
    for (auto it = m_active.cbegin(); it != m_active.cend(); ++it) {
        jobIds.append(bullMqJobId(it.key()));
        tokens.append(it->token);
    }
    QString error;
    const auto replies = m_connection.pipeline(
        {script("extendLocks", {key("stalled"), keyPrefix(), MsgPackWriter::stringArray(tokens),
                                MsgPackWriter::stringArray(jobIds), number(m_lockMs)})},
        &error);
    if (!replies) {
        qCWarning(lcBullMq).noquote() << "could not renew the locks:" << error;
        return;
    }
    const redisReply *failed = replies->front().get();
    if (isError(failed)) {
        qCWarning(lcBullMq).noquote() << "could not renew the locks:" << QString::fromUtf8(errorText(failed));
        return;
    }
    for (size_t i = 0; i < elementCount(failed); ++i)
        qCWarning(lcBullMq).noquote() << "lost the lock of job" << bullMqJobIdText(bytes(element(failed, i)))
                                      << "(it stalled; another worker may take it)";
}

// BullMQ's failed set, oldest first: the jobs that failed for good are its dead letters.
std::optional<QList<DeadLetter>> BullMqQueue::failedJobs(int limit, QString *error)
{
    if (limit <= 0)
        return QList<DeadLetter>();
    const auto ids = m_connection.pipeline({{"ZRANGE", key("failed"), "0", number(limit - 1)}}, error);
    if (!ids)
        return std::nullopt;
    if (isError(ids->front().get())) {
        *error = describe(QString::fromUtf8(errorText(ids->front().get())));
        return std::nullopt;
    }
    QList<QByteArrayList> reads;
    QByteArrayList jobIds;
    for (size_t i = 0; i < elementCount(ids->front().get()); ++i) {
        jobIds.append(bytes(element(ids->front().get(), i)));
        reads.append({"HMGET", keyPrefix() + jobIds.last(), "data", "failedReason", "atm", "finishedOn",
                      "timestamp", "onceDeadLetter", "processedOn"});
    }
    QList<DeadLetter> letters;
    if (reads.isEmpty())
        return letters;
    const auto jobs = m_connection.pipeline(reads, error);
    if (!jobs)
        return std::nullopt;
    for (qsizetype i = 0; i < jobIds.size(); ++i) {
        const redisReply *job = jobs->at(size_t(i)).get();
        if (isError(job) || bytes(element(job, 3)).isEmpty())
            continue; // removed meanwhile
        DeadLetter letter;
        letter.id = bullMqJobIdText(jobIds.at(i));
        letter.payload = bytes(element(job, 0));
        letter.errorClass = QStringLiteral("failed");
        letter.lastError = QString::fromUtf8(bytes(element(job, 1)));
        letter.attempts = bytes(element(job, 2)).toInt();
        letter.receiveCount = letter.attempts;
        letter.deadAtMs = bytes(element(job, 3)).toLongLong();
        letter.enqueuedAtMs = bytes(element(job, 4)).toLongLong();
        letter.lastAttemptAtMs = bytes(element(job, 6)).toLongLong();
        const QJsonObject account = QJsonDocument::fromJson(bytes(element(job, 5))).object();
        if (!account.isEmpty()) {
            readDeadLetterAccount(account, &letter);
        } else if (const auto parsed = parseReminder(letter.payload); parsed.reminder) {
            // Failed by a Node worker: what once knows of it is what its data says.
            letter.sendKey = parsed.reminder->sendKey;
            letter.eventId = parsed.reminder->eventId;
        }
        letters.append(std::move(letter));
    }
    return letters;
}

std::optional<QList<DeadLetter>> BullMqQueue::deadLetters(int limit, QString *error)
{
    return failedJobs(limit, error);
}

std::optional<QList<DeadLetter>>
BullMqQueue::redrive(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeFailed(max, select, true, error);
}

std::optional<QList<DeadLetter>>
BullMqQueue::discard(int max, const std::function<bool(const DeadLetter &)> &select, QString *error)
{
    return takeFailed(max, select, false, error);
}

// Redrive is Job.retry('failed') with its attempts made reset (an operator's redrive
// gives the reminder its attempts again); discard is Job.remove(). Each returns only the
// letters this call moved: one another operator or a Node process took is left out.
std::optional<QList<DeadLetter>>
BullMqQueue::takeFailed(int max, const std::function<bool(const DeadLetter &)> &select, bool redrive,
                        QString *error)
{
    const auto head = failedJobs(max, error);
    if (!head)
        return std::nullopt;
    QList<DeadLetter> selected;
    QList<QByteArrayList> commands;
    for (const DeadLetter &letter : *head) {
        if (!select(letter))
            continue;
        const QByteArray jobId = bullMqJobId(letter.id);
        commands.append(
            redrive ? script("reprocessJob", {keyPrefix() + jobId, key("events"), key("failed"), key("wait"),
                                              key("meta"), key("active"), key("marker"), key("prioritized"),
                                              key("pc"), jobId, "LPUSH", "failedReason", "failed", "1", "0"})
                    : script("removeJob", {keyPrefix() + jobId, key("repeat"), jobId, "0", keyPrefix()}));
        selected.append(letter);
    }
    if (commands.isEmpty())
        return selected;
    const auto replies = m_connection.pipeline(commands, error);
    if (!replies)
        return std::nullopt;
    QList<DeadLetter> taken;
    for (qsizetype i = 0; i < selected.size(); ++i) {
        const redisReply *reply = replies->at(size_t(i)).get();
        if (isError(reply)) {
            *error = describe(QString::fromUtf8(errorText(reply)));
            return std::nullopt;
        }
        if (integer(reply).value_or(0) == 1)
            taken.append(selected.at(i));
    }
    return taken;
}

} // namespace once
