// What the store knows about a partner, and what the partner's answers say about it,
// must decide what a worker does: a partner recorded as not honouring Idempotency-Key
// never gets a send left in doubt again, and a partner that refuses everyone (a revoked
// credential, the same permanent answer to every reminder) is an outage that reminders
// wait out, not hundreds of bad reminders to dead-letter. Real `once` processes against
// the partner simulator; effects counted at the partner.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "teststores.h"
#include "operator/inspector.h"
#include "store/store.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

class PartnerTruthTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void aPartnerRecordedAsIgnoringTheKeyIsNeverResentInDoubt();
    void aRecordChangedWhileRunningIsObeyed();
    void aRefusedCredentialIsAnOutageRemindersWaitOut();
    void theSamePermanentAnswerToEveryReminderIsPartnerWide();
    void aRedriveSaysWhatCameOfIt();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    QStringList workerArgs(const QStringList &extra = {}) const;
    QJsonObject onlyWorker();
    qint64 deadLetters();

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

void PartnerTruthTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void PartnerTruthTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    PartnerFaults profile;
    profile.idempotent = false; // every request that reaches it is an effect
    m_partner = std::make_unique<PartnerSimulator>(profile);
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void PartnerTruthTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

QStringList PartnerTruthTest::workerArgs(const QStringList &extra) const
{
    return QStringList{QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                       QStringLiteral("--concurrency"), QStringLiteral("4"), QStringLiteral("--worker-id"),
                       QStringLiteral("truth"), QStringLiteral("--backoff-base-ms"), QStringLiteral("50")}
           + extra;
}

QJsonObject PartnerTruthTest::onlyWorker()
{
    const QJsonArray workers = m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")});
    return workers.size() == 1 ? workers.first().toObject() : QJsonObject();
}

qint64 PartnerTruthTest::deadLetters()
{
    return m_once->stats().value(QLatin1String("dead")).toInteger(-1);
}

// The store says the partner does not deduplicate; the worker runs with the default
// --in-doubt resend. Every answer the partner drops after acting is held, not resent:
// a resend there is a second text to the same customer.
void PartnerTruthTest::aPartnerRecordedAsIgnoringTheKeyIsNeverResentInDoubt()
{
    constexpr int Count = 60;
    PartnerFaults profile = m_partner->profile();
    profile.dropAfterAcceptRate = 0.25;
    m_partner->setProfile(profile);
    const auto record = m_once->run({QStringLiteral("partners"), partnerUrl(), QStringLiteral("--honours-key"),
                                     QStringLiteral("no")});
    QVERIFY2(record.exitedWith(0), record.describe().constData());
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("ignored"));
    QCOMPARE(keys.size(), Count);

    const auto worker = m_once->waitFor(m_once->start(workerArgs({QStringLiteral("--until-idle")})), WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    const PartnerStats partner = m_partner->stats();
    QVERIFY2(partner.dropped > 0, "the partner dropped no answer: the scenario did not come about");
    QCOMPARE(partner.duplicateEffects, 0);
    QVERIFY2(worker.err.contains("held for an operator, not resent: the store records that"), worker.err.constData());
    QCOMPARE(partner.effects, qint64(Count));
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    QCOMPARE(m_once->stats().value(QLatin1String("in_doubt")).toInteger(), partner.dropped);

    const QJsonObject self = onlyWorker();
    QCOMPARE(self.value(QLatin1String("in_doubt_policy")).toString(), QStringLiteral("hold"));
    QCOMPARE(self.value(QLatin1String("in_doubt_policy_configured")).toString(), QStringLiteral("resend"));
    const auto table = m_once->run({QStringLiteral("workers")});
    QVERIFY2(table.out.contains("hold*") && table.out.contains("does not honour Idempotency-Key"), table.out.constData());
}

