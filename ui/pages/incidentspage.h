#pragma once

#include "pages/page.h"

#include "alerting/incidentreport.h"

#include <QElapsedTimer>
#include <QHash>
#include <QPointer>

class QAction;
class QLabel;
class QStackedWidget;
class QTableView;
class QTextBrowser;

namespace once::ui {

class IncidentsModel;

// The alerts' lives as once watch records them: open incidents first (coloured by
// severity), then the latest resolved. An operator acknowledges one (others then see it
// is in hand), adds notes, resolves it, opens the events and dead letters of its window,
// and exports its report for a partner or a postmortem. Everything reads and writes
// through the session's reader thread.
class IncidentsPage final : public Page
{
    Q_OBJECT

public:
    explicit IncidentsPage(QWidget *parent = nullptr);
    ~IncidentsPage() override;

    QString title() const override { return tr("Incidents"); }
    void setSession(StoreSession *session) override;
    void refresh() override;

    IncidentsModel *incidentsModel() const { return m_model; }
    QTableView *incidentsView() const { return m_table; }
    // The incident selected, 0 when none.
    qint64 selectedId() const;
    void selectIncident(qint64 id);
    // The report shown in the detail pane (of the selected incident), once it has come.
    const std::optional<once::IncidentReport> &shownReport() const { return m_report; }
    // Writes incident id's report, read fresh from the store, to path: JSON for a .json
    // name, Markdown otherwise. reportExported follows.
    void exportReport(qint64 id, const QString &path);

signals:
    // Events in window / Dead letters in window: [sinceMs, untilMs], the incident's partner.
    void eventsRequested(qint64 sinceMs, qint64 untilMs, const QString &partner);
    void deadLettersRequested(qint64 sinceMs, qint64 untilMs, const QString &partner);
    // error empty: written.
    void reportExported(const QString &path, const QString &error);

private:
    void buildUi();
    void reload();
    void loadReport();
    const once::Incident *selected() const;
    void act(once::Incidents::Action action, const QString &note);
    void askNote(once::Incidents::Action action);
    void askExport();
    void writeReport(const once::IncidentReport &report, const QString &path);
    void showReport();
    void updateActions();
    void updateEmptyState();
    void setStatus(const QString &text, bool problem = false);

    QPointer<StoreSession> m_session;

    IncidentsModel *m_model = nullptr;
    QTableView *m_table = nullptr;
    QStackedWidget *m_stack = nullptr;
    QLabel *m_emptyLabel = nullptr;
    QLabel *m_countLabel = nullptr;
    QLabel *m_statusLabel = nullptr;
    QTextBrowser *m_detail = nullptr;
    QAction *m_ackAction = nullptr;
    QAction *m_noteAction = nullptr;
    QAction *m_resolveAction = nullptr;
    QAction *m_eventsAction = nullptr;
    QAction *m_deadLettersAction = nullptr;
    QAction *m_exportAction = nullptr;

    quint64 m_loadToken = 0;
    bool m_loadPending = false;
    bool m_loaded = false;
    quint64 m_reportToken = 0;
    std::optional<once::IncidentReport> m_report;
    QElapsedTimer m_reportAge; // since the last request for the selected one's report
    quint64 m_actToken = 0;
    QHash<quint64, QString> m_exports; // report requests for a file, by token: the path
};

} // namespace once::ui
