// The console over a queue at a broker, as an operator meets it after a partner outage:
// real `once` processes (init, enqueue, worker) put reminders through the broker and
// dead-letter them there; the real MainWindow, offscreen, names the broker, counts and
// lists the dead letters at it, and redrives them through the preview dialog; a second
// worker delivers each key exactly once at the in-process partner simulator. The
// broker's dead-letter count drops to 0 and the store's audit log names the queue.
//
// tests/CMakeLists.txt registers the suite with QUEUES: tst_uibroker_rabbitmq and
// tst_uibroker_redis run against the private brokers (tests/testqueues.h), and plain
// tst_uibroker runs the same story on the store's own queue, so the console's two paths
// are held to one standard. RabbitMQ alone has a management API to lose: that test
// skips elsewhere. No password of a broker may reach the window or the settings file.
//
// The simulator answers on this thread, so every wait for a process runs the event loop
// (OnceRunner::waitFor), as in tst_delivery.
#include "dialogs/brokerqueuedialog.h"
#include "dialogs/redrivedialog.h"
#include "display/queueurl.h"
#include "mainwindow.h"
#include "models/deadlettersmodel.h"
#include "pages/deadletterspage.h"
#include "pages/overviewpage.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/metricchart.h"
#include "widgets/tile.h"

#include "deliveryharness.h"
#include "operator/brokerdeadletters.h"
#include "queues/brokerqueue.h"
#include "queues/queuebackend.h"
#include "queues/queuelocation.h"
#include "sim/partnersimulator.h"
#include "store/store.h"
#include "testqueues.h"
#include "teststores.h"

#include <QAction>
#include <QApplication>
#include <QDialogButtonBox>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QSet>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTcpServer>
#include <QTest>
#include <QTimer>
#include <QUrl>
#include <QUrlQuery>

#include <memory>

using namespace once;
using namespace once::ui;
using namespace oncetest;

namespace {

// Every text the window shows or keeps at hand for a person: its title, the status bar,
// every label, tooltip and action (menus included), any message box, and the
// unmasked line edits.
QStringList shownTexts(QWidget *window)
{
    QStringList texts{window->windowTitle()};
    if (auto *mainWindow = qobject_cast<QMainWindow *>(window))
        texts << mainWindow->statusBar()->currentMessage();
    const QList<QWidget *> widgets = window->findChildren<QWidget *>();
    for (QWidget *widget : widgets) {
        texts << widget->toolTip() << widget->windowTitle();
        if (auto *label = qobject_cast<QLabel *>(widget))
            texts << label->text();
        if (auto *box = qobject_cast<QMessageBox *>(widget))
            texts << box->text() << box->informativeText() << box->detailedText();
        if (auto *edit = qobject_cast<QLineEdit *>(widget); edit && edit->echoMode() == QLineEdit::Normal)
            texts << edit->text();
        if (auto *tabs = qobject_cast<QTabWidget *>(widget)) {
            for (int i = 0; i < tabs->count(); ++i)
                texts << tabs->tabText(i) << tabs->tabToolTip(i);
        }
    }
    for (QAction *action : window->findChildren<QAction *>())
        texts << action->text() << action->toolTip() << action->statusTip();
    return texts;
}

// Empty when the secret appears nowhere; otherwise the first text that holds it.
QString whereShown(QWidget *window, const QString &secret)
{
    for (const QString &text : shownTexts(window)) {
        if (text.contains(secret))
            return text;
    }
    return {};
}

QByteArray settingsFileContents()
{
    QSettings settings;
    settings.sync();
    QFile file(settings.fileName());
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return file.readAll();
}

// Runs `once worker --until-idle`, which must leave nothing ready, delayed or in flight.
bool runWorkerUntilDrained(OnceRunner &runner, const QStringList &worker, QString *error)
{
    const ProcessResult result = runner.waitFor(runner.start(worker), WorkerTimeoutMs);
    if (!result.exitedWith(0)) {
        *error = QString::fromUtf8(result.describe());
        return false;
    }
    const QJsonObject stats = runner.stats();
    // null where the queue cannot count (Pub/Sub): its worker's --until-idle waited a lease.
    const qint64 left = stats.value(QLatin1String("ready")).toInteger() + stats.value(QLatin1String("delayed")).toInteger()
                        + stats.value(QLatin1String("in_flight")).toInteger();
    if (left != 0)
        *error = QStringLiteral("once worker --until-idle stopped with %1 messages left: %2")
                     .arg(left)
                     .arg(QString::fromUtf8(QJsonDocument(stats).toJson(QJsonDocument::Compact)));
    return left == 0;
}

// A worker that tries each reminder once, sending to partner, until the queue is drained.
QStringList workerArgs(const PartnerSimulator &partner)
{
    return QStringList{QStringLiteral("worker"),
                       QStringLiteral("--partner"),
                       QStringLiteral("http://127.0.0.1:%1/reminders").arg(partner.port()),
                       QStringLiteral("--until-idle"),
                       QStringLiteral("--max-attempts"),
                       QStringLiteral("1"),
                       QStringLiteral("--concurrency"),
                       QStringLiteral("4"),
                       QStringLiteral("--worker-id"),
                       QStringLiteral("ui-broker-worker")} +
           TestQueues::untilIdleWorkerOptions();
}

// The queue URL with another management API address in place of the test server's.
QString withManagement(const QString &queueUrl, const QString &management)
{
    QUrl url(queueUrl, QUrl::StrictMode);
    QUrlQuery query(url);
    query.removeAllQueryItems(QStringLiteral("management"));
    query.addQueryItem(QStringLiteral("management"),
                       QString::fromLatin1(QUrl::toPercentEncoding(management)));
    url.setQuery(query);
    return url.toString(QUrl::FullyEncoded);
}

Tile *tile(MainWindow &window, const char *name)
{
    return window.page<OverviewPage>()->findChild<Tile *>(QString::fromLatin1(name));
}

QLabel *label(QWidget *parent, const char *name)
{
    return parent->findChild<QLabel *>(QString::fromLatin1(name));
}

// A broker's queue that counts the listings of its dead letters, and otherwise is the
// broker's.
class CountingBrokerQueue final : public BrokerQueue
{
public:
    explicit CountingBrokerQueue(BrokerQueue &broker) : BrokerQueue(broker.location()), m_broker(broker) {}

