// Scale-out under crashes, with real processes only: four `once worker` processes share one
// store and deliver to a `once partner-sim` process, while this test SIGKILLs a random one
// every 0.5 to 1.5 s and starts a replacement (with the same worker id or a new one).
// Then the survivors drain the queue, and the test counts:
//
// - idempotentPartnerResend: the partner honours Idempotency-Key and the workers resend
//   what is in doubt. Every key is applied, exactly one effect each, nothing left queued.
// - noIdempotencyHold: the partner ignores the key (a resend would be a second effect) and
//   the workers hold what is in doubt. No key has two effects; every key is applied or
//   in doubt (none lost); `once in-doubt` lists the in-doubt ones; every key the partner
//   acted on is one of those.
//
// The suite runs once per kind of store (STORES in tests/CMakeLists.txt). The figures of
// each run (kills, time, applied, held, effects) are printed with qInfo for `ctest -V`.
#include "deliveryharness.h"
#include "testqueues.h"
#include "teststores.h"

#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QHash>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSet>
#include <QSqlError>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>
#include <QUrl>

#include <algorithm>
#include <memory>
#include <optional>

using namespace oncetest;

namespace {

constexpr int Workers = 4;
constexpr int DuplicateEveryNth = 20; // 5% of the reminders are published twice
constexpr int MinKills = 5;
// The crashes go on until the partner has acted on this share of the reminders (or for
// ChaosCapMs at most); then the survivors drain the rest without crashes.
constexpr double ChaosShare = 0.8;
constexpr int ChaosCapMs = 120 * 1000;
constexpr int DrainTimeoutMs = 300 * 1000;
constexpr int EnqueueTimeoutMs = 300 * 1000;
// Per worker: sends in flight, and the partner's time to answer each. They set the pace:
// about Workers * Concurrency / PartnerLatency sends a second at most, slow enough that
// the crashes meet a good part of the run (20,000 reminders take some 25 s), fast enough
// for CI.
constexpr int Concurrency = 16;
constexpr int PartnerLatencyMs = 50;

// How many reminders. The same on both kinds of store: on a 2-core machine a whole run
// (enqueue, crashes, drain) took 25 to 50 s on either, so SQLite needs no smaller figure.
// ONCE_SCALEOUT_REMINDERS overrides it, to try other sizes by hand.
int reminderCount(const QString &queueKind)
{
    bool ok = false;
    const int fromEnvironment = qEnvironmentVariableIntValue("ONCE_SCALEOUT_REMINDERS", &ok);
    if (ok && fromEnvironment > 0)
        return fromEnvironment;
    return queueKind == QLatin1String("kafka") ? 10000 : 20000;
}

// Kafka hands a killed member's partitions on only after its session runs out and a
// rebalance that stops the whole group (on the test cluster, 3 s and 2 s): killed every
// second, the group would never settle, and a run would prove a stalled group rather
// than the ledger. There the kills come every 2.5 to 4.5 s, and the run is smaller.
int pauseBetweenKillsMs(const QString &queueKind, QRandomGenerator &random)
{
    if (queueKind == QLatin1String("kafka"))
        return 2500 + int(random.bounded(2001));
    return 500 + int(random.bounded(1001));
}

QString tail(const QByteArray &text, int lines = 8)
{
    QStringList all = QString::fromUtf8(text).trimmed().split(u'\n');
    if (all.size() > lines)
        all = all.mid(all.size() - lines);
    return all.join(QLatin1String("\n    "));
}

} // namespace

class ScaleOutTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void idempotentPartnerResend();
    void noIdempotencyHold();
    void lostDatabaseConnectionsAreSurvived();

