// What an operator does after a partner outage, end to end: real `once worker` processes
// dead-letter reminders at a real failing `once partner-sim`, the real console window
// (offscreen) and the `once` command redrive, discard and resolve them, and each decision
// shows up in the audit log (keys or filter, rate, reason) and in every touched event's
// own history; each audit row opens its events. The dead letters open from an event, are
// exported as CSV and JSON, and are filtered by a from-to range; the redrive preview says
// whether a worker would send them and whether the partner answers; closing the window
// while the console's worker sends does not freeze it. Runs on SQLite and, as
// tst_operatoractions_postgres, on PostgreSQL (teststores.h).
#include "dialogs/decisiondialog.h"
#include "dialogs/redrivedialog.h"
#include "mainwindow.h"
#include "models/attemptsmodel.h"
#include "models/auditmodel.h"
#include "models/deadlettersmodel.h"
#include "models/eventsmodel.h"
#include "models/indoubtmodel.h"
#include "pages/auditpage.h"
#include "pages/deadletterspage.h"
#include "pages/eventspage.h"
#include "pages/indoubtpage.h"
#include "session/enginecontroller.h"
#include "session/redrivereadiness.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "text/csvtext.h"

#include "store/database.h"
#include "deliveryharness.h"
#include "operator/operations.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDateTimeEdit>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QLabel>
#include <QLineEdit>
#include <QLoggingCategory>
#include <QProgressDialog>
#include <QPushButton>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

using namespace once;
using namespace once::ui;
using namespace oncetest;

namespace {

struct Line
{
    QByteArray json;
    QByteArray key;
};

// A reminder whose ids the test chooses (a producer may choose "=cmd", too).
Line reminderLine(const QString &userId, const QString &reminderId, const QString &eventId)
{
    const QString scheduledAt = QStringLiteral("2026-03-01T09:00:00Z");
    const QJsonObject object{
        {QStringLiteral("user_id"), userId},
        {QStringLiteral("reminder_id"), reminderId},
        {QStringLiteral("scheduled_at"), scheduledAt},
        {QStringLiteral("destination"), QStringLiteral("+15550100")},
        {QStringLiteral("channel"), QStringLiteral("sms")},
        {QStringLiteral("event_id"), eventId},
        {QStringLiteral("body"), QStringLiteral("Your appointment is tomorrow")},
    };
    return {QJsonDocument(object).toJson(QJsonDocument::Compact), makeSendKey(userId, reminderId, scheduledAt)};
}

QList<Line> plainLines(const QString &prefix, int count)
{
    QList<Line> lines;
    for (int i = 0; i < count; ++i)
        lines << reminderLine(QStringLiteral("%1-user-%2").arg(prefix).arg(i), QStringLiteral("%1-rem").arg(prefix),
                              QStringLiteral("%1-evt-%2").arg(prefix).arg(i));
    return lines;
}

QList<QByteArray> keysOf(const QList<Line> &lines)
{
    QList<QByteArray> keys;
    for (const Line &line : lines)
        keys << line.key;
    return keys;
}

// The rows of a table whose column holds one of the keys (raw role).
void selectKeys(QTableView *table, int column, int role, const QList<QByteArray> &keys)
{
    table->clearSelection();
    for (int row = 0; row < table->model()->rowCount(); ++row) {
        if (keys.contains(table->model()->index(row, column).data(role).toByteArray()))
            table->selectionModel()->select(table->model()->index(row, 0),
                                            QItemSelectionModel::Select | QItemSelectionModel::Rows);
    }
}

// The summaries of the history rows of the open story.
QStringList summaries(EventsPage *events)
{
    QStringList texts;
    const AttemptsModel *model = events->attemptsModel();
    for (int row = 0; row < model->rowCount(); ++row)
        texts << model->index(row, AttemptsModel::Summary).data().toString();
    return texts;
}

QList<QByteArray> listedKeys(const EventsModel *model)
{
    QList<QByteArray> keys;
    for (int row = 0; row < model->rowCount(); ++row)
        keys << model->event(row).sendKey;
    std::sort(keys.begin(), keys.end());
    return keys;
}

QList<QByteArray> sorted(QList<QByteArray> keys)
{
    std::sort(keys.begin(), keys.end());
    return keys;
}

// RFC 4180 records of a whole file, for checking an export (quoted fields may hold commas).
QList<QStringList> parseCsv(const QString &text)
{
    QList<QStringList> records;
    QStringList fields;
    QString field;
    bool quoted = false;
    for (qsizetype i = 0; i < text.size(); ++i) {
        const QChar c = text.at(i);
        if (quoted) {
            if (c == u'"' && i + 1 < text.size() && text.at(i + 1) == u'"') {
                field += u'"';
                ++i;
            } else if (c == u'"') {
                quoted = false;
            } else {
                field += c;
            }
        } else if (c == u'"') {
            quoted = true;
        } else if (c == u',') {
            fields << field;
            field.clear();
        } else if (c == u'\r' && i + 1 < text.size() && text.at(i + 1) == u'\n') {
            fields << field;
            records << fields;
            fields.clear();
            field.clear();
            ++i;
        } else {
            field += c;
        }
    }
    return records;
}

} // namespace

class TestOperatorActions : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void redriveAndDiscardAreInEachEventsHistory();
    void inDoubtDecisionsAreInEachEventsHistory();
    void deadLetterOpensFromItsEventExportsAndFiltersByRange();
    void readinessAssessment_data();
    void readinessAssessment();
    void redrivePreviewSaysWhoWouldSendThem();
    void closingWhileTheWorkerSendsDoesNotFreeze();
    void reasonIsOneLineOnTheCommandLine();

