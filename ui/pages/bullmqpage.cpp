#include "pages/bullmqpage.h"

#include "display/humanunits.h"
#include "queues/queuelocation.h"
#include "session/storesession.h"

#include <QDir>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QItemSelectionModel>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTabBar>
#include <QTableView>
#include <QUrl>
#include <QVBoxLayout>

namespace once::ui {

using namespace once;

namespace {

const char UrlKey[] = "bullmq/url";
const char ScriptsKey[] = "bullmq/scripts";

enum QueueColumn
{
    QueueName,
    Waiting,
    Active,
    Delayed,
    Prioritized,
    Completed,
    Failed,
    Paused,
    QueueColumns
};
enum JobColumn
{
    JobId,
    JobName,
    Added,
    Attempts,
    Finished,
    Reason,
    JobColumns
};

QString pretty(const QByteArray &json)
{
    const QJsonDocument document = QJsonDocument::fromJson(json);
    return document.isNull() ? QString::fromUtf8(json)
                             : QString::fromUtf8(document.toJson(QJsonDocument::Indented)).trimmed();
}

QString when(qint64 ms)
{
    return ms > 0 ? formatDisplayTime(ms) : QString();
}

} // namespace

BullMqPage::BullMqPage(QWidget *parent) : Page(parent)
{
    m_url = new QLineEdit(this);
    m_url->setObjectName(QStringLiteral("bullmqUrl"));
    m_url->setPlaceholderText(QStringLiteral("redis://HOST:6379/0"));
    m_password = new QLineEdit(this);
    m_password->setObjectName(QStringLiteral("bullmqPassword"));
    m_password->setEchoMode(QLineEdit::Password);
    m_password->setPlaceholderText(tr("password"));
    m_scripts = new QLineEdit(this);
    m_scripts->setObjectName(QStringLiteral("bullmqScripts"));
    m_scripts->setPlaceholderText(tr("node_modules/bullmq/dist/cjs/commands of your bullmq %1")
                                      .arg(BullMqScripts::supportedVersions().join(QStringLiteral(", "))));
    const QSettings settings;
    m_url->setText(settings.value(QLatin1String(UrlKey)).toString());
    m_scripts->setText(settings.value(QLatin1String(ScriptsKey)).toString());
    auto *connectButton = new QPushButton(tr("Connect"), this);
    connect(connectButton, &QPushButton::clicked, this, &BullMqPage::connectFromFields);
    connect(m_url, &QLineEdit::returnPressed, this, &BullMqPage::connectFromFields);
    auto *server = new QHBoxLayout;
    server->addWidget(new QLabel(tr("Redis:"), this));
    server->addWidget(m_url, 3);
    server->addWidget(m_password, 1);
    server->addWidget(new QLabel(tr("Scripts:"), this));
    server->addWidget(m_scripts, 3);
    server->addWidget(connectButton);

    m_status = new QLabel(tr("Connect to the Redis server of your BullMQ queues."), this);
    m_status->setObjectName(QStringLiteral("bullmqStatus"));
    m_status->setWordWrap(true);

    m_queueModel = new QStandardItemModel(0, QueueColumns, this);
    m_queueModel->setHorizontalHeaderLabels({tr("Queue"), tr("Waiting"), tr("Active"), tr("Delayed"),
                                             tr("Prioritized"), tr("Completed"), tr("Failed"), tr("Paused")});
    m_queueView = new QTableView(this);
    m_queueView->setObjectName(QStringLiteral("bullmqQueues"));
    m_queueView->setModel(m_queueModel);
    m_queueView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_queueView->setSelectionMode(QAbstractItemView::SingleSelection);
    m_queueView->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_queueView->verticalHeader()->hide();
    m_queueView->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_queueView->setWordWrap(false);
    connect(m_queueView->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            &BullMqPage::selectQueue);

    m_states = new QTabBar(this);
    m_states->setObjectName(QStringLiteral("bullmqStates"));
    for (const BullMqState state : bullMqListedStates())
        m_states->addTab(bullMqStateName(state));
    connect(m_states, &QTabBar::currentChanged, this, &BullMqPage::listCurrent);
    m_search = new QLineEdit(this);
    m_search->setObjectName(QStringLiteral("bullmqSearch"));
    m_search->setPlaceholderText(tr("Job id, or text in a name, data or failure (Enter)"));
    m_search->setClearButtonEnabled(true);
    connect(m_search, &QLineEdit::returnPressed, this, &BullMqPage::startSearch);
    connect(m_search, &QLineEdit::textChanged, this, [this](const QString &text) {
        if (text.isEmpty() && !m_searching)
            listCurrent();
    });
    m_cancelSearch = new QPushButton(tr("Cancel search"), this);
    m_cancelSearch->setVisible(false);
    connect(m_cancelSearch, &QPushButton::clicked, this, [this] {
        if (m_bullmq)
            m_bullmq->cancelSearch();
    });
    auto *searchRow = new QHBoxLayout;
    m_states->setExpanding(false);
    searchRow->addWidget(m_states, 3);
    searchRow->addWidget(m_search, 2);
    searchRow->addWidget(m_cancelSearch);

    m_jobModel = new QStandardItemModel(0, JobColumns, this);
    m_jobModel->setHorizontalHeaderLabels(
        {tr("Job id"), tr("Name"), tr("Added"), tr("Attempts"), tr("Finished"), tr("Failure")});
    m_jobView = new QTableView(this);
    m_jobView->setObjectName(QStringLiteral("bullmqJobs"));
    m_jobView->setModel(m_jobModel);
    m_jobView->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_jobView->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_jobView->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_jobView->verticalHeader()->hide();
    m_jobView->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    m_jobView->horizontalHeader()->setStretchLastSection(true);
    m_jobView->setWordWrap(false);
    connect(m_jobView->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex &index) {
                const auto queue = currentQueue();
                if (queue && index.isValid() && m_bullmq)
                    m_bullmq->details(*queue, m_jobModel->item(index.row(), JobId)->text());
                updateActions();
            });
    connect(m_jobView->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            &BullMqPage::updateActions);
    m_more = new QPushButton(tr("Show %1 more").arg(PageSize), this);
    m_more->setVisible(false);
    connect(m_more, &QPushButton::clicked, this, [this] {
        const auto queue = currentQueue();
        if (queue && m_bullmq)
            m_bullmq->list(*queue, currentState(), m_listed, PageSize);
    });