// An operator records the partner as not honouring the key while a worker runs: within a
// few heartbeats the worker holds what is in doubt, says so, and shows it on the store.
void PartnerTruthTest::aRecordChangedWhileRunningIsObeyed()
{
    QProcess *worker = m_once->start(workerArgs());
    QByteArray log;
    QVERIFY(pumpUntil([&] { return onlyWorker().value(QLatin1String("in_doubt_policy")) == QLatin1String("resend"); },
                      WorkerTimeoutMs));
    const auto record = m_once->run({QStringLiteral("partners"), partnerUrl(), QStringLiteral("--honours-key"),
                                     QStringLiteral("no")});
    QVERIFY2(record.exitedWith(0), record.describe().constData());
    QVERIFY2(pumpUntil(
                 [&] {
                     log += worker->readAllStandardError();
                     return log.contains("sends left in doubt are now held for an operator");
                 },
                 10000),
             log.constData());
    QVERIFY(pumpUntil([&] { return onlyWorker().value(QLatin1String("in_doubt_policy")) == QLatin1String("hold"); },
                      10000));

    constexpr int Count = 30;
    PartnerFaults profile = m_partner->profile();
    profile.dropAfterAcceptRate = 0.3;
    m_partner->setProfile(profile);
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("changed"));
    QCOMPARE(keys.size(), Count);
    QVERIFY2(pumpUntil(
                 [&] {
                     const QJsonObject stats = m_once->stats();
                     return stats.value(QLatin1String("acked")).toInteger() + stats.value(QLatin1String("in_doubt")).toInteger()
                            == Count;
                 },
                 WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    QVERIFY2(m_partner->stats().dropped > 0, "the partner dropped no answer: the scenario did not come about");
    QCOMPARE(m_partner->stats().duplicateEffects, 0);
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
}

// A proxy in front of the partner answers 401 to everything for a while (an expired
// token). Before, every reminder was dead-lettered as rejected within the outage. Now the
// breaker opens, the worker says the partner refuses its credentials, no reminder dies,
// and all of them go out once the credential works again.
void PartnerTruthTest::aRefusedCredentialIsAnOutageRemindersWaitOut()
{
    constexpr int Count = 80;
    PartnerFaults profile = m_partner->profile();
    profile.idempotent = true;
    profile.refuseStatus = 401;
    m_partner->setProfile(profile);
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("token"));
    QCOMPARE(keys.size(), Count);
    // Few tries each, so that a reminder spending its tries on the refusals would die.
    QProcess *worker = m_once->start(workerArgs({QStringLiteral("--max-attempts"), QStringLiteral("2")}));
    QVERIFY2(pumpUntil(
                 [&] {
                     const QJsonObject self = onlyWorker();
                     return self.value(QLatin1String("breaker")) == QLatin1String("open")
                            && self.value(QLatin1String("last_error_class")) == QLatin1String("credentials-refused")
                            && self.value(QLatin1String("last_http_status")).toInt() == 401;
                 },
                 WorkerTimeoutMs),
             QJsonDocument(onlyWorker()).toJson().constData());
    // The breaker's probes go on: each is refused again, and still nothing dies.
    const qint64 refusedBefore = m_partner->stats().requests;
    QVERIFY(pumpUntil([&] { return m_partner->stats().requests >= refusedBefore + 3; }, WorkerTimeoutMs));
    QCOMPARE(deadLetters(), 0);
    QCOMPARE(m_partner->stats().effects, 0);
    QVERIFY2(m_partner->stats().requests < 4 * Count, "the breaker did not hold the worker back");

    profile.refuseStatus = 0; // the token is fixed
    m_partner->setProfile(profile);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects == Count; }, 2 * WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    QCOMPARE(deadLetters(), 0);
    QVERIFY(pumpUntil([&] { return m_once->stats().value(QLatin1String("acked")).toInteger() == Count; }, WorkerTimeoutMs));
    worker->terminate();
    QVERIFY(worker->waitForFinished(WorkerTimeoutMs));
}

