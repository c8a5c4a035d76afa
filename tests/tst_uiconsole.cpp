// The whole console as an operator uses it: the real MainWindow, offscreen, over a real
// store, its engine delivering to a real in-process partner simulator. A partner outage
// dead-letters reminders; the operator redrives them from the Dead letters page and each
// key takes effect exactly once. A partner without idempotency drops its answers; the
// events wait in doubt; the operator marks one delivered (no second effect) and resends
// another (exactly one more). Support searches a user on the Events page. A partner
// outage met by a headless `once worker` process raises the banner, the status bar and a
// desktop notification, and tells workers holding back from no worker at all.
#include "dialogs/decisiondialog.h"
#include "dialogs/redrivedialog.h"
#include "dialogs/settingsdialog.h"
#include "alerting/alertsettings.h"
#include "mainwindow.h"
#include "models/deadlettersmodel.h"
#include "models/eventsmodel.h"
#include "models/indoubtmodel.h"
#include "models/workersmodel.h"
#include "pages/deadletterspage.h"
#include "pages/eventspage.h"
#include "pages/indoubtpage.h"
#include "pages/overviewpage.h"
#include "pages/workerpage.h"
#include "session/enginecontroller.h"
#include "session/healthmonitor.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/alertbanner.h"
#include "widgets/traynotifier.h"

#include "deliveryharness.h"

#include "store/migrations.h"
#include "sim/partnersimulator.h"
#include "store/store.h"

#include <QAction>
#include <QApplication>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QCheckBox>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QSystemTrayIcon>
#include <QStandardPaths>
#include <QTabWidget>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

using namespace once;
using namespace once::ui;

namespace {

Reminder makeReminder(const QString &user, const QString &reminderId)
{
    const QJsonObject object{
        {QStringLiteral("user_id"), user},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), QStringLiteral("2026-12-01T09:00:00+01:00")},
        {QStringLiteral("destination"), QStringLiteral("%1@example.com").arg(user)},
        {QStringLiteral("body"), QStringLiteral("Your %1 reminder").arg(reminderId)},
        {QStringLiteral("channel"), QStringLiteral("email")},
    };
    const auto parsed = parseReminder(QJsonDocument(object).toJson(QJsonDocument::Compact));
    if (!parsed.reminder)
        qFatal("test reminder does not parse: %s", qPrintable(parsed.error));
    return *parsed.reminder;
}

// A scratch store with reminders on its queue, a partner and a console window over them.
class Console
{
public:
    explicit Console(const PartnerFaults &profile) : m_partner(profile) {}

    ~Console()
    {
        // Let the engine finish on its own while this thread (the partner's) still answers.
        if (m_window && m_window->engine()->state() != EngineController::State::Stopped) {
            m_window->engine()->stop();
            if (!QTest::qWaitFor(
                    [this] { return m_window->engine()->state() == EngineController::State::Stopped; },
                    20000))
                qWarning("the engine did not stop within 20 s");
        }
        m_window.reset();
    }

    bool setUp(const QList<Reminder> &reminders, InDoubtPolicy policy, QString *error)
    {
        if (!m_dir.isValid()) {
            *error = m_dir.errorString();
            return false;
        }
        m_url = QStringLiteral("sqlite:") + m_dir.filePath(QStringLiteral("console.sqlite"));
        {
            // The producer's part, before the console opens the store.
            auto store = Store::open(m_url, error);
            if (!store)
                return false;
            QList<OutgoingMessage> messages;
            for (const auto &reminder : reminders)
                messages.append(OutgoingMessage{reminder.payload, reminder.sendKey, reminder.eventId, 0, 0});
            if (!store->queue().enqueue(messages, error))
                return false;
            // An operator at the desk hears of every event in doubt at once (the default
            // waits ten minutes for the workers' own reconciliation).
            if (!store->operations().setAlertThreshold(AlertRule::InDoubt, QString(), 0, error))
                return false;
        }
        if (!m_partner.listen(QHostAddress::LocalHost, 0, error))
            return false;

        m_window = std::make_unique<MainWindow>();
        m_window->resize(1280, 820);
        m_window->show();
        m_window->openStore(m_url);
        QSignalSpy opened(m_window->session(), &StoreSession::opened);
        if (!opened.wait(10000) || !opened.constFirst().at(0).toBool()) {
            *error = QStringLiteral("the console did not open the store");
            return false;
        }

        EngineConfig config;
        config.storeUrl = m_url;
        config.partnerUrl = QUrl(QStringLiteral("http://127.0.0.1:%1/reminders").arg(m_partner.port()));
        config.workerId = QStringLiteral("console-test");
        config.concurrency = 4;
        config.maxAttempts = 2;
        config.leaseMs = 10000;
        config.requestTimeoutMs = 5000;
        config.backoffBaseMs = 20;
        config.backoffCapMs = 200;
        config.idlePollMs = 50;
        config.inDoubtPolicy = policy;
        // A test outage must not wait for the breaker's cooldowns.
        config.breakerThreshold = 1000000;
        m_window->engine()->start(config);
        return true;
    }

