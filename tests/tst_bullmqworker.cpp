// `once worker` as a BullMQ worker, against BullMQ 6.7.0 itself on a real Redis (the Redis
// fixture; ONCE_TEST_REDIS_URL_FILE) and the partner simulator: a Node producer's jobs of
// every kind drain as BullMQ's own Queue and QueueEvents expect, failures follow each
// job's own attempts and backoff, jobs pass between once and Node workers both ways, a
// worker SIGKILLed mid-send is recovered by BullMQ's stalled checker without a second
// effect (and a second stall fails the job, as BullMQ does), and scripts of a release
// once does not implement are refused. tests/producers/bullmq-proof.js is BullMQ's side.
#include "deliveryharness.h"

#include "queues/bullmq/bullmqlocation.h"
#include "queues/bullmq/bullmqscripts.h"
#include "queues/redis/redisconnection.h"

#include <QTemporaryDir>
#include <QTest>

#include <csignal>

using namespace oncetest;

class TestBullMqWorker : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void drainsANodeProducersJobsAsBullMqSays();
    void failuresFollowEachJobsOwnAttemptsAndBackoff();
    void jobsPassBetweenOnceAndNodeWorkersBothWays();
    void aMixedFleetAppliesEachJobOnce();
    void honoursPauseAndResume();
    void anIdleWorkerBlocksOnTheMarkerAsNodeWorkersDo();
    void aWorkerKilledMidSendStallsOnceAndFailsOnTheSecond();
    void aJobHeldInDoubtFailsRatherThanCompletes();
    void jobsNoNodeProducerWouldWriteAreWorkedOrFailedNeverFatal();
    void aWorkerPausedPastItsLockChangesNothingWhenItWakes();
    void connectionsCutMidRunLoseNothingAndSendNothingTwice();
    void scriptsOfAnotherReleaseAreRefusedByName();

private:
    QJsonObject node(const QStringList &arguments, int timeoutMs = 60000);
    // bullmq-proof.js add: BullMQ's Queue adds jobs of a kind; its report.
    QJsonObject addJobs(const QString &queue, const QString &kind, const QString &tag, const QStringList &more = {});
    QString addOneJob(const QString &queue); // its id; empty if the producer failed
    QProcess *startNode(const QStringList &arguments);
    QProcess *startWatch(const QString &queue, int finished);
    QJsonObject finish(QProcess *watch);
    QString queueUrl(const QString &queue, const QString &more = {}) const;
    QStringList workerArguments(const QString &queue, quint16 partnerPort, const QString &workerId) const;
    QJsonObject partner(quint16 port, const QByteArray &path);
    static QJsonObject jobById(const QJsonObject &report, const QString &id);
    QByteArray redis(const QByteArrayList &command);

    QTemporaryDir m_dir;
    QString m_redisUrl;
    QString m_producers;
    QString m_scripts;
    QString m_tag;
    std::unique_ptr<OnceRunner> m_once;
    std::vector<std::unique_ptr<QProcess>> m_node;
};

