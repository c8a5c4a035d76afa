// An operator pauses a partner (once partners NAME --pause): every worker on the store
// stops sending to it within a second, keeps its reminders without spending their tries,
// and sends the other partners' reminders as usual; a resume delivers each of them once.
// Real `once` processes against two partner simulators; effects counted at each.
#include "deliveryharness.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace oncetest;

class PausePartnerTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void aPausedPartnerGetsNothingWhileTheOtherGoesOn();
    void aWorkerWhosePartnersAreAllPausedLeasesNothing();
    void pauseAndResumeRefuseWhatIsAlmostRight_data();
    void pauseAndResumeRefuseWhatIsAlmostRight();

private:
    QString url(const PartnerSimulator &partner) const
    {
        return QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port());
    }
    QString writePartnersFile() const;
    QJsonObject partnerState(const QString &name);
    qint64 storeCount(const QString &sql);

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_email;
    std::unique_ptr<PartnerSimulator> m_sms;
    std::unique_ptr<OnceRunner> m_once;
};

void PausePartnerTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void PausePartnerTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    PartnerFaults faults;
    faults.idempotent = false; // every request that reaches a partner is an effect
    m_email = std::make_unique<PartnerSimulator>(faults);
    m_sms = std::make_unique<PartnerSimulator>(faults);
    QString error;
    QVERIFY2(m_email->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QVERIFY2(m_sms->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void PausePartnerTest::cleanup()
{
    m_once.reset();
    m_email.reset();
    m_sms.reset();
    m_dir.reset();
}

QString PausePartnerTest::writePartnersFile() const
{
    const QByteArray json = QStringLiteral(R"({"partners": {
        "mail": {"profile": "webhook", "url": "%1", "token": "env:PARTNER_TOKEN"},
        "texts": {"profile": "webhook", "url": "%2", "token": "env:PARTNER_TOKEN"}
    }, "routes": {"email": "mail", "sms": "texts"}})")
                                .arg(url(*m_email), url(*m_sms))
                                .toUtf8();
    const QString path = m_dir->filePath(QStringLiteral("partners.json"));
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(json) != json.size())
        qWarning("cannot write %s", qPrintable(path));
    return path;
}

QJsonObject PausePartnerTest::partnerState(const QString &name)
{
    const QJsonArray workers = m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")});
    for (const QJsonValue &worker : workers) {
        for (const QJsonValue &partner : worker.toObject().value(QLatin1String("partners")).toArray()) {
            if (partner.toObject().value(QLatin1String("name")) == name)
                return partner.toObject();
        }
    }
    return {};
}

qint64 PausePartnerTest::storeCount(const QString &sql)
{
    QString error;
    const QStringList rows = storeRows(m_stores, m_once->storeUrl(), sql, &error);
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    return rows.value(0, QStringLiteral("-1")).toLongLong();
}

