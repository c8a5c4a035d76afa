// The console's Overview, Worker and Audit pages against a real store file: the numbers
// in the tiles, the alert banner, the audit table, and a worker started from the page
// delivering to an in-process partner simulator.
#include "dialogs/settingsdialog.h"
#include "alerting/alertsettings.h"
#include "display/humanunits.h"
#include "models/auditmodel.h"
#include "pages/auditpage.h"
#include "pages/overviewpage.h"
#include "pages/workerpage.h"
#include "session/enginecontroller.h"
#include "session/health.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "sim/partnersimulator.h"
#include "store/store.h"
#include "widgets/alertbanner.h"
#include "widgets/metricchart.h"
#include "widgets/tile.h"

#include <QAbstractItemModelTester>
#include <QDateTime>
#include <QFormLayout>
#include <QGroupBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

using namespace once;
using namespace once::ui;

namespace {

constexpr qint64 LongLeaseMs = 10 * 60 * 1000;
constexpr int EngineTimeoutMs = 20000;
const QString Worker = QStringLiteral("test-worker");

Reminder makeReminder(const QString &user, const QString &reminderId, const QDateTime &scheduledAt)
{
    const QJsonObject object{
        {QStringLiteral("user_id"), user},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), scheduledAt.toUTC().toString(Qt::ISODate)},
        {QStringLiteral("destination"), QStringLiteral("+15550100")},
        {QStringLiteral("body"), QStringLiteral("Reminder %1 for %2").arg(reminderId, user)},
    };
    const auto parsed = parseReminder(QJsonDocument(object).toJson(QJsonDocument::Compact));
    if (!parsed.reminder)
        qFatal("test reminder does not parse: %s", qPrintable(parsed.error));
    return *parsed.reminder;
}

Reminder makeReminder(const QString &user, const QString &reminderId)
{
    return makeReminder(user, reminderId, QDateTime::currentDateTimeUtc());
}

OutgoingMessage outgoing(const Reminder &reminder, qint64 delayMs = 0)
{
    return OutgoingMessage{reminder.payload, reminder.sendKey, reminder.eventId, delayMs, 0};
}

AuditEntry auditEntry(qint64 id, const QString &action, qint64 count)
{
    return AuditEntry{id, 1'700'000'000'000 + id * 1000, QStringLiteral("alice"), action, QStringLiteral("detail %1").arg(id),
                      count};
}

template<typename T> T *child(QWidget &parent, const QString &name)
{
    auto *found = parent.findChild<T *>(name);
    if (!found)
        qWarning("no %s named %s", T::staticMetaObject.className(), qPrintable(name));
    return found;
}

} // namespace

class TestUiOverview final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void durationsUseOneHumanUnit_data();
    void durationsUseOneHumanUnit();

    void auditModelStaysConsistentThroughReloads();
    void auditModelSaysWhatCameOfARedrive();
    void auditModelKeepsRawValuesUnderUserRole();
    void auditPageListsStoreActionsNewestFirst();
    void auditPageExplainsAnEmptyLog();

    void overviewShowsEmptyStateWithoutStore();
    void overviewTilesShowStoreNumbers();
    void overviewSaysWhatThePartnerAnsweredAndWhenSendsWereEarly();
    void bannerAppearsWhenOldestReadyMessageIsTooOld();
    void bannerStaysHiddenWhenAllIsWell();
    void bannerWarnsOfFailingPartnerAndEventsInDoubt();
    void healthAlertsSayThePartnerRefusesEveryone();
    void bannerShowsOpenCircuitBreaker();
    void chartsAndTilesTellTheTruth();
    void healthAlertsFollowTheWorkers_data();
    void healthAlertsFollowTheWorkers();

    void workerPageRejectsUrlThatIsNotHttp();
    void workerPageStartDeliversAndStopStops();
    void workerPageReflectsEngineItDidNotStart();

private:
    QString storeUrl() const { return QStringLiteral("sqlite:") + m_path; }
    // As an operator sets it (once alerts set, the Settings dialog): in the store.
    void setThreshold(AlertRule rule, qint64 value)
    {
        QString error;
        QVERIFY2(m_store->operations().setAlertThreshold(rule, QString(), value, &error), qPrintable(error));
    }
    void enqueue(const QList<OutgoingMessage> &messages);
    // Claims the key for a message of its own and records the outcome of one send.
    void claimAndRecord(const Reminder &reminder, QLatin1String state, const QString &errorClass = QString(),
                        qint64 sentAtMs = 0);
    EngineConfig engineConfig(const PartnerSimulator &partner) const;

    QTemporaryDir m_dir;
    QString m_path;
    int m_stores = 0;
    std::unique_ptr<Store> m_store;
};

void TestUiOverview::initTestCase()
{
    // Settings written here go to the test's own folder, never to the user's.
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName(QStringLiteral("once-tests"));
    QCoreApplication::setApplicationName(QStringLiteral("tst_uioverview"));
    QLocale::setDefault(QLocale(QLocale::English, QLocale::UnitedStates));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.info=false\nonce.*.debug=false"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
}

void TestUiOverview::init()
{
    m_path = m_dir.filePath(QStringLiteral("store-%1.sqlite").arg(++m_stores));
    QString error;
    m_store = Store::open(storeUrl(), &error);
    QVERIFY2(m_store, qPrintable(error));
    Settings settings;
    settings.setPartnerUrl(QStringLiteral("http://127.0.0.1:8080/reminders"));
    settings.setConcurrency(16);
    settings.setMaxAttempts(8);
    settings.setHoldInDoubt(false);
}

void TestUiOverview::cleanup()
{
    m_store.reset();
}

