// The Incidents page: open incidents first, coloured by severity, then the resolved;
// Acknowledge, Add note… and Resolve… through its buttons change the store (audited); the
// report exports to a file; a read-only console cannot act; Events in window asks the
// Events page for the incident's window.
#include "alerting/incidents.h"
#include "display/statuscolors.h"
#include "models/eventsmodel.h"
#include "models/incidentsmodel.h"
#include "operator/operations.h"
#include "pages/eventspage.h"
#include "pages/incidentspage.h"
#include "session/storesession.h"
#include "store/store.h"

#include <QAbstractItemModelTester>
#include <QAction>
#include <QApplication>
#include <QDateTime>
#include <QInputDialog>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLoggingCategory>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QTableView>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>

using namespace once;
using namespace once::ui;

class TestUiIncidents : public QObject
{
    Q_OBJECT

private slots:
    void init();
    void cleanup();

    void openIncidentsComeFirstColouredBySeverity();
    void theButtonsAcknowledgeNoteAndResolve();
    void theReportExportsAsMarkdownAndJson();
    void aReadOnlyConsoleCannotAct();
    void eventsInWindowListsTheIncidentsWindow();

private:
    QList<Incident> record(const QList<AlertRule> &rules, qint64 nowMs,
                           qint64 clearAfterMs = 24 * 3600 * 1000);
    std::optional<Incident> incident(qint64 id);
    // A page on a session of the test's store, loaded.
    bool load(IncidentsPage &page, StoreSession &session);

    QTemporaryDir m_dir;
    QString m_url;
    std::unique_ptr<Store> m_store;
    qint64 m_resolved = 0; // incident ids
    qint64 m_critical = 0;
    qint64 m_warning = 0;
};

QList<Incident> TestUiIncidents::record(const QList<AlertRule> &rules, qint64 nowMs, qint64 clearAfterMs)
{
    QList<Alert> alerts;
    QStringList summaries;
    for (AlertRule rule : rules) {
        Alert alert;
        alert.rule = rule;
        alert.severity = rule == AlertRule::DeadLetters ? AlertSeverity::Critical : AlertSeverity::Warning;
        alert.sinceMs = nowMs;
        alert.value = 4;
        alert.threshold = 1;
        alerts << alert;
        summaries << QStringLiteral("%1 happened").arg(alertRuleName(rule));
    }
    QString error;
    const auto changes =
        Incidents(m_store->database()).record(alerts, summaries, nowMs, clearAfterMs, &error);
    if (!changes)
        qWarning("record: %s", qPrintable(error));
    return changes ? changes->opened : QList<Incident>();
}

std::optional<Incident> TestUiIncidents::incident(qint64 id)
{
    QString error;
    return Incidents(m_store->database()).get(id, &error);
}

void TestUiIncidents::init()
{
    QStandardPaths::setTestModeEnabled(true);
    QLoggingCategory::setFilterRules(
        QStringLiteral("once.core.database.debug=false\nonce.core.database.info=false"));
    QVERIFY2(m_dir.isValid(), qPrintable(m_dir.errorString()));
    m_url = QStringLiteral("sqlite:") +
            m_dir.filePath(QString::fromLatin1(QTest::currentTestFunction()) + QStringLiteral(".sqlite"));
    QString error;
    m_store = Store::open(m_url, &error);
    QVERIFY2(m_store, qPrintable(error));
    const qint64 now = QDateTime::currentMSecsSinceEpoch();
    const auto old = record({AlertRule::NoWorker}, now - 3600000);
    QCOMPARE(old.size(), 1);
    m_resolved = old.at(0).id;
    record({}, now - 1800000, 0); // it cleared by itself
    const auto open = record({AlertRule::DeadLetters}, now - 600000);
    const auto later = record({AlertRule::DeadLetters, AlertRule::OldestReady}, now - 300000);
    QCOMPARE(open.size(), 1);
    QCOMPARE(later.size(), 1);
    m_critical = open.at(0).id;
    m_warning = later.at(0).id;
}

void TestUiIncidents::cleanup()
{
    m_store.reset();
    QFile::remove(m_url.mid(int(qstrlen("sqlite:"))));
}

bool TestUiIncidents::load(IncidentsPage &page, StoreSession &session)
{
    page.setSession(&session);
    page.refresh();
    return QTest::qWaitFor([&] { return page.incidentsModel()->rowCount() == 3 && page.shownReport(); },
                           20000);
}

