#include "pages/incidentspage.h"

#include "display/humanunits.h"
#include "display/statuscolors.h"
#include "models/incidentsmodel.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/readonlycontrols.h"

#include <QAction>
#include <QDateTime>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QJsonDocument>
#include <QLabel>
#include <QSaveFile>
#include <QScrollBar>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTableView>
#include <QTextBrowser>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

namespace once::ui {

namespace {

const QString HeaderView = QStringLiteral("incidents.columns");
// Open ones and a good stretch of history; the store keeps them all.
constexpr int IncidentsShown = 200;
constexpr int ReportRefreshMs = 10000;

QToolButton *actionButton(QAction *action)
{
    auto *button = new QToolButton;
    button->setDefaultAction(action);
    button->setToolButtonStyle(Qt::ToolButtonTextOnly);
    return button;
}

} // namespace

IncidentsPage::IncidentsPage(QWidget *parent) : Page(parent)
{
    buildUi();
    updateActions();
    updateEmptyState();
}

IncidentsPage::~IncidentsPage()
{
    Settings().setHeaderState(HeaderView, m_table->horizontalHeader()->saveState());
}

void IncidentsPage::buildUi()
{
    m_model = new IncidentsModel(this);

    auto *explanation = new QLabel(
        tr("An incident is one alert's life: <b>once watch</b> opens it when a rule fires and resolves it "
           "when the "
           "condition has cleared. <b>Acknowledge</b> tells everyone on the store that someone is on it "
           "(reminders "
           "stop); notes and the operators' actions in its window make its report, for the partner or the "
           "postmortem."));
    explanation->setObjectName(QStringLiteral("explanation"));
    explanation->setWordWrap(true);
    explanation->setTextFormat(Qt::RichText);

    m_ackAction = new QAction(tr("Acknowledge"), this);
    m_ackAction->setObjectName(QStringLiteral("acknowledge"));
    m_ackAction->setToolTip(tr("Say that you are on it: every console and watcher on the store sees it"));
    m_noteAction = new QAction(tr("Add note…"), this);
    m_noteAction->setObjectName(QStringLiteral("addNote"));
    m_resolveAction = new QAction(tr("Resolve…"), this);
    m_resolveAction->setObjectName(QStringLiteral("resolve"));
    m_resolveAction->setToolTip(
        tr("Close it by hand; once watch opens a new one if the condition comes back"));
    m_eventsAction = new QAction(tr("Events in window"), this);
    m_eventsAction->setObjectName(QStringLiteral("eventsInWindow"));
    m_deadLettersAction = new QAction(tr("Dead letters in window"), this);
    m_deadLettersAction->setObjectName(QStringLiteral("deadLettersInWindow"));
    m_exportAction = new QAction(tr("Export report…"), this);
    m_exportAction->setObjectName(QStringLiteral("exportReport"));
    m_exportAction->setToolTip(
        tr("Its timeline, what it touched and what operators did, as Markdown or JSON"));
    connect(m_ackAction, &QAction::triggered, this, [this] { act(Incidents::Action::Acknowledge, {}); });
    connect(m_noteAction, &QAction::triggered, this, [this] { askNote(Incidents::Action::Note); });
    connect(m_resolveAction, &QAction::triggered, this, [this] { askNote(Incidents::Action::Resolve); });
    connect(m_eventsAction, &QAction::triggered, this, [this] {
        if (const Incident *incident = selected())
            emit eventsRequested(incident->startedAtMs,
                                 incident->isOpen() ? QDateTime::currentMSecsSinceEpoch()
                                                    : incident->resolvedAtMs,
                                 incident->partner);
    });
    connect(m_deadLettersAction, &QAction::triggered, this, [this] {
        if (const Incident *incident = selected())
            emit deadLettersRequested(incident->startedAtMs,
                                      incident->isOpen() ? QDateTime::currentMSecsSinceEpoch()
                                                         : incident->resolvedAtMs,
                                      incident->partner);
    });
    connect(m_exportAction, &QAction::triggered, this, &IncidentsPage::askExport);

    m_countLabel = new QLabel;
    m_countLabel->setObjectName(QStringLiteral("count"));
    auto *bar = new QHBoxLayout;
    bar->addWidget(m_countLabel, 1);
    for (QAction *action :
         {m_ackAction, m_noteAction, m_resolveAction, m_eventsAction, m_deadLettersAction, m_exportAction})
        bar->addWidget(actionButton(action));

    m_table = new QTableView;
    m_table->setObjectName(QStringLiteral("incidents"));
    m_table->setModel(m_model);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->setContextMenuPolicy(Qt::ActionsContextMenu);
    m_table->addActions(
        {m_ackAction, m_noteAction, m_resolveAction, m_eventsAction, m_deadLettersAction, m_exportAction});
    QHeaderView *header = m_table->horizontalHeader();
    header->setSectionsMovable(true);
    header->setHighlightSections(false);
    header->setStretchLastSection(true); // the summary, the longest text
    if (!header->restoreState(Settings().headerState(HeaderView))) {
        const int time = m_table->fontMetrics().horizontalAdvance(QStringLiteral("0000-00-00 00:00:00")) + 24;
        m_table->setColumnWidth(IncidentsModel::Id, 50);
        m_table->setColumnWidth(IncidentsModel::Status, 110);
        m_table->setColumnWidth(IncidentsModel::Severity, 80);
        m_table->setColumnWidth(IncidentsModel::Rule, 150);
        m_table->setColumnWidth(IncidentsModel::Partner, 120);
        m_table->setColumnWidth(IncidentsModel::Started, time);
        m_table->setColumnWidth(IncidentsModel::Ended, time + 120);
    }
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        m_report.reset();
        showReport();
        loadReport();
        updateActions();
    });

    m_emptyLabel =
        new QLabel(tr("<p>No incident on this store.</p><p>Incidents are recorded by <b>once watch</b>, "
                      "which evaluates the alert rules and notifies people.</p>"));
    m_emptyLabel->setObjectName(QStringLiteral("emptyState"));
    m_emptyLabel->setAlignment(Qt::AlignCenter);
    m_emptyLabel->setWordWrap(true);
    m_emptyLabel->setTextFormat(Qt::RichText);

    m_detail = new QTextBrowser;
    m_detail->setObjectName(QStringLiteral("incidentDetail"));
    m_detail->setOpenLinks(false);

    auto *splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(m_table);
    splitter->addWidget(m_detail);
    // A few rows above, the report (what the operator reads) below.
    splitter->setStretchFactor(0, 1);
    splitter->setStretchFactor(1, 2);
    m_stack = new QStackedWidget;
    m_stack->addWidget(splitter);
    m_stack->addWidget(m_emptyLabel);

    m_statusLabel = new QLabel;
    m_statusLabel->setObjectName(QStringLiteral("status"));
    m_statusLabel->setWordWrap(true);
    m_statusLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(explanation);
    layout->addLayout(bar);
    layout->addWidget(m_stack, 1);
    layout->addWidget(m_statusLabel);

    connect(m_model, &QAbstractItemModel::rowsInserted, this, &IncidentsPage::updateEmptyState);
    connect(m_model, &QAbstractItemModel::rowsRemoved, this, &IncidentsPage::updateEmptyState);
    connect(m_model, &QAbstractItemModel::modelReset, this, &IncidentsPage::updateEmptyState);
}