private:
    // Starts `once partner-sim ARGS --port 0`; its port, or 0.
    quint16 startPartner(const QStringList &args);
    QString partnerUrl(quint16 port) const { return QStringLiteral("http://127.0.0.1:%1/reminders").arg(port); }
    bool enqueue(const QString &name, const QList<Line> &lines);
    // Enqueues the lines and runs a worker until idle against a partner that fails every
    // send, with one attempt each: every line becomes a dead letter.
    bool deadLetter(const QString &name, const QList<Line> &lines);
    bool openConsole();
    QList<AuditEntry> auditEntries();
    template<typename T> T *waitForChild(QWidget *parent)
    {
        T *child = nullptr;
        if (!QTest::qWaitFor([&] { return (child = parent->findChild<T *>()) != nullptr; }, 10000))
            qWarning("no %s appeared", T::staticMetaObject.className());
        return child;
    }

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    QString m_url;
    std::unique_ptr<OnceRunner> m_once;
    quint16 m_failingPartner = 0;
    std::unique_ptr<MainWindow> m_window;
};

void TestOperatorActions::initTestCase()
{
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName(QStringLiteral("once"));
    QApplication::setApplicationName(QStringLiteral("once-operator-actions-test"));
    QLoggingCategory::setFilterRules(QStringLiteral("once.*.debug=false\nonce.*.info=false"));
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    Settings settings;
    settings.setIdempotencyWindowHours(24);
    settings.setRedriveRate(1000);
}

void TestOperatorActions::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_url = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_url);
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
    m_failingPartner = startPartner({QStringLiteral("--fail-rate"), QStringLiteral("1")});
    QVERIFY(m_failingPartner);
}

void TestOperatorActions::cleanup()
{
    if (m_window && m_window->engine()->state() != EngineController::State::Stopped) {
        m_window->engine()->stop();
        if (!QTest::qWaitFor([this] { return m_window->engine()->state() == EngineController::State::Stopped; }, 20000))
            qWarning("the console's engine did not stop within 20 s");
    }
    m_window.reset();
    m_once.reset();
    m_dir.reset();
}

quint16 TestOperatorActions::startPartner(const QStringList &args)
{
    return m_once->startPartnerSim(args);
}

bool TestOperatorActions::enqueue(const QString &name, const QList<Line> &lines)
{
    QByteArray content;
    for (const Line &line : lines)
        content += line.json + '\n';
    const QString path = m_dir->filePath(name + QStringLiteral(".jsonl"));
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(content) != content.size())
        return false;
    file.close();
    const auto result = m_once->run({QStringLiteral("enqueue"), path});
    if (!result.exitedWith(0))
        qWarning("%s", result.describe().constData());
    return result.exitedWith(0);
}

bool TestOperatorActions::deadLetter(const QString &name, const QList<Line> &lines)
{
    if (!enqueue(name, lines))
        return false;
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(m_failingPartner),
                                      QStringLiteral("--max-attempts"), QStringLiteral("1"), QStringLiteral("--until-idle"),
                                      QStringLiteral("--worker-id"), QStringLiteral("outage-") + name});
    const auto result = m_once->waitFor(worker, WorkerTimeoutMs);
    m_once->release(worker);
    if (!result.finished) {
        qWarning("%s", result.describe().constData());
        return false;
    }
    return true;
}

bool TestOperatorActions::openConsole()
{
    m_window = std::make_unique<MainWindow>();
    m_window->resize(1280, 820);
    m_window->show();
    m_window->openStore(m_url);
    QSignalSpy opened(m_window->session(), &StoreSession::opened);
    if (!opened.wait(20000) || !opened.constFirst().at(0).toBool()) {
        qWarning("the console did not open the store");
        return false;
    }
    return true;
}

QList<AuditEntry> TestOperatorActions::auditEntries()
{
    // As the console reads them.
    StoreSession *session = m_window->session();
    QSignalSpy loaded(session, &StoreSession::auditLoaded);
    const quint64 token = session->loadAudit(100);
    QList<AuditEntry> entries;
    (void)QTest::qWaitFor(
        [&] {
            for (const auto &args : std::as_const(loaded)) {
                if (args.at(0).toULongLong() == token) {
                    entries = args.at(1).value<QList<AuditEntry>>();
                    return true;
                }
            }
            return false;
        },
        10000);
    return entries;
}

// --- item 7: operator actions in the audit log and in each event's history -----------------

