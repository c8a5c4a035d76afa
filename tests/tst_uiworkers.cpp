// The Worker page's list of every worker on a store, the live updates that refresh the
// console on PostgreSQL, `once workers`, and the rule that a store's password is never
// shown or saved. Workers are registered through the core (as headless `once worker`
// processes do), the console is the real MainWindow, offscreen. Runs on SQLite and, as
// tst_uiworkers_postgres, on PostgreSQL (teststores.h).
#include "dialogs/postgresdialog.h"
#include "display/storeurl.h"
#include "mainwindow.h"
#include "models/workersmodel.h"
#include "pages/overviewpage.h"
#include "pages/workerpage.h"
#include "session/storesession.h"
#include "settings/settings.h"

#include "delivery/engine.h"
#include "sim/partnersimulator.h"
#include "store/store.h"
#include "deliveryharness.h"
#include "teststores.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QFile>
#include <QFont>
#include <QIcon>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QScopeGuard>
#include <QSettings>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QSqlError>
#include <QSqlQuery>
#include <QStatusBar>
#include <QStandardPaths>
#include <QTableView>
#include <QTableWidget>
#include <QTest>

#include <memory>

using namespace once;
using namespace once::ui;

namespace {

constexpr qint64 Second = 1000;

WorkerRecord makeWorker(const QString &id, const QString &host, qint64 pid)
{
    WorkerRecord worker;
    worker.id = id;
    worker.host = host;
    worker.pid = pid;
    worker.version = QStringLiteral("test");
    worker.partner = QStringLiteral("http://partner.example/reminders");
    worker.concurrency = 8;
    return worker;
}

EngineCounters counters(qint64 applied, qint64 duplicates = 0, qint64 retries = 0, int inFlight = 0)
{
    EngineCounters result;
    result.applied = applied;
    result.duplicates = duplicates;
    result.retries = retries;
    result.inFlight = inFlight;
    return result;
}

int rowOfWorker(const WorkersModel *model, const QString &id)
{
    for (int row = 0; row < model->rowCount(); ++row) {
        if (model->index(row, WorkersModel::Id).data(WorkersModel::RawRole).toString() == id)
            return row;
    }
    return -1;
}

QString cell(const WorkersModel *model, const QString &id, int column)
{
    const int row = rowOfWorker(model, id);
    return row < 0 ? QString() : model->index(row, column).data().toString();
}

// A window over one store, opened and showing the Worker page.
struct Console
{
    std::unique_ptr<MainWindow> window;

    bool open(const QString &url)
    {
        window = std::make_unique<MainWindow>();
        window->resize(1280, 820);
        window->show();
        // New stores too, as after the operator's "Create Store".
        window->openStore(url, QString(), StoreReader::IfMissing::Create);
        QSignalSpy opened(window->session(), &StoreSession::opened);
        if (!opened.wait(20000) || !opened.constFirst().at(0).toBool()) {
            qWarning("the console did not open %s: %s", qPrintable(storeDisplayName(url)),
                     opened.isEmpty() ? "no answer" : qPrintable(opened.constFirst().at(1).toString()));
            return false;
        }
        window->showPage(page());
        return true;
    }

    WorkerPage *page() const { return window->page<WorkerPage>(); }
    WorkersModel *model() const { return page()->workersModel(); }
};

// Runs `once ARGUMENTS`, returns its standard output (empty and a warning on failure).
QByteArray runOnce(const QStringList &arguments, int *exitCode = nullptr)
{
    const QString program = qEnvironmentVariable("ONCE_BIN");
    if (program.isEmpty()) {
        qWarning("ONCE_BIN is not set");
        return {};
    }
    QProcess process;
    process.start(program, arguments);
    if (!process.waitForFinished(30000)) {
        qWarning("once %s did not finish", qPrintable(arguments.join(QLatin1Char(' '))));
        process.kill();
        process.waitForFinished();
        return {};
    }
    if (exitCode)
        *exitCode = process.exitCode();
    if (process.exitCode() != 0)
        qWarning("once %s: %s", qPrintable(arguments.value(0)), process.readAllStandardError().constData());
    return process.readAllStandardOutput();
}

} // namespace

class TestUiWorkers : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();

    void storeUrlsLoseTheirPassword_data();
    void storeUrlsLoseTheirPassword();
    void modelKeepsWorkersAcrossReloads();
    void workerPageListsEveryWorkerOnTheStore();
    void workerPagePausesAndResumesAPartner();
    void statusBarSummarisesEveryWorkerOnTheStore();
    void notificationsRefreshAtMostOncePerSecond();
    void passwordIsNeverShownOrSaved();
    void unusableTokenKeepsTheWorkerFromStarting();
    void unreadablePartnerCaKeepsTheWorkerFromStarting();
    void postgresDialogBuildsTheUrl();

private:
    TestStores m_stores;
};