void TestUiOverview::enqueue(const QList<OutgoingMessage> &messages)
{
    QString error;
    QVERIFY2(m_store->queue().enqueue(messages, &error), qPrintable(error));
}

void TestUiOverview::claimAndRecord(const Reminder &reminder, QLatin1String state, const QString &errorClass,
                                    qint64 sentAtMs)
{
    const qint64 at = sentAtMs ? sentAtMs : nowMs();
    QString error;
    const QString messageId = QStringLiteral("m-") + reminder.reminderId;
    const auto claims = m_store->ledger().claim({ClaimRequest{reminder, messageId, 1, nowMs() + LongLeaseMs}}, Worker,
                                                InDoubtPolicy::Resend, &error);
    QVERIFY2(claims.size() == 1, qPrintable(error));
    QCOMPARE(claims.constFirst().outcome, ClaimResult::Outcome::Claimed);
    const bool applied = state == LedgerState::Applied;
    const LedgerUpdate update{reminder.sendKey, messageId, 1, state, true, at, applied ? 200 : 503, errorClass,
                              applied ? QString() : QStringLiteral("failed: ") + errorClass, QStringLiteral("req-1")};
    const Attempt attempt{reminder.sendKey, {}, messageId, 1, Worker, at, QStringLiteral("send"),
                          applied ? QStringLiteral("applied") : QStringLiteral("transient"), update.httpStatus, 12,
                          errorClass, update.error, {}};
    QVERIFY2(m_store->ledger().record({update}, {attempt}, &error), qPrintable(error));
}

EngineConfig TestUiOverview::engineConfig(const PartnerSimulator &partner) const
{
    EngineConfig config;
    config.storeUrl = storeUrl();
    config.partnerUrl = QUrl(QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port()));
    config.workerId = QStringLiteral("test-engine");
    config.concurrency = 8;
    return config;
}

// --- Formatting -----------------------------------------------------------------

