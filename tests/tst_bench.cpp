// once bench with --partner-url: its workers send to a partner it did not start, here a
// real `once partner-sim` process, whose effects the test counts; and the options that do
// not go with an external partner are refused with a one-line usage error.
#include "deliveryharness.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QTest>

using namespace oncetest;

class BenchTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void partnerUrlThatIsNotAnHttpUrlIsRefused_data();
    void partnerUrlThatIsNotAnHttpUrlIsRefused();
    void partnerLatencyIsRefusedWithAnExternalPartner();
    void externalPartnerGetsEveryReminderOnce();

private:
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_once;
};

void BenchTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
}

void BenchTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, QStringLiteral("sqlite:") + m_dir->filePath(QStringLiteral("bench.sqlite")));
}

void BenchTest::cleanup()
{
    m_once.reset();
    m_dir.reset();
}

void BenchTest::partnerUrlThatIsNotAnHttpUrlIsRefused_data()
{
    QTest::addColumn<QString>("url");
    QTest::newRow("words") << QStringLiteral("not a url");
    QTest::newRow("no scheme") << QStringLiteral("127.0.0.1:8080/reminders");
    QTest::newRow("ftp") << QStringLiteral("ftp://127.0.0.1/reminders");
    QTest::newRow("no host") << QStringLiteral("http:///reminders");
    QTest::newRow("bad port") << QStringLiteral("http://127.0.0.1:99999/reminders");
    QTest::newRow("empty") << QString();
}

void BenchTest::partnerUrlThatIsNotAnHttpUrlIsRefused()
{
    QFETCH(QString, url);
    const auto bench = m_once->run({QStringLiteral("bench"), QStringLiteral("--count"), QStringLiteral("1"),
                                    QStringLiteral("--partner-url"), url});
    QVERIFY2(bench.exitedWith(2), bench.describe().constData());
    QCOMPARE(bench.err.trimmed().count('\n'), 0);
    QVERIFY2(bench.err.contains("--partner-url must be an http:// or https:// URL"), bench.err.constData());
    QVERIFY2(bench.out.isEmpty(), bench.out.constData());
}

void BenchTest::partnerLatencyIsRefusedWithAnExternalPartner()
{
    const auto bench = m_once->run({QStringLiteral("bench"), QStringLiteral("--count"), QStringLiteral("1"),
                                    QStringLiteral("--partner-latency-ms"), QStringLiteral("5"),
                                    QStringLiteral("--partner-url"), QStringLiteral("http://127.0.0.1:8080/reminders")});
    QVERIFY2(bench.exitedWith(2), bench.describe().constData());
    QCOMPARE(bench.err.trimmed().count('\n'), 0);
    QVERIFY2(bench.err.contains("--partner-latency-ms") && bench.err.contains("--partner-url"), bench.err.constData());
}

void BenchTest::externalPartnerGetsEveryReminderOnce()
{
    const quint16 port = m_once->startPartnerSim();
    QVERIFY(port);
    // Some reminders are published twice (the default --duplicate-share): still one
    // effect per key at the partner.
    const auto bench = m_once->run({QStringLiteral("bench"), QStringLiteral("--count"), QStringLiteral("200"),
                                    QStringLiteral("--concurrency"), QStringLiteral("20"), QStringLiteral("--partner-url"),
                                    QStringLiteral("http://127.0.0.1:%1/reminders").arg(port)},
                                   {}, 60000);
    QVERIFY2(bench.exitedWith(0), bench.describe().constData());
    QVERIFY2(bench.out.contains("reminders applied      200 of "), bench.out.constData());
    QVERIFY2(bench.out.contains(QStringLiteral("partner http://127.0.0.1:%1/reminders").arg(port).toUtf8()),
             bench.out.constData());

    // What the bench read from the partner's /stats is what the partner counted.
    static const QRegularExpression counted(QStringLiteral(R"(partner POSTs +(\d+), (\d+) distinct Idempotency-Keys)"));
    const auto match = counted.match(QString::fromUtf8(bench.out));
    QVERIFY2(match.hasMatch(), bench.out.constData());
    QCOMPARE(match.captured(2).toInt(), 200);

    QString error;
    const QJsonObject effects = QJsonDocument::fromJson(httpGet(port, "/effects", &error)).object();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(effects.size(), 200);
    for (auto it = effects.constBegin(); it != effects.constEnd(); ++it)
        QVERIFY2(it.value().toInt() == 1, qPrintable(it.key()));
    const QJsonObject stats = QJsonDocument::fromJson(httpGet(port, "/stats", &error)).object();
    QVERIFY2(error.isEmpty(), qPrintable(error));
    QCOMPARE(stats.value(QLatin1String("effects")).toInteger(), 200);
    QCOMPARE(stats.value(QLatin1String("duplicate_effects")).toInteger(), 0);
    QCOMPARE(match.captured(1).toLongLong(), stats.value(QLatin1String("posts")).toInteger());
}

QTEST_GUILESS_MAIN(BenchTest)
#include "tst_bench.moc"
