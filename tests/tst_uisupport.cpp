// The console as support staff use it ("did user X get this twice?"), against stores that
// the real `once` CLI and worker built, with the in-process partner simulator counting
// what the partner really did. What the window says is checked against those counts.
#include "deliveryharness.h"
#include "mainwindow.h"
#include "model/reminder.h"
#include "models/attemptsmodel.h"
#include "models/eventsmodel.h"
#include "pages/eventspage.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "sim/partnersimulator.h"
#include "teststores.h"

#include <QAction>
#include <QComboBox>
#include <QHeaderView>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <ctime>

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
    void searchFindsWhatWaitsInTheQueue();
    void prefixAndBodySearch();
    void historyInCausalOrderWithInvestigatorsColumnsInView();
    void timesShowTheirZone();

private:
    QString partnerUrl() const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner->port()); }
    // The story of one event, as the Events page tells it once it has loaded.
    QString consoleVerdict(const QByteArray &sendKey);
    QJsonObject history(const QByteArray &sendKey);
    // Searches the way support does, in the Events page against the store, and waits for the answer.
    static bool searchFor(EventsPage &page, const QString &text);
    void enqueue(const QString &name, const QList<QJsonObject> &reminders, const QStringList &extraArgs = {});

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
    QStandardPaths::setTestModeEnabled(true);
    QSettings().clear();
    // A zone away from UTC, so that local and UTC times differ on any machine.
    qputenv("TZ", "America/New_York");
    tzset();
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

bool TestUiSupport::searchFor(EventsPage &page, const QString &text)
{
    page.findChild<QLineEdit *>(QStringLiteral("search"))->setText(text);
    page.search();
    const EventsModel *model = page.eventsModel();
    return QTest::qWaitFor([&] { return model->filter().text == text && !model->isLoading() && model->total() >= 0; }, 10000);
}