    m_details = new QPlainTextEdit(this);
    m_details->setObjectName(QStringLiteral("bullmqDetails"));
    m_details->setReadOnly(true);
    m_details->setPlaceholderText(
        tr("Select a job to see its data, options, attempts, failure, stack trace and logs."));
    m_story = new QPushButton(tr("Show its send key's story"), this);
    m_story->setEnabled(false);
    connect(m_story, &QPushButton::clicked, this, [this] { emit storyRequested(m_shownSendKey); });

    auto *actions = new QHBoxLayout;
    const QList<QPair<BullMqAction, QString>> buttons{
        {BullMqAction::Retry, tr("Retry")},
        {BullMqAction::Promote, tr("Promote")},
        {BullMqAction::Remove, tr("Remove")},
        {BullMqAction::RetryAllFailed, tr("Retry all failed (every queue)")},
        {BullMqAction::Clean, tr("Clean…")},
        {BullMqAction::Pause, tr("Pause")},
        {BullMqAction::Resume, tr("Resume")},
        {BullMqAction::Drain, tr("Drain…")},
        {BullMqAction::Obliterate, tr("Obliterate…")}};
    for (const auto &[action, text] : buttons) {
        auto *button = new QPushButton(text, this);
        button->setObjectName(QStringLiteral("bullmqAction-") + bullMqActionName(action));
        connect(button, &QPushButton::clicked, this, [this, action = action] { act(action); });
        actions->addWidget(button);
        m_actionButtons.append({action, button});
    }
    actions->addStretch();
    actions->addWidget(m_story);

    auto *jobsPane = new QWidget(this);
    auto *jobsLayout = new QVBoxLayout(jobsPane);
    jobsLayout->setContentsMargins(0, 0, 0, 0);
    jobsLayout->addLayout(searchRow);
    jobsLayout->addWidget(m_jobView, 1);
    jobsLayout->addWidget(m_more, 0, Qt::AlignLeft);
    auto *right = new QSplitter(Qt::Vertical, this);
    right->addWidget(jobsPane);
    right->addWidget(m_details);
    right->setStretchFactor(0, 3);
    right->setStretchFactor(1, 2);
    auto *split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(m_queueView);
    split->addWidget(right);
    split->setStretchFactor(0, 2);
    split->setStretchFactor(1, 3);
    split->setSizes({560, 840});