// The partner answers 400 to every reminder (its API changed under us). The first few
// are bad reminders as far as anyone can tell; from the tenth different one in a row it
// is the partner: the rest wait, and go out once it accepts them again.
void PartnerTruthTest::theSamePermanentAnswerToEveryReminderIsPartnerWide()
{
    constexpr int Count = 60;
    constexpr int DeadBeforeTheRun = 9; // Engine's RefusalsInARowForEveryone, less one
    PartnerFaults profile = m_partner->profile();
    profile.idempotent = true;
    profile.refuseStatus = 400;
    m_partner->setProfile(profile);
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("api"));
    QCOMPARE(keys.size(), Count);
    QProcess *worker = m_once->start(workerArgs({QStringLiteral("--concurrency"), QStringLiteral("1")}));
    QVERIFY2(pumpUntil(
                 [&] {
                     const QJsonObject self = onlyWorker();
                     return self.value(QLatin1String("breaker")) == QLatin1String("open")
                            && self.value(QLatin1String("last_error_class")) == QLatin1String("partner-refusing");
                 },
                 WorkerTimeoutMs),
             QJsonDocument(onlyWorker()).toJson().constData());
    QCOMPARE(deadLetters(), DeadBeforeTheRun);

    profile.refuseStatus = 0;
    m_partner->setProfile(profile);
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects == Count - DeadBeforeTheRun; }, 2 * WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    QCOMPARE(deadLetters(), DeadBeforeTheRun);
    worker->terminate();
    QVERIFY(worker->waitForFinished(WorkerTimeoutMs));
}

// The audit log said what an operator asked (a redrive of so many letters) and never
// what came of it. Now each redrive's entry counts, as it becomes known, the letters
// delivered since and those that died again.
void PartnerTruthTest::aRedriveSaysWhatCameOfIt()
{
    PartnerFaults profile = m_partner->profile();
    profile.idempotent = true;
    profile.refuseStatus = 400; // a few bad reminders, each its own (fewer than a run of refusals)
    m_partner->setProfile(profile);
    const auto untilIdle = [&] {
        const auto worker = m_once->waitFor(m_once->start(workerArgs({QStringLiteral("--until-idle")})), WorkerTimeoutMs);
        QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    };
    const auto redriveAll = [&] {
        const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all")});
        QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    };
    const auto redriveOutcomes = [&] {
        QString error;
        const auto store = Store::open(m_once->storeUrl(), &error);
        QList<std::pair<qint64, qint64>> outcomes; // oldest redrive first
        const auto log = store ? store->inspector().auditLog(10, &error) : std::nullopt;
        for (const AuditEntry &entry : log.value_or(QList<AuditEntry>()))
            if (entry.action == QLatin1String("redrive") && entry.outcome)
                outcomes.prepend({entry.outcome->delivered, entry.outcome->diedAgain});
        if (!log)
            qWarning("%s", qPrintable(error));
        return outcomes;
    };

    QCOMPARE(m_once->enqueueReminders(m_dir->path(), 4, QStringLiteral("first")).size(), 4);
    untilIdle();
    QCOMPARE(deadLetters(), 4);
    redriveAll(); // the partner still refuses them: they die again
    untilIdle();
    using Outcomes = QList<std::pair<qint64, qint64>>;
    QCOMPARE(redriveOutcomes(), (Outcomes{{0, 4}}));

    profile.refuseStatus = 0; // fixed at the partner
    m_partner->setProfile(profile);
    redriveAll();
    QCOMPARE(redriveOutcomes(), (Outcomes{{0, 4}, {0, 0}})); // on their way; the first one's stays what it was
    untilIdle();
    QCOMPARE(redriveOutcomes(), (Outcomes{{0, 4}, {4, 0}}));
    QCOMPARE(m_partner->stats().effects, 4);
}

QTEST_GUILESS_MAIN(PartnerTruthTest)
#include "tst_partnertruth.moc"
