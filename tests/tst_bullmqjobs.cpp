// The console's actions on a BullMQ queue, through BullMQ 6.7.0's own scripts, on a real
// Redis (the Redis fixture; ONCE_TEST_REDIS_URL_FILE) filled by BullMQ itself
// (tests/producers/bullmq-states.js): after each action BullMQ's own getJobCounts() and
// getState() agree with it (tests/producers/bullmq-proof.js inspect). Lists, details and
// search are read with plain Redis commands, and without supported scripts every action
// is refused with the reason.
#include "queues/bullmq/bullmqjobs.h"

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTest>
#include <QUrl>

using namespace once;

class TestBullMqJobs : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void listsAndDetailsAJobsState();
    void actionsLeaveBullMqAgreeing();
    void searchFindsByIdAndByText();
    void withoutScriptsEveryActionSaysWhy();
    void obliterateOnlyAPausedQueue();

private:
    QJsonObject node(const QString &script, const QStringList &arguments);
    QJsonObject inspect(const QString &queue, const QStringList &ids = {});
    BullMqJobs jobs(const QString &queue, bool withScripts = true);
    QJsonObject fill(const QString &queue);

    QString m_url;
    RedisEndpoint m_endpoint;
    QString m_producers;
    std::optional<BullMqScripts> m_scripts;
    QString m_tag;
};

void TestBullMqJobs::initTestCase()
{
    QFile file(qEnvironmentVariable("ONCE_TEST_REDIS_URL_FILE"));
    QVERIFY2(file.open(QIODevice::ReadOnly),
             "set ONCE_TEST_REDIS_URL_FILE to the url file of scripts/redis-server start DIR (ctest does)");
    m_url = QString::fromUtf8(file.readAll().trimmed());
    const QUrl url(m_url);
    m_endpoint = RedisEndpoint{url.host(),
                               url.port(6379),
                               url.userName(),
                               url.password(),
                               0,
                               QStringLiteral("Redis at %1:%2").arg(url.host()).arg(url.port())};
    m_producers = qEnvironmentVariable("ONCE_TEST_PRODUCERS");
    QString error;
    m_scripts = BullMqScripts::load(
        QDir(m_producers).filePath(QStringLiteral("node_modules/bullmq/dist/cjs/commands")), &error);
    QVERIFY2(m_scripts, qPrintable(error));
    m_tag = QStringLiteral("jobs-%1").arg(QCoreApplication::applicationPid());
}

QJsonObject TestBullMqJobs::node(const QString &script, const QStringList &arguments)
{
    QProcess process;
    process.setWorkingDirectory(m_producers);
    process.start(QStringLiteral("node"), QStringList{script, QStringLiteral("--url"), m_url} + arguments);
    if (!process.waitForFinished(60000) || process.exitCode() != 0) {
        qWarning("node %s: %s", qPrintable(script), process.readAllStandardError().constData());
        return {};
    }
    return QJsonDocument::fromJson(process.readAllStandardOutput().trimmed().split('\n').last()).object();
}

QJsonObject TestBullMqJobs::inspect(const QString &queue, const QStringList &ids)
{
    return node(QStringLiteral("bullmq-proof.js"), {QStringLiteral("inspect"), QStringLiteral("--queue"),
                                                    queue, QStringLiteral("--ids"), ids.join(u',')});
}

BullMqJobs TestBullMqJobs::jobs(const QString &queue, bool withScripts)
{
    return BullMqJobs(m_endpoint, {QStringLiteral("bull"), queue}, withScripts ? m_scripts : std::nullopt,
                      withScripts ? QString() : QStringLiteral("no BullMQ scripts at /nowhere"));
}

// 3 completed, 2 failed, 1 active, 4 waiting, 5 delayed, 6 prioritized.
QJsonObject TestBullMqJobs::fill(const QString &queue)
{
    return node(QStringLiteral("bullmq-states.js"), {QStringLiteral("--queue"), queue});
}

