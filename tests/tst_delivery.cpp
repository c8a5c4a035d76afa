// Process-level delivery tests: real `once` processes ($ONCE_BIN) against a real HTTP
// partner simulator, killed with real SIGKILL (QProcess::kill or failpoints) or SIGTERM,
// and judged by counting effects at the partner and reading `once stats --json`.
//
// The suite runs once per kind of store (tests/CMakeLists.txt registers it with STORES):
// tst_delivery on SQLite files, tst_delivery_postgres on databases of the private
// PostgreSQL server; every test gets a fresh store from TestStores. With QUEUES it also
// runs with the queue at a broker (tst_delivery_rabbitmq, tst_delivery_redis; the ledger
// on SQLite), each test on a fresh queue from TestQueues.
//
// The simulator runs in this process, on this thread, so that a test can change its
// profile mid-run and read effectsByKey(). That means this thread must keep serving
// HTTP while worker processes run: every wait for a process goes through pumpUntil(),
// which runs the event loop; QProcess::waitForFinished() is used only after a kill.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "model/reminder.h"
#include "testqueues.h"
#include "teststores.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QProcess>
#include <QSet>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QStandardPaths>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>
#include <QUrl>
#include <QUrlQuery>

#include <csignal>
#include <functional>
#include <memory>
#include <sys/syscall.h>
#include <unistd.h>

using namespace once;
using namespace oncetest;

namespace {

QDateTime parseTime(const QJsonValue &value)
{
    return QDateTime::fromString(value.toString(), Qt::ISODateWithMs);
}

QList<QJsonObject> rowsWhere(const QJsonObject &history, const QString &step)
{
    QList<QJsonObject> rows;
    for (const auto &value : history.value(QLatin1String("attempts")).toArray()) {
        const QJsonObject row = value.toObject();
        if (row.value(QLatin1String("step")).toString() == step)
            rows.append(row);
    }
    return rows;
}

QStringList outcomes(const QList<QJsonObject> &rows)
{
    QStringList list;
    for (const auto &row : rows)
        list << row.value(QLatin1String("outcome")).toString();
    return list;
}

} // namespace

class DeliveryTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void crashBetweenEverySteps_data();
    void crashBetweenEverySteps();
    void twoWorkersSameKeyPublishedTwice();
    void dropAfterAcceptResendsSameKey();
    void dropAfterAcceptHoldNoIdempotency();
    void failsThenSucceedsKeepsKey();
    void retryAfterIsHonoured();
    void anUntilIdleWorkerWaitsForItsRetryOnItsWayBack();
    void badInputLinesRejectedWithReasons();
    void badInputDelayOverLimitIsUsageError();
    void badInputUncheckedMessageIsDeadLettered();
    void outageLongerThanRetryBudgetThenRedrive();
    void sigtermFinishesInFlight_data();
    void sigtermFinishesInFlight();
    void aCrashSaysWhere_data();
    void aCrashSaysWhere();
    void largeTurnsSurviveACrash();
    void largeMessagesLeasedTogether();
    void claimsRunAheadOfSendsOnlyWhenResending_data();
    void claimsRunAheadOfSendsOnlyWhenResending();
    void tokenNeverLeaks();
    void foreignProducerPublishes_data();
    void foreignProducerPublishes();
    void aCoordinatorCutOffLosesAndDoublesNothing();
    void aMemberPausedPastItsSessionLosesAndDoublesNothing();
    void retentionPastTheCommitIsCounted();

private:
    // --- fixture -----------------------------------------------------------------
    QString partnerUrl() const
    {
        return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port());
    }
    // Starts `once <args>` with --store (this test's store) inserted after the subcommand.
    QProcess *start(const QStringList &args, const QMap<QString, QString> &env = {}) { return m_once->start(args, env); }
    QProcess *startWorker(const QStringList &extraArgs, const QMap<QString, QString> &env = {});
    static bool workerSaid(QProcess *worker, const QByteArray &text);
    // SIGTERM to each running worker, as an operator stops one, and what each said as it
    // finished, in the same order.
    QList<ProcessResult> stopWorkers(const QList<QProcess *> &workers);
    static bool bothAssignedPartitions(QProcess *first, QProcess *second);
    // eachTurn runs after every batch of events while the process runs.
    ProcessResult waitFor(QProcess *process, int timeoutMs, const std::function<void()> &eachTurn = {})
    {
        return m_once->waitFor(process, timeoutMs, eachTurn);
    }
    ProcessResult run(const QStringList &args, const QMap<QString, QString> &env = {},
                      int timeoutMs = CommandTimeoutMs)
    {
        return m_once->run(args, env, timeoutMs);
    }
    ProcessResult runWorker(const QStringList &extraArgs, const QMap<QString, QString> &env = {},
                            const std::function<void()> &eachTurn = {})
    {
        return waitFor(startWorker(extraArgs, env), WorkerTimeoutMs, eachTurn);
    }

    // The partner answers every request 429 with this Retry-After, until a test changes it.
    void throttleEveryRequest(int retryAfterSeconds)
    {
        PartnerFaults throttled;
        throttled.throttleRate = 1.0;
        throttled.retryAfterSeconds = retryAfterSeconds;
        m_partner->setProfile(throttled);
    }

    // Deterministic partner faults instead of random rates: random ones sometimes never
    // fail at all (the test proves nothing), and sometimes fail five times in a row and
    // open the worker's circuit breaker, whose cooldowns make a run slow and its timing
    // unpredictable (outageLongerThanRetryBudgetThenRedrive covers the breaker).
    //
    // Drops the answer of every `every`-th accepted request (applied, then the connection
    // closes without an answer), and notes its key in m_droppedKeys. Decided inside the
    // simulator, so exact at any concurrency.
    QMetaObject::Connection dropEveryNthAccepted(int every);
    // Answers 503 to one request, then lets two be applied, and so on. Decided between
    // two event batches, so it needs a worker with --concurrency 1 (one request at a time)
    // and must run as the eachTurn of the wait.
    void failOneInThree();

    // Writes `count` reminders to a file and enqueues it. Returns their send keys, or an
    // empty list (after a warning) when the enqueue failed.
    QList<QByteArray> enqueueReminders(int count, const QString &prefix);
    QString writeFile(const QString &name, const QByteArray &content);

    QJsonObject stats() { return m_once->stats(); }
    QString settledStatsProblems(const QList<QPair<QString, qint64>> &expected)
    {
        QString problems;
        pumpUntil(
            [&] {
                problems = statsProblems(stats(), expected);
                return problems.isEmpty();
            },
            15000);
        return problems;
    }
    // Whether `once stats` comes to count nothing in flight. RabbitMQ's management API,
    // which counts unacked messages, samples a quorum queue every 5 s: right after a
    // worker left, it may still count that worker's deliveries.
    bool nothingInFlight()
    {
        // A queue that cannot count what is in flight (Pub/Sub) says so, and is not asked.
        return pumpUntil(
            [this] {
                const QJsonObject now = stats();
                return now.value(QLatin1String("in_flight")).toInteger(-1) == 0
                       || (now.value(QLatin1String("in_flight")).isNull() && now.contains(QLatin1String("queue_unavailable")));
            },
            15000);
    }
    QJsonObject history(const QByteArray &key);
    QJsonArray jsonArray(const QStringList &args) { return m_once->jsonArray(args); }
    // Rows of a read-only query on the store, through a connection of the test's own,
    // each row's columns joined with '|', for what no command shows (the audit log) or to
    // count history rows quickly.
    QStringList storeQuery(const QString &sql) { return storeRows(m_stores, m_storeUrl, sql); }
    // Empty when every key had exactly one effect at the partner and no other key had any.
    QString exactlyOnceProblems(const QList<QByteArray> &keys) const;

    TestStores m_stores;
    TestQueues m_queues;
    QString m_onceBin;
    QString m_storeUrl; // this test's store
    QString m_queueUrl; // this test's queue at a broker, or empty
    std::unique_ptr<QTemporaryDir> m_dir; // this test's input files
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once; // kills this test's processes when it goes
    QSet<QByteArray> m_droppedKeys; // whose answers dropEveryNthAccepted() dropped
};

// A broker's counts lag behind what happened (RabbitMQ's management API samples its
// queues; under load, seconds late): a check waits up to 15 s for them to agree, and
// fails with the last reading. The store's own counts agree at once.
#define VERIFY_STATS(...) VERIFY_NO_PROBLEMS(settledStatsProblems(__VA_ARGS__))

// --- fixture implementation -------------------------------------------------------------

void DeliveryTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(!m_onceBin.isEmpty(), "ONCE_BIN must name the built once binary (ctest sets it)");
    QVERIFY2(QFile::exists(m_onceBin), qPrintable(m_onceBin));
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
    qInfo("store under test: %s, queue: %s", m_stores.isPostgres() ? "PostgreSQL" : "SQLite",
          qPrintable(m_queues.kind()));
}

void DeliveryTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_storeUrl = m_stores.newUrl();
    m_queueUrl = m_queues.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_storeUrl, m_queueUrl);
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    // The workers' usual lease and most attempts (startWorker()): where the broker takes
    // them (SQS, Pub/Sub), its own delivery limit and ack deadline follow.
    const auto init = run({QStringLiteral("init"), QStringLiteral("--lease"), QStringLiteral("2"), QStringLiteral("--max-attempts"),
                           QStringLiteral("20")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void DeliveryTest::cleanup()
{
    m_once.reset(); // kills what still runs; the partner need not answer a killed process
    m_partner.reset();
    if (m_dir && QTest::currentTestFailed()) {
        m_dir->setAutoRemove(false);
        if (m_storeUrl.startsWith(QLatin1String("sqlite:"))) {
            // The store lives in TestStores' folder, which goes at the end of the run.
            const QString path = m_storeUrl.mid(int(qstrlen("sqlite:")));
            for (const auto &suffix : {"", "-wal", "-shm"}) {
                const QString from = path + QString::fromLatin1(suffix);
                if (QFile::exists(from))
                    QFile::copy(from, m_dir->filePath(QFileInfo(from).fileName()));
            }
            qWarning("kept the store of the failed test in %s", qPrintable(m_dir->path()));
        } else {
            qWarning("the failed test's store was %s (dropped at the end of the run); its input files are in %s",
                     qPrintable(TestStores::withoutPassword(m_storeUrl)), qPrintable(m_dir->path()));
        }
    }
    m_dir.reset();
}

QProcess *DeliveryTest::startWorker(const QStringList &extraArgs, const QMap<QString, QString> &env)
{
    // Short leases so that a crashed worker's messages come back fast, fast retries.
    QStringList args{QStringLiteral("worker"),          QStringLiteral("--partner"), partnerUrl(),
                     QStringLiteral("--lease"),           QStringLiteral("2"),
                     QStringLiteral("--timeout"),         QStringLiteral("1"),
                     QStringLiteral("--backoff-base-ms"), QStringLiteral("50")};
    args += extraArgs; // a repeated option: the last value wins
    return start(args, env);
}

// Whether a running worker has said this on its standard error so far, read without
// taking it from what waitFor() reports.
bool DeliveryTest::workerSaid(QProcess *worker, const QByteArray &text)
{
    worker->setReadChannel(QProcess::StandardError);
    const bool said = worker->peek(worker->bytesAvailable()).contains(text);
    worker->setReadChannel(QProcess::StandardOutput);
    return said;
}

QList<ProcessResult> DeliveryTest::stopWorkers(const QList<QProcess *> &workers)
{
    for (QProcess *worker : workers)
        ::kill(pid_t(worker->processId()), SIGTERM);
    QList<ProcessResult> results;
    for (QProcess *worker : workers)
        results << waitFor(worker, WorkerTimeoutMs);
    return results;
}

// Whether both members of a Kafka consumer group have said they were given partitions:
// whichever said it last did so as the generation with both of them began.
bool DeliveryTest::bothAssignedPartitions(QProcess *first, QProcess *second)
{
    return workerSaid(first, "kafka: assigned") && workerSaid(second, "kafka: assigned");
}

QMetaObject::Connection DeliveryTest::dropEveryNthAccepted(int every)
{
    PartnerFaults profile = m_partner->profile();
    profile.dropAfterAcceptRate = every == 1 ? 1.0 : 0.0;
    m_partner->setProfile(profile);
    // effectApplied comes after the simulator decided about this request's answer: set
    // the rate (0 or 1, both deterministic) for the next one.
    m_droppedKeys.clear();
    return connect(m_partner.get(), &PartnerSimulator::effectApplied, m_partner.get(),
                   [this, every, accepted = 0](const QByteArray &key) mutable {
                       ++accepted;
                       if (m_partner->profile().dropAfterAcceptRate >= 1.0)
                           m_droppedKeys.insert(key);
                       PartnerFaults next = m_partner->profile();
                       next.dropAfterAcceptRate = (accepted + 1) % every == 0 ? 1.0 : 0.0;
                       m_partner->setProfile(next);
                   });
}

void DeliveryTest::failOneInThree()
{
    const PartnerStats s = m_partner->stats();
    // 503s are counted as requests before the simulator looks at the key.
    const qint64 failed = s.requests - s.effects - s.duplicateRequests;
    const double failRate = failed * 2 <= s.effects ? 1.0 : 0.0;
    if (m_partner->profile().failRate != failRate) {
        PartnerFaults profile = m_partner->profile();
        profile.failRate = failRate;
        m_partner->setProfile(profile);
    }
}

QString DeliveryTest::writeFile(const QString &name, const QByteArray &content)
{
    const QString path = m_dir->filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(content) != content.size())
        return {};
    return path;
}

QList<QByteArray> DeliveryTest::enqueueReminders(int count, const QString &prefix)
{
    return m_once->enqueueReminders(m_dir->path(), count, prefix);
}

QJsonObject DeliveryTest::history(const QByteArray &key)
{
    const auto result = run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return QJsonDocument::fromJson(result.out).object();
}

QString DeliveryTest::exactlyOnceProblems(const QList<QByteArray> &keys) const
{
    const auto effects = m_partner->effectsByKey();
    QStringList problems;
    const QSet<QByteArray> expected(keys.cbegin(), keys.cend());
    for (const auto &key : keys) {
        if (effects.value(key) != 1)
            problems << QStringLiteral("%1 had %2 effects").arg(QString::fromLatin1(key), QString::number(effects.value(key)));
    }
    for (auto it = effects.cbegin(); it != effects.cend(); ++it) {
        if (!expected.contains(it.key()))
            problems << QStringLiteral("unexpected key %1 had %2 effects").arg(QString::fromLatin1(it.key()), QString::number(it.value()));
    }
    const auto s = m_partner->stats();
    if (s.effects != keys.size() || s.duplicateEffects != 0)
        problems << QStringLiteral("partner counted %1 effects (%2 duplicate) for %3 keys")
                        .arg(s.effects)
                        .arg(s.duplicateEffects)
                        .arg(keys.size());
    if (problems.size() > 10)
        problems = problems.mid(0, 10) << QStringLiteral("...");
    return problems.join(QLatin1String("; "));
}

// --- tests --------------------------------------------------------------------------------

void DeliveryTest::crashBetweenEverySteps_data()
{
    QTest::addColumn<QString>("failpoint");
    // Whether the partner may have acted before the crash.
    QTest::addColumn<bool>("sentBeforeCrash");
    // One engine turn is one commit (record outcomes, settle, lease, claim). after-consume
    // and after-record/before-ack fire inside that transaction, so the crash rolls the
    // whole turn back; after-claim fires once the claims are committed; after-send fires
    // on the first applied answer, before it is recorded.
    QTest::newRow("after-consume") << QStringLiteral("after-consume") << false;
    QTest::newRow("after-claim") << QStringLiteral("after-claim") << false;
    QTest::newRow("after-send") << QStringLiteral("after-send") << true;
    QTest::newRow("after-record") << QStringLiteral("after-record") << true;
    QTest::newRow("before-ack") << QStringLiteral("before-ack") << true;
}

void DeliveryTest::crashBetweenEverySteps()
{
    QFETCH(QString, failpoint);
    QFETCH(bool, sentBeforeCrash);
    constexpr int Count = 20;
    const auto keys = enqueueReminders(Count, QStringLiteral("crash"));
    QCOMPARE(keys.size(), Count);

    const auto crashed = runWorker({QStringLiteral("--until-idle")}, {{QStringLiteral("ONCE_FAILPOINT"), failpoint}});
    QVERIFY2(crashed.crashed(), crashed.describe().constData());
    QVERIFY2(!crashed.err.contains("applied "), "the worker got as far as its summary: it did not die at the failpoint");
    // What the partner had done by the time of the crash. None of it was recorded, so
    // the next worker finds those keys in doubt and must not make them second effects.
    const auto appliedBeforeCrash = m_partner->effectsByKey().keys();
    if (sentBeforeCrash)
        QVERIFY(!appliedBeforeCrash.isEmpty());
    else
        QCOMPARE(m_partner->stats().requests, qint64(0));

    const auto survivor = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(survivor.exitedWith(0), survivor.describe().constData());

    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("delayed"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("retrying"), 0},
                  {QStringLiteral("in_doubt"), 0},
                  {QStringLiteral("dead_keys"), 0}});

    // Every key the partner applied before the crash was in doubt: its history shows the
    // claim that found the dead worker's claim expired and resent under the same key, and
    // the partner replayed instead of acting again. At a broker, the acks come after the
    // outcomes' commit: a crash before them leaves the outcomes of that turn recorded, and
    // the broker's redelivery of those is answered as a duplicate without a send (sends
    // still running then were not recorded: those are in doubt as above).
    const bool recordedBeforeCrash = m_queues.isBroker() && failpoint == QLatin1String("before-ack");
    int answeredAsDuplicates = 0;
    for (const auto &key : appliedBeforeCrash) {
        const auto story = history(key);
        QCOMPARE(story.value(QLatin1String("state")).toString(), QStringLiteral("applied"));
        const auto claims = outcomes(rowsWhere(story, QStringLiteral("claim")));
        const bool duplicate = recordedBeforeCrash && claims.contains(QStringLiteral("duplicate"));
        answeredAsDuplicates += duplicate ? 1 : 0;
        QVERIFY2(duplicate || claims.contains(QStringLiteral("resend")),
                 qPrintable(QString::fromLatin1(key) + QStringLiteral(": ") + claims.join(u',')));
        const auto sends = outcomes(rowsWhere(story, QStringLiteral("send")));
        QVERIFY2(sends == QStringList{QStringLiteral("applied")},
                 qPrintable(QString::fromLatin1(key) + QStringLiteral(": ") + sends.join(u',')));
    }
    if (recordedBeforeCrash)
        QVERIFY2(answeredAsDuplicates >= 1, "no outcome recorded before the lost ack was found by the redelivery");
    QVERIFY(m_partner->stats().duplicateRequests >= appliedBeforeCrash.size() - answeredAsDuplicates);

    const int resent = storeQuery(QStringLiteral("SELECT COUNT(DISTINCT send_key) FROM attempts "
                                                 "WHERE step = 'claim' AND outcome = 'resend'"))
                           .value(0, QStringLiteral("-1"))
                           .toInt();
    if (failpoint == QLatin1String("after-consume"))
        QCOMPARE(resent, 0); // the lease was rolled back with the turn: nothing was claimed
    else if (recordedBeforeCrash)
        QVERIFY(resent >= int(appliedBeforeCrash.size()) - answeredAsDuplicates);
    else
        QVERIFY2(resent >= 1, "no claim left without an outcome was found in doubt and resent");
}

