#include "pages/deadletterspage.h"

#include "dialogs/decisiondialog.h"
#include "dialogs/redrivedialog.h"
#include "display/displaytime.h"
#include "display/humanunits.h"
#include "display/queueurl.h"
#include "models/deadlettersmodel.h"
#include "session/redrivereadiness.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/readonlycontrols.h"

#include "operator/operations.h"
#include "store/database.h"

#include <QAction>
#include <QClipboard>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QFileDialog>
#include <QFontDatabase>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>

namespace once::ui {

namespace {

const QString HeaderView = QStringLiteral("deadLetters");

QToolButton *actionButton(QAction *action)
{
    auto *button = new QToolButton;
    button->setDefaultAction(action);
    button->setToolButtonStyle(Qt::ToolButtonTextOnly);
    return button;
}

QString prettyPayload(const QByteArray &payload)
{
    QJsonParseError error;
    const QJsonDocument document = QJsonDocument::fromJson(payload, &error);
    // A letter that died as invalid-message may not be JSON at all: show it as it came.
    if (error.error != QJsonParseError::NoError)
        return QString::fromUtf8(payload);
    return QString::fromUtf8(document.toJson(QJsonDocument::Indented)).trimmed();
}

QString lettersText(int count)
{
    return formatQuantity(count, DeadLettersPage::tr("dead letter"), DeadLettersPage::tr("dead letters"));
}

} // namespace

DeadLettersPage::DeadLettersPage(QWidget *parent) : Page(parent)
{
    buildUi();
    updateActions();
    updateCounts();
    updateEmptyState();
}

DeadLettersPage::~DeadLettersPage()
{
    Settings().setHeaderState(HeaderView, m_table->horizontalHeader()->saveState());
}

void DeadLettersPage::buildUi()
{
    // The store filters and orders the letters (by class, time and dead_at, through its
    // indexes) and the model loads them a page at a time: no proxy over loaded rows.
    m_model = new DeadLettersModel(this);
    connect(m_model, &DeadLettersModel::pageLoaded, this, &DeadLettersPage::onPageLoaded);
    connect(m_model, &DeadLettersModel::errorOccurred, this, [this](const QString &error) {
        setStatus(tr("Cannot load the dead letters: %1").arg(error), true);
    });

    // Filters.
    m_classCombo = new QComboBox;
    m_classCombo->setObjectName(QStringLiteral("errorClassFilter"));
    m_classCombo->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_classCombo->addItem(tr("All error classes"), QString());
    m_timeCombo = new QComboBox;
    m_timeCombo->setObjectName(QStringLiteral("timeFilter"));
    m_timeCombo->addItem(tr("Any time"), qint64(0));
    m_timeCombo->addItem(tr("Last hour"), Hour);
    m_timeCombo->addItem(tr("Last 24 hours"), 24 * Hour);
    m_timeCombo->addItem(tr("Last 7 days"), 7 * 24 * Hour);
    m_timeCombo->addItem(tr("Between…"), CustomRange);
    m_timeCombo->setToolTip(tr("When they died"));
    // The outage window, typed (a time reads as the table shows it, in the console's zone)
    // and applied on Enter or Apply, never half typed: a list that filtered on every
    // keystroke showed "0 dead letters" between "09:" and "09:30".
    const auto timeEdit = [this](const QString &name) {
        auto *edit = new QLineEdit(this);
        edit->setObjectName(name);
        edit->setPlaceholderText(QStringLiteral("2026-12-06 09:30"));
        const int width = edit->fontMetrics().horizontalAdvance(QStringLiteral("0000-00-00 00:00:00")) + 24;
        edit->setFixedWidth(width);
        edit->hide();
        connect(edit, &QLineEdit::returnPressed, this, &DeadLettersPage::applyRange);
        return edit;
    };
    m_fromEdit = timeEdit(QStringLiteral("diedFrom"));
    m_toEdit = timeEdit(QStringLiteral("diedTo"));
    m_rangeTo = new QLabel(tr("and"));
    m_rangeTo->hide();
    m_applyRangeButton = new QPushButton(tr("Apply"));
    m_applyRangeButton->setObjectName(QStringLiteral("applyRange"));
    m_applyRangeButton->setToolTip(tr("Show the letters that died in this range (or press Enter)"));
    m_applyRangeButton->hide();
    connect(m_applyRangeButton, &QPushButton::clicked, this, &DeadLettersPage::applyRange);
    m_selectionRangeAction = new QAction(tr("Their time range"), this);
    m_selectionRangeAction->setObjectName(QStringLiteral("selectionRange"));
    m_selectionRangeAction->setToolTip(
        tr("Show every letter that died between the first and the last of the selected ones"));
    connect(m_selectionRangeAction, &QAction::triggered, this, &DeadLettersPage::useSelectionRange);
    const auto setRangeTips = [this] {
        const QString zone = DisplayTime::instance().zoneLabel();
        m_fromEdit->setToolTip(tr("Died at or after, in %1: 2026-12-06 09:30, 2026-12-06 09:30:15, "
                                  "2026-12-06 or 09:30 (today)")
                                   .arg(zone));
        m_toEdit->setToolTip(tr("Died at or before (the whole minute or day typed), in %1").arg(zone));
    };
    setRangeTips();
    // A range applied stays the same moments; its fields say them in the new zone.
    connect(&DisplayTime::instance(), &DisplayTime::changed, this, [this, setRangeTips] {
        setRangeTips();
        if (customRange())
            showRange();
    });
    connect(m_classCombo, &QComboBox::currentIndexChanged, this, &DeadLettersPage::applyClassFilter);
    connect(m_timeCombo, &QComboBox::currentIndexChanged, this, [this] {
        if (customRange() && m_fromEdit->isHidden()) {
            // A start the operator can move: the last hour, to the minute.
            const QDateTime now = QDateTime::currentDateTime();
            const QDateTime minute(now.date(), QTime(now.time().hour(), now.time().minute()));
            m_rangeSinceMs = minute.addSecs(-3600).toMSecsSinceEpoch();
            m_rangeUntilMs = minute.addSecs(60).toMSecsSinceEpoch() - 1;
            showRange();
        }
        for (QWidget *widget : {static_cast<QWidget *>(m_fromEdit), static_cast<QWidget *>(m_rangeTo),
                                static_cast<QWidget *>(m_toEdit), static_cast<QWidget *>(m_applyRangeButton)})
            widget->setVisible(customRange());
        onTimeFilterChanged();
    });

    // The search, over what support is told (an id, a phone number, "401", the error's
    // words), applied on Enter or when cleared, as the Events page's is.
    m_searchEdit = new QLineEdit;
    m_searchEdit->setObjectName(QStringLiteral("deadLetterSearch"));
    m_searchEdit->setPlaceholderText(tr("Search ids, destination, error, HTTP status"));
    m_searchEdit->setToolTip(
        tr("A message id, send key, event id, user id, reminder id or destination, whole (or "
           "\"prefix*\"); text in the error (\"401\", \"invalid\"); \"body:text\" for text in the "
           "message. Press Enter to search."));
    m_searchEdit->setClearButtonEnabled(true);
    // It takes the room the other filters leave, down to most of its placeholder.
    m_searchEdit->setMinimumWidth(
        m_searchEdit->fontMetrics().horizontalAdvance(QStringLiteral("Search ids, destination")) + 40);
    connect(m_searchEdit, &QLineEdit::returnPressed, this, &DeadLettersPage::applySearch);
    connect(m_searchEdit, &QLineEdit::textChanged, this, [this](const QString &text) {
        if (text.isEmpty() && !m_searchText.isEmpty())
            applySearch();
    });
    m_statusCombo = new QComboBox;
    m_statusCombo->setObjectName(QStringLiteral("httpStatusFilter"));
    m_statusCombo->setToolTip(
        tr("The partner's last answer: a 401 (our credentials) apart from a 400 (the message)"));
    // "503 Service Unavailable" in full in the list; the closed combo need not be that wide.
    m_statusCombo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_statusCombo->setMinimumContentsLength(16);
    m_statusCombo->addItem(tr("Any HTTP status"), 0);
    const QList<QPair<int, QString>> statuses{{400, tr("Bad Request")},
                                              {401, tr("Unauthorized")},
                                              {403, tr("Forbidden")},
                                              {404, tr("Not Found")},
                                              {408, tr("Request Timeout")},
                                              {409, tr("Conflict")},
                                              {410, tr("Gone")},
                                              {413, tr("Content Too Large")},
                                              {422, tr("Unprocessable Content")},
                                              {429, tr("Too Many Requests")},
                                              {500, tr("Internal Server Error")},
                                              {502, tr("Bad Gateway")},
                                              {503, tr("Service Unavailable")},
                                              {504, tr("Gateway Timeout")}};
    for (const auto &[status, name] : statuses)
        m_statusCombo->addItem(QStringLiteral("%1 %2").arg(status).arg(name), status);
    connect(m_statusCombo, &QComboBox::currentIndexChanged, this, &DeadLettersPage::onTimeFilterChanged);

    // Actions, as buttons and in the table's context menu.
    m_redriveSelectedAction = new QAction(tr("Redrive selected…"), this);
    m_redriveSelectedAction->setObjectName(QStringLiteral("redriveSelected"));
    m_redriveSelectedAction->setToolTip(tr("Preview, then put the selected dead letters back on the queue"));
    m_redriveAllAction = new QAction(tr("Redrive all matching…"), this);
    m_redriveAllAction->setObjectName(QStringLiteral("redriveAllMatching"));
    m_redriveAllAction->setToolTip(tr("Preview, then put back every dead letter that matches the filters"));
    m_discardAction = new QAction(tr("Discard…"), this);
    m_discardAction->setObjectName(QStringLiteral("discard"));
    m_discardAction->setToolTip(tr("Delete the selected dead letters without sending them"));
    m_copyKeysAction = new QAction(tr("Copy send keys"), this);
    m_copyKeysAction->setShortcut(QKeySequence::Copy);
    m_copyKeysAction->setShortcutContext(Qt::WidgetWithChildrenShortcut);
    connect(m_redriveSelectedAction, &QAction::triggered, this, &DeadLettersPage::redriveSelected);
    connect(m_redriveAllAction, &QAction::triggered, this, &DeadLettersPage::redriveAllMatching);
    connect(m_discardAction, &QAction::triggered, this, &DeadLettersPage::discardSelected);
    connect(m_copyKeysAction, &QAction::triggered, this, &DeadLettersPage::copySendKeys);
    m_openStoryAction = new QAction(tr("Open event story"), this);
    m_openStoryAction->setObjectName(QStringLiteral("openStory"));
    m_openStoryAction->setToolTip(
        tr("Every delivery, claim and send of this letter's event, on the Events page"));
    connect(m_openStoryAction, &QAction::triggered, this, &DeadLettersPage::openStory);
    m_exportAction = new QAction(tr("Export…"), this);
    m_exportAction->setObjectName(QStringLiteral("exportDeadLetters"));
    m_exportAction->setToolTip(tr("Save every dead letter that matches the filters as CSV or JSON"));
    connect(m_exportAction, &QAction::triggered, this, &DeadLettersPage::chooseExport);

    m_countLabel = new QLabel;
    m_countLabel->setObjectName(QStringLiteral("count"));
    m_placeLabel = new QLabel;
    m_placeLabel->setObjectName(QStringLiteral("deadLettersPlace"));
    m_placeLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont placeFont = m_placeLabel->font();
    placeFont.setBold(true);
    m_placeLabel->setFont(placeFont);

    auto *bar = new QHBoxLayout;
    bar->addWidget(m_searchEdit, 1);
    bar->addWidget(m_statusCombo);
    bar->addWidget(new QLabel(tr("Error class:")));
    bar->addWidget(m_classCombo);
    bar->addSpacing(8);
    bar->addWidget(new QLabel(tr("Died:")));
    bar->addWidget(m_timeCombo);
    bar->addWidget(m_fromEdit);
    bar->addWidget(m_rangeTo);
    bar->addWidget(m_toEdit);
    bar->addWidget(m_applyRangeButton);

    auto *actionsBar = new QHBoxLayout;
    actionsBar->addWidget(m_countLabel, 1);
    actionsBar->addWidget(actionButton(m_selectionRangeAction));
    actionsBar->addWidget(actionButton(m_redriveSelectedAction));
    actionsBar->addWidget(actionButton(m_redriveAllAction));
    actionsBar->addWidget(actionButton(m_discardAction));
    actionsBar->addWidget(actionButton(m_exportAction));

    // The table.
    m_table = new QTableView;
    m_table->setObjectName(QStringLiteral("deadLetters"));
    m_table->setModel(m_model);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
    // The store orders the list by when the letters died, either way (a click on "Dead
    // at"); sorting the loaded rows by another column would pretend to sort them all.
    m_table->setSortingEnabled(false);
    m_table->setAlternatingRowColors(true);
    m_table->setWordWrap(false);
    m_table->setTextElideMode(Qt::ElideRight);
    m_table->verticalHeader()->hide();
    m_table->verticalHeader()->setDefaultSectionSize(m_table->fontMetrics().height() + 8);
    m_table->setContextMenuPolicy(Qt::ActionsContextMenu);
    auto *separator = new QAction(this);
    separator->setSeparator(true);
    auto *separator2 = new QAction(this);
    separator2->setSeparator(true);
    m_table->addActions({m_openStoryAction, m_redriveSelectedAction, m_redriveAllAction, separator,
                         m_discardAction, separator2, m_copyKeysAction, m_selectionRangeAction,
                         m_exportAction});
    connect(m_table, &QAbstractItemView::doubleClicked, this, &DeadLettersPage::openStory);
    QHeaderView *header = m_table->horizontalHeader();
    header->setSectionsMovable(true);
    header->setHighlightSections(false);
    if (!header->restoreState(Settings().headerState(HeaderView))) {
        const int digits =
            m_table->fontMetrics().horizontalAdvance(QStringLiteral("0000-00-00 00:00:00")) + 24;
        m_table->setColumnWidth(DeadLettersModel::ErrorClass, 130);
        m_table->setColumnWidth(DeadLettersModel::LastError, 300);
        m_table->setColumnWidth(DeadLettersModel::Attempts, 70);
        m_table->setColumnWidth(DeadLettersModel::Redrives, 70);
        m_table->setColumnWidth(DeadLettersModel::FirstAttempt, digits);
        m_table->setColumnWidth(DeadLettersModel::LastAttempt, digits);
        m_table->setColumnWidth(DeadLettersModel::DeadAt, digits);
        m_table->setColumnWidth(DeadLettersModel::Expires, digits);
        m_table->setColumnWidth(DeadLettersModel::SendKey, 300);
        m_table->setColumnWidth(DeadLettersModel::EventId, 110);
    }
    header->setSortIndicatorShown(true);
    header->setSectionsClickable(true);
    header->setSortIndicator(DeadLettersModel::DeadAt, Qt::DescendingOrder);
    connect(header, &QHeaderView::sectionClicked, this, &DeadLettersPage::onSortClicked);
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        updateActions();
        updateCounts();
        updateDetails();
    });
    connect(m_table->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            &DeadLettersPage::updateDetails);

    // Details of the selected letter: why it died, and its payload.
    m_detailsHeader = new QLabel;
    m_detailsHeader->setObjectName(QStringLiteral("detailsHeader"));
    m_detailsHeader->setWordWrap(true);
    m_detailsHeader->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_detailsHeader->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_details = new QPlainTextEdit;
    m_details->setObjectName(QStringLiteral("payload"));
    m_details->setReadOnly(true);
    m_details->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_details->setPlaceholderText(tr("Select a dead letter to see its payload"));
    auto *detailsPane = new QWidget;
    auto *detailsLayout = new QVBoxLayout(detailsPane);
    detailsLayout->setContentsMargins(0, 0, 0, 0);
    detailsLayout->addWidget(m_detailsHeader);
    detailsLayout->addWidget(m_details, 1);

    auto *splitter = new QSplitter(Qt::Vertical);
    splitter->addWidget(m_table);
    splitter->addWidget(detailsPane);
    splitter->setStretchFactor(0, 3);
    splitter->setStretchFactor(1, 1);
    splitter->setSizes({560, 200});
    splitter->setChildrenCollapsible(false);

    m_emptyLabel = new QLabel;
    m_emptyLabel->setObjectName(QStringLiteral("emptyState"));
    m_emptyLabel->setAlignment(Qt::AlignCenter);
    m_emptyLabel->setWordWrap(true);
    m_emptyLabel->setTextFormat(Qt::RichText);
    m_stack = new QStackedWidget;
    m_stack->addWidget(splitter);
    m_stack->addWidget(m_emptyLabel);

    // The redrive under way, and what the last operation did.
    m_progress = new QProgressBar;
    m_progress->setObjectName(QStringLiteral("redriveProgress"));
    m_progress->setFormat(tr("%v of %m"));
    m_progress->hide();
    m_cancelButton = new QPushButton(tr("Cancel redrive"));
    m_cancelButton->setObjectName(QStringLiteral("cancelRedrive"));
    m_cancelButton->hide();
    connect(m_cancelButton, &QPushButton::clicked, this, &DeadLettersPage::cancelRedrive);
    // The export under way, beside a redrive's: each has its own bar and its own cancel.
    m_exportProgress = new QProgressBar;
    m_exportProgress->setObjectName(QStringLiteral("exportProgress"));
    m_exportProgress->hide();
    m_cancelExportButton = new QPushButton(tr("Cancel export"));
    m_cancelExportButton->setObjectName(QStringLiteral("cancelExport"));
    m_cancelExportButton->hide();
    connect(m_cancelExportButton, &QPushButton::clicked, this, &DeadLettersPage::cancelExport);
    m_statusLabel = new QLabel;
    m_statusLabel->setObjectName(QStringLiteral("status"));
    m_statusLabel->setWordWrap(true);
    m_statusLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto *statusRow = new QHBoxLayout;
    statusRow->addWidget(m_statusLabel, 1);
    statusRow->addWidget(m_progress, 1);
    statusRow->addWidget(m_cancelButton);
    statusRow->addWidget(m_exportProgress, 1);
    statusRow->addWidget(m_cancelExportButton);

    auto *layout = new QVBoxLayout(this);
    layout->addWidget(m_placeLabel);
    layout->addLayout(bar);
    layout->addLayout(actionsBar);
    layout->addWidget(m_stack, 1);
    layout->addLayout(statusRow);

    connect(m_model, &QAbstractItemModel::rowsInserted, this, &DeadLettersPage::updateEmptyState);
    connect(m_model, &QAbstractItemModel::rowsRemoved, this, &DeadLettersPage::updateEmptyState);
    connect(m_model, &QAbstractItemModel::modelReset, this, &DeadLettersPage::updateEmptyState);
}