    int listings() const { return m_listings; }

    bool enqueue(const QList<OutgoingMessage> &messages, QString *error) override
    {
        return m_broker.enqueue(messages, error);
    }
    QList<QueueMessage> lease(int max, qint64 leaseMs, const QString &workerId, QString *error) override
    {
        return m_broker.lease(max, leaseMs, workerId, error);
    }
    bool settle(const QList<Settlement> &settlements, QString *error) override
    {
        return m_broker.settle(settlements, error);
    }
    std::optional<QueueCounts> counts(QString *error) override { return m_broker.counts(error); }
    bool declareTopology(const QueueTopology &topology, QString *error) override
    {
        return m_broker.declareTopology(topology, error);
    }
    std::optional<QList<DeadLetter>> deadLetters(int limit, QString *error) override
    {
        ++m_listings;
        return m_broker.deadLetters(limit, error);
    }
    std::optional<QList<DeadLetter>> redrive(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override
    {
        return m_broker.redrive(max, select, error);
    }
    std::optional<QList<DeadLetter>> discard(int max, const std::function<bool(const DeadLetter &)> &select,
                                             QString *error) override
    {
        return m_broker.discard(max, select, error);
    }

private:
    BrokerQueue &m_broker;
    int m_listings = 0;
};

} // namespace

class TestUiBroker final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();
    void deadLettersAtTheQueueAreRedrivenFromTheConsole();
    void deadLetterPagesAtTheBrokerAreCutFromOneListing();
    void consoleListsARedisQueueOnceARefresh();
    void unreachableManagementApiReadsNotAvailable();
    void silentManagementApiHoldsNothingUp();
    void brokerThatCannotBeOpenedIsNamedWithoutItsPassword();
    void queueDialogKeepsThePasswordOutOfSight();

private:
    // The console's window over the store and queue, opened (or failing to open).
    std::unique_ptr<MainWindow> openConsole(const QString &storeUrl, const QString &queueUrl,
                                            bool expectOpen);
    // The store's numbers as the console reads them, through its session.
    std::optional<DeliveryStats> consoleStats(MainWindow &window);
    // The producer's part and an outage, with real processes: the topology at the queue,
    // count reminders through it, and a worker whose one attempt at each fails, so that
    // every one dies there (partner: failing from now on). The reminders into *reminders.
    void buryAtTheQueue(OnceRunner &runner, int count, PartnerSimulator &partner, QList<ReminderSpec> *reminders);

    TestStores m_stores;
    TestQueues m_queues;
    QString m_onceBin;
};

void TestUiBroker::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName(QStringLiteral("once"));
    QApplication::setApplicationName(QStringLiteral("once-console-broker-test"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false\nonce.*.info=false"));
    qRegisterMetaType<once::DeliveryStats>();
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFileInfo(m_onceBin).isExecutable(), "ONCE_BIN must name the once executable (ctest sets it)");
    qInfo("queue: %s", qPrintable(m_queues.kind()));
}

void TestUiBroker::init()
{
    // Every test starts without recent stores or queues, and with its own redrive rate.
    QSettings().clear();
    Settings settings;
    settings.setIdempotencyWindowHours(24);
    settings.setRedriveRate(1000);
}

void TestUiBroker::cleanup()
{
    QSettings().clear();
}

std::unique_ptr<MainWindow> TestUiBroker::openConsole(const QString &storeUrl, const QString &queueUrl,
                                                      bool expectOpen)
{
    auto window = std::make_unique<MainWindow>();
    window->resize(1280, 820);
    window->show();
    window->openStore(storeUrl, queueUrl);
    QSignalSpy opened(window->session(), &StoreSession::opened);
    if (!opened.wait(30000)) {
        qWarning("the console's session did not answer");
        return nullptr;
    }
    if (opened.constFirst().at(0).toBool() != expectOpen) {
        qWarning("the console %s: %s", expectOpen ? "did not open" : "opened",
                 qPrintable(opened.constFirst().at(1).toString()));
        return nullptr;
    }
    return window;
}

