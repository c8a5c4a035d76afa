#include "mainwindow.h"

#include "auditpage.h"
#include "brokerqueuedialog.h"
#include "deadletterspage.h"
#include "enginecontroller.h"
#include "eventspage.h"
#include "healthmonitor.h"
#include "humanunits.h"
#include "indoubtpage.h"
#include "overviewpage.h"
#include "postgresdialog.h"
#include "queueurl.h"
#include "settings.h"
#include "settingsdialog.h"
#include "storesession.h"
#include "storeurl.h"
#include "traynotifier.h"
#include "workerpage.h"

#include "database.h"

#include <QApplication>
#include <QCloseEvent>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>

namespace once::ui {

MainWindow::MainWindow(QWidget *parent)
    : QMainWindow(parent), m_engine(new EngineController(this)), m_health(new HealthMonitor(m_engine, this))
{
    setWindowTitle(tr("once console"));
    setWindowIcon(QIcon(QStringLiteral(":/once.svg")));
    m_tabs = new QTabWidget(this);
    m_tabs->setDocumentMode(true);
    auto *events = new EventsPage;
    auto *deadLetters = new DeadLettersPage;
    auto *inDoubt = new InDoubtPage;
    auto *worker = new WorkerPage(m_engine);
    m_pages = {new OverviewPage(m_engine, m_health), events, deadLetters, inDoubt, worker, new AuditPage};
    connect(deadLetters, &DeadLettersPage::storyRequested, this, [this, events](const QByteArray &sendKey) {
        showPage(events);
        events->showStory(sendKey);
    });
    for (Page *page : std::as_const(m_pages))
        m_tabs->addTab(page, page->title());
    setCentralWidget(m_tabs);
    connect(m_tabs, &QTabWidget::currentChanged, this, &MainWindow::refreshCurrent);

    m_storeLabel = new QLabel(tr("No store open"));
    m_storeLabel->setObjectName(QStringLiteral("storeLabel"));
    m_queueLabel = new QLabel;
    m_queueLabel->setObjectName(QStringLiteral("queueLabel"));
    m_queueLabel->hide();
    m_workerLabel = new QLabel;
    m_workerLabel->setObjectName(QStringLiteral("workersStatus"));
    statusBar()->addWidget(m_storeLabel);
    statusBar()->addWidget(m_queueLabel, 1);
    statusBar()->addPermanentWidget(m_workerLabel);
    connect(m_health, &HealthMonitor::changed, this, &MainWindow::updateStatus);

    m_tray = new TrayNotifier(m_health, this);
    const auto showWindow = [this] {
        if (isMinimized())
            showNormal();
        else
            show();
        raise();
        activateWindow();
    };
    connect(m_tray, &TrayNotifier::showWindowRequested, this, showWindow);
    connect(m_tray, &TrayNotifier::quitRequested, this, &QWidget::close);
    connect(m_tray, &TrayNotifier::pageRequested, this, [this, showWindow, deadLetters, inDoubt, worker](TrayNotifier::Target target) {
        showWindow();
        switch (target) {
        case TrayNotifier::Target::Overview:
            showPage(page<OverviewPage>());
            break;
        case TrayNotifier::Target::Worker:
            showPage(worker);
            break;
        case TrayNotifier::Target::DeadLetters:
            showPage(deadLetters);
            break;
        case TrayNotifier::Target::InDoubt:
            showPage(inDoubt);
            break;
        }
    });
    connect(m_engine, &EngineController::errorOccurred, this,
            [this](const QString &message) { statusBar()->showMessage(message, 10000); });

    Settings settings;
    settings.scrubRecentStores();
    settings.scrubRecentQueues();
    buildMenus();
    updateStatus();
    if (!restoreGeometry(settings.windowGeometry()))
        resize(1280, 820);
    restoreState(settings.windowState());
    m_refreshTimer.setInterval(Page::PollIntervalMs);
    connect(&m_refreshTimer, &QTimer::timeout, this, &MainWindow::refreshCurrent);
    m_refreshTimer.start();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus()
{
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&New Store…"), QKeySequence::New, this, &MainWindow::chooseNewStore);
    file->addAction(tr("&Open Store…"), QKeySequence::Open, this, &MainWindow::chooseStore);
    QAction *openPostgres = file->addAction(tr("Open &PostgreSQL Store…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O),
                                            this, [this] { choosePostgresStore(); });
    openPostgres->setObjectName(QStringLiteral("openPostgresStore"));
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    rebuildRecentMenu();
    file->addSeparator();
    QAction *openQueue = file->addAction(tr("Open &Broker Queue…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_B), this,
                                         [this] { chooseBrokerQueue(); });
    openQueue->setObjectName(QStringLiteral("openBrokerQueue"));
    openQueue->setToolTip(tr("Read the queue at RabbitMQ or Redis Streams; the ledger stays in the store"));
    m_recentQueuesMenu = file->addMenu(tr("Open Recent &Queue"));
    m_recentQueuesMenu->setObjectName(QStringLiteral("recentQueues"));
    rebuildRecentQueuesMenu();
    m_useStoreQueueAction = file->addAction(tr("Use the Store's Own &Queue"), this, [this] {
        if (m_session)
            openStore(m_session->storeUrl());
    });
    m_useStoreQueueAction->setObjectName(QStringLiteral("useStoreQueue"));
    m_useStoreQueueAction->setEnabled(false);
    file->addSeparator();
    file->addAction(tr("&Settings…"), QKeySequence::Preferences, this, &MainWindow::showSettings);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    QMenu *view = menuBar()->addMenu(tr("&View"));
    view->addAction(tr("&Refresh"), QKeySequence::Refresh, this, &MainWindow::refreshCurrent);
    view->addAction(tr("&Find"), QKeySequence::Find, this, [this] {
        auto *events = page<EventsPage>();
        showPage(events);
        events->focusSearch();
    });
    view->addSeparator();
    for (int i = 0; i < m_pages.size(); ++i) {
        Page *page = m_pages.at(i);
        view->addAction(page->title(), QKeySequence(Qt::ALT | Qt::Key(Qt::Key_1 + i)), this,
                        [this, page] { showPage(page); });
    }

    QMenu *help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&About once"), this, &MainWindow::showAbout);
}

void MainWindow::openStore(const QString &url, const QString &queueUrl, StoreReader::IfMissing ifMissing)
{
    // The pages let go of the old session before it goes.
    for (Page *page : std::as_const(m_pages))
        page->setSession(nullptr);
    m_health->setSession(nullptr);
    m_session = std::make_unique<StoreSession>(url, queueUrl, ifMissing);
    const QString shown = m_session->displayName();
    // The queue as the status bar names it: "RabbitMQ amqp://once@host:5672/%2F?queue=reminders".
    const QString queueShown = m_session->hasBrokerQueue()
                                   ? tr("%1 %2").arg(m_session->brokerName(), m_session->queueDisplayName()).trimmed()
                                   : QString();
    m_storeLabel->setText(tr("Opening %1…").arg(shown));
    m_storeLabel->setToolTip(QString());
    m_queueLabel->setText(tr("·  queue: %1").arg(queueShown));
    m_queueLabel->setToolTip(tr("The queue is read at the broker; the ledger, history and audit log in the store. "
                                "Pages refresh every %1 seconds.")
                                 .arg(Page::PollIntervalMs / 1000));
    m_queueLabel->setVisible(m_session->hasBrokerQueue());
    m_useStoreQueueAction->setEnabled(m_session->hasBrokerQueue());
    connect(m_session.get(), &StoreSession::opened, this, [this, url, queueUrl, shown, queueShown](bool ok, const QString &error) {
        if (!ok && m_session->storeMissing()) {
            m_storeLabel->setText(tr("No store at %1").arg(shown));
            askToCreateStore(url, queueUrl);
            return;
        }
        if (!ok) {
            m_storeLabel->setText(m_session->queueFailed() ? tr("Store: %1").arg(shown) : tr("Cannot open %1").arg(shown));
            if (m_session->queueFailed())
                m_queueLabel->setText(tr("·  cannot open the queue %1").arg(queueShown));
            showOpenError(url, queueUrl, m_session->queueFailed(), error);
            return;
        }
        // Only the password-free URLs are remembered (Settings does it too).
        Settings settings;
        settings.addRecentStore(storeUrlWithoutPassword(url));
        if (!queueUrl.isEmpty())
            settings.addRecentQueue(queueUrlWithoutPassword(queueUrl));
        rebuildRecentMenu();
        rebuildRecentQueuesMenu();
        if (m_session->hasLiveUpdates()) {
            m_storeLabel->setText(tr("Store: %1  ·  live updates").arg(shown));
            m_storeLabel->setToolTip(tr("The store notifies the console of new messages and worker activity; "
                                        "pages refresh within a second of a change."));
        } else {
            m_storeLabel->setText(tr("Store: %1").arg(shown));
            m_storeLabel->setToolTip(tr("Pages refresh every %1 seconds.").arg(Page::PollIntervalMs / 1000));
        }
        refreshCurrent();
    });
    connect(m_session.get(), &StoreSession::storeChanged, this, &MainWindow::refreshCurrent);
    for (Page *page : std::as_const(m_pages))
        page->setSession(m_session.get());
    m_health->setSession(m_session.get());
    if (m_session->hasBrokerQueue()) {
        const QString name = queueName(queueUrl);
        setWindowTitle(tr("%1 · %2 at %3 — once console")
                           .arg(storeShortName(url), name.isEmpty() ? m_session->queueDisplayName() : name,
                                m_session->brokerName()));
    } else {
        setWindowTitle(tr("%1 — once console").arg(storeShortName(url)));
    }
}

void MainWindow::openQueue(const QString &queueUrl)
{
    openStore(m_session ? m_session->storeUrl() : defaultStoreUrl(), queueUrl);
}

void MainWindow::openStoreFromMenu(const QString &url)
{
    const bool sameStore = m_session && storeUrlWithoutPassword(m_session->storeUrl()) == storeUrlWithoutPassword(url);
    openStore(url, sameStore ? m_session->queueUrl() : QString());
}

// Window-modal and not exec(): the window keeps refreshing, and nothing waits on it.
void MainWindow::showOpenError(const QString &url, const QString &queueUrl, bool queueFailed, const QString &error)
{
    auto *box = new QMessageBox(QMessageBox::Warning, queueFailed ? tr("Cannot open the queue") : tr("Cannot open the store"),
                                error, QMessageBox::Close, this);
    box->setObjectName(QStringLiteral("openError"));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setWindowModality(Qt::WindowModal);
    if (queueFailed) {
        // Open Recent Queue and --queue may come without a password: say where it came from.
        if (queuePassword(queueUrl).isEmpty())
            box->setInformativeText(tr("This queue's URL has no password. Connect… lets you type one for this "
                                       "session; $ONCE_QUEUE can hold one for Open Recent Queue."));
        QPushButton *retry = box->addButton(tr("Connect…"), QMessageBox::AcceptRole);
        retry->setObjectName(QStringLiteral("connect"));
        connect(retry, &QPushButton::clicked, this, [this, queueUrl] { chooseBrokerQueue(queueUrl); });
        QPushButton *own = box->addButton(tr("Use the Store's Own Queue"), QMessageBox::ResetRole);
        own->setObjectName(QStringLiteral("useStoreQueue"));
        connect(own, &QPushButton::clicked, this, [this, url] { openStore(url); });
    } else if (isPostgresUrl(url)) {
        // Open Recent and --store reconnect without a password: say where it came from.
        if (storeUrlWithoutPassword(url) == url)
            box->setInformativeText(tr("This store's URL has no password, so libpq looked for one in PGPASSWORD and "
                                       "~/.pgpass, as psql does. Connect… lets you type one for this session."));
        QPushButton *retry = box->addButton(tr("Connect…"), QMessageBox::AcceptRole);
        retry->setObjectName(QStringLiteral("connect"));
        connect(retry, &QPushButton::clicked, this, [this, url] { choosePostgresStore(url); });
    }
    box->open();
}

// An empty store at a mistyped or moved path would look healthy and show nothing: the
// operator decides. Window-modal and not exec(), like the open errors.
void MainWindow::askToCreateStore(const QString &url, const QString &queueUrl)
{
    auto *box = new QMessageBox(QMessageBox::Question, tr("No store here"),
                                tr("There is no store at %1. Create a new store here?").arg(storeDisplayName(url)),
                                QMessageBox::Cancel, this);
    box->setObjectName(QStringLiteral("createStore"));
    box->setInformativeText(tr("A new store starts empty. If you expected events here, the path may be mistyped or "
                               "the file moved: choose Cancel and open the right one."));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setWindowModality(Qt::WindowModal);
    QPushButton *create = box->addButton(tr("Create Store"), QMessageBox::AcceptRole);
    create->setObjectName(QStringLiteral("create"));
    connect(create, &QPushButton::clicked, this,
            [this, url, queueUrl] { openStore(url, queueUrl, StoreReader::IfMissing::Create); });
    box->open();
}

void MainWindow::chooseNewStore()
{
    const QString path = QFileDialog::getSaveFileName(this, tr("New Store"), QString(),
                                                      tr("once stores (*.sqlite *.db)"));
    if (!path.isEmpty())
        openStore(QStringLiteral("sqlite:") + path, QString(), StoreReader::IfMissing::Create);
}

void MainWindow::chooseStore()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open Store"), QString(),
                                                      tr("once stores (*.sqlite *.db);;All files (*)"));
    if (!path.isEmpty())
        openStoreFromMenu(QStringLiteral("sqlite:") + path);
}

void MainWindow::choosePostgresStore(const QString &prefill)
{
    PostgresDialog dialog(this);
    if (!prefill.isEmpty()) {
        dialog.setUrl(prefill);
    } else {
        // The last PostgreSQL store opened, if any (without its password).
        const QStringList recent = Settings().recentStores();
        const auto last = std::find_if(recent.cbegin(), recent.cend(), isPostgresUrl);
        if (last != recent.cend())
            dialog.setUrl(*last);
    }
    if (dialog.exec() == QDialog::Accepted)
        openStoreFromMenu(dialog.url());
}

void MainWindow::chooseBrokerQueue(const QString &prefill)
{
    BrokerQueueDialog dialog(this);
    if (!prefill.isEmpty()) {
        dialog.setUrl(prefill);
    } else if (m_session && m_session->hasBrokerQueue()) {
        dialog.setUrl(m_session->queueUrl());
    } else {
        // The last queue opened, if any (without its password).
        const QStringList recent = Settings().recentQueues();
        if (!recent.isEmpty())
            dialog.setUrl(queueUrlForReopening(recent.constFirst()));
    }
    if (dialog.exec() == QDialog::Accepted)
        openQueue(dialog.url());
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = Settings().recentStores();
    for (const QString &url : recent) {
        QString text = storeDisplayName(url);
        QAction *action = m_recentMenu->addAction(text.replace(QLatin1Char('&'), QLatin1String("&&")), this,
                                                  [this, url] { openStoreFromMenu(url); });
        if (isPostgresUrl(url))
            action->setToolTip(tr("Reconnects with the password from PGPASSWORD or ~/.pgpass"));
    }
    m_recentMenu->setToolTipsVisible(true);
    m_recentMenu->setEnabled(!recent.isEmpty());
}

void MainWindow::rebuildRecentQueuesMenu()
{
    m_recentQueuesMenu->clear();
    const QStringList recent = Settings().recentQueues();
    for (const QString &url : recent) {
        QString text = tr("%1 %2").arg(queueBrokerName(url), queueDisplayName(url));
        QAction *action = m_recentQueuesMenu->addAction(text.replace(QLatin1Char('&'), QLatin1String("&&")), this,
                                                        [this, url] { openQueue(queueUrlForReopening(url)); });
        action->setToolTip(tr("Opens this queue with the open store; the password comes from $ONCE_QUEUE when that "
                              "names the same queue"));
    }
    m_recentQueuesMenu->setToolTipsVisible(true);
    m_recentQueuesMenu->setEnabled(!recent.isEmpty());
}

void MainWindow::showPage(Page *page)
{
    m_tabs->setCurrentWidget(page);
}

void MainWindow::saveScreenshots(const QString &folder, std::function<void()> done)
{
    auto next = std::make_shared<std::function<void(int)>>();
    *next = [this, folder, done, next](int index) {
        if (index >= m_pages.size()) {
            done();
            return;
        }
        Page *page = m_pages.at(index);
        showPage(page);
        // The events page is worth seeing with a story open.
        if (auto *events = qobject_cast<EventsPage *>(page))
            QTimer::singleShot(1000, events, [events] { events->eventsView()->selectRow(0); });
        // Two seconds for the page's data to arrive from the reader thread and draw.
        QTimer::singleShot(2000, this, [this, folder, page, index, next] {
            const QString name = page->title().toLower().replace(QLatin1Char(' '), QLatin1Char('-'));
            grab().save(folder + QLatin1Char('/') + name + QStringLiteral(".png"));
            (*next)(index + 1);
        });
    };
    (*next)(0);
}

// Every refresh, whatever asked for it, puts the next poll a full interval away: with
// notifications arriving, polling only fills the quiet spells.
void MainWindow::refreshCurrent()
{
    auto *page = qobject_cast<Page *>(m_tabs->currentWidget());
    if (page && m_session)
        page->refresh();
    const bool live = m_session && m_session->hasLiveUpdates();
    m_refreshTimer.start(page ? page->refreshIntervalMs(live) : Page::PollIntervalMs);
}

// Every worker on the store, headless ones too, then what this console's own does.
void MainWindow::updateStatus()
{
    QString text;
    if (m_session) {
        const WorkerTally tally = m_health->tally();
        text = m_health->readAtMs() == 0 && tally.total() == 0 ? tr("Workers: loading…") : tally.summary();
    }
    const auto state = m_engine->state();
    if (state != EngineController::State::Stopped) {
        const auto counters = m_engine->counters();
        if (!text.isEmpty())
            text += QStringLiteral("  ·  ");
        text += tr("this console's: %1, applied %2, in flight %3")
                    .arg(EngineController::describe(state).toLower(), formatCount(counters.applied),
                         formatCount(counters.inFlight));
    }
    m_workerLabel->setText(text);
    QPalette palette = m_workerLabel->palette();
    palette.setColor(QPalette::WindowText, m_session && m_health->tally().total() > 0
                                               ? severityTextColor(m_health->tally().severity(), this->palette())
                                               : this->palette().color(QPalette::WindowText));
    m_workerLabel->setPalette(palette);
}

void MainWindow::showAbout()
{
    QMessageBox::about(this, tr("About once"),
                       tr("<h3>once %1</h3><p>Exactly-once delivery of reminders over at-least-once queues: "
                          "claim the send key, send with it as Idempotency-Key, record, then acknowledge.</p>"
                          "<p>Qt %2</p>")
                           .arg(QApplication::applicationVersion(), QString::fromLatin1(qVersion())));
}

void MainWindow::showSettings()
{
    SettingsDialog dialog(this);
    if (dialog.exec() == QDialog::Accepted) {
        m_tray->applySettings();
        m_health->refresh();
    }
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    Settings settings;
    settings.setWindowGeometry(saveGeometry());
    settings.setWindowState(saveState());
    event->accept();
}

} // namespace once::ui