void DeliveryTest::twoWorkersSameKeyPublishedTwice()
{
    // A little partner latency so that neither worker can finish the queue alone.
    PartnerFaults profile;
    profile.latencyMs = 10;
    m_partner->setProfile(profile);
    constexpr int Count = 200;
    QByteArray content;
    QList<QByteArray> keys;
    for (int i = 0; i < Count; ++i) {
        const auto reminder = makeReminder(QStringLiteral("twice"), i);
        keys.append(reminder.key);
        content += reminder.line + '\n';
    }
    const QString file = writeFile(QStringLiteral("twice.jsonl"), content);
    // Both workers run (and are registered, so polling) before the producer publishes
    // everything twice, so that they race for the same keys however long a worker takes
    // to start on a loaded machine (a fixed head start was not always enough: one worker
    // once did every send). They run until stopped, and are stopped with SIGTERM once the
    // queue is drained.
    // A long lease: no worker crashes, and a lease running out under load would make a
    // third delivery of a key and blur the duplicate count.
    const QStringList args{QStringLiteral("--lease"), QStringLiteral("30"), QStringLiteral("--timeout"),
                           QStringLiteral("5"), QStringLiteral("--concurrency"), QStringLiteral("8")};
    QProcess *first = startWorker(args + QStringList{QStringLiteral("--worker-id"), QStringLiteral("w1")});
    QProcess *second = startWorker(args + QStringList{QStringLiteral("--worker-id"), QStringLiteral("w2")});
    QVERIFY2(pumpUntil([this] {
                 return storeQuery(QStringLiteral("SELECT COUNT(*) FROM workers WHERE id IN ('w1', 'w2') AND state = 'running'"))
                        == QStringList{QStringLiteral("2")};
             }, WorkerTimeoutMs),
             "the two workers did not both start");
    // A member of a consumer group (Kafka) owns partitions only once the group has
    // rebalanced around it: a rebalance while messages are leased hands them to the other
    // member, a third delivery of their keys. The member that joined last says so when
    // the generation with both of them begins.
    if (m_queues.kind() == QLatin1String("kafka"))
        QVERIFY2(pumpUntil([&] { return bothAssignedPartitions(first, second); }, WorkerTimeoutMs),
                 "the two workers were not both given partitions");
    for (int copy = 0; copy < 2; ++copy) {
        const auto enqueue = run({QStringLiteral("enqueue"), file});
        QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());
    }
    QVERIFY2(pumpUntil([this] {
                 const QJsonObject counts = stats();
                 // Every copy answered; where the queue counts, nothing left there either.
                 return counts.value(QStringLiteral("acked")).toInt() == Count
                        && counts.value(QStringLiteral("duplicate_deliveries")).toInt() >= Count
                        && counts.value(QStringLiteral("ready")).toInt() == 0
                        && counts.value(QStringLiteral("in_flight")).toInt() == 0;
             }, WorkerTimeoutMs),
             QJsonDocument(stats()).toJson().constData());
    for (const ProcessResult &stopped : stopWorkers({first, second}))
        QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());

    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("delayed"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("in_doubt"), 0},
                  {QStringLiteral("duplicates_suppressed"), Count},
                  {QStringLiteral("duplicate_deliveries"), Count}});

    // Both workers did real work: every key was sent once, by one of them, and its
    // second copy was suppressed once.
    const QStringList sends = storeQuery(QStringLiteral(
        "SELECT worker_id, outcome, COUNT(*) FROM attempts WHERE step = 'send' GROUP BY 1, 2 ORDER BY 1, 2"));
    int applied = 0;
    QSet<QString> sendingWorkers;
    for (const auto &row : sends) {
        const QStringList columns = row.split(u'|');
        QCOMPARE(columns.size(), 3);
        QCOMPARE(columns.at(1), QStringLiteral("applied"));
        applied += columns.at(2).toInt();
        sendingWorkers.insert(columns.at(0));
    }
    QCOMPARE(applied, Count);
    QVERIFY2(sendingWorkers == (QSet<QString>{QStringLiteral("w1"), QStringLiteral("w2")}),
             qPrintable(sends.join(QLatin1String("; "))));
    const QStringList suppressed = storeQuery(QStringLiteral(
        "SELECT COUNT(*), COUNT(DISTINCT send_key) FROM attempts WHERE step = 'claim' AND outcome = 'duplicate'"));
    QCOMPARE(suppressed, QStringList{QStringLiteral("%1|%1").arg(Count)});
}

void DeliveryTest::dropAfterAcceptResendsSameKey()
{
    constexpr int Count = 30;
    const auto keys = enqueueReminders(Count, QStringLiteral("drop"));
    QCOMPARE(keys.size(), Count);
    // Every third accepted request is applied and then left without an answer. A resend
    // is a replay, not an acceptance, so exactly Count / 3 answers are dropped.
    dropEveryNthAccepted(3);

    const auto worker = runWorker({QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"), QStringLiteral("20")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());

    const auto partner = m_partner->stats();
    QCOMPARE(partner.dropped, qint64(Count / 3));
    // Every drop was resent under the same key and replayed, never applied again.
    QVERIFY(partner.duplicateRequests >= partner.dropped);
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("retrying"), 0},
                  {QStringLiteral("in_doubt"), 0}});

    // The history of a dropped key: a send in doubt, then a send that was applied. The
    // history is per send key, so the resend went out under the same key.
    int inDoubtThenApplied = 0;
    for (const auto &key : keys) {
        const auto sends = outcomes(rowsWhere(history(key), QStringLiteral("send")));
        const qsizetype firstInDoubt = sends.indexOf(QStringLiteral("in-doubt"));
        const QString story = QString::fromLatin1(key) + QStringLiteral(": ") + sends.join(u',');
        QVERIFY2((firstInDoubt >= 0) == m_droppedKeys.contains(key), qPrintable(story));
        if (firstInDoubt < 0)
            continue;
        QVERIFY2(sends.last() == QLatin1String("applied"), qPrintable(story));
        QVERIFY2(sends.count(QStringLiteral("applied")) == 1, qPrintable(story));
        ++inDoubtThenApplied;
    }
    QVERIFY2(inDoubtThenApplied >= 1, "no key shows an in-doubt send followed by an applied one");
    // A replay is never dropped, so every drop is exactly one key's in-doubt send.
    QCOMPARE(qint64(inDoubtThenApplied), partner.dropped);
}

void DeliveryTest::dropAfterAcceptHoldNoIdempotency()
{
    PartnerFaults profile;
    profile.idempotent = false; // a resend would be a second effect
    m_partner->setProfile(profile);
    constexpr int Count = 30;
    const auto keys = enqueueReminders(Count, QStringLiteral("hold"));
    QCOMPARE(keys.size(), Count);
    const auto dropping = dropEveryNthAccepted(3);

    const auto worker = runWorker({QStringLiteral("--until-idle"), QStringLiteral("--in-doubt"), QStringLiteral("hold")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());

    const auto partner = m_partner->stats();
    const int dropped = int(partner.dropped);
    QCOMPARE(dropped, Count / 3);
    QCOMPARE(partner.duplicateEffects, 0);
    QCOMPARE(partner.effects, qint64(Count)); // nothing was resent
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    // BullMQ shows a held job as failed, with its reason, never as completed: there it is
    // one of the queue's failed jobs. Elsewhere it leaves the queue.
    const int heldInQueue = m_queues.kind() == QLatin1String("bullmq") ? dropped : 0;
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), heldInQueue},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("acked"), Count - dropped},
                  {QStringLiteral("in_doubt"), dropped}});

    auto held = jsonArray({QStringLiteral("in-doubt"), QStringLiteral("--json")});
    QCOMPARE(held.size(), dropped);
    const QSet<QByteArray> allKeys(keys.cbegin(), keys.cend());
    QList<QByteArray> heldKeys;
    for (const auto &value : held) {
        const QJsonObject row = value.toObject();
        const QByteArray key = row.value(QLatin1String("key")).toString().toLatin1();
        QVERIFY2(allKeys.contains(key), key.constData());
        QVERIFY2(row.value(QLatin1String("event_id")).toString().startsWith(QLatin1String("hold-evt-")), key.constData());
        QVERIFY2(parseTime(row.value(QLatin1String("since"))).isValid(), key.constData());
        QCOMPARE(row.value(QLatin1String("state")).toString(), QStringLiteral("in_doubt"));
        heldKeys.append(key);
    }
    QCOMPARE(QSet<QByteArray>(heldKeys.cbegin(), heldKeys.cend()), m_droppedKeys);

    // The operator says the partner did deliver the first one.
    const QByteArray delivered = heldKeys.at(0);
    const auto markDelivered = run({QStringLiteral("resolve"), QString::fromLatin1(delivered), QStringLiteral("--mark-delivered")});
    QVERIFY2(markDelivered.exitedWith(0), markDelivered.describe().constData());
    VERIFY_STATS({{QStringLiteral("acked"), Count - dropped + 1}, {QStringLiteral("in_doubt"), dropped - 1}});
    QCOMPARE(m_partner->stats().effects, qint64(Count)); // a decision, not a send
    QCOMPARE(jsonArray({QStringLiteral("in-doubt"), QStringLiteral("--json")}).size(), dropped - 1);
    QVERIFY(outcomes(rowsWhere(history(delivered), QStringLiteral("operator"))).contains(QStringLiteral("marked-delivered")));

    // And chooses to resend the second one. Without idempotency at the partner that is a
    // second effect by the operator's explicit decision.
    const QByteArray resent = heldKeys.at(1);
    const auto resend = run({QStringLiteral("resolve"), QString::fromLatin1(resent), QStringLiteral("--resend")});
    QVERIFY2(resend.exitedWith(0), resend.describe().constData());
    VERIFY_STATS({{QStringLiteral("ready"), 1}, {QStringLiteral("in_doubt"), dropped - 2}});
    disconnect(dropping);
    profile.dropAfterAcceptRate = 0.0;
    m_partner->setProfile(profile);
    const auto again = runWorker({QStringLiteral("--until-idle"), QStringLiteral("--in-doubt"), QStringLiteral("hold")});
    QVERIFY2(again.exitedWith(0), again.describe().constData());

    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("acked"), Count - dropped + 2},
                  {QStringLiteral("in_doubt"), dropped - 2}});
    held = jsonArray({QStringLiteral("in-doubt"), QStringLiteral("--json")});
    QCOMPARE(held.size(), dropped - 2);
    for (const auto &value : held) {
        const QByteArray key = value.toObject().value(QLatin1String("key")).toString().toLatin1();
        QVERIFY(key != delivered && key != resent);
    }
    const auto story = history(resent);
    QCOMPARE(story.value(QLatin1String("state")).toString(), QStringLiteral("applied"));
    QVERIFY(outcomes(rowsWhere(story, QStringLiteral("operator"))).contains(QStringLiteral("resend")));
    // Only the explicitly resent key was sent again; every other key still has one effect.
    const auto effects = m_partner->effectsByKey();
    QCOMPARE(m_partner->stats().effects, qint64(Count + 1));
    QCOMPARE(effects.value(resent), 2);
    for (const auto &key : keys) {
        if (key != resent)
            QCOMPARE(effects.value(key), 1);
    }
}

void DeliveryTest::failsThenSucceedsKeepsKey()
{
    constexpr int Count = 15;
    const auto keys = enqueueReminders(Count, QStringLiteral("flaky"));
    QCOMPARE(keys.size(), Count);

    // The partner fails one request in three, starting with the first.
    const auto worker = runWorker({QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"), QStringLiteral("20"),
                                   QStringLiteral("--backoff-base-ms"), QStringLiteral("20"),
                                   QStringLiteral("--concurrency"), QStringLiteral("1")},
                                  {}, [this] { failOneInThree(); });
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());

    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    const auto partner = m_partner->stats();
    QVERIFY2(partner.requests - partner.effects >= Count / 3,
             qPrintable(QStringLiteral("%1 requests for %2 effects").arg(partner.requests).arg(partner.effects)));
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("retrying"), 0}});

    int retried = 0;
    for (const auto &key : keys) {
        const auto story = history(key);
        const auto sends = rowsWhere(story, QStringLiteral("send"));
        if (sends.size() < 2)
            continue;
        ++retried;
        // History is per send key: every try of this reminder went out under this key,
        // from the same queue message; all but the last failed with 503.
        QCOMPARE(story.value(QLatin1String("key")).toString(), QString::fromLatin1(key));
        QCOMPARE(story.value(QLatin1String("sends")).toInt(), int(sends.size()));
        const QString messageId = sends.first().value(QLatin1String("message_id")).toString();
        for (qsizetype i = 0; i < sends.size(); ++i) {
            const auto &row = sends.at(i);
            QCOMPARE(row.value(QLatin1String("message_id")).toString(), messageId);
            if (i + 1 < sends.size()) {
                QCOMPARE(row.value(QLatin1String("outcome")).toString(), QStringLiteral("transient"));
                QCOMPARE(row.value(QLatin1String("http_status")).toInt(), 503);
                QCOMPARE(row.value(QLatin1String("error_class")).toString(), QStringLiteral("http-5xx"));
            } else {
                QCOMPARE(row.value(QLatin1String("outcome")).toString(), QStringLiteral("applied"));
                QCOMPARE(row.value(QLatin1String("http_status")).toInt(), 200);
            }
        }
        QCOMPARE(rowsWhere(story, QStringLiteral("retry")).size(), sends.size() - 1);
    }
    QVERIFY2(retried >= 1, "no key needed a second send; the test proved nothing");
}

