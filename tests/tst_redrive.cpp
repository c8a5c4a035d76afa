// One redrive (RedriveRun) under `once redrive`, the console and `once serve`: a canary that
// goes first, a stop rule, a pause while the workers' breaker is open, and the preview that
// tells what would be sent from what is already applied. Real `once` processes (a worker,
// the redrive) against a real partner simulator; effects counted there; dead letters made
// in the store as a worker leaves them.
#include "buriedletters.h"
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

class RedriveTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void aCanaryThatFailsStopsTheRedrive();
    void aCanaryThatIsAppliedLetsTheRestGo();
    void aRedriveStopsAfterSoManyFailedSends();
    void aRedriveWaitsWhileTheWorkersBreakerIsOpen();
    void aRedriveGoesNoFasterThanThePartnerTakes();
    void thePreviewTellsAppliedKeysApart();
    void expiredLettersAreNamedSkippedAndNeverSent();
    void almostValidOptionsAreRefused_data();
    void almostValidOptionsAreRefused();

private:
    // Buries `count` reminders of prefix as dead letters; their keys.
    QList<QByteArray> bury(const QString &prefix, int count, const QString &expiresAt = {});
    QProcess *startWorker(const QStringList &extra = {});
    qint64 storeCount(const QString &sql);
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

void RedriveTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void RedriveTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    PartnerFaults faults;
    faults.idempotent = false; // every request that reaches the partner is an effect
    m_partner = std::make_unique<PartnerSimulator>(faults);
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void RedriveTest::cleanup()
{
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

// expiresAt: the reminders' expires_at (RFC 3339), or none.
QList<QByteArray> RedriveTest::bury(const QString &prefix, int count, const QString &expiresAt)
{
    QString error;
    const auto store = Store::open(m_once->storeUrl(), &error);
    if (!store) {
        qWarning("%s", qPrintable(error));
        return {};
    }
    QList<QByteArray> keys;
    for (int i = 0; i < count; ++i) {
        ReminderSpec spec = makeReminder(prefix, i);
        if (!expiresAt.isEmpty()) {
            QJsonObject object = QJsonDocument::fromJson(spec.line).object();
            object.insert(QStringLiteral("expires_at"), expiresAt);
            spec.line = QJsonDocument(object).toJson(QJsonDocument::Compact);
        }
        const auto parsed = parseReminder(spec.line);
        if (!parsed.reminder || !buryReminder(*store, *parsed.reminder, QStringLiteral("http-5xx"), 0, 0, &error)) {
            qWarning("cannot bury %s: %s%s", spec.line.constData(), qPrintable(parsed.error), qPrintable(error));
            return {};
        }
        keys << spec.key;
    }
    return keys;
}

QProcess *RedriveTest::startWorker(const QStringList &extra)
{
    return m_once->start(QStringList{QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                     QStringLiteral("--worker-id"), QStringLiteral("redrive-worker"),
                                     QStringLiteral("--backoff-base-ms"), QStringLiteral("100"),
                                     QStringLiteral("--backoff-cap-s"), QStringLiteral("1")}
                         + extra);
}

qint64 RedriveTest::storeCount(const QString &sql)
{
    QString error;
    const QStringList rows = storeRows(m_stores, m_once->storeUrl(), sql, &error);
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    return rows.value(0, QStringLiteral("-1")).toLongLong();
}

// The partner still fails: the canary's two letters go back, each fails its send, and the
// redrive stops there, saying so; the other eight stay dead letters and the audit row
// says why it stopped.
void RedriveTest::aCanaryThatFailsStopsTheRedrive()
{
    constexpr int Count = 10;
    QCOMPARE(bury(QStringLiteral("canary-fails"), Count).size(), Count);
    PartnerFaults failing;
    failing.idempotent = false;
    failing.failRate = 1;
    m_partner->setProfile(failing);
    startWorker();
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--canary"),
                                      QStringLiteral("2"), QStringLiteral("--reason"), QStringLiteral("after the outage")},
                                     {}, WorkerTimeoutMs);
    QVERIFY2(redrive.exitedWith(1), redrive.describe().constData());
    QVERIFY2(redrive.out.contains("waiting-for-canary: 2 of 10 moved; waiting for the 2 canary letters") && redrive.out.contains("redrove 2 dead letters")
                 && redrive.out.contains("the canary failed: none of its 2 letters was applied"),
             redrive.describe().constData());
    QCOMPARE(m_partner->stats().effects, qint64(0));
    QVERIFY(m_partner->stats().requests >= 2);
    QCOMPARE(storeCount(QStringLiteral("SELECT COUNT(*) FROM audit_log WHERE action = 'redrive' AND count = 2 "
                                       "AND detail LIKE 'all (the canary failed: none of its 2 letters%'")),
             1);
    // The eight it did not touch are still dead letters; the two it did are retrying.
    QCOMPARE(m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), Count - 2);
}