void DeadLettersPage::setSession(StoreSession *session)
{
    if (m_session)
        disconnect(m_session, nullptr, this, nullptr);
    m_session = session;
    m_loaded = false;
    m_counts = {};
    m_countsKnown = false;
    m_countsToken = 0;
    m_detailsId.clear();
    m_detailsToken = 0;
    m_previewCountsToken = 0;
    m_previewSampleToken = 0;
    m_exportToken = 0;
    m_readinessToken = 0;
    m_letterToShow.clear();
    m_redriveToken = 0;
    m_discardToken = 0;
    m_progress->hide();
    m_cancelButton->hide();
    m_exportProgress->hide();
    m_cancelExportButton->hide();
    if (m_redriveDialog)
        m_redriveDialog->reject();
    // Nothing is read until the page is refreshed (shown): a hidden page keeps no store busy.
    m_model->setSession(session);
    setStatus(QString());
    if (session) {
        connect(session, &StoreSession::deadLettersLoaded, this, &DeadLettersPage::onLoaded);
        connect(session, &StoreSession::deadLettersCounted, this, &DeadLettersPage::onCounted);
        connect(session, &StoreSession::deadLetterLoaded, this, &DeadLettersPage::onLetterLoaded);
        connect(session, &StoreSession::failed, this, &DeadLettersPage::onFailed);
        connect(session, &StoreSession::redriveProgress, this, &DeadLettersPage::onRedriveProgress);
        connect(session, &StoreSession::redriveFinished, this, &DeadLettersPage::onRedriveFinished);
        connect(session, &StoreSession::exportProgress, this, &DeadLettersPage::onExportProgress);
        connect(session, &StoreSession::exportFinished, this, &DeadLettersPage::onExportFinished);
        connect(session, &StoreSession::operationFinished, this, &DeadLettersPage::onOperationFinished);
        // Whether the store may be written is known once it is open.
        connect(session, &StoreSession::opened, this, &DeadLettersPage::updateActions);
        connect(session, &StoreSession::readinessLoaded, this, &DeadLettersPage::onReadinessLoaded);
        connect(session, &StoreSession::redrivePreviewed, this, &DeadLettersPage::onRedrivePreviewed);
    }
    showPlace();
    rebuildClassCombo();
    updateActions();
    updateCounts();
    updateEmptyState();
}