void DeliveryTest::retryAfterIsHonoured()
{
    throttleEveryRequest(2);
    const auto keys = enqueueReminders(1, QStringLiteral("throttle"));
    QCOMPARE(keys.size(), 1);

    QProcess *worker = startWorker({QStringLiteral("--until-idle"), QStringLiteral("--backoff-base-ms"), QStringLiteral("10")});
    // As soon as the first request has been answered 429, the partner recovers: only
    // Retry-After keeps the worker from trying again at once.
    QVERIFY(pumpUntil([this] { return m_partner->stats().requests >= 1; }, WorkerTimeoutMs));
    m_partner->setProfile(PartnerFaults{});
    const auto result = waitFor(worker, WorkerTimeoutMs);
    QVERIFY2(result.exitedWith(0), result.describe().constData());

    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    QCOMPARE(m_partner->stats().requests, 2);
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("acked"), 1},
                  {QStringLiteral("retrying"), 0}});

    const auto story = history(keys.first());
    const auto sends = rowsWhere(story, QStringLiteral("send"));
    QCOMPARE(sends.size(), 2);
    QCOMPARE(sends.at(0).value(QLatin1String("http_status")).toInt(), 429);
    QCOMPARE(sends.at(0).value(QLatin1String("error_class")).toString(), QStringLiteral("rate-limited"));
    QCOMPARE(sends.at(1).value(QLatin1String("outcome")).toString(), QStringLiteral("applied"));
    const QDateTime first = parseTime(sends.at(0).value(QLatin1String("at")));
    const QDateTime second = parseTime(sends.at(1).value(QLatin1String("at")));
    QVERIFY(first.isValid() && second.isValid());
    QVERIFY2(first.msecsTo(second) >= 2000, qPrintable(QStringLiteral("resent after %1 ms").arg(first.msecsTo(second))));
    const auto retries = rowsWhere(story, QStringLiteral("retry"));
    QCOMPARE(retries.size(), 1);
    // A retry row's latency_ms is the delay it scheduled.
    QVERIFY2(retries.first().value(QLatin1String("latency_ms")).toInt() >= 2000,
             qPrintable(QString::fromUtf8(QJsonDocument(retries.first()).toJson(QJsonDocument::Compact))));
}

// A broker moving a retry from its delay queue back to the queue (RabbitMQ's
// dead-lettering) counts it nowhere for a moment. A worker run --until-idle that looked
// then called the queue idle and exited with the reminder still to send: now and then
// tst_delivery_rabbitmq's retryAfterIsHonoured found the key still retrying. Here the test
// plays that broker: it takes the waiting retry off the store's queue and puts it back
// just after its time.
void DeliveryTest::anUntilIdleWorkerWaitsForItsRetryOnItsWayBack()
{
    if (m_queues.isBroker())
        QSKIP("the test moves the retry through the store's own queue table");
    throttleEveryRequest(2);
    const auto keys = enqueueReminders(1, QStringLiteral("transit"));
    QCOMPARE(keys.size(), 1);
    QProcess *worker = startWorker(
        {QStringLiteral("--until-idle"), QStringLiteral("--backoff-base-ms"), QStringLiteral("10")});
    QVERIFY(pumpUntil([this] { return m_partner->stats().requests >= 1; }, WorkerTimeoutMs));
    m_partner->setProfile(PartnerFaults{});
    QVERIFY(pumpUntil(
        [this] {
            return storeQuery(QStringLiteral("SELECT COUNT(*) FROM queue WHERE lease_owner IS NULL")) ==
                   QStringList{QStringLiteral("1")};
        },
        WorkerTimeoutMs));

    const bool postgres = !m_storeUrl.startsWith(QLatin1String("sqlite:"));
    {
        QSqlDatabase db = m_stores.openRaw(m_storeUrl, QStringLiteral("transit"));
        QVERIFY2(db.isOpen(), qPrintable(db.lastError().text()));
        QSqlQuery query(db);
        if (!postgres)
            QVERIFY(query.exec(QStringLiteral("PRAGMA busy_timeout = 10000")));
        QVERIFY2(query.exec(QStringLiteral("CREATE TABLE transit AS SELECT * FROM queue")),
                 qPrintable(query.lastError().text()));
        QVERIFY2(query.exec(QStringLiteral("DELETE FROM queue")), qPrintable(query.lastError().text()));
        // On its way for a moment past its time (2 s): the worker must still be there.
        QTest::qWait(2200);
        QVERIFY2(worker->state() == QProcess::Running,
                 "the worker called the queue idle with its retry on its way");
        QVERIFY2(query.exec(postgres ? QStringLiteral(
                                           "INSERT INTO queue OVERRIDING SYSTEM VALUE SELECT * FROM transit")
                                     : QStringLiteral("INSERT INTO queue SELECT * FROM transit")),
                 qPrintable(query.lastError().text()));
        QVERIFY2(query.exec(QStringLiteral("DROP TABLE transit")), qPrintable(query.lastError().text()));
    }
    QSqlDatabase::removeDatabase(QStringLiteral("transit"));
    const auto result = waitFor(worker, WorkerTimeoutMs);
    QVERIFY2(result.exitedWith(0), result.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    QCOMPARE(m_partner->stats().requests, 2);
}

void DeliveryTest::badInputLinesRejectedWithReasons()
{
    const auto valid = makeReminder(QStringLiteral("bad"), 1);
    // The other lines are valid reminders with one thing wrong each.
    const auto variant = [](int i, const std::function<void(QJsonObject &)> &change) {
        QJsonObject object = QJsonDocument::fromJson(makeReminder(QStringLiteral("bad"), i).line).object();
        change(object);
        return QJsonDocument(object).toJson(QJsonDocument::Compact);
    };
    const QByteArray missingBody = variant(3, [](QJsonObject &o) { o.remove(QStringLiteral("body")); });
    const QByteArray huge = variant(4, [](QJsonObject &o) {
        o.insert(QStringLiteral("body"), QString(300 * 1024, u'x'));
    });
    QVERIFY(huge.size() > 300 * 1024);
    const QByteArray badTime = variant(5, [](QJsonObject &o) {
        o.insert(QStringLiteral("scheduled_at"), QStringLiteral("next tuesday"));
    });
    const QByteArray content = valid.line + '\n'           // line 1
                               + "{\"user_id\": \"u\", oops\n" // line 2
                               + missingBody + '\n'        // line 3
                               + huge + '\n'               // line 4
                               + badTime + '\n';           // line 5
    const QString file = writeFile(QStringLiteral("bad.jsonl"), content);
    QVERIFY(!file.isEmpty());

    const auto enqueue = run({QStringLiteral("enqueue"), file});
    QVERIFY2(enqueue.exitedWith(1), enqueue.describe().constData());
    const QString err = QString::fromUtf8(enqueue.err);
    QVERIFY2(!err.contains(QLatin1String("line 1:")), qPrintable(err));
    const QList<QPair<QString, QString>> expected{{QStringLiteral("line 2:"), QStringLiteral("malformed JSON")},
                                                  {QStringLiteral("line 3:"), QStringLiteral("missing field \"body\"")},
                                                  {QStringLiteral("line 4:"), QStringLiteral("256 KiB")},
                                                  {QStringLiteral("line 5:"), QStringLiteral("scheduled_at")}};
    const QStringList lines = err.split(u'\n');
    for (const auto &[prefix, reason] : expected) {
        const auto found = std::find_if(lines.cbegin(), lines.cend(), [&](const QString &l) { return l.startsWith(prefix); });
        QVERIFY2(found != lines.cend(), qPrintable(prefix + QStringLiteral(" not reported in: ") + err));
        QVERIFY2(found->contains(reason), qPrintable(*found));
    }
    VERIFY_STATS({{QStringLiteral("ready"), 1}});

    // The valid line was kept and is delivered once.
    const auto worker = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems({valid.key}));
    QCOMPARE(m_partner->stats().requests, 1);
    VERIFY_STATS({{QStringLiteral("ready"), 0}, {QStringLiteral("acked"), 1}, {QStringLiteral("dead"), 0}});
}

void DeliveryTest::badInputDelayOverLimitIsUsageError()
{
    const auto reminder = makeReminder(QStringLiteral("delay"), 1);
    const QString file = writeFile(QStringLiteral("delay.jsonl"), reminder.line + '\n');
    const auto enqueue = run({QStringLiteral("enqueue"), QStringLiteral("--delay"), QStringLiteral("700000"), file});
    QVERIFY2(enqueue.exitedWith(2), enqueue.describe().constData());
    const QByteArray err = enqueue.err.trimmed();
    QVERIFY2(!err.contains('\n'), err.constData());
    QVERIFY2(err.contains("--delay"), err.constData());
    QVERIFY(enqueue.out.isEmpty());

    // Nothing was enqueued, so a worker has nothing to send.
    VERIFY_STATS({{QStringLiteral("ready"), 0}, {QStringLiteral("delayed"), 0}});
    const auto worker = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_partner->stats().requests, 0);
    VERIFY_NO_PROBLEMS(exactlyOnceProblems({}));
    VERIFY_STATS({{QStringLiteral("ready"), 0}, {QStringLiteral("acked"), 0}, {QStringLiteral("dead"), 0}});
}

