// Sending at the partner's pace (issue 43), with real processes: a real `once worker`
// against a real `once partner-sim --rate-limit 20`, which admits 20 requests a second and
// answers the others 429 without acting. Everything is counted at the simulator (its
// /stats and /effects), never taken from the worker's word.
//
// After an outage a backlog waits. Without pacing the worker released it at once, into
// the partner's rate limit: most of its requests were 429s and reminders ran out of
// tries. With pacing the breaker's close starts a slow start, and the worker's pace then
// follows the partner's 429s (AIMD), so they stay a small share of its requests.
#include "deliveryharness.h"
#include "teststores.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

class PacingTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void aBacklogAfterAnOutageGoesOutAtThePartnersPace();
    void aPartnerThatThrottlesEverythingIsLeftAlone();
    void aWaitForThePaceNeverOutlastsItsClaim();
    void aRateIsTheOnePartnersCeiling();
    void aBadRateIsRefusedInOneLine_data();
    void aBadRateIsRefusedInOneLine();

private:
    QJsonObject simStats(quint16 port);
    // The one partner of the one worker, as `once workers --json` shows its heartbeat.
    QJsonObject heartbeatPartner();

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_once;
};

void PacingTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
}

void PacingTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void PacingTest::cleanup()
{
    m_once.reset();
    if (QTest::currentTestFailed())
        m_dir->setAutoRemove(false);
    m_dir.reset();
}

QJsonObject PacingTest::simStats(quint16 port)
{
    QString error;
    const QByteArray body = httpGet(port, "/stats", &error);
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    return QJsonDocument::fromJson(body).object();
}

QJsonObject PacingTest::heartbeatPartner()
{
    const QJsonArray workers = m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")});
    if (workers.size() != 1)
        return {};
    return workers.first().toObject().value(QLatin1String("partners")).toArray().first().toObject();
}