// A worker already sending to both partners. The SMS partner is paused: within about a
// second it gets no request, while e-mail goes on. Its reminders come back again and
// again meanwhile without spending a try (with --max-attempts 2, two spent tries would
// dead-letter them), and their history says who paused it and why. Resumed, each SMS
// goes out once.
void PausePartnerTest::aPausedPartnerGetsNothingWhileTheOtherGoesOn()
{
    constexpr int Before = 5;
    constexpr int During = 10;
    const QString partners = writePartnersFile();
    m_once->start({QStringLiteral("worker"), QStringLiteral("--partners"), partners,
                                      QStringLiteral("--worker-id"), QStringLiteral("pauses"),
                                      QStringLiteral("--max-attempts"), QStringLiteral("2"),
                                      QStringLiteral("--backoff-base-ms"), QStringLiteral("50")},
                                     {{QStringLiteral("PARTNER_TOKEN"), QStringLiteral("partner-secret-token")}});
    const auto smsBefore = m_once->enqueueReminders(m_dir->path(), Before, QStringLiteral("early"), {}, QStringLiteral("sms"));
    QCOMPARE(smsBefore.size(), Before);
    QVERIFY2(pumpUntil([&] { return m_sms->stats().effects >= Before; }, WorkerTimeoutMs),
             QByteArray::number(m_sms->stats().effects).constData());

    QElapsedTimer sincePause;
    sincePause.start();
    const auto pause = m_once->run({QStringLiteral("partners"), QStringLiteral("texts"), QStringLiteral("--pause"),
                                    QStringLiteral("--reason"), QStringLiteral("carrier maintenance")});
    QVERIFY2(pause.exitedWith(0), pause.describe().constData());
    QVERIFY2(pause.out.contains("texts paused (by ") && pause.out.contains(": carrier maintenance)"), pause.out.constData());
    // The worker says so as soon as it knows (its heartbeat follows the change at once).
    QVERIFY2(pumpUntil([&] { return partnerState(QStringLiteral("texts")).value(QLatin1String("paused")).toBool(); },
                       WorkerTimeoutMs),
             QJsonDocument(partnerState(QStringLiteral("texts"))).toJson().constData());
    QVERIFY2(sincePause.elapsed() < 2500, QByteArray::number(sincePause.elapsed()).constData());
    QCOMPARE(partnerState(QStringLiteral("mail")).value(QLatin1String("paused")).toBool(), false);
    const qint64 smsAtPause = m_sms->stats().requests;

    const auto sms = m_once->enqueueReminders(m_dir->path(), During, QStringLiteral("text"), {}, QStringLiteral("sms"));
    const auto email = m_once->enqueueReminders(m_dir->path(), During, QStringLiteral("mail"), {}, QStringLiteral("email"));
    QCOMPARE(sms.size(), During);
    QCOMPARE(email.size(), During);
    QVERIFY2(pumpUntil([&] { return m_email->stats().effects >= During; }, WorkerTimeoutMs),
             QByteArray::number(m_email->stats().effects).constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_email, email));
    // Every SMS put back at least twice: as many times as would spend --max-attempts.
    const QString putBackTwice = QStringLiteral(
        "SELECT COUNT(*) FROM (SELECT send_key FROM attempts WHERE error_class = 'partner-paused' AND partner = 'texts' "
        "GROUP BY send_key HAVING COUNT(*) >= 2) twice");
    QVERIFY2(pumpUntil([&] { return storeCount(putBackTwice) >= During; }, WorkerTimeoutMs),
             QByteArray::number(storeCount(putBackTwice)).constData());
    QCOMPARE(m_sms->stats().requests, smsAtPause);
    QCOMPARE(m_once->stats().value(QLatin1String("dead")).toInteger(), 0);

    const auto listed = m_once->run({QStringLiteral("partners")});
    QVERIFY2(listed.exitedWith(0), listed.describe().constData());
    QVERIFY2(listed.out.contains("texts  honours-key=unknown  profile=webhook  state=paused (by ")
                 && listed.out.contains(": carrier maintenance)")
                 && listed.out.contains("mail  honours-key=unknown  profile=webhook  state=sending"),
             listed.out.constData());
    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(sms.first())});
    QVERIFY2(history.exitedWith(0), history.describe().constData());
    QVERIFY2(history.out.contains("claim deferred") && history.out.contains("not sent: texts is paused (by ")
                 && history.out.contains("carrier maintenance"),
             history.out.constData());

    const auto resume = m_once->run({QStringLiteral("partners"), QStringLiteral("texts"), QStringLiteral("--resume")});
    QVERIFY2(resume.exitedWith(0), resume.describe().constData());
    QVERIFY2(resume.out.contains("texts resumed"), resume.out.constData());
    QVERIFY2(pumpUntil([&] { return m_sms->stats().effects >= Before + During; }, WorkerTimeoutMs),
             QByteArray::number(m_sms->stats().effects).constData());
    QVERIFY2(pumpUntil([&] { return m_once->stats().value(QLatin1String("acked")).toInteger() == Before + 2 * During; },
                       WorkerTimeoutMs),
             QJsonDocument(m_once->stats()).toJson().constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_sms, smsBefore + sms));
    QCOMPARE(m_once->stats().value(QLatin1String("dead")).toInteger(), 0);
    QVERIFY2(pumpUntil([&] { return !partnerState(QStringLiteral("texts")).value(QLatin1String("paused")).toBool(); },
                       WorkerTimeoutMs),
             QJsonDocument(partnerState(QStringLiteral("texts"))).toJson().constData());

    // Both in the audit log, in the operator's words.
    QCOMPARE(storeCount(QStringLiteral("SELECT COUNT(*) FROM audit_log WHERE action = 'partner-pause' "
                                       "AND reason = 'carrier maintenance' AND detail LIKE 'texts paused%'")),
             1);
    QCOMPARE(storeCount(QStringLiteral("SELECT COUNT(*) FROM audit_log WHERE action = 'partner-resume'")), 1);
}