void TestBullMqWorker::initTestCase()
{
    QFile file(qEnvironmentVariable("ONCE_TEST_REDIS_URL_FILE"));
    QVERIFY2(file.open(QIODevice::ReadOnly),
             "set ONCE_TEST_REDIS_URL_FILE to the url file of scripts/redis-server start DIR (ctest does)");
    m_redisUrl = QString::fromUtf8(file.readAll().trimmed());
    m_producers = qEnvironmentVariable("ONCE_TEST_PRODUCERS");
    m_scripts = QDir(m_producers).filePath(QStringLiteral("node_modules/bullmq/dist/cjs/commands"));
    QVERIFY2(QFileInfo::exists(m_scripts),
             qPrintable(m_scripts + QStringLiteral(": run npm ci in tests/producers")));
    QVERIFY(m_dir.isValid());
    m_tag = QStringLiteral("once-%1").arg(QCoreApplication::applicationPid());
    const QString store = QStringLiteral("sqlite:") + m_dir.filePath(QStringLiteral("once.db"));
    m_once = std::make_unique<OnceRunner>(qEnvironmentVariable("ONCE_BIN"), store);
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

QJsonObject TestBullMqWorker::node(const QStringList &arguments, int timeoutMs)
{
    QProcess process;
    process.setWorkingDirectory(m_producers);
    process.start(QStringLiteral("node"), QStringList{QStringLiteral("bullmq-proof.js")} + arguments +
                                              QStringList{QStringLiteral("--url"), m_redisUrl});
    if (!process.waitForFinished(timeoutMs) || process.exitCode() != 0) {
        qWarning("node bullmq-proof.js %s: %s", qPrintable(arguments.join(u' ')),
                 process.readAllStandardError().constData());
        return {};
    }
    // The report is the last line ("watch" says "ready" first).
    return QJsonDocument::fromJson(process.readAllStandardOutput().trimmed().split('\n').last()).object();
}

QJsonObject TestBullMqWorker::addJobs(const QString &queue, const QString &kind, const QString &tag,
                                      const QStringList &more)
{
    return node(QStringList{QStringLiteral("add"), QStringLiteral("--queue"), queue, QStringLiteral("--kind"), kind,
                            QStringLiteral("--tag"), tag} +
                more);
}

QString TestBullMqWorker::addOneJob(const QString &queue)
{
    const QJsonArray jobs = addJobs(queue, QStringLiteral("single"), queue).value(QLatin1String("jobs")).toArray();
    return jobs.size() == 1 ? jobs.first().toObject().value(QLatin1String("id")).toString() : QString();
}

QProcess *TestBullMqWorker::startNode(const QStringList &arguments)
{
    auto process = std::make_unique<QProcess>();
    process->setWorkingDirectory(m_producers);
    process->start(QStringLiteral("node"), QStringList{QStringLiteral("bullmq-proof.js")} + arguments +
                                               QStringList{QStringLiteral("--url"), m_redisUrl});
    m_node.push_back(std::move(process));
    return m_node.back().get();
}

QProcess *TestBullMqWorker::startWatch(const QString &queue, int finished)
{
    QProcess *watch = startNode({QStringLiteral("watch"), QStringLiteral("--queue"), queue,
                                 QStringLiteral("--finished"), QString::number(finished)});
    if (!pumpUntil([watch] { return watch->canReadLine() || watch->state() == QProcess::NotRunning; },
                   20000) ||
        watch->readLine().trimmed() != "ready") {
        qWarning("watch did not start: %s", watch->readAllStandardError().constData());
        return nullptr;
    }
    return watch;
}

QJsonObject TestBullMqWorker::finish(QProcess *watch)
{
    if (!watch || !pumpUntil([watch] { return watch->state() == QProcess::NotRunning; }, 90000))
        return {};
    const QJsonObject report = QJsonDocument::fromJson(watch->readAllStandardOutput()).object();
    if (report.isEmpty())
        qWarning("watch said: %s", watch->readAllStandardError().constData());
    return report;
}

QString TestBullMqWorker::queueUrl(const QString &queue, const QString &more) const
{
    QString url = m_redisUrl;
    url.replace(QStringLiteral("redis://"), QStringLiteral("bullmq://"));
    return url + QStringLiteral("?queue=") + queue + more;
}

QStringList TestBullMqWorker::workerArguments(const QString &queue, quint16 partnerPort,
                                              const QString &workerId) const
{
    return {QStringLiteral("worker"),
            QStringLiteral("--queue"),
            queueUrl(queue),
            QStringLiteral("--bullmq-scripts"),
            m_scripts,
            QStringLiteral("--partner"),
            QStringLiteral("http://127.0.0.1:%1/reminders").arg(partnerPort),
            QStringLiteral("--worker-id"),
            workerId,
            QStringLiteral("--until-idle")};
}

QJsonObject TestBullMqWorker::partner(quint16 port, const QByteArray &path)
{
    QString error;
    const QByteArray body = httpGet(port, path, &error);
    if (!error.isEmpty())
        qWarning("partner %s: %s", path.constData(), qPrintable(error));
    return QJsonDocument::fromJson(body).object();
}

QJsonObject TestBullMqWorker::jobById(const QJsonObject &report, const QString &id)
{
    for (const QJsonValue job : report.value(QLatin1String("jobs")).toArray()) {
        if (job.toObject().value(QLatin1String("id")).toString() == id)
            return job.toObject();
    }
    return {};
}

// One command at the test server: a string reply's bytes, an integer reply in digits,
// nil as empty. A server that cannot be asked ends the suite: every check that reads it
// would otherwise pass or fail by accident.
QByteArray TestBullMqWorker::redis(const QByteArrayList &command)
{
    QString error;
    const auto location = once::QueueLocation::parse(queueUrl(m_tag), &error);
    if (!location)
        qFatal("%s", qPrintable(error));
    once::RedisConnection connection(
        once::RedisEndpoint::of(*location, once::bullMqDetails(*location).database), {});
    const auto replies = connection.pipeline({command}, &error);
    if (!replies || once::redisreply::isError(replies->front().get()))
        qFatal("%s: %s", command.first().constData(),
               replies ? once::redisreply::errorText(replies->front().get()).constData() : qPrintable(error));
    const redisReply *reply = replies->front().get();
    const auto number = once::redisreply::integer(reply);
    return number ? QByteArray::number(*number) : once::redisreply::bytes(reply);
}

// Scenario 1: plain, delayed, prioritized, attempts-with-backoff, deduplicated and
// custom-id jobs (the last two added twice) from BullMQ's Queue, drained by once.
void TestBullMqWorker::drainsANodeProducersJobsAsBullMqSays()
{
    const QString queue = m_tag + QStringLiteral("-mixed");
    const QJsonObject added =
        addJobs(queue, QStringLiteral("mixed"), queue);
    const QJsonArray jobs = added.value(QLatin1String("jobs")).toArray();
    QCOMPARE(jobs.size(), 10); // the deduplicated and the custom-id job once each
    QProcess *watch = startWatch(queue, int(jobs.size()));
    QVERIFY(watch);
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);

    const auto worker = m_once->run(workerArguments(queue, port, QStringLiteral("once-proof")), {}, 60000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const QJsonObject report = finish(watch);
    QVERIFY(!report.isEmpty());

    const QJsonObject counts = report.value(QLatin1String("counts")).toObject();
    for (auto it = counts.constBegin(); it != counts.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == (it.key() == QLatin1String("completed") ? jobs.size() : 0),
                 QJsonDocument(counts).toJson(QJsonDocument::Compact).constData());
    QStringList completed;
    for (const QJsonValue id :
         report.value(QLatin1String("events")).toObject().value(QLatin1String("completed")).toArray())
        completed.append(id.toString());
    QStringList ids;
    for (const QJsonValue job : jobs) {
        const QString id = job.toObject().value(QLatin1String("id")).toString();
        ids.append(id);
        const QJsonObject seen = jobById(report, id);
        QCOMPARE(seen.value(QLatin1String("state")).toString(), QStringLiteral("completed"));
        QCOMPARE(seen.value(QLatin1String("attemptsMade")).toInt(), 1);
        QCOMPARE(seen.value(QLatin1String("processedBy")).toString(), QStringLiteral("once-proof"));
    }
    completed.sort();
    ids.sort();
    QCOMPARE(completed, ids);
    bool listed = false;
    for (const QJsonValue name : report.value(QLatin1String("workers")).toArray())
        listed = listed || name.toString().endsWith(QLatin1String(":w:once-proof"));
    QVERIFY2(listed, QJsonDocument(report.value(QLatin1String("workers")).toArray()).toJson().constData());

    // One effect per reminder at the partner, and the ledger says so too.
    const QJsonObject effects = partner(port, "/effects");
    QCOMPARE(effects.size(), added.value(QLatin1String("reminders")).toInt());
    for (auto it = effects.constBegin(); it != effects.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == 1, qPrintable(it.key()));
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("acked"), jobs.size()},
                                                       {QStringLiteral("applied_last_5m"), jobs.size()}}));
}