void DeadLettersPage::showPlace()
{
    if (m_session && m_session->hasBrokerQueue()) {
        m_placeLabel->setText(tr("Dead letters at %1").arg(deadLetterPlace(m_session->queueUrl())));
        m_placeLabel->setToolTip(m_session->queueDisplayName());
    } else {
        m_placeLabel->setText(m_session ? tr("Dead letters in the store") : QString());
        m_placeLabel->setToolTip(QString());
    }
}

QString DeadLettersPage::auditDetail(const QString &selection) const
{
    // The store's audit log outlives the queue URL: it says which queue the letters left.
    if (m_session && m_session->hasBrokerQueue())
        return selection + QStringLiteral(" queue=") + m_session->queueDisplayName();
    return selection;
}

void DeadLettersPage::refresh()
{
    // In place: the rows at the top are reloaded keeping the selection and the scroll
    // position, and the counts anew. One request of each at a time, on a slow store.
    if (!m_loaded && !m_model->isLoading()) {
        reload();
    } else {
        m_model->refresh();
        if (m_countsToken == 0)
            requestCounts();
    }
    // The preview tells who would send the letters; a worker started meanwhile shows up.
    if (m_redriveDialog && m_readinessToken == 0)
        m_readinessToken = m_session->loadReadiness(ReadinessWindowMs);
}

