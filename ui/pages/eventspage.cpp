#include "pages/eventspage.h"

#include "display/displaytime.h"
#include "display/eventstory.h"
#include "display/historyexport.h"
#include "display/humanunits.h"
#include "models/attemptsmodel.h"
#include "models/auditmodel.h"
#include "models/eventsmodel.h"
#include "session/storesession.h"
#include "settings/settings.h"
#include "widgets/readonlycontrols.h"

#include <QClipboard>
#include <QComboBox>
#include <QDateEdit>
#include <QDateTimeEdit>
#include <QSignalBlocker>
#include <QTimeZone>
#include <QDir>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFrame>
#include <QGridLayout>
#include <QGuiApplication>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSplitter>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QStyle>
#include <QTableView>
#include <QVBoxLayout>

#include <climits>

namespace once::ui {

namespace {

constexpr int SearchDebounceMs = 300;
const QString EventsHeader = QStringLiteral("events.sendsFirst");
// Named anew when the columns change, so that a saved layout never misplaces them.
const QString TimelineHeader = QStringLiteral("eventsTimeline.eventId");
// The state box's entries that read the history rather than the ledger's state.
const QString SeveralEffects = QStringLiteral("calls:several-effects");
const QString Unanswered = QStringLiteral("calls:unanswered");

enum When
{
    AnyTime,
    Today,
    Yesterday,
    OnADay,
    Between
};

QLabel *factValue()
{
    auto *label = new QLabel;
    label->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
    label->setTextFormat(Qt::PlainText);
    label->setMinimumWidth(40);
    return label;
}

QLabel *factName(const QString &text)
{
    auto *label = new QLabel(text);
    // The palette's own muted colour, so it reads in dark themes too.
    label->setForegroundRole(QPalette::PlaceholderText);
    return label;
}

QLabel *emptyState(const QString &text)
{
    auto *label = new QLabel(text);
    label->setAlignment(Qt::AlignCenter);
    label->setWordWrap(true);
    label->setForegroundRole(QPalette::PlaceholderText);
    // Framed like the table it stands in for, so the page keeps its shape while empty.
    label->setFrameShape(QFrame::StyledPanel);
    label->setBackgroundRole(QPalette::Base);
    label->setAutoFillBackground(true);
    label->setMargin(24);
    QFont font = label->font();
    font.setPointSizeF(font.pointSizeF() * 1.15);
    label->setFont(font);
    return label;
}

void setupTable(QTableView *view)
{
    view->setSelectionBehavior(QAbstractItemView::SelectRows);
    view->setSelectionMode(QAbstractItemView::SingleSelection);
    view->setAlternatingRowColors(true);
    view->setWordWrap(false);
    view->verticalHeader()->hide();
    // Fixed row heights: the view need not measure every row of a long list.
    view->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
    view->verticalHeader()->setDefaultSectionSize(view->fontMetrics().height() + 8);
    view->horizontalHeader()->setHighlightSections(false);
    view->horizontalHeader()->setSectionsMovable(true);
    view->horizontalHeader()->setStretchLastSection(true);
}

} // namespace

EventsPage::EventsPage(QWidget *parent)
    : Page(parent), m_model(new EventsModel(this)), m_attempts(new AttemptsModel(this))
{
    m_search = new QLineEdit;
    m_search->setObjectName(QStringLiteral("search"));
    m_search->setPlaceholderText(
        tr("User, destination, reminder, send key or event id · prefix* · body:text"));
    m_search->setClearButtonEnabled(true);
    m_search->setToolTip(
        tr("Exact match on user id, destination, reminder id, send key or event id.\n"
           "End with * for everything starting so, case and all (alice* finds alice-2, not Alice).\n"
           "Start with body: to look inside the messages (body:ORD-4711).\n"
           "Messages still waiting in the queue are found too, as queued."));

    m_state = new QComboBox;
    m_state->setObjectName(QStringLiteral("stateFilter"));
    m_state->addItem(tr("All"), QString());
    for (const QLatin1String state : {EventState::Queued, LedgerState::Claimed, LedgerState::Retrying,
                                      LedgerState::Applied, LedgerState::InDoubt, LedgerState::Dead,
                                      LedgerState::Expired}) {
        m_state->addItem(stateIcon(state), state, QString(state));
        m_state->setItemData(m_state->count() - 1, stateDescription(state), Qt::ToolTipRole);
    }
    m_state->insertSeparator(m_state->count());
    m_state->addItem(style()->standardIcon(QStyle::SP_MessageBoxWarning), tr("possibly more than one effect"),
                     SeveralEffects);
    m_state->setItemData(m_state->count() - 1,
                         tr("Two or more partner calls that may each have acted (accepted, or left without an "
                            "answer), at a partner not recorded as honouring Idempotency-Key: who may have got "
                            "it twice"),
                         Qt::ToolTipRole);
    m_state->addItem(tr("unanswered"), Unanswered);
    m_state->setItemData(m_state->count() - 1,
                         tr("A partner call was written and left without an answer, or its worker died before "
                            "recording it: the partner may have it"),
                         Qt::ToolTipRole);

    // When things happened: something in the event's history in the window. Picked
    // days and ranges apply on Enter or Apply, not at each keystroke in a date.
    m_when = new QComboBox;
    m_when->setObjectName(QStringLiteral("whenFilter"));
    m_when->addItem(tr("Any time"), AnyTime);
    m_when->addItem(tr("Today"), Today);
    m_when->addItem(tr("Yesterday"), Yesterday);
    m_when->addItem(tr("On a day…"), OnADay);
    m_when->addItem(tr("Between…"), Between);
    m_when->setToolTip(tr("Only events with something in their history (a claim, a send, an operator's decision) "
                          "at that time, in the console's time zone"));
    m_day = new QDateEdit(QDate::currentDate());
    m_day->setObjectName(QStringLiteral("whenDay"));
    m_day->setCalendarPopup(true);
    m_day->setDisplayFormat(QStringLiteral("yyyy-MM-dd"));
    m_from = new QDateTimeEdit(QDateTime(QDate::currentDate(), QTime(0, 0)));
    m_from->setObjectName(QStringLiteral("whenFrom"));
    m_from->setCalendarPopup(true);
    m_from->setDisplayFormat(QStringLiteral("yyyy-MM-dd HH:mm"));
    m_to = new QDateTimeEdit(QDateTime(QDate::currentDate().addDays(1), QTime(0, 0)));
    m_to->setObjectName(QStringLiteral("whenTo"));
    m_to->setCalendarPopup(true);
    m_to->setDisplayFormat(QStringLiteral("yyyy-MM-dd HH:mm"));
    m_applyWhen = new QPushButton(tr("Apply"));
    m_applyWhen->setObjectName(QStringLiteral("applyWhen"));

    m_count = new QLabel;
    m_count->setObjectName(QStringLiteral("count"));
    m_count->setMinimumWidth(
        m_count->fontMetrics().horizontalAdvance(QStringLiteral("1,000,000,000 events · loading…")));
    m_count->setAlignment(Qt::AlignRight | Qt::AlignVCenter);

    auto *bar = new QHBoxLayout;
    bar->addWidget(m_search, 1);
    auto *stateLabel = new QLabel(tr("&State:"));
    stateLabel->setBuddy(m_state);
    bar->addWidget(stateLabel);
    bar->addWidget(m_state);
    auto *whenLabel = new QLabel(tr("&When:"));
    whenLabel->setBuddy(m_when);
    bar->addWidget(whenLabel);
    bar->addWidget(m_when);
    bar->addWidget(m_day);
    bar->addWidget(m_from);
    auto *toLabel = new QLabel(tr("to"));
    toLabel->setObjectName(QStringLiteral("whenToLabel"));
    bar->addWidget(toLabel);
    bar->addWidget(m_to);
    bar->addWidget(m_applyWhen);
    bar->addWidget(m_count);

    // Which audit row's events are listed, and the way back to all of them.
    m_auditLabel = new QLabel;
    m_auditLabel->setObjectName(QStringLiteral("auditFilterLabel"));
    m_auditLabel->setWordWrap(true);
    m_auditLabel->setTextFormat(Qt::PlainText);
    auto *clearAudit = new QPushButton(tr("Show all events"));
    clearAudit->setObjectName(QStringLiteral("clearAuditFilter"));
    auto *auditFrame = new QFrame;
    auditFrame->setFrameShape(QFrame::StyledPanel);
    auditFrame->setBackgroundRole(QPalette::AlternateBase);
    auditFrame->setAutoFillBackground(true);
    auto *auditLayout = new QHBoxLayout(auditFrame);
    auditLayout->setContentsMargins(8, 4, 4, 4);
    auditLayout->addWidget(m_auditLabel, 1);
    auditLayout->addWidget(clearAudit);
    m_auditBar = auditFrame;
    m_auditBar->hide();
    connect(clearAudit, &QPushButton::clicked, this, [this] {
        m_auditFilter = 0;
        m_auditBar->hide();
        applyFilter(true);
    });

    m_error = new QLabel;
    m_error->setObjectName(QStringLiteral("error"));
    m_error->setWordWrap(true);
    m_error->setTextFormat(Qt::PlainText);
    m_error->hide();

    m_table = new QTableView;
    m_table->setObjectName(QStringLiteral("events"));
    setupTable(m_table);
    m_table->setModel(m_model);
    QHeaderView *header = m_table->horizontalHeader();
    const std::pair<EventsModel::Column, int> widths[] = {
        {EventsModel::State, 95},        {EventsModel::User, 110},      {EventsModel::Reminder, 110},
        {EventsModel::Sends, 55},        {EventsModel::Duplicates, 80}, {EventsModel::ScheduledAt, 215},
        {EventsModel::Destination, 130}, {EventsModel::Channel, 70},    {EventsModel::LastError, 200},
        {EventsModel::SendKey, 300},     {EventsModel::EventId, 120},
    };
    for (const auto &[column, width] : widths)
        header->resizeSection(column, width);
    // The store's order, newest written first, and no other: the model holds a few pages
    // of a ledger of millions, and sorting those by a column would show a screenful of
    // one page's rows as if they were the whole ledger's first ones. A search or a state
    // narrows the list instead.
    header->restoreState(Settings().headerState(EventsHeader));
    header->setSortIndicatorShown(false);
    // One other order, done by the store: the most partner calls first (a click on Sends;
    // another click, or on any other column, goes back to the store's order).
    header->setSectionsClickable(true);
    connect(header, &QHeaderView::sectionClicked, this,
            [this](int section) { sortBySends(section == EventsModel::Sends && !m_bySends); });

    m_tableEmpty = emptyState(QString());
    m_tableEmpty->setObjectName(QStringLiteral("eventsEmpty"));
    connect(m_tableEmpty, &QLabel::linkActivated, this,
            [this] { emit deadLettersSearchRequested(m_model->filter().text); });
    m_tableStack = new QStackedWidget;
    m_tableStack->addWidget(m_table);
    m_tableStack->addWidget(m_tableEmpty);

    m_storyEmpty = emptyState(tr("Select an event to see its story"));
    m_storyEmpty->setObjectName(QStringLiteral("storyEmpty"));
    auto *timeline = new QWidget;
    buildTimeline(timeline);
    m_storyStack = new QStackedWidget;
    m_storyStack->addWidget(m_storyEmpty);
    m_storyStack->addWidget(timeline);

    m_splitter = new QSplitter(Qt::Horizontal);
    m_splitter->setChildrenCollapsible(false);
    m_splitter->addWidget(m_tableStack);
    m_splitter->addWidget(m_storyStack);
    m_splitter->setStretchFactor(0, 3);
    m_splitter->setStretchFactor(1, 2);
    m_splitter->restoreState(Settings().splitterState(QStringLiteral("events")));

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(bar);
    layout->addWidget(m_auditBar);
    layout->addWidget(m_error);
    layout->addWidget(m_splitter, 1);

    m_searchDebounce.setSingleShot(true);
    m_searchDebounce.setInterval(SearchDebounceMs);
    connect(&m_searchDebounce, &QTimer::timeout, this, [this] { applyFilter(false); });
    connect(m_search, &QLineEdit::textEdited, this, [this] { m_searchDebounce.start(); });
    // The clear button changes the text without an edit signal.
    connect(m_search, &QLineEdit::textChanged, this, [this](const QString &text) {
        if (text.isEmpty())
            m_searchDebounce.start();
    });
    connect(m_search, &QLineEdit::returnPressed, this, &EventsPage::search);
    connect(m_state, &QComboBox::currentIndexChanged, this, [this] { applyFilter(false); });
    connect(m_when, &QComboBox::currentIndexChanged, this, [this] {
        updateWhenControls();
        // A day or a range waits for its dates; the others are whole choices.
        const int when = m_when->currentData().toInt();
        if (when != OnADay && when != Between)
            applyFilter(false);
    });
    connect(m_applyWhen, &QPushButton::clicked, this, [this] { applyFilter(false); });
    for (QDateTimeEdit *edit : {static_cast<QDateTimeEdit *>(m_day), m_from, m_to})
        connect(edit, &QAbstractSpinBox::editingFinished, this, [this] { applyFilter(false); });
    updateWhenControls();

    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &EventsPage::onSelectionChanged);
    connect(m_model, &EventsModel::totalChanged, this, &EventsPage::updateCount);
    connect(m_model, &EventsModel::deadLetterMatchesChanged, this, &EventsPage::updateEmptyState);
    connect(&DisplayTime::instance(), &DisplayTime::changed, this, [this] {
        if (!m_storyKey.isEmpty()) {
            showFacts(m_storyEvent);
            updateVerdict();
        }
    });
    connect(m_model, &EventsModel::loadingChanged, this, [this] {
        updateCount();
        updateEmptyState();
    });
    connect(m_model, &EventsModel::pageLoaded, this, [this] {
        m_error->hide();
        updateCount();
        updateEmptyState();
        selectStoryRow();
    });
    connect(m_model, &EventsModel::errorOccurred, this, [this](const QString &message) {
        m_error->setText(tr("Cannot read the events: %1").arg(message));
        m_error->show();
        updateEmptyState();
    });
    connect(m_model, &QAbstractItemModel::rowsInserted, this, &EventsPage::updateEmptyState);
    connect(m_model, &QAbstractItemModel::rowsRemoved, this, &EventsPage::updateEmptyState);
    connect(m_model, &QAbstractItemModel::modelReset, this, &EventsPage::updateEmptyState);
    // The open event's own row may have changed in a refresh: its facts follow.
    connect(m_model, &QAbstractItemModel::dataChanged, this,
            [this](const QModelIndex &from, const QModelIndex &to) {
                const int row = m_model->rowOfKey(m_storyKey);
                if (row >= from.row() && row <= to.row() && !m_storyLoaded)
                    showFacts(m_model->event(row));
                // A row selected while its page was on its way.
                if (m_selectedLoading) {
                    const QModelIndexList selected = m_table->selectionModel()->selectedRows();
                    const int source = selected.isEmpty() ? -1 : selected.constFirst().row();
                    if (source >= from.row() && source <= to.row())
                        onSelectionChanged();
                }
            });