void TestOperatorActions::redriveAndDiscardAreInEachEventsHistory()
{
    const QList<Line> lines = plainLines(QStringLiteral("out"), 8);
    const QList<QByteArray> keys = keysOf(lines);
    QVERIFY(deadLetter(QStringLiteral("outage"), lines));
    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    const QString me = currentUserName();

    // The console redrives three, selected, at 20/s with a reason.
    auto *deadLetters = window.page<DeadLettersPage>();
    window.showPage(deadLetters);
    auto *table = deadLetters->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE_WITH_TIMEOUT(table->model()->rowCount(), 8, 10000);
    const QList<QByteArray> redriven = keys.mid(0, 3);
    selectKeys(table, DeadLettersModel::SendKey, DeadLettersModel::RawRole, redriven);
    deadLetters->findChild<QAction *>(QStringLiteral("redriveSelected"))->trigger();
    auto *dialog = waitForChild<RedriveDialog>(deadLetters);
    QVERIFY(dialog);
    dialog->setRatePerSecond(20);
    dialog->findChild<QLineEdit *>(QStringLiteral("reason"))->setText(QStringLiteral("partner back, INC-4711"));
    QSignalSpy redriveFinished(window.session(), &StoreSession::redriveFinished);
    dialog->redriveButton()->click();
    QVERIFY(redriveFinished.wait(10000));
    QCOMPARE(redriveFinished.constFirst().at(1).value<RedriveResult>().moved, 3);

    // It discards two with a reason, after a confirmation that asks for one.
    const QList<QByteArray> discarded = keys.mid(3, 2);
    QTRY_COMPARE(table->model()->rowCount(), 5);
    selectKeys(table, DeadLettersModel::SendKey, DeadLettersModel::RawRole, discarded);
    deadLetters->findChild<QAction *>(QStringLiteral("discard"))->trigger();
    auto *decision = waitForChild<DecisionDialog>(deadLetters);
    QVERIFY(decision);
    QVERIFY2(decision->text().contains(QLatin1String("Discard 2 dead letters?")), qPrintable(decision->text()));
    decision->findChild<QLineEdit *>(QStringLiteral("reason"))->setText(QStringLiteral("=test data, never real"));
    // Enter after the reason neither discards nor drops the reason.
    QTest::keyClick(decision->findChild<QLineEdit *>(QStringLiteral("reason")), Qt::Key_Return);
    QVERIFY(decision->isVisible());
    QSignalSpy operationFinished(window.session(), &StoreSession::operationFinished);
    decision->confirmButton()->click();
    QVERIFY(operationFinished.wait(10000));
    QVERIFY(operationFinished.constFirst().at(1).toBool());

    // The command line redrives the rest, with its own reason and rate.
    const auto cli = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--rate"),
                                  QStringLiteral("50"), QStringLiteral("--reason"), QStringLiteral("rest after the fix")});
    QVERIFY2(cli.exitedWith(0), cli.describe().constData());
    const QList<QByteArray> byCli = keys.mid(5);

    // The audit log: who, the keys or the filter, how many, the rate and the reason.
    const QList<AuditEntry> entries = auditEntries();
    QCOMPARE(entries.size(), 3);
    const AuditEntry &cliRow = entries.at(0);
    const AuditEntry &discardRow = entries.at(1);
    const AuditEntry &redriveRow = entries.at(2);
    QCOMPARE(redriveRow.action, QStringLiteral("redrive"));
    QCOMPARE(redriveRow.actor, me);
    QCOMPARE(redriveRow.count, qint64(3));
    QCOMPARE(redriveRow.ratePerSecond, 20);
    QCOMPARE(redriveRow.reason, QStringLiteral("partner back, INC-4711"));
    QVERIFY2(redriveRow.detail.startsWith(QLatin1String("keys ")), qPrintable(redriveRow.detail));
    for (const QByteArray &key : redriven)
        QVERIFY2(redriveRow.detail.contains(QString::fromLatin1(key)), qPrintable(redriveRow.detail));
    QCOMPARE(discardRow.action, QStringLiteral("discard"));
    QCOMPARE(discardRow.count, qint64(2));
    QCOMPARE(discardRow.ratePerSecond, 0);
    QCOMPARE(discardRow.reason, QStringLiteral("=test data, never real"));
    for (const QByteArray &key : discarded)
        QVERIFY2(discardRow.detail.contains(QString::fromLatin1(key)), qPrintable(discardRow.detail));
    QCOMPARE(cliRow.action, QStringLiteral("redrive"));
    QCOMPARE(cliRow.detail, QStringLiteral("all"));
    QCOMPARE(cliRow.count, qint64(3));
    QCOMPARE(cliRow.ratePerSecond, 50);
    QCOMPARE(cliRow.reason, QStringLiteral("rest after the fix"));

    // The Audit log page shows the rate and the reason.
    auto *auditPage = window.page<AuditPage>();
    window.showPage(auditPage);
    QTableView *auditView = auditPage->view();
    QTRY_COMPARE(auditView->model()->rowCount(), 3);
    int redriveViewRow = -1;
    for (int row = 0; row < 3; ++row) {
        if (auditView->model()->index(row, AuditModel::Number).data(Qt::UserRole).toLongLong() == redriveRow.id)
            redriveViewRow = row;
    }
    QVERIFY(redriveViewRow >= 0);
    QCOMPARE(auditView->model()->index(redriveViewRow, AuditModel::Rate).data().toString(), QStringLiteral("20/s"));
    QCOMPARE(auditView->model()->index(redriveViewRow, AuditModel::Reason).data().toString(),
             QStringLiteral("partner back, INC-4711"));

    // Each event's own story says who did what, under which audit row, and why.
    auto *events = window.page<EventsPage>();
    const auto storyOf = [&](const QByteArray &key) {
        window.showPage(events);
        events->showStory(key);
        if (!QTest::qWaitFor([&] { return events->storyLoaded() && events->storyKey() == key; }, 10000))
            qWarning("the story of %s did not load", key.constData());
        return summaries(events);
    };
    const QString redriveNote = QStringLiteral("Redriven by %1 (audit #%2): “partner back, INC-4711”")
                                    .arg(me)
                                    .arg(redriveRow.id);
    QStringList story = storyOf(redriven.at(1));
    QVERIFY2(story.contains(redriveNote), qPrintable(story.join(QLatin1Char('\n'))));
    story = storyOf(discarded.at(0));
    QVERIFY2(story.contains(QStringLiteral("Dead letter discarded by %1 (audit #%2): “=test data, never real”")
                                .arg(me)
                                .arg(discardRow.id)),
             qPrintable(story.join(QLatin1Char('\n'))));
    QVERIFY2(events->verdictText().contains(QLatin1String("discarded by ") + me), qPrintable(events->verdictText()));
    story = storyOf(byCli.at(2));
    QVERIFY2(story.contains(QStringLiteral("Redriven by %1 (audit #%2): “rest after the fix”")
                                .arg(me)
                                .arg(cliRow.id)),
             qPrintable(story.join(QLatin1Char('\n'))));
    // The exported story keeps the reason as text, formula-safe.
    const QString csvPath = m_dir->filePath(QStringLiteral("discarded.csv"));
    events->showStory(discarded.at(1));
    QTRY_VERIFY(events->storyLoaded() && events->storyKey() == discarded.at(1));
    QString error;
    QVERIFY2(events->exportHistory(csvPath, &error), qPrintable(error));
    QFile csv(csvPath);
    QVERIFY(csv.open(QIODevice::ReadOnly));
    QVERIFY(csv.readAll().contains(",\"'=test data, never real\""));

    // `once history` says the same.
    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(redriven.at(0))});
    QVERIFY2(history.exitedWith(0), history.describe().constData());
    QVERIFY2(history.out.contains(QStringLiteral("operator redriven  by=%1 audit=%2  (partner back, INC-4711)")
                                      .arg(me)
                                      .arg(redriveRow.id)
                                      .toUtf8()),
             history.out.constData());

    // Each audit row opens the events it touched: the discard's two, then the command
    // line's three; "Show all events" goes back to every one.
    window.showPage(auditPage);
    for (const auto &[entry, touched] : {std::pair{discardRow, discarded}, std::pair{cliRow, byCli}}) {
        int row = -1;
        for (int r = 0; r < auditView->model()->rowCount(); ++r) {
            if (auditView->model()->index(r, AuditModel::Number).data(Qt::UserRole).toLongLong() == entry.id)
                row = r;
        }
        QVERIFY(row >= 0);
        window.showPage(auditPage);
        auditView->selectRow(row);
        auto *showEvents = auditPage->findChild<QAction *>(QStringLiteral("showAuditEvents"));
        QVERIFY(auditView->actions().contains(showEvents)); // in the context menu
        QVERIFY(showEvents->isEnabled());
        showEvents->trigger();
        QVERIFY(events->isVisible());
        QCOMPARE(events->auditFilter(), entry.id);
        QTRY_COMPARE(listedKeys(events->eventsModel()), sorted(touched));
        auto *banner = events->findChild<QLabel *>(QStringLiteral("auditFilterLabel"));
        QVERIFY(banner->isVisible());
        QVERIFY2(banner->text().contains(QStringLiteral("audit #%1").arg(entry.id)), qPrintable(banner->text()));
    }
    // A double-click does the same.
    window.showPage(auditPage);
    const QModelIndex first = auditView->model()->index(0, AuditModel::What);
    const QRect cell = auditView->visualRect(first);
    QTest::mouseClick(auditView->viewport(), Qt::LeftButton, {}, cell.center());
    QTest::mouseDClick(auditView->viewport(), Qt::LeftButton, {}, cell.center());
    QTRY_VERIFY(events->isVisible());
    QCOMPARE(events->auditFilter(), first.siblingAtColumn(AuditModel::Number).data(Qt::UserRole).toLongLong());
    events->findChild<QPushButton *>(QStringLiteral("clearAuditFilter"))->click();
    QCOMPARE(events->auditFilter(), qint64(0));
    QTRY_COMPARE(listedKeys(events->eventsModel()), sorted(keys));
}