void DeliveryTest::badInputUncheckedMessageIsDeadLettered()
{
    const QString file = writeFile(QStringLiteral("unchecked.jsonl"), "{\"user_id\": \"u1\", \"note\": \"no reminder here\"}\n");
    const auto enqueue = run({QStringLiteral("enqueue"), QStringLiteral("--unchecked"), file});
    // A REST queue checks every reminder at its door: the bad one is refused there with
    // its reason, and never reaches a worker to be dead-lettered.
    if (m_queues.kind() == QLatin1String("rest")) {
        QVERIFY2(!enqueue.exitedWith(0) && enqueue.err.contains("invalid_reminder"), enqueue.describe().constData());
        VERIFY_STATS({{QStringLiteral("ready"), 0}, {QStringLiteral("dead"), 0}});
        return;
    }
    QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());
    VERIFY_STATS({{QStringLiteral("ready"), 1}});

    const auto worker = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());

    QCOMPARE(m_partner->stats().requests, 0);
    VERIFY_NO_PROBLEMS(exactlyOnceProblems({}));
    const auto letters = jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(letters.size(), 1);
    const QJsonObject letter = letters.first().toObject();
    QCOMPARE(letter.value(QLatin1String("error_class")).toString(), QStringLiteral("invalid-message"));
    QVERIFY(letter.value(QLatin1String("key")).isNull());
    QVERIFY(!letter.value(QLatin1String("last_error")).toString().isEmpty());
    QCOMPARE(letter.value(QLatin1String("attempts")).toInt(), 0);
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), 1},
                  {QStringLiteral("acked"), 0},
                  {QStringLiteral("claimed"), 0}});
}

void DeliveryTest::outageLongerThanRetryBudgetThenRedrive()
{
    PartnerFaults outage;
    outage.failRate = 1.0;
    m_partner->setProfile(outage);
    // Few reminders: after five failures in a row the circuit breaker lets one probe
    // through per cooldown, and the cooldown doubles with every failed probe (1 s, 2 s,
    // 4 s, ... 30 s), so burning the whole budget of many reminders takes minutes. Even
    // these three take 8 to 16 s: the last probes, then one more cooldown before an
    // --until-idle worker notices it is idle.
    constexpr int Count = 3;
    constexpr int MaxAttempts = 3;
    const auto keys = enqueueReminders(Count, QStringLiteral("outage"));
    QCOMPARE(keys.size(), Count);

    const QStringList dyingArgs{QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"),
                                QString::number(MaxAttempts), QStringLiteral("--backoff-base-ms"), QStringLiteral("20")};
    QProcess *worker = startWorker(dyingArgs);
    // With a working breaker the probes of so few reminders come at most 8 s apart
    // (cooldowns of 1, 2, 4, 8 s). A worker that sends nothing for 12 s while reminders
    // are still short of their budget is stuck.
    qint64 requestsSeen = -1;
    QElapsedTimer quiet;
    quiet.start();
    pumpUntil(
        [&] {
            if (worker->state() == QProcess::NotRunning)
                return true;
            const qint64 requests = m_partner->stats().requests;
            if (requests != requestsSeen) {
                requestsSeen = requests;
                quiet.restart();
            }
            return requests < Count * MaxAttempts && quiet.hasExpired(12000);
        },
        WorkerTimeoutMs);
    const bool stalled = worker->state() != QProcess::NotRunning;
    const auto dying = waitFor(worker, 0); // kills it if it is still running
    // A stuck worker here is the regression fixed in 659216a ("keep the breaker probing"):
    // the turn that recorded the last outcomes while the breaker was open scheduled no
    // further turn, so the worker never probed again.
    QVERIFY2(!stalled, qPrintable(QStringLiteral("the worker sent nothing for 12 s after %1 of %2 requests with its "
                                                 "circuit breaker open: it stopped probing. ")
                                      .arg(m_partner->stats().requests)
                                      .arg(Count * MaxAttempts)
                                  + QString::fromUtf8(dying.describe())));
    QVERIFY2(dying.exitedWith(0), dying.describe().constData());
    QCOMPARE(m_partner->stats().effects, qint64(0));
    QCOMPARE(m_partner->stats().requests, qint64(Count * MaxAttempts));
    auto letters = jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(letters.size(), Count);
    for (const auto &value : letters) {
        const QJsonObject letter = value.toObject();
        QCOMPARE(letter.value(QLatin1String("error_class")).toString(), QStringLiteral("http-5xx"));
        QCOMPARE(letter.value(QLatin1String("attempts")).toInt(), MaxAttempts);
    }
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), Count},
                  {QStringLiteral("dead_keys"), Count},
                  {QStringLiteral("acked"), 0}});

    m_partner->setProfile(PartnerFaults{});
    const auto dryRun = run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--dry-run")});
    QVERIFY2(dryRun.exitedWith(0), dryRun.describe().constData());
    QCOMPARE(dryRun.out.count("would redrive"), Count);
    QVERIFY2(dryRun.out.contains(QByteArray(QByteArray::number(Count) + " dead letters: " + QByteArray::number(Count)
                                            + " would be sent, 0 already applied (suppressed as duplicates), 0 expired")),
             dryRun.out.constData());
    VERIFY_STATS({{QStringLiteral("ready"), 0}, {QStringLiteral("dead"), Count}});
    QCOMPARE(jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), Count);

    const auto redrive = run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--rate"), QStringLiteral("1000")});
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    QVERIFY2(redrive.out.contains(QByteArray("redrove " + QByteArray::number(Count))), redrive.out.constData());
    VERIFY_STATS({{QStringLiteral("ready"), Count}, {QStringLiteral("dead"), 0}});
    QCOMPARE(jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), 0);

    const auto healthy = runWorker({QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"), QString::number(MaxAttempts)});
    QVERIFY2(healthy.exitedWith(0), healthy.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("dead_keys"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("claimed"), 0}});
    QCOMPARE(jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), 0);
    for (const auto &key : keys)
        QCOMPARE(history(key).value(QLatin1String("redrives")).toInt(), 1);

    // No command shows the audit log: read it from the store.
    const QStringList audit = storeQuery(QStringLiteral("SELECT action, detail, count FROM audit_log ORDER BY id"));
    QCOMPARE(audit.size(), 1); // the dry run is not audited: it changed nothing
    QVERIFY2(audit.first().startsWith(QStringLiteral("redrive|all")), qPrintable(audit.first()));
    QVERIFY2(audit.first().endsWith(QStringLiteral("|%1").arg(Count)), qPrintable(audit.first()));
}

void DeliveryTest::sigtermFinishesInFlight_data()
{
    QTest::addColumn<int>("signal");
    QTest::newRow("SIGTERM") << int(SIGTERM);
    // A closed terminal or a careless kill -HUP: killed by it, a worker would leave its
    // claims to expire in doubt.
    QTest::newRow("SIGHUP") << int(SIGHUP);
}

void DeliveryTest::sigtermFinishesInFlight()
{
    QFETCH(int, signal);
    PartnerFaults slow;
    slow.latencyMs = 500;
    m_partner->setProfile(slow);
    constexpr int Count = 80;
    const auto keys = enqueueReminders(Count, QStringLiteral("term"));
    QCOMPARE(keys.size(), Count);

    QProcess *worker = startWorker({QStringLiteral("--concurrency"), QStringLiteral("8")});
    QVERIFY(pumpUntil([this] { return m_partner->stats().effects >= 1; }, WorkerTimeoutMs));
    ::kill(pid_t(worker->processId()), signal); // stop consuming, finish what is in flight
    const auto stopped = waitFor(worker, 5000);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());
    QVERIFY2(stopped.err.contains("stopping, finishing what is in flight"), stopped.err.constData());

    // Every send that went out was finished, recorded and acked: nothing is left leased
    // or claimed without an outcome, and the partner's effects are exactly the acked keys.
    const auto partnerAtStop = m_partner->stats();
    QVERIFY2(partnerAtStop.effects < Count, "the worker delivered everything before SIGTERM; the test proved nothing");
    QCOMPARE(partnerAtStop.requests, partnerAtStop.effects);
    QVERIFY2(nothingInFlight(), "messages still in flight after the worker stopped");
    VERIFY_STATS({{QStringLiteral("in_flight"), 0},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("retrying"), 0},
                  {QStringLiteral("in_doubt"), 0},
                  {QStringLiteral("acked"), partnerAtStop.effects},
                  {QStringLiteral("ready"), Count - partnerAtStop.effects}});

    m_partner->setProfile(PartnerFaults{});
    const auto rest = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(rest.exitedWith(0), rest.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    QCOMPARE(m_partner->stats().duplicateRequests, 0); // nothing was in doubt
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("duplicates_suppressed"), 0}});
}

void DeliveryTest::aCrashSaysWhere_data()
{
    QTest::addColumn<int>("signal");
    QTest::newRow("SIGSEGV") << int(SIGSEGV);
    // What glibc raises when it finds the heap corrupted ("double free or corruption").
    QTest::newRow("SIGABRT") << int(SIGABRT);
}

// A worker that crashes, which no test can plan, leaves its stack on stderr (the journal,
// or the failure text of whichever test saw it) and still dies of its signal.
void DeliveryTest::aCrashSaysWhere()
{
    if (m_queues.isBroker())
        QSKIP("the report is the process's, not the queue's: the store's own queue shows it");
    QFETCH(int, signal);
    PartnerFaults slow;
    slow.latencyMs = 500;
    m_partner->setProfile(slow);
    const auto keys = enqueueReminders(20, QStringLiteral("crash"));
    QCOMPARE(keys.size(), 20);
    QProcess *worker = startWorker({QStringLiteral("--concurrency"), QStringLiteral("4")});
    QVERIFY(pumpUntil([this] { return m_partner->stats().requests >= 1; }, WorkerTimeoutMs));
    // To the main thread, whose stack is known to hold the worker command; kill() would
    // hand the signal to any of the process's threads.
    const pid_t pid = pid_t(worker->processId());
    QCOMPARE(::syscall(SYS_tgkill, pid, pid, signal), 0L);
    const auto crashed = waitFor(worker, 10000);
    QVERIFY2(crashed.crashed(), crashed.describe().constData());
    QCOMPARE(crashed.exitCode, signal);
    const QByteArray said = QByteArray("once: crashed (") + (signal == SIGSEGV ? "SIGSEGV" : "SIGABRT") + ")";
    QVERIFY2(crashed.err.contains(said), crashed.describe().constData());
    // The frames are named: the worker command's own function is among them.
    QVERIFY2(crashed.err.contains("runWorker"), crashed.describe().constData());
    m_partner->setProfile(PartnerFaults{});
}