void IncidentsPage::setSession(StoreSession *session)
{
    if (m_session)
        disconnect(m_session, nullptr, this, nullptr);
    m_session = session;
    m_loadToken = 0;
    m_loadPending = false;
    m_loaded = false;
    m_reportToken = 0;
    m_actToken = 0;
    m_exports.clear();
    m_report.reset();
    m_model->setIncidents({}, QDateTime::currentMSecsSinceEpoch());
    showReport();
    setStatus(QString());
    if (session) {
        connect(session, &StoreSession::opened, this, &IncidentsPage::updateActions);
        connect(session, &StoreSession::incidentsLoaded, this,
                [this](quint64 token, const QList<Incident> &incidents) {
                    if (token != m_loadToken)
                        return;
                    m_loadPending = false;
                    m_model->setIncidents(incidents, QDateTime::currentMSecsSinceEpoch());
                    const qsizetype open =
                        std::count_if(incidents.cbegin(), incidents.cend(),
                                      [](const Incident &incident) { return incident.isOpen(); });
                    m_countLabel->setText(
                        tr("%1 open · %2 shown").arg(formatCount(open), formatCount(incidents.size())));
                    // The first look lands on the newest open one (or the latest of all).
                    if (!m_loaded && !incidents.isEmpty() && selectedId() == 0)
                        m_table->selectRow(0);
                    m_loaded = true;
                    updateActions();
                    updateEmptyState();
                });
        connect(session, &StoreSession::incidentReportLoaded, this,
                [this](quint64 token, const IncidentReport &report) {
                    if (const auto path = m_exports.take(token); !path.isNull()) {
                        writeReport(report, path);
                        return;
                    }
                    if (token != m_reportToken || report.incident.id != selectedId())
                        return;
                    m_report = report;
                    showReport();
                });
        connect(session, &StoreSession::operationFinished, this,
                [this](quint64 token, bool ok, const QString &message) {
                    if (token != m_actToken)
                        return;
                    m_actToken = 0;
                    setStatus(ok ? message + QLatin1Char('.') : tr("Could not do it: %1").arg(message), !ok);
                    updateActions();
                    reload();
                    loadReport();
                });
        connect(session, &StoreSession::failed, this, [this](quint64 token, const QString &error) {
            if (token == m_loadToken) {
                m_loadPending = false;
                setStatus(tr("Cannot load the incidents: %1").arg(error), true);
            } else if (const auto path = m_exports.take(token); !path.isNull()) {
                setStatus(tr("Could not export the report: %1").arg(error), true);
                emit reportExported(path, error);
            } else if (token == m_reportToken) {
                m_detail->setPlainText(tr("Cannot load this incident: %1").arg(error));
            }
        });
    }
    updateActions();
    updateEmptyState();
}

