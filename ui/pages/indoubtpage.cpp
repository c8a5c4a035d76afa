#include "pages/indoubtpage.h"

#include "dialogs/decisiondialog.h"
#include "display/humanunits.h"
#include "models/indoubtmodel.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/readonlycontrols.h"

#include "store/database.h"
#include "store/workerregistry.h"

#include <QAction>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QStackedWidget>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

namespace once::ui {

namespace {

// Named for its columns: a layout saved for another set of columns (before "What is
// known" replaced "First sent") would put the old widths on the new ones.
const QString HeaderView = QStringLiteral("inDoubt.partnerSays");

QToolButton *actionButton(QAction *action)
{
    auto *button = new QToolButton;
    button->setDefaultAction(action);
    button->setToolButtonStyle(Qt::ToolButtonTextOnly);
    return button;
}

QString remindersText(int count)
{
    return formatQuantity(count, InDoubtPage::tr("reminder"), InDoubtPage::tr("reminders"));
}

} // namespace

InDoubtPage::InDoubtPage(QWidget *parent) : Page(parent)
{
    buildUi();
    updateActions();
    updateCounts();
    updateEmptyState();
}

InDoubtPage::~InDoubtPage()
{
    Settings().setHeaderState(HeaderView, m_table->horizontalHeader()->saveState());
}

void InDoubtPage::buildUi()
{
    m_model = new InDoubtModel(this);
    m_proxy = new QSortFilterProxyModel(this);
    m_proxy->setSourceModel(m_model);
    m_proxy->setSortRole(InDoubtModel::RawRole);

    auto *explanation = new QLabel(tr(
        "<p>These reminders were sent to the partner, but the worker stopped or lost the connection before "
        "it "
        "heard the answer. <b>The partner may have delivered them, or not.</b> Nothing more happens to them "
        "until "
        "you decide:</p>"
        "<ul style='margin-left: -20px'>"
        "<li><b>Resend with the same key</b> sends it again with its original Idempotency-Key. A partner "
        "that "
        "honours the key recognises it and does not deliver twice; a partner without idempotency delivers it "
        "again, so the user may get the reminder twice.</li>"
        "<li><b>Mark delivered</b> records it as delivered without sending. If the partner never got it, the "
        "user "
        "never gets this reminder.</li></ul>"
        "<p>When you can, look the send key up in the partner's request log first. For a partner with a "
        "lookup (a webhook's lookup, Postmark, SendGrid's Email Activity), <b>Check at partner</b> asks it "
        "now; workers ask on their own once the partner's grace period has passed.</p>"));
    explanation->setObjectName(QStringLiteral("explanation"));
    explanation->setWordWrap(true);
    explanation->setTextFormat(Qt::RichText);

    m_resendAction = new QAction(tr("Resend with the same key…"), this);
    m_resendAction->setObjectName(QStringLiteral("resend"));
    m_markDeliveredAction = new QAction(tr("Mark delivered…"), this);
    m_markDeliveredAction->setObjectName(QStringLiteral("markDelivered"));
    connect(m_resendAction, &QAction::triggered, this, [this] { confirmResolve(true); });
    connect(m_markDeliveredAction, &QAction::triggered, this, [this] { confirmResolve(false); });
    m_checkAction = new QAction(tr("Check at partner now"), this);
    m_checkAction->setObjectName(QStringLiteral("checkAtPartner"));
    m_checkAction->setToolTip(tr("Ask the partner's lookup whether it has the message sent with each selected key: "
                                 "found settles it delivered, with the partner's message id"));
    connect(m_checkAction, &QAction::triggered, this, &InDoubtPage::checkAtPartner);

    m_countLabel = new QLabel;
    m_countLabel->setObjectName(QStringLiteral("count"));
    auto *bar = new QHBoxLayout;
    bar->addWidget(m_countLabel, 1);
    bar->addWidget(actionButton(m_checkAction));
    bar->addWidget(actionButton(m_resendAction));
    bar->addWidget(actionButton(m_markDeliveredAction));

    m_table = new QTableView;
    m_table->setObjectName(QStringLiteral("inDoubt"));
    m_table->setModel(m_proxy);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_table->setSortingEnabled(true);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->setContextMenuPolicy(Qt::ActionsContextMenu);
    m_table->addActions({m_checkAction, m_resendAction, m_markDeliveredAction});
    QHeaderView *header = m_table->horizontalHeader();
    header->setSectionsMovable(true);
    header->setHighlightSections(false);
    header->setStretchLastSection(true); // what is known, the longest text
    if (!header->restoreState(Settings().headerState(HeaderView))) {
        const int time = m_table->fontMetrics().horizontalAdvance(QStringLiteral("0000-00-00 00:00:00")) + 24;
        m_table->setColumnWidth(InDoubtModel::SendKey, 260);
        m_table->setColumnWidth(InDoubtModel::EventId, 110);
        m_table->setColumnWidth(InDoubtModel::User, 110);
        m_table->setColumnWidth(InDoubtModel::Reminder, 130);
        m_table->setColumnWidth(InDoubtModel::Destination, 120);
        m_table->setColumnWidth(InDoubtModel::Since, time);
        m_table->setColumnWidth(InDoubtModel::Sends, 60);
        m_table->setColumnWidth(InDoubtModel::Reconciliation, 320);
        m_table->sortByColumn(InDoubtModel::Since, Qt::AscendingOrder);
    } else {
        // The restored indicator alone does not sort the rows.
        m_table->sortByColumn(header->sortIndicatorSection(), header->sortIndicatorOrder());
    }
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        updateActions();
        updateCounts();
    });

    m_emptyLabel = new QLabel;
    m_emptyLabel->setObjectName(QStringLiteral("emptyState"));
    m_emptyLabel->setAlignment(Qt::AlignCenter);
    m_emptyLabel->setWordWrap(true);
    m_emptyLabel->setTextFormat(Qt::RichText);
    m_stack = new QStackedWidget;
    m_stack->addWidget(m_table);
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

    connect(m_proxy, &QAbstractItemModel::rowsInserted, this, &InDoubtPage::updateEmptyState);
    connect(m_proxy, &QAbstractItemModel::rowsRemoved, this, &InDoubtPage::updateEmptyState);
    connect(m_proxy, &QAbstractItemModel::modelReset, this, &InDoubtPage::updateEmptyState);
}