// Messages near the size limit, many to one lease: a broker's answer holding ten or a
// hundred of them (SQS's receive, Pub/Sub's pull) is megabytes, not the kilobytes a
// partner's answer is, and must be read whole.
void DeliveryTest::largeMessagesLeasedTogether()
{
    constexpr int Count = 30;
    const QString body(100 * 1024, QLatin1Char('x'));
    QByteArray content;
    QList<QByteArray> keys;
    for (int i = 0; i < Count; ++i) {
        ReminderSpec reminder = makeReminder(QStringLiteral("big"), i);
        QJsonObject object = QJsonDocument::fromJson(reminder.line).object();
        object.insert(QStringLiteral("body"), QString(body + QString::number(i)));
        content += QJsonDocument(object).toJson(QJsonDocument::Compact) + '\n';
        keys.append(reminder.key);
    }
    const QString path = m_dir->filePath(QStringLiteral("big.jsonl"));
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly) && file.write(content) == content.size());
    file.close();
    const auto enqueue = run({QStringLiteral("enqueue"), path});
    QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());

    const auto worker = runWorker({QStringLiteral("--until-idle"), QStringLiteral("--concurrency"), QStringLiteral("32")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    QVERIFY2(!worker.err.contains("over the"), worker.err.constData());
}

void DeliveryTest::largeTurnsSurviveACrash()
{
    // Many sends in flight make large turns, which a worker on PostgreSQL splits over two
    // connections (outcomes on one, leases and claims on the other). A SIGKILL in the
    // middle of that must leave nothing sent twice and nothing lost.
    PartnerFaults profile;
    profile.latencyMs = 30;
    m_partner->setProfile(profile);
    constexpr int Count = 1200;
    const auto keys = enqueueReminders(Count, QStringLiteral("large"));
    QCOMPARE(keys.size(), Count);

    QProcess *worker = startWorker({QStringLiteral("--concurrency"), QStringLiteral("64"), QStringLiteral("--lease"),
                                    QStringLiteral("3")},
                                   {{QStringLiteral("QT_LOGGING_RULES"), QStringLiteral("once.core.engine.debug=true")}});
    QVERIFY(pumpUntil([this] { return m_partner->stats().effects >= Count / 3; }, WorkerTimeoutMs));
    worker->kill();
    const auto killed = waitFor(worker, 10000);
    QVERIFY2(killed.crashed(), killed.describe().constData());
    QVERIFY2(m_partner->stats().effects < Count, "the worker delivered everything before the kill; the test proved nothing");
    if (m_stores.isPostgres() && !m_queues.isBroker())
        QVERIFY2(killed.err.contains("turn on two connections"), "no turn was large enough to split");

    const auto survivor = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(survivor.exitedWith(0), survivor.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    QVERIFY2(nothingInFlight(), "messages still in flight after the last worker stopped");
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("claimed"), 0},
                  {QStringLiteral("retrying"), 0},
                  {QStringLiteral("in_doubt"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("acked"), Count}});
}

void DeliveryTest::claimsRunAheadOfSendsOnlyWhenResending_data()
{
    QTest::addColumn<QString>("policy");
    QTest::addColumn<QString>("lease");   // seconds; the harness's request timeout is 1 s
    QTest::addColumn<int>("latencyMs");   // the partner's
    QTest::addColumn<int>("count");
    QTest::addColumn<int>("mostClaimed");  // per send slot, never more
    QTest::addColumn<int>("leastClaimed"); // per send slot, exceeded at some point
    // A claim waiting for a send slot is one more key in doubt if the worker dies: with
    // resend that costs a repeated key the partner dedupes, with hold an operator's time.
    // A slow partner's slots never wait for a turn: one claim ahead per slot.
    QTest::newRow("resend") << QStringLiteral("resend") << QStringLiteral("3") << 200 << 48 << 2 << 1;
    QTest::newRow("hold") << QStringLiteral("hold") << QStringLiteral("3") << 200 << 48 << 1 << 0;
    // A claim waiting for a slot for up to a request timeout (1 s), then sending for as
    // long again, could outlive a 2 s lease.
    QTest::newRow("resend, short lease") << QStringLiteral("resend") << QStringLiteral("2") << 200 << 48 << 1 << 0;
    // An instant partner's slots empty faster than a turn commits (an fsync or more):
    // the worker claims deeper, and never more than three slots' worth ahead.
    QTest::newRow("resend, instant partner") << QStringLiteral("resend") << QStringLiteral("3") << 0 << 400 << 4 << 2;
}

void DeliveryTest::claimsRunAheadOfSendsOnlyWhenResending()
{
    QFETCH(QString, policy);
    QFETCH(QString, lease);
    QFETCH(int, latencyMs);
    QFETCH(int, count);
    QFETCH(int, mostClaimed);
    QFETCH(int, leastClaimed);
    // The test cluster commits without fsync (scripts/postgres-cluster): its turns end
    // before an instant partner's slots have sent what they claimed, so the depth rightly
    // stays at one claim ahead per slot there.
    if (latencyMs == 0 && m_stores.isPostgres())
        leastClaimed = 1;
    PartnerFaults partner;
    partner.latencyMs = latencyMs;
    m_partner->setProfile(partner);
    constexpr int Concurrency = 4;
    const auto keys = enqueueReminders(count, QStringLiteral("ahead"));
    QCOMPARE(keys.size(), count);

    QProcess *worker = startWorker({QStringLiteral("--concurrency"), QString::number(Concurrency),
                                    QStringLiteral("--in-doubt"), policy, QStringLiteral("--lease"), lease,
                                    QStringLiteral("--until-idle")});
    qint64 peakClaimed = 0;
    QElapsedTimer sinceLook;
    sinceLook.start();
    const auto finished = waitFor(worker, WorkerTimeoutMs, [&] {
        if (sinceLook.elapsed() < 10)
            return;
        sinceLook.restart();
        const auto rows = storeQuery(QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'claimed'"));
        if (!rows.isEmpty())
            peakClaimed = std::max(peakClaimed, rows.first().toLongLong());
    });
    QVERIFY2(finished.exitedWith(0), finished.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));

    // The partner never had more requests at once than the configured concurrency, and
    // (when it is slow enough for them to meet) had that many: the slots were kept busy.
    if (latencyMs > 0)
        QCOMPARE(m_partner->stats().peakHeld, qint64(Concurrency));
    else
        QVERIFY(m_partner->stats().peakHeld <= Concurrency);
    qInfo("most keys claimed at once: %lld (%d send slots, --in-doubt %s, --lease %s, partner %d ms)", peakClaimed,
          Concurrency, qPrintable(policy), qPrintable(lease), latencyMs);
    QVERIFY2(peakClaimed <= mostClaimed * Concurrency, qPrintable(QString::number(peakClaimed)));
    // Claims ahead of the slots are seen (resend), or the slots themselves were.
    QVERIFY2(peakClaimed > leastClaimed * Concurrency, qPrintable(QString::number(peakClaimed)));
}

void DeliveryTest::tokenNeverLeaks()
{
    const QByteArray token = "s3cr3t-token-value";
    const QMap<QString, QString> env{{QStringLiteral("ONCE_PARTNER_TOKEN"), QString::fromLatin1(token)},
                                     {QStringLiteral("QT_LOGGING_RULES"), QStringLiteral("once.*.debug=true")}};

    const QDateTime testStarted = QDateTime::currentDateTime();
    QStringList probeStores;

    // First prove the worker does send the token, to a partner that shows what it got.
    {
        QTcpServer capture;
        QVERIFY(capture.listen(QHostAddress::LocalHost, 0));
        QByteArray received;
        QObject::connect(&capture, &QTcpServer::newConnection, &capture, [&capture, &received] {
            while (QTcpSocket *socket = capture.nextPendingConnection()) {
                QObject::connect(socket, &QTcpSocket::readyRead, socket, [socket, &received] {
                    received += socket->readAll();
                    if (received.contains("\r\n\r\n") && received.endsWith("}")) {
                        socket->write("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                                      "Connection: close\r\n\r\n{}");
                        socket->disconnectFromHost();
                    }
                });
            }
        });
        const QString probeStore = m_stores.newUrl();
        probeStores.append(probeStore);
        const auto probe = makeReminder(QStringLiteral("probe"), 1);
        const QString file = writeFile(QStringLiteral("probe.jsonl"), probe.line + '\n');
        const auto enqueue = run({QStringLiteral("enqueue"), QStringLiteral("--store"), probeStore, file});
        QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());
        // The suite's worker (its short lease: on a queue that cannot count, Pub/Sub,
        // --until-idle waits a whole lease of quiet, 30 s by default) on the probe's store.
        const auto worker =
            waitFor(startWorker({QStringLiteral("--store"), probeStore, QStringLiteral("--partner"),
                                 QStringLiteral("http://127.0.0.1:%1/reminders").arg(capture.serverPort()),
                                 QStringLiteral("--until-idle")},
                                env),
                    WorkerTimeoutMs);
        QVERIFY2(worker.exitedWith(0), worker.describe().constData());
        QVERIFY2(received.contains(QByteArray("Authorization: Bearer " + token)), received.constData());
        QVERIFY(received.contains(QByteArray("Idempotency-Key: " + probe.key)));
    }

    constexpr int Count = 20;
    const auto keys = enqueueReminders(Count, QStringLiteral("token"));
    QCOMPARE(keys.size(), Count);
    // Errors of both kinds get recorded: 503s with a body, and in-doubt sends whose
    // answer was dropped.
    dropEveryNthAccepted(4);
    const auto worker = runWorker({QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"), QStringLiteral("20"),
                                   QStringLiteral("--concurrency"), QStringLiteral("1"), QStringLiteral("--progress")},
                                  env, [this] { failOneInThree(); });
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QVERIFY2(m_partner->stats().dropped >= 1, "no answer was dropped");
    QVERIFY2(m_partner->stats().requests - m_partner->stats().effects - m_partner->stats().duplicateRequests >= 1,
             "no request failed with 503");
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("dead"), 0}});

    QVERIFY2(!worker.out.contains(token), worker.out.constData());
    QVERIFY2(!worker.err.contains(token), worker.err.constData());
    // Nor the queue's own secret, logged at debug level: the broker's password, or a cloud
    // queue's secret key (SQS: from the environment, as AWS's tools read it).
    // Pub/Sub's emulator takes no credentials (tst_googleauth keeps the Google token out of
    // sight), nor does librdkafka's mock cluster (tst_queuelocation keeps a Kafka password
    // out of what is shown).
    const bool withoutCredentials = m_queues.kind() == QLatin1String("pubsub") || m_queues.kind() == QLatin1String("kafka");
    const QByteArray queueSecret = m_queues.kind() == QLatin1String("sqs") ? qgetenv("AWS_SECRET_ACCESS_KEY")
                                                                            : QUrl(m_queueUrl).password().toUtf8();
    if (m_queues.isBroker() && !withoutCredentials)
        QVERIFY2(!queueSecret.isEmpty(), "the test queue has no secret to look for");
    if (!queueSecret.isEmpty()) {
        QVERIFY2(!worker.out.contains(queueSecret) && !worker.err.contains(queueSecret), "the queue's secret is in the worker's output");
        QStringList looked;
        const QStringList found = whereStoreHolds(m_stores, m_storeUrl, queueSecret, testStarted, &looked);
        QVERIFY2(found.isEmpty(), qPrintable(found.join(QLatin1String("; "))));
    }
    for (const auto &key : keys) {
        const auto result = run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
        QVERIFY2(result.exitedWith(0), result.describe().constData());
        QVERIFY2(!result.out.contains(token), result.out.constData());
    }
    for (const auto &command : {QStringLiteral("events"), QStringLiteral("dlq"), QStringLiteral("stats")}) {
        const auto result = run({command, QStringLiteral("--json")});
        QVERIFY2(result.exitedWith(0), result.describe().constData());
        QVERIFY2(!result.out.contains(token), qPrintable(command));
    }
    // Every byte the store keeps: each file of a SQLite store (including the WAL and shared
    // memory if still there), every column of every table of a PostgreSQL database. The
    // probe's store held the token's one successful send.
    QStringList scanned;
    for (const QString &store : QStringList{m_storeUrl} + probeStores) {
        const QStringList found = whereStoreHolds(m_stores, store, token, testStarted, &scanned);
        QVERIFY2(found.isEmpty(), qPrintable(found.join(QLatin1String("; "))));
    }
    qInfo("scanned for the token: %s", qPrintable(scanned.join(QLatin1String(", "))));
}