    MainWindow &window() { return *m_window; }
    PartnerSimulator &partner() { return m_partner; }

    // The store's numbers, asked the way the console asks: through its session.
    std::optional<DeliveryStats> stats()
    {
        StoreSession *session = m_window->session();
        QSignalSpy loaded(session, &StoreSession::overviewLoaded);
        const quint64 token = session->loadOverview(60000);
        if (!QTest::qWaitFor(
                [&] {
                    return std::any_of(loaded.cbegin(), loaded.cend(), [token](const QList<QVariant> &args) {
                        return args.at(0).toULongLong() == token;
                    });
                },
                10000))
            return std::nullopt;
        for (const auto &args : std::as_const(loaded)) {
            if (args.at(0).toULongLong() == token)
                return args.at(1).value<DeliveryStats>();
        }
        return std::nullopt;
    }

private:
    QTemporaryDir m_dir;
    QString m_url;
    PartnerSimulator m_partner;
    std::unique_ptr<MainWindow> m_window;
};

int rowOfKey(QAbstractItemModel *model, int column, int rawRole, const QByteArray &key)
{
    for (int row = 0; row < model->rowCount(); ++row) {
        if (model->index(row, column).data(rawRole).toByteArray() == key)
            return row;
    }
    return -1;
}

bool hasNotification(const QSignalSpy &spy, TrayNotifier::Kind kind, bool cleared)
{
    return std::any_of(spy.cbegin(), spy.cend(), [&](const QList<QVariant> &args) {
        const auto notification = args.at(0).value<TrayNotifier::Notification>();
        return notification.kind == kind && notification.cleared == cleared;
    });
}

// The notifications raised so far, one a line, for a failed check.
QByteArray notificationsSaid(const QSignalSpy &spy)
{
    QStringList lines;
    for (const auto &args : spy) {
        const auto notification = args.at(0).value<TrayNotifier::Notification>();
        lines << notification.title + QStringLiteral(": ") + notification.text;
    }
    return lines.join(QLatin1Char('\n')).toUtf8();
}

} // namespace

class TestUiConsole : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void redriveAfterOutageDeliversEachKeyOnce();
    void inDoubtEventsAreResolvedByTheOperator();
    void eventsPageFindsAUser();
    void missingStoreIsAskedAboutNotCreated();
    void commandLineAnswersWithoutADisplay_data();
    void commandLineAnswersWithoutADisplay();
    void partnerOutageRaisesTheBannerWhoeverRunsTheWorker();
    void bannerTellsNoWorkerRunningFromHoldingBack();
};