private:
    enum class Partner { Idempotent, NoIdempotency };
    struct Figures
    {
        int reminders = 0;
        int published = 0;
        int kills = 0;
        int workersStarted = 0;
        qint64 chaosMs = 0;
        qint64 drainMs = 0;
        QJsonObject stats;         // once stats --json at the end
        QJsonObject partnerStats;  // GET /stats at the end
        QHash<QByteArray, int> effects; // GET /effects at the end
    };

    // Enqueues the reminders (some twice), runs the crashing workers and lets the rest drain.
    // Returns the keys; the figures are in m_figures. Fails the test (and returns nothing)
    // when something went wrong on the way.
    std::optional<QList<QByteArray>> runScenario(Partner partner, const QString &inDoubtPolicy);
    // Starts `once partner-sim` and returns its port, or 0.
    quint16 startPartner(Partner partner);
    QProcess *startWorker(const QString &id);
    QJsonObject partnerJson(const QByteArray &path);
    // Every send key in the ledger with its state.
    QHash<QByteArray, QString> ledgerStates();
    void printFigures(const QString &run, const QStringList &extra);
    // What the workers said, for a failed test: how each one ended and the end of its stderr.
    QString workerLog() const { return m_workerLog.join(QLatin1Char('\n')); }

    TestStores m_stores;
    TestQueues m_queues;
    QString m_onceBin;
    QString m_storeUrl;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_once; // owns the workers and the partner: kills them when it goes
    quint16 m_partnerPort = 0;
    QString m_inDoubtPolicy;
    QRandomGenerator m_random;
    Figures m_figures;
    QStringList m_workerLog;
};

void ScaleOutTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(!m_onceBin.isEmpty(), "ONCE_BIN must name the built once binary (ctest sets it)");
    QVERIFY2(QFile::exists(m_onceBin), qPrintable(m_onceBin));
    qInfo("store under test: %s, queue: %s", m_stores.isPostgres() ? "PostgreSQL" : "SQLite",
          qPrintable(m_queues.kind()));
}

void ScaleOutTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_storeUrl = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_storeUrl, m_queues.newUrl());
    // A seed per test, printed, so that a failing run's order of reminders and kills can
    // be repeated (ONCE_SCALEOUT_SEED).
    bool ok = false;
    const quint32 seed = qEnvironmentVariableIsSet("ONCE_SCALEOUT_SEED")
                             ? quint32(qEnvironmentVariableIntValue("ONCE_SCALEOUT_SEED", &ok))
                             : QRandomGenerator::global()->generate();
    m_random.seed(seed);
    qInfo("seed %u", seed);
    m_figures = Figures{};
    m_workerLog.clear();
    m_partnerPort = 0;
}

void ScaleOutTest::cleanup()
{
    // Kills the partner and every worker still running, passed or failed.
    m_once.reset();
    if (m_dir && QTest::currentTestFailed()) {
        qWarning("the failed test's store was %s (removed at the end of the run); the workers:\n%s",
                 qPrintable(TestStores::withoutPassword(m_storeUrl)), qPrintable(workerLog()));
    }
    m_dir.reset();
}

quint16 ScaleOutTest::startPartner(Partner partner)
{
    QStringList options{QStringLiteral("--latency-ms"), QString::number(PartnerLatencyMs)};
    if (partner == Partner::NoIdempotency)
        options << QStringLiteral("--no-idempotency");
    return m_once->startPartnerSim(options);
}

QProcess *ScaleOutTest::startWorker(const QString &id)
{
    ++m_figures.workersStarted;
    // Short leases and claims, so that what a killed worker held comes back in seconds,
    // yet longer than two request timeouts, so that (with resend) a worker claims ahead of
    // its send slots as it does in production; --until-idle, so that the survivors exit
    // once the queue is empty; retries soon, and enough of them that an overloaded moment
    // does not dead-letter a reminder.
    return m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"),
                          QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partnerPort),
                          QStringLiteral("--worker-id"), id, QStringLiteral("--concurrency"),
                          QString::number(Concurrency), QStringLiteral("--lease"), QStringLiteral("3"),
                          QStringLiteral("--timeout"), QStringLiteral("1"), QStringLiteral("--in-doubt"),
                          m_inDoubtPolicy, QStringLiteral("--backoff-base-ms"), QStringLiteral("100"),
                          QStringLiteral("--backoff-cap-s"), QStringLiteral("2"), QStringLiteral("--max-attempts"),
                          QStringLiteral("20"), QStringLiteral("--until-idle")});
}

QJsonObject ScaleOutTest::partnerJson(const QByteArray &path)
{
    QString error;
    const QByteArray body = httpGet(m_partnerPort, path, &error, 30000);
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    return QJsonDocument::fromJson(body).object();
}