// A healthy partner: the canary's two are applied, then the other eight go; each once.
void RedriveTest::aCanaryThatIsAppliedLetsTheRestGo()
{
    constexpr int Count = 10;
    const QList<QByteArray> keys = bury(QStringLiteral("canary-ok"), Count);
    QCOMPARE(keys.size(), Count);
    startWorker();
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--canary"),
                                      QStringLiteral("2"), QStringLiteral("--rate"), QStringLiteral("100")},
                                     {}, WorkerTimeoutMs);
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    QVERIFY2(redrive.out.contains("waiting-for-canary: 2 of 10 moved") && redrive.out.contains("redrove 10 dead letters"),
             redrive.describe().constData());
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= Count; }, WorkerTimeoutMs),
             QByteArray::number(m_partner->stats().effects).constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    // No letter but the canary reached the partner before the canary was applied.
    const qint64 firstAfterCanary = storeCount(QStringLiteral(
        "SELECT COUNT(*) FROM attempts r WHERE r.step = 'operator' AND r.outcome = 'redriven' AND r.at < "
        "(SELECT MAX(a.at) FROM attempts a WHERE a.step = 'send' AND a.outcome = 'applied' AND a.send_key IN "
        "(SELECT c.send_key FROM attempts c WHERE c.step = 'operator' AND c.outcome = 'redriven' ORDER BY c.id LIMIT 2))"));
    QCOMPARE(firstAfterCanary, 2);
}

// The partner keeps failing: the run stops once the letters it put back failed four
// sends, long before all forty are back, and says so.
void RedriveTest::aRedriveStopsAfterSoManyFailedSends()
{
    constexpr int Count = 40;
    QCOMPARE(bury(QStringLiteral("stop-rule"), Count).size(), Count);
    PartnerFaults failing;
    failing.idempotent = false;
    failing.failRate = 1;
    m_partner->setProfile(failing);
    startWorker();
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--rate"),
                                      QStringLiteral("5"), QStringLiteral("--stop-after-failures"), QStringLiteral("4")},
                                     {}, WorkerTimeoutMs);
    QVERIFY2(redrive.exitedWith(1), redrive.describe().constData());
    QVERIFY2(redrive.out.contains("stopped after ") && redrive.out.contains(" failed sends of redriven letters (the last: http-5xx)"),
             redrive.describe().constData());
    const qint64 moved = storeCount(QStringLiteral("SELECT count FROM audit_log WHERE action = 'redrive'"));
    QVERIFY2(moved > 0 && moved < Count, QByteArray::number(moved).constData());
    QCOMPARE(m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), Count - moved);
    QCOMPARE(storeCount(QStringLiteral("SELECT COUNT(*) FROM audit_log WHERE action = 'redrive' "
                                       "AND detail LIKE '%(stopped after %failed sends of redriven letters%'")),
             1);
}

// The worker's breaker opens on the first letters the redrive puts back: the run holds
// (nothing more moves while it is open, though its ceiling would move them all in a
// second) and goes on by itself once the partner answers and the breaker closes. Each
// reminder is applied once.
void RedriveTest::aRedriveWaitsWhileTheWorkersBreakerIsOpen()
{
    constexpr int Count = 60;
    const QList<QByteArray> keys = bury(QStringLiteral("held"), Count);
    QCOMPARE(keys.size(), Count);
    PartnerFaults failing;
    failing.idempotent = false;
    failing.failRate = 1;
    m_partner->setProfile(failing);
    startWorker({QStringLiteral("--max-attempts"), QStringLiteral("20")});
    QProcess *redrive = m_once->start({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--rate"),
                                       QStringLiteral("10")});
    QByteArray out;
    QVERIFY2(pumpUntil(
                 [&] {
                     out += redrive->readAllStandardOutput();
                     return out.contains("held: ");
                 },
                 WorkerTimeoutMs),
             out.constData());
    QVERIFY2(out.contains("'s breaker is open on 1 worker; waiting until it closes"), out.constData());
    const QString moved = QStringLiteral("SELECT count FROM audit_log WHERE action = 'redrive'");
    const qint64 movedWhenHeld = storeCount(moved);
    QVERIFY2(movedWhenHeld < Count, QByteArray::number(movedWhenHeld).constData());
    // Two seconds held: at its ceiling it would have moved twenty more.
    QTest::qWait(2000);
    QCOMPARE(storeCount(moved), movedWhenHeld);
    QCOMPARE(redrive->state(), QProcess::Running);

    PartnerFaults healthy;
    healthy.idempotent = false;
    m_partner->setProfile(healthy);
    const ProcessResult finished = m_once->waitFor(redrive, WorkerTimeoutMs);
    QVERIFY2(finished.exitedWith(0), finished.describe().constData());
    QVERIFY2(finished.out.contains("redrove 60 dead letters"), QByteArray(out + finished.out).constData());
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= Count; }, WorkerTimeoutMs),
             QByteArray::number(m_partner->stats().effects).constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
}