// 600 reminders wait while the partner is down (an outage of two seconds from its second
// request); the worker has no rate of its own. What must come of it:
// - every reminder applied exactly once, none dead-lettered;
// - 429s a small share of the partner's requests (without pacing: most of them);
// - slow start: in the second the breaker closed and the next one, few requests (without
//   it: the whole backlog's first wave, hundreds);
// - the worker's heartbeat shows its pace and when it was last throttled.
void PacingTest::aBacklogAfterAnOutageGoesOutAtThePartnersPace()
{
    constexpr int Count = 600;
    const QList<QByteArray> keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("backlog"));
    QCOMPARE(keys.size(), Count);
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--rate-limit"), QStringLiteral("20"),
                                                  QStringLiteral("--outage-after"), QStringLiteral("1"),
                                                  QStringLiteral("--outage-seconds"), QStringLiteral("2")});
    QVERIFY(port);
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"),
                                      QStringLiteral("http://127.0.0.1:%1/reminders").arg(port),
                                      QStringLiteral("--worker-id"), QStringLiteral("pacer"),
                                      QStringLiteral("--until-idle")});

    // While it runs, what its heartbeat says, every two seconds.
    QJsonObject throttledHeartbeat;
    QElapsedTimer sinceLook;
    sinceLook.start();
    const auto result = m_once->waitFor(worker, 120000, [&] {
        if (!throttledHeartbeat.isEmpty() || sinceLook.elapsed() < 2000)
            return;
        const QJsonObject partner = heartbeatPartner();
        if (partner.value(QLatin1String("throttled_at")).isString())
            throttledHeartbeat = partner;
        sinceLook.restart();
    });
    // What the partner saw, said first: the figures matter most when something below fails.
    const QJsonObject stats = simStats(port);
    const qint64 requests = stats.value(QLatin1String("requests")).toInteger();
    const qint64 limited = stats.value(QLatin1String("rate_limited")).toInteger();
    const QByteArray perSecond =
        QJsonDocument(stats.value(QLatin1String("seconds")).toArray()).toJson(QJsonDocument::Compact);
    const double share = requests ? double(limited) / double(requests) : 1;
    qInfo("%lld requests, %lld of them 429 (%.1f%%); per second [second, requests, 429s, effects]: %s",
          requests, limited, share * 100, perSecond.constData());
    QVERIFY2(result.exitedWith(0), result.describe().constData());

    // Exactly once, counted at the partner.
    QString error;
    const QJsonObject effects = QJsonDocument::fromJson(httpGet(port, "/effects", &error)).object();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QStringList problems;
    for (const QByteArray &key : keys) {
        if (const int n = effects.value(QString::fromLatin1(key)).toInt(); n != 1)
            problems << QStringLiteral("%1 had %2 effects").arg(QString::fromLatin1(key)).arg(n);
    }
    QVERIFY2(problems.isEmpty(),
             qPrintable(problems.mid(0, 10).join(QLatin1String("; ")) +
                        QStringLiteral(" (%1 of %2 keys wrong)").arg(problems.size()).arg(Count)));
    QCOMPARE(stats.value(QLatin1String("effects")).toInteger(), qint64(Count));
    QCOMPARE(stats.value(QLatin1String("duplicate_effects")).toInteger(), qint64(0));
    VERIFY_NO_PROBLEMS(
        statsProblems(m_once->stats(), {{QStringLiteral("acked"), Count}, {QStringLiteral("dead"), 0}}));

    // 429s, a small share of the partner's requests.
    QVERIFY2(share < 0.20,
             qPrintable(QStringLiteral("%1 of %2 requests were 429s").arg(limited).arg(requests)));

    // Slow start: the outage's end is the first second with effects after one without.
    const QJsonArray seconds = stats.value(QLatin1String("seconds")).toArray();
    QHash<qint64, qint64> requestsIn;
    for (const QJsonValue &row : seconds)
        requestsIn.insert(row[0].toInteger(), row[1].toInteger());
    qint64 back = -1;
    bool outage = false;
    for (const QJsonValue &row : seconds) {
        const bool applied = row[3].toInteger() > 0;
        outage = outage || (!applied && row[0].toInteger() > 0);
        if (outage && applied) {
            back = row[0].toInteger();
            break;
        }
    }
    QVERIFY2(back > 0, perSecond.constData());
    const qint64 firstTwoSeconds = requestsIn.value(back) + requestsIn.value(back + 1);
    QVERIFY2(
        firstTwoSeconds <= 30,
        qPrintable(QStringLiteral("%1 requests in the two seconds from the breaker's close (second %2): %3")
                       .arg(firstTwoSeconds)
                       .arg(back)
                       .arg(QString::fromUtf8(perSecond))));

    // The heartbeat told of the pace while throttled.
    QVERIFY2(!throttledHeartbeat.isEmpty(), "no heartbeat showed throttled_at while the worker ran");
    QVERIFY2(throttledHeartbeat.value(QLatin1String("pace_per_second")).toDouble() >= 1,
             QJsonDocument(throttledHeartbeat).toJson(QJsonDocument::Compact).constData());
    QVERIFY(throttledHeartbeat.value(QLatin1String("slow_start")).isBool());
    QVERIFY(QDateTime::fromString(throttledHeartbeat.value(QLatin1String("throttled_at")).toString(),
                                  Qt::ISODateWithMs)
                .isValid());
}