void DeadLettersPage::reload()
{
    if (!m_session)
        return;
    DeadLetterFilter filter;
    if (!applyTimeFilter(&filter)) {
        setStatus(tr("The range ends before it starts: choose a “to” after the “from”."), true);
        return;
    }
    m_loaded = false;
    m_model->setFilter(displayFilter());
    requestCounts();
    updateActions();
    updateCounts();
    updateDetails();
    updateEmptyState();
}

void DeadLettersPage::requestCounts()
{
    if (!m_session)
        return;
    // Every class of the list's other filters (the same bounds as its rows): the class list
    // offers each, with its count.
    DeadLetterFilter filter = m_model->filter();
    filter.errorClass.clear();
    m_countsToken = m_session->countDeadLetters(filter);
}

void DeadLettersPage::onTimeFilterChanged()
{
    // A new question: the answer to the old one no longer counts.
    setStatus(QString());
    reload();
}

void DeadLettersPage::onSortClicked(int section)
{
    QHeaderView *header = m_table->horizontalHeader();
    if (section != DeadLettersModel::DeadAt) {
        // Only the store's order is offered; the indicator stays where the order is.
        header->setSortIndicator(DeadLettersModel::DeadAt,
                                 m_model->filter().newestFirst ? Qt::DescendingOrder : Qt::AscendingOrder);
        return;
    }
    reload();
}

bool DeadLettersPage::customRange() const
{
    return timeWindowMs() == CustomRange;
}

bool DeadLettersPage::applyTimeFilter(DeadLetterFilter *filter) const
{
    filter->text = m_searchText;
    filter->httpStatus = selectedHttpStatus();
    if (customRange()) {
        filter->sinceMs = m_rangeSinceMs;
        filter->untilMs = m_rangeUntilMs;
        return filter->untilMs >= filter->sinceMs;
    }
    if (const qint64 window = timeWindowMs(); window > 0)
        filter->sinceMs = QDateTime::currentMSecsSinceEpoch() - window;
    return true;
}

void DeadLettersPage::setTimeRange(const QDateTime &from, const QDateTime &to)
{
    if (!customRange())
        m_timeCombo->setCurrentIndex(m_timeCombo->findData(CustomRange));
    m_fromEdit->setText(formatDisplayTime(from.toMSecsSinceEpoch()));
    m_toEdit->setText(formatDisplayTime(to.toMSecsSinceEpoch()));
    applyRange();
}

void DeadLettersPage::showRange()
{
    m_fromEdit->setText(formatDisplayTime(m_rangeSinceMs));
    m_toEdit->setText(formatDisplayTime(m_rangeUntilMs));
}

void DeadLettersPage::applyRange()
{
    if (!customRange())
        return;
    QString error;
    const auto read = [&error](QLineEdit *edit, const QString &which) -> std::optional<TypedTime> {
        if (edit->text().trimmed().isEmpty()) {
            error = tr("Type a time in the “%1” field.").arg(which);
            return std::nullopt;
        }
        auto typed = parseDisplayTime(edit->text(), &error);
        if (!typed)
            error = tr("“%1”: %2").arg(which, error);
        return typed;
    };
    const auto from = read(m_fromEdit, tr("from"));
    const auto to = from ? read(m_toEdit, tr("to")) : std::nullopt;
    // The list stays as it was, with the reason beside it: an empty list would read as
    // "no dead letters then".
    if (!from || !to) {
        setStatus(error, true);
        return;
    }
    if (to->lastMs < from->firstMs) {
        setStatus(tr("The range ends before it starts: choose a “to” after the “from”."), true);
        return;
    }
    m_rangeSinceMs = from->firstMs;
    m_rangeUntilMs = to->lastMs;
    onTimeFilterChanged();
}

void DeadLettersPage::useSelectionRange()
{
    const QList<DeadLetter> letters = selectedLetters();
    if (letters.isEmpty())
        return;
    const auto [first, last] =
        std::minmax_element(letters.cbegin(), letters.cend(),
                            [](const DeadLetter &a, const DeadLetter &b) { return a.deadAtMs < b.deadAtMs; });
    // Whole seconds, as the fields show them: the range holds every selected letter.
    setTimeRange(QDateTime::fromMSecsSinceEpoch(first->deadAtMs - first->deadAtMs % 1000),
                 QDateTime::fromMSecsSinceEpoch(last->deadAtMs));
}

void DeadLettersPage::applySearch()
{
    const QString text = m_searchEdit->text().trimmed();
    if (text == m_searchText && m_loaded)
        return;
    m_searchText = text;
    onTimeFilterChanged();
}

void DeadLettersPage::search(const QString &text)
{
    {
        // One reload for all the filters, not one each.
        const QSignalBlocker classes(m_classCombo);
        const QSignalBlocker time(m_timeCombo);
        const QSignalBlocker status(m_statusCombo);
        const QSignalBlocker search(m_searchEdit);
        m_classCombo->setCurrentIndex(0);
        m_timeCombo->setCurrentIndex(0);
        m_statusCombo->setCurrentIndex(0);
        m_searchEdit->setText(text.trimmed());
        for (QWidget *widget : {static_cast<QWidget *>(m_fromEdit), static_cast<QWidget *>(m_rangeTo),
                                static_cast<QWidget *>(m_toEdit), static_cast<QWidget *>(m_applyRangeButton)})
            widget->hide();
    }
    m_searchText = text.trimmed();
    onTimeFilterChanged();
}