void TestUiWorkers::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName(QStringLiteral("once"));
    QApplication::setApplicationName(QStringLiteral("once-uiworkers-test"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false\nonce.*.info=false"));
    qRegisterMetaType<once::WorkerRecord>();
    qRegisterMetaType<QList<once::WorkerRecord>>();
}

void TestUiWorkers::init()
{
    // Each test starts without remembered stores, window layouts or column widths.
    QSettings().clear();
}

void TestUiWorkers::storeUrlsLoseTheirPassword_data()
{
    QTest::addColumn<QString>("url");
    QTest::addColumn<QString>("saved");
    QTest::addColumn<QString>("shown");
    QTest::newRow("sqlite") << QStringLiteral("sqlite:/tmp/a.sqlite")
                            << QStringLiteral("sqlite:/tmp/a.sqlite")
                            << QStringLiteral("sqlite:/tmp/a.sqlite");
    QTest::newRow("postgres with password")
        << QStringLiteral("postgres://once:s3cret@db.example:5433/once?sslmode=require")
        << QStringLiteral("postgres://once@db.example:5433/once?sslmode=require")
        << QStringLiteral("postgres://once@db.example:5433/once");
    QTest::newRow("postgres without password") << QStringLiteral("postgres://once@db.example/once")
                                               << QStringLiteral("postgres://once@db.example/once")
                                               << QStringLiteral("postgres://once@db.example:5432/once");
    QTest::newRow("encoded password")
        << QStringLiteral("postgresql://u:p%40ss%2Fw@h/d") << QStringLiteral("postgresql://u@h/d")
        << QStringLiteral("postgres://u@h:5432/d");
    QTest::newRow("several hosts")
        << QStringLiteral("postgres://once:s3cret@h1:5432,h2:5433/once?target_session_attrs=read-write")
        << QStringLiteral("postgres://once@h1:5432,h2:5433/once?target_session_attrs=read-write")
        << QStringLiteral("postgres://once@h1:5432,h2:5433/once");
    QTest::newRow("several hosts without password") << QStringLiteral("postgres://once@h1,h2/once")
                                                    << QStringLiteral("postgres://once@h1,h2/once")
                                                    << QStringLiteral("postgres://once@h1:5432,h2:5432/once");
    QTest::newRow("unparseable") << QStringLiteral("postgres://u:p@ss w@h/d")
                                 << QStringLiteral("postgres://u@h/d") << QStringLiteral("postgres://u@h/d");
}

void TestUiWorkers::storeUrlsLoseTheirPassword()
{
    QFETCH(QString, url);
    QFETCH(QString, saved);
    QFETCH(QString, shown);
    QCOMPARE(storeUrlWithoutPassword(url), saved);
    QCOMPARE(storeDisplayName(url), shown);
    // A saved URL gets its remembered password back, to be opened.
    if (const QString password = storePassword(url); !password.isEmpty())
        QCOMPARE(storeUrlWithPassword(saved, password), url);
    Settings settings;
    settings.addRecentStore(url);
    QCOMPARE(settings.recentStores().value(0), saved);
}

void TestUiWorkers::modelKeepsWorkersAcrossReloads()
{
    WorkersModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    const qint64 now = 1'800'000'000'000;
    WorkerRecord alive = makeWorker(QStringLiteral("w-alive"), QStringLiteral("alpha"), 101);
    alive.state = QStringLiteral("running");
    alive.startedAtMs = now - 60 * Second;
    alive.heartbeatAtMs = now - 3 * Second;
    alive.applied = 1234;
    WorkerRecord stale = makeWorker(QStringLiteral("w-stale"), QStringLiteral("beta"), 202);
    stale.state = QStringLiteral("running");
    stale.startedAtMs = now - 600 * Second;
    stale.heartbeatAtMs = now - 120 * Second;
    WorkerRecord done = makeWorker(QStringLiteral("w-done"), QStringLiteral("gamma"), 303);
    done.state = QStringLiteral("stopped");
    done.heartbeatAtMs = now - 30 * Second;
    done.stoppedAtMs = now - 30 * Second;

    model.setWorkers({alive, stale, done}, now);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(cell(&model, QStringLiteral("w-alive"), WorkersModel::Status), QStringLiteral("running"));
    QCOMPARE(cell(&model, QStringLiteral("w-stale"), WorkersModel::Status), QStringLiteral("gone"));
    QCOMPARE(cell(&model, QStringLiteral("w-done"), WorkersModel::Status), QStringLiteral("stopped"));
    QCOMPARE(cell(&model, QStringLiteral("w-alive"), WorkersModel::Heartbeat), QStringLiteral("3 s ago"));
    QCOMPARE(cell(&model, QStringLiteral("w-stale"), WorkersModel::Heartbeat), QStringLiteral("2 min ago"));
    QCOMPARE(cell(&model, QStringLiteral("w-alive"), WorkersModel::Applied), QStringLiteral("1,234"));
    const QModelIndex goneStatus =
        model.index(rowOfWorker(&model, QStringLiteral("w-stale")), WorkersModel::Status);
    QVERIFY(!goneStatus.data(Qt::DecorationRole).value<QIcon>().isNull());
    QVERIFY(goneStatus.data(Qt::ToolTipRole).toString().contains(QLatin1String("No heartbeat for 2 min")));
    // A gone worker's other cells are greyed; a running one's are not.
    QVERIFY(model.index(rowOfWorker(&model, QStringLiteral("w-stale")), WorkersModel::Host)
                .data(Qt::ForegroundRole)
                .isValid());
    QVERIFY(!model.index(rowOfWorker(&model, QStringLiteral("w-alive")), WorkersModel::Host)
                 .data(Qt::ForegroundRole)
                 .isValid());
    // Live workers sort before history.
    QVERIFY(model.index(0, WorkersModel::Status).data(WorkersModel::SortRole).toInt() <
            model.index(2, WorkersModel::Status).data(WorkersModel::SortRole).toInt());

    // A reload: one worker left the list, one came, one moved on. Rows that stay keep
    // their place; nothing is reset.
    QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
    QSignalSpy changed(&model, &QAbstractItemModel::dataChanged);
    alive.applied = 1300;
    alive.heartbeatAtMs = now + 1 * Second;
    WorkerRecord fresh = makeWorker(QStringLiteral("w-fresh"), QStringLiteral("delta"), 404);
    fresh.state = QStringLiteral("paused");
    fresh.heartbeatAtMs = now + 2 * Second;
    model.setWorkers({fresh, alive, done}, now + 2 * Second);
    QCOMPARE(reset.count(), 0);
    QVERIFY(changed.count() >= 1);
    QCOMPARE(model.rowCount(), 3);
    QCOMPARE(model.row(0).id, QStringLiteral("w-fresh"));
    QCOMPARE(rowOfWorker(&model, QStringLiteral("w-stale")), -1);
    QCOMPARE(cell(&model, QStringLiteral("w-alive"), WorkersModel::Applied), QStringLiteral("1,300"));
    QCOMPARE(cell(&model, QStringLiteral("w-alive"), WorkersModel::Heartbeat), QStringLiteral("1 s ago"));
    QCOMPARE(cell(&model, QStringLiteral("w-fresh"), WorkersModel::Status), QStringLiteral("paused"));
    QCOMPARE(cell(&model, QStringLiteral("w-fresh"), WorkersModel::Heartbeat), QStringLiteral("just now"));

    // The console's own worker stands out.
    model.setOwnWorkerId(QStringLiteral("w-alive"));
    QVERIFY(model.index(rowOfWorker(&model, QStringLiteral("w-alive")), WorkersModel::Id)
                .data(Qt::FontRole)
                .value<QFont>()
                .bold());
    QVERIFY(!model.index(rowOfWorker(&model, QStringLiteral("w-fresh")), WorkersModel::Id)
                 .data(Qt::FontRole)
                 .isValid());

    model.setWorkers({}, now + 4 * Second);
    QCOMPARE(model.rowCount(), 0);
}

// The Worker page lists the partners its store's workers send to, and pauses and resumes
// one for every worker, through the session's reader (audited, read back by the workers).
void TestUiWorkers::workerPagePausesAndResumesAPartner()
{
    const QString url = m_stores.newUrl();
    const QString partner = QStringLiteral("http://partner.example/reminders");
    QString error;
    auto store = Store::open(url, &error);
    QVERIFY2(store, qPrintable(error));
    QVERIFY2(store->workers().announce(makeWorker(QStringLiteral("w-1"), QStringLiteral("alpha"), 101), &error),
             qPrintable(error));

    Console console;
    QVERIFY(console.open(url));
    QTableWidget *partners = console.page()->partnersView();
    auto *pause = console.page()->findChild<QPushButton *>(QStringLiteral("pausePartner"));
    auto *resume = console.page()->findChild<QPushButton *>(QStringLiteral("resumePartner"));
    QVERIFY(partners && pause && resume);
    QTRY_COMPARE_WITH_TIMEOUT(partners->rowCount(), 1, 10000);
    QCOMPARE(partners->item(0, 0)->text(), partner);
    QVERIFY(!pause->isEnabled()); // nothing chosen yet
    partners->selectRow(0);
    QVERIFY(pause->isEnabled());
    QVERIFY(!resume->isEnabled());

    console.page()->setPartnerPaused(partner, true, QStringLiteral("provider maintenance"));
    QTRY_VERIFY_WITH_TIMEOUT(partners->item(0, 2) && partners->item(0, 2)->text().startsWith(QLatin1String("paused (by ")),
                             10000);
    QVERIFY2(partners->item(0, 2)->text().endsWith(QLatin1String(": provider maintenance)")),
             qPrintable(partners->item(0, 2)->text()));
    const auto paused = store->inspector().pausedPartners(&error);
    QVERIFY2(paused, qPrintable(error));
    QCOMPARE(paused->size(), 1);
    QCOMPARE(paused->constFirst().reason, QStringLiteral("provider maintenance"));
    QTRY_VERIFY(resume->isEnabled());
    QVERIFY(!pause->isEnabled());

    QTest::mouseClick(resume, Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(partners->item(0, 2) && !partners->item(0, 2)->text().startsWith(QLatin1String("paused")),
                             10000);
    const auto resumed = store->inspector().pausedPartners(&error);
    QVERIFY2(resumed, qPrintable(error));
    QVERIFY(resumed->isEmpty());
    QSqlQuery audit(store->database().connection());
    QVERIFY2(audit.exec(QStringLiteral("SELECT action FROM audit_log WHERE action LIKE 'partner-%' ORDER BY id")),
             qPrintable(audit.lastError().text()));
    QStringList actions;
    while (audit.next())
        actions.append(audit.value(0).toString());
    QCOMPARE(actions, (QStringList{QStringLiteral("partner-pause"), QStringLiteral("partner-resume")}));
}

void TestUiWorkers::workerPageListsEveryWorkerOnTheStore()
{
    const QString url = m_stores.newUrl();
    QString error;
    auto store = Store::open(url, &error);
    QVERIFY2(store, qPrintable(error));
    // Two headless workers, as `once worker` registers itself.
    QVERIFY2(store->workers().announce(makeWorker(QStringLiteral("w-alive"), QStringLiteral("alpha"), 101),
                                       &error),
             qPrintable(error));
    QVERIFY2(
        store->workers().announce(makeWorker(QStringLiteral("w-stale"), QStringLiteral("beta"), 202), &error),
        qPrintable(error));
    QVERIFY2(store->workers().heartbeat(QStringLiteral("w-alive"), QStringLiteral("running"),
                                        counters(5, 1, 2), &error),
             qPrintable(error));
    QVERIFY2(
        store->workers().heartbeat(QStringLiteral("w-stale"), QStringLiteral("running"), counters(7), &error),
        qPrintable(error));
    // The second one's process died a minute ago: its heartbeat stopped then.
    {
        QSqlQuery query(store->database().connection());
        QVERIFY(query.prepare(QStringLiteral("UPDATE workers SET heartbeat_at = ? WHERE id = ?")));
        query.addBindValue(nowMs() - 60 * Second);
        query.addBindValue(QStringLiteral("w-stale"));
        QVERIFY2(query.exec(), qPrintable(query.lastError().text()));
    }

    Console console;
    QVERIFY(console.open(url));
    WorkersModel *model = console.model();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    auto *view = console.page()->findChild<QTableView *>(QStringLiteral("workers"));
    QVERIFY(view);
    QTRY_COMPARE_WITH_TIMEOUT(model->rowCount(), 2, 10000);
    QTRY_VERIFY(view->isVisible());
    QCOMPARE(cell(model, QStringLiteral("w-alive"), WorkersModel::Status), QStringLiteral("running"));
    QCOMPARE(cell(model, QStringLiteral("w-stale"), WorkersModel::Status), QStringLiteral("gone"));
    QCOMPARE(cell(model, QStringLiteral("w-alive"), WorkersModel::Applied), QStringLiteral("5"));
    QCOMPARE(cell(model, QStringLiteral("w-alive"), WorkersModel::Duplicates), QStringLiteral("1"));
    QCOMPARE(cell(model, QStringLiteral("w-alive"), WorkersModel::Retries), QStringLiteral("2"));
    QCOMPARE(cell(model, QStringLiteral("w-stale"), WorkersModel::Applied), QStringLiteral("7"));
    QCOMPARE(cell(model, QStringLiteral("w-alive"), WorkersModel::Host), QStringLiteral("alpha"));
    QCOMPARE(cell(model, QStringLiteral("w-stale"), WorkersModel::Pid), QStringLiteral("202"));
    QCOMPARE(cell(model, QStringLiteral("w-stale"), WorkersModel::Heartbeat), QStringLiteral("1 min ago"));
    // The view (sorted by status) shows the running worker first.
    QCOMPARE(view->model()->index(0, WorkersModel::Id).data().toString(), QStringLiteral("w-alive"));
    const auto *summary = console.page()->findChild<QLabel *>(QStringLiteral("workersSummary"));
    QVERIFY2(summary->text().contains(QStringLiteral("2 workers: 1 running, 1 gone")), qPrintable(summary->text()));

    // New counters at the next heartbeat reach the table by themselves.
    QVERIFY2(store->workers().heartbeat(QStringLiteral("w-alive"), QStringLiteral("running"),
                                        counters(12, 3, 2, 4), &error),
             qPrintable(error));
    QTRY_COMPARE_WITH_TIMEOUT(cell(model, QStringLiteral("w-alive"), WorkersModel::Applied),
                              QStringLiteral("12"), 10000);
    QCOMPARE(cell(model, QStringLiteral("w-alive"), WorkersModel::Duplicates), QStringLiteral("3"));
    QCOMPARE(cell(model, QStringLiteral("w-alive"), WorkersModel::InFlight), QStringLiteral("4"));
    QVERIFY2(store->workers().heartbeat(QStringLiteral("w-alive"), QStringLiteral("paused"),
                                        counters(12, 3, 2), &error),
             qPrintable(error));
    QTRY_COMPARE_WITH_TIMEOUT(cell(model, QStringLiteral("w-alive"), WorkersModel::Status),
                              QStringLiteral("paused"), 10000);

    // The console's own engine registers like any worker, and is shown as its own.
    PartnerSimulator partner;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    EngineConfig config;
    config.storeUrl = url;
    config.partnerUrl = QUrl(QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port()));
    config.workerId = QStringLiteral("console-under-test");
    config.concurrency = 2;
    config.idlePollMs = 50;
    console.window->engine()->start(config);
    QTRY_COMPARE_WITH_TIMEOUT(model->rowCount(), 3, 10000);
    QTRY_COMPARE_WITH_TIMEOUT(cell(model, QStringLiteral("console-under-test"), WorkersModel::Status),
                              QStringLiteral("running"), 10000);
    QVERIFY(model->index(rowOfWorker(model, QStringLiteral("console-under-test")), WorkersModel::Id)
                .data(Qt::FontRole)
                .value<QFont>()
                .bold());
    QCOMPARE(cell(model, QStringLiteral("console-under-test"), WorkersModel::Partner),
             QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port()));
    console.window->engine()->stop();
    QTRY_COMPARE_WITH_TIMEOUT(console.window->engine()->state(), EngineController::State::Stopped, 20000);
    QTRY_COMPARE_WITH_TIMEOUT(cell(model, QStringLiteral("console-under-test"), WorkersModel::Status),
                              QStringLiteral("stopped"), 10000);

    // `once workers` lists the same rows.
    int exitCode = -1;
    const QByteArray json = runOnce(
        {QStringLiteral("workers"), QStringLiteral("--json"), QStringLiteral("--store"), url}, &exitCode);
    QCOMPARE(exitCode, 0);
    QJsonParseError parseError;
    const QJsonDocument document = QJsonDocument::fromJson(json, &parseError);
    QVERIFY2(document.isArray(),
             qPrintable(parseError.errorString() + QLatin1Char(' ') + QString::fromUtf8(json)));
    QHash<QString, QJsonObject> byId;
    for (const auto &value : document.array())
        byId.insert(value.toObject().value(QStringLiteral("id")).toString(), value.toObject());
    QCOMPARE(byId.size(), 3);
    QCOMPARE(byId.value(QStringLiteral("w-alive")).value(QStringLiteral("status")).toString(),
             QStringLiteral("paused"));
    QCOMPARE(byId.value(QStringLiteral("w-alive")).value(QStringLiteral("applied")).toInteger(), 12);
    QCOMPARE(byId.value(QStringLiteral("w-alive")).value(QStringLiteral("duplicates_suppressed")).toInteger(),
             3);
    QCOMPARE(byId.value(QStringLiteral("w-stale")).value(QStringLiteral("status")).toString(),
             QStringLiteral("gone"));
    QCOMPARE(byId.value(QStringLiteral("w-stale")).value(QStringLiteral("applied")).toInteger(), 7);
    // How the partner answered each, at its last heartbeat.
    QCOMPARE(byId.value(QStringLiteral("w-alive")).value(QStringLiteral("breaker")).toString(), QStringLiteral("closed"));
    QCOMPARE(byId.value(QStringLiteral("w-alive")).value(QStringLiteral("consecutive_failures")).toInteger(), 0);
    QVERIFY(byId.value(QStringLiteral("w-alive")).value(QStringLiteral("failing_since")).isNull());
    QCOMPARE(byId.value(QStringLiteral("console-under-test")).value(QStringLiteral("status")).toString(),
             QStringLiteral("stopped"));

    const QString text =
        QString::fromUtf8(runOnce({QStringLiteral("workers"), QStringLiteral("--store"), url}, &exitCode));
    QCOMPARE(exitCode, 0);
    const QStringList lines = text.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    QCOMPARE(lines.size(), 4);
    QVERIFY2(lines.at(0).startsWith(QLatin1String("ID")) && lines.at(0).contains(QLatin1String("STATUS")),
             qPrintable(lines.at(0)));
    const auto lineOf = [&lines](const QString &id) {
        for (const QString &line : lines) {
            if (line.startsWith(id + QLatin1Char(' ')))
                return line.simplified();
        }
        return QString();
    };
    QVERIFY2(lineOf(QStringLiteral("w-stale")).contains(QLatin1String(" beta 202 gone ")), qPrintable(text));
    QVERIFY2(lineOf(QStringLiteral("w-alive")).contains(QLatin1String(" alpha 101 paused ")),
             qPrintable(text));
    if (m_stores.isPostgres())
        QVERIFY(!text.contains(m_stores.password()));
}

