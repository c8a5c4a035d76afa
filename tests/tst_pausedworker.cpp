// A worker stopped past its lease (SIGSTOP here; a VM pause or a long stall in life)
// wakes up believing it still owns what it had claimed, while another worker has taken
// those keys over. These tests stop a real `once worker` with SIGSTOP in the middle of its
// work, let a second worker take over, resume the first, and count the effects at a
// partner without idempotency, where every avoidable resend is a second effect.
//
// Runs on SQLite and on PostgreSQL (STORES in tests/CMakeLists.txt).
#include "deliveryharness.h"
#include "store/ledger.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>

using namespace once;
using namespace oncetest;

class PausedWorkerTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void resumedWorkerDoesNotSendWhatItNoLongerOwns();
    void lateAnswerSettlesTheKeyAsApplied();
    void resendRefusedWhenTheHistoryHoldsA2xx();
    void aClaimThatRanOutIsNotCalledASendUnderWay();

private:
    // The two keys of the scenario: the one the paused worker had written to the partner
    // when it was stopped, and the one it had claimed and not sent yet.
    struct Paused
    {
        QByteArray sent;
        QByteArray unsent;
        QProcess *worker = nullptr;
    };
    // Enqueues two reminders, starts worker A (one send at a time, a second key claimed
    // ahead) against a slow partner, and stops it with SIGSTOP while its first request is
    // at the partner. Returns once the partner has applied that request.
    Paused pauseWorkerMidSend();
    QStringList workerArgs(const QString &id, const QString &policy) const;
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    QString ledgerState(const QByteArray &key);
    QJsonObject history(const QByteArray &key);
    bool storeExec(const QString &sql, const QVariantList &values);

    TestStores m_stores;
    QString m_onceBin;
    QString m_storeUrl;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

namespace {

// The lease must outlast two request timeouts for the worker to claim ahead of its send
// slots (Engine::leaseAhead), which is what leaves a claimed, unsent key behind at a pause.
constexpr int LeaseSeconds = 5;
constexpr int TimeoutSeconds = 2;
constexpr int PartnerLatencyMs = 1000;

void signalProcess(QProcess *process, int signal)
{
    ::kill(pid_t(process->processId()), signal);
}

} // namespace

void PausedWorkerTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void PausedWorkerTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_storeUrl = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_storeUrl);
    PartnerFaults profile;
    profile.idempotent = false; // every request that reaches it is an effect
    profile.latencyMs = PartnerLatencyMs;
    m_partner = std::make_unique<PartnerSimulator>(profile);
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void PausedWorkerTest::cleanup()
{
    m_once.reset(); // SIGKILLs what still runs (a stopped process too)
    m_partner.reset();
    m_dir.reset();
}

QStringList PausedWorkerTest::workerArgs(const QString &id, const QString &policy) const
{
    return {QStringLiteral("worker"),  QStringLiteral("--partner"),     partnerUrl(),
            QStringLiteral("--lease"), QString::number(LeaseSeconds),   QStringLiteral("--timeout"),
            QString::number(TimeoutSeconds), QStringLiteral("--concurrency"), QStringLiteral("1"),
            QStringLiteral("--in-doubt"), policy, QStringLiteral("--worker-id"), id,
            QStringLiteral("--backoff-base-ms"), QStringLiteral("50")};
}

QString PausedWorkerTest::ledgerState(const QByteArray &key)
{
    const auto rows = storeRows(m_stores, m_storeUrl,
                                QStringLiteral("SELECT state FROM ledger WHERE send_key = '%1'").arg(QString::fromLatin1(key)));
    return rows.value(0);
}

QJsonObject PausedWorkerTest::history(const QByteArray &key)
{
    const auto result = m_once->run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return QJsonDocument::fromJson(result.out).object();
}