    closeStory();
    updateCount();
    updateEmptyState();
}

EventsPage::~EventsPage()
{
    Settings settings;
    settings.setHeaderState(EventsHeader, m_table->horizontalHeader()->saveState());
    settings.setHeaderState(TimelineHeader, m_timeline->horizontalHeader()->saveState());
    settings.setSplitterState(QStringLiteral("events"), m_splitter->saveState());
}

void EventsPage::buildTimeline(QWidget *timeline)
{
    m_verdictIcon = new QLabel;
    m_verdictIcon->setFixedSize(24, 24);
    m_verdict = new QLabel;
    m_verdict->setObjectName(QStringLiteral("verdict"));
    m_verdict->setWordWrap(true);
    m_verdict->setTextFormat(Qt::PlainText);
    m_verdict->setTextInteractionFlags(Qt::TextSelectableByMouse);
    QFont verdictFont = m_verdict->font();
    verdictFont.setBold(true);
    verdictFont.setPointSizeF(verdictFont.pointSizeF() * 1.1);
    m_verdict->setFont(verdictFont);
    auto *verdictFrame = new QFrame;
    verdictFrame->setFrameShape(QFrame::StyledPanel);
    verdictFrame->setBackgroundRole(QPalette::AlternateBase);
    verdictFrame->setAutoFillBackground(true);
    m_customer = new QLabel;
    m_customer->setObjectName(QStringLiteral("customerText"));
    m_customer->setWordWrap(true);
    m_customer->setTextFormat(Qt::PlainText);
    m_customer->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_customer->setToolTip(tr("The verdict in plain words, to read to the customer"));
    auto *verdictLayout = new QHBoxLayout(verdictFrame);
    verdictLayout->addWidget(m_verdictIcon, 0, Qt::AlignTop);
    auto *verdictLines = new QVBoxLayout;
    verdictLines->addWidget(m_verdict);
    verdictLines->addWidget(m_customer);
    verdictLayout->addLayout(verdictLines, 1);

    m_factKey = factValue();
    m_factKey->setObjectName(QStringLiteral("factKey"));
    m_factKey->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_factEventId = factValue();
    m_factUser = factValue();
    m_factReminder = factValue();
    m_factScheduled = factValue();
    m_factScheduled->setObjectName(QStringLiteral("factScheduled"));
    m_factState = factValue();
    m_factSends = factValue();
    m_factDuplicates = factValue();
    m_factRequestId = factValue();
    auto *facts = new QGridLayout;
    facts->setHorizontalSpacing(10);
    facts->setVerticalSpacing(3);
    facts->setColumnStretch(1, 1);
    facts->setColumnStretch(3, 1);
    facts->addWidget(factName(tr("Send key")), 0, 0);
    facts->addWidget(m_factKey, 0, 1, 1, 3);
    facts->addWidget(factName(tr("Event id")), 1, 0);
    facts->addWidget(m_factEventId, 1, 1, 1, 3);
    facts->addWidget(factName(tr("User")), 2, 0);
    facts->addWidget(m_factUser, 2, 1);
    facts->addWidget(factName(tr("Reminder")), 2, 2);
    facts->addWidget(m_factReminder, 2, 3);
    facts->addWidget(factName(tr("Scheduled")), 3, 0);
    facts->addWidget(m_factScheduled, 3, 1);
    facts->addWidget(factName(tr("State")), 3, 2);
    facts->addWidget(m_factState, 3, 3);
    facts->addWidget(factName(tr("Sends")), 4, 0);
    facts->addWidget(m_factSends, 4, 1);
    facts->addWidget(factName(tr("Duplicates suppressed")), 4, 2);
    facts->addWidget(m_factDuplicates, 4, 3);
    facts->addWidget(factName(tr("Provider request id")), 5, 0);
    facts->addWidget(m_factRequestId, 5, 1, 1, 3);
    m_factPartner = factValue();
    m_factPartner->setObjectName(QStringLiteral("factPartner"));
    m_factPartner->setWordWrap(true);
    m_partnerPolicy = new QPushButton(tr("Honours the key?…"));
    m_partnerPolicy->setObjectName(QStringLiteral("partnerPolicy"));
    m_partnerPolicy->setToolTip(
        tr("Record whether this partner applies a repeated Idempotency-Key once. It is kept in "
           "the store: every console and `once history` word their verdicts from it."));
    connect(m_partnerPolicy, &QPushButton::clicked, this, &EventsPage::choosePartnerPolicy);
    auto *partner = new QHBoxLayout;
    partner->addWidget(m_factPartner, 1);
    partner->addWidget(m_partnerPolicy);
    facts->addWidget(factName(tr("Partner")), 6, 0);
    facts->addLayout(partner, 6, 1, 1, 3);
    m_factBody = factValue();
    m_factBody->setObjectName(QStringLiteral("factBody"));
    m_factBody->setWordWrap(true);
    m_factBody->setToolTip(tr("The message's body as the producer sent it"));
    facts->addWidget(factName(tr("Body")), 7, 0, Qt::AlignTop);
    facts->addWidget(m_factBody, 7, 1, 1, 3);

    m_copyKey = new QPushButton(QIcon::fromTheme(QStringLiteral("edit-copy")), tr("&Copy key"));
    m_copyKey->setObjectName(QStringLiteral("copyKey"));
    m_copyKey->setToolTip(tr("Copy the send key (the Idempotency-Key the partner saw)"));
    m_export = new QPushButton(QIcon::fromTheme(QStringLiteral("document-save-as")), tr("&Export history…"));
    m_export->setObjectName(QStringLiteral("exportHistory"));
    m_export->setToolTip(tr("Save this event and its history as CSV or JSON"));
    m_openDeadLetter = new QPushButton(tr("Open &dead letter"));
    m_openDeadLetter->setObjectName(QStringLiteral("openDeadLetter"));
    m_openDeadLetter->setToolTip(
        tr("This event's dead letter on the Dead letters page, to redrive or discard it"));
    connect(m_copyKey, &QPushButton::clicked, this, &EventsPage::copyKey);
    connect(m_export, &QPushButton::clicked, this, &EventsPage::chooseExport);
    connect(m_openDeadLetter, &QPushButton::clicked, this, [this] {
        if (!m_storyKey.isEmpty())
            emit deadLetterRequested(m_storyKey);
    });
    auto *buttons = new QHBoxLayout;
    buttons->addWidget(m_copyKey);
    buttons->addWidget(m_export);
    buttons->addWidget(m_openDeadLetter);
    buttons->addStretch(1);

    m_timeline = new QTableView;
    m_timeline->setObjectName(QStringLiteral("timeline"));
    setupTable(m_timeline);
    m_timeline->setModel(m_attempts);
    QHeaderView *header = m_timeline->horizontalHeader();
    const std::pair<AttemptsModel::Column, int> widths[] = {
        {AttemptsModel::Time, 180},
        {AttemptsModel::Summary, 380},
        {AttemptsModel::Step, 80},
        {AttemptsModel::Outcome, 90},
        {AttemptsModel::MessageId, 80},
        {AttemptsModel::EventId, 110},
        {AttemptsModel::Delivery, 65},
        {AttemptsModel::Worker, 110},
        {AttemptsModel::HttpStatus, 50},
        {AttemptsModel::Latency, 70},
        {AttemptsModel::ProviderRequestId, 150},
        {AttemptsModel::Error, 200},
    };
    for (const auto &[column, width] : widths)
        header->resizeSection(column, width);
    header->restoreState(Settings().headerState(TimelineHeader));

    auto *layout = new QVBoxLayout(timeline);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(verdictFrame);
    layout->addLayout(facts);
    layout->addLayout(buttons);
    layout->addWidget(m_timeline, 1);
}

