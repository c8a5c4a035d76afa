#include "pages/workerpage.h"

#include "display/humanunits.h"
#include "display/statuscolors.h"
#include "models/workersmodel.h"
#include "session/health.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/readonlycontrols.h"
#include "widgets/tile.h"

#include "delivery/partnersender.h"
#include "partners/partnersettings.h"
#include "store/database.h"

#include <QComboBox>
#include <QCoreApplication>
#include <QEvent>
#include <QFormLayout>
#include <QGridLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QHostInfo>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSortFilterProxyModel>
#include <QSpinBox>
#include <QStackedWidget>
#include <QTableView>
#include <QTableWidget>
#include <QVBoxLayout>

namespace once::ui {

namespace {

constexpr char TokenVariable[] = "ONCE_PARTNER_TOKEN";
const QString WorkersHeader = QStringLiteral("workers");
// A reload the store has not answered in this long is given up, so one lost answer
// does not stop the table for good.
constexpr qint64 PendingTimeoutMs = 30000;

Tile *makeTile(const QString &objectName, const QString &caption, const QString &subCaption)
{
    auto *tile = new Tile(caption);
    tile->setObjectName(objectName);
    tile->setSubCaption(subCaption);
    tile->setValue(formatCount(0));
    return tile;
}

QPushButton *makeButton(const QString &objectName, const QString &text)
{
    auto *button = new QPushButton(text);
    button->setObjectName(objectName);
    return button;
}

void setTextColour(QLabel *label, const QColor &colour)
{
    QPalette palette = label->palette();
    palette.setColor(QPalette::WindowText, colour);
    label->setPalette(palette);
}

} // namespace

WorkerPage::WorkerPage(EngineController *engine, QWidget *parent) : Page(parent), m_engine(engine)
{
    const Settings settings;
    m_url = new QLineEdit(settings.partnerUrl());
    m_url->setObjectName(QStringLiteral("partnerUrl"));
    m_url->setPlaceholderText(QStringLiteral("http://127.0.0.1:8080/reminders"));
    m_url->setClearButtonEnabled(true);
    m_partnersFile = new QLineEdit(settings.partnersFile());
    m_partnersFile->setObjectName(QStringLiteral("partnersFile"));
    m_partnersFile->setPlaceholderText(tr("optional: several partners routed by channel (docs/partners.md)"));
    m_partnersFile->setClearButtonEnabled(true);
    m_partnersFile->setToolTip(tr("A partners file: each partner's profile (webhook, resend, postmark, sendgrid, "
                                  "twilio, slack, smtp), limits and secrets (env:NAME or file:PATH), and the routes "
                                  "from a reminder's channel to its partner. When set, it replaces the URL."));
    m_urlError = new QLabel;
    m_urlError->setObjectName(QStringLiteral("urlError"));
    m_urlError->hide();
    m_concurrency = new QSpinBox;
    m_concurrency->setObjectName(QStringLiteral("concurrency"));
    m_concurrency->setRange(1, 1024);
    m_concurrency->setValue(settings.concurrency());
    m_concurrency->setSuffix(tr(" sends in flight"));
    m_maxAttempts = new QSpinBox;
    m_maxAttempts->setObjectName(QStringLiteral("maxAttempts"));
    m_maxAttempts->setRange(1, 100);
    m_maxAttempts->setValue(settings.maxAttempts());
    m_maxAttempts->setSuffix(tr(" sends, then dead letter"));
    m_inDoubtPolicy = new QComboBox;
    m_inDoubtPolicy->setObjectName(QStringLiteral("inDoubtPolicy"));
    m_inDoubtPolicy->addItem(tr("Resend with the same key"), false);
    m_inDoubtPolicy->addItem(tr("Hold for an operator"), true);
    m_inDoubtPolicy->setCurrentIndex(settings.holdInDoubt() ? 1 : 0);
    m_inDoubtPolicy->setToolTip(
        tr("When a send's outcome is unknown (the partner may have acted): resend is safe "
           "when the partner honours Idempotency-Key; otherwise hold it for a person."));
    // Only whether it is set (and usable): the token itself never reaches the screen.
    m_tokenProblem = partnerTokenProblem(qgetenv(TokenVariable));
    if (!m_tokenProblem.isEmpty()) {
        m_token =
            new QLabel(tr("unusable: ONCE_PARTNER_TOKEN %1. Set it right and restart the console; the worker "
                          "cannot start until then.")
                           .arg(m_tokenProblem));
        m_token->setWordWrap(true);
        setTextColour(m_token, severityTextColor(Severity::Alert, palette()));
    } else {
        m_token = new QLabel(
            qEnvironmentVariableIsEmpty(TokenVariable)
                ? tr("not set: ONCE_PARTNER_TOKEN is empty, so requests carry no Authorization header")
                : tr("set from ONCE_PARTNER_TOKEN"));
        m_token->setForegroundRole(QPalette::PlaceholderText);
    }
    m_token->setObjectName(QStringLiteral("partnerToken"));

    auto *form = new QFormLayout;
    form->addRow(tr("Partner &URL:"), m_url);
    form->addRow(tr("Or &partners file:"), m_partnersFile);
    form->addRow(QString(), m_urlError);
    form->addRow(tr("&Concurrency:"), m_concurrency);
    form->addRow(tr("&Max attempts:"), m_maxAttempts);
    form->addRow(tr("&In doubt:"), m_inDoubtPolicy);
    form->addRow(tr("Partner token:"), m_token);
    auto *settingsBox = new QGroupBox(tr("Worker settings"));
    settingsBox->setLayout(form);
    // A URL field as wide as the window reads badly; the form keeps to a column.
    settingsBox->setMaximumWidth(720);

    m_start = makeButton(QStringLiteral("startButton"), tr("&Start"));
    m_pause = makeButton(QStringLiteral("pauseButton"), tr("&Pause"));
    m_resume = makeButton(QStringLiteral("resumeButton"), tr("&Resume"));
    m_stop = makeButton(QStringLiteral("stopButton"), tr("S&top"));
    m_pause->setToolTip(tr("Stop taking new messages; sends in flight finish"));
    m_stop->setToolTip(tr("Stop taking new messages, let sends in flight finish and record, then stop"));
    auto *buttons = new QHBoxLayout;
    for (QPushButton *button : {m_start, m_pause, m_resume, m_stop})
        buttons->addWidget(button);
    buttons->addStretch();

    m_status = new QLabel;
    m_status->setObjectName(QStringLiteral("workerStatus"));
    QFont statusFont = m_status->font();
    statusFont.setPointSizeF(statusFont.pointSizeF() * 1.6);
    statusFont.setBold(true);
    m_status->setFont(statusFont);
    m_hint = new QLabel;
    m_hint->setObjectName(QStringLiteral("workerHint"));
    m_hint->setWordWrap(true);
    m_hint->setForegroundRole(QPalette::PlaceholderText);
    m_engineError = new QLabel;
    m_engineError->setObjectName(QStringLiteral("engineError"));
    m_engineError->setWordWrap(true);
    m_engineError->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_engineError->hide();

    m_applied =
        makeTile(QStringLiteral("appliedTile"), tr("Applied"), tr("partner accepted, recorded, acked"));
    m_duplicates =
        makeTile(QStringLiteral("duplicatesTile"), tr("Duplicates"), tr("suppressed without a send"));
    m_retries = makeTile(QStringLiteral("retriesTile"), tr("Retries"), tr("scheduled after a failure"));
    m_deadLettered =
        makeTile(QStringLiteral("deadLetteredTile"), tr("Dead-lettered"), tr("permanent or out of attempts"));
    m_held = makeTile(QStringLiteral("heldTile"), tr("Held"), tr("in doubt, left to an operator"));
    m_resent =
        makeTile(QStringLiteral("resentTile"), tr("Resent"), tr("in doubt, sent again with the same key"));
    m_invalid = makeTile(QStringLiteral("invalidTile"), tr("Invalid"), tr("messages that do not parse"));
    m_inFlight = makeTile(QStringLiteral("inFlightTile"), tr("In flight"), tr("leased and not yet settled"));
    auto *tiles = new QGridLayout;
    tiles->setSpacing(8);
    const QList<Tile *> order{m_applied, m_duplicates, m_retries, m_deadLettered,
                              m_held,    m_resent,     m_invalid, m_inFlight};
    for (int i = 0; i < order.size(); ++i)
        tiles->addWidget(order.at(i), i / 4, i % 4);
    m_countersCaption = new QLabel;
    m_countersCaption->setForegroundRole(QPalette::PlaceholderText);

    buildWorkersTable();

    // The console's own worker on top: its form and buttons on the left, what it is
    // doing on the right; its counters; then every worker on the store, which gets the
    // rest of the height.
    auto *formColumn = new QVBoxLayout;
    formColumn->addWidget(settingsBox);
    formColumn->addLayout(buttons);
    auto *stateColumn = new QVBoxLayout;
    auto *ownCaption = new QLabel(tr("This console's worker:"));
    ownCaption->setForegroundRole(QPalette::PlaceholderText);
    stateColumn->addWidget(ownCaption);
    stateColumn->addWidget(m_status);
    stateColumn->addWidget(m_hint);
    stateColumn->addWidget(m_engineError);
    stateColumn->addStretch();
    auto *top = new QHBoxLayout;
    top->addLayout(formColumn);
    top->addSpacing(16);
    top->addLayout(stateColumn, 1);

    auto *workersBox = new QGroupBox(tr("Workers on this store"));
    workersBox->setObjectName(QStringLiteral("workersBox"));
    auto *workersLayout = new QVBoxLayout(workersBox);
    workersLayout->addWidget(m_workersStack, 1);

    // Pausing a partner is the operator's word to every worker, wherever they run.
    auto *partnersBox = new QGroupBox(tr("Partners on this store"));
    partnersBox->setObjectName(QStringLiteral("partnersBox"));
    m_partnersView = new QTableWidget(0, 3);
    m_partnersView->setObjectName(QStringLiteral("partners"));
    m_partnersView->setHorizontalHeaderLabels({tr("Partner"), tr("Profile"), tr("State")});
    m_partnersView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_partnersView->setSelectionMode(QAbstractItemView::SingleSelection);
    m_partnersView->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_partnersView->verticalHeader()->hide();
    m_partnersView->horizontalHeader()->setStretchLastSection(true);
    m_partnersView->setMaximumHeight(5 * (m_partnersView->fontMetrics().height() + 8));
    m_pausePartner = new QPushButton(tr("Pause…"));
    m_pausePartner->setObjectName(QStringLiteral("pausePartner"));
    m_pausePartner->setToolTip(tr("Every worker on the store stops sending to this partner within a second; its "
                                  "reminders wait without spending their tries until it is resumed."));
    m_resumePartner = new QPushButton(tr("Resume"));
    m_resumePartner->setObjectName(QStringLiteral("resumePartner"));
    m_partnerStatus = new QLabel;
    m_partnerStatus->setObjectName(QStringLiteral("partnerStatus"));
    m_partnerStatus->setWordWrap(true);
    auto *partnerButtons = new QHBoxLayout;
    partnerButtons->addWidget(m_pausePartner);
    partnerButtons->addWidget(m_resumePartner);
    partnerButtons->addWidget(m_partnerStatus, 1);
    auto *partnersLayout = new QVBoxLayout(partnersBox);
    partnersLayout->addWidget(m_partnersView);
    partnersLayout->addLayout(partnerButtons);
    connect(m_partnersView, &QTableWidget::itemSelectionChanged, this, &WorkerPage::updatePartnerButtons);
    connect(m_pausePartner, &QPushButton::clicked, this, [this] {
        const QString partner = selectedPartner();
        bool ok = false;
        const QString reason = QInputDialog::getText(this, tr("Pause %1").arg(partner),
                                                     tr("Why (for the audit log and each held reminder's history):"),
                                                     QLineEdit::Normal, QString(), &ok);
        if (ok)
            setPartnerPaused(partner, true, reason);
    });
    connect(m_resumePartner, &QPushButton::clicked, this, [this] { setPartnerPaused(selectedPartner(), false); });

    // Every worker on the store first: what delivers is not only this console's.
    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_workersSummary);
    layout->addWidget(m_workersDetail);
    layout->addLayout(top);
    layout->addSpacing(4);
    layout->addWidget(m_countersCaption);
    layout->addLayout(tiles);
    layout->addSpacing(4);
    layout->addWidget(workersBox, 1);
    layout->addWidget(partnersBox);