void TestOperatorActions::inDoubtDecisionsAreInEachEventsHistory()
{
    // A partner that accepts and then drops the connection: under the hold policy each send
    // waits in doubt for an operator.
    const quint16 dropping = startPartner({QStringLiteral("--drop-after-accept-rate"), QStringLiteral("1")});
    QVERIFY(dropping);
    const QList<Line> lines = plainLines(QStringLiteral("doubt"), 2);
    QVERIFY(enqueue(QStringLiteral("doubt"), lines));
    const auto worker = m_once->run({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(dropping),
                                     QStringLiteral("--in-doubt"), QStringLiteral("hold"), QStringLiteral("--until-idle")},
                                    {}, WorkerTimeoutMs);
    QVERIFY2(worker.finished, worker.describe().constData());
    QCOMPARE(m_once->stats().value(QStringLiteral("in_doubt")).toInt(), 2);
    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    const QString me = currentUserName();

    // The console marks one delivered, with a reason.
    auto *inDoubt = window.page<InDoubtPage>();
    window.showPage(inDoubt);
    auto *table = inDoubt->findChild<QTableView *>(QStringLiteral("inDoubt"));
    QTRY_COMPARE(table->model()->rowCount(), 2);
    selectKeys(table, InDoubtModel::SendKey, InDoubtModel::RawRole, {lines.at(0).key});
    inDoubt->findChild<QAction *>(QStringLiteral("markDelivered"))->trigger();
    auto *decision = waitForChild<DecisionDialog>(inDoubt);
    QVERIFY(decision);
    QVERIFY2(decision->informativeText().contains(QLatin1String("records a delivery that nobody saw")),
             qPrintable(decision->informativeText()));
    decision->findChild<QLineEdit *>(QStringLiteral("reason"))->setText(QStringLiteral("partner log shows it, req 77"));
    decision->confirmButton()->click();
    QTRY_COMPARE(table->model()->rowCount(), 1);

    // The command line resends the other, with its reason.
    const auto cli = m_once->run({QStringLiteral("resolve"), QString::fromLatin1(lines.at(1).key),
                                  QStringLiteral("--resend"), QStringLiteral("--reason"),
                                  QStringLiteral("not in the partner's log")});
    QVERIFY2(cli.exitedWith(0), cli.describe().constData());

    const QList<AuditEntry> entries = auditEntries();
    QCOMPARE(entries.size(), 2);
    QCOMPARE(entries.at(1).action, QStringLiteral("resolve-mark-delivered"));
    QCOMPARE(entries.at(1).reason, QStringLiteral("partner log shows it, req 77"));
    QCOMPARE(entries.at(1).detail, QString::fromLatin1(lines.at(0).key));
    QCOMPARE(entries.at(0).action, QStringLiteral("resolve-resend"));
    QCOMPARE(entries.at(0).reason, QStringLiteral("not in the partner's log"));

    auto *events = window.page<EventsPage>();
    window.showPage(events);
    events->showStory(lines.at(0).key);
    QTRY_VERIFY(events->storyLoaded() && events->storyKey() == lines.at(0).key);
    QStringList story = summaries(events);
    QVERIFY2(story.contains(QStringLiteral("%1 marked it delivered (audit #%2): “partner log shows it, req 77”")
                                .arg(me)
                                .arg(entries.at(1).id)),
             qPrintable(story.join(QLatin1Char('\n'))));
    events->showStory(lines.at(1).key);
    QTRY_VERIFY(events->storyLoaded() && events->storyKey() == lines.at(1).key);
    story = summaries(events);
    QVERIFY2(story.contains(QStringLiteral("%1 chose to resend with the same key (audit #%2): “not in the partner's log”")
                                .arg(me)
                                .arg(entries.at(0).id)),
             qPrintable(story.join(QLatin1Char('\n'))));
}