// Against a partner that answers 503 to everything: each job fails after the attempts it
// asked for (BullMQ's default is one), its backoff between them, with BullMQ's own
// failedReason, stack trace entries and retries-exhausted event.
void TestBullMqWorker::failuresFollowEachJobsOwnAttemptsAndBackoff()
{
    const QString queue = m_tag + QStringLiteral("-failing");
    const QJsonObject added =
        addJobs(queue, QStringLiteral("failing"), queue);
    const QJsonArray jobs = added.value(QLatin1String("jobs")).toArray();
    QCOMPARE(jobs.size(), 3);
    QProcess *watch = startWatch(queue, int(jobs.size()));
    QVERIFY(watch);
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--fail-rate"), QStringLiteral("1")});
    QVERIFY(port);

    const auto worker = m_once->run(workerArguments(queue, port, QStringLiteral("once-failing")), {}, 60000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const QJsonObject report = finish(watch);
    QVERIFY(!report.isEmpty());
    const QJsonObject events = report.value(QLatin1String("events")).toObject();
    int sends = 0;
    for (const QJsonValue value : jobs) {
        const QJsonObject job = value.toObject();
        const QString id = job.value(QLatin1String("id")).toString();
        const int attempts = std::max(1, job.value(QLatin1String("attempts")).toInt());
        sends += attempts;
        const QJsonObject seen = jobById(report, id);
        const QByteArray shown = QJsonDocument(seen).toJson(QJsonDocument::Compact);
        QCOMPARE(seen.value(QLatin1String("state")).toString(), QStringLiteral("failed"));
        QVERIFY2(seen.value(QLatin1String("attemptsMade")).toInt() == attempts, shown.constData());
        QVERIFY2(seen.value(QLatin1String("failedReason")).toString().contains(QLatin1String("HTTP 503")),
                 shown.constData());
        QVERIFY2(seen.value(QLatin1String("stacktrace")).toArray().size() == attempts, shown.constData());
        QVERIFY2(events.value(QLatin1String("failed")).toArray().contains(id), shown.constData());
        QVERIFY2(events.value(QLatin1String("retries-exhausted")).toArray().contains(id), shown.constData());
    }
    QCOMPARE(events.value(QLatin1String("failed")).toArray().size(), jobs.size());
    // Every attempt reached the partner, and no more.
    QCOMPARE(partner(port, "/stats").value(QLatin1String("requests")).toInt(), sends);
    QCOMPARE(report.value(QLatin1String("counts")).toObject().value(QLatin1String("failed")).toInt(),
             jobs.size());

    // Retried from Node (job.retry(), Bull Board's button), they come back to once, whose
    // ledger holds their keys dead-lettered: not sent again, and failed once more with
    // a reason that says where a redrive is decided, never shown completed.
    QCOMPARE(node({QStringLiteral("retry"), QStringLiteral("--queue"), queue})
                 .value(QLatin1String("retried"))
                 .toArray()
                 .size(),
             jobs.size());
    watch = startWatch(queue, int(jobs.size()));
    QVERIFY(watch);
    const auto again = m_once->run(workerArguments(queue, port, QStringLiteral("once-failing")), {}, 60000);
    QVERIFY2(again.exitedWith(0), again.describe().constData());
    const QJsonObject retried = finish(watch);
    for (const QJsonValue value : jobs) {
        const QJsonObject seen = jobById(retried, value.toObject().value(QLatin1String("id")).toString());
        QVERIFY2(
            seen.value(QLatin1String("state")).toString() == QLatin1String("failed") &&
                seen.value(QLatin1String("failedReason")).toString().contains(QLatin1String("dead-lettered")),
            QJsonDocument(seen).toJson(QJsonDocument::Compact).constData());
    }
    QCOMPARE(partner(port, "/stats").value(QLatin1String("requests")).toInt(), sends);
}

// Scenario 2: jobs once failed are retried with job.retry() and finished by a Node
// worker; jobs a Node worker failed are redriven by an operator (`once redrive`, the
// console's action) and finished by once.
void TestBullMqWorker::jobsPassBetweenOnceAndNodeWorkersBothWays()
{
    const quint16 failing = m_once->startPartnerSim({QStringLiteral("--fail-rate"), QStringLiteral("1")});
    const quint16 healthy = m_once->startPartnerSim();
    QVERIFY(failing && healthy);
    const auto partnerUrl = [](quint16 port) {
        return QStringLiteral("http://127.0.0.1:%1/reminders").arg(port);
    };

    // once fails them; Node retries and finishes them.
    const QString toNode = m_tag + QStringLiteral("-to-node");
    QCOMPARE(addJobs(toNode, QStringLiteral("one-try"), toNode)
                 .value(QLatin1String("jobs"))
                 .toArray()
                 .size(),
             2);
    auto worker = m_once->run(workerArguments(toNode, failing, QStringLiteral("once-handback")), {}, 60000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const QJsonArray retried = node({QStringLiteral("retry"), QStringLiteral("--queue"), toNode})
                                   .value(QLatin1String("retried"))
                                   .toArray();
    QCOMPARE(retried.size(), 2);
    const QJsonObject nodeRun =
        node({QStringLiteral("work"), QStringLiteral("--queue"), toNode, QStringLiteral("--partner"),
              partnerUrl(healthy), QStringLiteral("--count"), QStringLiteral("2")});
    QCOMPARE(nodeRun.value(QLatin1String("completed")).toInt(), 2);

    // A Node worker fails them; an operator redrives them; once finishes them.
    const QString toOnce = m_tag + QStringLiteral("-to-once");
    QCOMPARE(addJobs(toOnce, QStringLiteral("one-try"), toOnce)
                 .value(QLatin1String("jobs"))
                 .toArray()
                 .size(),
             2);
    QCOMPARE(node({QStringLiteral("work"), QStringLiteral("--queue"), toOnce, QStringLiteral("--partner"),
                   partnerUrl(failing), QStringLiteral("--count"), QStringLiteral("2")})
                 .value(QLatin1String("failed"))
                 .toInt(),
             2);
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--queue"), queueUrl(toOnce),
                                      QStringLiteral("--bullmq-scripts"), m_scripts, QStringLiteral("--all"),
                                      QStringLiteral("--reason"), QStringLiteral("partner back")});
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    QProcess *watch = startWatch(toOnce, 2);
    QVERIFY(watch);
    worker = m_once->run(workerArguments(toOnce, healthy, QStringLiteral("once-handback")), {}, 60000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const QJsonObject report = finish(watch);
    const QJsonArray jobs = report.value(QLatin1String("jobs")).toArray();
    QCOMPARE(jobs.size(), 2);
    for (const QJsonValue job : jobs) {
        const QByteArray shown = QJsonDocument(job.toObject()).toJson(QJsonDocument::Compact);
        QVERIFY2(job.toObject().value(QLatin1String("state")).toString() == QLatin1String("completed"),
                 shown.constData());
        QVERIFY2(job.toObject().value(QLatin1String("processedBy")).toString() ==
                     QLatin1String("once-handback"),
                 shown.constData());
    }
    // Four reminders took effect, each once: two from Node, two from once.
    const QJsonObject effects = partner(healthy, "/effects");
    QCOMPARE(effects.size(), 4);
    for (auto it = effects.constBegin(); it != effects.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == 1, qPrintable(it.key()));
}

// Scenario 3: once and a plain Node worker on the same 5,000 jobs, side by side: every
// job completed, each by one of them, and each sent once.
void TestBullMqWorker::aMixedFleetAppliesEachJobOnce()
{
    constexpr int Jobs = 5000;
    const QString queue = m_tag + QStringLiteral("-fleet");
    const QJsonObject added =
        node({QStringLiteral("add"), QStringLiteral("--queue"), queue, QStringLiteral("--kind"),
              QStringLiteral("bulk"), QStringLiteral("--count"), QString::number(Jobs),
              QStringLiteral("--tag"), queue},
             120000);
    QVERIFY2(added.value(QLatin1String("jobs")).toArray().size() == Jobs,
             QJsonDocument(added).toJson().left(300).constData());
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--latency-ms"), QStringLiteral("2")});
    QVERIFY(port);
    QProcess *nodeWorker =
        startNode({QStringLiteral("work"), QStringLiteral("--queue"), queue, QStringLiteral("--partner"),
                   QStringLiteral("http://127.0.0.1:%1/reminders").arg(port), QStringLiteral("--count"),
                   QStringLiteral("0")});
    const auto worker = m_once->run(workerArguments(queue, port, QStringLiteral("once-fleet")) +
                                        QStringList{QStringLiteral("--concurrency"), QStringLiteral("10")},
                                    {}, 120000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QVERIFY(pumpUntil([nodeWorker] { return nodeWorker->state() == QProcess::NotRunning; }, 120000));
    QVERIFY2(nodeWorker->exitCode() == 0, nodeWorker->readAllStandardError().constData());

    const QJsonObject summary = node({QStringLiteral("summary"), QStringLiteral("--queue"), queue});
    const QByteArray shown = QJsonDocument(summary).toJson(QJsonDocument::Compact);
    const QJsonObject counts = summary.value(QLatin1String("counts")).toObject();
    for (auto it = counts.constBegin(); it != counts.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == (it.key() == QLatin1String("completed") ? Jobs : 0),
                 shown.constData());
    const QJsonObject by = summary.value(QLatin1String("processedBy")).toObject();
    QVERIFY2(by.value(QLatin1String("once-fleet")).toInt() > 0 &&
                 by.value(QLatin1String("node-peer")).toInt() > 0,
             shown.constData());
    QVERIFY2(by.value(QLatin1String("once-fleet")).toInt() + by.value(QLatin1String("node-peer")).toInt() ==
                 Jobs,
             shown.constData());
    QCOMPARE(partner(port, "/stats").value(QLatin1String("requests")).toInt(), Jobs);
    const QJsonObject effects = partner(port, "/effects");
    QCOMPARE(effects.size(), Jobs);
    for (auto it = effects.constBegin(); it != effects.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == 1, qPrintable(it.key()));
}

// queue.pause() from Node stops once taking jobs; queue.resume() lets it go on.
void TestBullMqWorker::honoursPauseAndResume()
{
    const QString queue = m_tag + QStringLiteral("-paused");
    const auto proof = [&](const QString &command) {
        return node({command, QStringLiteral("--queue"), queue});
    };
    QCOMPARE(proof(QStringLiteral("pause")).value(QLatin1String("paused")).toBool(), true);
    QVERIFY(!addOneJob(queue).isEmpty());
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);
    QStringList arguments = workerArguments(queue, port, QStringLiteral("once-paused"));
    arguments.removeLast(); // no --until-idle: it runs until stopped
    QProcess *worker = m_once->start(arguments);
    // Two seconds of polls on a paused queue: nothing taken, nothing sent.
    pumpUntil([] { return false; }, 2000);
    QCOMPARE(worker->state(), QProcess::Running);
    QCOMPARE(partner(port, "/stats").value(QLatin1String("requests")).toInt(), 0);
    const QJsonObject whilePaused = proof(QStringLiteral("inspect")).value(QLatin1String("counts")).toObject();
    QVERIFY2(whilePaused.value(QLatin1String("waiting")).toInt() + whilePaused.value(QLatin1String("paused")).toInt() == 1
                 && whilePaused.value(QLatin1String("active")).toInt() == 0,
             QJsonDocument(whilePaused).toJson(QJsonDocument::Compact).constData());

    QCOMPARE(proof(QStringLiteral("resume")).value(QLatin1String("paused")).toBool(), false);
    QVERIFY(pumpUntil([&] { return partner(port, "/stats").value(QLatin1String("requests")).toInt() == 1; }, 15000));
    QVERIFY(pumpUntil(
        [&] {
            return proof(QStringLiteral("inspect")).value(QLatin1String("counts")).toObject().value(QLatin1String("completed")).toInt() == 1;
        },
        15000));
    worker->terminate();
    const ProcessResult stopped = m_once->waitFor(worker, 30000);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());
}