void IncidentsPage::refresh()
{
    // One request at a time: on a slow store they would pile up.
    if (!m_loadPending)
        reload();
    // The report counts the history of the incident's window, which grows with an open
    // one: every few refreshes is soon enough for what it adds.
    if (!m_reportAge.isValid() || m_reportAge.hasExpired(ReportRefreshMs))
        loadReport();
}

void IncidentsPage::reload()
{
    if (!m_session)
        return;
    m_loadToken = m_session->loadIncidents(IncidentsShown);
    m_loadPending = true;
}

void IncidentsPage::loadReport()
{
    if (!m_session)
        return;
    if (const qint64 id = selectedId()) {
        m_reportToken = m_session->loadIncidentReport(id);
        m_reportAge.start();
    }
}

qint64 IncidentsPage::selectedId() const
{
    const Incident *incident = selected();
    return incident ? incident->id : 0;
}

const Incident *IncidentsPage::selected() const
{
    const QModelIndexList rows = m_table->selectionModel()->selectedRows();
    if (rows.isEmpty())
        return nullptr;
    return &m_model->row(rows.constFirst().row());
}

void IncidentsPage::selectIncident(qint64 id)
{
    if (const int row = m_model->rowOf(id); row >= 0)
        m_table->selectRow(row);
}

void IncidentsPage::act(Incidents::Action action, const QString &note)
{
    const Incident *incident = selected();
    if (!incident || !m_session || m_actToken)
        return;
    m_actToken = m_session->actOnIncident(incident->id, action, note);
    setStatus(tr("Saving…"));
    updateActions();
}

void IncidentsPage::askNote(Incidents::Action action)
{
    const Incident *incident = selected();
    if (!incident)
        return;
    const bool resolving = action == Incidents::Action::Resolve;
    auto *dialog = new QInputDialog(this);
    dialog->setObjectName(QStringLiteral("incidentNoteDialog"));
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setWindowTitle(resolving ? tr("Resolve incident %1").arg(incident->id)
                                     : tr("Note on incident %1").arg(incident->id));
    dialog->setLabelText(resolving ? tr("Resolve it now? A note for its report and the audit log (optional):")
                                   : tr("A note for its report and the audit log:"));
    dialog->setOkButtonText(resolving ? tr("Resolve") : tr("Add note"));
    dialog->setInputMode(QInputDialog::TextInput);
    const qint64 id = incident->id;
    connect(dialog, &QDialog::accepted, this, [this, dialog, action, id] {
        const QString note = dialog->textValue().simplified();
        if (action == Incidents::Action::Note && note.isEmpty()) {
            setStatus(tr("A note needs some text."), true);
            return;
        }
        if (selectedId() != id)
            selectIncident(id);
        act(action, note);
    });
    // Window-modal and not exec(): the refreshes go on meanwhile.
    dialog->open();
}