    connect(m_url, &QLineEdit::textChanged, this, [this] {
        validateUrl();
        updateControls();
    });
    connect(m_partnersFile, &QLineEdit::textChanged, this, [this] {
        validateUrl();
        updateControls();
    });
    connect(m_url, &QLineEdit::returnPressed, this, [this] {
        if (m_start->isEnabled())
            start();
    });
    connect(m_start, &QPushButton::clicked, this, &WorkerPage::start);
    if (m_engine) {
        connect(m_pause, &QPushButton::clicked, m_engine, &EngineController::pause);
        connect(m_resume, &QPushButton::clicked, m_engine, &EngineController::resume);
        connect(m_stop, &QPushButton::clicked, m_engine, &EngineController::stop);
        connect(m_engine, &EngineController::stateChanged, this, &WorkerPage::onStateChanged);
        connect(m_engine, &EngineController::countersChanged, this, &WorkerPage::onCounters);
        connect(m_engine, &EngineController::errorOccurred, this, [this](const QString &message) {
            m_engineError->setText(tr("Worker error: %1").arg(message));
            m_engineError->show();
        });
        // The demo may have started the engine before this page existed.
        onCounters(m_engine->counters());
        if (m_engine->state() != EngineController::State::Stopped)
            m_workersModel->setOwnWorkerId(m_engine->config().workerId);
    }
    validateUrl();
    updateControls();
}