QHash<QByteArray, QString> ScaleOutTest::ledgerStates()
{
    QHash<QByteArray, QString> states;
    for (const QString &row : storeRows(m_stores, m_storeUrl, QStringLiteral("SELECT state, send_key FROM ledger"))) {
        const qsizetype bar = row.indexOf(u'|');
        states.insert(row.mid(bar + 1).toLatin1(), row.left(bar));
    }
    return states;
}

std::optional<QList<QByteArray>> ScaleOutTest::runScenario(Partner partner, const QString &inDoubtPolicy)
{
    m_inDoubtPolicy = inDoubtPolicy;
    const int count = reminderCount(m_queues.kind());
    m_figures.reminders = count;

    // The reminders, one in twenty published twice, in random order with no two copies of
    // one reminder next to each other (they would meet in the same lease batch).
    QList<QByteArray> keys;
    QList<QByteArray> lines;
    for (int i = 0; i < count; ++i) {
        const auto reminder = makeReminder(QStringLiteral("scale"), i);
        keys.append(reminder.key);
        lines.append(reminder.line);
        if (i % DuplicateEveryNth == DuplicateEveryNth - 1)
            lines.append(reminder.line);
    }
    std::shuffle(lines.begin(), lines.end(), m_random);
    for (bool adjacent = true; adjacent;) {
        adjacent = false;
        for (qsizetype i = 1; i < lines.size(); ++i) {
            if (lines.at(i) == lines.at(i - 1)) {
                lines.swapItemsAt(i, qsizetype(m_random.bounded(quint32(lines.size()))));
                adjacent = true;
            }
        }
    }
    m_figures.published = int(lines.size());
    const QString file = m_dir->filePath(QStringLiteral("reminders.jsonl"));
    {
        QFile out(file);
        const QByteArray content = lines.join('\n') + '\n';
        if (!out.open(QIODevice::WriteOnly) || out.write(content) != content.size()) {
            QTest::qFail(qPrintable(QStringLiteral("cannot write %1").arg(file)), __FILE__, __LINE__);
            return std::nullopt;
        }
    }
    QElapsedTimer clock;
    clock.start();
    // The workers' lease and attempts (startWorker()), for the broker's own limits.
    const auto init = m_once->run({QStringLiteral("init"), QStringLiteral("--lease"), QStringLiteral("3"),
                                   QStringLiteral("--max-attempts"), QStringLiteral("20")});
    if (!init.exitedWith(0)) {
        QTest::qFail(init.describe().constData(), __FILE__, __LINE__);
        return std::nullopt;
    }
    const auto enqueue = m_once->run({QStringLiteral("enqueue"), file}, {}, EnqueueTimeoutMs);
    if (!enqueue.exitedWith(0)) {
        QTest::qFail(enqueue.describe().constData(), __FILE__, __LINE__);
        return std::nullopt;
    }
    const QString queued = statsProblems(m_once->stats(), {{QStringLiteral("ready"), m_figures.published}});
    if (!queued.isEmpty()) {
        QTest::qFail(qPrintable(queued), __FILE__, __LINE__);
        return std::nullopt;
    }
    qInfo("enqueued %d messages (%d reminders) in %lld ms", m_figures.published, count, clock.elapsed());

    m_partnerPort = startPartner(partner);
    if (m_partnerPort == 0) {
        QTest::qFail("once partner-sim did not start", __FILE__, __LINE__);
        return std::nullopt;
    }

    // The workers, by slot; a replacement takes the slot of the one it replaces.
    struct Slot
    {
        QProcess *process = nullptr;
        QString id;
    };
    QList<Slot> workers;
    int generation = 0;
    for (int i = 0; i < Workers; ++i) {
        const QString id = QStringLiteral("w%1").arg(++generation);
        workers.append({startWorker(id), id});
    }
    const auto noteEnd = [this](const Slot &slot, const QString &how) {
        m_workerLog << QStringLiteral("  worker %1 %2; its stderr ends:\n    %3")
                           .arg(slot.id, how, tail(slot.process->readAllStandardError()));
    };
    // A worker that exits by itself during the crashes found nothing left to do, or failed.
    QString unexpected;
    const auto checkExits = [&] {
        for (auto &slot : workers) {
            if (slot.process && slot.process->state() == QProcess::NotRunning) {
                const bool ok = slot.process->error() == QProcess::UnknownError
                                && slot.process->exitStatus() == QProcess::NormalExit && slot.process->exitCode() == 0;
                noteEnd(slot, ok ? QStringLiteral("exited 0")
                                 : QStringLiteral("FAILED (exit %1, %2)")
                                       .arg(slot.process->exitCode())
                                       .arg(slot.process->error() != QProcess::UnknownError
                                                ? slot.process->errorString()
                                                : slot.process->exitStatus() == QProcess::CrashExit
                                                ? QStringLiteral("crashed")
                                                : QStringLiteral("normal exit")));
                if (!ok && unexpected.isEmpty())
                    unexpected = QStringLiteral("worker %1 failed during the crashes").arg(slot.id);
                slot.process = nullptr;
            }
        }
        return std::any_of(workers.cbegin(), workers.cend(), [](const Slot &s) { return !s.process; });
    };

    // The crashes.
    clock.restart();
    bool someoneIdle = false;
    while (!clock.hasExpired(ChaosCapMs)) {
        const int pauseMs = pauseBetweenKillsMs(m_queues.kind(), m_random);
        someoneIdle = pumpUntil([&] { return checkExits(); }, pauseMs);
        if (someoneIdle)
            break; // the queue ran dry (or a worker failed): no one left to crash meaningfully
        Slot &victim = workers[int(m_random.bounded(quint32(workers.size())))];
        victim.process->kill(); // SIGKILL
        if (!victim.process->waitForFinished(5000) || victim.process->exitStatus() != QProcess::CrashExit) {
            unexpected = QStringLiteral("worker %1 did not die of SIGKILL").arg(victim.id);
            break;
        }
        ++m_figures.kills;
        noteEnd(victim, QStringLiteral("killed (kill %1 at %2 ms)").arg(m_figures.kills).arg(clock.elapsed()));
        m_once->release(victim.process);
        // Half the replacements take over the killed worker's id, half come as new workers.
        if (m_random.bounded(2) == 0)
            victim.id = QStringLiteral("w%1").arg(++generation);
        victim.process = startWorker(victim.id);
        const qint64 effects = qint64(partnerJson("/stats").value(QLatin1String("effects")).toDouble());
        if (effects >= qint64(ChaosShare * count))
            break;
    }
    m_figures.chaosMs = clock.elapsed();
    if (!unexpected.isEmpty()) {
        QTest::qFail(qPrintable(unexpected), __FILE__, __LINE__);
        return std::nullopt;
    }
    if (someoneIdle)
        qWarning("a worker found the queue empty after %lld ms of crashes", m_figures.chaosMs);

    // The survivors drain the queue, and exit when they find it empty.
    clock.restart();
    const bool drained = pumpUntil(
        [&] {
            checkExits();
            return std::all_of(workers.cbegin(), workers.cend(), [](const Slot &s) { return !s.process; });
        },
        DrainTimeoutMs);
    m_figures.drainMs = clock.elapsed();
    if (!drained) {
        const QJsonObject stats = m_once->stats();
        for (auto &slot : workers) {
            if (slot.process) {
                slot.process->kill();
                slot.process->waitForFinished(5000);
                noteEnd(slot, QStringLiteral("did not drain (killed)"));
            }
        }
        QTest::qFail(qPrintable(QStringLiteral("the workers did not drain the queue in %1 s (after %2 kills); store: %3; "
                                               "partner: %4 (what the workers said follows)")
                                    .arg(DrainTimeoutMs / 1000)
                                    .arg(m_figures.kills)
                                    .arg(QString::fromUtf8(QJsonDocument(stats).toJson(QJsonDocument::Compact)),
                                         QString::fromUtf8(QJsonDocument(partnerJson("/stats")).toJson(QJsonDocument::Compact)))),
                     __FILE__, __LINE__);
        return std::nullopt;
    }
    if (!unexpected.isEmpty()) {
        QTest::qFail(qPrintable(unexpected), __FILE__, __LINE__);
        return std::nullopt;
    }

    m_figures.stats = m_once->stats();
    m_figures.partnerStats = partnerJson("/stats");
    const QJsonObject effects = partnerJson("/effects");
    for (auto it = effects.constBegin(); it != effects.constEnd(); ++it)
        m_figures.effects.insert(it.key().toUtf8(), it.value().toInt());
    return keys;
}