void EventsPage::setSession(StoreSession *session)
{
    for (const auto &connection : std::as_const(m_sessionConnections))
        disconnect(connection);
    m_sessionConnections.clear();
    m_session = session;
    closeStory();
    m_error->hide();
    // Another store's audit log numbers other actions.
    m_auditFilter = 0;
    m_auditBar->hide();
    if (session) {
        m_sessionConnections << connect(session, &StoreSession::historyLoaded, this,
                                        &EventsPage::onHistoryLoaded)
                             << connect(session, &StoreSession::failed, this, &EventsPage::onFailed);
    }
    m_model->setSession(session);
    if (m_model->filter().auditId != 0) {
        EventFilter filter = m_model->filter();
        filter.auditId = 0;
        m_model->setFilter(filter);
    }
    updateCount();
    updateEmptyState();
}

void EventsPage::refresh()
{
    if (!m_session)
        return;
    const auto [first, last] = visibleRows();
    m_model->refreshRows(first, last);
    if (!m_storyKey.isEmpty() && !m_historyToken)
        requestHistory();
}

void EventsPage::focusSearch()
{
    m_search->setFocus(Qt::ShortcutFocusReason);
    m_search->selectAll();
}

void EventsPage::search()
{
    m_searchDebounce.stop();
    applyFilter(true);
}