    auto *layout = new QVBoxLayout(this);
    layout->addLayout(server);
    layout->addWidget(m_status);
    layout->addLayout(actions);
    layout->addWidget(split, 1);
    updateActions();
}

BullMqPage::~BullMqPage() = default;

void BullMqPage::setSession(StoreSession *session)
{
    m_store = session;
}

void BullMqPage::focusSearch()
{
    m_search->setFocus();
    m_search->selectAll();
}

void BullMqPage::connectFromFields()
{
    QUrl url(m_url->text().trimmed(), QUrl::StrictMode);
    if (!m_password->text().isEmpty())
        url.setPassword(m_password->text());
    connectTo(url.toString(), m_scripts->text().trimmed());
}

void BullMqPage::connectTo(const QString &redisUrl, const QString &scriptsFolder)
{
    const QUrl url(redisUrl, QUrl::StrictMode);
    if (!url.isValid() || url.scheme() != QLatin1String("redis") || url.host().isEmpty()) {
        m_status->setText(tr("Not a Redis URL: redis://[[USER]:PASSWORD@]HOST[:PORT]/DB"));
        return;
    }
    // What is shown and saved never holds the password; the password stays in memory.
    // Written out rather than through QUrl's user info, which keeps an "@" (or more) behind.
    const QString user = url.userName(QUrl::FullyEncoded);
    const QString shown = QStringLiteral("redis://") + (user.isEmpty() ? QString() : user + u'@') +
                          hostAndPort(url.host(), url.port(6379)) + u'/' +
                          QString::number(url.path().mid(1).toInt());
    m_url->setText(shown);
    if (!url.password().isEmpty())
        m_password->setText(url.password(QUrl::FullyDecoded));
    const QString scripts = scriptsFolder.isEmpty() ? BullMqScripts::commandsFolder() : scriptsFolder;
    m_scripts->setText(scriptsFolder);
    QSettings settings;
    settings.setValue(QLatin1String(UrlKey), shown);
    settings.setValue(QLatin1String(ScriptsKey), scriptsFolder);

    RedisEndpoint endpoint{url.host(),
                           url.port(6379),
                           url.userName(QUrl::FullyDecoded),
                           url.password(QUrl::FullyDecoded),
                           url.path().mid(1).toInt(),
                           shown};
    m_bullmq = std::make_unique<BullMqSession>(std::move(endpoint), QDir(scripts).absolutePath());
    connect(m_bullmq.get(), &BullMqSession::scriptsChecked, this, &BullMqPage::onScriptsChecked);
    connect(m_bullmq.get(), &BullMqSession::queuesLoaded, this, &BullMqPage::onQueuesLoaded);
    connect(m_bullmq.get(), &BullMqSession::jobsListed, this, &BullMqPage::onJobsListed);
    connect(m_bullmq.get(), &BullMqSession::detailsLoaded, this, &BullMqPage::onDetailsLoaded);
    connect(m_bullmq.get(), &BullMqSession::searchDone, this, &BullMqPage::onSearchDone);
    connect(m_bullmq.get(), &BullMqSession::failed, this, [this](const QString &error) {
        m_searching = false;
        m_discovering = false;
        m_cancelSearch->setVisible(false);
        m_status->setText(error);
    });
    connect(m_bullmq.get(), &BullMqSession::acted, this, &BullMqPage::onActed);
    m_actionsAsked.clear();
    m_lastOutcome.clear();
    m_shownJobId.clear();
    m_queues.clear();
    m_queueModel->removeRows(0, m_queueModel->rowCount());
    m_jobModel->removeRows(0, m_jobModel->rowCount());
    m_status->setText(tr("Looking for BullMQ queues at %1…").arg(m_bullmq->serverName()));
    m_discovering = true;
    m_bullmq->discover();
}

// The page's timer asks every few seconds; a server slow to answer a discovery (a big
// keyspace to SCAN) is not asked again until it has.
void BullMqPage::refresh()
{
    if (m_bullmq && isVisible() && !m_discovering) {
        m_discovering = true;
        m_bullmq->discover();
    }
}