void ScaleOutTest::printFigures(const QString &run, const QStringList &extra)
{
    const auto stat = [this](const char *name) { return qint64(m_figures.stats.value(QLatin1String(name)).toDouble()); };
    const auto partner = [this](const char *name) {
        return qint64(m_figures.partnerStats.value(QLatin1String(name)).toDouble());
    };
    qInfo("%s on %s with %s: %d reminders (%d messages), %d workers started, %d kills; crashes for %.1f s, drain %.1f s; "
          "applied %lld, in doubt (held) %lld, dead %lld, duplicates suppressed %lld; partner: %lld requests, "
          "%lld effects, %lld duplicate effects, %lld repeated keys%s",
          qPrintable(run), m_stores.isPostgres() ? "PostgreSQL" : "SQLite", qPrintable(m_queues.kind()),
          m_figures.reminders, m_figures.published,
          m_figures.workersStarted, m_figures.kills, m_figures.chaosMs / 1000.0, m_figures.drainMs / 1000.0,
          stat("acked"), stat("in_doubt"), stat("dead_keys"), stat("duplicates_suppressed"), partner("requests"),
          partner("effects"), partner("duplicate_effects"), partner("duplicate_requests"),
          qPrintable(extra.isEmpty() ? QString() : QStringLiteral("; ") + extra.join(QLatin1String(", "))));
}