void TestUiIncidents::openIncidentsComeFirstColouredBySeverity()
{
    StoreSession session(m_url);
    IncidentsPage page;
    QAbstractItemModelTester tester(page.incidentsModel(),
                                    QAbstractItemModelTester::FailureReportingMode::QtTest);
    QVERIFY(load(page, session));
    IncidentsModel *model = page.incidentsModel();
    // Open ones, newest first, then the resolved.
    QCOMPARE(model->row(0).id, m_warning);
    QCOMPARE(model->row(1).id, m_critical);
    QCOMPARE(model->row(2).id, m_resolved);
    QCOMPARE(model->index(0, IncidentsModel::Status).data().toString(), QStringLiteral("Open"));
    QCOMPARE(model->index(2, IncidentsModel::Status).data().toString(), QStringLiteral("Resolved"));
    QVERIFY(model->index(0, IncidentsModel::Ended)
                .data()
                .toString()
                .startsWith(QStringLiteral("open for 5 min")));
    QVERIFY(model->index(2, IncidentsModel::Ended).data().toString().endsWith(QStringLiteral("(30 min)")));
    const QPalette palette = QGuiApplication::palette();
    QCOMPARE(model->index(1, IncidentsModel::Severity).data(Qt::ForegroundRole).value<QColor>(),
             severityTextColor(Severity::Alert, palette));
    QCOMPARE(model->index(0, IncidentsModel::Severity).data(Qt::ForegroundRole).value<QColor>(),
             severityTextColor(Severity::Warning, palette));
    QCOMPARE(model->index(2, IncidentsModel::Severity).data(Qt::ForegroundRole).value<QColor>(),
             palette.color(QPalette::Disabled, QPalette::Text));
    // The newest open one is selected and its report shown.
    QCOMPARE(page.selectedId(), m_warning);
    const QString detail = page.findChild<QTextBrowser *>(QStringLiteral("incidentDetail"))->toPlainText();
    QVERIFY2(detail.contains(QStringLiteral("Incident %1: Messages waiting too long").arg(m_warning)),
             qPrintable(detail));
    QVERIFY2(detail.contains(QStringLiteral("oldest-ready happened")), qPrintable(detail));
}

void TestUiIncidents::theButtonsAcknowledgeNoteAndResolve()
{
    StoreSession session(m_url);
    IncidentsPage page;
    QVERIFY(load(page, session));
    page.selectIncident(m_critical);
    QCOMPARE(page.selectedId(), m_critical);
    auto *ack = page.findChild<QAction *>(QStringLiteral("acknowledge"));
    auto *note = page.findChild<QAction *>(QStringLiteral("addNote"));
    auto *resolve = page.findChild<QAction *>(QStringLiteral("resolve"));
    QVERIFY(ack && note && resolve);
    QVERIFY(ack->isEnabled());
    ack->trigger();
    QTRY_VERIFY_WITH_TIMEOUT(incident(m_critical)->ackedAtMs > 0, 10000);
    QCOMPARE(incident(m_critical)->ackedBy, currentUserName());
    // The page reloads by itself: acknowledged, so no second acknowledge.
    QTRY_COMPARE(page.incidentsModel()
                     ->index(page.incidentsModel()->rowOf(m_critical), IncidentsModel::Status)
                     .data()
                     .toString(),
                 QStringLiteral("Acknowledged"));
    QTRY_VERIFY(!ack->isEnabled());

    note->trigger();
    auto *dialog = page.findChild<QInputDialog *>(QStringLiteral("incidentNoteDialog"));
    QVERIFY(dialog);
    dialog->setTextValue(QStringLiteral("partner says a fix is rolling out"));
    dialog->accept();
    QTRY_COMPARE_WITH_TIMEOUT(incident(m_critical)->notes.size(), 2, 10000);
    QCOMPARE(incident(m_critical)->notes.at(1).note, QStringLiteral("partner says a fix is rolling out"));
    QTRY_VERIFY(!page.findChild<QInputDialog *>(QStringLiteral("incidentNoteDialog"))); // closed and gone

    QTRY_VERIFY(resolve->isEnabled());
    resolve->trigger();
    QTRY_VERIFY(page.findChild<QInputDialog *>(QStringLiteral("incidentNoteDialog")));
    dialog = page.findChild<QInputDialog *>(QStringLiteral("incidentNoteDialog"));
    dialog->accept(); // no note: it is optional
    QTRY_VERIFY_WITH_TIMEOUT(!incident(m_critical)->isOpen(), 10000);
    QCOMPARE(incident(m_critical)->resolvedBy, currentUserName());

    QString error;
    const auto audit = m_store->inspector().auditLog(10, &error);
    QVERIFY(audit);
    QCOMPARE(audit->size(), 3);
    QCOMPARE(audit->at(0).action, QStringLiteral("incident-resolve"));
    QCOMPARE(audit->at(1).action, QStringLiteral("incident-note"));
    QCOMPARE(audit->at(2).action, QStringLiteral("incident-acknowledge"));
    // Resolved, it moves below the open one.
    QTRY_COMPARE(page.incidentsModel()->row(0).id, m_warning);
    QTRY_COMPARE(page.incidentsModel()->row(1).id, m_critical);
}