std::optional<DeliveryStats> TestUiBroker::consoleStats(MainWindow &window)
{
    StoreSession *session = window.session();
    QSignalSpy loaded(session, &StoreSession::overviewLoaded);
    const quint64 token = session->loadOverview(60000);
    const auto answer = [&]() -> std::optional<DeliveryStats> {
        for (const auto &args : std::as_const(loaded)) {
            if (args.at(0).toULongLong() == token)
                return args.at(1).value<DeliveryStats>();
        }
        return std::nullopt;
    };
    if (!QTest::qWaitFor([&] { return answer().has_value(); }, 20000))
        return std::nullopt;
    return answer();
}

void TestUiBroker::buryAtTheQueue(OnceRunner &runner, int count, PartnerSimulator &partner,
                                  QList<ReminderSpec> *reminders)
{
    auto result = runner.run(QStringList{QStringLiteral("init")} + TestQueues::untilIdleLeaseOptions());
    QVERIFY2(result.exitedWith(0), result.describe().constData());
    QByteArray lines;
    for (int i = 0; i < count; ++i) {
        *reminders << makeReminder(QStringLiteral("ui-broker"), i);
        lines += reminders->last().line + '\n';
    }
    const QString input =
        m_stores.filePath(QStringLiteral("reminders-%1.jsonl").arg(QCoreApplication::applicationPid()));
    {
        QFile file(input);
        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write(lines);
    }
    result = runner.run({QStringLiteral("enqueue"), input});
    QVERIFY2(result.exitedWith(0), result.describe().constData());

    // Every reminder is sent, and fails, before the first answer comes back: a breaker
    // opened by the first five would hold the rest for its probes, one at 1 s, 2 s, 4 s...
    // How many the first lease takes is the broker's: Kafka hands out what its fetches
    // have brought, and the mock cluster's first fetch of a partition can take a second.
    PartnerFaults outage;
    outage.failRate = 1.0;
    outage.failLatencyMs = 2000;
    partner.setProfile(outage);
    QString error;
    QVERIFY2(runWorkerUntilDrained(runner, workerArgs(partner) + QStringList{QStringLiteral("--concurrency"), QString::number(count)}, &error),
             qPrintable(error));
    QCOMPARE(partner.stats().effects, qint64(0));
    VERIFY_NO_PROBLEMS(
        statsProblems(runner.stats(), {{QStringLiteral("dead"), count}, {QStringLiteral("acked"), 0}}));
}

// A broker lists its whole dead-letter queue at every look. The console's pages, counts
// and selected letter are cut from one listing a refresh: scrolling down lists nothing
// more, a page from the start (a refresh) lists afresh and sees what changed, and so does
// the first look after this reader changed the letters.
void TestUiBroker::deadLetterPagesAtTheBrokerAreCutFromOneListing()
{
    if (!m_queues.isBroker())
        QSKIP("the store's own queue pages in SQL");
    constexpr int Count = 12;
    const QString storeUrl = m_stores.newUrl();
    const QString queueUrl = m_queues.newUrl();
    OnceRunner runner(m_onceBin, storeUrl, queueUrl);
    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QList<ReminderSpec> reminders;
    buryAtTheQueue(runner, Count, partner, &reminders);
    if (QTest::currentTestFailed())
        return;

    const auto location = QueueLocation::parse(queueUrl, &error);
    QVERIFY2(location, qPrintable(error));
    const std::unique_ptr<BrokerQueue> broker = openBrokerQueue(*location, {}, 1, &error);
    QVERIFY2(broker, qPrintable(error));
    CountingBrokerQueue counting(*broker);
    BrokerDeadLetters letters(counting);

    DeadLetterFilter filter;
    filter.newestFirst = true;
    filter.limit = 5;
    filter.withPayload = false;
    QStringList paged;
    DeadLetterFilter page = filter;
    for (int round = 0; round < 4; ++round) {
        const auto some = letters.page(page, &error);
        QVERIFY2(some, qPrintable(error));
        for (const DeadLetter &letter : *some) {
            paged << letter.id;
            QVERIFY(letter.payload.isEmpty());
        }
        if (some->size() < page.limit)
            break;
        page.continueAfter(some->constLast());
    }
    QCOMPARE(paged.size(), Count);
    QCOMPARE(QSet<QString>(paged.cbegin(), paged.cend()).size(), Count);
    const auto counts = letters.counts({}, 0, &error);
    QVERIFY2(counts, qPrintable(error));
    QCOMPARE(counts->tally().letters, qint64(Count));
    const auto selected = letters.letter(paged.at(7), &error);
    QVERIFY2(selected, qPrintable(error));
    QVERIFY(!selected->payload.isEmpty());
    QCOMPARE(counting.listings(), 1);
    // The same pages as a listing cut whole: the broker's order is not the list's.
    const auto whole = broker->deadLetters(Count + 10, &error);
    QVERIFY2(whole, qPrintable(error));
    QStringList expected;
    for (const DeadLetter &letter : deadLetterPage(*whole, [&] {
             DeadLetterFilter all = filter;
             all.limit = -1;
             return all;
         }()))
        expected << letter.id;
    QCOMPARE(paged, expected);

    // A letter goes elsewhere (another console); the next refresh lists afresh and sees it.
    const auto taken = broker->discard(Count, [&](const DeadLetter &letter) { return letter.id == paged.at(0); }, &error);
    QVERIFY2(taken && taken->size() == 1, qPrintable(error));
    page = filter;
    const auto refreshed = letters.page(page, &error);
    QVERIFY2(refreshed, qPrintable(error));
    QCOMPARE(counting.listings(), 2);
    QCOMPARE(refreshed->constFirst().id, paged.at(1));
    QCOMPARE(letters.counts({}, 0, &error)->tally().letters, qint64(Count - 1));
    QVERIFY(!letters.letter(paged.at(0), &error));
    QVERIFY2(error.contains(QLatin1String("redriven or discarded")), qPrintable(error));
    QCOMPARE(counting.listings(), 2);
    // After this reader's own redrive or discard, the next look lists afresh.
    letters.forget();
    QCOMPARE(letters.counts({}, 0, &error)->tally().letters, qint64(Count - 1));
    QCOMPARE(counting.listings(), 3);
}