void ScaleOutTest::idempotentPartnerResend()
{
    const auto keys = runScenario(Partner::Idempotent, QStringLiteral("resend"));
    if (!keys)
        return;
    const int count = int(keys->size());
    const int resent = storeRows(m_stores, m_storeUrl,
                                 QStringLiteral("SELECT COUNT(DISTINCT send_key) FROM attempts "
                                                "WHERE step = 'claim' AND outcome = 'resend'"))
                           .value(0, QStringLiteral("-1"))
                           .toInt();
    printFigures(QStringLiteral("run A (idempotent partner, --in-doubt resend)"),
                 {QStringLiteral("%1 keys resent after a crash").arg(resent)});

    QVERIFY2(m_figures.kills >= MinKills,
             qPrintable(QStringLiteral("only %1 kills happened; the run proved little").arg(m_figures.kills)));
    VERIFY_NO_PROBLEMS(statsProblems(m_figures.stats, {{QStringLiteral("acked"), count},
                                                       {QStringLiteral("ready"), 0},
                                                       {QStringLiteral("in_flight"), 0},
                                                       {QStringLiteral("delayed"), 0},
                                                       {QStringLiteral("dead"), 0},
                                                       {QStringLiteral("claimed"), 0},
                                                       {QStringLiteral("retrying"), 0},
                                                       {QStringLiteral("in_doubt"), 0},
                                                       {QStringLiteral("dead_keys"), 0}}));
    QCOMPARE(qint64(m_figures.partnerStats.value(QLatin1String("effects")).toDouble()), qint64(count));
    QCOMPARE(qint64(m_figures.partnerStats.value(QLatin1String("duplicate_effects")).toDouble()), qint64(0));
    // Exactly the published keys, one effect each.
    QStringList problems;
    const QSet<QByteArray> expected(keys->cbegin(), keys->cend());
    for (const auto &key : *keys) {
        if (m_figures.effects.value(key) != 1)
            problems << QStringLiteral("%1 had %2 effects").arg(QString::fromLatin1(key), QString::number(m_figures.effects.value(key)));
    }
    for (auto it = m_figures.effects.cbegin(); it != m_figures.effects.cend(); ++it) {
        if (!expected.contains(it.key()))
            problems << QStringLiteral("unexpected key %1").arg(QString::fromLatin1(it.key()));
    }
    QVERIFY2(problems.isEmpty(), qPrintable(problems.mid(0, 10).join(QLatin1String("; "))));
    // The crashes did catch sends in flight, and those were resent under the same key.
    QVERIFY2(resent >= 1, "no key was found in doubt and resent: the kills never met a send in flight");
}