void TestUiSupport::enqueue(const QString &name, const QList<QJsonObject> &reminders, const QStringList &extraArgs)
{
    const QString path = m_dir->filePath(name + QStringLiteral(".jsonl"));
    QFile file(path);
    QVERIFY(file.open(QIODevice::WriteOnly));
    for (const QJsonObject &reminder : reminders)
        file.write(QJsonDocument(reminder).toJson(QJsonDocument::Compact) + '\n');
    file.close();
    const auto result = m_once->run(QStringList{QStringLiteral("enqueue"), path} + extraArgs);
    QVERIFY2(result.exitedWith(0), result.describe().constData());
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
    PartnerFaults profile;
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

namespace {

QJsonObject reminder(const QString &user, const QString &reminderId, const QString &body, const QString &eventId = {})
{
    QJsonObject object{{QStringLiteral("user_id"), user},
                       {QStringLiteral("reminder_id"), reminderId},
                       {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00Z")},
                       {QStringLiteral("destination"), QStringLiteral("+15550100")},
                       {QStringLiteral("body"), body}};
    if (!eventId.isEmpty())
        object.insert(QStringLiteral("event_id"), eventId);
    return object;
}

} // namespace

void TestUiSupport::searchFindsWhatWaitsInTheQueue()
{
    // No worker runs yet: one reminder is ready, one is delayed by an hour.
    enqueue(QStringLiteral("now"), {reminder(QStringLiteral("carol"), QStringLiteral("dentist"), QStringLiteral("Dentist at 10"),
                                             QStringLiteral("evt-carol-1"))});
    enqueue(QStringLiteral("later"), {reminder(QStringLiteral("carol"), QStringLiteral("pharmacy"), QStringLiteral("Pick up"))},
            {QStringLiteral("--delay"), QStringLiteral("3600")});
    StoreSession session(m_once->storeUrl());
    EventsPage page;
    page.resize(1280, 800);
    page.setSession(&session);
    page.show();
    QVERIFY(searchFor(page, QStringLiteral("carol")));
    QCOMPARE(page.countText(), QStringLiteral("2 events"));
    EventsModel *model = page.eventsModel();
    QCOMPARE(model->rowCount(), 2);
    for (int row = 0; row < 2; ++row)
        QCOMPARE(model->event(row).state, QString(EventState::Queued));
    // Newest first: the delayed one.
    QCOMPARE(model->event(0).reminderId, QStringLiteral("pharmacy"));
    page.showStory(model->event(0).sendKey);
    QTRY_VERIFY_WITH_TIMEOUT(page.verdictText().startsWith(QLatin1String("Queued, not picked up by a worker yet: enqueued ")),
                             10000);
    QVERIFY2(page.verdictText().contains(QLatin1String("; delayed, due at ")) && page.verdictText().contains(QLatin1String("(in 59 min")),
             qPrintable(page.verdictText()));
    // Found by its event id too, here and in `once history`.
    QVERIFY(searchFor(page, QStringLiteral("evt-carol-1")));
    QCOMPARE(model->rowCount(), 1);
    QCOMPARE(model->event(0).reminderId, QStringLiteral("dentist"));
    const QJsonObject queued = history(model->event(0).sendKey);
    QCOMPARE(queued.value(QStringLiteral("state")).toString(), QStringLiteral("queued"));
    QVERIFY2(queued.value(QStringLiteral("verdict")).toString().startsWith(QLatin1String("Queued, not picked up")),
             qPrintable(queued.value(QStringLiteral("verdict")).toString()));
    // The Queued state lists them without a search.
    page.findChild<QLineEdit *>(QStringLiteral("search"))->clear();
    auto *states = page.findChild<QComboBox *>(QStringLiteral("stateFilter"));
    states->setCurrentIndex(states->findData(QStringLiteral("queued")));
    QTRY_COMPARE_WITH_TIMEOUT(page.countText(), QStringLiteral("2 events"), 10000);

    // Once a worker delivers the ready one, it is an event of the ledger, listed once.
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(), QStringLiteral("--until-idle")},
                                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    states->setCurrentIndex(0);
    QVERIFY(searchFor(page, QStringLiteral("carol*")));
    QTRY_COMPARE_WITH_TIMEOUT(page.countText(), QStringLiteral("2 events"), 10000);
    QStringList states2;
    for (int row = 0; row < model->rowCount(); ++row)
        states2 << model->event(row).reminderId + QLatin1Char('=') + model->event(row).state;
    states2.sort();
    QCOMPARE(states2, (QStringList{QStringLiteral("dentist=applied"), QStringLiteral("pharmacy=queued")}));
    QCOMPARE(m_partner->stats().effects, 1);
}

void TestUiSupport::prefixAndBodySearch()
{
    enqueue(
        QStringLiteral("orders"),
        {reminder(QStringLiteral("dave-1"), QStringLiteral("r1"),
                  QStringLiteral("Order ORD-4711 ships tomorrow")),
         reminder(QStringLiteral("dave-2"), QStringLiteral("r2"),
                  QStringLiteral("Order ORD-4712 ships tomorrow")),
         reminder(QStringLiteral("dave_3"), QStringLiteral("r3"), QStringLiteral("100% off, order ORD-99")),
         reminder(QStringLiteral("erin"), QStringLiteral("r4"), QStringLiteral("Nothing to see")),
         reminder(QStringLiteral("eve*1"), QStringLiteral("r5"), QStringLiteral("Star")),
         reminder(QStringLiteral("eve?2"), QStringLiteral("r6"), QStringLiteral("Question")),
         reminder(QStringLiteral("eve[3]"), QStringLiteral("r7"), QStringLiteral("Bracket"))});
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(), QStringLiteral("--until-idle")},
                                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    // One more, still queued, so that each search also covers the queue.
    enqueue(QStringLiteral("queued"), {reminder(QStringLiteral("dave-9"), QStringLiteral("r9"), QStringLiteral("Order ORD-4719"))});

    StoreSession session(m_once->storeUrl());
    EventsPage page;
    page.resize(1280, 800);
    page.setSession(&session);
    page.show();
    const QList<std::pair<QString, QString>> searches{
        {QStringLiteral("dave*"), QStringLiteral("4 events")},
        {QStringLiteral("dave-*"), QStringLiteral("3 events")}, // '-' is no wildcard
        {QStringLiteral("dave_*"), QStringLiteral("1 event")},  // nor is '_'
        {QStringLiteral("dave"), QStringLiteral("0 events")},   // without '*': exact
        {QStringLiteral("body:ORD-471"), QStringLiteral("3 events")},
        {QStringLiteral("body:100% off"), QStringLiteral("1 event")},
        {QStringLiteral("body:ORD-4711"), QStringLiteral("1 event")},
        {QStringLiteral("+1555*"), QStringLiteral("8 events")}, // destinations
        {QStringLiteral("eve*"), QStringLiteral("3 events")},
        {QStringLiteral("eve?*"), QStringLiteral("1 event")},  // '?' is no wildcard
        {QStringLiteral("eve[*"), QStringLiteral("1 event")},  // nor is '['
        {QStringLiteral("eve**"), QStringLiteral("1 event")},  // the prefix "eve*"
        {QStringLiteral("DAVE*"), QStringLiteral("0 events")}, // with its case, as an exact search
    };
    for (const auto &[text, expected] : searches) {
        QVERIFY(searchFor(page, text));
        QTRY_COMPARE_WITH_TIMEOUT(page.countText(), expected, 10000);
        if (expected == QLatin1String("0 events"))
            continue;
        QTRY_COMPARE_WITH_TIMEOUT(qint64(page.eventsModel()->rowCount()), page.eventsModel()->total(), 10000);
    }
    // The story shows the message's body.
    QVERIFY(searchFor(page, QStringLiteral("body:ORD-4711")));
    QTRY_COMPARE_WITH_TIMEOUT(page.eventsModel()->rowCount(), 1, 10000);
    page.showStory(page.eventsModel()->event(0).sendKey);
    auto *body = page.findChild<QLabel *>(QStringLiteral("factBody"));
    QVERIFY(body);
    QTRY_COMPARE_WITH_TIMEOUT(body->text(), QStringLiteral("Order ORD-4711 ships tomorrow"), 10000);
}