void TestUiConsole::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName(QStringLiteral("once"));
    QApplication::setApplicationName(QStringLiteral("once-console-test"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false\nonce.*.info=false"));
    Settings settings;
    settings.setIdempotencyWindowHours(24);
    settings.setRedriveRate(1000);
    qRegisterMetaType<once::DeliveryStats>();
}

void TestUiConsole::redriveAfterOutageDeliversEachKeyOnce()
{
    constexpr int Count = 8;
    QList<Reminder> reminders;
    for (int i = 0; i < Count; ++i)
        reminders.append(makeReminder(QStringLiteral("u-%1").arg(i), QStringLiteral("checkup")));
    PartnerFaults outage;
    outage.failRate = 1.0;
    Console console(outage);
    QString error;
    QVERIFY2(console.setUp(reminders, InDoubtPolicy::Resend, &error), qPrintable(error));
    MainWindow &window = console.window();

    // The outage: every reminder uses its two attempts and dies.
    auto *page = window.page<DeadLettersPage>();
    QVERIFY(page);
    window.showPage(page);
    auto *table = page->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), Count, 60000);
    QCOMPARE(console.partner().stats().effects, qint64(0));
    for (int row = 0; row < Count; ++row)
        QCOMPARE(table->model()->index(row, DeadLettersModel::ErrorClass).data().toString(),
                 QStringLiteral("http-5xx"));

    // The partner is back.
    console.partner().setProfile(PartnerFaults{});

    // Redrive three of them, selected in the table.
    QList<QByteArray> selected;
    for (int row = 0; row < 3; ++row) {
        table->selectionModel()->select(table->model()->index(row, 0),
                                        QItemSelectionModel::Select | QItemSelectionModel::Rows);
        selected << table->model()
                        ->index(row, DeadLettersModel::SendKey)
                        .data(DeadLettersModel::RawRole)
                        .toByteArray();
    }
    auto *redriveSelected = page->findChild<QAction *>(QStringLiteral("redriveSelected"));
    QVERIFY(redriveSelected->isEnabled());
    QSignalSpy finished(window.session(), &StoreSession::redriveFinished);
    redriveSelected->trigger();
    QTRY_VERIFY(qobject_cast<RedriveDialog *>(QApplication::activeModalWidget()));
    auto *dialog = qobject_cast<RedriveDialog *>(QApplication::activeModalWidget());
    QCOMPARE(dialog->letterCount(), 3);
    QCOMPARE(dialog->redrivenBeforeCount(), 0);
    QVERIFY(!dialog->showsIdempotencyWarning());
    QCOMPARE(dialog->ratePerSecond(), 1000);
    dialog->redriveButton()->click();
    QVERIFY(finished.wait(10000));
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().moved, 3);
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().cancelled, false);

    QTRY_COMPARE_WITH_TIMEOUT(console.partner().stats().effects, qint64(3), 20000);
    for (const QByteArray &key : std::as_const(selected))
        QCOMPARE(console.partner().effectsByKey().value(key), 1);
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), Count - 3, 10000);
    auto *status = page->findChild<QLabel *>(QStringLiteral("status"));
    QVERIFY2(status->text().contains(QLatin1String("Put 3 of 3")), qPrintable(status->text()));

    // Then the rest, as "all matching".
    finished.clear();
    page->findChild<QAction *>(QStringLiteral("redriveAllMatching"))->trigger();
    QTRY_VERIFY(qobject_cast<RedriveDialog *>(QApplication::activeModalWidget()));
    dialog = qobject_cast<RedriveDialog *>(QApplication::activeModalWidget());
    QCOMPARE(dialog->letterCount(), Count - 3);
    QCOMPARE(dialog->auditDetail(), QStringLiteral("all"));
    dialog->redriveButton()->click();
    QVERIFY(finished.wait(10000));
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().moved, Count - 3);

    QTRY_COMPARE_WITH_TIMEOUT(console.partner().stats().effects, qint64(Count), 20000);
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 0, 10000);
    QTRY_VERIFY(page->findChild<QLabel *>(QStringLiteral("emptyState"))->isVisible());
    std::optional<DeliveryStats> stats;
    QTRY_VERIFY_WITH_TIMEOUT((stats = console.stats()) && stats->acked == Count, 20000);
    QCOMPARE(stats->queue.dead, qint64(0));
    QCOMPARE(stats->queue.ready + stats->queue.inFlight + stats->queue.delayed, qint64(0));
    QCOMPARE(stats->deadKeys, qint64(0));

    // Exactly once: nothing more arrives later.
    QTest::qWait(500);
    const PartnerStats partner = console.partner().stats();
    QCOMPARE(partner.effects, qint64(Count));
    QCOMPARE(partner.duplicateEffects, qint64(0));
    const auto effects = console.partner().effectsByKey();
    QCOMPARE(effects.size(), Count);
    for (const auto &reminder : std::as_const(reminders))
        QCOMPARE(effects.value(reminder.sendKey), 1);
}