DeadLetterFilter DeadLettersPage::displayFilter() const
{
    DeadLetterFilter filter;
    filter.errorClass = selectedErrorClass();
    applyTimeFilter(&filter);
    filter.newestFirst = m_table->horizontalHeader()->sortIndicatorOrder() == Qt::DescendingOrder;
    filter.withPayload = false;
    return filter;
}

DeadLetterFilter DeadLettersPage::matchingFilter() const
{
    DeadLetterFilter filter;
    filter.errorClass = selectedErrorClass();
    applyTimeFilter(&filter);
    filter.limit = -1;
    filter.withPayload = false;
    return filter;
}

qint64 DeadLettersPage::idempotencyWindowStartMs()
{
    return QDateTime::currentMSecsSinceEpoch() - qint64(Settings().idempotencyWindowHours()) * 3600 * 1000;
}

QString DeadLettersPage::selectedErrorClass() const
{
    return m_classCombo->currentData().toString();
}

int DeadLettersPage::selectedHttpStatus() const
{
    return m_statusCombo->currentData().toInt();
}

qint64 DeadLettersPage::timeWindowMs() const
{
    return m_timeCombo->currentData().toLongLong();
}

void DeadLettersPage::onLoaded(quint64 token, const QList<DeadLetter> &letters)
{
    if (token == m_previewSampleToken) {
        m_previewSampleToken = 0;
        m_previewSample = letters;
        openMatchingRedriveDialog();
    }
}

void DeadLettersPage::onPageLoaded()
{
    m_loaded = true;
    updateActions();
    updateCounts();
    updateDetails();
    updateEmptyState();
    selectLetterToShow();
}

void DeadLettersPage::onCounted(quint64 token, const DeadLetterCounts &counts)
{
    if (token == m_previewCountsToken) {
        m_previewCountsToken = 0;
        m_previewCounts = counts;
        openMatchingRedriveDialog();
        return;
    }
    if (token != m_countsToken)
        return;
    m_countsToken = 0;
    m_counts = counts;
    m_countsKnown = true;
    rebuildClassCombo();
    updateActions();
    updateCounts();
    updateEmptyState();
}

void DeadLettersPage::onLetterLoaded(quint64 token, const DeadLetter &letter)
{
    // An answer for a letter selected before is dropped: the token is the latest only.
    if (token != m_detailsToken || letter.id != m_detailsId)
        return;
    m_detailsToken = 0;
    m_details->setPlaceholderText(tr("Select a dead letter to see its payload"));
    m_details->setPlainText(prettyPayload(letter.payload));
}

void DeadLettersPage::onFailed(quint64 token, const QString &error)
{
    if (token == m_countsToken) {
        m_countsToken = 0;
        setStatus(tr("Cannot count the dead letters: %1").arg(error), true);
    } else if (token == m_detailsToken) {
        m_detailsToken = 0;
        m_details->clear();
        m_details->setPlaceholderText(tr("Cannot load its payload: %1").arg(error));
    } else if (token == m_previewCountsToken || token == m_previewSampleToken) {
        m_previewCountsToken = 0;
        m_previewSampleToken = 0;
        updateActions();
        setStatus(tr("Cannot collect the matching dead letters: %1").arg(error), true);
    } else if (token == m_exportToken) {
        onExportFinished(token, 0, false, error);
    } else if (token == m_readinessToken) {
        m_readinessToken = 0;
        if (m_redriveDialog)
            m_redriveDialog->setReadinessError(error);
    } else if (token == m_splitToken) {
        m_splitToken = 0;
        if (m_redriveDialog)
            m_redriveDialog->setSplit({}); // says nothing is known to be sent; the error is below
        setStatus(tr("Cannot tell what the redrive would send: %1").arg(error), true);
    } else if (token == m_redriveToken) {
        RedriveResult result;
        result.error = error;
        onRedriveFinished(token, result);
    } else if (token == m_discardToken) {
        onOperationFinished(token, false, error);
    }
}

QList<DeadLetter> DeadLettersPage::selectedLetters() const
{
    QList<DeadLetter> letters;
    QModelIndexList rows = m_table->selectionModel()->selectedRows();
    // In the order the operator sees them.
    std::sort(rows.begin(), rows.end(),
              [](const QModelIndex &a, const QModelIndex &b) { return a.row() < b.row(); });
    letters.reserve(rows.size());
    for (const QModelIndex &row : std::as_const(rows))
        letters.append(m_model->letter(row.row()));
    return letters;
}

void DeadLettersPage::rebuildClassCombo()
{
    const QMap<QString, DeadLetterTally> &counts = m_counts.byClass;
    const QString current = selectedErrorClass();
    QList<QPair<QString, QString>> items{
        {m_countsKnown ? tr("All error classes (%1)").arg(QLocale().toString(m_counts.tally().letters))
                       : tr("All error classes"),
         QString()}};
    for (auto it = counts.cbegin(); it != counts.cend(); ++it)
        items.append({QStringLiteral("%1 (%2)").arg(it.key(), QLocale().toString(it->letters)), it.key()});
    // A class the operator chose stays chosen when its last letter goes (all redriven):
    // the filter should not widen by itself.
    if (!current.isEmpty() && !counts.contains(current))
        items.append({QStringLiteral("%1 (0)").arg(current), current});

    bool same = items.size() == m_classCombo->count();
    for (int i = 0; same && i < items.size(); ++i)
        same = m_classCombo->itemText(i) == items.at(i).first;
    if (same)
        return;
    const QSignalBlocker blocker(m_classCombo);
    m_classCombo->clear();
    for (const auto &[text, errorClass] : std::as_const(items))
        m_classCombo->addItem(text, errorClass);
    m_classCombo->setCurrentIndex(std::max(0, m_classCombo->findData(current)));
}

void DeadLettersPage::applyClassFilter()
{
    // The store filters by class (through its index): a class of a few letters among a
    // hundred thousand lists at once.
    setStatus(QString());
    reload();
}

void DeadLettersPage::updateActions()
{
    const bool idle = m_session && m_redriveToken == 0;
    const bool anySelected = m_table->selectionModel()->hasSelection();
    const QString readOnly = m_session ? m_session->readOnlyReason() : QString();
    enableUnlessReadOnly(m_redriveSelectedAction, idle && anySelected, readOnly);
    const bool collecting = m_previewCountsToken != 0 || m_previewSampleToken != 0;
    enableUnlessReadOnly(m_redriveAllAction, idle && !collecting && m_model->rowCount() > 0, readOnly);
    enableUnlessReadOnly(m_discardAction, idle && anySelected && m_discardToken == 0, readOnly);
    m_copyKeysAction->setEnabled(anySelected);
    m_selectionRangeAction->setEnabled(anySelected);
    m_exportAction->setEnabled(m_session && m_exportToken == 0 && m_loaded);
    // One letter with a key: a message that was never a reminder has no event.
    const QModelIndexList selected = m_table->selectionModel()->selectedRows();
    m_openStoryAction->setEnabled(selected.size() == 1 &&
                                  !m_model->letter(selected.constFirst().row()).sendKey.isEmpty());
}