void TestBullMqJobs::listsAndDetailsAJobsState()
{
    const QString queue = m_tag + QStringLiteral("-list");
    QVERIFY(!fill(queue).isEmpty());
    BullMqJobs reader = jobs(queue);
    QString error;
    const QList<QPair<BullMqState, int>> expected{{BullMqState::Completed, 3}, {BullMqState::Failed, 2},
                                                  {BullMqState::Active, 1},    {BullMqState::Waiting, 4},
                                                  {BullMqState::Delayed, 5},   {BullMqState::Prioritized, 6}};
    QStringList ids;
    for (const auto &[state, count] : expected) {
        const auto rows = reader.list(state, 0, 100, &error);
        QVERIFY2(rows, qPrintable(error));
        QVERIFY2(rows->size() == count, qPrintable(bullMqStateName(state)));
        for (const BullMqJobRow &row : *rows)
            ids.append(row.id);
    }
    // Each job's state as once reads it is what BullMQ's getState() says.
    const QJsonObject states = inspect(queue, ids).value(QLatin1String("states")).toObject();
    QCOMPARE(states.size(), ids.size());
    for (const QString &id : ids) {
        const auto job = reader.details(id, &error);
        QVERIFY2(job && job->exists, qPrintable(error));
        QCOMPARE(bullMqStateName(job->state), states.value(id).toString());
    }
    const auto failed = reader.list(BullMqState::Failed, 0, 1, &error);
    QCOMPARE(failed->size(), 1); // paged
    const auto broken = reader.details(failed->first().id, &error);
    QCOMPARE(broken->row.failedReason, QStringLiteral("the partner said 400"));
    QCOMPARE(broken->row.attemptsMade, 1);
    QVERIFY(!broken->stacktrace.isEmpty() &&
            broken->stacktrace.first().contains(QLatin1String("the partner said 400")));
    QVERIFY(!broken->data.isEmpty() && !broken->opts.isEmpty());
    const auto active = reader.list(BullMqState::Active, 0, 1, &error);
    QVERIFY(reader.details(active->first().id, &error)->locked);
    QVERIFY(!reader.details(QStringLiteral("no-such-job"), &error)->exists);
}

void TestBullMqJobs::actionsLeaveBullMqAgreeing()
{
    const QString queue = m_tag + QStringLiteral("-act");
    QVERIFY(!fill(queue).isEmpty());
    BullMqJobs console = jobs(queue);
    QString error;
    const auto counts = [&] { return inspect(queue).value(QLatin1String("counts")).toObject(); };

    const auto failed = console.list(BullMqState::Failed, 0, 10, &error);
    QCOMPARE(console.retry({failed->first().id}, &error), std::optional<int>(1));
    QCOMPARE(inspect(queue, {failed->first().id})
                 .value(QLatin1String("states"))
                 .toObject()
                 .value(failed->first().id)
                 .toString(),
             QStringLiteral("waiting"));
    QCOMPARE(counts().value(QLatin1String("failed")).toInt(), 1);
    QCOMPARE(counts().value(QLatin1String("waiting")).toInt(), 5);

    const auto delayed = console.list(BullMqState::Delayed, 0, 10, &error);
    QCOMPARE(console.promote({delayed->first().id}, &error), std::optional<int>(1));
    QCOMPARE(inspect(queue, {delayed->first().id})
                 .value(QLatin1String("states"))
                 .toObject()
                 .value(delayed->first().id)
                 .toString(),
             QStringLiteral("waiting"));
    QCOMPARE(counts().value(QLatin1String("delayed")).toInt(), 4);

    const auto completed = console.list(BullMqState::Completed, 0, 10, &error);
    QCOMPARE(console.remove({completed->first().id}, &error), std::optional<int>(1));
    QCOMPARE(inspect(queue, {completed->first().id})
                 .value(QLatin1String("states"))
                 .toObject()
                 .value(completed->first().id)
                 .toString(),
             QStringLiteral("unknown"));
    QCOMPARE(counts().value(QLatin1String("completed")).toInt(), 2);
    // The active job is locked by its worker: not removed.
    const auto active = console.list(BullMqState::Active, 0, 1, &error);
    QCOMPARE(console.remove({active->first().id}, &error), std::optional<int>(0));
    QCOMPARE(counts().value(QLatin1String("active")).toInt(), 1);

    QCOMPARE(console.retryAllFailed(&error), std::optional<int>(1));
    QCOMPARE(counts().value(QLatin1String("failed")).toInt(), 0);

    QVERIFY2(console.pause(true, &error), qPrintable(error));
    QCOMPARE(inspect(queue).value(QLatin1String("paused")).toBool(), true);
    QVERIFY2(console.pause(false, &error), qPrintable(error));
    QCOMPARE(inspect(queue).value(QLatin1String("paused")).toBool(), false);

    QCOMPARE(console.clean(BullMqState::Completed, 0, &error), std::optional<int>(2));
    QCOMPARE(counts().value(QLatin1String("completed")).toInt(), 0);

    // 4 + 1 + 1 + 1 waiting, 6 prioritized, 4 delayed.
    QCOMPARE(console.drain(true, &error), std::optional<int>(17));
    const QJsonObject after = counts();
    for (const char *state : {"waiting", "prioritized", "delayed"})
        QVERIFY2(after.value(QLatin1String(state)).toInt() == 0, QJsonDocument(after).toJson().constData());
    QCOMPARE(after.value(QLatin1String("active")).toInt(), 1);
}