namespace {

// A producer written for a queue backend's own ecosystem (tests/producers), and how it is
// told where to publish: its script, the URL it takes, the option naming the queue, topic
// or stream, and its environment.
struct ForeignProducer
{
    QString script;
    QUrl url;
    QString targetOption;
    QString target;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
};

ForeignProducer foreignProducer(const QString &kind, const QUrl &onceUrl, const QString &script)
{
    ForeignProducer producer;
    QUrl base = onceUrl;
    const QUrlQuery query(onceUrl);
    base.setQuery(QString());
    if (kind == QLatin1String("rabbitmq")) // amqplib
        producer = {QStringLiteral("publish-amqp.js"), base, QStringLiteral("--queue"), query.queryItemValue(QStringLiteral("queue"))};
    else if (kind == QLatin1String("bullmq")) { // BullMQ's Queue, on the same server as redis://
        producer = {QStringLiteral("publish-bullmq.js"), base, QStringLiteral("--queue"),
                    query.queryItemValue(QStringLiteral("queue"))};
        producer.url.setScheme(QStringLiteral("redis"));
    } else if (kind == QLatin1String("redis")) // ioredis
        producer = {QStringLiteral("publish-redis.js"), base, QStringLiteral("--stream"), query.queryItemValue(QStringLiteral("stream"))};
    else if (kind == QLatin1String("rest")) {
        // Node's own fetch, which takes no credentials in a URL: the token goes as REST
        // clients pass it. It retries with the same idempotency key, as a producer that
        // lost the first answer would: the queue turns the second publish away.
        producer = {QStringLiteral("publish-http.js"), base, QStringLiteral("--queue"), query.queryItemValue(QStringLiteral("queue"))};
        producer.environment.insert(QStringLiteral("ONCE_SERVE_TOKEN"), base.password(QUrl::FullyDecoded));
        producer.url.setUserInfo(QString());
        producer.url.setScheme(QStringLiteral("http"));
        producer.url.setPath(QString());
    } else if (kind == QLatin1String("sqs")) // the AWS SDK, given the whole once URL (its endpoint)
        producer = {QStringLiteral("publish-sqs.js"), onceUrl, QStringLiteral("--queue"), onceUrl.path().section(QLatin1Char('/'), -1)};
    else if (kind == QLatin1String("pubsub")) // Google's client, given the whole once URL (its emulator)
        producer = {QStringLiteral("publish-pubsub.js"), onceUrl, QStringLiteral("--topic"), query.queryItemValue(QStringLiteral("topic"))};
    else if (kind == QLatin1String("kafka")) // kafkajs or kcat, keyed by user, given the whole once URL (its brokers)
        producer = {script, onceUrl, QStringLiteral("--topic"), onceUrl.path().section(QLatin1Char('/'), -1)};
    return producer;
}

// The producers each backend is tried with: its ecosystem's client, and for Kafka also
// the command-line tool teams script with.
QStringList foreignProducerScripts(const QString &kind)
{
    if (kind == QLatin1String("kafka"))
        return {QStringLiteral("publish-kafka.js"), QStringLiteral("publish-kcat.js")};
    return {QString()};
}

} // namespace

// Reminders from a producer written for the broker's own ecosystem (tests/producers,
// foreignProducer()), some published twice under new message ids, are each delivered once.
void DeliveryTest::foreignProducerPublishes_data()
{
    QTest::addColumn<QString>("script");
    for (const QString &script : foreignProducerScripts(m_queues.kind()))
        QTest::newRow(script.isEmpty() ? "the backend's client" : qPrintable(script)) << script;
}

void DeliveryTest::foreignProducerPublishes()
{
    QFETCH(QString, script);
    if (!m_queues.isBroker())
        QSKIP("the store's own queue has no foreign producers: run as tst_delivery_ID for a queue backend ID");
    const QString node = QStandardPaths::findExecutable(QStringLiteral("node"));
    QVERIFY2(!node.isEmpty(), "node is missing (scripts/test installs it)");
    const QDir producers(qEnvironmentVariable("ONCE_TEST_PRODUCERS"));
    const ForeignProducer foreign = foreignProducer(m_queues.kind(), QUrl(m_queueUrl), script);
    QVERIFY2(!foreign.script.isEmpty(), qPrintable(QStringLiteral("no foreign producer for ") + m_queues.kind()));
    QVERIFY2(foreign.script == QLatin1String("publish-http.js") || producers.exists(QStringLiteral("node_modules")),
             qPrintable(QStringLiteral("%1/node_modules is missing (scripts/test runs npm ci there)").arg(producers.path())));
    QProcess producer;
    producer.setProcessEnvironment(foreign.environment);
    constexpr int Count = 300;
    constexpr int Every = 10; // every tenth reminder published twice
    producer.setWorkingDirectory(producers.path());
    producer.start(node, {producers.filePath(foreign.script), QStringLiteral("--url"), foreign.url.toString(QUrl::FullyEncoded),
                          foreign.targetOption, foreign.target, QStringLiteral("--count"), QString::number(Count),
                          QStringLiteral("--duplicate-every"), QString::number(Every), QStringLiteral("--prefix"),
                          QStringLiteral("node-")});
    QVERIFY2(pumpUntil([&] { return producer.state() == QProcess::NotRunning; }, CommandTimeoutMs), "the producer hung");
    const QByteArray said = producer.readAllStandardOutput() + producer.readAllStandardError();
    QVERIFY2(producer.exitStatus() == QProcess::NormalExit && producer.exitCode() == 0, said.constData());
    QVERIFY2(said.contains(QStringLiteral("published %1 messages").arg(Count + Count / Every).toUtf8()), said.constData());
    // A partitioned log tells its backlog partition by partition: all of it, as nothing
    // is committed yet.
    const bool partitioned = m_queues.kind() == QLatin1String("kafka");
    if (partitioned) {
        const QJsonArray partitions = stats().value(QStringLiteral("partitions")).toArray();
        QVERIFY2(partitions.size() > 1, QJsonDocument(stats()).toJson().constData());
        qint64 lag = 0;
        for (const QJsonValue &partition : partitions) {
            QVERIFY(partition[QStringLiteral("committed_offset")].isNull());
            QCOMPARE(partition[QStringLiteral("lag")].toInteger(), partition[QStringLiteral("end_offset")].toInteger());
            lag += partition[QStringLiteral("lag")].toInteger();
        }
        QCOMPARE(lag, Count + Count / Every);
    }

    const auto worker = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const auto effects = m_partner->effectsByKey();
    QCOMPARE(effects.size(), Count);
    for (auto it = effects.cbegin(); it != effects.cend(); ++it)
        QVERIFY2(it.value() == 1, qPrintable(QString::fromLatin1(it.key())));
    QCOMPARE(m_partner->stats().duplicateEffects, 0);
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("delayed"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("duplicate_deliveries"), m_queues.kind() == QLatin1String("rest") ? 0 : Count / Every}});
    if (partitioned) {
        // Settled, every partition's commit has reached its end.
        const QJsonArray partitions = stats().value(QStringLiteral("partitions")).toArray();
        QVERIFY(partitions.size() > 1);
        for (const QJsonValue &partition : partitions) {
            QCOMPARE(partition[QStringLiteral("lag")].toInteger(), 0);
            const qint64 end = partition[QStringLiteral("end_offset")].toInteger();
            if (end > 0) // a partition no reminder went to has nothing to commit
                QCOMPARE(partition[QStringLiteral("committed_offset")].toInteger(-1), end);
        }
    }
}