void DeadLettersPage::openStory()
{
    if (!m_openStoryAction->isEnabled())
        return;
    emit storyRequested(selectedLetters().constFirst().sendKey);
}

void DeadLettersPage::updateCounts()
{
    const QLocale locale;
    // The store's count of all that match, however few of them are loaded yet.
    const qint64 matching =
        m_countsKnown ? m_counts.tally(selectedErrorClass()).letters : m_model->rowCount();
    QString text = matching == 1 ? tr("1 dead letter") : tr("%1 dead letters").arg(locale.toString(matching));
    if (const auto selected = m_table->selectionModel()->selectedRows().size(); selected > 0)
        text += tr("  ·  %1 selected").arg(locale.toString(selected));
    m_countLabel->setText(text);
}

void DeadLettersPage::updateDetails()
{
    QModelIndex current = m_table->selectionModel()->currentIndex();
    if (!current.isValid() || !m_table->selectionModel()->isRowSelected(current.row(), {})) {
        const QModelIndexList rows = m_table->selectionModel()->selectedRows();
        current = rows.isEmpty() ? QModelIndex() : rows.constFirst();
    }
    if (!current.isValid()) {
        m_detailsHeader->clear();
        m_details->clear();
        // A payload asked for before the selection went (a new filter) is not coming.
        m_details->setPlaceholderText(tr("Select a dead letter to see its payload"));
        m_detailsId.clear();
        m_detailsToken = 0;
        return;
    }
    const DeadLetter &letter = m_model->letter(current.row());
    const QLocale locale;
    QStringList lines;
    lines << tr("<b>%1</b> — %2")
                 .arg(letter.errorClass.toHtmlEscaped(),
                      letter.lastError.isEmpty() ? tr("no error text") : letter.lastError.toHtmlEscaped());
    lines << tr("Send key <tt>%1</tt> · event %2 · message %3")
                 .arg(QString::fromLatin1(letter.sendKey).toHtmlEscaped(),
                      letter.eventId.isEmpty() ? tr("(none)") : letter.eventId.toHtmlEscaped(),
                      letter.id.toHtmlEscaped());
    lines << tr("Attempts: %1 · deliveries by the queue: %2 · redriven before: %3 · queued %4")
                 .arg(locale.toString(letter.attempts), locale.toString(letter.receiveCount),
                      locale.toString(letter.redriveCount), formatDisplayTime(letter.enqueuedAtMs));
    m_detailsHeader->setText(lines.join(QStringLiteral("<br>")));
    if (letter.id == m_detailsId)
        return; // shown, or on its way
    // The list leaves payloads out: the header shows at once, the payload when it comes.
    m_detailsId = letter.id;
    m_details->clear();
    if (!letter.payload.isEmpty() || !m_session) {
        m_detailsToken = 0;
        m_details->setPlainText(prettyPayload(letter.payload));
        return;
    }
    m_details->setPlaceholderText(tr("Loading its payload…"));
    m_detailsToken = m_session->loadDeadLetter(letter.id);
}

void DeadLettersPage::updateEmptyState()
{
    // Until the first page comes the table stays, empty, with its headers: a page of a
    // fast store arrives before a placeholder would be read.
    if (m_model->rowCount() > 0 || (m_session && !m_loaded)) {
        m_stack->setCurrentIndex(0);
        return;
    }
    QString text;
    if (!m_session)
        text = tr("No store is open");
    else if (!m_searchText.isEmpty())
        text =
            (selectedHttpStatus() > 0 ? tr("No dead letters with HTTP %2 match “%1”")
                                            .arg(m_searchText.toHtmlEscaped())
                                            .arg(selectedHttpStatus())
                                      : tr("No dead letters match “%1”").arg(m_searchText.toHtmlEscaped()));
    else if (selectedHttpStatus() > 0)
        text = tr("No dead letters the partner last answered with HTTP %1").arg(selectedHttpStatus());
    else if (!selectedErrorClass().isEmpty())
        text = tr("No dead letters of class %1").arg(selectedErrorClass().toHtmlEscaped());
    else if (customRange())
        text = tr("No dead letters that died between %1 and %2")
                   .arg(formatDisplayTime(m_rangeSinceMs), formatDisplayTime(m_rangeUntilMs));
    else if (timeWindowMs() > 0)
        text = tr("No dead letters that died %1").arg(m_timeCombo->currentText().toLower().toHtmlEscaped());
    else
        text = tr("No dead letters");
    m_emptyLabel->setText(
        QStringLiteral("<p style='font-size:15pt'>%1</p><p>%2</p>")
            .arg(text, tr("A message lands here when it fails for good or uses up its attempts. "
                          "It waits for an operator to redrive or discard it.")));
    m_stack->setCurrentIndex(1);
}

void DeadLettersPage::setStatus(const QString &text, bool problem)
{
    m_statusLabel->setText(text);
    m_statusLabel->setStyleSheet(problem ? QStringLiteral("color: #b00020") : QString());
}

void DeadLettersPage::redriveSelected()
{
    const QList<DeadLetter> letters = selectedLetters();
    if (letters.isEmpty())
        return;
    openRedriveDialog(letters, auditDetail(describeLetters(letters)));
}

void DeadLettersPage::redriveAllMatching()
{
    if (!m_session || m_previewCountsToken != 0 || m_previewSampleToken != 0)
        return;
    // The table may show only part of them, or be a refresh behind: the store counts
    // every letter that matches now, and gives the first few for the preview. The reader
    // walks them all itself when the operator confirms.
    m_previewFilter = matchingFilter();
    m_matchingDetail = auditDetail(describeFilter(m_previewFilter));
    m_previewCounts.reset();
    m_previewSample.reset();
    // The sample first: at a broker it lists the letters afresh, and the counts are cut
    // from the same listing.
    DeadLetterFilter sample = m_previewFilter;
    sample.limit = RedriveDialog::SampleSize;
    m_previewSampleToken = m_session->loadDeadLetters(sample);
    m_previewCountsToken = m_session->countDeadLetters(m_previewFilter, idempotencyWindowStartMs());
    updateActions();
    setStatus(tr("Counting the matching dead letters…"));
}