// Changes a store behind once's back, as a store written by an older version would be.
bool PausedWorkerTest::storeExec(const QString &sql, const QVariantList &values)
{
    bool ok = false;
    {
        QSqlDatabase db = m_stores.openRaw(m_storeUrl, QStringLiteral("pausedworker-write"));
        QSqlQuery query(db);
        query.prepare(sql);
        for (const auto &value : values)
            query.addBindValue(value);
        ok = db.isOpen() && query.exec();
        if (!ok)
            qWarning("%s: %s", qPrintable(sql), qPrintable(query.lastError().text()));
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("pausedworker-write"));
    return ok;
}

PausedWorkerTest::Paused PausedWorkerTest::pauseWorkerMidSend()
{
    Paused paused;
    const QList<QByteArray> keys = m_once->enqueueReminders(m_dir->path(), 2, QStringLiteral("pause"));
    if (keys.size() != 2)
        return paused;

    paused.worker = m_once->start(workerArgs(QStringLiteral("A"), QStringLiteral("resend")));
    // A holds both claims: one request at the partner, the other key waiting for the slot.
    const bool busy = pumpUntil(
        [&] {
            return m_partner->stats().held == 1
                   && storeRows(m_stores, m_storeUrl,
                                QStringLiteral("SELECT COUNT(*) FROM ledger WHERE state = 'claimed' AND owner_worker = 'A'"))
                              .value(0)
                          == QLatin1String("2");
        },
        WorkerTimeoutMs);
    if (!busy) {
        qWarning("worker A never held two claims with one request at the partner");
        return paused;
    }
    signalProcess(paused.worker, SIGSTOP);
    // The partner acts on the request it holds, whether or not anybody reads the answer.
    if (!pumpUntil([&] { return m_partner->stats().effects == 1; }, WorkerTimeoutMs))
        return paused;
    const auto effects = m_partner->effectsByKey();
    paused.sent = effects.keys().value(0);
    paused.unsent = keys.value(0) == paused.sent ? keys.value(1) : keys.value(0);
    return paused;
}

void PausedWorkerTest::resumedWorkerDoesNotSendWhatItNoLongerOwns()
{
    const Paused paused = pauseWorkerMidSend();
    QVERIFY2(!paused.sent.isEmpty() && !paused.unsent.isEmpty(), "the scenario did not come about");

    // B takes both keys over once A's claims run out, and resends them with their keys.
    // The partner has no idempotency: the key A had written is applied twice, the window
    // the design names (hold is the policy for such a partner, see the next test); the key
    // A never sent is applied once, by B.
    const auto takeover =
        m_once->waitFor(m_once->start(workerArgs(QStringLiteral("B"), QStringLiteral("resend")) << QStringLiteral("--until-idle")),
                        WorkerTimeoutMs);
    QVERIFY2(takeover.exitedWith(0), takeover.describe().constData());
    QCOMPARE(m_partner->effectsByKey().value(paused.unsent), 1);

    // A wakes with the answer to its old request and the unsent key at the head of its
    // line. It no longer owns that key: it must not send it.
    signalProcess(paused.worker, SIGCONT);
    QVERIFY(pumpUntil([&] { return ledgerState(paused.unsent) == LedgerState::Applied; }, WorkerTimeoutMs));
    QTest::qWait(3 * PartnerLatencyMs); // time for a wrongful request to be applied
    signalProcess(paused.worker, SIGTERM);
    const auto resumed = m_once->waitFor(paused.worker, WorkerTimeoutMs);
    QVERIFY2(resumed.exitedWith(0), resumed.describe().constData());

    const auto effects = m_partner->effectsByKey();
    QVERIFY2(effects.value(paused.unsent) == 1,
             qPrintable(QStringLiteral("the key A had not sent was applied %1 times").arg(effects.value(paused.unsent))));
    QCOMPARE(m_partner->stats().requests, 3); // A's one before the pause, B's two
    // The history says why A let it go.
    bool lapsed = false;
    for (const auto &value : history(paused.unsent).value(QLatin1String("attempts")).toArray()) {
        const auto row = value.toObject();
        lapsed = lapsed
                 || (row.value(QLatin1String("worker")).toString() == QLatin1String("A")
                     && row.value(QLatin1String("outcome")).toString() == QLatin1String("lapsed")
                     && row.value(QLatin1String("error")).toString().startsWith(QLatin1String("not sent")));
    }
    QVERIFY2(lapsed, QJsonDocument(history(paused.unsent)).toJson().constData());
    QVERIFY2(resumed.err.contains("ran out before its send"), resumed.err.constData());
}