void TestUiOverview::durationsUseOneHumanUnit_data()
{
    QTest::addColumn<qint64>("ms");
    QTest::addColumn<QString>("text");
    QTest::newRow("milliseconds") << qint64(350) << QStringLiteral("350 ms");
    QTest::newRow("seconds") << qint64(12'400) << QStringLiteral("12 s");
    QTest::newRow("minutes") << qint64(4 * 60'000 + 59'000) << QStringLiteral("4 min");
    QTest::newRow("hours") << qint64(2 * 3'600'000 + 5 * 60'000) << QStringLiteral("2 h");
    QTest::newRow("a day and a half stays in hours") << qint64(36 * 3'600'000) << QStringLiteral("36 h");
    QTest::newRow("days") << qint64(3 * 86'400'000) << QStringLiteral("3 d");
    QTest::newRow("early") << qint64(-90'000) << (QChar(0x2212) + QStringLiteral("1 min"));
}

void TestUiOverview::durationsUseOneHumanUnit()
{
    QFETCH(qint64, ms);
    QFETCH(QString, text);
    QCOMPARE(formatDuration(ms), text);
}

// --- Audit ------------------------------------------------------------------------

void TestUiOverview::auditModelStaysConsistentThroughReloads()
{
    AuditModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    QCOMPARE(model.columnCount(), int(AuditModel::Count));

    model.setEntries({auditEntry(3, QStringLiteral("discard"), 2), auditEntry(2, QStringLiteral("redrive"), 17),
                      auditEntry(1, QStringLiteral("redrive"), 1)});
    QCOMPARE(model.rowCount(), 3);
    // Two new entries on top, the oldest cut off by the load limit.
    model.setEntries({auditEntry(5, QStringLiteral("resolve-resend"), 1), auditEntry(4, QStringLiteral("discard"), 4),
                      auditEntry(3, QStringLiteral("discard"), 2), auditEntry(2, QStringLiteral("redrive"), 17)});
    QCOMPARE(model.rowCount(), 4);
    QCOMPARE(model.index(0, AuditModel::HowMany).data(Qt::UserRole).toLongLong(), qint64(1));
    QCOMPARE(model.index(3, AuditModel::HowMany).data(Qt::UserRole).toLongLong(), qint64(17));
    // Unrelated entries: a reset.
    model.setEntries({auditEntry(9, QStringLiteral("redrive"), 9)});
    QCOMPARE(model.rowCount(), 1);
    model.setEntries({});
    QCOMPARE(model.rowCount(), 0);
}

void TestUiOverview::auditModelKeepsRawValuesUnderUserRole()
{
    AuditModel model;
    const AuditEntry entry = auditEntry(7, QStringLiteral("resolve-mark-delivered"), 1234);
    model.setEntries({entry});
    QCOMPARE(model.index(0, AuditModel::When).data(Qt::UserRole).toLongLong(), entry.atMs);
    QCOMPARE(model.index(0, AuditModel::When).data().toString(),
             QDateTime::fromMSecsSinceEpoch(entry.atMs).toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm:ss")));
    QCOMPARE(model.index(0, AuditModel::Who).data().toString(), QStringLiteral("alice"));
    QCOMPARE(model.index(0, AuditModel::What).data(Qt::UserRole).toString(), QStringLiteral("resolve-mark-delivered"));
    QCOMPARE(model.index(0, AuditModel::What).data().toString(), QStringLiteral("Mark an in-doubt event delivered"));
    QCOMPARE(model.index(0, AuditModel::Detail).data().toString(), QStringLiteral("detail 7"));
    QCOMPARE(model.index(0, AuditModel::HowMany).data().toString(), QStringLiteral("1,234"));
    QCOMPARE(model.index(0, AuditModel::HowMany).data(Qt::UserRole).toLongLong(), qint64(1234));
    QCOMPARE(model.headerData(AuditModel::HowMany, Qt::Horizontal).toString(), QStringLiteral("How many"));
}

void TestUiOverview::auditPageListsStoreActionsNewestFirst()
{
    QString error;
    Operations operations(m_store->database(), m_store->queue(), m_store->ledger(), QStringLiteral("alice"));
    QVERIFY2(operations.audit(QStringLiteral("redrive"), QStringLiteral("error-class=http-5xx"), 17, &error), qPrintable(error));
    QVERIFY2(operations.audit(QStringLiteral("discard"), QStringLiteral("all"), 2, &error), qPrintable(error));

    StoreSession session(storeUrl());
    AuditPage page;
    page.setSession(&session);
    page.refresh();
    auto *table = child<QTableView>(page, QStringLiteral("auditTable"));
    QVERIFY(table);
    QTRY_COMPARE(table->model()->rowCount(), 2);
    const QAbstractItemModel *model = table->model();
    QCOMPARE(model->index(0, AuditModel::What).data(Qt::UserRole).toString(), QStringLiteral("discard"));
    QCOMPARE(model->index(1, AuditModel::What).data(Qt::UserRole).toString(), QStringLiteral("redrive"));
    QCOMPARE(model->index(1, AuditModel::Who).data().toString(), QStringLiteral("alice"));
    QCOMPARE(model->index(1, AuditModel::Detail).data().toString(), QStringLiteral("error-class=http-5xx"));
    QCOMPARE(model->index(1, AuditModel::HowMany).data(Qt::UserRole).toLongLong(), qint64(17));
    auto *stack = page.findChild<QStackedWidget *>();
    QCOMPARE(stack->currentWidget(), table);

    // A later action shows up on the next refresh.
    QVERIFY2(operations.audit(QStringLiteral("resolve-resend"), QStringLiteral("k"), 1, &error), qPrintable(error));
    page.refresh();
    QTRY_COMPARE(table->model()->rowCount(), 3);
    QCOMPARE(model->index(0, AuditModel::What).data(Qt::UserRole).toString(), QStringLiteral("resolve-resend"));
}

void TestUiOverview::auditPageExplainsAnEmptyLog()
{
    AuditPage page;
    auto *placeholder = child<QLabel>(page, QStringLiteral("emptyState"));
    QVERIFY(placeholder);
    QVERIFY(placeholder->text().contains(QStringLiteral("No store is open")));

    StoreSession session(storeUrl());
    page.setSession(&session);
    page.refresh();
    QTRY_VERIFY(placeholder->text().contains(QStringLiteral("No operator actions yet")));
    QCOMPARE(page.findChild<QStackedWidget *>()->currentWidget(), placeholder);
}

// A redrive's outcome in words that fit its column: what happened first, no "0 delivered".
void TestUiOverview::auditModelSaysWhatCameOfARedrive()
{
    const auto redrive = [](qint64 id, qint64 delivered, qint64 diedAgain) {
        AuditEntry entry = auditEntry(id, QStringLiteral("redrive"), 4);
        entry.outcome = AuditEntry::Outcome{delivered, diedAgain};
        return entry;
    };
    AuditModel model;
    model.setEntries({redrive(4, 0, 4), redrive(3, 4, 0), redrive(2, 1, 1), redrive(1, 0, 0),
                      auditEntry(0, QStringLiteral("discard"), 2)});
    const auto outcome = [&model](int row) { return model.index(row, AuditModel::Outcome).data().toString(); };
    QCOMPARE(outcome(0), QStringLiteral("4 died again"));
    QCOMPARE(outcome(1), QStringLiteral("4 delivered"));
    QCOMPARE(outcome(2), QStringLiteral("1 delivered, 1 died again, 2 not settled yet"));
    QCOMPARE(outcome(3), QStringLiteral("4 not settled yet"));
    QCOMPARE(outcome(4), QString()); // not a redrive
}

// --- Overview -----------------------------------------------------------------------

void TestUiOverview::overviewShowsEmptyStateWithoutStore()
{
    EngineController engine;
    OverviewPage page(&engine);
    page.refresh(); // nothing to ask, nothing to crash
    auto *stack = page.findChild<QStackedWidget *>();
    QVERIFY(stack);
    QCOMPARE(stack->currentWidget()->objectName(), QStringLiteral("emptyState"));
    QVERIFY(child<AlertBanner>(page, QStringLiteral("alertBanner"))->isHidden());

    StoreSession session(storeUrl());
    page.setSession(&session);
    QVERIFY(stack->currentWidget()->objectName() != QStringLiteral("emptyState"));
    page.setSession(nullptr);
    QCOMPARE(stack->currentWidget()->objectName(), QStringLiteral("emptyState"));
}

void TestUiOverview::overviewTilesShowStoreNumbers()
{
    QString error;
    // A message that ends as a dead letter.
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("dead")))});
    auto leased = m_store->queue().lease(1, LongLeaseMs, Worker, &error);
    QCOMPARE(leased.size(), 1);
    QVERIFY2(m_store->queue().settle({Settlement{Settlement::Kind::DeadLetter, leased.constFirst().id,
                                                 leased.constFirst().delivery, 0,
                                                 DeadLetterInfo{QStringLiteral("rejected"), QStringLiteral("400"), 1, 0, 0, {}, {}}}},
                                     &error),
             qPrintable(error));
    // One in flight, three ready, one delayed.
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("flying")))});
    QCOMPARE(m_store->queue().lease(1, LongLeaseMs, Worker, &error).size(), 1);
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r1"))),
             outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r2"))),
             outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r3"))),
             outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("later")), 60'000)});
    // Ledger: one applied two hours and a bit after its scheduled time, one in doubt,
    // one retrying; the applied one delivered once more and suppressed.
    const Reminder applied = makeReminder(QStringLiteral("u"), QStringLiteral("applied"),
                                          QDateTime::currentDateTimeUtc().addSecs(-(2 * 3600 + 60)));
    claimAndRecord(applied, LedgerState::Applied);
    claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("doubt")), LedgerState::InDoubt, QStringLiteral("in-doubt"));
    claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("retrying")), LedgerState::Retrying,
                   QStringLiteral("http-5xx"));
    const auto duplicate = m_store->ledger().claim({ClaimRequest{applied, QStringLiteral("m-copy"), 1, nowMs() + LongLeaseMs}},
                                                   Worker, InDoubtPolicy::Resend, &error);
    QCOMPARE(duplicate.size(), 1);
    QCOMPARE(duplicate.constFirst().outcome, ClaimResult::Outcome::Duplicate);
    // One expired before it could be sent: told beside the applied ones, as no failure.
    const Reminder expired = makeReminder(QStringLiteral("u"), QStringLiteral("expired"));
    QCOMPARE(m_store->ledger()
                 .claim({ClaimRequest{expired, QStringLiteral("m-expired"), 1, nowMs() + LongLeaseMs}}, Worker,
                        InDoubtPolicy::Resend, &error)
                 .size(),
             1);
    QVERIFY2(m_store->ledger().record({LedgerUpdate{expired.sendKey, QStringLiteral("m-expired"), 1,
                                                    LedgerState::Expired, false, 0, 0, QStringLiteral("expired"),
                                                    QStringLiteral("expired at T; 1 h late"), {}}},
                                      {}, &error),
             qPrintable(error));

    EngineController engine;
    StoreSession session(storeUrl());
    OverviewPage page(&engine);
    page.setSession(&session);
    page.refresh();
    const auto tile = [&page](const char *name) { return page.findChild<Tile *>(QLatin1String(name)); };
    QTRY_COMPARE(tile("readyTile")->value(), QStringLiteral("3"));
    QCOMPARE(tile("appliedTile")->subCaption(), QStringLiteral("1 applied in all, 1 expired unsent"));
    QCOMPARE(tile("inFlightTile")->value(), QStringLiteral("1"));
    QCOMPARE(tile("delayedTile")->value(), QStringLiteral("1"));
    QCOMPARE(tile("deadLettersTile")->value(), QStringLiteral("1"));
    QCOMPARE(tile("deadLettersTile")->severity(), Severity::Warning);
    QCOMPARE(tile("inDoubtTile")->value(), QStringLiteral("1"));
    QCOMPARE(tile("appliedTile")->value(), QStringLiteral("1"));
    QCOMPARE(tile("duplicatesTile")->value(), QStringLiteral("1"));
    // Two of three sends in the last five minutes failed.
    QCOMPARE(tile("errorRateTile")->value(), QStringLiteral("67 %"));
    QCOMPARE(tile("errorRateTile")->severity(), Severity::Alert);
    QCOMPARE(tile("latenessTile")->value(), QStringLiteral("2 h late / 2 h late"));
    // The ready messages were enqueued moments ago.
    QVERIFY2(tile("oldestReadyTile")->value().endsWith(QStringLiteral(" ms"))
                 || tile("oldestReadyTile")->value().endsWith(QStringLiteral(" s")),
             qPrintable(tile("oldestReadyTile")->value()));
    QCOMPARE(tile("oldestReadyTile")->severity(), Severity::Normal);
}