// Between jobs a Node worker blocks on the queue's marker (BZPOPMIN), which BullMQ's
// scripts fill when a job becomes ready or a delayed one is next due; so does once,
// instead of asking moveToActive ten times a second. It still wakes for a new job and
// for a delayed one when it is due.
void TestBullMqWorker::anIdleWorkerBlocksOnTheMarkerAsNodeWorkersDo()
{
    const QString queue = m_tag + QStringLiteral("-idle");
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);
    QStringList arguments = workerArguments(queue, port, QStringLiteral("once-idle"));
    arguments.removeLast(); // no --until-idle: it waits for jobs
    QProcess *worker = m_once->start(arguments);
    QVERIFY2(pumpUntil(
                 [&] {
                     return redis({"CLIENT", "LIST"}).contains("cmd=bzpopmin");
                 },
                 15000),
             redis({"CLIENT", "LIST"}).constData());

    // Three idle seconds: a few moveToActive calls (the engine's one-second poll), not
    // the dozens of a worker that polls.
    const auto scriptCalls = [&] {
        const QByteArray stats = redis({"INFO", "commandstats"});
        const qsizetype at = stats.indexOf("cmdstat_evalsha:calls=");
        return at < 0 ? 0 : stats.mid(at + 22, stats.indexOf(',', at) - at - 22).toLongLong();
    };
    const qint64 before = scriptCalls();
    pumpUntil([] { return false; }, 3000);
    const qint64 calls = scriptCalls() - before;
    QVERIFY2(calls <= 8, qPrintable(QStringLiteral("%1 scripts run by an idle worker in 3 s").arg(calls)));

    // A job, then a delayed one: each taken and sent.
    for (const QString &kind : {QStringLiteral("single"), QStringLiteral("delayed")}) {
        QCOMPARE(addJobs(queue, kind, queue + kind)
                     .value(QLatin1String("jobs"))
                     .toArray()
                     .size(),
                 1);
    }
    QVERIFY(pumpUntil([&] { return partner(port, "/stats").value(QLatin1String("requests")).toInt() == 2; },
                      15000));
    worker->terminate();
    const ProcessResult stopped = m_once->waitFor(worker, 30000);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());
    QVERIFY2(!redis({"CLIENT", "LIST"}).contains("cmd=bzpopmin"),
             "the worker left a blocked connection behind");
}