void TestUiConsole::inDoubtEventsAreResolvedByTheOperator()
{
    const Reminder delivered = makeReminder(QStringLiteral("u-seen"), QStringLiteral("dentist"));
    const Reminder resent = makeReminder(QStringLiteral("u-unsure"), QStringLiteral("dentist"));
    // No idempotency, and every answer lost after the effect: the worker cannot know.
    PartnerFaults dropping;
    dropping.idempotent = false;
    dropping.dropAfterAcceptRate = 1.0;
    Console console(dropping);
    QString error;
    QVERIFY2(console.setUp({delivered, resent}, InDoubtPolicy::Hold, &error), qPrintable(error));
    MainWindow &window = console.window();
    QSignalSpy notified(window.tray(), &TrayNotifier::notified);

    auto *page = window.page<InDoubtPage>();
    QVERIFY(page);
    window.showPage(page);
    auto *table = page->findChild<QTableView *>(QStringLiteral("inDoubt"));
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 2, 30000);
    // The desktop says so too, and its notification opens this page.
    QTRY_VERIFY2_WITH_TIMEOUT(hasNotification(notified, TrayNotifier::Kind::InDoubt, false),
                              notificationsSaid(notified).constData(), 10000);
    QCOMPARE(window.tray()->lastNotification().target, TrayNotifier::Target::InDoubt);
    window.showPage(window.page<OverviewPage>());
    emit window.tray()->trayIcon()->messageClicked();
    QCOMPARE(window.tabs()->currentWidget(), page);
    QCOMPARE(console.partner().stats().effects, qint64(2));
    PartnerFaults answering;
    answering.idempotent = false;
    console.partner().setProfile(answering);
    std::optional<DeliveryStats> stats = console.stats();
    QVERIFY(stats);
    QCOMPARE(stats->inDoubt, qint64(2));
    QCOMPARE(stats->acked, qint64(0));

    // The operator checked the partner's log: the first one arrived.
    const int seenRow =
        rowOfKey(table->model(), InDoubtModel::SendKey, InDoubtModel::RawRole, delivered.sendKey);
    QVERIFY(seenRow >= 0);
    QCOMPARE(table->model()->index(seenRow, InDoubtModel::User).data().toString(), QStringLiteral("u-seen"));
    table->selectRow(seenRow);
    page->findChild<QAction *>(QStringLiteral("markDelivered"))->trigger();
    QTRY_VERIFY(qobject_cast<DecisionDialog *>(QApplication::activeModalWidget()));
    auto *box = qobject_cast<DecisionDialog *>(QApplication::activeModalWidget());
    QVERIFY2(box->informativeText().contains(QLatin1String("records a delivery that nobody saw")),
             qPrintable(box->informativeText()));
    box->findChild<QPushButton *>(QStringLiteral("confirm"))->click();
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 1, 10000);
    QTRY_VERIFY_WITH_TIMEOUT((stats = console.stats()) && stats->acked == 1, 10000);
    QCOMPARE(stats->inDoubt, qint64(1));
    QTest::qWait(300);
    QCOMPARE(console.partner().stats().effects, qint64(2));
    QCOMPARE(console.partner().effectsByKey().value(delivered.sendKey), 1);

    // The second one: resend with the same key; this partner acts again.
    const int unsureRow =
        rowOfKey(table->model(), InDoubtModel::SendKey, InDoubtModel::RawRole, resent.sendKey);
    QVERIFY(unsureRow >= 0);
    table->selectRow(unsureRow);
    page->findChild<QAction *>(QStringLiteral("resend"))->trigger();
    QTRY_VERIFY(qobject_cast<DecisionDialog *>(QApplication::activeModalWidget()));
    box = qobject_cast<DecisionDialog *>(QApplication::activeModalWidget());
    QVERIFY(
        box->informativeText().contains(QLatin1String("A partner without idempotency delivers it again")));
    box->findChild<QPushButton *>(QStringLiteral("confirm"))->click();
    QTRY_COMPARE_WITH_TIMEOUT(console.partner().stats().effects, qint64(3), 20000);
    QCOMPARE(console.partner().effectsByKey().value(resent.sendKey), 2);
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 0, 10000);
    QTRY_VERIFY_WITH_TIMEOUT((stats = console.stats()) && stats->acked == 2, 20000);
    QCOMPARE(stats->inDoubt, qint64(0));
    QCOMPARE(stats->queue.ready + stats->queue.inFlight + stats->queue.delayed + stats->queue.dead,
             qint64(0));
    auto *status = page->findChild<QLabel *>(QStringLiteral("status"));
    QVERIFY2(status->text().contains(QLatin1String("queued again under the same key")),
             qPrintable(status->text()));
    // The console's own worker runs, and the store knows it like any other.
    QTRY_VERIFY2(status->text().contains(QLatin1String("A running worker sends it next (1 running on this store)")),
                 qPrintable(status->text()));

    QTest::qWait(500);
    QCOMPARE(console.partner().stats().effects, qint64(3));
    QCOMPARE(console.partner().effectsByKey().value(delivered.sendKey), 1);
    QCOMPARE(console.partner().effectsByKey().value(resent.sendKey), 2);
    QTRY_VERIFY2_WITH_TIMEOUT(hasNotification(notified, TrayNotifier::Kind::InDoubt, true),
                              notificationsSaid(notified).constData(), 10000);
}