void TestUiWorkers::statusBarSummarisesEveryWorkerOnTheStore()
{
    const QString onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(!onceBin.isEmpty(), "ONCE_BIN must name the built once binary (ctest sets it)");
    const QString url = m_stores.newUrl();
    QString error;
    auto store = Store::open(url, &error);
    QVERIFY2(store, qPrintable(error));
    // A worker whose process died a minute ago: its heartbeat stopped then.
    QVERIFY2(store->workers().announce(makeWorker(QStringLiteral("w-crashed"), QStringLiteral("beta"), 202), &error),
             qPrintable(error));
    {
        QSqlQuery query(store->database().connection());
        QVERIFY(query.prepare(QStringLiteral("UPDATE workers SET heartbeat_at = ? WHERE id = ?")));
        query.addBindValue(nowMs() - 60 * Second);
        query.addBindValue(QStringLiteral("w-crashed"));
        QVERIFY2(query.exec(), qPrintable(query.lastError().text()));
    }

    Console console;
    QVERIFY(console.open(url));
    // The Overview is shown, not the Worker page: the status bar counts by itself.
    console.window->showPage(console.window->page<OverviewPage>());
    const auto *status = console.window->statusBar()->findChild<QLabel *>(QStringLiteral("workersStatus"));
    QVERIFY(status);
    QTRY_COMPARE_WITH_TIMEOUT(status->text(), QStringLiteral("1 worker: 1 gone"), 10000);

    // Two headless workers, as on any machine that reaches the store; this console runs none.
    oncetest::OnceRunner once(onceBin, url);
    const quint16 port = once.startPartnerSim();
    QVERIFY(port);
    const QString partner = QStringLiteral("http://127.0.0.1:%1/reminders").arg(port);
    once.start({QStringLiteral("worker"), QStringLiteral("--partner"), partner, QStringLiteral("--worker-id"),
                QStringLiteral("headless-a")});
    QProcess *second = once.start({QStringLiteral("worker"), QStringLiteral("--partner"), partner,
                                   QStringLiteral("--worker-id"), QStringLiteral("headless-b")});
    QTRY_COMPARE_WITH_TIMEOUT(status->text(), QStringLiteral("3 workers: 2 running, 1 gone"), 20000);

    // The Worker page says the same on top, apart from its own (stopped) worker.
    console.window->showPage(console.page());
    const auto *summary = console.page()->findChild<QLabel *>(QStringLiteral("workersSummary"));
    QTRY_COMPARE_WITH_TIMEOUT(summary->text(), QStringLiteral("3 workers: 2 running, 1 gone"), 10000);
    QVERIFY(console.page()->findChild<QLabel *>(QStringLiteral("workersSummaryDetail"))->text().contains(
        QLatin1String("A gone worker stopped sending heartbeats")));
    QCOMPARE(console.page()->findChild<QLabel *>(QStringLiteral("workerStatus"))->text(), QStringLiteral("Stopped"));

    // One stops as asked (SIGTERM): stopped, not gone.
    second->terminate();
    QVERIFY(second->waitForFinished(20000));
    QTRY_COMPARE_WITH_TIMEOUT(status->text(), QStringLiteral("3 workers: 1 running, 1 gone, 1 stopped"), 10000);
    QTRY_COMPARE_WITH_TIMEOUT(summary->text(), QStringLiteral("3 workers: 1 running, 1 gone, 1 stopped"), 10000);
}