// Scenario 4: SIGKILLed after the partner applied the send (the failpoint after-send),
// the job's lock runs out; the stalled checker of the next worker puts it back with a
// "stalled" event, and its resend carries the same Idempotency-Key: one effect. Killed so
// a second time, the job has stalled more than maxStalledCount allows and fails, as
// BullMQ fails it.
void TestBullMqWorker::aWorkerKilledMidSendStallsOnceAndFailsOnTheSecond()
{
    const QString queue = m_tag + QStringLiteral("-stall");
    const QString id = addOneJob(queue);
    QVERIFY(!id.isEmpty());
    QProcess *watch = startWatch(queue, 1);
    QVERIFY(watch);
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);
    const auto arguments = [&](const QString &workerId) {
        QStringList list = workerArguments(queue, port, workerId);
        list[2] = queueUrl(queue, QStringLiteral("&stalledInterval=300&maxStalledCount=1"));
        return list + QStringList{QStringLiteral("--lease"), QStringLiteral("3"), QStringLiteral("--timeout"),
                                  QStringLiteral("1")};
    };
    const QMap<QString, QString> killedAfterSend{
        {QStringLiteral("ONCE_FAILPOINT"), QStringLiteral("after-send")}};

    auto first = m_once->run(arguments(QStringLiteral("once-first")), killedAfterSend, 60000);
    QVERIFY2(first.crashed(), first.describe().constData());
    auto second = m_once->run(arguments(QStringLiteral("once-second")), killedAfterSend, 60000);
    QVERIFY2(second.crashed(), second.describe().constData());
    auto third = m_once->run(arguments(QStringLiteral("once-third")), {}, 60000);
    QVERIFY2(third.exitedWith(0), third.describe().constData());

    const QJsonObject report = finish(watch);
    const QJsonObject events = report.value(QLatin1String("events")).toObject();
    const QJsonObject job = jobById(report, id);
    const QByteArray shown = QJsonDocument(report).toJson(QJsonDocument::Compact);
    // BullMQ 6.7 says "stalled" for both stalls: the second puts the job back with a
    // deferred failure, which the worker that takes it next applies.
    QCOMPARE(events.value(QLatin1String("stalled")).toArray(), (QJsonArray{id, id}));
    QVERIFY2(events.value(QLatin1String("failed")).toArray() == QJsonArray{id}, shown.constData());
    QVERIFY2(job.value(QLatin1String("state")).toString() == QLatin1String("failed"), shown.constData());
    QVERIFY2(job.value(QLatin1String("failedReason"))
                 .toString()
                 .contains(QLatin1String("stalled more than allowable limit")),
             shown.constData());
    QVERIFY2(job.value(QLatin1String("processedBy")).toString() == QLatin1String("once-third"),
             shown.constData());
    // Two sends with one key: the partner applied it once. Neither was recorded, so the
    // ledger holds the key in doubt for an operator (never "claimed" for good), and says so
    // in the job's reason.
    QCOMPARE(partner(port, "/stats").value(QLatin1String("requests")).toInt(), 2);
    const QJsonObject effects = partner(port, "/effects");
    QCOMPARE(effects.size(), 1);
    QCOMPARE(effects.constBegin().value().toInt(), 1);
    QVERIFY2(job.value(QLatin1String("failedReason")).toString().contains(QLatin1String("held in doubt")),
             shown.constData());
    VERIFY_NO_PROBLEMS(
        statsProblems(m_once->stats(), {{QStringLiteral("in_doubt"), 1}, {QStringLiteral("claimed"), 0}}));
}