void InDoubtPage::setSession(StoreSession *session)
{
    if (m_session)
        disconnect(m_session, nullptr, this, nullptr);
    m_session = session;
    m_loadToken = 0;
    m_loadPending = false;
    m_loaded = false;
    m_arriving.clear();
    m_pending.clear();
    m_model->setEvents({});
    setStatus(QString());
    if (session) {
        // Whether the store may be written is known once it is open.
        connect(session, &StoreSession::opened, this, &InDoubtPage::updateActions);
        connect(session, &StoreSession::inDoubtLoaded, this,
                [this](quint64 token, const QList<EventRow> &rows, bool complete) {
                    if (token != m_loadToken)
                        return;
                    m_arriving.append(rows);
                    // The first load shows each page as it comes; a reload keeps the rows
                    // shown until it has them all, so that none vanishes meanwhile.
                    if (!complete && m_loaded)
                        return;
                    m_model->setEvents(m_arriving);
                    if (complete) {
                        m_arriving.clear();
                        m_loadPending = false;
                        m_loaded = true;
                    }
                    updateActions();
                    updateCounts();
                    updateEmptyState();
                });
        connect(session, &StoreSession::failed, this, [this](quint64 token, const QString &error) {
            if (token == m_loadToken) {
                m_loadPending = false;
                setStatus(tr("Cannot load the events in doubt: %1").arg(error), true);
            } else if (m_pending.contains(token)) {
                onOperationFinished(token, false, error);
            }
        });
        connect(session, &StoreSession::operationFinished, this, &InDoubtPage::onOperationFinished);
        connect(session, &StoreSession::workersLoaded, this,
                [this](quint64 token, const QList<WorkerRecord> &workers) {
                    if (token == m_workersToken)
                        sayWhoSendsTheResent(workers);
                });
    }
    updateActions();
    updateCounts();
    updateEmptyState();
}