// The same through the console's reader, counted by the broker itself: Redis counts the
// XRANGE calls that list its dead-letter stream (INFO commandstats). The table's first
// page, the pages below it, the counts and the selected letter's payload cost one.
void TestUiBroker::consoleListsARedisQueueOnceARefresh()
{
    if (m_queues.kind() != QLatin1String("redis"))
        QSKIP("Redis counts its commands; the listings at every broker are counted above");
    const QString storeUrl = m_stores.newUrl();
    const QString queueUrl = m_queues.newUrl();
    OnceRunner runner(m_onceBin, storeUrl, queueUrl);
    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    QList<ReminderSpec> reminders;
    buryAtTheQueue(runner, 12, partner, &reminders);
    if (QTest::currentTestFailed())
        return;

    const QUrl server(queueUrl, QUrl::StrictMode);
    const auto listings = [&server]() -> qint64 {
        QProcess cli;
        cli.start(QStringLiteral("redis-cli"), {QStringLiteral("-h"), server.host(), QStringLiteral("-p"),
                                               QString::number(server.port(6379)), QStringLiteral("--no-auth-warning"),
                                               QStringLiteral("-a"), server.password(), QStringLiteral("INFO"),
                                               QStringLiteral("commandstats")});
        if (!cli.waitForFinished(10000) || cli.exitCode() != 0)
            return -1;
        // cmdstat_xrange:calls=N,usec=…
        const QByteArray out = cli.readAllStandardOutput();
        const qsizetype at = out.indexOf("cmdstat_xrange:calls=");
        if (at < 0)
            return 0;
        const qsizetype from = at + qsizetype(qstrlen("cmdstat_xrange:calls="));
        return out.mid(from, out.indexOf(',', from) - from).toLongLong();
    };

    StoreSession session(storeUrl, queueUrl);
    QSignalSpy opened(&session, &StoreSession::opened);
    QVERIFY(opened.wait(30000));
    QVERIFY2(opened.constFirst().at(0).toBool(), qPrintable(opened.constFirst().at(1).toString()));
    QSignalSpy pages(&session, &StoreSession::deadLettersLoaded);
    QSignalSpy counted(&session, &StoreSession::deadLettersCounted);
    QSignalSpy letter(&session, &StoreSession::deadLetterLoaded);
    QSignalSpy failed(&session, &StoreSession::failed);
    const auto firstFailure = [&failed] { return failed.isEmpty() ? QString() : failed.constFirst().at(1).toString(); };
    const qint64 before = listings();
    QVERIFY(before >= 0);

    DeadLetterFilter page;
    page.newestFirst = true;
    page.limit = 5;
    page.withPayload = false;
    QStringList ids;
    for (int round = 0; round < 3; ++round) {
        session.loadDeadLetters(page);
        QTRY_COMPARE_WITH_TIMEOUT(pages.size() + failed.size(), round + 1, 20000);
        QVERIFY2(failed.isEmpty(), qPrintable(firstFailure()));
        const auto letters = pages.last().at(1).value<QList<DeadLetter>>();
        for (const DeadLetter &each : letters)
            ids << each.id;
        if (!letters.isEmpty())
            page.continueAfter(letters.constLast());
    }
    QCOMPARE(ids.size(), 12);
    session.countDeadLetters({});
    QTRY_COMPARE_WITH_TIMEOUT(counted.size(), 1, 20000);
    QCOMPARE(counted.constFirst().at(1).value<DeadLetterCounts>().tally().letters, qint64(12));
    session.loadDeadLetter(ids.at(6));
    QTRY_COMPARE_WITH_TIMEOUT(letter.size(), 1, 20000);
    QVERIFY(!letter.constFirst().at(1).value<DeadLetter>().payload.isEmpty());
    QVERIFY2(failed.isEmpty(), qPrintable(firstFailure()));
    QCOMPARE(listings() - before, qint64(1));

    // A refresh (the first page again) lists afresh.
    page.afterId.clear();
    session.loadDeadLetters(page);
    QTRY_COMPARE_WITH_TIMEOUT(pages.size(), 4, 20000);
    QCOMPARE(listings() - before, qint64(2));
}