void TestUiConsole::eventsPageFindsAUser()
{
    QList<Reminder> reminders;
    for (const char *user : {"u-alice", "u-bob", "u-carol"}) {
        for (const char *reminder : {"dentist", "gym"})
            reminders.append(makeReminder(QString::fromLatin1(user), QString::fromLatin1(reminder)));
    }
    Console console(PartnerFaults{});
    QString error;
    QVERIFY2(console.setUp(reminders, InDoubtPolicy::Resend, &error), qPrintable(error));
    MainWindow &window = console.window();
    QTRY_COMPARE_WITH_TIMEOUT(console.partner().stats().effects, qint64(reminders.size()), 20000);

    auto *page = window.page<EventsPage>();
    QVERIFY(page);
    window.showPage(page);
    auto *search = page->findChild<QLineEdit *>(QStringLiteral("search"));
    QVERIFY(search);
    search->setText(QStringLiteral("u-bob"));
    page->search();
    EventsModel *model = page->eventsModel();
    QTRY_VERIFY_WITH_TIMEOUT(model->hasLoaded() && model->rowCount() == 2, 10000);
    for (int row = 0; row < model->rowCount(); ++row) {
        QCOMPARE(model->event(row).userId, QStringLiteral("u-bob"));
        QCOMPARE(model->event(row).state, QString(LedgerState::Applied));
    }
}

// A mistyped path, a moved file or a first start: the console asks before it creates an
// empty store that would look healthy, and Cancel leaves nothing behind.
void TestUiConsole::missingStoreIsAskedAboutNotCreated()
{
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("typo/stroe.sqlite"));
    const QString url = QStringLiteral("sqlite:") + path;
    MainWindow window;
    window.resize(1280, 820);
    window.show();
    auto *storeLabel = window.findChild<QLabel *>(QStringLiteral("storeLabel"));

    window.openStore(url);
    QTRY_VERIFY(window.findChild<QMessageBox *>(QStringLiteral("createStore")));
    auto *ask = window.findChild<QMessageBox *>(QStringLiteral("createStore"));
    QVERIFY2(ask->text().contains(path) && ask->text().contains(QLatin1String("Create a new store here?")),
             qPrintable(ask->text()));
    QVERIFY2(storeLabel->text().startsWith(QLatin1String("No store at")), qPrintable(storeLabel->text()));
    QVERIFY(!QFile::exists(path));
    QVERIFY(!QFileInfo::exists(dir.filePath(QStringLiteral("typo"))));
    ask->button(QMessageBox::Cancel)->click();
    QTRY_VERIFY(!window.findChild<QMessageBox *>(QStringLiteral("createStore")));
    QTest::qWait(200);
    QVERIFY(!QFile::exists(path));

    window.openStore(url);
    QTRY_VERIFY(window.findChild<QMessageBox *>(QStringLiteral("createStore")));
    window.findChild<QMessageBox *>(QStringLiteral("createStore"))->findChild<QPushButton *>(QStringLiteral("create"))->click();
    QTRY_VERIFY2(storeLabel->text().startsWith(QLatin1String("Store: ")), qPrintable(storeLabel->text()));
    QVERIFY(QFile::exists(path));
    QString error;
    const auto store = Store::open(url, &error);
    QVERIFY2(store, qPrintable(error));
    QCOMPARE(store->database().schemaVersion(), latestSchemaVersion());
}

void TestUiConsole::commandLineAnswersWithoutADisplay_data()
{
    QTest::addColumn<QStringList>("arguments");
    QTest::addColumn<int>("exitCode");
    QTest::addColumn<QString>("expected"); // on standard output, or on standard error when exiting 1
    QTest::newRow("--version") << QStringList{QStringLiteral("--version")} << 0 << QStringLiteral("once-console ");
    QTest::newRow("--help") << QStringList{QStringLiteral("--help")} << 0 << QStringLiteral("--store <url>");
    QTest::newRow("-h with other options") << QStringList{QStringLiteral("--store"), QStringLiteral("x.sqlite"),
                                                          QStringLiteral("-h")}
                                           << 0 << QStringLiteral("--demo");
    QTest::newRow("an unknown option") << QStringList{QStringLiteral("--stroe"), QStringLiteral("x.sqlite")} << 1
                                       << QStringLiteral("Unknown option 'stroe'");
}