void ScaleOutTest::noIdempotencyHold()
{
    const auto keys = runScenario(Partner::NoIdempotency, QStringLiteral("hold"));
    if (!keys)
        return;
    const int count = int(keys->size());
    const QHash<QByteArray, QString> states = ledgerStates();
    const QJsonArray listed = m_once->jsonArray({QStringLiteral("in-doubt"), QStringLiteral("--json")});
    QSet<QByteArray> listedKeys;
    for (const auto &value : listed)
        listedKeys.insert(value.toObject().value(QLatin1String("key")).toString().toLatin1());
    int heldWithEffect = 0;
    for (auto it = states.cbegin(); it != states.cend(); ++it) {
        if (it.value() == QLatin1String("in_doubt") && m_figures.effects.value(it.key()) > 0)
            ++heldWithEffect;
    }
    printFigures(QStringLiteral("run B (partner without idempotency, --in-doubt hold)"),
                 {QStringLiteral("%1 held keys had reached the partner, %2 had not")
                      .arg(heldWithEffect)
                      .arg(listedKeys.size() - heldWithEffect)});

    QVERIFY2(m_figures.kills >= MinKills,
             qPrintable(QStringLiteral("only %1 kills happened; the run proved little").arg(m_figures.kills)));
    // Never a second effect.
    QCOMPARE(qint64(m_figures.partnerStats.value(QLatin1String("duplicate_effects")).toDouble()), qint64(0));
    // Nothing lost, nothing left: every key applied or in doubt.
    const qint64 applied = qint64(m_figures.stats.value(QLatin1String("acked")).toDouble());
    const qint64 inDoubt = qint64(m_figures.stats.value(QLatin1String("in_doubt")).toDouble());
    QVERIFY2(applied + inDoubt == count,
             qPrintable(QStringLiteral("applied %1 + in doubt %2 != %3: %4")
                            .arg(applied)
                            .arg(inDoubt)
                            .arg(count)
                            .arg(QString::fromUtf8(QJsonDocument(m_figures.stats).toJson(QJsonDocument::Compact)))));
    VERIFY_NO_PROBLEMS(statsProblems(m_figures.stats, {{QStringLiteral("ready"), 0},
                                                       {QStringLiteral("in_flight"), 0},
                                                       {QStringLiteral("delayed"), 0},
                                                       {QStringLiteral("dead"), 0},
                                                       {QStringLiteral("claimed"), 0},
                                                       {QStringLiteral("retrying"), 0},
                                                       {QStringLiteral("dead_keys"), 0}}));
    QCOMPARE(states.size(), count);

    // Key by key, in the store itself: applied or in doubt; every key in doubt listed by
    // `once in-doubt`, and nothing else; every applied key acted on once at the partner;
    // every key the partner acted on applied or in doubt.
    const QSet<QByteArray> expected(keys->cbegin(), keys->cend());
    QStringList problems;
    QSet<QByteArray> inDoubtKeys;
    for (auto it = states.cbegin(); it != states.cend(); ++it) {
        const QString key = QString::fromLatin1(it.key());
        if (!expected.contains(it.key()))
            problems << QStringLiteral("unexpected key %1 in the ledger").arg(key);
        if (it.value() == QLatin1String("in_doubt"))
            inDoubtKeys.insert(it.key());
        else if (it.value() != QLatin1String("applied"))
            problems << QStringLiteral("%1 is %2").arg(key, it.value());
        else if (m_figures.effects.value(it.key()) != 1)
            problems << QStringLiteral("%1 is applied with %2 effects at the partner").arg(key, QString::number(m_figures.effects.value(it.key())));
    }
    if (listed.size() != inDoubt || listedKeys != inDoubtKeys)
        problems << QStringLiteral("once in-doubt lists %1 keys (%2 distinct), the ledger has %3 in doubt, stats say %4")
                        .arg(listed.size())
                        .arg(listedKeys.size())
                        .arg(inDoubtKeys.size())
                        .arg(inDoubt);
    for (auto it = m_figures.effects.cbegin(); it != m_figures.effects.cend(); ++it) {
        const QString state = states.value(it.key());
        if (it.value() != 1)
            problems << QStringLiteral("%1 had %2 effects").arg(QString::fromLatin1(it.key()), QString::number(it.value()));
        if (state != QLatin1String("applied") && state != QLatin1String("in_doubt"))
            problems << QStringLiteral("%1 had an effect but is %2 in the ledger")
                            .arg(QString::fromLatin1(it.key()), state.isEmpty() ? QStringLiteral("missing") : state);
    }
    if (problems.size() > 10)
        problems = problems.mid(0, 10) << QStringLiteral("... (%1 problems)").arg(problems.size());
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1String("; "))));
    // The crashes did catch sends in flight, and those were held for an operator.
    QVERIFY2(inDoubt >= 1, "no key is in doubt: the kills never met a send in flight");
}