void TestUiWorkers::notificationsRefreshAtMostOncePerSecond()
{
    const QString url = m_stores.newUrl();
    Console console;
    QVERIFY(console.open(url));
    StoreSession *session = console.window->session();
    if (!m_stores.isPostgres()) {
        // SQLite has no notifications: the pages poll.
        QVERIFY(!session->hasLiveUpdates());
        QSKIP("live updates need PostgreSQL");
    }
    QVERIFY(session->hasLiveUpdates());
    QVERIFY(console.window->findChild<QLabel *>(QStringLiteral("storeLabel"))
                ->text()
                .contains(QLatin1String("live updates")));

    QString error;
    auto producer = Store::open(url, &error); // another connection, as another process's
    QVERIFY2(producer, qPrintable(error));
    QSignalSpy changed(session, &StoreSession::storeChanged);
    QTest::qWait(1200); // past anything the opening itself set off
    changed.clear();

    const auto enqueueOne = [&producer](int n, QString *error) {
        const QByteArray payload = QStringLiteral(R"({"n": %1})").arg(n).toUtf8();
        return producer->queue().enqueue({OutgoingMessage{payload, {}, {}, 0, 0}}, error);
    };
    QElapsedTimer clock;
    clock.start();
    QVERIFY2(enqueueOne(0, &error), qPrintable(error));
    QTRY_VERIFY_WITH_TIMEOUT(changed.count() >= 1, 2000);
    qInfo("storeChanged %lld ms after the enqueue", qint64(clock.elapsed()));

    // A burst of notifications (one per enqueue) over about 1.5 s comes out as at most
    // one storeChanged a second, the last one after the burst.
    QTest::qWait(1100);
    changed.clear();
    clock.restart();
    for (int n = 1; n <= 30; ++n) {
        QVERIFY2(enqueueOne(n, &error), qPrintable(error));
        QTest::qWait(50);
    }
    const qint64 burstMs = clock.elapsed();
    QTest::qWait(1500);
    const qint64 windowMs = clock.elapsed();
    QVERIFY2(changed.count() >= 2, qPrintable(QString::number(changed.count())));
    QVERIFY2(changed.count() <= windowMs / 1000 + 1,
             qPrintable(QStringLiteral("%1 storeChanged in %2 ms (burst of %3 ms)")
                            .arg(changed.count())
                            .arg(windowMs)
                            .arg(burstMs)));
}