// Audited once done, with what it did: BullMQ keeps no log of who did what.
void BullMqPage::onActed(BullMqAction action, int jobs, const QString &error)
{
    const QString detail = m_actionsAsked.isEmpty() ? QString() : m_actionsAsked.takeFirst();
    const QString outcome = tr("%1: %n job(s)", nullptr, jobs).arg(bullMqActionName(action));
    m_lastOutcome = error.isEmpty() ? outcome : tr("%1; then failed: %2").arg(outcome, error);
    m_status->setText(m_lastOutcome);
    if (m_store)
        m_store->recordAudit(bullMqActionName(action),
                             error.isEmpty() ? detail : detail + QStringLiteral(" (failed: %1)").arg(error),
                             jobs);
    refresh();
    listCurrent();
    // The job on show may be one the action moved: show it as it is now.
    if (const auto queue = currentQueue(); queue && !m_shownJobId.isEmpty())
        m_bullmq->details(*queue, m_shownJobId);
}

void BullMqPage::onScriptsChecked(const QString &readOnlyReason)
{
    m_readOnlyReason = readOnlyReason;
    updateActions();
}

void BullMqPage::onQueuesLoaded(const QList<BullMqQueueSummary> &queues)
{
    m_discovering = false;
    const auto selected = currentQueue();
    m_queues = queues;
    m_queueModel->setRowCount(int(queues.size()));
    int selectRow = queues.isEmpty() ? -1 : 0;
    for (int row = 0; row < queues.size(); ++row) {
        const BullMqQueueSummary &summary = queues.at(row);
        const BullMqCounts &c = summary.counts;
        const QString name = summary.queue.prefix == QLatin1String("bull")
                                 ? summary.queue.name
                                 : summary.queue.prefix + u':' + summary.queue.name;
        const QList<QVariant> cells{
            name,          c.waiting,   c.active, c.delayed,
            c.prioritized, c.completed, c.failed, c.paused ? tr("paused") : QString()};
        for (int column = 0; column < QueueColumns; ++column) {
            auto *item = new QStandardItem;
            item->setData(cells.at(column), Qt::DisplayRole);
            if (column != QueueName && column != Paused)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_queueModel->setItem(row, column, item);
        }
        if (selected && summary.queue == *selected)
            selectRow = row;
    }
    const QString state = m_readOnlyReason.isEmpty() ? QString() : tr(" Read-only: %1").arg(m_readOnlyReason);
    // The last action's outcome stays in view: the refresh it asks for answers at once.
    const QString last = m_lastOutcome.isEmpty() ? QString() : tr(" Last action: %1.").arg(m_lastOutcome);
    m_status->setText(
        tr("%n BullMQ queue(s) at %1.", nullptr, int(queues.size())).arg(m_bullmq->serverName()) + last +
        state);
    if (selectRow >= 0 && (!selected || m_queueView->currentIndex().row() != selectRow))
        m_queueView->setCurrentIndex(m_queueModel->index(selectRow, QueueName));
}

std::optional<BullMqQueueName> BullMqPage::currentQueue() const
{
    const int row = m_queueView->currentIndex().row();
    if (row < 0 || row >= m_queues.size())
        return std::nullopt;
    return m_queues.at(row).queue;
}

BullMqState BullMqPage::currentState() const
{
    return bullMqListedStates().value(m_states->currentIndex(), BullMqState::Waiting);
}

void BullMqPage::selectQueue()
{
    m_details->clear();
    m_shownSendKey.clear();
    m_shownJobId.clear();
    m_story->setEnabled(false);
    if (m_search->text().isEmpty())
        listCurrent();
    else
        startSearch();
}

void BullMqPage::listCurrent()
{
    const auto queue = currentQueue();
    if (!queue || !m_bullmq || m_searching || !m_search->text().isEmpty())
        return;
    m_bullmq->list(*queue, currentState(), 0, PageSize);
}

void BullMqPage::onJobsListed(const BullMqQueueName &queue, BullMqState state, qint64 offset,
                              const QList<BullMqJobRow> &rows)
{
    if (!currentQueue() || !(queue == *currentQueue()) || state != currentState() || m_searching ||
        !m_search->text().isEmpty())
        return; // an answer to a question no longer asked
    if (offset == 0)
        m_listed = 0;
    showRows(rows, offset > 0);
    m_listed += rows.size();
    m_more->setVisible(rows.size() == PageSize);
}