WorkerPage::~WorkerPage()
{
    Settings().setHeaderState(WorkersHeader, m_workersView->horizontalHeader()->saveState());
}

void WorkerPage::buildWorkersTable()
{
    m_workersModel = new WorkersModel(this);
    auto *proxy = new QSortFilterProxyModel(this);
    proxy->setSourceModel(m_workersModel);
    proxy->setSortRole(WorkersModel::SortRole);
    // Ties (two running workers) keep the registry's order: latest heartbeat first.
    proxy->setDynamicSortFilter(true);

    m_workersView = new QTableView;
    m_workersView->setObjectName(QStringLiteral("workers"));
    m_workersView->setModel(proxy);
    m_workersView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_workersView->setSelectionMode(QAbstractItemView::SingleSelection);
    m_workersView->setSortingEnabled(true);
    m_workersView->setAlternatingRowColors(true);
    m_workersView->setWordWrap(false);
    m_workersView->verticalHeader()->hide();
    m_workersView->verticalHeader()->setDefaultSectionSize(m_workersView->fontMetrics().height() + 8);
    // However small the window, a few workers stay in view.
    m_workersView->setMinimumHeight(5 * (m_workersView->fontMetrics().height() + 8));
    QHeaderView *header = m_workersView->horizontalHeader();
    header->setSectionsMovable(true);
    header->setHighlightSections(false);
    header->setStretchLastSection(true);
    if (!header->restoreState(Settings().headerState(WorkersHeader))) {
        // Every column fits at the default window size, the partner URL taking what is
        // left; long ids and hosts are elided, and the operator can widen them.
        const QFontMetrics metrics = m_workersView->fontMetrics();
        const auto text = [&metrics](const QString &sample) {
            return metrics.horizontalAdvance(sample) + 16;
        };
        const auto label = [this, &metrics](int column) {
            return metrics.horizontalAdvance(m_workersModel->headerData(column, Qt::Horizontal).toString()) +
                   16;
        };
        QFont bold = m_workersView->font(); // this console's own worker
        bold.setBold(true);
        m_workersView->setColumnWidth(
            WorkersModel::Id,
            QFontMetrics(bold).horizontalAdvance(QStringLiteral("console-demo@hostname")) + 16);
        m_workersView->setColumnWidth(WorkersModel::Host, text(QStringLiteral("hostname")));
        m_workersView->setColumnWidth(WorkersModel::Pid,
                                      std::max(label(WorkersModel::Pid), text(QStringLiteral("4194304"))));
        m_workersView->setColumnWidth(WorkersModel::Status,
                                      text(QStringLiteral("holding back from sendgrid")) + 20 + 12); // icon, indicator
        m_workersView->setColumnWidth(WorkersModel::Started, text(QStringLiteral("0000-00-00 00:00:00")));
        for (const int column : {WorkersModel::Heartbeat, WorkersModel::Applied, WorkersModel::Duplicates,
                                 WorkersModel::Retries, WorkersModel::DeadLettered, WorkersModel::InFlight})
            m_workersView->setColumnWidth(column, std::max(label(column), text(QStringLiteral("000,000"))));
        m_workersView->setColumnWidth(WorkersModel::InDoubt, text(QStringLiteral("hold, not resend")));
        m_workersView->sortByColumn(WorkersModel::Status, Qt::AscendingOrder);
    } else {
        // The restored indicator alone does not sort the rows.
        m_workersView->sortByColumn(header->sortIndicatorSection(), header->sortIndicatorOrder());
    }

    m_workersEmpty = new QLabel;
    m_workersEmpty->setObjectName(QStringLiteral("workersEmpty"));
    m_workersEmpty->setAlignment(Qt::AlignCenter);
    m_workersEmpty->setWordWrap(true);
    m_workersEmpty->setTextFormat(Qt::RichText);
    m_workersEmpty->setForegroundRole(QPalette::PlaceholderText);
    m_workersStack = new QStackedWidget;
    m_workersStack->addWidget(m_workersView);
    m_workersStack->addWidget(m_workersEmpty);
    m_workersSummary = new QLabel;
    m_workersSummary->setObjectName(QStringLiteral("workersSummary"));
    m_workersSummary->setWordWrap(true);
    m_workersSummary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont summaryFont = m_workersSummary->font();
    summaryFont.setPointSizeF(summaryFont.pointSizeF() * 1.25);
    summaryFont.setBold(true);
    m_workersSummary->setFont(summaryFont);
    m_workersDetail = new QLabel;
    m_workersDetail->setObjectName(QStringLiteral("workersSummaryDetail"));
    m_workersDetail->setWordWrap(true);
    m_workersDetail->setTextInteractionFlags(Qt::TextSelectableByMouse);
    updateWorkersSummary();
}