void PausedWorkerTest::lateAnswerSettlesTheKeyAsApplied()
{
    const Paused paused = pauseWorkerMidSend();
    QVERIFY2(!paused.sent.isEmpty() && !paused.unsent.isEmpty(), "the scenario did not come about");

    // B, for a partner without idempotency, holds both keys for an operator.
    const auto takeover =
        m_once->waitFor(m_once->start(workerArgs(QStringLiteral("B"), QStringLiteral("hold")) << QStringLiteral("--until-idle")),
                        WorkerTimeoutMs);
    QVERIFY2(takeover.exitedWith(0), takeover.describe().constData());
    QCOMPARE(ledgerState(paused.sent), QString(LedgerState::InDoubt));
    QCOMPARE(ledgerState(paused.unsent), QString(LedgerState::InDoubt));
    // What is known: A claimed them, and may have sent them; not "first sent never".
    const auto listed = m_once->run({QStringLiteral("in-doubt")});
    QVERIFY2(listed.exitedWith(0), listed.describe().constData());
    for (const auto &key : {paused.sent, paused.unsent})
        QVERIFY2(listed.out.contains(QByteArray(key + "  since ")), listed.out.constData());
    QVERIFY2(!listed.out.contains("never"), listed.out.constData());
    QCOMPARE(listed.out.count("claimed by A at "), 2);
    QCOMPARE(listed.out.count(", may have been sent (the claim ran out at "), 2);

    // A wakes up and reads the partner's 200 for the key it had sent: that is knowledge
    // the ledger must keep, or an operator would resend it and the user would get it twice.
    signalProcess(paused.worker, SIGCONT);
    QVERIFY2(pumpUntil([&] { return ledgerState(paused.sent) == LedgerState::Applied; }, WorkerTimeoutMs),
             qPrintable(QStringLiteral("the key A's late 200 answered is %1").arg(ledgerState(paused.sent))));
    signalProcess(paused.worker, SIGTERM);
    const auto resumed = m_once->waitFor(paused.worker, WorkerTimeoutMs);
    QVERIFY2(resumed.exitedWith(0), resumed.describe().constData());
    // The key A never sent stays in doubt (B held it; nobody knows more).
    QCOMPARE(ledgerState(paused.unsent), QString(LedgerState::InDoubt));

    const auto refused = m_once->run({QStringLiteral("resolve"), QString::fromLatin1(paused.sent), QStringLiteral("--resend")});
    QVERIFY2(refused.exitedWith(1), refused.describe().constData());
    QVERIFY2(refused.err.contains("not in doubt"), refused.err.constData());

    // The operator resends the one that is really in doubt; it is applied once.
    const auto resend = m_once->run({QStringLiteral("resolve"), QString::fromLatin1(paused.unsent), QStringLiteral("--resend")});
    QVERIFY2(resend.exitedWith(0), resend.describe().constData());
    const auto rest =
        m_once->waitFor(m_once->start(workerArgs(QStringLiteral("C"), QStringLiteral("hold")) << QStringLiteral("--until-idle")),
                        WorkerTimeoutMs);
    QVERIFY2(rest.exitedWith(0), rest.describe().constData());
    const auto effects = m_partner->effectsByKey();
    QCOMPARE(effects.value(paused.sent), 1);
    QCOMPARE(effects.value(paused.unsent), 1);
    QCOMPARE(m_partner->stats().duplicateEffects, 0);
    const auto stats = m_once->stats();
    QCOMPARE(stats.value(QLatin1String("acked")).toInt(), 2);
    QCOMPARE(stats.value(QLatin1String("in_doubt")).toInt(), 0);
}