// After an outage, 400 dead letters go back with a ceiling of 200 a second, to a partner
// that admits 20 requests a second and answers 429 beyond. The workers send at the
// partner's pace (AIMD) and tell it in their heartbeat; the redrive slows to that pace
// rather than filling the queue at its ceiling. Each reminder is applied once, and 429s
// stay a small share of the partner's requests (counted at the partner).
void RedriveTest::aRedriveGoesNoFasterThanThePartnerTakes()
{
    constexpr int Count = 400;
    const QList<QByteArray> keys = bury(QStringLiteral("paced"), Count);
    QCOMPARE(keys.size(), Count);
    PartnerFaults limited;
    limited.idempotent = false;
    limited.rateLimitPerSecond = 20;
    m_partner->setProfile(limited);
    startWorker({QStringLiteral("--max-attempts"), QStringLiteral("20")});
    QElapsedTimer clock;
    clock.start();
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--rate"),
                                      QStringLiteral("200")},
                                     {}, 4 * WorkerTimeoutMs);
    const qint64 redriveMs = clock.elapsed();
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    QVERIFY2(redrive.out.contains("redrove 400 dead letters"), redrive.describe().constData());
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= Count; }, 4 * WorkerTimeoutMs),
             QByteArray::number(m_partner->stats().effects).constData());
    const qint64 deliveredMs = clock.elapsed();
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys));
    const PartnerStats stats = m_partner->stats();
    const double share = double(stats.rateLimited) / double(std::max<qint64>(1, stats.requests));
    qInfo("400 letters redriven at a ceiling of 200/s to a partner taking 20/s: the redrive took %lld ms, every "
          "reminder applied after %lld ms; the partner had %lld requests, %lld of them 429 (%.1f %%)",
          redriveMs, deliveredMs, stats.requests, stats.rateLimited, share * 100);
    QVERIFY2(redrive.out.contains("throttled: "), redrive.out.constData());
    QVERIFY2(share < 0.2, qPrintable(QStringLiteral("429s were %1 %% of %2 requests").arg(share * 100).arg(stats.requests)));
    QCOMPARE(m_once->stats().value(QLatin1String("dead")).toInteger(), 0);
}

// A dead letter whose reminder took effect after all is told apart in the preview: the
// send that "failed" reached the partner, whose delivery event says so (once serve's
// events endpoint records it through Operations::recordPartnerEvent, as here), and the
// key is settled applied. A redrive would only record a duplicate for it.
void RedriveTest::thePreviewTellsAppliedKeysApart()
{
    const QList<QByteArray> keys = bury(QStringLiteral("applied-meanwhile"), 3);
    QCOMPARE(keys.size(), 3);
    {
        QString error;
        const auto store = Store::open(m_once->storeUrl(), &error);
        QVERIFY2(store, qPrintable(error));
        PartnerEvent delivered;
        delivered.carriedKey = keys.first();
        delivered.kind = PartnerEvent::Kind::Delivered;
        delivered.providerKind = QStringLiteral("delivered");
        delivered.eventId = QStringLiteral("evt-1");
        delivered.atMs = nowMs();
        const auto recorded = store->operations().recordPartnerEvent(delivered, QStringLiteral("webhook"),
                                                                     QStringLiteral("webhook"), QStringLiteral("Webhook"), &error);
        QVERIFY2(recorded && recorded->settled, qPrintable(error));
    }

    const auto dryRun = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--dry-run")});
    QVERIFY2(dryRun.exitedWith(0), dryRun.describe().constData());
    QVERIFY2(dryRun.out.contains("3 dead letters: 2 would be sent, 1 already applied (suppressed as duplicates), 0 expired"),
             dryRun.out.constData());
    QCOMPARE(dryRun.out.count("applied       "), 1);
    QCOMPARE(dryRun.out.count("would redrive "), 2);
    QVERIFY2(dryRun.out.contains("applied       ") && dryRun.out.contains(keys.first()), dryRun.out.constData());
    QCOMPARE(m_partner->stats().requests, qint64(0));

    // Redriven all the same, the applied one is a recorded no-op: the partner gets the other two.
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all")});
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    const auto drain = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                    QStringLiteral("--until-idle")},
                                   {}, WorkerTimeoutMs);
    QVERIFY2(drain.exitedWith(0), drain.describe().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, keys.mid(1)));
    QCOMPARE(m_partner->stats().requests, qint64(2));
}