// Under --in-doubt hold, a job whose worker died after the partner took its send is held
// for an operator: BullMQ must then show it failed, saying so, never completed (Bull
// Board would tell a support engineer it was delivered). A Node retry of it does not
// change that, nor send it again: only an operator's decision in once does.
void TestBullMqWorker::aJobHeldInDoubtFailsRatherThanCompletes()
{
    const QString queue = m_tag + QStringLiteral("-held");
    const QString id = addOneJob(queue);
    QVERIFY(!id.isEmpty());
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);
    const auto arguments = [&](const QString &workerId) {
        QStringList list = workerArguments(queue, port, workerId);
        list[2] = queueUrl(queue, QStringLiteral("&stalledInterval=300"));
        return list + QStringList{QStringLiteral("--lease"),    QStringLiteral("2"),
                                  QStringLiteral("--timeout"),  QStringLiteral("1"),
                                  QStringLiteral("--in-doubt"), QStringLiteral("hold")};
    };
    const auto heldJob = [&](const QString &workerId) {
        QProcess *watch = startWatch(queue, 1);
        if (!watch)
            return QJsonObject();
        const auto worker = m_once->run(arguments(workerId), {}, 60000);
        if (!worker.exitedWith(0))
            qWarning("%s", worker.describe().constData());
        return jobById(finish(watch), id);
    };

    const int inDoubtBefore = m_once->stats().value(QLatin1String("in_doubt")).toInt();
    const auto killed =
        m_once->run(arguments(QStringLiteral("once-dies")),
                    {{QStringLiteral("ONCE_FAILPOINT"), QStringLiteral("after-send")}}, 60000);
    QVERIFY2(killed.crashed(), killed.describe().constData());
    QJsonObject job = heldJob(QStringLiteral("once-holds"));
    QVERIFY2(job.value(QLatin1String("state")).toString() == QLatin1String("failed") &&
                 job.value(QLatin1String("failedReason"))
                     .toString()
                     .contains(QLatin1String("held for an operator")),
             QJsonDocument(job).toJson(QJsonDocument::Compact).constData());

    QCOMPARE(node({QStringLiteral("retry"), QStringLiteral("--queue"), queue})
                 .value(QLatin1String("retried"))
                 .toArray(),
             QJsonArray{id});
    job = heldJob(QStringLiteral("once-after-retry"));
    QVERIFY2(job.value(QLatin1String("state")).toString() == QLatin1String("failed") &&
                 job.value(QLatin1String("failedReason"))
                     .toString()
                     .contains(QLatin1String("held in doubt for an operator's decision")),
             QJsonDocument(job).toJson(QJsonDocument::Compact).constData());
    QCOMPARE(partner(port, "/stats").value(QLatin1String("requests")).toInt(), 1);
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("in_doubt"), inDoubtBefore + 1}}));
}