void BullMqPage::showRows(const QList<BullMqJobRow> &rows, bool append)
{
    // Keep the selection across a reload: an operator's multi-select survives the refresh.
    const QStringList selected = selectedJobIds();
    if (!append)
        m_jobModel->removeRows(0, m_jobModel->rowCount());
    for (const BullMqJobRow &job : rows) {
        QList<QStandardItem *> items;
        items << new QStandardItem(job.id) << new QStandardItem(job.name)
              << new QStandardItem(when(job.timestampMs));
        auto *attempts = new QStandardItem;
        attempts->setData(job.attemptsMade, Qt::DisplayRole);
        attempts->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
        items << attempts << new QStandardItem(when(job.finishedOnMs)) << new QStandardItem(job.failedReason);
        m_jobModel->appendRow(items);
        if (selected.contains(job.id))
            m_jobView->selectionModel()->select(m_jobModel->index(m_jobModel->rowCount() - 1, 0),
                                                QItemSelectionModel::Select | QItemSelectionModel::Rows);
    }
    updateActions();
}

void BullMqPage::startSearch()
{
    const auto queue = currentQueue();
    const QString text = m_search->text().trimmed();
    if (!queue || !m_bullmq)
        return;
    if (text.isEmpty()) {
        listCurrent();
        return;
    }
    m_searching = true;
    m_cancelSearch->setVisible(true);
    m_more->setVisible(false);
    m_status->setText(tr("Searching %1 for “%2”…").arg(queue->name, text));
    m_bullmq->search(*queue, text);
}

void BullMqPage::onSearchDone(const QString &text, const QList<BullMqJobRow> &rows, bool cancelled)
{
    if (text != m_search->text().trimmed())
        return;
    m_searching = false;
    m_cancelSearch->setVisible(false);
    showRows(rows, false);
    m_status->setText(cancelled ? tr("Search cancelled: %n job(s) found so far.", nullptr, int(rows.size()))
                                : tr("%n job(s) match “%1” (at most %2 shown, %3 jobs looked at at most).",
                                     nullptr, int(rows.size()))
                                      .arg(text)
                                      .arg(BullMqSession::SearchLimit)
                                      .arg(BullMqSession::SearchMaxScanned));
}

void BullMqPage::onDetailsLoaded(const BullMqJobDetails &job)
{
    if (!job.exists) {
        m_details->setPlainText(
            tr("Job %1 is gone (removed, or cleaned after it finished).").arg(job.row.id));
        return;
    }
    QStringList lines;
    lines << tr("Job %1 (%2): %3").arg(job.row.id, job.row.name, bullMqStateName(job.state));
    // A job retried or not yet taken has no processing or finishing time: none is shown.
    QString times = tr("Added %1").arg(when(job.row.timestampMs));
    if (job.row.processedOnMs > 0)
        times += tr(", processed %1").arg(when(job.row.processedOnMs));
    if (job.row.finishedOnMs > 0)
        times += tr(", finished %1").arg(when(job.row.finishedOnMs));
    lines << times;
    lines << tr("Attempts made: %1; processed by: %2; %3")
                 .arg(job.row.attemptsMade)
                 .arg(job.processedBy.isEmpty() ? tr("nobody yet") : job.processedBy,
                      job.locked ? tr("its lock is held now, by %1")
                                       .arg(job.processedBy.isEmpty() ? tr("a worker") : job.processedBy)
                                 : tr("not locked"));
    if (!job.sendKey.isEmpty())
        lines << tr("Send key: %1").arg(QString::fromUtf8(job.sendKey));
    if (!job.row.failedReason.isEmpty())
        lines << QString() << tr("Failure: %1").arg(job.row.failedReason);
    lines << QString() << tr("Data:") << pretty(job.data) << QString() << tr("Options:") << pretty(job.opts);
    if (!job.returnValue.isEmpty())
        lines << QString() << tr("Return value: %1").arg(QString::fromUtf8(job.returnValue));
    if (!job.stacktrace.isEmpty())
        lines << QString() << tr("Stack trace (%n attempt(s)):", nullptr, int(job.stacktrace.size()))
              << job.stacktrace;
    if (!job.logs.isEmpty())
        lines << QString() << tr("Logs:") << job.logs;
    m_details->setPlainText(lines.join(u'\n'));
    m_shownSendKey = job.sendKey;
    m_shownJobId = job.row.id;
    m_story->setEnabled(!job.sendKey.isEmpty());
}

QStringList BullMqPage::selectedJobIds() const
{
    QStringList ids;
    for (const QModelIndex &index : m_jobView->selectionModel()->selectedRows(JobId))
        ids.append(index.data().toString());
    return ids;
}