// Three dead letters whose reminders expired (an hour after their time, long ago) and
// five that did not: the preview names the three with how late they would be, the redrive
// skips them and says so, and the partner never hears of them. Put back on purpose
// (--include-expired), a worker settles them expired, unsent.
void RedriveTest::expiredLettersAreNamedSkippedAndNeverSent()
{
    const QList<QByteArray> fresh = bury(QStringLiteral("fresh"), 5);
    const QList<QByteArray> stale = bury(QStringLiteral("stale"), 3, QStringLiteral("2024-05-01T10:00:00Z"));
    QCOMPARE(fresh.size(), 5);
    QCOMPARE(stale.size(), 3);
    const auto dryRun = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--dry-run")});
    QVERIFY2(dryRun.exitedWith(0), dryRun.describe().constData());
    QVERIFY2(dryRun.out.contains("dry run: 8 dead letters: 5 would be sent, 0 already applied (suppressed as duplicates), "
                                 "3 expired (skipped: --include-expired puts them back)"),
             dryRun.out.constData());
    for (const QByteArray &key : stale) {
        const qsizetype at = dryRun.out.indexOf(key);
        QVERIFY2(at > 0, key.constData());
        const QByteArray line = dryRun.out.mid(dryRun.out.lastIndexOf('\n', at) + 1).split('\n').value(0);
        QVERIFY2(line.startsWith("expired ") && line.contains("(expired 2024-05-01T10:00:00.000Z; would be ")
                     && line.endsWith(" late)"),
                 line.constData());
    }

    startWorker();
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all")});
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    QVERIFY2(redrive.out.contains("redrove 5 dead letters; skipped 3 expired"), redrive.describe().constData());
    QVERIFY2(pumpUntil([&] { return m_partner->stats().effects >= 5; }, WorkerTimeoutMs),
             QByteArray::number(m_partner->stats().effects).constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_partner, fresh));
    QCOMPARE(m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), 3);

    const auto included = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--include-expired")});
    QVERIFY2(included.exitedWith(0), included.describe().constData());
    QVERIFY2(included.out.contains("redrove 3 dead letters"), included.describe().constData());
    QVERIFY2(pumpUntil([&] { return m_once->stats().value(QLatin1String("expired")).toInteger() == 3; }, WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    QCOMPARE(m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), 0);
    QCOMPARE(m_partner->stats().requests, qint64(5));
    for (const QByteArray &key : stale)
        QCOMPARE(m_partner->effectsByKey().value(key), 0);
}

void RedriveTest::almostValidOptionsAreRefused_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QByteArray>("error");
    QTest::newRow("negative canary") << QStringList{QStringLiteral("--canary"), QStringLiteral("-1")} << QByteArray("--canary");
    QTest::newRow("canary with a unit") << QStringList{QStringLiteral("--canary"), QStringLiteral("5s")} << QByteArray("--canary");
    QTest::newRow("stop rule not a number")
        << QStringList{QStringLiteral("--stop-after-failures"), QStringLiteral("ten")} << QByteArray("--stop-after-failures");
    QTest::newRow("rate as a fraction") << QStringList{QStringLiteral("--rate"), QStringLiteral("2.5")} << QByteArray("--rate");
}

// Each is refused in one line with exit 2, and nothing moves or is audited.
void RedriveTest::almostValidOptionsAreRefused()
{
    QFETCH(QStringList, args);
    QFETCH(QByteArray, error);
    QCOMPARE(bury(QStringLiteral("refused"), 2).size(), 2);
    const auto redrive = m_once->run(QStringList{QStringLiteral("redrive"), QStringLiteral("--all")} + args);
    QVERIFY2(redrive.exitedWith(2), redrive.describe().constData());
    QVERIFY2(redrive.err.contains(error) && redrive.err.trimmed().count('\n') == 0, redrive.describe().constData());
    QCOMPARE(storeCount(QStringLiteral("SELECT COUNT(*) FROM audit_log")), 0);
    QCOMPARE(m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")}).size(), 2);
}

QTEST_GUILESS_MAIN(RedriveTest)
#include "tst_redrive.moc"
