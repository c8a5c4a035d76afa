#include "pages/auditpage.h"

#include "display/humanunits.h"
#include "models/auditmodel.h"
#include "session/storesession.h"
#include "settings/settings.h"

#include <QAction>
#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QStackedWidget>
#include <QTableView>
#include <QVBoxLayout>

namespace once::ui {

namespace {
constexpr int AuditLimit = 500;
constexpr qint64 PendingTimeoutMs = 15000;
// Named anew when the columns change, so that a saved layout never misplaces them.
const QString HeaderStateKey = QStringLiteral("audit.reason");
} // namespace

AuditPage::AuditPage(QWidget *parent)
    : Page(parent), m_model(new AuditModel(this)), m_proxy(new QSortFilterProxyModel(this))
{
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(Qt::UserRole);
    m_proxy->setSortCaseSensitivity(Qt::CaseInsensitive);

    m_view = new QTableView;
    m_view->setObjectName(QStringLiteral("auditTable"));
    m_view->setModel(m_proxy);
    m_view->setSortingEnabled(true);
    m_view->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_view->setSelectionMode(QAbstractItemView::SingleSelection);
    m_view->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_view->setAlternatingRowColors(true);
    m_view->setWordWrap(false);
    m_view->verticalHeader()->hide();
    m_view->verticalHeader()->setDefaultSectionSize(m_view->fontMetrics().height() + 8);
    QHeaderView *header = m_view->horizontalHeader();
    header->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    header->setStretchLastSection(false);
    header->setSectionResizeMode(AuditModel::Detail, QHeaderView::Stretch);
    header->resizeSection(AuditModel::Number, 60);
    header->resizeSection(AuditModel::When, 160);
    header->resizeSection(AuditModel::Who, 100);
    header->resizeSection(AuditModel::What, 230);
    header->resizeSection(AuditModel::HowMany, 80);
    header->resizeSection(AuditModel::Rate, 70);
    header->resizeSection(AuditModel::Outcome,
                          m_view->fontMetrics().horizontalAdvance(QStringLiteral("000 delivered, 000 died again")) + 16);
    header->resizeSection(AuditModel::Reason, 220);
    m_view->sortByColumn(AuditModel::When, Qt::DescendingOrder);
    header->restoreState(Settings().headerState(HeaderStateKey));

    m_showEventsAction = new QAction(tr("Show events"), this);
    m_showEventsAction->setObjectName(QStringLiteral("showAuditEvents"));
    m_showEventsAction->setToolTip(tr("The events this action touched, on the Events page"));
    m_showEventsAction->setEnabled(false);
    connect(m_showEventsAction, &QAction::triggered, this, &AuditPage::showEvents);
    m_view->setContextMenuPolicy(Qt::ActionsContextMenu);
    m_view->addAction(m_showEventsAction);
    connect(m_view, &QAbstractItemView::doubleClicked, this, &AuditPage::showEvents);
    connect(m_view->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            [this] { m_showEventsAction->setEnabled(m_view->selectionModel()->hasSelection()); });

    m_placeholder = new QLabel;
    m_placeholder->setObjectName(QStringLiteral("emptyState"));
    m_placeholder->setAlignment(Qt::AlignCenter);
    m_placeholder->setWordWrap(true);
    m_summary = new QLabel;
    m_summary->setObjectName(QStringLiteral("auditSummary"));
    m_summary->setForegroundRole(QPalette::PlaceholderText);
    m_summary->setWordWrap(true);

    m_stack = new QStackedWidget;
    m_stack->addWidget(m_placeholder);
    m_stack->addWidget(m_view);
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_summary);
    layout->addWidget(m_stack, 1);
    showState();
}

AuditPage::~AuditPage()
{
    Settings().setHeaderState(HeaderStateKey, m_view->horizontalHeader()->saveState());
}

void AuditPage::showEvents()
{
    const QModelIndexList rows = m_view->selectionModel()->selectedRows();
    if (rows.isEmpty())
        return;
    emit eventsRequested(m_model->entry(m_proxy->mapToSource(rows.constFirst()).row()));
}

void AuditPage::setSession(StoreSession *session)
{
    // The previous session may already be gone, so its connections are dropped by handle.
    for (const auto &connection : std::as_const(m_sessionConnections))
        disconnect(connection);
    m_sessionConnections.clear();
    m_session = session;
    m_pendingToken = 0;
    m_loaded = false;
    m_loadError.clear();
    m_model->setEntries({});
    if (m_session) {
        m_sessionConnections << connect(m_session, &StoreSession::auditLoaded, this,
                                        &AuditPage::onAuditLoaded)
                             << connect(m_session, &StoreSession::failed, this, &AuditPage::onFailed);
    }
    showState();
}

void AuditPage::refresh()
{
    if (!m_session)
        return;
    if (m_pendingToken != 0 && m_pendingSince.elapsed() < PendingTimeoutMs)
        return;
    m_pendingToken = m_session->loadAudit(AuditLimit);
    m_pendingSince.start();
}

void AuditPage::onAuditLoaded(quint64 token, const QList<AuditEntry> &entries)
{
    if (token != m_pendingToken)
        return;
    m_pendingToken = 0;
    m_loaded = true;
    m_loadError.clear();
    m_model->setEntries(entries);
    showState();
}

void AuditPage::onFailed(quint64 token, const QString &error)
{
    if (token != m_pendingToken)
        return;
    m_pendingToken = 0;
    m_loadError = error;
    showState();
}

void AuditPage::showState()
{
    const qsizetype rows = m_model->rowCount();
    QString summary;
    if (!m_session) {
        m_placeholder->setText(tr("<h3>No store is open</h3><p>Open one with <b>File › Open Store…</b> "
                                  "to see who redrove, discarded or resolved what.</p>"));
    } else if (!m_loaded && m_loadError.isEmpty()) {
        m_placeholder->setText(tr("Loading the audit log…"));
    } else if (rows == 0) {
        m_placeholder->setText(
            m_loadError.isEmpty()
                ? tr("<h3>No operator actions yet</h3><p>Redrives, discards and decisions on "
                     "in-doubt events, from this console or the <code>once</code> command, "
                     "are recorded here.</p>")
                : tr("<h3>Cannot read the audit log</h3><p>%1</p>").arg(m_loadError.toHtmlEscaped()));
    }
    if (m_session && rows > 0) {
        summary = rows >= AuditLimit
                      ? tr("The latest %1 operator actions, newest first.").arg(formatCount(rows))
                  : rows == 1 ? tr("1 operator action.")
                              : tr("%1 operator actions.").arg(formatCount(rows));
        summary += QLatin1Char(' ') + tr("Double-click one to see the events it touched.");
        if (!m_loadError.isEmpty())
            summary += QLatin1Char(' ') + tr("Cannot refresh: %1").arg(m_loadError);
    }
    m_summary->setText(summary);
    m_summary->setVisible(!summary.isEmpty());
    m_stack->setCurrentIndex(rows > 0 ? 1 : 0);
}

} // namespace once::ui