void TestBullMqJobs::searchFindsByIdAndByText()
{
    const QString queue = m_tag + QStringLiteral("-search");
    QVERIFY(!fill(queue).isEmpty());
    BullMqJobs console = jobs(queue);
    QString error;
    std::atomic<bool> cancelled = false;
    const auto failed = console.list(BullMqState::Failed, 0, 1, &error);
    const auto byId = console.search(failed->first().id, 10, 100000, cancelled, &error);
    QVERIFY2(byId && !byId->isEmpty(), qPrintable(error));
    QCOMPARE(byId->first().id, failed->first().id);
    // bullmq-states.js's reminder 13 is delayed; its user id is in its data only.
    const auto byData = console.search(QStringLiteral("\"U-13\""), 10, 100000, cancelled, &error);
    QVERIFY2(byData && byData->size() == 1, qPrintable(error));
    QCOMPARE(console.details(byData->first().id, &error)->state, BullMqState::Delayed);
    const auto byReason = console.search(QStringLiteral("PARTNER SAID"), 10, 100000, cancelled, &error);
    QCOMPARE(byReason->size(), 2);
    // Bounded: it looks at no more jobs than it is allowed, and a cancelled search stops.
    QVERIFY(console.search(QStringLiteral("\"u-13\""), 10, 1, cancelled, &error)->isEmpty());
    cancelled = true;
    QVERIFY(console.search(QStringLiteral("partner said"), 10, 100000, cancelled, &error)->isEmpty());
}

void TestBullMqJobs::withoutScriptsEveryActionSaysWhy()
{
    const QString queue = m_tag + QStringLiteral("-readonly");
    QVERIFY(!fill(queue).isEmpty());
    BullMqJobs reader = jobs(queue, false);
    QString error;
    QVERIFY(!reader.canAct());
    const auto failed = reader.list(BullMqState::Failed, 0, 10, &error);
    QCOMPARE(failed->size(), 2); // reading needs no scripts
    QVERIFY(!reader.retry({failed->first().id}, &error));
    QVERIFY2(error.contains(QLatin1String("read-only")) && error.contains(QLatin1String("/nowhere")),
             qPrintable(error));
    QVERIFY(!reader.pause(true, &error));
    QCOMPARE(inspect(queue).value(QLatin1String("counts")).toObject().value(QLatin1String("failed")).toInt(),
             2);
}

void TestBullMqJobs::obliterateOnlyAPausedQueue()
{
    const QString queue = m_tag + QStringLiteral("-gone");
    QVERIFY(!node(QStringLiteral("bullmq-proof.js"), {QStringLiteral("add"), QStringLiteral("--queue"), queue,
                                                      QStringLiteral("--kind"), QStringLiteral("failing")})
                 .isEmpty());
    BullMqJobs console = jobs(queue);
    QString error;
    QVERIFY(!console.obliterate(&error));
    QVERIFY2(error.contains(QLatin1String("pause")), qPrintable(error));
    QVERIFY(inspect(queue).value(QLatin1String("keys")).toInt() > 0);
    QVERIFY2(console.pause(true, &error) && console.obliterate(&error), qPrintable(error));
    const QJsonObject gone = inspect(queue);
    QCOMPARE(gone.value(QLatin1String("keys")).toInt(), 0);
    const QJsonObject counts = gone.value(QLatin1String("counts")).toObject();
    for (auto it = counts.constBegin(); it != counts.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == 0, qPrintable(it.key()));
}

QTEST_GUILESS_MAIN(TestBullMqJobs)
#include "tst_bullmqjobs.moc"