void TestUiOverview::bannerAppearsWhenOldestReadyMessageIsTooOld()
{
    setThreshold(AlertRule::OldestReady, 1000);
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("waiting")))});

    EngineController engine;
    StoreSession session(storeUrl());
    OverviewPage page(&engine);
    page.setSession(&session);
    auto *banner = child<AlertBanner>(page, QStringLiteral("alertBanner"));
    QVERIFY(banner);
    // The message turns too old a second after it was enqueued; the page notices on a refresh.
    QTRY_VERIFY_WITH_TIMEOUT((page.refresh(), !banner->isHidden()), 10000);
    QVERIFY2(banner->text().contains(QStringLiteral("oldest ready message has waited")), qPrintable(banner->text()));
    QCOMPARE(banner->severity(), Severity::Alert);
    QCOMPARE(page.findChild<Tile *>(QStringLiteral("oldestReadyTile"))->severity(), Severity::Alert);
}

void TestUiOverview::bannerStaysHiddenWhenAllIsWell()
{
    setThreshold(AlertRule::OldestReady, 3600 * 1000);
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("waiting")))});
    claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("done")), LedgerState::Applied);

    EngineController engine;
    StoreSession session(storeUrl());
    OverviewPage page(&engine);
    page.setSession(&session);
    page.refresh();
    QTRY_COMPARE(page.findChild<Tile *>(QStringLiteral("readyTile"))->value(), QStringLiteral("1"));
    auto *banner = child<AlertBanner>(page, QStringLiteral("alertBanner"));
    QVERIFY2(banner->isHidden(), qPrintable(banner->text()));
    QCOMPARE(page.findChild<Tile *>(QStringLiteral("oldestReadyTile"))->severity(), Severity::Normal);
}