// --- item 13: from an event to its dead letter; export; a from-to range ---------------------

void TestOperatorActions::deadLetterOpensFromItsEventExportsAndFiltersByRange()
{
    // Two outages a few seconds apart; the second one's producer chose ids a spreadsheet
    // would run as formulas.
    const QList<Line> early = plainLines(QStringLiteral("early"), 3);
    QVERIFY(deadLetter(QStringLiteral("early"), early));
    QTest::qWait(2200);
    const QList<Line> late{
        reminderLine(QStringLiteral("late-user-0"), QStringLiteral("r"), QStringLiteral("=HYPERLINK(\"http://x\",\"y\")")),
        reminderLine(QStringLiteral("late-user-1"), QStringLiteral("r"), QStringLiteral("+cmd|' /C calc'!A0")),
        reminderLine(QStringLiteral("late-user-2"), QStringLiteral("r"), QStringLiteral("-2+3")),
        reminderLine(QStringLiteral("late-user-3"), QStringLiteral("r"), QStringLiteral("@SUM(1,2)")),
    };
    QVERIFY(deadLetter(QStringLiteral("late"), late));
    const QJsonArray dlq = m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    QCOMPARE(dlq.size(), 7);
    qint64 lastEarly = 0;
    qint64 firstLate = std::numeric_limits<qint64>::max();
    for (const QJsonValue &value : dlq) {
        const QJsonObject letter = value.toObject();
        const qint64 deadAt = QDateTime::fromString(letter.value(QStringLiteral("dead_at")).toString(), Qt::ISODateWithMs)
                                  .toMSecsSinceEpoch();
        if (letter.value(QStringLiteral("key")).toString().startsWith(QLatin1String("early")))
            lastEarly = std::max(lastEarly, deadAt);
        else
            firstLate = std::min(firstLate, deadAt);
    }
    // The range starts at the second of the late outage's first letter.
    const QDateTime from = QDateTime::fromMSecsSinceEpoch(firstLate - firstLate % 1000);
    QVERIFY2(lastEarly < from.toMSecsSinceEpoch(), "the outages were not apart");

    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    auto *deadLetters = window.page<DeadLettersPage>();
    auto *table = deadLetters->findChild<QTableView *>(QStringLiteral("deadLetters"));
    window.showPage(deadLetters);
    QTRY_COMPARE(table->model()->rowCount(), 7);

    // From an event's story to its dead letter, past the filters the page had.
    auto *time = deadLetters->findChild<QComboBox *>(QStringLiteral("timeFilter"));
    deadLetters->setTimeRange(from, QDateTime::currentDateTime().addSecs(60));
    QTRY_COMPARE(table->model()->rowCount(), 4);
    auto *events = window.page<EventsPage>();
    window.showPage(events);
    events->showStory(early.at(1).key);
    QTRY_VERIFY(events->storyLoaded() && events->storyKey() == early.at(1).key);
    auto *openDeadLetter = events->findChild<QPushButton *>(QStringLiteral("openDeadLetter"));
    QVERIFY(openDeadLetter->isVisible());
    QVERIFY(openDeadLetter->isEnabled());
    openDeadLetter->click();
    QVERIFY(deadLetters->isVisible());
    QTRY_COMPARE(table->model()->rowCount(), 7);
    QTRY_COMPARE(table->selectionModel()->selectedRows().size(), 1);
    QCOMPARE(table->selectionModel()->selectedRows().constFirst().siblingAtColumn(DeadLettersModel::SendKey)
                 .data(DeadLettersModel::RawRole)
                 .toByteArray(),
             early.at(1).key);
    QCOMPARE(time->currentData().toLongLong(), qint64(0)); // any time again

    // A from-to range picks exactly the second outage; a range that ends before it starts
    // is refused in words.
    auto *fromEdit = deadLetters->findChild<QLineEdit *>(QStringLiteral("diedFrom"));
    auto *toEdit = deadLetters->findChild<QLineEdit *>(QStringLiteral("diedTo"));
    time->setCurrentIndex(time->findData(qint64(-1)));
    QVERIFY(fromEdit->isVisible());
    QVERIFY(toEdit->isVisible());
    deadLetters->setTimeRange(from, QDateTime::currentDateTime().addSecs(60));
    QTRY_COMPARE(table->model()->rowCount(), 4);
    for (int row = 0; row < 4; ++row)
        QVERIFY(table->model()->index(row, DeadLettersModel::SendKey).data(DeadLettersModel::RawRole).toByteArray()
                    .startsWith("late"));
    deadLetters->setTimeRange(QDateTime::fromMSecsSinceEpoch(lastEarly).addSecs(-60), from.addSecs(-1));
    QTRY_COMPARE(table->model()->rowCount(), 3);
    deadLetters->setTimeRange(from, from.addSecs(-10));
    auto *status = deadLetters->findChild<QLabel *>(QStringLiteral("status"));
    QTRY_VERIFY2(status->text().contains(QLatin1String("The range ends before it starts")), qPrintable(status->text()));

    // The export takes every letter that matches the filters, as CSV with the formula
    // cells neutralised, and as JSON.
    deadLetters->setTimeRange(from, QDateTime::currentDateTime().addSecs(60));
    QTRY_COMPARE(table->model()->rowCount(), 4);
    QSignalSpy exported(deadLetters, &DeadLettersPage::exportFinished);
    const QString csvPath = m_dir->filePath(QStringLiteral("outage.csv"));
    deadLetters->exportTo(csvPath);
    QVERIFY(exported.wait(10000));
    QCOMPARE(exported.constFirst().at(1).toInt(), 4);
    QVERIFY2(exported.constFirst().at(2).toString().isEmpty(), qPrintable(exported.constFirst().at(2).toString()));
    QFile csvFile(csvPath);
    QVERIFY(csvFile.open(QIODevice::ReadOnly));
    const QList<QStringList> records = parseCsv(QString::fromUtf8(csvFile.readAll()));
    QCOMPARE(records.size(), 5);
    QCOMPARE(records.constFirst().mid(0, 4),
             (QStringList{QStringLiteral("message_id"), QStringLiteral("key"), QStringLiteral("event_id"),
                          QStringLiteral("error_class")}));
    QStringList eventIds;
    for (const QStringList &record : records.mid(1)) {
        QCOMPARE(record.size(), records.constFirst().size());
        eventIds << record.at(2);
        QCOMPARE(record.at(3), QStringLiteral("http-5xx"));
    }
    eventIds.sort();
    QCOMPARE(eventIds, (QStringList{QStringLiteral("'+cmd|' /C calc'!A0"), QStringLiteral("'-2+3"),
                                    QStringLiteral("'=HYPERLINK(\"http://x\",\"y\")"), QStringLiteral("'@SUM(1,2)")}));
    for (const QStringList &record : records) {
        for (const QString &field : record)
            QVERIFY2(field.isEmpty() || !QStringLiteral("=+-@\t\r").contains(field.front()), qPrintable(field));
    }
    exported.clear();
    const QString jsonPath = m_dir->filePath(QStringLiteral("outage.json"));
    deadLetters->exportTo(jsonPath);
    QVERIFY(exported.wait(10000));
    QFile jsonFile(jsonPath);
    QVERIFY(jsonFile.open(QIODevice::ReadOnly));
    const QJsonArray array = QJsonDocument::fromJson(jsonFile.readAll()).array();
    QCOMPARE(array.size(), 4);
    QStringList jsonIds;
    for (const QJsonValue &value : array)
        jsonIds << value.toObject().value(QStringLiteral("event_id")).toString();
    jsonIds.sort();
    QCOMPARE(jsonIds.constFirst(), QStringLiteral("+cmd|' /C calc'!A0")); // JSON keeps the value as it is
    QVERIFY2(status->text().startsWith(QLatin1String("Exported 4 dead letters to")), qPrintable(status->text()));

    // An event whose dead letter went (discarded): the page says so rather than showing nothing.
    window.showPage(deadLetters);
    selectKeys(table, DeadLettersModel::SendKey, DeadLettersModel::RawRole, {late.at(0).key});
    deadLetters->findChild<QAction *>(QStringLiteral("discard"))->trigger();
    auto *decision = waitForChild<DecisionDialog>(deadLetters);
    QVERIFY(decision);
    QSignalSpy discardDone(window.session(), &StoreSession::operationFinished);
    decision->confirmButton()->click();
    QVERIFY(discardDone.wait(10000));
    window.showPage(events);
    events->showStory(late.at(0).key);
    QTRY_VERIFY(events->storyLoaded() && events->storyKey() == late.at(0).key);
    openDeadLetter->click();
    QTRY_VERIFY2(status->text().contains(QLatin1String("No dead letter has send key")), qPrintable(status->text()));
    QVERIFY(table->selectionModel()->selectedRows().isEmpty());
    // An event that is not dead has no dead letter to open.
    const auto redrive = m_once->run({QStringLiteral("redrive"), QStringLiteral("--key"), QString::fromLatin1(late.at(1).key)});
    QVERIFY2(redrive.exitedWith(0), redrive.describe().constData());
    window.showPage(events);
    events->showStory(late.at(1).key);
    QTRY_VERIFY(events->storyLoaded() && events->storyKey() == late.at(1).key);
    QVERIFY(!openDeadLetter->isEnabled());
}