void WorkerPage::setSession(StoreSession *session)
{
    // The previous session may already be gone, so its connections are dropped by handle.
    for (const auto &connection : std::as_const(m_sessionConnections))
        disconnect(connection);
    m_sessionConnections.clear();
    m_session = session;
    m_workersToken = 0;
    m_workersLoaded = false;
    m_workersError.clear();
    m_workersModel->setWorkers({}, 0);
    if (m_session) {
        // Whether the store may be written is known once it is open.
        m_sessionConnections << connect(m_session, &StoreSession::opened, this, &WorkerPage::updateControls)
                             << connect(m_session, &StoreSession::workersLoaded, this,
                                        &WorkerPage::onWorkersLoaded)
                             << connect(m_session, &StoreSession::partnersLoaded, this,
                                        &WorkerPage::onPartnersLoaded)
                             << connect(m_session, &StoreSession::operationFinished, this,
                                        [this](quint64 token, bool ok, const QString &message) {
                                            if (token != m_partnerActionToken)
                                                return;
                                            m_partnerActionToken = 0;
                                            m_partnerStatus->setText(ok ? message : tr("Failed: %1").arg(message));
                                            refresh();
                                        })
                             << connect(m_session, &StoreSession::failed, this,
                                        [this](quint64 token, const QString &error) {
                                            if (token == m_partnersToken) {
                                                m_partnersToken = 0;
                                                m_partnerStatus->setText(tr("Cannot read the partners: %1").arg(error));
                                                return;
                                            }
                                            if (token != m_workersToken)
                                                return;
                                            m_workersToken = 0;
                                            m_workersError = error;
                                            updateWorkersSummary();
                                        });
    }
    updateWorkersSummary();
    updateControls();
}