void TestUiOverview::bannerWarnsOfFailingPartnerAndEventsInDoubt()
{
    // Set as an operator does, in the Settings dialog, whose words must say what the alert
    // counts: failed sends of any events (here two events), not one event's.
    {
        StoreSession session(storeUrl());
        SettingsDialog dialog(&session, AlertThresholds{});
        auto *sends = child<QSpinBox>(dialog, QStringLiteral("partnerFailingSends"));
        const auto *form = qobject_cast<QFormLayout *>(child<QGroupBox>(dialog, QStringLiteral("storeAlerts"))->layout());
        QVERIFY(form);
        const auto *label = qobject_cast<QLabel *>(form->labelForField(sends));
        QVERIFY(label);
        QVERIFY2(label->text().contains(QLatin1String("partner failed")) && label->text().contains(QLatin1String("5 minutes"))
                     && !label->text().contains(QLatin1String("one event")),
                 qPrintable(label->text()));
        sends->setValue(2);
        dialog.accept();
        QString error;
        QTRY_COMPARE(readAlertThresholds(m_store->database(), &error)
                         .value_or(AlertThresholds{})
                         .value(AlertRule::PartnerFailingSends),
                     qint64(2));
    }
    // Any event in doubt is worth the banner here (the default waits ten minutes).
    setThreshold(AlertRule::InDoubt, 0);
    claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("f1")), LedgerState::Retrying, QStringLiteral("http-5xx"));
    claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("f2")), LedgerState::Retrying, QStringLiteral("http-5xx"));
    claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("doubt")), LedgerState::InDoubt, QStringLiteral("in-doubt"));

    EngineController engine;
    StoreSession session(storeUrl());
    OverviewPage page(&engine);
    page.setSession(&session);
    page.refresh();
    auto *banner = child<AlertBanner>(page, QStringLiteral("alertBanner"));
    QTRY_VERIFY(!banner->isHidden());
    QVERIFY2(banner->text().contains(QStringLiteral("partner keeps failing: 3 failed sends")), qPrintable(banner->text()));
    QVERIFY2(banner->text().contains(QStringLiteral("1 event in doubt needs an operator")), qPrintable(banner->text()));
    // The alert comes before the warning.
    QVERIFY(banner->text().indexOf(QStringLiteral("partner")) < banner->text().indexOf(QStringLiteral("in doubt")));
    QCOMPARE(banner->severity(), Severity::Alert);

    // Once something is applied, the partner is no longer "failing everything".
    claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("ok")), LedgerState::Applied);
    page.refresh();
    QTRY_VERIFY2(!banner->text().contains(QStringLiteral("keeps failing")), qPrintable(banner->text()));
    QVERIFY(!banner->isHidden());
    QCOMPARE(banner->severity(), Severity::Warning);
}

void TestUiOverview::bannerShowsOpenCircuitBreaker()
{
    PartnerFaults failing;
    failing.failRate = 1.0;
    PartnerSimulator partner(failing);
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QList<OutgoingMessage> messages;
    for (int i = 0; i < 8; ++i)
        messages << outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("b%1").arg(i)));
    enqueue(messages);

    EngineController engine;
    OverviewPage page(&engine);
    auto *banner = child<AlertBanner>(page, QStringLiteral("alertBanner"));
    engine.start(engineConfig(partner));
    QTRY_COMPARE_WITH_TIMEOUT(engine.state(), EngineController::State::BreakerOpen, EngineTimeoutMs);
    QVERIFY(!banner->isHidden());
    QVERIFY2(banner->text().contains(QStringLiteral("circuit breaker is open")), qPrintable(banner->text()));
    engine.stop();
    QTRY_COMPARE_WITH_TIMEOUT(engine.state(), EngineController::State::Stopped, EngineTimeoutMs);
    QVERIFY(banner->isHidden());
}

// Counts per whole bucket, never a rate guessed from the seconds of a bucket still
// running; the queue's depth from the store itself when no worker samples it; a Delayed
// tile whose caption counts the same messages, and a "next in 2 s" that does not outlive
// its moment.
void TestUiOverview::chartsAndTilesTellTheTruth()
{
    QString error;
    constexpr qint64 BucketMs = 15 * 1000; // the 15-minute window's buckets
    // A retry backing off for three seconds, and a reminder due in a minute.
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("retry")))});
    const auto leased = m_store->queue().lease(1, LongLeaseMs, Worker, &error);
    QCOMPARE(leased.size(), 1);
    QVERIFY2(m_store->queue().settle({Settlement{Settlement::Kind::Retry, leased.constFirst().id,
                                                 leased.constFirst().delivery, 3000, {}}},
                                     &error),
             qPrintable(error));
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("later")), 60'000)});
    // Three ready, and no worker to sample the queue.
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r1"))),
             outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r2"))),
             outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("r3")))});
    // Three sends applied in one whole bucket a minute ago, two in the bucket running now.
    const qint64 pastBucket = (nowMs() / BucketMs - 4) * BucketMs;
    for (int i = 0; i < 3; ++i)
        claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("past%1").arg(i)), LedgerState::Applied, {},
                       pastBucket + 1000 + i * 3000);
    for (int i = 0; i < 2; ++i)
        claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("now%1").arg(i)), LedgerState::Applied);

    EngineController engine;
    StoreSession session(storeUrl());
    OverviewPage page(&engine);
    page.resize(1280, 820);
    page.setSession(&session);
    page.refresh();
    const auto tile = [&page](const char *name) { return page.findChild<Tile *>(QLatin1String(name)); };
    QTRY_COMPARE(tile("readyTile")->value(), QStringLiteral("3"));
    const qint64 shownAt = nowMs();

    auto *throughput = child<MetricChart>(page, QStringLiteral("throughputChart"));
    QCOMPARE(throughput->title(), QStringLiteral("Applied sends per 15 s"));
    const QList<QPointF> points = throughput->points();
    QVERIFY(!points.isEmpty());
    double inPastBucket = -1;
    for (const QPointF &point : points) {
        // Every point is a bucket that had ended when the page read the store.
        QVERIFY2(qint64(point.x()) + BucketMs / 2 <= shownAt,
                 qPrintable(QStringLiteral("a point %1 ms before the end of its bucket").arg(qint64(point.x()) + BucketMs / 2 - shownAt)));
        if (qint64(point.x()) / BucketMs == pastBucket / BucketMs)
            inPastBucket = point.y();
    }
    QCOMPARE(inPastBucket, 3.0);

    // The queue's depth, read by the console from the store while no worker samples it.
    auto *depth = child<MetricChart>(page, QStringLiteral("depthChart"));
    const QList<QPointF> depthPoints = depth->points();
    QVERIFY2(std::any_of(depthPoints.cbegin(), depthPoints.cend(), [](const QPointF &p) { return p.y() == 3.0; }),
             qPrintable(QStringLiteral("%1 points").arg(depthPoints.size())));

    // The Delayed tile counts two messages; its caption counts the same two.
    QCOMPARE(tile("delayedTile")->value(), QStringLiteral("2"));
    const QString caption = tile("delayedTile")->subCaption();
    QVERIFY2(caption.startsWith(QStringLiteral("1 retrying, 1 later · next in ")), qPrintable(caption));
    // Without another reading, the clock alone ends the "next in".
    QTRY_VERIFY2_WITH_TIMEOUT(tile("delayedTile")->subCaption().endsWith(QStringLiteral(" · next due now")),
                              qPrintable(tile("delayedTile")->subCaption()), 6000);
}

