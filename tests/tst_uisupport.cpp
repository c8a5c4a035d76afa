// The console as support staff use it ("did user X get this twice?"), against stores that
// the real `once` CLI and worker built, with the in-process partner simulator counting
// what the partner really did. What the window says is checked against those counts.
#include "deliveryharness.h"
#include "eventspage.h"
#include "partnersimulator.h"
#include "storesession.h"
#include "teststores.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

using namespace once;
using namespace once::ui;
using namespace oncetest;

class TestUiSupport final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void verdictCountsThePartnersCalls();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    // The story of one event, as the Events page tells it once it has loaded.
    QString consoleVerdict(const QByteArray &sendKey);
    QJsonObject history(const QByteArray &sendKey);

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<PartnerSimulator> m_partner;
    std::unique_ptr<OnceRunner> m_once;
};

void TestUiSupport::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    QLoggingCategory::setFilterRules(QStringLiteral("once.core.partnersim.debug=false"));
}

void TestUiSupport::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    m_partner = std::make_unique<PartnerSimulator>();
    QString error;
    QVERIFY2(m_partner->listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QVERIFY(m_once->run({QStringLiteral("init")}).exitedWith(0));
}

void TestUiSupport::cleanup()
{
    m_once.reset();
    m_partner.reset();
    m_dir.reset();
}

QString TestUiSupport::consoleVerdict(const QByteArray &sendKey)
{
    StoreSession session(m_once->storeUrl());
    EventsPage page;
    page.resize(1280, 800);
    page.setSession(&session);
    page.show();
    page.showStory(sendKey);
    if (!QTest::qWaitFor([&] { return !page.verdictText().isEmpty() && page.verdictText() != QStringLiteral("Reading the history…"); },
                         10000))
        return QStringLiteral("(the story did not load: %1)").arg(page.verdictText());
    return page.verdictText();
}

QJsonObject TestUiSupport::history(const QByteArray &sendKey)
{
    const auto result = m_once->run({QStringLiteral("history"), QString::fromLatin1(sendKey), QStringLiteral("--json")});
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return QJsonDocument::fromJson(result.out).object();
}

void TestUiSupport::verdictCountsThePartnersCalls()
{
    // A partner that ignores Idempotency-Key, and whose first answer is lost after it
    // acted: the worker resends with the same key, and the partner acts again.
    PartnerProfile profile;
    profile.idempotent = false;
    profile.hostile = HostileMode::HugeContentLength;
    profile.hostileCount = 1;
    m_partner->setProfile(profile);
    const QList<QByteArray> keys = m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("twice"));
    QCOMPARE(keys.size(), 1);
    const QByteArray key = keys.constFirst();
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(),
                                     QStringLiteral("--timeout"), QStringLiteral("2"), QStringLiteral("--until-idle")},
                                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_partner->stats().effects, 2); // what the customer got: two texts

    // Nobody has said whether this partner honours the key: the verdict says what that means.
    const QString unknown = consoleVerdict(key);
    QVERIFY2(unknown.contains(QLatin1String("the partner received 2 calls with the same key"))
                 && unknown.contains(QLatin1String("one effect only if it honours Idempotency-Key")),
             qPrintable(unknown));
    QVERIFY2(!unknown.startsWith(QLatin1String("Delivered once")), qPrintable(unknown));
    QCOMPARE(history(key).value(QStringLiteral("verdict")).toString(), unknown);

    // The operator records what the partner does; every reader words the verdict from it.
    const auto partners = m_once->run({QStringLiteral("partners")});
    QVERIFY2(partners.exitedWith(0) && partners.out.contains(QByteArray(partnerUrl().toUtf8() + "  honours-key=unknown")),
             partners.describe().constData());
    {
        // Recorded from the console, through its store session.
        StoreSession session(m_once->storeUrl());
        EventsPage page;
        page.resize(1280, 800);
        page.setSession(&session);
        page.show();
        page.showStory(key);
        QTRY_VERIFY_WITH_TIMEOUT(page.verdictText() == unknown, 10000);
        auto *partnerFact = page.findChild<QLabel *>(QStringLiteral("factPartner"));
        QVERIFY(partnerFact);
        QCOMPARE(partnerFact->text(), partnerUrl() + QStringLiteral(" (not recorded whether it honours Idempotency-Key)"));
        QVERIFY(page.findChild<QPushButton *>(QStringLiteral("partnerPolicy"))->isEnabled());
        QSignalSpy finished(&session, &StoreSession::operationFinished);
        page.recordPartnerPolicy(KeyHonouring::Ignored);
        QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 10000);
        QVERIFY2(finished.constFirst().at(1).toBool(), qPrintable(finished.constFirst().at(2).toString()));
        page.refresh();
        QTRY_VERIFY_WITH_TIMEOUT(page.verdictText().startsWith(QLatin1String("May have been delivered 2 times")), 10000);
        QCOMPARE(partnerFact->text(), partnerUrl() + QStringLiteral(" (does not honour Idempotency-Key)"));
    }
    const QString ignored = consoleVerdict(key);
    QVERIFY2(ignored.startsWith(QLatin1String("May have been delivered 2 times: the partner received 2 calls with the same key"))
                 && ignored.contains(partnerUrl() + QStringLiteral(" does not honour Idempotency-Key")),
             qPrintable(ignored));
    const QJsonObject json = history(key);
    QCOMPARE(json.value(QStringLiteral("verdict")).toString(), ignored);
    QCOMPARE(json.value(QStringLiteral("partner")).toString(), partnerUrl());
    QCOMPARE(json.value(QStringLiteral("partner_honours_idempotency_key")).toString(), QStringLiteral("no"));

    QVERIFY(m_once->run({QStringLiteral("partners"), partnerUrl(), QStringLiteral("--honours-key"), QStringLiteral("yes")})
                .exitedWith(0));
    const QString honoured = consoleVerdict(key);
    QVERIFY2(honoured.startsWith(QLatin1String("Delivered once: the partner received 2 calls with the same key")),
             qPrintable(honoured));
    QCOMPARE(history(key).value(QStringLiteral("verdict")).toString(), honoured);

    // Bad input changes nothing and says why in one line.
    const auto bad = m_once->run({QStringLiteral("partners"), partnerUrl(), QStringLiteral("--honours-key"), QStringLiteral("maybe")});
    QVERIFY2(bad.exitedWith(2) && bad.err.contains("--honours-key must be yes, no or unknown"), bad.describe().constData());
    QCOMPARE(history(key).value(QStringLiteral("partner_honours_idempotency_key")).toString(), QStringLiteral("yes"));
    const auto audit = storeRows(m_stores, m_once->storeUrl(), QStringLiteral("SELECT action, detail FROM audit_log ORDER BY id"));
    QCOMPARE(audit.size(), 2);
    QVERIFY2(audit.constFirst().contains(partnerUrl() + QStringLiteral(" honours Idempotency-Key: no")), qPrintable(audit.join(u'\n')));
    QVERIFY2(audit.constLast().contains(partnerUrl() + QStringLiteral(" honours Idempotency-Key: yes")), qPrintable(audit.join(u'\n')));
}

QTEST_MAIN(TestUiSupport)
#include "tst_uisupport.moc"