void DeadLettersPage::openMatchingRedriveDialog()
{
    if (!m_previewCounts || !m_previewSample)
        return;
    const RedriveSelection preview =
        RedriveSelection::of(*std::exchange(m_previewCounts, std::nullopt), m_previewFilter.errorClass,
                           *std::exchange(m_previewSample, std::nullopt));
    updateActions();
    if (preview.count == 0) {
        setStatus(tr("No dead letters match the filters now."));
        return;
    }
    setStatus(QString());
    if (m_redriveDialog) {
        m_redriveDialog->raise();
        return;
    }
    const Settings settings;
    showDialog(new RedriveDialog(preview, m_matchingDetail, settings.idempotencyWindowHours(),
                                 settings.redriveRate(), this));
}

void DeadLettersPage::openRedriveDialog(const QList<DeadLetter> &letters, const QString &auditDetail)
{
    if (m_redriveDialog) {
        m_redriveDialog->raise();
        return;
    }
    const Settings settings;
    showDialog(new RedriveDialog(letters, auditDetail, settings.idempotencyWindowHours(),
                                 settings.redriveRate(), this));
}

void DeadLettersPage::showDialog(RedriveDialog *dialog)
{
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    if (m_session && m_session->hasBrokerQueue())
        dialog->setQueueDescription(queuePlace(m_session->queueUrl()));
    m_redriveDialog = dialog;
    connect(dialog, &RedriveDialog::redriveRequested, this, [this, dialog] { startRedrive(*dialog); });
    connect(dialog, &RedriveDialog::cancelRequested, this, &DeadLettersPage::cancelRedrive);
    if (m_session) {
        m_readinessToken = m_session->loadReadiness(ReadinessWindowMs);
        RedriveOptions options = redriveOptions(*dialog);
        m_splitToken = m_session->previewRedrive(options);
    }
    // Window-modal and not exec(): the refresh timer and the engine's counters keep going.
    dialog->open();
}

void DeadLettersPage::onReadinessLoaded(quint64 token, const QList<WorkerRecord> &workers,
                                        const PartnerActivity &partner)
{
    if (token != m_readinessToken)
        return;
    m_readinessToken = 0;
    if (m_redriveDialog)
        m_redriveDialog->setReadiness(assessRedriveReadiness(workers, partner, nowMs()));
}

RedriveOptions DeadLettersPage::redriveOptions(const RedriveDialog &dialog) const
{
    RedriveOptions options;
    if (dialog.letters().isEmpty())
        options.matching = m_previewFilter;
    else
        options.picked = dialog.letters();
    options.ceilingPerSecond = dialog.ratePerSecond();
    options.canary = dialog.canary();
    options.stopAfterFailures = dialog.stopAfterFailures();
    options.includeExpired = dialog.includeExpired();
    options.detail = dialog.auditDetail();
    options.reason = dialog.reason();
    return options;
}

void DeadLettersPage::onRedrivePreviewed(quint64 token, const once::RedrivePreview &preview)
{
    if (token != m_splitToken)
        return;
    m_splitToken = 0;
    if (m_redriveDialog)
        m_redriveDialog->setSplit(preview);
}

void DeadLettersPage::startRedrive(const RedriveDialog &dialog)
{
    if (!m_session || m_redriveToken != 0)
        return;
    m_redriveTotal = dialog.letterCount();
    m_redrivePicked.clear();
    for (const DeadLetter &letter : dialog.letters())
        m_redrivePicked << letter.id;
    m_redriveToken = m_session->redrive(redriveOptions(dialog));
    m_progress->setRange(0, m_redriveTotal);
    m_progress->setValue(0);
    m_progress->show();
    m_cancelButton->setEnabled(true);
    m_cancelButton->setText(tr("Cancel redrive"));
    m_cancelButton->show();
    setStatus(tr("Putting %1 back on the queue at most %2 per second…")
                  .arg(lettersText(m_redriveTotal), QLocale().toString(dialog.ratePerSecond())));
    updateActions();
}

void DeadLettersPage::cancelRedrive()
{
    if (!m_session || m_redriveToken == 0)
        return;
    m_session->cancelRedrive(m_redriveToken);
    m_cancelButton->setEnabled(false);
    m_cancelButton->setText(tr("Cancelling…"));
}

void DeadLettersPage::onRedriveProgress(quint64 token, const RedriveProgress &progress)
{
    if (token != m_redriveToken)
        return;
    m_redriveTotal = int(std::min<qint64>(progress.total, std::numeric_limits<int>::max()));
    m_progress->setRange(0, m_redriveTotal);
    m_progress->setValue(int(std::min<qint64>(progress.taken, m_redriveTotal)));
    if (m_redriveDialog)
        m_redriveDialog->setProgress(progress);
    using Phase = RedriveProgress::Phase;
    if (progress.phase == Phase::HeldBreakerOpen || progress.phase == Phase::Throttled
        || progress.phase == Phase::WaitingForCanary)
        setStatus(tr("Redrive %1: %2").arg(RedriveProgress::phaseName(progress.phase), progress.why));
    else if (progress.phase == Phase::Moving)
        setStatus(tr("Putting %1 back on the queue: %2 so far, %3 a second…")
                      .arg(lettersText(m_redriveTotal), QLocale().toString(progress.moved))
                      .arg(progress.achievedPerSecond, 0, 'f', 1));
}

void DeadLettersPage::onRedriveFinished(quint64 token, const RedriveResult &result)
{
    if (token != m_redriveToken)
        return;
    m_redriveToken = 0;
    m_progress->hide();
    m_cancelButton->hide();
    // The page's status line says how it ended; the dialog has shown the run.
    if (m_redriveDialog)
        m_redriveDialog->close();
    const QLocale locale;
    const qint64 moved = result.moved;
    const QString movedText = locale.toString(moved);
    const QString totalText = locale.toString(m_redriveTotal);
    const QString skipped = result.skippedExpired > 0
                                ? QLatin1Char(' ') + tr("%1 expired, skipped: still dead letters.").arg(QLocale().toString(result.skippedExpired))
                                : QString();
    if (!result.error.isEmpty()) {
        setStatus(tr("Redrive stopped after putting back %1 of %2: %3").arg(movedText, totalText, result.error),
                  true);
    } else if (result.cancelled) {
        setStatus(tr("Redrive cancelled: %1 of %2 put back on the queue.").arg(movedText, totalText) + skipped);
    } else if (!result.stoppedBecause.isEmpty()) {
        setStatus(tr("Redrive stopped by itself after putting back %1 of %2: %3.")
                      .arg(movedText, totalText, result.stoppedBecause),
                  true);
    } else {
        QString text = tr("Put %1 of %2 dead letters back on the queue.").arg(movedText, totalText) + skipped;
        const qint64 gone = m_redriveTotal - moved - result.skippedExpired;
        if (gone > 0)
            text += QLatin1Char(' ') + tr("%1 already gone (redriven or discarded elsewhere).")
                                           .arg(lettersText(int(gone)));
        setStatus(text);
    }
    updateActions();
    // Skipped expired letters stay dead: the list is read again rather than guessed.
    if (m_redrivePicked.isEmpty() || result.skippedExpired > 0) {
        // All that matched went (or most): start the list over.
        reload();
    } else {
        // The picked ones went: the rest stay where the operator left them.
        m_model->removeLetters(std::exchange(m_redrivePicked, {}));
        m_model->refresh();
        requestCounts();
    }
}