void TestUiIncidents::theReportExportsAsMarkdownAndJson()
{
    StoreSession session(m_url);
    IncidentsPage page;
    QVERIFY(load(page, session));
    QSignalSpy exported(&page, &IncidentsPage::reportExported);
    const QString markdown = m_dir.filePath(QStringLiteral("incident.md"));
    const QString json = m_dir.filePath(QStringLiteral("incident.json"));
    page.exportReport(m_resolved, markdown);
    page.exportReport(m_resolved, json);
    QTRY_COMPARE_WITH_TIMEOUT(exported.size(), 2, 10000);
    QCOMPARE(exported.at(0).at(1).toString(), QString());
    QCOMPARE(exported.at(1).at(1).toString(), QString());
    QFile md(markdown);
    QVERIFY(md.open(QIODevice::ReadOnly));
    const QByteArray text = md.readAll();
    QVERIFY2(text.startsWith(QStringLiteral("# Incident %1: No worker running\n").arg(m_resolved).toUtf8()),
             text.constData());
    QVERIFY2(text.contains("resolved by itself"), text.constData());
    QFile js(json);
    QVERIFY(js.open(QIODevice::ReadOnly));
    const QJsonObject report = QJsonDocument::fromJson(js.readAll()).object();
    QCOMPARE(report[QStringLiteral("incident")][QStringLiteral("id")].toInteger(), m_resolved);
    QCOMPARE(report[QStringLiteral("duration_ms")].toInteger(), 1800000);

    page.exportReport(999, m_dir.filePath(QStringLiteral("none.md")));
    QTRY_COMPARE_WITH_TIMEOUT(exported.size(), 3, 10000);
    QCOMPARE(exported.at(2).at(1).toString(), QStringLiteral("no incident 999 on this store"));
    QVERIFY(!QFile::exists(m_dir.filePath(QStringLiteral("none.md"))));
}

void TestUiIncidents::aReadOnlyConsoleCannotAct()
{
    StoreSession session(m_url, {}, StoreReader::IfMissing::Refuse, Database::Access::ReadOnly);
    IncidentsPage page;
    QVERIFY(load(page, session));
    QCOMPARE(page.selectedId(), m_warning);
    for (const char *name : {"acknowledge", "addNote", "resolve"}) {
        auto *action = page.findChild<QAction *>(QString::fromLatin1(name));
        QVERIFY(!action->isEnabled());
        QVERIFY2(action->toolTip().contains(QStringLiteral("Read-only")), qPrintable(action->toolTip()));
    }
    // Looking is allowed.
    QVERIFY(page.findChild<QAction *>(QStringLiteral("exportReport"))->isEnabled());
    QVERIFY(page.findChild<QAction *>(QStringLiteral("eventsInWindow"))->isEnabled());
}

void TestUiIncidents::eventsInWindowListsTheIncidentsWindow()
{
    StoreSession session(m_url);
    IncidentsPage page;
    QVERIFY(load(page, session));
    page.selectIncident(m_resolved);
    QSignalSpy asked(&page, &IncidentsPage::eventsRequested);
    page.findChild<QAction *>(QStringLiteral("eventsInWindow"))->trigger();
    QCOMPARE(asked.size(), 1);
    const auto found = incident(m_resolved);
    QCOMPARE(asked.at(0).at(0).toLongLong(), found->startedAtMs);
    QCOMPARE(asked.at(0).at(1).toLongLong(), found->resolvedAtMs);

    EventsPage events;
    events.setSession(&session);
    events.showTimeWindow(found->startedAtMs, found->resolvedAtMs);
    const EventFilter filter = events.eventsModel()->filter();
    QCOMPARE(filter.sinceMs, found->startedAtMs / 60000 * 60000);
    QCOMPARE(filter.untilMs, (found->resolvedAtMs / 60000 + 1) * 60000);
}

QTEST_MAIN(TestUiIncidents)
#include "tst_uiincidents.moc"