void EventsPage::showStory(const QByteArray &sendKey)
{
    // A story asked for by name is found whatever audit row's events were listed.
    m_auditFilter = 0;
    m_auditBar->hide();
    // A copy: the caller's key may live in the model's rows, which the new search drops.
    const QByteArray key = sendKey;
    m_search->setText(QString::fromLatin1(key));
    m_state->setCurrentIndex(0); // all states: the event may have moved on since
    search();
    openStory(key);
}

void EventsPage::showAuditEvents(const AuditEntry &entry)
{
    m_auditFilter = entry.id;
    m_auditLabel->setText(tr("Events touched by audit #%1: %2 by %3 at %4 (%5)%6")
                              .arg(QString::number(entry.id), AuditModel::describeAction(entry.action),
                                   entry.actor, formatDisplayTime(entry.atMs), entry.detail,
                                   entry.reason.isEmpty() ? QString() : tr(": “%1”").arg(entry.reason)));
    m_auditBar->show();
    // Every event it touched, whatever became of it since.
    m_search->clear();
    m_state->setCurrentIndex(0);
    search();
}

void EventsPage::showTimeWindow(qint64 sinceMs, qint64 untilMs)
{
    const QTimeZone zone = DisplayTime::instance().utc() ? QTimeZone::utc() : QTimeZone::systemTimeZone();
    constexpr qint64 Minute = 60000;
    const QDateTime from = QDateTime::fromMSecsSinceEpoch(sinceMs / Minute * Minute, zone);
    // The filter's end is open: the minute after the last moment.
    const QDateTime to = QDateTime::fromMSecsSinceEpoch((untilMs / Minute + 1) * Minute, zone);
    m_auditFilter = 0;
    m_auditBar->hide();
    {
        // One search below, not one per control changed.
        const QSignalBlocker blockWhen(m_when);
        const QSignalBlocker blockState(m_state);
        const QSignalBlocker blockFrom(m_from);
        const QSignalBlocker blockTo(m_to);
        m_search->clear();
        m_state->setCurrentIndex(0);
        m_when->setCurrentIndex(m_when->findData(Between));
        m_from->setDateTime(QDateTime(from.date(), from.time()));
        m_to->setDateTime(QDateTime(to.date(), to.time()));
    }
    updateWhenControls();
    search();
}