void TestUiWorkers::passwordIsNeverShownOrSaved()
{
    if (!m_stores.isPostgres())
        QSKIP("only a PostgreSQL store has a password");
    const QString url = m_stores.newUrl();
    const QString password = m_stores.password();
    QVERIFY(password.size() >= 8);
    QVERIFY(url.contains(QLatin1Char(':') + password + QLatin1Char('@')));

    Console console;
    QVERIFY(console.open(url));
    MainWindow &window = *console.window;
    QCOMPARE(window.session()->storeUrl(), url); // kept, in memory, to connect with
    const auto *storeLabel = window.findChild<QLabel *>(QStringLiteral("storeLabel"));
    QTRY_VERIFY(storeLabel->text().startsWith(QLatin1String("Store: ")));
    const QString shown = storeDisplayName(url);
    QVERIFY2(storeLabel->text().contains(shown), qPrintable(storeLabel->text()));
    QVERIFY(!storeLabel->text().contains(password));
    QVERIFY(!storeLabel->toolTip().contains(password));
    QVERIFY(!window.windowTitle().contains(password));
    QVERIFY2(window.windowTitle().contains(QUrl(url).path().mid(1)), qPrintable(window.windowTitle()));
    const auto *hint = window.findChild<QLabel *>(QStringLiteral("workerHint"));
    QVERIFY2(hint->text().contains(shown), qPrintable(hint->text()));
    QVERIFY(!hint->text().contains(password));

    // Remembered without it: in the settings, the file behind them and the menu.
    const QStringList recent = Settings().recentStores();
    QCOMPARE(recent.value(0), TestStores::withoutPassword(url));
    QVERIFY(!recent.join(QLatin1Char(' ')).contains(password));
    QSettings settings;
    settings.sync();
    QFile file(settings.fileName());
    QVERIFY2(file.open(QIODevice::ReadOnly), qPrintable(settings.fileName()));
    const QByteArray saved = file.readAll();
    QVERIFY(saved.contains(QUrl(url).path().mid(1).toUtf8()));
    QVERIFY(!saved.contains(password.toUtf8()));
    for (QAction *action : window.findChildren<QAction *>()) {
        QVERIFY(!action->text().contains(password));
        QVERIFY(!action->toolTip().contains(password));
    }

    // An older version's list with a password in it is cleaned when the window starts.
    QSettings().setValue(QStringLiteral("stores/recent"), QStringList{url});
    {
        MainWindow another;
    }
    QVERIFY(!QSettings()
                 .value(QStringLiteral("stores/recent"))
                 .toStringList()
                 .join(QLatin1Char(' '))
                 .contains(password));

    // A store that cannot be opened: neither the error nor the status bar shows the
    // password that was used.
    QUrl missing(url);
    missing.setPath(QStringLiteral("/no_such_database"));
    window.openStore(missing.toString(QUrl::FullyEncoded));
    QTRY_VERIFY_WITH_TIMEOUT(qobject_cast<QMessageBox *>(QApplication::activeModalWidget()), 20000);
    auto *box = qobject_cast<QMessageBox *>(QApplication::activeModalWidget());
    QCOMPARE(box->objectName(), QStringLiteral("openError"));
    QVERIFY2(box->text().contains(QLatin1String("no_such_database")), qPrintable(box->text()));
    QVERIFY2(!box->text().contains(password), "the error shows the password");
    QVERIFY(!box->informativeText().contains(password));
    QVERIFY(!box->detailedText().contains(password));
    QVERIFY(storeLabel->text().startsWith(QLatin1String("Cannot open")));
    QVERIFY(!storeLabel->text().contains(password));
    QVERIFY(!window.windowTitle().contains(password));
    box->close();
    QVERIFY(!Settings().recentStores().join(QLatin1Char(' ')).contains(QLatin1String("no_such_database")));
}