void DeadLettersPage::discardSelected()
{
    const QList<DeadLetter> letters = selectedLetters();
    if (letters.isEmpty() || !m_session)
        return;
    const int count = int(letters.size());
    const QString from =
        m_session->hasBrokerQueue() ? deadLetterPlace(m_session->queueUrl()) : tr("the store");
    auto *dialog = new DecisionDialog(
        tr("Discard dead letters"), tr("Discard %1?").arg(lettersText(count)),
        tr("They are deleted from %1 and never sent. Their send keys stay dead, so a copy "
           "that arrives later is not sent either. This cannot be undone; the audit log and each event's "
           "history record it.")
            .arg(from),
        tr("Discard %1").arg(QLocale().toString(count)), this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &QDialog::accepted, this, [this, dialog, letters, count] {
        if (!m_session)
            return;
        m_discardCount = count;
        m_discarded.clear();
        for (const DeadLetter &letter : letters)
            m_discarded << letter.id;
        m_discardToken = m_session->discard(letters, auditDetail(describeLetters(letters)), dialog->reason());
        setStatus(tr("Discarding %1…").arg(lettersText(count)));
        updateActions();
    });
    dialog->open();
}

void DeadLettersPage::onOperationFinished(quint64 token, bool ok, const QString &message)
{
    if (token != m_discardToken)
        return;
    m_discardToken = 0;
    if (ok)
        setStatus(tr("Discard done: %1.").arg(message));
    else
        setStatus(tr("Discarding %1 failed: %2").arg(lettersText(m_discardCount), message), true);
    updateActions();
    if (ok)
        m_model->removeLetters(std::exchange(m_discarded, {}));
    m_model->refresh();
    requestCounts();
}

void DeadLettersPage::showLetter(const QByteArray &sendKey)
{
    m_letterToShow = sendKey;
    // Every letter: the filters in place may hide the one asked for.
    search(QString());
    setStatus(tr("Looking for the dead letter of %1…").arg(QString::fromLatin1(sendKey)));
}

void DeadLettersPage::selectLetterToShow()
{
    if (m_letterToShow.isEmpty() || !m_loaded)
        return;
    const int row = m_model->rowOfKey(m_letterToShow);
    if (row < 0 && m_model->canFetchMore({})) {
        // Not among the pages loaded: the next page, as scrolling down would.
        m_model->fetchMore({});
        return;
    }
    const QByteArray key = std::exchange(m_letterToShow, QByteArray());
    if (row < 0) {
        setStatus(
            tr("No dead letter has send key %1 now: it was redriven or discarded since, as its story says.")
                .arg(QString::fromLatin1(key)));
        return;
    }
    const QModelIndex index = m_model->index(row, DeadLettersModel::SendKey);
    m_table->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect |
                                                          QItemSelectionModel::Rows);
    m_table->scrollTo(index, QAbstractItemView::PositionAtCenter);
    m_table->setFocus(Qt::OtherFocusReason);
    setStatus(QString());
}

void DeadLettersPage::chooseExport()
{
    if (!m_session || m_exportToken != 0)
        return;
    const QString csvFilter = tr("CSV (*.csv)");
    const QString jsonFilter = tr("JSON (*.json)");
    QString selected = csvFilter;
    const QString folder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    const QString name = QStringLiteral("dead-letters-%1.csv")
                             .arg(QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmm")));
    QString path = QFileDialog::getSaveFileName(this, tr("Export Dead Letters"), QDir(folder).filePath(name),
                                                csvFilter + QStringLiteral(";;") + jsonFilter, &selected);
    if (path.isEmpty())
        return;
    if (!path.endsWith(QLatin1String(".csv"), Qt::CaseInsensitive) &&
        !path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive))
        path += selected == jsonFilter ? QStringLiteral(".json") : QStringLiteral(".csv");
    exportTo(path);
}

void DeadLettersPage::exportTo(const QString &path)
{
    if (!m_session || m_exportToken != 0) {
        emit exportFinished(path, 0, tr("another export is still running"));
        return;
    }
    // The table holds the pages scrolled to and may be a refresh behind: the store's reader
    // walks every letter that matches and writes them as they come, off this thread.
    DeadLetterFilter filter;
    if (!applyTimeFilter(&filter)) {
        setStatus(tr("The range ends before it starts: choose a “to” after the “from”."), true);
        emit exportFinished(path, 0, tr("the range ends before it starts"));
        return;
    }
    m_exportPath = path;
    m_exportToken = m_session->exportDeadLetters(matchingFilter(), path);
    // Busy until the reader has counted them.
    m_exportProgress->setRange(0, 0);
    m_exportProgress->show();
    m_cancelExportButton->setEnabled(true);
    m_cancelExportButton->setText(tr("Cancel export"));
    m_cancelExportButton->show();
    setStatus(tr("Exporting the dead letters to %1…").arg(QDir::toNativeSeparators(path)));
    updateActions();
}

void DeadLettersPage::cancelExport()
{
    if (!m_session || m_exportToken == 0)
        return;
    m_session->cancelExport(m_exportToken);
    m_cancelExportButton->setEnabled(false);
    m_cancelExportButton->setText(tr("Cancelling…"));
}

void DeadLettersPage::onExportProgress(quint64 token, int written, int total)
{
    if (token != m_exportToken)
        return;
    m_exportProgress->setRange(0, total);
    m_exportProgress->setValue(written);
    const QLocale locale;
    m_exportProgress->setFormat(
        tr("Exported %1 of %2").arg(locale.toString(written), locale.toString(total)));
}

void DeadLettersPage::onExportFinished(quint64 token, int written, bool cancelled, const QString &error)
{
    if (token != m_exportToken)
        return;
    m_exportToken = 0;
    m_exportProgress->hide();
    m_cancelExportButton->hide();
    updateActions();
    const QString shown = QDir::toNativeSeparators(m_exportPath);
    if (!error.isEmpty()) {
        setStatus(tr("Cannot export the dead letters to %1: %2").arg(shown, error), true);
        emit exportFinished(m_exportPath, 0, error);
    } else if (cancelled) {
        setStatus(tr("Export cancelled: nothing was written to %1.").arg(shown));
        emit exportFinished(m_exportPath, 0, tr("cancelled"));
    } else {
        setStatus(tr("Exported %1 to %2.").arg(lettersText(written), shown));
        emit exportFinished(m_exportPath, written, QString());
    }
}

void DeadLettersPage::copySendKeys()
{
    QStringList keys;
    for (const DeadLetter &letter : selectedLetters())
        keys << QString::fromLatin1(letter.sendKey);
    QGuiApplication::clipboard()->setText(keys.join(QLatin1Char('\n')));
}

} // namespace once::ui