void EventsPage::applyFilter(bool force)
{
    m_searchDebounce.stop();
    EventFilter filter;
    filter.text = m_search->text().trimmed();
    const QString state = m_state->currentData().toString();
    if (state == SeveralEffects)
        filter.calls = EventFilter::Calls::SeveralEffects;
    else if (state == Unanswered)
        filter.calls = EventFilter::Calls::Unanswered;
    else
        filter.state = state;
    filter.auditId = m_auditFilter;
    std::tie(filter.sinceMs, filter.untilMs) = whenWindow();
    filter.order = m_bySends ? EventFilter::Order::MostSends : EventFilter::Order::Written;
    const EventFilter current = m_model->filter();
    if (!force && filter.text == current.text && filter.state == current.state && filter.auditId == current.auditId
        && filter.calls == current.calls && filter.sinceMs == current.sinceMs && filter.untilMs == current.untilMs
        && filter.order == current.order)
        return;
    closeStory();
    m_error->hide();
    m_model->setFilter(filter);
    m_table->scrollToTop();
    updateCount();
    updateEmptyState();
}

std::pair<qint64, qint64> EventsPage::whenWindow() const
{
    // Days begin at midnight where the console shows its times.
    const QTimeZone zone = DisplayTime::instance().utc() ? QTimeZone::utc() : QTimeZone::systemTimeZone();
    const QDate today = QDateTime::currentDateTimeUtc().toTimeZone(zone).date();
    const auto dayWindow = [&zone](QDate day) {
        return std::pair<qint64, qint64>{day.startOfDay(zone).toMSecsSinceEpoch(),
                                         day.addDays(1).startOfDay(zone).toMSecsSinceEpoch()};
    };
    switch (m_when->currentData().toInt()) {
    case Today:
        return dayWindow(today);
    case Yesterday:
        return dayWindow(today.addDays(-1));
    case OnADay:
        return dayWindow(m_day->date());
    case Between:
        return {QDateTime(m_from->date(), m_from->time(), zone).toMSecsSinceEpoch(),
                QDateTime(m_to->date(), m_to->time(), zone).toMSecsSinceEpoch()};
    default:
        return {0, 0};
    }
}