QTEST_GUILESS_MAIN(ScaleOutTest)
// A restart or failover of the database cuts every worker's connection. The open
// transaction dies with it; the worker reconnects, writes the outcomes it still holds
// and goes on. Against a partner without idempotency, a send made twice would show.
void ScaleOutTest::lostDatabaseConnectionsAreSurvived()
{
    if (!m_stores.isPostgres())
        QSKIP("an embedded SQLite store has no server connection to lose");
    if (m_queues.isBroker())
        QSKIP("this cuts the store's connections; the broker's are cut by the crash tests");
    constexpr int Reminders = 3000;
    QFile file(m_dir->filePath(QStringLiteral("cut.jsonl")));
    QVERIFY(file.open(QIODevice::WriteOnly));
    for (int i = 0; i < Reminders; ++i)
        file.write(makeReminder(QStringLiteral("cut"), i).line + '\n');
    file.close();
    QVERIFY2(m_once->run({QStringLiteral("enqueue"), file.fileName()}, {}, EnqueueTimeoutMs).exitedWith(0),
             "enqueue failed");
    m_inDoubtPolicy = QStringLiteral("hold");
    m_partnerPort = startPartner(Partner::NoIdempotency);
    QVERIFY(m_partnerPort != 0);
    QList<QProcess *> workers{startWorker(QStringLiteral("cut-1")), startWorker(QStringLiteral("cut-2"))};

    // Every 700 ms, end every session the workers have, as a failover would.
    const QString database = QUrl(m_storeUrl).path().mid(1);
    QSqlQuery terminate(m_stores.admin());
    int cuts = 0;
    int sessionsEnded = 0;
    for (int round = 0; round < 6; ++round) {
        pumpUntil([] { return false; }, 700);
        QVERIFY2(terminate.exec(QStringLiteral("SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM "
                                               "pg_stat_activity WHERE datname = '%1' AND application_name = 'once' "
                                               "AND pid <> pg_backend_pid()) ended")
                                    .arg(database)),
                 qPrintable(terminate.lastError().text()));
        QVERIFY(terminate.next());
        sessionsEnded += terminate.value(0).toInt();
        ++cuts;
    }
    QString logs;
    for (QProcess *worker : std::as_const(workers)) {
        const auto result = m_once->waitFor(worker, 120000);
        QVERIFY2(result.exitedWith(0), result.describe().constData());
        logs += QString::fromUtf8(result.err);
    }
    const QJsonObject stats = m_once->stats();
    const QJsonObject partner = partnerJson("/stats");
    qInfo("connection cuts %d (%d sessions ended); applied %d, in doubt %d; partner effects %d, duplicate effects %d",
          cuts, sessionsEnded, stats.value(QLatin1String("acked")).toInt(), stats.value(QLatin1String("in_doubt")).toInt(),
          partner.value(QLatin1String("effects")).toInt(), partner.value(QLatin1String("duplicate_effects")).toInt());
    QVERIFY2(sessionsEnded >= 4, "the workers' sessions were not cut");
    QVERIFY2(logs.contains(QLatin1String("reconnected")), qPrintable(logs.right(2000)));
    QCOMPARE(partner.value(QLatin1String("duplicate_effects")).toInt(), 0);
    QCOMPARE(stats.value(QLatin1String("acked")).toInt() + stats.value(QLatin1String("in_doubt")).toInt(), Reminders);
    QCOMPARE(stats.value(QLatin1String("ready")).toInt(), 0);
    QCOMPARE(stats.value(QLatin1String("in_flight")).toInt(), 0);
    QCOMPARE(stats.value(QLatin1String("dead")).toInt(), 0);
    // Every effect belongs to a key the ledger calls applied or in doubt.
    QVERIFY(partner.value(QLatin1String("effects")).toInt() <= Reminders);
}

#include "tst_scaleout.moc"