void BullMqPage::updateActions()
{
    const bool can = m_bullmq && m_readOnlyReason.isEmpty();
    const bool queue = currentQueue().has_value();
    const bool selection = !selectedJobIds().isEmpty();
    const BullMqState state = currentState();
    for (const auto &[action, button] : std::as_const(m_actionButtons)) {
        bool enabled = can && queue;
        if (action == BullMqAction::Retry)
            enabled = enabled && selection && state == BullMqState::Failed;
        else if (action == BullMqAction::Promote)
            enabled = enabled && selection && state == BullMqState::Delayed;
        else if (action == BullMqAction::Remove)
            enabled = enabled && selection && state != BullMqState::Active;
        else if (action == BullMqAction::Clean)
            enabled = enabled && (state == BullMqState::Completed || state == BullMqState::Failed);
        else if (action == BullMqAction::RetryAllFailed)
            enabled = can && !m_queues.isEmpty();
        button->setEnabled(enabled);
        button->setToolTip(m_readOnlyReason.isEmpty() ? QString()
                                                      : tr("Read-only: %1").arg(m_readOnlyReason));
    }
}

void BullMqPage::act(BullMqAction action)
{
    const auto queue = currentQueue();
    if (!m_bullmq || (!queue && action != BullMqAction::RetryAllFailed))
        return;
    QList<BullMqQueueName> queues{};
    if (action == BullMqAction::RetryAllFailed) {
        for (const BullMqQueueSummary &summary : std::as_const(m_queues))
            queues.append(summary.queue);
    } else {
        queues.append(*queue);
    }
    const QStringList ids = selectedJobIds();
    const QString where = action == BullMqAction::RetryAllFailed
                              ? tr("every queue at %1").arg(m_bullmq->serverName())
                              : queue->prefix + u':' + queue->name;
    qint64 olderThanMs = 0;
    QString question;
    switch (action) {
    case BullMqAction::Retry:
        question = tr("Retry %n failed job(s) of %1?", nullptr, int(ids.size())).arg(where);
        break;
    case BullMqAction::Promote:
        question = tr("Run %n delayed job(s) of %1 now?", nullptr, int(ids.size())).arg(where);
        break;
    case BullMqAction::Remove:
        question = tr("Remove %n job(s) of %1 for good?", nullptr, int(ids.size())).arg(where);
        break;
    case BullMqAction::RetryAllFailed: {
        qint64 failed = 0;
        for (const BullMqQueueSummary &summary : std::as_const(m_queues))
            failed += summary.counts.failed;
        question = tr("Retry all %1 failed jobs in %2?").arg(failed).arg(where);
        break;
    }
    case BullMqAction::Clean: {
        bool ok = false;
        const int hours =
            QInputDialog::getInt(this, tr("Clean %1 jobs").arg(bullMqStateName(currentState())),
                                 tr("Remove the %1 jobs of %2 finished more than this many hours ago:")
                                     .arg(bullMqStateName(currentState()), where),
                                 24, 0, 24 * 365, 1, &ok);
        if (!ok)
            return;
        olderThanMs = qint64(hours) * 3600 * 1000;
        question = tr("Remove the %1 jobs of %2 older than %n hour(s)?", nullptr, hours)
                       .arg(bullMqStateName(currentState()), where);
        break;
    }
    case BullMqAction::Pause:
        question = tr("Pause %1? Workers finish what they hold and take nothing more.").arg(where);
        break;
    case BullMqAction::Resume:
        question = tr("Resume %1?").arg(where);
        break;
    case BullMqAction::Drain:
        question =
            tr("Remove every waiting, prioritized and delayed job of %1? Active jobs stay.").arg(where);
        break;
    case BullMqAction::Obliterate:
        question =
            tr("Obliterate %1: every job and key of the queue, for good? The queue must be paused and have "
               "no active jobs.")
                .arg(where);
        break;
    }
    if (QMessageBox::question(this, tr("BullMQ"), question) != QMessageBox::Yes)
        return;
    m_status->setText(tr("%1 on %2…").arg(bullMqActionName(action), where));
    QString detail = QStringLiteral("%1 queue=%2").arg(m_bullmq->serverName(), where);
    if (!ids.isEmpty() &&
        (action == BullMqAction::Retry || action == BullMqAction::Promote || action == BullMqAction::Remove))
        detail += QStringLiteral(" jobs=") + ids.join(u',');
    m_actionsAsked.append(detail);
    m_bullmq->act(action, queues, ids, currentState(), olderThanMs);
}

} // namespace once::ui