// A producer other than Node (a script, another language's port, a hand in redis-cli) may
// write what BullMQ's Queue never would: job ids that are not UTF-8 or hold a line break,
// data that is not JSON, opts that are not JSON or hold absurd numbers. Each job is worked
// by its own bytes (two ids that read alike as text stay two jobs), failed with a reason,
// or bounded; the worker neither stops nor loops.
void TestBullMqWorker::jobsNoNodeProducerWouldWriteAreWorkedOrFailedNeverFatal()
{
    const QString queue = m_tag + QStringLiteral("-foreign");
    const QByteArray prefix = QStringLiteral("bull:%1:").arg(queue).toUtf8();
    for (const QString &tag :
         {QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c"), QStringLiteral("d")}) {
        const QString kind = tag == QLatin1String("a") ? QStringLiteral("one-try") : QStringLiteral("single");
        QVERIFY(!addJobs(queue, kind, queue + tag)
                     .isEmpty());
    }
    // Jobs 1 to 5; the first three renamed to ids that are not text.
    const QByteArrayList oddIds{QByteArray("\xff\xfe"), QByteArray("\xfe\xff"), QByteArray("a%\nb")};
    for (int i = 0; i < oddIds.size(); ++i) {
        const QByteArray id = QByteArray::number(i + 1);
        QCOMPARE(redis({"RENAME", prefix + id, prefix + oddIds.at(i)}), QByteArray("OK"));
        QCOMPARE(redis({"LSET", prefix + "wait", QByteArray::number(-1 - i), oddIds.at(i)}),
                 QByteArray("OK"));
    }
    redis({"HSET", prefix + "4", "data", "{\"user_id\": not json"});
    redis({"HSET", prefix + "5", "opts", "{garbage"});
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);
    auto worker = m_once->run(workerArguments(queue, port, QStringLiteral("once-foreign")), {}, 60000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    for (const QByteArray &id : oddIds + QByteArrayList{"5"})
        QVERIFY2(!redis({"ZSCORE", prefix + "completed", id}).isEmpty(), id.toHex().constData());
    QVERIFY(!redis({"ZSCORE", prefix + "failed", "4"}).isEmpty());
    QVERIFY2(redis({"HGET", prefix + "4", "failedReason"}).contains("JSON"),
             redis({"HGET", prefix + "4", "failedReason"}).constData());
    const QJsonObject effects = partner(port, "/effects");
    QCOMPARE(effects.size(), 4);
    for (auto it = effects.constBegin(); it != effects.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == 1, qPrintable(it.key()));

    // Absurd attempts and backoff against a failing partner: one send, then the job waits
    // in delayed for the backoff, bounded to a day, not overflowed into the past. The
    // jitter (1e300, taken as 1) makes the wait anything from none to the whole day.
    const QString absurd = m_tag + QStringLiteral("-absurd");
    QCOMPARE(addOneJob(absurd), QStringLiteral("1"));
    const QByteArray absurdPrefix = QStringLiteral("bull:%1:").arg(absurd).toUtf8();
    redis({"HSET", absurdPrefix + "1", "opts",
           R"({"attempts":1e300,"backoff":{"type":"exponential","delay":1e300,"jitter":1e300},)"
           R"("removeOnComplete":1e300,"removeOnFail":-1e300,"stackTraceLimit":1e300})"});
    const quint16 failing = m_once->startPartnerSim({QStringLiteral("--fail-rate"), QStringLiteral("1")});
    QVERIFY(failing);
    const qint64 workerStartedMs = QDateTime::currentMSecsSinceEpoch();
    worker = m_once->run(workerArguments(absurd, failing, QStringLiteral("once-absurd")), {}, 60000);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const qint64 workerEndedMs = QDateTime::currentMSecsSinceEpoch();
    QCOMPARE(partner(failing, "/stats").value(QLatin1String("requests")).toInt(), 1);
    const QByteArray score = redis({"ZSCORE", absurdPrefix + "delayed", "1"});
    QVERIFY2(!score.isEmpty(), "the job is not in delayed");
    const qint64 dueAtMs = qint64(score.toDouble() / 4096);
    constexpr qint64 DayMs = 24 * 3600 * 1000;
    QVERIFY2(dueAtMs >= workerStartedMs && dueAtMs <= workerEndedMs + DayMs,
             qPrintable(QStringLiteral("due %1 ms after the worker started, %2 ms after it ended")
                            .arg(dueAtMs - workerStartedMs)
                            .arg(dueAtMs - workerEndedMs)));
}

// A worker stopped (SIGSTOP: a VM pause, a long GC) while its send is at the partner
// loses the job's lock; another worker's stalled checker puts the job back, and that
// worker resends it with the same key and completes it. When the first one wakes, its
// late answer and its settlement change nothing: one effect, the job completed by the
// second worker, nothing failed, no key left claimed.
void TestBullMqWorker::aWorkerPausedPastItsLockChangesNothingWhenItWakes()
{
    const QString queue = m_tag + QStringLiteral("-paused-worker");
    const QByteArray prefix = QStringLiteral("bull:%1:").arg(queue).toUtf8();
    const QByteArray id = addOneJob(queue).toUtf8();
    QVERIFY(!id.isEmpty());
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--latency-ms"), QStringLiteral("1000")});
    QVERIFY(port);
    const auto arguments = [&](const QString &workerId) {
        QStringList list = workerArguments(queue, port, workerId);
        list[2] = queueUrl(queue, QStringLiteral("&stalledInterval=300"));
        return list + QStringList{QStringLiteral("--lease"), QStringLiteral("3"), QStringLiteral("--timeout"),
                                  QStringLiteral("2")};
    };
    QStringList sleeperArguments = arguments(QStringLiteral("once-sleeper"));
    sleeperArguments.removeAll(QStringLiteral("--until-idle"));
    QProcess *sleeper = m_once->start(sleeperArguments);
    QVERIFY(pumpUntil([&] { return partner(port, "/stats").value(QLatin1String("requests")).toInt() == 1; },
                      15000));
    ::kill(pid_t(sleeper->processId()), SIGSTOP);
    pumpUntil([] { return false; }, 3500); // past its lock and its claim

    const auto taker = m_once->run(arguments(QStringLiteral("once-taker")), {}, 60000);
    QVERIFY2(taker.exitedWith(0), taker.describe().constData());
    QCOMPARE(redis({"HGET", prefix + id, "pb"}), QByteArray("once-taker"));
    const QByteArray finishedOn = redis({"HGET", prefix + id, "finishedOn"});
    QVERIFY(!redis({"ZSCORE", prefix + "completed", id}).isEmpty());

    ::kill(pid_t(sleeper->processId()), SIGCONT);
    pumpUntil([] { return false; }, 2000); // its late answer, its settlement, a lock renewal
    sleeper->terminate();
    const ProcessResult stopped = m_once->waitFor(sleeper, 30000);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());

    QCOMPARE(redis({"HGET", prefix + id, "pb"}), QByteArray("once-taker"));
    QCOMPARE(redis({"HGET", prefix + id, "finishedOn"}), finishedOn);
    QVERIFY(!redis({"ZSCORE", prefix + "completed", id}).isEmpty());
    QCOMPARE(redis({"ZCARD", prefix + "failed"}), QByteArray("0"));
    const QJsonObject effects = partner(port, "/effects");
    QCOMPARE(effects.size(), 1);
    QCOMPARE(effects.constBegin().value().toInt(), 1);
    QCOMPARE(partner(port, "/stats").value(QLatin1String("requests")).toInt(), 2);
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("claimed"), 0}}));
}