// --- item 14: the redrive preview says whether anything would send the letters ---------------

void TestOperatorActions::readinessAssessment_data()
{
    QTest::addColumn<QStringList>("statuses"); // of the workers on the store
    QTest::addColumn<int>("sends");
    QTest::addColumn<int>("failed");
    QTest::addColumn<QString>("workersText");
    QTest::addColumn<QString>("partnerStart");
    QTest::addColumn<int>("severity");
    QTest::addColumn<QString>("warningStart");

    const int none = int(RedriveReadiness::Severity::None);
    const int caution = int(RedriveReadiness::Severity::Caution);
    const int warning = int(RedriveReadiness::Severity::Warning);
    QTest::newRow("worker, partner answering") << QStringList{QStringLiteral("running")} << 40 << 2
                                               << QStringLiteral("1 running on this store")
                                               << QStringLiteral("answering: last minute 40 sends, 2 failed") << none
                                               << QString();
    QTest::newRow("worker, partner quiet") << QStringList{QStringLiteral("running"), QStringLiteral("running")} << 0 << 0
                                           << QStringLiteral("2 running on this store")
                                           << QStringLiteral("not known: no sends in the last minute") << none
                                           << QString();
    QTest::newRow("worker, partner failing") << QStringList{QStringLiteral("running")} << 12 << 12
                                             << QStringLiteral("1 running on this store")
                                             << QStringLiteral("not answering: last minute 12 sends, all failed")
                                             << warning << QStringLiteral("<b>The partner is not answering:</b>");
    QTest::newRow("no worker, partner answering") << QStringList{QStringLiteral("stopped")} << 5 << 0
                                                  << QStringLiteral("none running on this store")
                                                  << QStringLiteral("answering: last minute 5 sends, 0 failed")
                                                  << caution << QStringLiteral("No worker runs on this store");
    QTest::newRow("neither, partner failing") << QStringList{QStringLiteral("gone")} << 1 << 1
                                              << QStringLiteral("none running on this store")
                                              << QStringLiteral("not answering: last minute 1 send, all failed")
                                              << warning << QStringLiteral("<b>Nothing will deliver these now.</b> No worker");
    QTest::newRow("neither, partner quiet") << QStringList{} << 0 << 0 << QStringLiteral("none running on this store")
                                            << QStringLiteral("not known") << warning
                                            << QStringLiteral("<b>Nothing will deliver these now.</b> No worker");
    QTest::newRow("worker holding back") << QStringList{QStringLiteral("holding")} << 0 << 0
                                         << QStringLiteral("1 running on this store, all holding back (circuit breaker open)")
                                         << QStringLiteral("not known") << warning
                                         << QStringLiteral("<b>The workers are holding back:</b> their circuit breakers");
    QTest::newRow("one of two holding back") << QStringList{QStringLiteral("holding"), QStringLiteral("running")} << 4 << 1
                                             << QStringLiteral("2 running on this store, 1 holding back (circuit breaker open)")
                                             << QStringLiteral("answering") << none << QString();
    QTest::newRow("paused only") << QStringList{QStringLiteral("paused")} << 3 << 0
                                 << QStringLiteral("none running on this store (1 paused)")
                                 << QStringLiteral("answering") << caution << QStringLiteral("No worker runs");
}