// A partner that answers every request 429 (its quota used up): a long run of 429s with
// nothing accepted opens the breaker, so the backlog waits without spending its tries
// and the partner sees one probe at a time, not a request a second for as long as it lasts.
void PacingTest::aPartnerThatThrottlesEverythingIsLeftAlone()
{
    constexpr int Count = 60;
    const QList<QByteArray> keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("quota"));
    QCOMPARE(keys.size(), Count);
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--throttle-rate"), QStringLiteral("1"),
                                                  QStringLiteral("--retry-after"), QStringLiteral("1")});
    QVERIFY(port);
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"),
                                      QStringLiteral("http://127.0.0.1:%1/reminders").arg(port),
                                      QStringLiteral("--worker-id"), QStringLiteral("quota")});
    QJsonObject partner;
    QElapsedTimer sinceLook;
    const bool opened = pumpUntil(
        [&] {
            if (sinceLook.isValid() && sinceLook.elapsed() < 500)
                return false; // the heartbeat comes every 2 s: no need to ask more often
            sinceLook.start();
            partner = heartbeatPartner();
            return partner.value(QLatin1String("breaker")).toString() == QLatin1String("open") ||
                   worker->state() == QProcess::NotRunning;
        },
        30000);
    QVERIFY2(opened && worker->state() == QProcess::Running,
             QJsonDocument(partner).toJson(QJsonDocument::Compact).constData());
    QVERIFY(partner.value(QLatin1String("throttled_at")).isString());
    const qint64 requestsWhenOpened = simStats(port).value(QLatin1String("requests")).toInteger();
    // Open, it sends only its probes (1 s, then 2 s, 4 s... apart): within four seconds, a
    // few, where the pace's floor alone would send one a second.
    QTest::qWait(4000);
    const qint64 requests = simStats(port).value(QLatin1String("requests")).toInteger();
    QVERIFY2(requests - requestsWhenOpened <= 3,
             qPrintable(QStringLiteral("%1 requests in 4 s after the breaker opened")
                            .arg(requests - requestsWhenOpened)));
    VERIFY_NO_PROBLEMS(
        statsProblems(m_once->stats(), {{QStringLiteral("dead"), 0}, {QStringLiteral("acked"), 0}}));
}

// Deliveries that wait for a slow partner's pace hold claims, and claims run out. One that
// waited past its claim came back from the queue while its worker still held it, and its
// next delivery found a claim ended without an outcome: in doubt, and held unsent where
// the partner does not deduplicate (tst_delivery's dropAfterAcceptHoldNoIdempotency saw
// 3 of 30 keys held for an operator that had never been sent). A wait that could not
// outlast its claim must go back first, deferred and unsent.
void PacingTest::aWaitForThePaceNeverOutlastsItsClaim()
{
    constexpr int Count = 40;
    const QList<QByteArray> keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("claims"));
    QCOMPARE(keys.size(), Count);
    const quint16 port = m_once->startPartnerSim(
        {QStringLiteral("--rate-limit"), QStringLiteral("4"), QStringLiteral("--no-idempotency")});
    QVERIFY(port);
    // A lease of 2 s with a request timeout of 1 s: a claim outlasts a send only in its
    // first second, while at 4 a second sixteen claimed deliveries need four to go out.
    const auto result = m_once->run(
        {QStringLiteral("worker"), QStringLiteral("--partner"), QStringLiteral("http://127.0.0.1:%1/reminders").arg(port),
         QStringLiteral("--concurrency"), QStringLiteral("16"), QStringLiteral("--lease"), QStringLiteral("2"),
         QStringLiteral("--timeout"), QStringLiteral("1"), QStringLiteral("--in-doubt"), QStringLiteral("hold"),
         QStringLiteral("--until-idle")},
        {}, 120000);
    QVERIFY2(result.exitedWith(0), result.describe().constData());

    QString error;
    const QJsonObject effects = QJsonDocument::fromJson(httpGet(port, "/effects", &error)).object();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QStringList problems;
    for (const QByteArray &key : keys) {
        if (const int n = effects.value(QString::fromLatin1(key)).toInt(); n != 1)
            problems << QStringLiteral("%1 had %2 effects").arg(QString::fromLatin1(key)).arg(n);
    }
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1String("; "))));
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("acked"), Count},
                                                       {QStringLiteral("in_doubt"), 0},
                                                       {QStringLiteral("dead"), 0}}));
    // No claim was left to lapse: the waits that could not outlast theirs went back first
    // ("deferred", partner-pace), not told as a worker stopped or stalled ("lapsed").
    QStringList lapsed;
    int deferred = 0;
    for (const QByteArray &key : keys) {
        const auto story = m_once->run({QStringLiteral("history"), QString::fromLatin1(key), QStringLiteral("--json")});
        QVERIFY2(story.exitedWith(0), story.describe().constData());
        const QJsonArray attempts = QJsonDocument::fromJson(story.out).object().value(QLatin1String("attempts")).toArray();
        for (const QJsonValue &row : attempts) {
            const QString outcome = row[QLatin1String("outcome")].toString();
            if (row[QLatin1String("step")].toString() != QLatin1String("claim"))
                continue;
            if (outcome == QLatin1String("lapsed"))
                lapsed << QString::fromLatin1(key) + QStringLiteral(": ") + row[QLatin1String("error")].toString();
            deferred += outcome == QLatin1String("deferred");
        }
    }
    QVERIFY2(lapsed.isEmpty(), qPrintable(QStringLiteral("%1 claims lapsed while waiting, e.g. %2")
                                              .arg(lapsed.size())
                                              .arg(lapsed.value(0))));
    QVERIFY2(deferred > 0, "nothing waited for the pace: the test did not test it");
}