void IncidentsPage::askExport()
{
    const Incident *incident = selected();
    if (!incident)
        return;
    const qint64 id = incident->id;
    const QString markdownFilter = tr("Markdown (*.md)");
    const QString jsonFilter = tr("JSON (*.json)");
    QString filter = markdownFilter;
    const QString folder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    QString chosen =
        QFileDialog::getSaveFileName(this, tr("Export report of incident %1").arg(id),
                                     QDir(folder).filePath(QStringLiteral("incident-%1.md").arg(id)),
                                     markdownFilter + QStringLiteral(";;") + jsonFilter, &filter);
    if (chosen.isEmpty())
        return;
    // The name says the format: a name without .md or .json takes the filter's.
    if (!chosen.endsWith(QLatin1String(".md"), Qt::CaseInsensitive) &&
        !chosen.endsWith(QLatin1String(".json"), Qt::CaseInsensitive))
        chosen += filter == jsonFilter ? QStringLiteral(".json") : QStringLiteral(".md");
    exportReport(id, chosen);
}

void IncidentsPage::exportReport(qint64 id, const QString &path)
{
    if (!m_session)
        return;
    m_exports.insert(m_session->loadIncidentReport(id), path);
    setStatus(tr("Exporting the report of incident %1…").arg(id));
}

void IncidentsPage::writeReport(const IncidentReport &report, const QString &path)
{
    const QByteArray text = path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive)
                                ? QJsonDocument(report.toJson()).toJson(QJsonDocument::Indented)
                                : report.toMarkdown().toUtf8();
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || file.write(text) != text.size() || !file.commit()) {
        const QString error = file.errorString();
        setStatus(tr("Could not write %1: %2").arg(path, error), true);
        emit reportExported(path, error);
        return;
    }
    setStatus(tr("Report of incident %1 written to %2.").arg(report.incident.id).arg(path));
    emit reportExported(path, {});
}

void IncidentsPage::showReport()
{
    if (!m_report) {
        m_detail->setPlainText(selected() ? tr("Loading…") : tr("Select an incident to see its timeline."));
        return;
    }
    // The report as exported: what the operator reads is what the partner will.
    const int scroll = m_detail->verticalScrollBar() ? m_detail->verticalScrollBar()->value() : 0;
    m_detail->setMarkdown(m_report->toMarkdown());
    m_detail->verticalScrollBar()->setValue(scroll);
}

void IncidentsPage::updateActions()
{
    const Incident *incident = selected();
    const QString readOnly = m_session ? m_session->readOnlyReason() : QString();
    const bool idle = m_session && m_actToken == 0;
    enableUnlessReadOnly(m_ackAction, idle && incident && incident->isOpen() && !incident->ackedAtMs,
                         readOnly);
    enableUnlessReadOnly(m_noteAction, idle && incident, readOnly);
    enableUnlessReadOnly(m_resolveAction, idle && incident && incident->isOpen(), readOnly);
    m_eventsAction->setEnabled(incident != nullptr);
    m_deadLettersAction->setEnabled(incident != nullptr);
    m_exportAction->setEnabled(m_session && incident);
}

void IncidentsPage::updateEmptyState()
{
    m_stack->setCurrentIndex(m_loaded && m_model->rowCount() == 0 ? 1 : 0);
}

void IncidentsPage::setStatus(const QString &text, bool problem)
{
    m_statusLabel->setText(text);
    m_statusLabel->setStyleSheet(
        problem ? QStringLiteral("color: %1").arg(severityTextColor(Severity::Alert, palette()).name())
                : QString());
}

} // namespace once::ui