void PausedWorkerTest::resendRefusedWhenTheHistoryHoldsA2xx()
{
    const Paused paused = pauseWorkerMidSend();
    QVERIFY2(!paused.sent.isEmpty(), "the scenario did not come about");
    signalProcess(paused.worker, SIGCONT);
    QVERIFY(pumpUntil([&] { return ledgerState(paused.sent) == LedgerState::Applied; }, WorkerTimeoutMs));
    signalProcess(paused.worker, SIGTERM);
    const auto stopped = m_once->waitFor(paused.worker, WorkerTimeoutMs);
    QVERIFY2(stopped.exitedWith(0), stopped.describe().constData());

    // A ledger that says in doubt beside a history that holds the partner's 2xx (a store
    // an older once wrote): the history wins, a resend is refused.
    QVERIFY(storeExec(QStringLiteral("UPDATE ledger SET state = 'in_doubt', applied_at = NULL WHERE send_key = ?"),
                      {QString::fromLatin1(paused.sent)}));
    const auto refused = m_once->run({QStringLiteral("resolve"), QString::fromLatin1(paused.sent), QStringLiteral("--resend")});
    QVERIFY2(refused.exitedWith(1), refused.describe().constData());
    QVERIFY2(refused.err.contains("the partner answered HTTP 200 to a send at"), refused.err.constData());
    QVERIFY2(refused.err.contains("Mark it delivered instead"), refused.err.constData());
    QCOMPARE(ledgerState(paused.sent), QString(LedgerState::InDoubt)); // nothing changed
    QCOMPARE(storeRows(m_stores, m_storeUrl, QStringLiteral("SELECT COUNT(*) FROM queue")).value(0), QStringLiteral("0"));
    const auto marked =
        m_once->run({QStringLiteral("resolve"), QString::fromLatin1(paused.sent), QStringLiteral("--mark-delivered")});
    QVERIFY2(marked.exitedWith(0), marked.describe().constData());
    QCOMPARE(m_partner->effectsByKey().value(paused.sent), 1);
}

QTEST_GUILESS_MAIN(PausedWorkerTest)
// Support looks an event up while its worker is stopped, and no other worker runs to take
// its claims over: the history must not say a worker is sending it. It said "a worker is
// sending it now" for as long as the claim stayed, hours when no worker ran.
void PausedWorkerTest::aClaimThatRanOutIsNotCalledASendUnderWay()
{
    const Paused paused = pauseWorkerMidSend();
    QVERIFY2(!paused.sent.isEmpty() && !paused.unsent.isEmpty(), "the scenario did not come about");
    const auto verdictOf = [&](const QByteArray &key) {
        return history(key).value(QLatin1String("verdict")).toString();
    };

    // While A's claims run, A is the one sending them.
    for (const auto &key : {paused.sent, paused.unsent}) {
        const QString verdict = verdictOf(key);
        QVERIFY2(verdict.startsWith(
                     QLatin1String("Not delivered yet: A claimed it to send it; the claim runs until ")),
                 qPrintable(verdict));
    }

    // Once they have run out, nobody is: each may have been sent.
    QVERIFY2(pumpUntil([&] { return verdictOf(paused.unsent).contains(QLatin1String("ran out")); },
                       2 * LeaseSeconds * 1000),
             qPrintable(verdictOf(paused.unsent)));
    for (const auto &key : {paused.sent, paused.unsent}) {
        const QString verdict = verdictOf(key);
        QVERIFY2(verdict.startsWith(QLatin1String("Not delivered yet: claimed by A at ")),
                 qPrintable(verdict));
        QVERIFY2(verdict.contains(QLatin1String(", may have been sent (the claim ran out at ")),
                 qPrintable(verdict));
        QVERIFY2(!verdict.contains(QLatin1String("sending")), qPrintable(verdict));
        QCOMPARE(ledgerState(key), QString(LedgerState::Claimed));
    }
    QCOMPARE(m_partner->stats().effects, 1);
}

#include "tst_pausedworker.moc"