// Redis drops every connection of the worker again and again while it drains a thousand
// jobs (CLIENT KILL: a failover, a proxy restart), between and inside its leases and
// settlements: it reconnects, a job whose settlement was lost comes back through the
// stalled checker and is answered by the ledger, and in the end every job is completed
// and every reminder applied once.
void TestBullMqWorker::connectionsCutMidRunLoseNothingAndSendNothingTwice()
{
    constexpr int Jobs = 1000;
    const QString queue = m_tag + QStringLiteral("-cut");
    const QByteArray prefix = QStringLiteral("bull:%1:").arg(queue).toUtf8();
    QCOMPARE(addJobs(queue, QStringLiteral("bulk"), queue, {QStringLiteral("--count"), QString::number(Jobs)})
                 .value(QLatin1String("jobs"))
                 .toArray()
                 .size(),
             Jobs);
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--latency-ms"), QStringLiteral("5")});
    QVERIFY(port);
    QProcess *worker = m_once->start(workerArguments(queue, port, QStringLiteral("once-cut")) +
                                     QStringList{QStringLiteral("--lease"), QStringLiteral("3"),
                                                 QStringLiteral("--timeout"), QStringLiteral("1")});
    int cuts = 0;
    QVERIFY(pumpUntil(
        [&] {
            const int sent = partner(port, "/stats").value(QLatin1String("requests")).toInt();
            if (sent >= (cuts + 1) * Jobs / 8 && cuts < 5) {
                redis({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
                ++cuts;
            }
            return cuts == 5 || worker->state() == QProcess::NotRunning;
        },
        60000));
    QCOMPARE(cuts, 5);
    const ProcessResult finished = m_once->waitFor(worker, 120000);
    QVERIFY2(finished.exitedWith(0), finished.describe().constData());
    QCOMPARE(redis({"ZCARD", prefix + "completed"}), QByteArray::number(Jobs));
    QCOMPARE(redis({"ZCARD", prefix + "failed"}), QByteArray("0"));
    QCOMPARE(redis({"LLEN", prefix + "active"}), QByteArray("0"));
    const QJsonObject effects = partner(port, "/effects");
    QCOMPARE(effects.size(), Jobs);
    for (auto it = effects.constBegin(); it != effects.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == 1, qPrintable(it.key()));
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("claimed"), 0}}));
}

// Scenario 5: the scripts of bullmq 6.5.4 (installed beside 6.7.0 in tests/producers) are
// refused with one line that names the release found and the ones supported, and nothing
// is taken from the queue.
void TestBullMqWorker::scriptsOfAnotherReleaseAreRefusedByName()
{
    const QString queue = m_tag + QStringLiteral("-refused");
    QVERIFY(!addOneJob(queue).isEmpty());
    QStringList arguments = workerArguments(queue, 9, QStringLiteral("once-refused"));
    arguments[4] = QDir(m_producers).filePath(QStringLiteral("node_modules/bullmq-6-5/dist/cjs/commands"));
    const auto worker = m_once->run(arguments, {}, 30000);
    QVERIFY2(worker.exitedWith(1), worker.describe().constData());
    const QByteArray said = worker.err.trimmed().split('\n').first();
    QVERIFY2(said.contains("BullMQ 6.5.4") && said.contains("6.7.x"), worker.err.constData());
    const QJsonObject report = node({QStringLiteral("watch"), QStringLiteral("--queue"), queue,
                                     QStringLiteral("--finished"), QStringLiteral("0")});
    QCOMPARE(report.value(QLatin1String("counts")).toObject().value(QLatin1String("waiting")).toInt(), 1);
}

QTEST_GUILESS_MAIN(TestBullMqWorker)
#include "tst_bullmqworker.moc"