void TestUiWorkers::unusableTokenKeepsTheWorkerFromStarting()
{
    // A token with a line break would be refused by every send (each reminder then
    // dead-lettered as connect-failed): the page says so and Start stays off.
    const QByteArray token = "tok-secret-part\r\nX-Injected: 1";
    const QByteArray saved = qgetenv("ONCE_PARTNER_TOKEN");
    const bool hadToken = qEnvironmentVariableIsSet("ONCE_PARTNER_TOKEN");
    qputenv("ONCE_PARTNER_TOKEN", token);
    const auto restore = qScopeGuard([&] {
        if (hadToken)
            qputenv("ONCE_PARTNER_TOKEN", saved);
        else
            qunsetenv("ONCE_PARTNER_TOKEN");
    });
    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    Console console;
    QVERIFY(console.open(m_stores.newUrl()));
    WorkerPage *page = console.page();
    page->findChild<QLineEdit *>(QStringLiteral("partnerUrl"))
        ->setText(QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port()));
    const auto *label = page->findChild<QLabel *>(QStringLiteral("partnerToken"));
    QVERIFY2(label->text().contains(QLatin1String("line break")), qPrintable(label->text()));
    QVERIFY(label->isVisible());
    QVERIFY(!label->text().contains(QLatin1String("tok-secret")));
    auto *start = page->findChild<QPushButton *>(QStringLiteral("startButton"));
    QVERIFY(!start->isEnabled());
    // Even asked directly (a shortcut, a stale enabled state), the engine does not start.
    emit start->clicked();
    const auto *engineError = page->findChild<QLabel *>(QStringLiteral("engineError"));
    QVERIFY2(engineError->isVisible() && engineError->text().contains(QLatin1String("ONCE_PARTNER_TOKEN")),
             qPrintable(engineError->text()));
    QVERIFY(!engineError->text().contains(QLatin1String("tok-secret")));
    QTest::qWait(200);
    QCOMPARE(console.window->engine()->state(), EngineController::State::Stopped);
    QCOMPARE(partner.stats().requests, 0);
}