// When the partner alert shows, and what it says, from the workers' heartbeats alone.
void TestUiOverview::healthAlertsFollowTheWorkers_data()
{
    QTest::addColumn<QString>("breaker");
    QTest::addColumn<int>("inARow");
    QTest::addColumn<qint64>("failingForMs");
    QTest::addColumn<qint64>("heartbeatAgeMs");
    QTest::addColumn<QString>("state");
    QTest::addColumn<int>("healthyWorkers");
    QTest::addColumn<QString>("expected"); // the first alert's severity and the start of its text; empty: none

    constexpr qint64 Min = 60 * 1000;
    QTest::newRow("all well") << "closed" << 0 << qint64(0) << qint64(1000) << "running" << 0 << QString();
    QTest::newRow("two failures in a row: a blip") << "closed" << 2 << qint64(5000) << qint64(1000) << "running" << 0
                                                    << QString();
    QTest::newRow("breaker open for seconds: warning")
        << "open" << 5 << qint64(10'000) << qint64(1000) << "running" << 0
        << "warning: Partner failing for 10 s (5 failed sends in a row, last http-5xx): the circuit breaker is open, "
           "the worker is holding back and retries by itself.";
    QTest::newRow("failing in a row without a breaker: warning")
        << "closed" << 3 << qint64(20'000) << qint64(1000) << "running" << 0
        << "warning: Partner failing for 20 s (3 failed sends in a row, last http-5xx): the worker keeps retrying by "
           "itself.";
    QTest::newRow("a minute: outage") << "half-open" << 9 << qint64(3 * Min) << qint64(1000) << "running" << 0
                                      << "alert: Partner down for 3 min (9 failed sends in a row, last http-5xx): the "
                                         "worker is holding back and retries by itself; do not redrive yet.";
    QTest::newRow("paused but failing") << "open" << 9 << qint64(2 * Min) << qint64(1000) << "paused" << 0
                                        << "alert: Partner down for 2 min";
    QTest::newRow("one of two workers") << "open" << 6 << qint64(2 * Min) << qint64(1000) << "running" << 1
                                        << "alert: Partner failing for 1 of 2 workers for 2 min";
    QTest::newRow("gone: it tells nothing now") << "open" << 9 << qint64(3 * Min) << qint64(20'000) << "running"
                                                << 0 << QString();
    QTest::newRow("stopped: it tells nothing now") << "open" << 9 << qint64(3 * Min) << qint64(1000) << "stopped"
                                                   << 0 << QString();
}

void TestUiOverview::healthAlertsFollowTheWorkers()
{
    QFETCH(QString, breaker);
    QFETCH(int, inARow);
    QFETCH(qint64, failingForMs);
    QFETCH(qint64, heartbeatAgeMs);
    QFETCH(QString, state);
    QFETCH(int, healthyWorkers);
    QFETCH(QString, expected);

    const qint64 now = 1'800'000'000'000;
    QList<WorkerRecord> workers;
    WorkerRecord worker;
    worker.id = QStringLiteral("w-1");
    worker.state = state;
    worker.heartbeatAtMs = now - heartbeatAgeMs;
    worker.breaker = breaker;
    worker.consecutiveFailures = inARow;
    worker.failingSinceMs = inARow ? now - failingForMs : 0;
    worker.lastFailureAtMs = inARow ? now - 500 : 0;
    worker.lastErrorClass = inARow ? QStringLiteral("http-5xx") : QString();
    workers << worker;
    for (int i = 0; i < healthyWorkers; ++i) {
        WorkerRecord healthy;
        healthy.id = QStringLiteral("w-ok-%1").arg(i);
        healthy.state = QStringLiteral("running");
        healthy.heartbeatAtMs = now - 1000;
        workers << healthy;
    }
    const AlertThresholds thresholds; // partner-down after a minute
    const QList<HealthAlert> alerts = healthAlerts(std::nullopt, workers, now, thresholds);
    if (expected.isEmpty()) {
        QVERIFY2(alerts.isEmpty(), qPrintable(alerts.value(0).text));
        return;
    }
    QVERIFY(!alerts.isEmpty());
    const QString shown = (alerts.constFirst().severity == Severity::Alert ? QStringLiteral("alert: ")
                                                                            : QStringLiteral("warning: "))
                          + alerts.constFirst().text;
    QVERIFY2(shown.startsWith(expected), qPrintable(shown));
}

// A revoked credential refuses every reminder alike: no blip to wait out (the alert comes
// with the breaker, not after partnerDownAfterMs), and the banner says what answered and
// what to do. Before, the 401s were bad reminders: no banner for minutes, then one that
// named no status and no next step.
void TestUiOverview::healthAlertsSayThePartnerRefusesEveryone()
{
    const qint64 now = 1'800'000'000'000;
    WorkerRecord worker;
    worker.id = QStringLiteral("w-1");
    worker.state = QStringLiteral("running");
    worker.heartbeatAtMs = now - 1000;
    worker.breaker = QStringLiteral("open");
    worker.consecutiveFailures = 5;
    worker.failingSinceMs = now - 4000;
    worker.lastFailureAtMs = now - 500;
    worker.lastErrorClass = QStringLiteral("credentials-refused");
    worker.lastHttpStatus = 401;
    const AlertThresholds thresholds; // partner-down after a minute

    QList<HealthAlert> alerts = healthAlerts(std::nullopt, {worker}, now, thresholds);
    QVERIFY(!alerts.isEmpty());
    QCOMPARE(alerts.constFirst().severity, Severity::Alert);
    QCOMPARE(alerts.constFirst().text,
             QStringLiteral("The partner refuses our credentials (HTTP 401) for 4 s: reminders wait and none is "
                            "dead-lettered. Fix the partner token; they resume by themselves."));

    worker.lastErrorClass = QStringLiteral("partner-refusing");
    worker.lastHttpStatus = 400;
    alerts = healthAlerts(std::nullopt, {worker}, now, thresholds);
    QVERIFY(!alerts.isEmpty());
    QCOMPARE(alerts.constFirst().severity, Severity::Alert);
    QVERIFY2(alerts.constFirst().text.startsWith(QStringLiteral("The partner refuses every reminder (HTTP 400) for 4 s: ")),
             qPrintable(alerts.constFirst().text));
}

// Three seconds into a total outage, after a good five minutes, the rate read a few
// percent: the tile says the last sends all failed, and since when. A store whose
// scheduled_at is the appointment read "-35 h": now "35 h early", saying what it is.
void TestUiOverview::overviewSaysWhatThePartnerAnsweredAndWhenSendsWereEarly()
{
    const qint64 spellStart = nowMs() - 3000;
    for (int i = 0; i < 40; ++i)
        claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("ok%1").arg(i),
                                    QDateTime::currentDateTimeUtc().addSecs(35 * 3600)),
                       LedgerState::Applied, QString(), spellStart - 60'000 + i);
    for (int i = 0; i < 4; ++i)
        claimAndRecord(makeReminder(QStringLiteral("u"), QStringLiteral("down%1").arg(i)), LedgerState::Retrying,
                       QStringLiteral("http-5xx"), spellStart + i);

    EngineController engine;
    StoreSession session(storeUrl());
    OverviewPage page(&engine);
    page.setSession(&session);
    page.refresh();
    const auto tile = [&page](const char *name) { return page.findChild<Tile *>(QLatin1String(name)); };
    QTRY_COMPARE(tile("errorRateTile")->value(), QStringLiteral("last 4 failed"));
    QCOMPARE(tile("errorRateTile")->severity(), Severity::Alert);
    QCOMPARE(tile("errorRateTile")->subCaption(),
             QStringLiteral("in a row since %1; 4 of 44 sends failed").arg(formatDisplayTime(spellStart)));
    QVERIFY2(tile("latenessTile")->value().startsWith(QStringLiteral("35 h")) && tile("latenessTile")->value().endsWith(QStringLiteral(" early")),
             qPrintable(tile("latenessTile")->value()));
    QVERIFY(tile("latenessTile")->subCaption().contains(QStringLiteral("before scheduled_at")));
}

// --- Worker -------------------------------------------------------------------------

void TestUiOverview::workerPageRejectsUrlThatIsNotHttp()
{
    EngineController engine;
    StoreSession session(storeUrl());
    WorkerPage page(&engine);
    page.setSession(&session);
    auto *url = child<QLineEdit>(page, QStringLiteral("partnerUrl"));
    auto *urlError = child<QLabel>(page, QStringLiteral("urlError"));
    auto *start = child<QPushButton>(page, QStringLiteral("startButton"));
    QVERIFY(url && urlError && start);

    url->setText(QStringLiteral("ftp://partner.example/reminders"));
    QVERIFY(!urlError->isHidden());
    QVERIFY(urlError->text().contains(QStringLiteral("http://")));
    QVERIFY(!start->isEnabled());
    url->setText(QStringLiteral("http:///reminders"));
    QVERIFY(!urlError->isHidden());
    QVERIFY(!start->isEnabled());
    url->clear();
    QVERIFY(!urlError->isHidden());
    QVERIFY(!start->isEnabled());
    url->setText(QStringLiteral("https://partner.example/reminders"));
    QVERIFY(urlError->isHidden());
    QVERIFY(start->isEnabled());

    // Without a store there is nothing to work on.
    page.setSession(nullptr);
    QVERIFY(!start->isEnabled());
}

void TestUiOverview::workerPageStartDeliversAndStopStops()
{
    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const QString partnerUrl = QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port());
    QList<Reminder> reminders;
    for (int i = 0; i < 5; ++i)
        reminders << makeReminder(QStringLiteral("u"), QStringLiteral("w%1").arg(i));
    QList<OutgoingMessage> messages;
    for (const Reminder &reminder : std::as_const(reminders))
        messages << outgoing(reminder);
    // A duplicate publish: delivered once, suppressed once.
    messages << outgoing(reminders.constFirst());
    enqueue(messages);

    EngineController engine;
    StoreSession session(storeUrl());
    WorkerPage page(&engine);
    page.setSession(&session);
    auto *start = child<QPushButton>(page, QStringLiteral("startButton"));
    auto *pause = child<QPushButton>(page, QStringLiteral("pauseButton"));
    auto *resume = child<QPushButton>(page, QStringLiteral("resumeButton"));
    auto *stop = child<QPushButton>(page, QStringLiteral("stopButton"));
    auto *status = child<QLabel>(page, QStringLiteral("workerStatus"));
    QVERIFY(start && pause && resume && stop && status);
    QCOMPARE(status->text(), QStringLiteral("Stopped"));
    QVERIFY(!stop->isEnabled());

    child<QLineEdit>(page, QStringLiteral("partnerUrl"))->setText(partnerUrl);
    child<QSpinBox>(page, QStringLiteral("concurrency"))->setValue(4);
    QVERIFY(start->isEnabled());
    QTest::mouseClick(start, Qt::LeftButton);

    QTRY_COMPARE_WITH_TIMEOUT(partner.stats().effects, qint64(5), EngineTimeoutMs);
    QTRY_COMPARE(engine.state(), EngineController::State::Running);
    QCOMPARE(status->text(), QStringLiteral("Running"));
    QVERIFY(!start->isEnabled());
    QVERIFY(pause->isEnabled());
    QVERIFY(!resume->isEnabled());
    QVERIFY(stop->isEnabled());
    QTRY_COMPARE(page.findChild<Tile *>(QStringLiteral("appliedTile"))->value(), QStringLiteral("5"));
    QTRY_COMPARE(page.findChild<Tile *>(QStringLiteral("duplicatesTile"))->value(), QStringLiteral("1"));
    QCOMPARE(partner.stats().duplicateEffects, qint64(0));

    // What was on the form is what the next start begins with.
    const Settings settings;
    QCOMPARE(settings.partnerUrl(), partnerUrl);
    QCOMPARE(settings.concurrency(), 4);

    QTest::mouseClick(pause, Qt::LeftButton);
    QTRY_COMPARE(engine.state(), EngineController::State::Paused);
    QVERIFY(resume->isEnabled());
    QVERIFY(!pause->isEnabled());
    QTest::mouseClick(resume, Qt::LeftButton);
    QTRY_COMPARE(engine.state(), EngineController::State::Running);

    QTest::mouseClick(stop, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(engine.state(), EngineController::State::Stopped, EngineTimeoutMs);
    QCOMPARE(status->text(), QStringLiteral("Stopped"));
    QVERIFY(start->isEnabled());
    QVERIFY(!stop->isEnabled());

    // The history names the console's worker.
    const auto attempts = m_store->inspector().attempts(reminders.constLast().sendKey, &error);
    QVERIFY2(attempts && !attempts->isEmpty(), qPrintable(error));
    QVERIFY2(attempts->constLast().workerId.startsWith(QStringLiteral("console@")), qPrintable(attempts->constLast().workerId));
    QVERIFY(attempts->constLast().workerId.endsWith(QLatin1Char(':') + QString::number(QCoreApplication::applicationPid())));
}

void TestUiOverview::workerPageReflectsEngineItDidNotStart()
{
    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    enqueue({outgoing(makeReminder(QStringLiteral("u"), QStringLiteral("elsewhere")))});

    EngineController engine;
    StoreSession session(storeUrl());
    engine.start(engineConfig(partner));
    QTRY_COMPARE_WITH_TIMEOUT(partner.stats().effects, qint64(1), EngineTimeoutMs);
    QTRY_COMPARE(engine.state(), EngineController::State::Running);

    // The page comes after the engine, as in the demo.
    WorkerPage page(&engine);
    page.setSession(&session);
    auto *status = child<QLabel>(page, QStringLiteral("workerStatus"));
    QCOMPARE(status->text(), QStringLiteral("Running"));
    QVERIFY(!child<QPushButton>(page, QStringLiteral("startButton"))->isEnabled());
    QVERIFY(child<QPushButton>(page, QStringLiteral("stopButton"))->isEnabled());
    QVERIFY(!child<QLineEdit>(page, QStringLiteral("partnerUrl"))->isEnabled());
    QVERIFY(child<QLabel>(page, QStringLiteral("workerHint"))->text().contains(QStringLiteral("started by the demo")));
    // The form shows what the running engine was started with, not the saved settings.
    QCOMPARE(child<QLineEdit>(page, QStringLiteral("partnerUrl"))->text(),
             engineConfig(partner).partnerUrl.toDisplayString(QUrl::RemoveUserInfo));
    QTRY_COMPARE(page.findChild<Tile *>(QStringLiteral("appliedTile"))->value(), QStringLiteral("1"));

    engine.stop();
    QTRY_COMPARE_WITH_TIMEOUT(engine.state(), EngineController::State::Stopped, EngineTimeoutMs);
    QCOMPARE(status->text(), QStringLiteral("Stopped"));
    QVERIFY(child<QPushButton>(page, QStringLiteral("startButton"))->isEnabled());
}

QTEST_MAIN(TestUiOverview)
#include "tst_uioverview.moc"