void TestUiBroker::deadLettersAtTheQueueAreRedrivenFromTheConsole()
{
    constexpr int Count = 6;
    const QString storeUrl = m_stores.newUrl();
    // For RabbitMQ, with the test server's management API (TestQueues adds it).
    const QString queueUrl = m_queues.newUrl();
    const bool broker = !queueUrl.isEmpty();
    OnceRunner runner(m_onceBin, storeUrl, queueUrl);

    PartnerSimulator partner;
    QString error;
    QVERIFY2(partner.listen(QHostAddress::LocalHost, 0, &error), qPrintable(error));
    const QStringList worker = workerArgs(partner);
    QList<ReminderSpec> reminders;
    buryAtTheQueue(runner, Count, partner, &reminders);
    if (QTest::currentTestFailed())
        return;

    // The console on the store and the queue.
    const auto window = openConsole(storeUrl, queueUrl, true);
    QVERIFY(window);
    const QString name = queueName(queueUrl);
    if (broker) {
        QVERIFY(!name.isEmpty());
        QVERIFY2(window->windowTitle().contains(name) &&
                     window->windowTitle().contains(queueBrokerName(queueUrl)),
                 qPrintable(window->windowTitle()));
        QLabel *queueLabel = window->findChild<QLabel *>(QStringLiteral("queueLabel"));
        QVERIFY(queueLabel && queueLabel->isVisible());
        QVERIFY2(queueLabel->text().contains(queueBrokerName(queueUrl)) &&
                     queueLabel->text().contains(queueDisplayName(queueUrl)),
                 qPrintable(queueLabel->text()));
    }

    // The Overview names the broker and counts the dead letters it holds.
    auto *overview = window->page<OverviewPage>();
    window->showPage(overview);
    QLabel *place = label(overview, "queueLabel");
    QVERIFY(place);
    if (broker) {
        QVERIFY2(place->text().startsWith(QStringLiteral("Queue at %1").arg(queueBrokerName(queueUrl))),
                 qPrintable(place->text()));
        QVERIFY2(place->text().contains(name), qPrintable(place->text()));
    } else {
        QCOMPARE(place->text(), QStringLiteral("Queue in the store"));
    }
    // A broker that counts nothing (Pub/Sub) shows no zeros but says why; the others count.
    const bool countsBacklog = !runner.stats().value(QLatin1String("ready")).isNull();
    if (!countsBacklog) {
        QTRY_VERIFY_WITH_TIMEOUT(label(overview, "queueUnavailable")->isVisible(), 20000);
        for (const char *name : {"deadLettersTile", "readyTile", "inFlightTile", "delayedTile"})
            QCOMPARE(tile(*window, name)->value(), QStringLiteral("not available"));
        // Nor does it chart zeros it never measured (a worker and the console sampled it).
        for (const char *name : {"depthChart", "ageChart"})
            QVERIFY2(overview->findChild<MetricChart *>(QLatin1String(name))->points().isEmpty(), name);
    } else {
        QTRY_COMPARE_WITH_TIMEOUT(tile(*window, "deadLettersTile")->value(), QStringLiteral("6"), 20000);
        QCOMPARE(tile(*window, "readyTile")->value(), QStringLiteral("0"));
    }
    if (!countsBacklog) {
        QVERIFY2(label(overview, "queueUnavailable")->text().contains(QLatin1String("Cloud Monitoring")),
                 qPrintable(label(overview, "queueUnavailable")->text()));
    } else if (m_queues.kind() == QLatin1String("rabbitmq")) {
        // With its management API, RabbitMQ reports all of it (the queue's statistics
        // appear some seconds after it is declared).
        QTRY_VERIFY_WITH_TIMEOUT(!label(overview, "queueUnavailable")->isVisible(), 60000);
        QCOMPARE(tile(*window, "inFlightTile")->value(), QStringLiteral("0"));
    } else {
        QVERIFY(!label(overview, "queueUnavailable")->isVisible());
    }

    // The Dead letters page lists them, and says where they are.
    auto *page = window->page<DeadLettersPage>();
    window->showPage(page);
    const QString where = label(page, "deadLettersPlace")->text();
    if (broker) {
        // The backend's own words: its name, its word for a queue, its dead letters' place.
        QString parseError;
        const auto location = QueueLocation::parse(queueUrl, &parseError);
        QVERIFY2(location, qPrintable(parseError));
        const QueueBackend *backend = queueBackendForId(m_queues.kind());
        QVERIFY(backend);
        QCOMPARE(where, QStringLiteral("Dead letters at %1 %2 %3")
                            .arg(backend->name, backend->queueWord, backend->deadLetterName(*location)));
    } else {
        QCOMPARE(where, QStringLiteral("Dead letters in the store"));
    }
    auto *table = page->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), Count, 20000);
    QSet<QByteArray> listed;
    for (int row = 0; row < Count; ++row) {
        QCOMPARE(table->model()->index(row, DeadLettersModel::ErrorClass).data().toString(),
                 QStringLiteral("http-5xx"));
        listed << table->model()
                      ->index(row, DeadLettersModel::SendKey)
                      .data(DeadLettersModel::RawRole)
                      .toByteArray();
    }
    for (const auto &reminder : std::as_const(reminders))
        QVERIFY2(listed.contains(reminder.key), reminder.key.constData());

    // The partner is back; the operator previews the redrive and runs it.
    partner.setProfile(PartnerFaults{});
    QSignalSpy finished(window->session(), &StoreSession::redriveFinished);
    page->findChild<QAction *>(QStringLiteral("redriveAllMatching"))->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(qobject_cast<RedriveDialog *>(QApplication::activeModalWidget()), 20000);
    auto *dialog = qobject_cast<RedriveDialog *>(QApplication::activeModalWidget());
    QCOMPARE(dialog->letterCount(), Count);
    QCOMPARE(dialog->redrivenBeforeCount(), 0);
    if (broker) {
        QVERIFY2(dialog->auditDetail().contains(QStringLiteral("queue=") + queueDisplayName(queueUrl)),
                 qPrintable(dialog->auditDetail()));
        QVERIFY2(dialog->queueDescription().contains(name), qPrintable(dialog->queueDescription()));
        QVERIFY2(label(dialog, "headline")->text().contains(name),
                 qPrintable(label(dialog, "headline")->text()));
    } else {
        QCOMPARE(dialog->auditDetail(), QStringLiteral("all"));
        QVERIFY(dialog->queueDescription().isEmpty());
    }
    dialog->redriveButton()->click();
    QVERIFY(finished.wait(30000));
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().moved, Count);
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().cancelled, false);
    QCOMPARE(finished.constFirst().at(1).value<RedriveResult>().error, QString());
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 0, 20000);

    // A worker delivers them: each key once.
    QVERIFY2(runWorkerUntilDrained(runner, worker, &error), qPrintable(error));
    const auto effects = partner.effectsByKey();
    QCOMPARE(partner.stats().effects, qint64(Count));
    QCOMPARE(partner.stats().duplicateEffects, qint64(0));
    QCOMPARE(effects.size(), Count);
    for (const auto &reminder : std::as_const(reminders))
        QCOMPARE(effects.value(reminder.key), 1);
    VERIFY_NO_PROBLEMS(statsProblems(runner.stats(), {{QStringLiteral("dead"), 0},
                                                      {QStringLiteral("ready"), 0},
                                                      {QStringLiteral("acked"), Count},
                                                      {QStringLiteral("dead_keys"), 0}}));
    // The console agrees: nothing dead at the broker, every key applied.
    std::optional<DeliveryStats> stats;
    QTRY_VERIFY_WITH_TIMEOUT((stats = consoleStats(*window)) && stats->acked == Count, 20000);
    QCOMPARE(stats->queue.dead, qint64(0));
    QCOMPARE(stats->deadKeys, qint64(0));
    window->showPage(overview);
    if (countsBacklog)
        QTRY_COMPARE_WITH_TIMEOUT(tile(*window, "deadLettersTile")->value(), QStringLiteral("0"), 20000);

    // The audit log says who redrove how many, and from which queue.
    const QStringList audit =
        storeRows(m_stores, storeUrl, QStringLiteral("SELECT action, detail, count FROM audit_log"));
    QCOMPARE(audit.size(), 1);
    const QStringList columns = audit.constFirst().split(u'|');
    QCOMPARE(columns.value(0), QStringLiteral("redrive"));
    QCOMPARE(columns.value(2), QString::number(Count));
    if (broker)
        QCOMPARE(columns.value(1), QStringLiteral("all queue=") + queueDisplayName(queueUrl));
    else
        QCOMPARE(columns.value(1), QStringLiteral("all"));

    // The broker's password is in none of it, nor in the settings, which remember the
    // queue without it.
    if (broker) {
        // SQS's secret is no part of its URL: the AWS secret key from the environment.
        // Pub/Sub's emulator and Kafka's mock cluster take no credentials.
        const QString password = m_queues.kind() == QLatin1String("sqs") ? qEnvironmentVariable("AWS_SECRET_ACCESS_KEY")
                                                                          : queuePassword(queueUrl);
        const bool withoutCredentials =
            m_queues.kind() == QLatin1String("pubsub") || m_queues.kind() == QLatin1String("kafka");
        QVERIFY2(!password.isEmpty() || withoutCredentials, "the test broker's URL has a password");
        const QString shown = password.isEmpty() ? QString() : whereShown(window.get(), password);
        QVERIFY2(shown.isEmpty(), qPrintable(QStringLiteral("the password is shown in: ") + shown.left(200)));
        QVERIFY(password.isEmpty() || !columns.value(1).contains(password));
        const QByteArray saved = settingsFileContents();
        QVERIFY2(!saved.isEmpty(), "the settings file is missing");
        QVERIFY2(password.isEmpty() || !saved.contains(password.toUtf8()), saved.constData());
        QCOMPARE(Settings().recentQueues(), QStringList{queueUrlWithoutPassword(queueUrl)});
        QVERIFY(password.isEmpty() || !Settings().recentQueues().constFirst().contains(password));
    }
}