void TestOperatorActions::readinessAssessment()
{
    QFETCH(QStringList, statuses);
    QFETCH(int, sends);
    QFETCH(int, failed);
    QFETCH(QString, workersText);
    QFETCH(QString, partnerStart);
    QFETCH(int, severity);
    QFETCH(QString, warningStart);
    const qint64 now = nowMs();
    QList<WorkerRecord> workers;
    for (const QString &status : statuses) {
        WorkerRecord worker;
        worker.id = QStringLiteral("w%1").arg(workers.size());
        const bool running = status == QLatin1String("gone") || status == QLatin1String("holding");
        worker.state = running ? QStringLiteral("running") : status;
        if (status == QLatin1String("holding")) {
            worker.breaker = QStringLiteral("open");
            worker.failingSinceMs = now - 90000;
        }
        worker.heartbeatAtMs = status == QLatin1String("gone") ? now - 60000 : now - 1000;
        workers << worker;
    }
    PartnerActivity partner;
    partner.sinceMs = now - 60000;
    partner.sends = sends;
    partner.failed = failed;
    partner.lastAcceptedAtMs = sends > failed ? now - 2000 : 0;
    const RedriveReadiness readiness = assessRedriveReadiness(workers, partner, now);
    QCOMPARE(readiness.workersText, workersText);
    QVERIFY2(readiness.partnerText.startsWith(partnerStart), qPrintable(readiness.partnerText));
    QCOMPARE(int(readiness.severity), severity);
    QVERIFY2(warningStart.isEmpty() ? readiness.warning.isEmpty() : readiness.warning.startsWith(warningStart),
             qPrintable(readiness.warning));
}

void TestOperatorActions::redrivePreviewSaysWhoWouldSendThem()
{
    // An outage dead-letters six; its worker has exited.
    const QList<Line> lines = plainLines(QStringLiteral("pre"), 6);
    QVERIFY(deadLetter(QStringLiteral("preview"), lines));
    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    auto *deadLetters = window.page<DeadLettersPage>();
    window.showPage(deadLetters);
    auto *table = deadLetters->findChild<QTableView *>(QStringLiteral("deadLetters"));
    QTRY_COMPARE(table->model()->rowCount(), 6);

    // No worker runs and the last minute's sends all failed: the preview warns.
    table->selectAll();
    deadLetters->findChild<QAction *>(QStringLiteral("redriveSelected"))->trigger();
    RedriveDialog *dialog = waitForChild<RedriveDialog>(deadLetters);
    QVERIFY(dialog);
    QTRY_VERIFY(dialog->readinessKnown());
    QCOMPARE(dialog->workersText(), QStringLiteral("none running on this store"));
    QVERIFY2(dialog->partnerText().startsWith(QLatin1String("not answering: last minute 6 sends, all failed; none "
                                                            "accepted in the last day")),
             qPrintable(dialog->partnerText()));
    QVERIFY2(dialog->readinessWarning().startsWith(QLatin1String("<b>Nothing will deliver these now.</b>")),
             qPrintable(dialog->readinessWarning()));
    QVERIFY(dialog->findChild<QLabel *>(QStringLiteral("readinessWarning"))->isVisible());

    // A worker starts on the store, delivering to a partner that answers; fresh reminders
    // go through it. The open preview catches up on the page's next refresh.
    const quint16 healthy = startPartner({});
    QVERIFY(healthy);
    QProcess *worker = m_once->start({QStringLiteral("worker"), QStringLiteral("--partner"), partnerUrl(healthy),
                                      QStringLiteral("--worker-id"), QStringLiteral("recovered")});
    QVERIFY(enqueue(QStringLiteral("fresh"), plainLines(QStringLiteral("fresh"), 3)));
    QTRY_COMPARE_WITH_TIMEOUT(m_once->stats().value(QStringLiteral("acked")).toInt(), 3, 30000);
    QTRY_VERIFY_WITH_TIMEOUT(
        [&] {
            deadLetters->refresh();
            return dialog->workersText() == QLatin1String("1 running on this store")
                   && dialog->partnerText().startsWith(QLatin1String("answering: last minute 9 sends, 6 failed; last accepted"));
        }(),
        15000);
    QCOMPARE(dialog->readinessWarning(), QString());
    QVERIFY(!dialog->findChild<QLabel *>(QStringLiteral("readinessWarning"))->isVisible());
    dialog->reject();
    worker->terminate();
    QVERIFY(worker->waitForFinished(20000));
}