void EventsPage::updateWhenControls()
{
    const int when = m_when->currentData().toInt();
    m_day->setVisible(when == OnADay);
    m_from->setVisible(when == Between);
    m_to->setVisible(when == Between);
    findChild<QLabel *>(QStringLiteral("whenToLabel"))->setVisible(when == Between);
    m_applyWhen->setVisible(when == OnADay || when == Between);
}

void EventsPage::sortBySends(bool bySends)
{
    m_bySends = bySends;
    QHeaderView *header = m_table->horizontalHeader();
    header->setSortIndicatorShown(bySends);
    if (bySends)
        header->setSortIndicator(EventsModel::Sends, Qt::DescendingOrder);
    applyFilter(false);
}

std::pair<int, int> EventsPage::visibleRows() const
{
    const int rows = m_model->rowCount();
    if (rows == 0)
        return {0, -1};
    int top = m_table->rowAt(0);
    int bottom = m_table->rowAt(m_table->viewport()->height() - 1);
    if (top < 0)
        top = 0;
    if (bottom < 0)
        bottom = rows - 1; // the rows end above the bottom of the view
    return {top, std::min(bottom, top + 2 * EventsModel::PageSize - 1)};
}

void EventsPage::onSelectionChanged()
{
    m_selectedLoading = false;
    const QModelIndexList rows = m_table->selectionModel()->selectedRows();
    // An empty selection (rows that left the filter in a refresh) keeps the story open.
    if (rows.isEmpty())
        return;
    const QModelIndex source = rows.constFirst();
    // A row whose page is still on its way has no key yet: its story opens when the page
    // comes (dataChanged).
    const QByteArray sendKey = m_model->event(source.row()).sendKey;
    m_selectedLoading = sendKey.isEmpty();
    if (!m_selectedLoading)
        openStory(sendKey);
}

void EventsPage::openStory(const QByteArray &sendKey)
{
    if (sendKey == m_storyKey)
        return;
    m_storyKey = sendKey;
    m_storyLoaded = false;
    m_storyError.clear();
    m_attempts->clear();
    const int row = m_model->rowOfKey(sendKey);
    if (row >= 0) {
        m_storyEvent = m_model->event(row);
        showFacts(m_storyEvent);
    }
    m_historyToken = 0; // an answer for the previous event must not land here
    requestHistory();
    updateVerdict();
    m_storyStack->setCurrentIndex(1);
}

void EventsPage::closeStory()
{
    m_storyKey.clear();
    m_storyEvent = EventRow();
    m_storyLoaded = false;
    m_storyError.clear();
    m_historyToken = 0;
    m_attempts->clear();
    if (m_table->selectionModel())
        m_table->selectionModel()->clear();
    m_storyStack->setCurrentIndex(0);
    m_copyKey->setEnabled(false);
    m_export->setEnabled(false);
    m_openDeadLetter->setEnabled(false);
}

void EventsPage::requestHistory()
{
    if (m_session && !m_storyKey.isEmpty())
        m_historyToken = m_session->loadHistory(QString::fromLatin1(m_storyKey));
}

void EventsPage::onHistoryLoaded(quint64 token, const EventRow &event, const QList<Attempt> &attempts)
{
    if (token == 0 || token != m_historyToken)
        return;
    m_historyToken = 0;
    if (event.sendKey != m_storyKey)
        return;
    m_storyEvent = event;
    m_storyLoaded = true;
    m_storyError.clear();
    m_attempts->setAttempts(attempts);
    showFacts(event);
    updateVerdict();
    m_model->updateEvent(event);
}