void WorkerPage::refresh()
{
    // The engine's counters arrive by themselves; the store has the other workers.
    updateControls();
    if (!m_session)
        return;
    // A slow store must not pile up requests on the reader's thread.
    if (m_workersToken != 0 && m_workersPendingSince.elapsed() < PendingTimeoutMs)
        return;
    m_workersToken = m_session->loadWorkers();
    m_partnersToken = m_session->loadPartners();
    m_workersPendingSince.start();
}

void WorkerPage::onPartnersLoaded(quint64 token, const QList<PartnerPolicy> &partners)
{
    if (token != m_partnersToken)
        return;
    m_partnersToken = 0;
    const QString selected = selectedPartner();
    m_partners = partners;
    m_partnersView->setRowCount(int(partners.size()));
    for (int row = 0; row < partners.size(); ++row) {
        const PartnerPolicy &partner = partners.at(row);
        const QStringList cells{partner.partner, partner.profile, partner.state};
        for (int column = 0; column < cells.size(); ++column) {
            auto *item = new QTableWidgetItem(cells.at(column));
            item->setToolTip(cells.at(column));
            if (partner.pause)
                item->setForeground(severityTextColor(Severity::Warning, m_partnersView->palette()));
            m_partnersView->setItem(row, column, item);
        }
        if (partner.partner == selected)
            m_partnersView->selectRow(row);
    }
    updatePartnerButtons();
}