// A worker whose only partner is paused leases nothing (as with every breaker open)
// rather than taking its reminders to put them back; resumed, it sends them.
void PausePartnerTest::aWorkerWhosePartnersAreAllPausedLeasesNothing()
{
    constexpr int Count = 5;
    const auto pause = m_once->run({QStringLiteral("partners"), url(*m_sms), QStringLiteral("--pause")});
    QVERIFY2(pause.exitedWith(0), pause.describe().constData());
    const auto keys = m_once->enqueueReminders(m_dir->path(), Count, QStringLiteral("held"));
    QCOMPARE(keys.size(), Count);
    m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), url(*m_sms),
                                      QStringLiteral("--worker-id"), QStringLiteral("idle")});
    QVERIFY2(pumpUntil([&] { return partnerState(url(*m_sms)).value(QLatin1String("paused")).toBool(); }, WorkerTimeoutMs),
             QJsonDocument(m_once->jsonArray({QStringLiteral("workers"), QStringLiteral("--json")})).toJson().constData());
    // Long enough for several turns and pause reads: nothing is taken, nothing is sent.
    QTest::qWait(1500);
    QCOMPARE(m_sms->stats().requests, 0);
    QCOMPARE(storeCount(QStringLiteral("SELECT COUNT(*) FROM attempts")), 0);
    QCOMPARE(m_once->stats().value(QLatin1String("ready")).toInteger(), Count);

    const auto resume = m_once->run({QStringLiteral("partners"), url(*m_sms), QStringLiteral("--resume")});
    QVERIFY2(resume.exitedWith(0), resume.describe().constData());
    QVERIFY2(pumpUntil([&] { return m_sms->stats().effects >= Count; }, WorkerTimeoutMs),
             QByteArray::number(m_sms->stats().effects).constData());
    VERIFY_NO_PROBLEMS(exactlyOnceProblems(*m_sms, keys));
}

void PausePartnerTest::pauseAndResumeRefuseWhatIsAlmostRight_data()
{
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QByteArray>("said");
    QTest::newRow("no partner") << QStringList{QStringLiteral("--pause")}
                                << QByteArray("give a partner with --honours-key, --pause or --resume");
    QTest::newRow("both") << QStringList{QStringLiteral("texts"), QStringLiteral("--pause"), QStringLiteral("--resume")}
                          << QByteArray("choose one of --honours-key, --pause and --resume");
    QTest::newRow("reason alone") << QStringList{QStringLiteral("texts"), QStringLiteral("--honours-key"),
                                                 QStringLiteral("yes"), QStringLiteral("--reason"), QStringLiteral("x")}
                                  << QByteArray("--reason goes with --pause or --resume");
    QTest::newRow("reason with a newline")
        << QStringList{QStringLiteral("texts"), QStringLiteral("--pause"), QStringLiteral("--reason"), QStringLiteral("a\nb")}
        << QByteArray("--reason must be one line of text");
}

void PausePartnerTest::pauseAndResumeRefuseWhatIsAlmostRight()
{
    QFETCH(QStringList, args);
    QFETCH(QByteArray, said);
    const auto result = m_once->run(QStringList{QStringLiteral("partners")} + args);
    QVERIFY2(result.exitedWith(2), result.describe().constData());
    QVERIFY2(result.err.contains(said), result.err.constData());
    QCOMPARE(storeCount(QStringLiteral("SELECT COUNT(*) FROM partners")), 0);
}

QTEST_GUILESS_MAIN(PausePartnerTest)
#include "tst_pausepartner.moc"