void EventsPage::onFailed(quint64 token, const QString &error)
{
    if (token == 0 || token != m_historyToken)
        return;
    m_historyToken = 0;
    m_storyError = error;
    updateVerdict();
}

void EventsPage::showFacts(const EventRow &event)
{
    const auto orDash = [](const QString &text) { return text.isEmpty() ? QStringLiteral("—") : text; };
    m_factKey->setText(QString::fromLatin1(event.sendKey));
    m_factEventId->setText(orDash(event.eventId));
    m_factUser->setText(event.userId);
    m_factReminder->setText(event.reminderId);
    m_factScheduled->setText(event.scheduledAtMs > 0
                                 ? formatDisplayTime(event.scheduledAtMs) + QLatin1Char(' ') +
                                       DisplayTime::instance().zoneAbbreviation()
                                 : QString());
    m_factScheduled->setToolTip(formatTime(event.scheduledAtMs));
    m_factState->setText(event.state);
    m_factState->setToolTip(stateDescription(event.state));
    m_factSends->setText(QString::number(event.sends));
    m_factDuplicates->setText(QString::number(event.duplicates));
    m_factRequestId->setText(orDash(event.providerRequestId));
    if (event.partner.isEmpty()) {
        m_factPartner->setText(tr("— (no send on record names one)"));
    } else {
        const QString honours = event.partnerHonoursKey == KeyHonouring::Honoured
                                    ? tr("honours Idempotency-Key")
                                : event.partnerHonoursKey == KeyHonouring::Ignored
                                    ? tr("does not honour Idempotency-Key")
                                    : tr("not recorded whether it honours Idempotency-Key");
        m_factPartner->setText(tr("%1 (%2)").arg(event.partner, honours));
    }
    enableUnlessReadOnly(m_partnerPolicy, !event.partner.isEmpty() && m_session,
                         m_session ? m_session->readOnlyReason() : QString());
    // What the user was sent: a payload's "body", else the whole message.
    const QJsonObject message = QJsonDocument::fromJson(event.payload).object();
    const QJsonValue body = message.value(QStringLiteral("body"));
    m_factBody->setText(body.isString() ? body.toString() : QString::fromUtf8(event.payload));
    m_copyKey->setEnabled(!event.sendKey.isEmpty());
    // Only a dead event has a dead letter (unless it was discarded; the page then says so).
    m_openDeadLetter->setEnabled(event.state == LedgerState::Dead);
}

void EventsPage::updateVerdict()
{
    QString text;
    QString state;
    Verdict verdict;
    if (!m_storyError.isEmpty()) {
        text = tr("Cannot read this event's history: %1").arg(m_storyError);
    } else if (!m_storyLoaded) {
        text = tr("Reading the history…");
    } else {
        verdict = eventVerdict(m_storyEvent, m_attempts->attempts(),
                               DisplayTime::instance().utc() ? VerdictClock::Utc : VerdictClock::Local);
        text = verdict.text;
        state = m_storyEvent.state;
    }
    m_verdict->setText(text);
    m_customer->setText(verdict.customerText.isEmpty() ? QString()
                                                       : tr("To the customer: “%1”").arg(verdict.customerText));
    m_customer->setVisible(!verdict.customerText.isEmpty());
    // Several calls the partner may each have acted on: a warning, whatever the state.
    if (verdict.kind == Verdict::Kind::Uncertain || verdict.kind == Verdict::Kind::Duplicated)
        m_verdictIcon->setPixmap(style()->standardIcon(QStyle::SP_MessageBoxWarning).pixmap(24, 24));
    else
        m_verdictIcon->setPixmap(state.isEmpty() ? QPixmap() : stateIcon(state).pixmap(24, 24));
    m_export->setEnabled(m_storyLoaded);
}

void EventsPage::choosePartnerPolicy()
{
    const QString partner = m_storyEvent.partner;
    if (partner.isEmpty() || !m_session)
        return;
    const QStringList choices{tr("Not known"), tr("Yes: a repeated key is applied once"),
                              tr("No: every call is acted on")};
    const int current = m_storyEvent.partnerHonoursKey == KeyHonouring::Honoured  ? 1
                        : m_storyEvent.partnerHonoursKey == KeyHonouring::Ignored ? 2
                                                                                  : 0;
    bool ok = false;
    const QString choice = QInputDialog::getItem(
        this, tr("Partner and Idempotency-Key"),
        tr("Does %1 apply a request whose Idempotency-Key it has already seen only once?\n"
           "Check the partner's documentation, or rehearse with `once partner-sim`. Every console and "
           "`once history` on this store will word their verdicts from your answer.")
            .arg(partner),
        choices, current, false, &ok);
    if (!ok)
        return;
    const int index = int(choices.indexOf(choice));
    recordPartnerPolicy(index == 1   ? KeyHonouring::Honoured
                        : index == 2 ? KeyHonouring::Ignored
                                     : KeyHonouring::Unknown);
}

void EventsPage::recordPartnerPolicy(KeyHonouring honoursKey)
{
    if (!m_storyEvent.partner.isEmpty() && m_session)
        m_session->setPartnerPolicy(m_storyEvent.partner, honoursKey);
}