QString WorkerPage::selectedPartner() const
{
    const QList<QTableWidgetItem *> selected = m_partnersView->selectedItems();
    return selected.isEmpty() ? QString() : m_partnersView->item(selected.constFirst()->row(), 0)->text();
}

void WorkerPage::updatePartnerButtons()
{
    const QString partner = selectedPartner();
    const auto found = std::find_if(m_partners.cbegin(), m_partners.cend(),
                                    [&](const PartnerPolicy &each) { return each.partner == partner; });
    const bool writable = m_session && m_session->isOpen() && !m_session->isReadOnly();
    const bool busy = m_partnerActionToken != 0;
    m_pausePartner->setEnabled(writable && !busy && found != m_partners.cend() && !found->pause);
    m_resumePartner->setEnabled(writable && !busy && found != m_partners.cend() && found->pause.has_value());
}

void WorkerPage::setPartnerPaused(const QString &partner, bool paused, const QString &reason)
{
    if (!m_session || partner.isEmpty())
        return;
    m_partnerActionToken = m_session->setPartnerPaused(partner, paused, reason);
    m_partnerStatus->setText(paused ? tr("Pausing %1…").arg(partner) : tr("Resuming %1…").arg(partner));
    updatePartnerButtons();
}

void WorkerPage::onWorkersLoaded(quint64 token, const QList<WorkerRecord> &workers)
{
    if (token != m_workersToken)
        return;
    m_workersToken = 0;
    m_workersLoaded = true;
    m_workersError.clear();
    m_workersModel->setWorkers(workers, once::nowMs());
    updateWorkersSummary();
}

void WorkerPage::updateWorkersSummary()
{
    const WorkerTally tally = WorkerTally::of(m_workersModel->rows(), m_workersModel->nowMs());
    QString text;
    QStringList details;
    Severity severity = Severity::Normal;
    if (!m_workersError.isEmpty()) {
        text = tr("Cannot load the workers: %1").arg(m_workersError);
        severity = Severity::Alert;
    } else if (tally.total() > 0) {
        text = workersSummary(tally);
        severity = workersSeverity(tally);
        QStringList failingPartners;
        for (const WorkerRecord &worker : m_workersModel->rows()) {
            if (worker.isHoldingBack(m_workersModel->nowMs()) && worker.partners.size() > 1
                && !worker.failingPartner.isEmpty() && !failingPartners.contains(worker.failingPartner))
                failingPartners.append(worker.failingPartner);
        }
        if (!failingPartners.isEmpty())
            details << tr("Holding back from %1: it failed several times in a row; its reminders wait and are "
                          "probed for, the other partners' go on.")
                           .arg(failingPartners.join(QStringLiteral(", ")));
        else if (tally.holdingBack == 1)
            details << tr("Holding back: the partner failed several times in a row; the worker probes it and "
                          "resumes by itself.");
        else if (tally.holdingBack > 1)
            details << tr("Holding back: the partner failed several times in a row; the workers probe it and "
                          "resume by themselves.");
        if (tally.gone > 0)
            details << tr(
                "A gone worker stopped sending heartbeats without saying it stopped; the messages it had "
                "leased return to the queue when their leases expire.");
        if (tally.live() == 0)
            details << tr("None delivers now.");
    } else if (m_session && m_workersLoaded) {
        text = tr("No worker has run on this store yet.");
        severity = Severity::Warning;
    }
    m_workersSummary->setText(text);
    m_workersSummary->setVisible(!text.isEmpty());
    setTextColour(m_workersSummary, severityTextColor(severity, palette()));
    m_workersDetail->setText(details.join(QLatin1Char(' ')));
    m_workersDetail->setVisible(!details.isEmpty());

    if (!m_session)
        m_workersEmpty->setText(tr("Open a store to see the workers on it."));
    else if (!m_workersLoaded)
        m_workersEmpty->setText(tr("Loading…"));
    else
        m_workersEmpty->setText(
            tr("<p>No worker has run on this store yet.</p><p>Workers register when they "
               "start: <tt>once worker --partner URL</tt> on any machine that reaches the "
               "store, or Start above.</p>"));
    m_workersStack->setCurrentWidget(tally.total() > 0 ? static_cast<QWidget *>(m_workersView)
                                                       : m_workersEmpty);
}