void TestUiSupport::historyInCausalOrderWithInvestigatorsColumnsInView()
{
    // The same reminder twice while the partner is slow: the second delivery is handled
    // while the first one's send is still out, so its rows are written before the send's.
    m_partner->setProfile(PartnerFaults{.latencyMs = 1500});
    const QJsonObject twice = reminder(QStringLiteral("frank"), QStringLiteral("r1"), QStringLiteral("Hello"));
    enqueue(QStringLiteral("twice"), {twice, twice});
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(), QStringLiteral("--until-idle")},
                                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());
    QCOMPARE(m_partner->stats().effects, 1);

    StoreSession session(m_once->storeUrl());
    EventsPage page;
    page.resize(1280, 800);
    page.setSession(&session);
    page.show();
    QVERIFY(QTest::qWaitForWindowExposed(&page));
    QVERIFY(searchFor(page, QStringLiteral("frank")));
    QTRY_COMPARE_WITH_TIMEOUT(page.eventsModel()->rowCount(), 1, 10000);
    page.showStory(page.eventsModel()->event(0).sendKey);
    QTRY_VERIFY_WITH_TIMEOUT(page.storyLoaded(), 10000);
    const QList<Attempt> history = page.attemptsModel()->attempts();
    QStringList rows;
    for (const Attempt &a : history)
        rows << QStringLiteral("%1 %2 %3 delivery %4").arg(formatTime(a.atMs), a.step, a.outcome).arg(a.delivery);
    qsizetype sendRow = -1;
    for (qsizetype i = 0; i < history.size(); ++i) {
        if (i > 0)
            QVERIFY2(history.at(i - 1).atMs <= history.at(i).atMs, qPrintable(rows.join(u'\n')));
        if (history.at(i).step == QLatin1String("send"))
            sendRow = i;
    }
    // The second delivery came back while the send was out: listed after it.
    QVERIFY2(sendRow >= 0 && sendRow < history.size() - 1, qPrintable(rows.join(u'\n')));

    // Sends and duplicates are in view at 1280 px, without scrolling.
    QTableView *table = page.eventsView();
    for (const int column : {int(EventsModel::State), int(EventsModel::User), int(EventsModel::Reminder),
                             int(EventsModel::Sends), int(EventsModel::Duplicates)}) {
        const int visual = table->horizontalHeader()->visualIndex(column);
        const int right = table->horizontalHeader()->sectionViewportPosition(column)
                        + table->horizontalHeader()->sectionSize(column);
        QVERIFY2(visual >= 0 && right <= table->viewport()->width(),
                 qPrintable(QStringLiteral("column %1 ends at %2 px of %3").arg(column).arg(right).arg(table->viewport()->width())));
    }
}

void TestUiSupport::timesShowTheirZone()
{
    enqueue(QStringLiteral("zoned"), {reminder(QStringLiteral("gina"), QStringLiteral("r1"), QStringLiteral("Hi"))});
    MainWindow window;
    window.openStore(m_once->storeUrl(), {}, StoreReader::IfMissing::Refuse);
    window.resize(1280, 820);
    window.show();
    auto *events = window.findChild<EventsPage *>();
    QVERIFY(events);
    events->showStory(makeSendKey(QStringLiteral("gina"), QStringLiteral("r1"), QStringLiteral("2026-12-01T09:00:00Z")));
    auto *scheduled = events->findChild<QLabel *>(QStringLiteral("factScheduled"));
    QVERIFY(scheduled);
    // 09:00 UTC is 04:00 in New York: said with its zone, beside a key ending 09:00:00Z.
    QTRY_COMPARE_WITH_TIMEOUT(scheduled->text(), QStringLiteral("2026-12-01 04:00:00 EST"), 10000);
    const auto header = [&] {
        return events->eventsModel()->headerData(EventsModel::ScheduledAt, Qt::Horizontal).toString();
    };
    QCOMPARE(header(), QStringLiteral("Scheduled at (local, UTC-05:00)"));
    QVERIFY(events->eventsModel()->data(events->eventsModel()->index(0, EventsModel::ScheduledAt)).toString().endsWith(
        QLatin1String("04:00:00")));

    auto *utc = window.findChild<QAction *>(QStringLiteral("timesInUtc"));
    QVERIFY(utc && utc->isCheckable() && !utc->isChecked());
    utc->trigger();
    QCOMPARE(scheduled->text(), QStringLiteral("2026-12-01 09:00:00 UTC"));
    QCOMPARE(header(), QStringLiteral("Scheduled at (UTC)"));
    QVERIFY(events->eventsModel()->data(events->eventsModel()->index(0, EventsModel::ScheduledAt)).toString().endsWith(
        QLatin1String("09:00:00")));
    QVERIFY(events->attemptsModel()->headerData(AttemptsModel::Time, Qt::Horizontal).toString().endsWith(QLatin1String("(UTC)")));
    {
        // Remembered: the next window starts in UTC.
        MainWindow next;
        QVERIFY(next.findChild<QAction *>(QStringLiteral("timesInUtc"))->isChecked());
        next.findChild<QAction *>(QStringLiteral("timesInUtc"))->trigger();
    }
    QVERIFY(!Settings().timesInUtc());
}

QTEST_MAIN(TestUiSupport)
#include "tst_uisupport.moc"