void TestUiBroker::unreachableManagementApiReadsNotAvailable()
{
    if (m_queues.kind() != QLatin1String("rabbitmq"))
        QSKIP("only RabbitMQ reads its counts through a management API");
    // Nothing listens on port 1: the API is unreachable, the AMQP port is not.
    const QString queueUrl = withManagement(m_queues.newUrl(), QStringLiteral("http://127.0.0.1:1"));
    const QString storeUrl = m_stores.newUrl();
    OnceRunner runner(m_onceBin, storeUrl, queueUrl);
    auto result = runner.run({QStringLiteral("init")});
    QVERIFY2(result.exitedWith(0), result.describe().constData());
    QByteArray lines;
    for (int i = 0; i < 3; ++i)
        lines += makeReminder(QStringLiteral("ui-management"), i).line + '\n';
    const QString input = m_stores.filePath(QStringLiteral("management.jsonl"));
    {
        QFile file(input);
        QVERIFY(file.open(QIODevice::WriteOnly | QIODevice::Truncate));
        file.write(lines);
    }
    result = runner.run({QStringLiteral("enqueue"), input});
    QVERIFY2(result.exitedWith(0), result.describe().constData());

    const auto window = openConsole(storeUrl, queueUrl, true);
    QVERIFY(window);
    auto *overview = window->page<OverviewPage>();
    window->showPage(overview);
    // What AMQP itself tells still shows...
    QTRY_COMPARE_WITH_TIMEOUT(tile(*window, "readyTile")->value(), QStringLiteral("3"), 20000);
    QCOMPARE(tile(*window, "deadLettersTile")->value(), QStringLiteral("0"));
    // ...what only the management API knows says it is not available, and why.
    for (const char *name : {"inFlightTile", "oldestReadyTile"}) {
        Tile *unknown = tile(*window, name);
        QCOMPARE(unknown->value(), QStringLiteral("not available"));
        QVERIFY(unknown->isMuted());
        QVERIFY2(unknown->toolTip().contains(QLatin1String("127.0.0.1:1")), qPrintable(unknown->toolTip()));
    }
    QLabel *note = label(overview, "queueUnavailable");
    QVERIFY(note->isVisible());
    QVERIFY2(note->text().startsWith(QLatin1String("RabbitMQ could not report")), qPrintable(note->text()));
    QVERIFY2(note->text().contains(QLatin1String("management API")), qPrintable(note->text()));
    const QString shown = whereShown(window.get(), queuePassword(queueUrl));
    QVERIFY2(shown.isEmpty(), qPrintable(QStringLiteral("the password is shown in: ") + shown.left(200)));
}