void InDoubtPage::refresh()
{
    // On a slow store, requests would pile up behind each other: one at a time.
    if (!m_loadPending)
        reload();
}

void InDoubtPage::reload()
{
    if (!m_session)
        return;
    m_arriving.clear();
    m_loadToken = m_session->loadInDoubt();
    m_loadPending = true;
}

QList<QByteArray> InDoubtPage::selectedKeys() const
{
    QModelIndexList rows = m_table->selectionModel()->selectedRows();
    std::sort(rows.begin(), rows.end(),
              [](const QModelIndex &a, const QModelIndex &b) { return a.row() < b.row(); });
    QList<QByteArray> keys;
    keys.reserve(rows.size());
    for (const QModelIndex &row : std::as_const(rows))
        keys.append(m_model->event(m_proxy->mapToSource(row).row()).sendKey);
    return keys;
}

void InDoubtPage::confirmResolve(bool resend)
{
    const QList<QByteArray> keys = selectedKeys();
    if (keys.isEmpty() || !m_session || !m_pending.isEmpty())
        return;
    const int count = int(keys.size());
    const QString countText = QLocale().toString(count);
    QString title, text, informative;
    if (resend) {
        title = tr("Resend with the same key");
        text = tr("Resend %1 with the same key?").arg(remindersText(count));
        informative = tr("Each is queued again and sent with its original Idempotency-Key. A "
                         "partner that honours the key answers "
                         "with its first result and does not deliver twice. <b>A partner without "
                         "idempotency delivers it again:</b> "
                         "if the first send did arrive, the user gets the reminder twice.");
    } else {
        title = tr("Mark delivered");
        text = tr("Mark %1 delivered without sending?").arg(remindersText(count));
        informative = tr("The ledger then records a delivery that nobody saw. <b>If the partner "
                         "never received the first send, "
                         "the user never gets this reminder</b>, and nothing will try again. Do "
                         "this when the partner's log, or "
                         "the user, confirms that it arrived.");
    }
    auto *dialog = new DecisionDialog(
        title, text, informative,
        resend ? tr("Resend %1").arg(countText) : tr("Mark %1 delivered").arg(countText), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this,
            [this, dialog, keys, resend] { resolve(keys, resend, dialog->reason()); });
    // Window-modal and not exec(): the refresh timer and the engine's counters keep going.
    dialog->open();
}

void InDoubtPage::resolve(const QList<QByteArray> &keys, bool resend, const QString &reason)
{
    if (!m_session || !m_pending.isEmpty())
        return;
    m_decision = resend ? Decision::Resend : Decision::MarkDelivered;
    m_succeeded = 0;
    m_failures.clear();
    for (const QByteArray &key : keys)
        m_pending.insert(m_session->resolve(key, resend, reason), key);
    setStatus(resend ? tr("Queueing %1 again under the same key…").arg(remindersText(int(keys.size())))
                     : tr("Marking %1 delivered…").arg(remindersText(int(keys.size()))));
    updateActions();
}

void InDoubtPage::checkAtPartner()
{
    const QList<QByteArray> keys = selectedKeys();
    if (keys.isEmpty() || !m_session || !m_pending.isEmpty())
        return;
    m_decision = Decision::Check;
    m_succeeded = 0;
    m_failures.clear();
    m_answers.clear();
    const QString partnersFile = Settings().partnersFile();
    for (const QByteArray &key : keys)
        m_pending.insert(m_session->checkAtPartner(key, partnersFile), key);
    setStatus(tr("Asking the partner about %1…").arg(remindersText(int(keys.size()))));
    updateActions();
}