void WorkerPage::changeEvent(QEvent *event)
{
    Page::changeEvent(event);
    if (event->type() == QEvent::PaletteChange) {
        validateUrl();
        updateControls();
        setTextColour(m_engineError, severityTextColor(Severity::Alert, palette()));
        if (!m_tokenProblem.isEmpty())
            setTextColour(m_token, severityTextColor(Severity::Alert, palette()));
        updateWorkersSummary();
    }
}

std::optional<QUrl> WorkerPage::partnerUrl(QString *problem) const
{
    if (!m_partnersFile->text().trimmed().isEmpty())
        return QUrl(); // the file names the partners; it is read as the worker starts
    const QString text = m_url->text().trimmed();
    if (text.isEmpty()) {
        *problem = tr("Enter the partner's URL, e.g. http://127.0.0.1:8080/reminders.");
        return std::nullopt;
    }
    const QUrl url(text, QUrl::StrictMode);
    if (!url.isValid() || (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https"))) {
        *problem = tr("The partner URL must start with http:// or https://.");
        return std::nullopt;
    }
    if (url.host().isEmpty()) {
        *problem = tr("The partner URL needs a host, e.g. http://127.0.0.1:8080/reminders.");
        return std::nullopt;
    }
    return url;
}

void WorkerPage::validateUrl()
{
    QString problem;
    const bool ok = partnerUrl(&problem).has_value();
    m_urlError->setText(problem);
    setTextColour(m_urlError, severityTextColor(Severity::Alert, palette()));
    m_urlError->setVisible(!ok);
}

void WorkerPage::start()
{
    QString problem;
    const auto url = partnerUrl(&problem);
    if (!url || !m_session || m_session->isReadOnly() || !m_engine ||
        m_engine->state() != EngineController::State::Stopped) {
        validateUrl();
        return;
    }
    if (!m_tokenProblem.isEmpty()) {
        m_engineError->setText(tr("The worker cannot start: ONCE_PARTNER_TOKEN %1.").arg(m_tokenProblem));
        m_engineError->show();
        return;
    }
    // A small local file, read once as the worker starts: its errors show here, in one line.
    const QString partnersPath = m_partnersFile->text().trimmed();
    std::optional<PartnersConfig> partners;
    if (!partnersPath.isEmpty()) {
        QString partnersError;
        partners = readPartnersFile(partnersPath, &partnersError);
        if (!partners) {
            m_engineError->setText(tr("The worker cannot start: %1").arg(partnersError));
            m_engineError->show();
            return;
        }
    }
    Settings settings;
    settings.setPartnersFile(partnersPath);
    if (!partners)
        settings.setPartnerUrl(url->toString());
    settings.setConcurrency(m_concurrency->value());
    settings.setMaxAttempts(m_maxAttempts->value());
    const bool hold = m_inDoubtPolicy->currentData().toBool();
    settings.setHoldInDoubt(hold);

    EngineConfig config;
    config.storeUrl = m_session->storeUrl();
    // The queue this window reads, so the console's worker takes what the pages show.
    config.queueUrl = m_session->queueUrl();
    config.partnerUrl = *url;
    config.partnerToken = qgetenv(TokenVariable);
    if (partners)
        config.partners = *partners;
    // As for `once worker`: a partner behind its own CA, or one that wants a client
    // certificate, is set up through the environment.
    QString tlsError;
    const auto partnerTls =
        PartnerTls::load(qEnvironmentVariable("ONCE_PARTNER_CA"), qEnvironmentVariable("ONCE_PARTNER_CERT"),
                         qEnvironmentVariable("ONCE_PARTNER_KEY"), &tlsError);
    if (!partnerTls) {
        m_engineError->setText(tr("The worker cannot start: %1.").arg(tlsError));
        m_engineError->show();
        return;
    }
    config.partnerTls = *partnerTls;
    config.workerId =
        QStringLiteral("console@%1:%2")
            .arg(QHostInfo::localHostName(), QString::number(QCoreApplication::applicationPid()));
    config.concurrency = m_concurrency->value();
    config.maxAttempts = m_maxAttempts->value();
    config.inDoubtPolicy = hold ? InDoubtPolicy::Hold : InDoubtPolicy::Resend;
    m_startedHere = true;
    m_engineError->hide();
    m_engine->start(config);
    updateControls();
}

void WorkerPage::onStateChanged(EngineController::State state)
{
    if (state == EngineController::State::Stopped)
        m_startedHere = false;
    else
        m_workersModel->setOwnWorkerId(m_engine->config().workerId);
    updateControls();
    // Starting, pausing or stopping changes this worker's row: show it now.
    refresh();
}

void WorkerPage::onCounters(const EngineCounters &counters)
{
    m_applied->setValue(formatCount(counters.applied));
    m_duplicates->setValue(formatCount(counters.duplicates));
    m_retries->setValue(formatCount(counters.retries));
    m_deadLettered->setValue(formatCount(counters.deadLettered),
                             counters.deadLettered > 0 ? Severity::Warning : Severity::Normal);
    m_held->setValue(formatCount(counters.held), counters.held > 0 ? Severity::Warning : Severity::Normal);
    m_resent->setValue(formatCount(counters.resent));
    m_invalid->setValue(formatCount(counters.invalid),
                        counters.invalid > 0 ? Severity::Warning : Severity::Normal);
    m_inFlight->setValue(formatCount(counters.inFlight));
}

void WorkerPage::updateControls()
{
    updatePartnerButtons(); // whether the store may be written is known once it is open
    using State = EngineController::State;
    const State state = m_engine ? m_engine->state() : State::Stopped;
    const bool stopped = state == State::Stopped;
    QString problem;
    const bool urlOk = partnerUrl(&problem).has_value();

    // The worker writes the ledger and the queue: a read-only store is only looked at.
    enableUnlessReadOnly(m_start, m_engine && m_session && stopped && urlOk && m_tokenProblem.isEmpty(),
                         m_session ? m_session->readOnlyReason() : QString());
    m_pause->setEnabled(state == State::Running || state == State::BreakerOpen);
    m_resume->setEnabled(state == State::Paused);
    m_stop->setEnabled(state == State::Starting || state == State::Running || state == State::Paused ||
                       state == State::BreakerOpen);
    // The engine reads its settings once, at start.
    m_partnersFile->setEnabled(stopped);
    for (QWidget *field : {static_cast<QWidget *>(m_url), static_cast<QWidget *>(m_concurrency),
                           static_cast<QWidget *>(m_maxAttempts), static_cast<QWidget *>(m_inDoubtPolicy)})
        field->setEnabled(stopped);
    m_url->setEnabled(stopped && m_partnersFile->text().trimmed().isEmpty());
    if (m_engine && !stopped && !m_startedHere) {
        // An engine started elsewhere (the demo): show what it really runs with.
        const EngineConfig running = m_engine->config();
        const QSignalBlocker blockUrl(m_url);
        const QSignalBlocker blockConcurrency(m_concurrency);
        const QSignalBlocker blockAttempts(m_maxAttempts);
        const QSignalBlocker blockPolicy(m_inDoubtPolicy);
        m_url->setText(running.partnerUrl.toDisplayString(QUrl::RemoveUserInfo));
        m_concurrency->setValue(running.concurrency);
        m_maxAttempts->setValue(running.maxAttempts);
        m_inDoubtPolicy->setCurrentIndex(running.inDoubtPolicy == InDoubtPolicy::Hold ? 1 : 0);
    }

    m_status->setText(EngineController::describe(state));
    Severity severity = Severity::Normal;
    switch (state) {
    case State::Running:
        severity = Severity::Good;
        break;
    case State::BreakerOpen:
        severity = Severity::Alert;
        break;
    case State::Starting:
    case State::Paused:
    case State::Stopping:
        severity = Severity::Warning;
        break;
    case State::Stopped:
        break;
    }
    setTextColour(m_status, severityTextColor(severity, palette()));

    QString hint;
    if (!m_session && stopped)
        hint = tr("Open a store to run a worker on it.");
    else if (stopped && m_session->isReadOnly())
        hint =
            tr("No worker can start here: a worker writes the ledger and the queue, and %1 is open read-only "
               "(%2).")
                .arg(m_session->displayName(), m_session->readOnlyReason());
    else if (stopped)
        hint = tr("Start runs a worker on %1 inside the console, as the once worker command would.")
                   .arg(m_session->displayName());
    else if (state == State::BreakerOpen)
        hint =
            tr("The partner failed several times in a row; the worker waits, then lets one probe through.");
    else if (m_startedHere)
        hint = tr("The settings above apply from the next start; stop the worker to change them.");
    else
        hint = tr("This worker was started by the demo; the form shows its settings.");
    m_hint->setText(hint);
    // The controller keeps the counters of a finished run until the next one starts.
    m_countersCaption->setText(stopped ? tr("Counters of the last run:") : tr("Counters of this run:"));
}

} // namespace once::ui