void EventsPage::updateCount()
{
    const qint64 total = m_model->total();
    QString text;
    if (!m_session)
        text = QString();
    else if (total < 0)
        text = tr("Counting…");
    else if (total > EventFilter::CountLimit && m_model->filter().countIsBounded())
        text = tr("more than %1 events").arg(formatCount(EventFilter::CountLimit));
    else
        text = formatQuantity(total, tr("event"), tr("events"));
    if (m_model->isLoading() && !text.isEmpty())
        text += tr(" · loading…");
    m_count->setText(text);
    m_count->setToolTip(tr("%1 loaded").arg(formatCount(m_model->rowCount())));
}

void EventsPage::updateEmptyState()
{
    if (m_model->rowCount() > 0) {
        m_tableStack->setCurrentIndex(0);
        return;
    }
    const EventFilter filter = m_model->filter();
    if (!m_session)
        m_tableEmpty->setText(tr("No store is open"));
    else if (!m_model->hasLoaded())
        m_tableEmpty->setText(m_model->errorString().isEmpty() ? tr("Loading events…")
                                                               : tr("The events could not be read"));
    else if (filter.auditId != 0)
        m_tableEmpty->setText(tr("No events match\n\nThis action touched no event that is still in the store "
                                 "(a message that never parsed has none; retention removes old ones)."));
    else if (filter.text.isEmpty() && filter.state.isEmpty() && filter.calls == EventFilter::Calls::Any
             && filter.sinceMs == 0 && filter.untilMs == 0)
        m_tableEmpty->setText(tr("No events in this store yet"));
    else if (filter.text.isEmpty())
        m_tableEmpty->setText(tr("No events match"));
    else if (const qint64 letters = m_model->deadLetterMatches(); letters > 0)
        // The message never became an event, but it did arrive: "not found" must not
        // read as "never received".
        m_tableEmpty->setText(
            tr("No events match<br><br>but %1 the same search: <a href=\"deadLetters\">show them</a>")
                .arg(letters == 1 ? tr("1 dead letter matches")
                                  : tr("%1 dead letters match").arg(formatCount(letters))));
    else
        // Substrings find nothing; say so, or "ali" looks like "no such user".
        m_tableEmpty->setText(
            tr("No events match\n\nThe search is exact: a whole user id, destination, reminder id, "
               "send key or event id."));
    m_tableStack->setCurrentIndex(1);
}

// After a refresh that started the list over, the open event is selected again if it is
// still there, without reading its history anew.
void EventsPage::selectStoryRow()
{
    if (m_storyKey.isEmpty() || m_table->selectionModel()->hasSelection())
        return;
    const int row = m_model->rowOfKey(m_storyKey);
    if (row < 0)
        return;
    const QModelIndex index = m_model->index(row, 0);
    m_table->selectionModel()->select(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

QString EventsPage::verdictText() const
{
    return m_storyKey.isEmpty() ? QString() : m_verdict->text();
}

QString EventsPage::customerText() const
{
    return m_storyKey.isEmpty() ? QString() : m_customer->text();
}

QString EventsPage::countText() const
{
    return m_count->text();
}

void EventsPage::copyKey()
{
    if (m_storyKey.isEmpty())
        return;
    QGuiApplication::clipboard()->setText(QString::fromLatin1(m_storyKey));
    m_copyKey->setText(tr("Copied"));
    QTimer::singleShot(1500, m_copyKey, [button = m_copyKey] { button->setText(tr("&Copy key")); });
}

bool EventsPage::exportHistory(const QString &path, QString *error) const
{
    if (!m_storyLoaded) {
        *error = tr("No event's history is loaded");
        return false;
    }
    return writeHistory(path, historyFormatFor(path), m_storyEvent, m_attempts->attempts(), error);
}

void EventsPage::chooseExport()
{
    if (!m_storyLoaded)
        return;
    const QString csvFilter = tr("CSV (*.csv)");
    const QString jsonFilter = tr("JSON (*.json)");
    QString selected = jsonFilter;
    // A key holds ':' and '%', which some file systems and shells dislike.
    QString name = m_storyEvent.eventId.isEmpty() ? QString::fromLatin1(m_storyKey) : m_storyEvent.eventId;
    for (QChar &c : name) {
        if (!c.isLetterOrNumber() && c != QLatin1Char('-') && c != QLatin1Char('_') && c != QLatin1Char('.'))
            c = QLatin1Char('_');
    }
    const QString folder = QStandardPaths::writableLocation(QStandardPaths::DocumentsLocation);
    QString path = QFileDialog::getSaveFileName(
        this, tr("Export History"),
        QDir(folder).filePath(QStringLiteral("history-") + name + QStringLiteral(".json")),
        jsonFilter + QStringLiteral(";;") + csvFilter, &selected);
    if (path.isEmpty())
        return;
    const QString suffix = selected == csvFilter ? QStringLiteral(".csv") : QStringLiteral(".json");
    if (!path.endsWith(QLatin1String(".csv"), Qt::CaseInsensitive) &&
        !path.endsWith(QLatin1String(".json"), Qt::CaseInsensitive))
        path += suffix;
    QString error;
    if (!exportHistory(path, &error))
        QMessageBox::warning(this, tr("Cannot export the history"),
                             tr("%1: %2").arg(QDir::toNativeSeparators(path), error));
}

} // namespace once::ui