// A management API that takes connections and never answers keeps the reader's thread
// waiting (2 s at a time) inside a nested event loop. Requests that arrive meanwhile must
// wait their turn rather than run inside it, and closing the window then must neither
// crash nor hang.
void TestUiBroker::silentManagementApiHoldsNothingUp()
{
    if (m_queues.kind() != QLatin1String("rabbitmq"))
        QSKIP("only RabbitMQ reads its counts through a management API");
    // The kernel completes the connections; nobody reads the requests.
    QTcpServer silent;
    QVERIFY(silent.listen(QHostAddress::LocalHost, 0));
    const QString queueUrl =
        withManagement(m_queues.newUrl(), QStringLiteral("http://127.0.0.1:%1").arg(silent.serverPort()));
    const QString storeUrl = m_stores.newUrl();
    OnceRunner runner(m_onceBin, storeUrl, queueUrl);
    const auto result = runner.run({QStringLiteral("init")});
    QVERIFY2(result.exitedWith(0), result.describe().constData());

    auto window = openConsole(storeUrl, queueUrl, true);
    QVERIFY(window);
    window->showPage(window->page<OverviewPage>());
    StoreSession *session = window->session();
    // While the overview waits on the API, the other pages' questions queue up behind it.
    QSignalSpy overview(session, &StoreSession::overviewLoaded);
    QSignalSpy audit(session, &StoreSession::auditLoaded);
    QSignalSpy letters(session, &StoreSession::deadLettersLoaded);
    QSignalSpy failed(session, &StoreSession::failed);
    const quint64 overviewToken = session->loadOverview(60000);
    const quint64 auditToken = session->loadAudit(10);
    const quint64 lettersToken = session->loadDeadLetters(DeadLetterFilter{});
    QTRY_VERIFY_WITH_TIMEOUT(audit.size() >= 1 && letters.size() >= 1, 20000);
    QVERIFY2(failed.isEmpty(),
             qPrintable(failed.isEmpty() ? QString() : failed.constFirst().at(1).toString()));
    QCOMPARE(audit.constLast().at(0).toULongLong(), auditToken);
    QCOMPARE(letters.constLast().at(0).toULongLong(), lettersToken);
    QTRY_VERIFY_WITH_TIMEOUT(
        std::any_of(overview.cbegin(), overview.cend(),
                    [&](const QList<QVariant> &args) { return args.at(0).toULongLong() == overviewToken; }),
        20000);
    QTRY_COMPARE_WITH_TIMEOUT(tile(*window, "inFlightTile")->value(), QStringLiteral("not available"), 20000);
    QVERIFY2(tile(*window, "inFlightTile")->toolTip().contains(QLatin1String("no answer")),
             qPrintable(tile(*window, "inFlightTile")->toolTip()));

    // Closed in the middle of a wait.
    session->loadOverview(60000);
    session->loadDeadLetters(DeadLetterFilter{});
    QTest::qWait(300);
    QElapsedTimer closing;
    closing.start();
    window.reset();
    QVERIFY2(closing.elapsed() < 10000,
             qPrintable(QStringLiteral("closing took %1 ms").arg(closing.elapsed())));
}