void TestUiWorkers::unreadablePartnerCaKeepsTheWorkerFromStarting()
{
    // As `once worker` does, the console's worker reads ONCE_PARTNER_CA: a file it cannot
    // use is said at Start, and nothing starts.
    const QByteArray saved = qgetenv("ONCE_PARTNER_CA");
    const bool hadCa = qEnvironmentVariableIsSet("ONCE_PARTNER_CA");
    qputenv("ONCE_PARTNER_CA", "/nonexistent/partner-ca.pem");
    const auto restore = qScopeGuard([&] {
        if (hadCa)
            qputenv("ONCE_PARTNER_CA", saved);
        else
            qunsetenv("ONCE_PARTNER_CA");
    });
    Console console;
    QVERIFY(console.open(m_stores.newUrl()));
    WorkerPage *page = console.page();
    page->findChild<QLineEdit *>(QStringLiteral("partnerUrl"))->setText(QStringLiteral("https://127.0.0.1:9/reminders"));
    auto *start = page->findChild<QPushButton *>(QStringLiteral("startButton"));
    QVERIFY(start->isEnabled());
    start->click();
    const auto *engineError = page->findChild<QLabel *>(QStringLiteral("engineError"));
    QVERIFY2(engineError->isVisible() && engineError->text().contains(QLatin1String("partner CA: cannot read")),
             qPrintable(engineError->text()));
    QTest::qWait(200);
    QCOMPARE(console.window->engine()->state(), EngineController::State::Stopped);
}