// --rate gives the one --partner its ceiling, which the heartbeat shows.
void PacingTest::aRateIsTheOnePartnersCeiling()
{
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);
    const auto result =
        m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"),
                     QStringLiteral("http://127.0.0.1:%1/reminders").arg(port), QStringLiteral("--rate"),
                     QStringLiteral("300/min"), QStringLiteral("--until-idle")});
    QVERIFY2(result.exitedWith(0), result.describe().constData());
    const QJsonObject partner = heartbeatPartner();
    QVERIFY2(partner.value(QLatin1String("rate_per_second")).toDouble() == 5,
             QJsonDocument(partner).toJson(QJsonDocument::Compact).constData());
    QCOMPARE(partner.value(QLatin1String("pace_per_second")).toDouble(), 5.0);
    QVERIFY(partner.value(QLatin1String("throttled_at")).isNull());
    QCOMPARE(partner.value(QLatin1String("slow_start")).toBool(true), false);
}

void PacingTest::aBadRateIsRefusedInOneLine_data()
{
    QTest::addColumn<QStringList>("extra");
    QTest::addColumn<QString>("said");

    const QString bad = QStringLiteral("--rate must read like 20/s, 300/min or 1000/h");
    QTest::newRow("no unit") << QStringList{QStringLiteral("--rate"), QStringLiteral("20")} << bad;
    QTest::newRow("words") << QStringList{QStringLiteral("--rate"), QStringLiteral("fast")} << bad;
    QTest::newRow("zero") << QStringList{QStringLiteral("--rate"), QStringLiteral("0/s")} << bad;
    QTest::newRow("negative") << QStringList{QStringLiteral("--rate"), QStringLiteral("-5/s")} << bad;
    QTest::newRow("per day") << QStringList{QStringLiteral("--rate"), QStringLiteral("5/day")} << bad;
    QTest::newRow("with a partners file")
        << QStringList{QStringLiteral("--partners"), QStringLiteral("partners.json"),
                       QStringLiteral("--rate"), QStringLiteral("20/s")}
        << QStringLiteral("--rate goes with --partner URL");
}

void PacingTest::aBadRateIsRefusedInOneLine()
{
    QFETCH(QStringList, extra);
    QFETCH(QString, said);
    QFile file(m_dir->filePath(QStringLiteral("partners.json")));
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write(R"({"partners": {"a": {"url": "http://127.0.0.1:9/reminders"}}, "routes": {"*": "a"}})");
    file.close();
    for (QString &arg : extra) {
        if (arg == QLatin1String("partners.json"))
            arg = file.fileName();
    }
    QStringList args{QStringLiteral("worker"), QStringLiteral("--until-idle")};
    if (!extra.contains(QLatin1String("--partners")))
        args << QStringLiteral("--partner") << QStringLiteral("http://127.0.0.1:9/reminders");
    const auto result = m_once->run(args + extra);
    QVERIFY2(result.finished && result.exitCode != 0, result.describe().constData());
    const QByteArray err = result.err.trimmed();
    QVERIFY2(!err.contains('\n'), result.describe().constData());
    QVERIFY2(QString::fromUtf8(err).contains(said), result.describe().constData());
}

QTEST_GUILESS_MAIN(PacingTest)
#include "tst_pacing.moc"