void TestUiBroker::brokerThatCannotBeOpenedIsNamedWithoutItsPassword()
{
    // No broker needed: nothing listens on port 1, so opening fails at once, and the
    // failure is what must not quote the password.
    const QString password = QStringLiteral("Sup3r-s3cret-pw-%1").arg(QCoreApplication::applicationPid());
    const bool redis = m_queues.kind() == QLatin1String("redis");
    const QString queueUrl =
        redis ? QStringLiteral("redis://:%1@127.0.0.1:1/0?stream=nowhere").arg(password)
              : QStringLiteral("amqp://once:%1@127.0.0.1:1/%2F?queue=nowhere").arg(password);
    // A store that is there: the console asks before it creates one.
    const QString storeUrl = m_stores.newUrl();
    QString error;
    QVERIFY2(Store::open(storeUrl, &error), qPrintable(error));
    const auto window = openConsole(storeUrl, queueUrl, false);
    QVERIFY(window);
    QVERIFY(window->session()->queueFailed());
    QTRY_VERIFY(window->findChild<QMessageBox *>(QStringLiteral("openError")));
    auto *box = window->findChild<QMessageBox *>(QStringLiteral("openError"));
    QCOMPARE(box->windowTitle(), QStringLiteral("Cannot open the queue"));
    QVERIFY2(box->text().contains(QLatin1String("nowhere")), qPrintable(box->text()));
    QVERIFY(box->findChild<QPushButton *>(QStringLiteral("connect")));
    const QString shown = whereShown(window.get(), password);
    QVERIFY2(shown.isEmpty(), qPrintable(QStringLiteral("the password is shown in: ") + shown.left(200)));
    // A queue that did not open is not remembered; nothing holds the password.
    QVERIFY(Settings().recentQueues().isEmpty());
    QVERIFY(!settingsFileContents().contains(password.toUtf8()));

    // Connect… offers it again with the password in the masked field only. The dialog
    // runs its own event loop, so it is looked at from a timer inside it.
    QStringList problems;
    bool seen = false;
    QTimer poll;
    connect(&poll, &QTimer::timeout, this, [&] {
        auto *dialog = qobject_cast<BrokerQueueDialog *>(QApplication::activeModalWidget());
        if (!dialog)
            return;
        poll.stop();
        seen = true;
        if (dialog->urlField()->text().contains(password))
            problems << QStringLiteral("the URL field shows the password");
        if (dialog->passwordField()->text() != password ||
            dialog->passwordField()->echoMode() != QLineEdit::Password)
            problems << QStringLiteral("the masked field does not hold the password");
        if (queuePassword(dialog->url()) != password)
            problems << QStringLiteral("url() lost the password");
        if (const QString where = whereShown(dialog, password); !where.isEmpty())
            problems << QStringLiteral("the dialog shows the password in: ") + where;
        dialog->reject();
    });
    poll.start(20);
    QTimer::singleShot(10000, &poll, [&] {
        if (auto *modal = QApplication::activeModalWidget())
            modal->close();
    });
    box->findChild<QPushButton *>(QStringLiteral("connect"))->click();
    QTRY_VERIFY(seen);
    QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1String("; "))));
}

void TestUiBroker::queueDialogKeepsThePasswordOutOfSight()
{
    BrokerQueueDialog dialog;
    // Typed (or pasted) into the URL, the password moves to the masked field.
    dialog.urlField()->setText(QStringLiteral("amqp://once:pa%2Fss@127.0.0.1:5672/%2F?queue=reminders"));
    QMetaObject::invokeMethod(dialog.urlField(), "editingFinished");
    QCOMPARE(dialog.urlField()->text(), QStringLiteral("amqp://once@127.0.0.1:5672/%2F?queue=reminders"));
    QCOMPARE(dialog.passwordField()->text(), QStringLiteral("pa/ss"));
    QCOMPARE(queuePassword(dialog.url()), QStringLiteral("pa/ss"));
    auto *preview = dialog.findChild<QLabel *>(QStringLiteral("preview"));
    QCOMPARE(preview->text(), QStringLiteral("RabbitMQ — amqp://once@127.0.0.1:5672/%2F?queue=reminders"));
    QVERIFY(whereShown(&dialog, QStringLiteral("pa/ss")).isEmpty());
    QVERIFY(whereShown(&dialog, QStringLiteral("pa%2Fss")).isEmpty());
    // The dialog offers every registered backend, in its own words.
    const QString formats = dialog.findChild<QLabel *>(QStringLiteral("formats"))->text();
    for (const QueueBackend *backend : queueBackends()) {
        QVERIFY2(formats.contains(backend->name.toHtmlEscaped()), qPrintable(formats));
        QVERIFY2(formats.contains(backend->urlSyntax.toHtmlEscaped()), qPrintable(formats));
    }

    // A Redis password has no user; without it the URL stays as it was.
    dialog.setUrl(QStringLiteral("redis://:s3cret@127.0.0.1:6379/0?stream=reminders"));
    QCOMPARE(dialog.urlField()->text(), QStringLiteral("redis://127.0.0.1:6379/0?stream=reminders"));
    QCOMPARE(dialog.passwordField()->text(), QStringLiteral("s3cret"));
    QCOMPARE(dialog.url(), QStringLiteral("redis://:s3cret@127.0.0.1:6379/0?stream=reminders"));
    dialog.passwordField()->clear();
    QCOMPARE(dialog.url(), QStringLiteral("redis://127.0.0.1:6379/0?stream=reminders"));

    // A URL that names no queue cannot be opened, and says why.
    dialog.urlField()->setText(QStringLiteral("amqp://once@127.0.0.1:5672/%2F"));
    QVERIFY(!dialog.findChild<QDialogButtonBox *>()->button(QDialogButtonBox::Open)->isEnabled());
    QVERIFY2(preview->text().contains(QLatin1String("?queue=NAME")), qPrintable(preview->text()));
}

QTEST_MAIN(TestUiBroker)
#include "tst_uibroker.moc"