// --- item 21: closing while the console's worker sends --------------------------------------

void TestOperatorActions::closingWhileTheWorkerSendsDoesNotFreeze()
{
    // Each send takes the partner three seconds.
    const quint16 slow = startPartner({QStringLiteral("--latency-ms"), QStringLiteral("3000")});
    QVERIFY(slow);
    QVERIFY(enqueue(QStringLiteral("slow"), plainLines(QStringLiteral("slow"), 4)));
    QVERIFY(openConsole());
    MainWindow &window = *m_window;
    EngineConfig config;
    config.storeUrl = m_url;
    config.partnerUrl = QUrl(partnerUrl(slow));
    config.workerId = QStringLiteral("console-closing");
    config.concurrency = 4;
    config.requestTimeoutMs = 10000;
    config.idlePollMs = 50;
    window.engine()->start(config);
    QTRY_VERIFY_WITH_TIMEOUT(window.engine()->counters().inFlight >= 1, 15000);

    // The event loop's pulse while the window closes: a 20 ms timer and the longest gap.
    QElapsedTimer pulse;
    qint64 longestGapMs = 0;
    QTimer beat;
    connect(&beat, &QTimer::timeout, this, [&] {
        longestGapMs = std::max(longestGapMs, pulse.restart());
    });
    pulse.start();
    beat.start(20);

    QElapsedTimer closing;
    closing.start();
    window.close();
    QVERIFY2(closing.elapsed() < 500, qPrintable(QString::number(closing.elapsed())));
    // The window waits for the engine, says so, and stays responsive.
    QVERIFY(window.isVisible());
    QVERIFY(window.isClosingAfterEngine());
    auto *note = window.findChild<QProgressDialog *>(QStringLiteral("stoppingNote"));
    QVERIFY(note);
    QTRY_VERIFY(note->isVisible());
    QVERIFY2(note->labelText().contains(QLatin1String("in flight finish")), qPrintable(note->labelText()));
    QVERIFY(window.findChild<QPushButton *>(QStringLiteral("quitWithoutWaiting")));
    QTRY_VERIFY_WITH_TIMEOUT(!window.isVisible(), 20000);
    const qint64 closedAfterMs = closing.elapsed();
    beat.stop();
    QCOMPARE(window.engine()->state(), EngineController::State::Stopped);
    QVERIFY2(longestGapMs < 500, qPrintable(QStringLiteral("the event loop stood still for %1 ms").arg(longestGapMs)));
    qInfo("closed %lld ms after the request; the longest gap in the event loop was %lld ms", closedAfterMs, longestGapMs);

    // The sends that were in flight finished and were recorded: nothing in doubt or claimed.
    const QJsonObject stats = m_once->stats();
    VERIFY_NO_PROBLEMS(statsProblems(stats, {{QStringLiteral("in_doubt"), 0}, {QStringLiteral("claimed"), 0}}));
    QVERIFY(stats.value(QStringLiteral("acked")).toInt() >= 1);

    // With the engine stopped, the window goes at once.
    QElapsedTimer destroying;
    destroying.start();
    m_window.reset();
    QVERIFY2(destroying.elapsed() < 1000, qPrintable(QString::number(destroying.elapsed())));
}

// --- the command line's reason --------------------------------------------------------------

void TestOperatorActions::reasonIsOneLineOnTheCommandLine()
{
    QVERIFY(deadLetter(QStringLiteral("cli"), plainLines(QStringLiteral("cli"), 1)));
    const auto twoLines = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--reason"),
                                       QStringLiteral("first\nsecond")});
    QVERIFY2(twoLines.exitedWith(2), twoLines.describe().constData());
    QVERIFY2(twoLines.err.contains("--reason must be one line"), twoLines.err.constData());
    const auto tooLong = m_once->run({QStringLiteral("redrive"), QStringLiteral("--all"), QStringLiteral("--reason"),
                                      QString(MaxReasonLength + 1, QLatin1Char('x'))});
    QVERIFY2(tooLong.exitedWith(2), tooLong.describe().constData());
    const auto backwards = m_once->run({QStringLiteral("redrive"), QStringLiteral("--since"),
                                        QStringLiteral("2026-01-02T00:00:00Z"), QStringLiteral("--until"),
                                        QStringLiteral("2026-01-01T00:00:00Z")});
    QVERIFY2(backwards.exitedWith(2), backwards.describe().constData());
    // Nothing moved, nothing audited.
    QCOMPARE(m_once->stats().value(QStringLiteral("dead")).toInt(), 1);
    QCOMPARE(storeRows(m_stores, m_url, QStringLiteral("SELECT COUNT(*) FROM audit_log")), QStringList{QStringLiteral("0")});
    // --until alone picks letters dead by then: none before 2020, one by now.
    const auto none = m_once->run({QStringLiteral("redrive"), QStringLiteral("--until"),
                                   QStringLiteral("2020-01-01T00:00:00Z"), QStringLiteral("--dry-run")});
    QVERIFY2(none.out.contains("dry run: 0 dead letters"), none.describe().constData());
    const auto one = m_once->run({QStringLiteral("redrive"), QStringLiteral("--until"),
                                  QDateTime::currentDateTimeUtc().addSecs(60).toString(Qt::ISODate),
                                  QStringLiteral("--reason"), QStringLiteral("all of the outage")});
    QVERIFY2(one.exitedWith(0) && one.out.contains("redrove 1 dead letter\n"), one.describe().constData());
    const QStringList audit =
        storeRows(m_stores, m_url, QStringLiteral("SELECT action, count, reason FROM audit_log"));
    QCOMPARE(audit, QStringList{QStringLiteral("redrive|1|all of the outage")});
}

QTEST_MAIN(TestOperatorActions)
#include "tst_operatoractions.moc"