// On a server or over ssh there is no display, and QApplication aborts without one: the
// console's command line must still answer there.
void TestUiConsole::commandLineAnswersWithoutADisplay()
{
    QFETCH(QStringList, arguments);
    QFETCH(int, exitCode);
    QFETCH(QString, expected);
    const QString console = qEnvironmentVariable("ONCE_CONSOLE_BIN");
    QVERIFY2(!console.isEmpty(), "ONCE_CONSOLE_BIN names the once-console binary (set by ctest)");
    QProcess process;
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    for (const char *display : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"})
        environment.remove(QString::fromLatin1(display));
    process.setProcessEnvironment(environment);
    process.start(console, arguments);
    QVERIFY(process.waitForFinished(20000));
    const QString out = QString::fromLocal8Bit(process.readAllStandardOutput());
    const QString err = QString::fromLocal8Bit(process.readAllStandardError());
    QCOMPARE(process.exitStatus(), QProcess::NormalExit); // not aborted for want of a display
    QVERIFY2(process.exitCode() == exitCode, qPrintable(out + err));
    QVERIFY2((exitCode == 0 ? out : err).contains(expected), qPrintable(out + err));
    QVERIFY2(!err.contains(QLatin1String("platform plugin")), qPrintable(err));
}

namespace {

// A store with reminders on its queue, written as a producer would, and a console window
// over it; the workers and the partner are `once` processes (ONCE_BIN).
struct HeadlessOutage
{
    QTemporaryDir dir;
    QString url;
    std::unique_ptr<oncetest::OnceRunner> once;
    std::unique_ptr<MainWindow> window;

    bool setUp(int reminders, QString *error)
    {
        const QString onceBin = qEnvironmentVariable("ONCE_BIN");
        if (onceBin.isEmpty() || !dir.isValid()) {
            *error = QStringLiteral("ONCE_BIN must name the built once binary (ctest sets it)");
            return false;
        }
        url = QStringLiteral("sqlite:") + dir.filePath(QStringLiteral("outage.sqlite"));
        {
            auto store = Store::open(url, error);
            if (!store)
                return false;
            QList<OutgoingMessage> messages;
            for (int i = 0; i < reminders; ++i) {
                const Reminder reminder = makeReminder(QStringLiteral("u-%1").arg(i), QStringLiteral("checkup"));
                messages.append(OutgoingMessage{reminder.payload, reminder.sendKey, reminder.eventId, 0, 0});
            }
            if (!store->queue().enqueue(messages, error))
                return false;
        }
        once = std::make_unique<oncetest::OnceRunner>(onceBin, url);
        window = std::make_unique<MainWindow>();
        window->resize(1280, 820);
        window->show();
        window->openStore(url);
        QSignalSpy opened(window->session(), &StoreSession::opened);
        if (!opened.wait(10000) || !opened.constFirst().at(0).toBool()) {
            *error = QStringLiteral("the console did not open the store");
            return false;
        }
        return true;
    }

    QProcess *startWorker(quint16 partnerPort, const QString &id)
    {
        return once->start({QStringLiteral("worker"), QStringLiteral("--partner"),
                            QStringLiteral("http://127.0.0.1:%1/reminders").arg(partnerPort), QStringLiteral("--worker-id"),
                            id, QStringLiteral("--concurrency"), QStringLiteral("2"), QStringLiteral("--max-attempts"),
                            QStringLiteral("2"), QStringLiteral("--backoff-base-ms"), QStringLiteral("100"),
                            QStringLiteral("--backoff-cap-s"), QStringLiteral("1")});
    }

    AlertBanner *banner() const { return window->page<OverviewPage>()->findChild<AlertBanner *>(QStringLiteral("alertBanner")); }
    QString workersStatus() const
    {
        return window->statusBar()->findChild<QLabel *>(QStringLiteral("workersStatus"))->text();
    }
};

} // namespace

void TestUiConsole::partnerOutageRaisesTheBannerWhoeverRunsTheWorker()
{
    // About a minute by default; five seconds here, set as an operator does. The noisy
    // notifications (a breaker's first opening) are off until chosen.
    QSettings().remove(QStringLiteral("notify"));

    HeadlessOutage outage;
    QString error;
    // Nine reminders: three go through, then the outage; the breaker's probes use up the
    // attempts of some (dead letters), and the rest go through once it is over.
    QVERIFY2(outage.setUp(9, &error), qPrintable(error));
    MainWindow &window = *outage.window;
    // The threshold is the store's, for every console and watcher on it: set through the
    // session, audited, and read back from the store.
    {
        SettingsDialog dialog(window.session(), AlertThresholds{});
        auto *down = dialog.findChild<QSpinBox *>(QStringLiteral("partnerDownSeconds"));
        QVERIFY(down);
        QVERIFY(down->isEnabled());
        QCOMPARE(down->value(), 60);
        down->setValue(5);
        QVERIFY(dialog.findChild<QCheckBox *>(QStringLiteral("notify-partnerDown"))->isChecked());
        QVERIFY(dialog.findChild<QCheckBox *>(QStringLiteral("notify-deadLetters"))->isChecked());
        QVERIFY(!dialog.findChild<QCheckBox *>(QStringLiteral("notify-partnerFailing"))->isChecked());
        dialog.accept();
    }
    {
        auto store = Store::open(outage.url, &error);
        QVERIFY2(store, qPrintable(error));
        QTRY_COMPARE(readAlertThresholds(store->database(), &error).value_or(AlertThresholds{}).value(AlertRule::PartnerDown),
                     qint64(5000));
        const auto audit = store->inspector().auditLog(10, &error);
        QVERIFY2(audit && !audit->isEmpty() && audit->constFirst().action == QLatin1String("alert-threshold"),
                 qPrintable(error));
    }
    QSignalSpy notified(window.tray(), &TrayNotifier::notified);
    // Whatever page is shown: the banner, the status bar and the tray follow the store.
    window.showPage(window.page<DeadLettersPage>());
    QTRY_VERIFY_WITH_TIMEOUT(outage.workersStatus().contains(QLatin1String("No worker on this store")), 10000);

    // A partner that answers three requests, then 503 to everything for 20 seconds, and
    // a headless worker, which the console never talked to.
    const quint16 port = outage.once->startPartnerSim(
        {QStringLiteral("--outage-after"), QStringLiteral("3"), QStringLiteral("--outage-seconds"), QStringLiteral("20")});
    QVERIFY(port);
    QElapsedTimer sinceStart;
    sinceStart.start();
    outage.startWorker(port, QStringLiteral("headless-1"));

    AlertBanner *banner = outage.banner();
    QTRY_VERIFY2_WITH_TIMEOUT(banner->text().contains(QLatin1String("Partner down for")), qPrintable(banner->text()),
                              20000);
    const qint64 raisedAfterMs = sinceStart.elapsed();
    QVERIFY2(banner->text().contains(QLatin1String("the worker is holding back and retries by itself; do not redrive "
                                                   "yet")),
             qPrintable(banner->text()));
    QVERIFY2(banner->text().contains(QLatin1String("failed sends in a row, last http-5xx")), qPrintable(banner->text()));
    QCOMPARE(banner->severity(), Severity::Alert);
    QTRY_VERIFY2_WITH_TIMEOUT(outage.workersStatus().contains(QLatin1String("1 worker: 1 running (1 holding back)")),
                              qPrintable(outage.workersStatus()), 5000);
    QTRY_VERIFY2_WITH_TIMEOUT(hasNotification(notified, TrayNotifier::Kind::PartnerDown, false),
                              notificationsSaid(notified).constData(), 5000);
    QVERIFY2(!hasNotification(notified, TrayNotifier::Kind::PartnerFailing, false), notificationsSaid(notified).constData());
    // The Worker page's list says which worker holds back.
    window.showPage(window.page<WorkerPage>());
    const WorkersModel *workers = window.page<WorkerPage>()->workersModel();
    QTRY_VERIFY_WITH_TIMEOUT(workers->rowCount() == 1
                                 && workers->index(0, WorkersModel::Status).data().toString() == QLatin1String("holding back"),
                             5000);
    // The breaker's probes use up the attempts of a few reminders: dead letters, announced.
    QTRY_VERIFY2_WITH_TIMEOUT(hasNotification(notified, TrayNotifier::Kind::DeadLetters, false),
                              notificationsSaid(notified).constData(), 15000);
    qInfo("outage alert raised %lld ms after the worker started", raisedAfterMs);

    // Clicking the last notification opens its page.
    window.showPage(window.page<EventsPage>());
    const TrayNotifier::Notification last = window.tray()->lastNotification();
    emit window.tray()->trayIcon()->messageClicked();
    switch (last.target) {
    case TrayNotifier::Target::Overview:
        QCOMPARE(window.tabs()->currentWidget(), window.page<OverviewPage>());
        break;
    case TrayNotifier::Target::DeadLetters:
        QCOMPARE(window.tabs()->currentWidget(), window.page<DeadLettersPage>());
        break;
    case TrayNotifier::Target::Worker:
    case TrayNotifier::Target::InDoubt:
        QFAIL("the outage notified of workers or events in doubt");
    }

    // The partner is back: the worker's probe goes through, the alert clears, and says so.
    QTRY_VERIFY2_WITH_TIMEOUT(!banner->text().contains(QLatin1String("Partner")), qPrintable(banner->text()), 60000);
    QTRY_VERIFY_WITH_TIMEOUT(hasNotification(notified, TrayNotifier::Kind::PartnerDown, true), 5000);
    QTRY_VERIFY2_WITH_TIMEOUT(outage.workersStatus() == QLatin1String("1 worker: 1 running"),
                              qPrintable(outage.workersStatus()), 5000);
}

void TestUiConsole::bannerTellsNoWorkerRunningFromHoldingBack()
{
    HeadlessOutage outage;
    QString error;
    QVERIFY2(outage.setUp(10, &error), qPrintable(error));
    {
        auto store = Store::open(outage.url, &error);
        QVERIFY2(store && store->operations().setAlertThreshold(AlertRule::PartnerDown, QString(), 5000, &error),
                 qPrintable(error));
    }
    MainWindow &window = *outage.window;
    QSignalSpy notified(window.tray(), &TrayNotifier::notified);
    window.showPage(window.page<OverviewPage>());
    QTRY_VERIFY_WITH_TIMEOUT(outage.workersStatus().contains(QLatin1String("No worker on this store")), 10000);

    const quint16 port = outage.once->startPartnerSim({QStringLiteral("--fail-rate"), QStringLiteral("1")});
    QVERIFY(port);
    QProcess *worker = outage.startWorker(port, QStringLiteral("headless-doomed"));
    AlertBanner *banner = outage.banner();
    QTRY_VERIFY2_WITH_TIMEOUT(banner->text().contains(QLatin1String("holding back")), qPrintable(banner->text()),
                              20000);
    QVERIFY(!banner->text().contains(QLatin1String("No worker is running")));

    // The worker is killed: nobody holds back any more, nobody delivers either.
    worker->kill();
    QVERIFY(worker->waitForFinished(5000));
    QTRY_VERIFY2_WITH_TIMEOUT(banner->text().contains(QLatin1String("No worker is running: ")),
                              qPrintable(banner->text()), 30000);
    QVERIFY2(banner->text().contains(QLatin1String("The last one (headless-doomed) stopped sending heartbeats")),
             qPrintable(banner->text()));
    QVERIFY2(!banner->text().contains(QLatin1String("holding back")), qPrintable(banner->text()));
    // What the history says of the partner stands, and says that nothing retries now.
    QVERIFY2(banner->text().contains(QLatin1String("no worker is running, so nothing retries until one starts")),
             qPrintable(banner->text()));
    QCOMPARE(banner->severity(), Severity::Alert);
    QTRY_COMPARE_WITH_TIMEOUT(outage.workersStatus(), QStringLiteral("1 worker: 1 gone"), 5000);
    QTRY_VERIFY_WITH_TIMEOUT(hasNotification(notified, TrayNotifier::Kind::NoWorker, false), 5000);
    // Its partner alert did not "clear": the partner is not back, only no worker reports it.
    QVERIFY2(!hasNotification(notified, TrayNotifier::Kind::PartnerDown, true), notificationsSaid(notified).constData());

    // Its notification opens the Worker page.
    emit window.tray()->trayIcon()->messageClicked();
    QCOMPARE(window.tabs()->currentWidget(), window.page<WorkerPage>());
}

QTEST_MAIN(TestUiConsole)
#include "tst_uiconsole.moc"