void TestUiWorkers::postgresDialogBuildsTheUrl()
{
    PostgresDialog dialog;
    QCOMPARE(dialog.passwordField()->echoMode(), QLineEdit::Password);
    dialog.hostField()->setText(QStringLiteral("db.example"));
    dialog.portField()->setValue(5433);
    dialog.databaseField()->setText(QStringLiteral("once"));
    dialog.userField()->setText(QStringLiteral("operator"));
    dialog.passwordField()->setText(QStringLiteral("p@ss/w:rd"));
    dialog.sslModeField()->setCurrentIndex(dialog.sslModeField()->findData(QStringLiteral("require")));
    const QString url = dialog.url();
    QString error;
    const auto location = StoreLocation::parse(url, &error);
    QVERIFY2(location, qPrintable(error));
    QCOMPARE(location->servers, (QList<StoreLocation::Server>{{QStringLiteral("db.example"), 5433}}));
    QCOMPARE(location->database, QStringLiteral("once"));
    QCOMPARE(location->user, QStringLiteral("operator"));
    QCOMPARE(location->password, QStringLiteral("p@ss/w:rd"));
    QCOMPARE(location->options, QStringList{QStringLiteral("sslmode=require")});
    const auto *preview = dialog.findChild<QLabel *>(QStringLiteral("preview"));
    QCOMPARE(preview->text(), QStringLiteral("postgres://operator@db.example:5433/once"));

    // Filled again from a remembered URL: everything but the password, which it never had.
    PostgresDialog again;
    again.setUrl(storeUrlWithoutPassword(url));
    QCOMPARE(again.hostField()->text(), QStringLiteral("db.example"));
    QCOMPARE(again.portField()->value(), 5433);
    QCOMPARE(again.userField()->text(), QStringLiteral("operator"));
    QVERIFY(again.passwordField()->text().isEmpty());
    QCOMPARE(again.sslModeField()->currentData().toString(), QStringLiteral("require"));
    QCOMPARE(again.url(), QStringLiteral("postgres://operator@db.example:5433/once?sslmode=require"));

    // Several hosts (libpq's high availability), typed in the host field: each without a
    // port of its own takes the port field's.
    PostgresDialog failover;
    failover.hostField()->setText(QStringLiteral("db1, db2:5433"));
    failover.portField()->setValue(5432);
    failover.databaseField()->setText(QStringLiteral("once"));
    failover.userField()->setText(QStringLiteral("operator"));
    failover.passwordField()->setText(QStringLiteral("p@ss"));
    const auto several = StoreLocation::parse(failover.url(), &error);
    QVERIFY2(several, qPrintable(failover.url()));
    QCOMPARE(several->servers, (QList<StoreLocation::Server>{{QStringLiteral("db1"), 5432}, {QStringLiteral("db2"), 5433}}));
    QCOMPARE(several->password, QStringLiteral("p@ss"));
    QCOMPARE(preview->text(), QStringLiteral("postgres://operator@db.example:5433/once")); // the first dialog's
    // And filled again from such a URL, options kept.
    PostgresDialog reopened;
    reopened.setUrl(QStringLiteral("postgres://operator@db1:5432,db2:5433/once?target_session_attrs=read-write"));
    QCOMPARE(reopened.hostField()->text(), QStringLiteral("db1,db2:5433"));
    QCOMPARE(reopened.portField()->value(), 5432);
    QCOMPARE(reopened.url(), QStringLiteral("postgres://operator@db1:5432,db2:5433/once?target_session_attrs=read-write"));
}

QTEST_MAIN(TestUiWorkers)
#include "tst_uiworkers.moc"