// Kafka: the group's coordinator cut off while a worker runs. Fetches and publishes go on
// (every partition is led by another broker), every commit fails, and once its session has
// passed without a heartbeat the member loses its partitions. With the coordinator back it
// rejoins and fetches again from the last commit it made, past messages it has already
// settled. Nothing may be lost or applied twice, and no invalid message dead-lettered
// twice: it has no send key, so nothing in the ledger answers its redelivery.
void DeliveryTest::aCoordinatorCutOffLosesAndDoublesNothing()
{
    if (m_queues.kind() != QLatin1String("kafka"))
        QSKIP("cutting a broker off is asked of Kafka's mock cluster");
    constexpr int Count = 150;
    constexpr int Invalid = 15;
    constexpr int Leader = 1;
    constexpr int Coordinator = 2;
    const QString topic = QUrl(m_queueUrl).path().mid(1);
    const QString group = QUrlQuery(QUrl(m_queueUrl)).queryItemValue(QStringLiteral("group"));
    const QList<QPair<QString, int>> topics{{topic, 4}, {topic + QStringLiteral("-retry"), 4}, {topic + QStringLiteral("-dead"), 1}};
    for (const auto &[name, partitions] : topics) {
        for (int partition = 0; partition < partitions; ++partition) {
            const QString refused = m_queues.serverRequest(
                QStringLiteral("leader"), {name, QString::number(partition), QString::number(Leader)});
            QVERIFY2(refused.isEmpty(), qPrintable(refused));
        }
    }
    QString refused = m_queues.serverRequest(QStringLiteral("coordinator"), {group, QString::number(Coordinator)});
    QVERIFY2(refused.isEmpty(), qPrintable(refused));

    // Valid reminders with an invalid message after every tenth, through one enqueue.
    QByteArray lines;
    QList<QByteArray> keys;
    for (int i = 0; i < Count; ++i) {
        const ReminderSpec reminder = makeReminder(QStringLiteral("cut"), i);
        lines += reminder.line + '\n';
        keys << reminder.key;
        if (i % (Count / Invalid) == 0)
            lines += QStringLiteral("{\"user_id\": \"cut-bad-%1\", \"note\": \"no reminder here\"}\n").arg(i).toUtf8();
    }
    const auto enqueue = run({QStringLiteral("enqueue"), QStringLiteral("--unchecked"), writeFile(QStringLiteral("cut.jsonl"), lines)});
    QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());

    // Slow enough answers that the worker is still at it when its session runs out.
    PartnerFaults slow;
    slow.latencyMs = 150;
    m_partner->setProfile(slow);
    QProcess *worker = startWorker({QStringLiteral("--concurrency"), QStringLiteral("4")});
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= 12; }, WorkerTimeoutMs), "the worker sent nothing");
    refused = m_queues.serverRequest(QStringLiteral("broker"), {QStringLiteral("down"), QString::number(Coordinator)});
    QVERIFY2(refused.isEmpty(), qPrintable(refused));
    const qint64 atCut = m_partner->stats().effects;
    // Three sessions: the member goes on sending, then loses its partitions.
    QTest::qWait(9000);
    const qint64 duringCut = m_partner->stats().effects - atCut;
    refused = m_queues.serverRequest(QStringLiteral("broker"), {QStringLiteral("up"), QString::number(Coordinator)});
    QVERIFY2(refused.isEmpty(), qPrintable(refused));
    qInfo("%lld reminders applied before the cut, %lld while the coordinator was away", atCut, duringCut);
    QVERIFY2(duringCut > 0, "nothing was sent while the coordinator was away: the test proves nothing");

    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= Count; }, WorkerTimeoutMs),
             qPrintable(QStringLiteral("%1 of %2 applied").arg(m_partner->stats().effects).arg(Count)));
    QVERIFY(nothingInFlight());
    ::kill(pid_t(worker->processId()), SIGTERM);
    const auto stopped = m_once->waitFor(worker, WorkerTimeoutMs);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());
    // Assigned as it joined, and again as it rejoined.
    QVERIFY2(stopped.err.count("kafka: assigned") >= 2,
             "the member never lost its partitions: the test proves nothing");
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    const auto letters = jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(letters.size(), Invalid);
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("dead"), Invalid},
                  {QStringLiteral("acked"), Count}});
}

// Kafka: one of two members SIGSTOPped for three of its sessions, its sends in flight and
// its claims running out (--lease 2). The other takes its partitions from the last commit
// and sends what it finds claimed and expired again, with the same key. The paused one
// wakes to answers for claims it no longer holds and settles on partitions no longer its
// own; its commits are refused, and it rejoins. Against an idempotent partner every
// reminder takes effect once; nothing is left on the queue.
void DeliveryTest::aMemberPausedPastItsSessionLosesAndDoublesNothing()
{
    if (m_queues.kind() != QLatin1String("kafka"))
        QSKIP("a member's session is Kafka's");
    constexpr int Count = 200;
    PartnerFaults slow;
    slow.latencyMs = 100;
    m_partner->setProfile(slow);
    const QList<QByteArray> keys = enqueueReminders(Count, QStringLiteral("paused"));
    QCOMPARE(keys.size(), Count);
    const QStringList args{QStringLiteral("--concurrency"), QStringLiteral("4")};
    QProcess *paused = startWorker(args + QStringList{QStringLiteral("--worker-id"), QStringLiteral("paused")});
    QProcess *other = startWorker(args + QStringList{QStringLiteral("--worker-id"), QStringLiteral("other")});
    // Both members sending, each from partitions of its own.
    QVERIFY2(pumpUntil(
                 [&] {
                     return bothAssignedPartitions(paused, other)
                            && storeQuery(QStringLiteral("SELECT COUNT(DISTINCT worker_id) FROM attempts "
                                                         "WHERE step = 'send'"))
                                   == QStringList{QStringLiteral("2")};
                 },
                 WorkerTimeoutMs),
             "the two workers were not both sending");
    ::kill(pid_t(paused->processId()), SIGSTOP);
    const qint64 atPause = m_partner->stats().effects;
    QTest::qWait(9000);
    const qint64 whilePaused = m_partner->stats().effects - atPause;
    ::kill(pid_t(paused->processId()), SIGCONT);
    // On SQLite a worker stopped inside a turn holds the store's one write lock, and the
    // other waits for it (up to 30 s) before it can record or claim anything: what the
    // other sends during the pause depends on where the stop fell. The paused member's
    // session runs out either way, and its partitions move.
    qInfo("%lld reminders applied before the pause, %lld while one member was paused", atPause, whilePaused);
    QVERIFY2(pumpUntil([&] { return workerSaid(paused, "kafka: revoked"); }, WorkerTimeoutMs),
             "the paused member kept its partitions: the test proves nothing");

    QVERIFY2(pumpUntil([&] { return m_partner->effectsByKey().size() >= Count; }, WorkerTimeoutMs),
             qPrintable(QStringLiteral("%1 of %2 applied").arg(m_partner->effectsByKey().size()).arg(Count)));
    // Drained: the paused member's sends, answered while it slept, timed out on waking and
    // went to the retry topic; they come back to a ledger that has them applied.
    QVERIFY2(pumpUntil([this] {
                 const QJsonObject counts = stats();
                 return counts.value(QStringLiteral("acked")).toInt() == Count && counts.value(QStringLiteral("ready")).toInt() == 0
                        && counts.value(QStringLiteral("delayed")).toInt() == 0
                        && counts.value(QStringLiteral("in_flight")).toInt() == 0;
             }, WorkerTimeoutMs),
             QJsonDocument(stats()).toJson().constData());
    const QList<ProcessResult> stopped = stopWorkers({paused, other});
    for (const ProcessResult &result : stopped)
        QVERIFY2(result.exitedWith(0), result.describe().constData());
    // The other member took the paused one's partitions.
    QVERIFY2(stopped.last().err.count("kafka: assigned") >= 2, stopped.last().err.constData());
    // A send the paused member still held as the others stopped may have gone to the retry
    // topic since: a last worker finds it applied in the ledger and only acks it.
    const auto last = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(last.exitedWith(0), last.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(keys));
    VERIFY_STATS({{QStringLiteral("ready"), 0},
                  {QStringLiteral("in_flight"), 0},
                  {QStringLiteral("delayed"), 0},
                  {QStringLiteral("dead"), 0},
                  {QStringLiteral("acked"), Count},
                  {QStringLiteral("claimed"), 0}});
}

// Kafka: the cluster's retention deleting messages the group has not read yet (a worker
// down, or far behind). Those reminders are lost before any worker saw them: once stats
// says how many, partition by partition, while the group's commit is behind the oldest
// message left; a worker then starts from that message. The test cluster keeps at most
// 5 MiB a partition: 8 MiB of 100 KiB reminders on each of four is past it.
void DeliveryTest::retentionPastTheCommitIsCounted()
{
    if (m_queues.kind() != QLatin1String("kafka"))
        QSKIP("retention by size is asked of Kafka's mock cluster");
    const auto firstKeys = enqueueReminders(8, QStringLiteral("read"));
    QCOMPARE(firstKeys.size(), 8);
    const auto first = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(first.exitedWith(0), first.describe().constData());
    QHash<int, qint64> commits;
    for (const QJsonValue &partition : stats().value(QStringLiteral("partitions")).toArray()) {
        if (!partition[QStringLiteral("committed_offset")].isNull())
            commits.insert(partition[QStringLiteral("partition")].toInt(), partition[QStringLiteral("committed_offset")].toInteger());
    }
    QVERIFY2(!commits.isEmpty(), QJsonDocument(stats()).toJson().constData());

    constexpr int Count = 320;
    const QString body(100 * 1024, u'x');
    QByteArray content;
    for (int i = 0; i < Count; ++i) {
        const ReminderSpec spec = makeReminder(QStringLiteral("big"), i);
        QJsonObject reminder = QJsonDocument::fromJson(spec.line).object();
        reminder.insert(QStringLiteral("body"), body);
        content += QJsonDocument(reminder).toJson(QJsonDocument::Compact) + '\n';
    }
    const auto enqueue = run({QStringLiteral("enqueue"), writeFile(QStringLiteral("big.jsonl"), content)});
    QVERIFY2(enqueue.exitedWith(0), enqueue.describe().constData());

    // Where the group committed: its commit as it was, and what retention took past it.
    // Where it did not: it reads from the oldest message left, so what went before is lost.
    const QJsonObject afterRetention = stats();
    qint64 lost = 0;
    qint64 lostPastCommits = 0;
    for (const QJsonValue &partition : afterRetention.value(QStringLiteral("partitions")).toArray()) {
        const qint64 end = partition[QStringLiteral("end_offset")].toInteger();
        const qint64 lag = partition[QStringLiteral("lag")].toInteger();
        const qint64 deleted = partition[QStringLiteral("deleted_unread")].toInteger(-1);
        const auto commit = commits.constFind(partition[QStringLiteral("partition")].toInt());
        if (commit == commits.cend()) {
            QCOMPARE(deleted, 0);
            lost += end - lag;
            continue;
        }
        QCOMPARE(partition[QStringLiteral("committed_offset")].toInteger(), *commit);
        QCOMPARE(lag, end - *commit - deleted);
        lost += deleted;
        lostPastCommits += deleted;
    }
    QVERIFY2(lostPastCommits > 0, QJsonDocument(afterRetention).toJson().constData());
    const auto said = run({QStringLiteral("stats")});
    QVERIFY2(said.exitedWith(0), said.describe().constData());
    QVERIFY2(said.out.contains("deleted by retention unread"), said.out.constData());

    const auto last = runWorker({QStringLiteral("--until-idle")});
    QVERIFY2(last.exitedWith(0), last.describe().constData());
    // The worker that resumed past them says so, partition by partition.
    qint64 lostAsSaid = 0;
    const QRegularExpression counted(QStringLiteral("\\((\\d+) messages\\) before this group read them"));
    for (auto match = counted.globalMatch(QString::fromUtf8(last.err)); match.hasNext();)
        lostAsSaid += match.next().captured(1).toLongLong();
    QVERIFY2(lostAsSaid == lostPastCommits, last.err.constData());
    qInfo("%lld of %d reminders deleted by retention before the group read them, %lld of them past its commits",
          lost, Count, lostPastCommits);
    QCOMPARE(m_partner->stats().effects, 8 + Count - lost);
    QCOMPARE(m_partner->stats().duplicateEffects, 0);
    for (const QJsonValue &partition : stats().value(QStringLiteral("partitions")).toArray()) {
        QCOMPARE(partition[QStringLiteral("deleted_unread")].toInteger(-1), 0);
        QCOMPARE(partition[QStringLiteral("lag")].toInteger(-1), 0);
    }
}

QTEST_GUILESS_MAIN(DeliveryTest)

#include "tst_delivery.moc"