void InDoubtPage::onOperationFinished(quint64 token, bool ok, const QString &message)
{
    const auto it = m_pending.constFind(token);
    if (it == m_pending.cend())
        return;
    if (ok)
        ++m_succeeded;
    else
        m_failures << QStringLiteral("%1: %2").arg(QString::fromLatin1(it.value()), message);
    if (ok && m_decision == Decision::Check)
        m_answers << QStringLiteral("%1: %2").arg(QString::fromLatin1(it.value()), message);
    m_pending.erase(it);
    if (!m_pending.isEmpty())
        return;
    const bool resent = m_decision == Decision::Resend;
    QString text = resent ? tr("%1 queued again under the same key.").arg(remindersText(m_succeeded))
                   : m_decision == Decision::MarkDelivered
                       ? tr("%1 marked delivered.").arg(remindersText(m_succeeded))
                       : tr("The partner answered for %1. %2").arg(remindersText(m_succeeded), m_answers.join(QStringLiteral("; ")));
    if (!m_failures.isEmpty())
        text += QLatin1Char(' ') +
                tr("%1 failed: %2")
                    .arg(QLocale().toString(m_failures.size()), m_failures.join(QStringLiteral("; ")));
    setStatus(text, !m_failures.isEmpty());
    // Who sends it next is the store's to tell, the console's own worker or any other.
    m_resolvedText = text;
    m_workersToken = resent && m_succeeded > 0 ? m_session->loadWorkers() : 0;
    updateActions();
    m_loadPending = false;
    reload();
}

void InDoubtPage::sayWhoSendsTheResent(const QList<WorkerRecord> &workers)
{
    m_workersToken = 0;
    const qint64 now = nowMs();
    const auto running = std::count_if(workers.cbegin(), workers.cend(), [now](const WorkerRecord &worker) {
        return worker.status(now) == QLatin1String("running");
    });
    const QString next =
        running > 0 ? tr("A running worker sends it next (%n running on this store).", nullptr, int(running))
                    : tr("It waits for a worker: none is running on this store. Start one (Worker page, "
                         "or once worker) to send it.");
    setStatus(m_resolvedText + QLatin1Char(' ') + next, !m_failures.isEmpty() || running == 0);
}

void InDoubtPage::updateActions()
{
    const bool enabled = m_session && m_pending.isEmpty() && m_table->selectionModel()->hasSelection();
    const QString readOnly = m_session ? m_session->readOnlyReason() : QString();
    enableUnlessReadOnly(m_resendAction, enabled, readOnly);
    enableUnlessReadOnly(m_markDeliveredAction, enabled, readOnly);
    enableUnlessReadOnly(m_checkAction, enabled, readOnly);
}

void InDoubtPage::updateCounts()
{
    const int count = m_model->rowCount();
    QString text = formatQuantity(count, tr("event in doubt"), tr("events in doubt"));
    if (!m_loaded && m_loadPending && count > 0)
        text += tr(", more loading…");
    if (const auto selected = m_table->selectionModel()->selectedRows().size(); selected > 0)
        text += tr("  ·  %1 selected").arg(QLocale().toString(selected));
    m_countLabel->setText(text);
}

void InDoubtPage::updateEmptyState()
{
    if (m_proxy->rowCount() > 0) {
        m_stack->setCurrentIndex(0);
        return;
    }
    const QString text = !m_session  ? tr("No store is open")
                         : !m_loaded ? tr("Loading…")
                                     : tr("Nothing is in doubt");
    m_emptyLabel->setText(
        QStringLiteral("<p style='font-size:15pt'>%1</p><p>%2</p>")
            .arg(text, tr("An event lands here only when the worker holds in-doubt events for an "
                          "operator (the hold policy, for a partner without idempotency).")));
    m_stack->setCurrentIndex(1);
}

void InDoubtPage::setStatus(const QString &text, bool problem)
{
    m_statusLabel->setText(text);
    m_statusLabel->setStyleSheet(problem ? QStringLiteral("color: #b00020") : QString());
}

} // namespace once::ui
