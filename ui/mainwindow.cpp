#include "mainwindow.h"

#include "dialogs/brokerqueuedialog.h"
#include "dialogs/postgresdialog.h"
#include "dialogs/settingsdialog.h"
#include "display/displaytime.h"
#include "display/humanunits.h"
#include "display/queueurl.h"
#include "display/statuscolors.h"
#include "display/storeurl.h"
#include "pages/auditpage.h"
#include "pages/bullmqpage.h"
#include "pages/deadletterspage.h"
#include "pages/eventspage.h"
#include "pages/incidentspage.h"
#include "pages/indoubtpage.h"
#include "pages/overviewpage.h"
#include "pages/workerpage.h"
#include "session/enginecontroller.h"
#include "session/healthmonitor.h"
#include "session/storesession.h"
#include "settings/savedpasswords.h"
#include "settings/settings.h"
#include "widgets/readonlycontrols.h"
#include "widgets/traynotifier.h"

#include "store/database.h"

#include <QApplication>
#include <QDateTime>
#include <QCloseEvent>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressDialog>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>

namespace once::ui {

MainWindow::MainWindow(QWidget *parent)
    : QMainWindow(parent), m_engine(new EngineController(this)), m_passwords(new SavedPasswords(this)),
      m_health(new HealthMonitor(m_engine, this))
{
    connect(m_passwords, &SavedPasswords::failed, this,
            [this](const QString &message) { statusBar()->showMessage(message, 10000); });
    setWindowTitle(tr("once console"));
    setWindowIcon(QIcon(QStringLiteral(":/once.svg")));
    m_tabs = new QTabWidget(this);
    m_tabs->setDocumentMode(true);
    auto *events = new EventsPage;
    auto *deadLetters = new DeadLettersPage;
    auto *inDoubt = new InDoubtPage;
    auto *worker = new WorkerPage(m_engine);
    auto *incidents = new IncidentsPage;
    auto *audit = new AuditPage;
    auto *bullmq = new BullMqPage;
    m_pages = {new OverviewPage(m_engine, m_health), events, deadLetters, inDoubt, incidents, worker, audit, bullmq};
    // An incident's window: what happened to the events then, and what died.
    connect(incidents, &IncidentsPage::eventsRequested, this, [this, events](qint64 sinceMs, qint64 untilMs) {
        showPage(events);
        events->showTimeWindow(sinceMs, untilMs);
    });
    connect(incidents, &IncidentsPage::deadLettersRequested, this, [this, deadLetters](qint64 sinceMs, qint64 untilMs) {
        showPage(deadLetters);
        deadLetters->setTimeRange(QDateTime::fromMSecsSinceEpoch(sinceMs), QDateTime::fromMSecsSinceEpoch(untilMs));
    });
    connect(bullmq, &BullMqPage::storyRequested, this, [this, events](const QByteArray &sendKey) {
        showPage(events);
        events->showStory(sendKey);
    });
    connect(deadLetters, &DeadLettersPage::storyRequested, this, [this, events](const QByteArray &sendKey) {
        showPage(events);
        events->showStory(sendKey);
    });
    connect(events, &EventsPage::deadLettersSearchRequested, this, [this, deadLetters](const QString &text) {
        showPage(deadLetters);
        deadLetters->search(text);
    });
    connect(events, &EventsPage::deadLetterRequested, this, [this, deadLetters](const QByteArray &sendKey) {
        showPage(deadLetters);
        deadLetters->showLetter(sendKey);
    });
    connect(audit, &AuditPage::eventsRequested, this, [this, events](const AuditEntry &entry) {
        showPage(events);
        events->showAuditEvents(entry);
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
    // A badge, not a word among the others: support staff should see at a glance that
    // this window cannot change anything.
    m_readOnlyLabel = new QLabel(tr("Read-only"));
    m_readOnlyLabel->setObjectName(QStringLiteral("readOnlyLabel"));
    const BannerColors badge = bannerColors(Severity::Warning, palette());
    m_readOnlyLabel->setStyleSheet(QStringLiteral("QLabel { background: %1; color: %2; border: 1px solid %3; "
                                                  "border-radius: 3px; padding: 0px 6px; font-weight: bold; }")
                                       .arg(badge.background.name(), badge.text.name(), badge.border.name()));
    m_readOnlyLabel->hide();
    m_workerLabel->setObjectName(QStringLiteral("workersStatus"));
    statusBar()->addWidget(m_storeLabel);
    statusBar()->addWidget(m_queueLabel, 1);
    statusBar()->addPermanentWidget(m_readOnlyLabel);
    statusBar()->addPermanentWidget(m_workerLabel);
    connect(m_health, &HealthMonitor::changed, this, &MainWindow::updateStatus);
    connect(m_engine, &EngineController::countersChanged, this, &MainWindow::updateStoppingNote);
    connect(m_engine, &EngineController::stateChanged, this, [this](EngineController::State state) {
        // Queued: the close runs after the engine's own handling of its end.
        if (m_closeWhenStopped && state == EngineController::State::Stopped)
            QMetaObject::invokeMethod(this, &QWidget::close, Qt::QueuedConnection);
    });

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
    DisplayTime::instance().setUtc(settings.timesInUtc());
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
    m_newStoreAction = file->addAction(tr("&New Store…"), QKeySequence::New, this, &MainWindow::chooseNewStore);
    m_newStoreAction->setObjectName(QStringLiteral("newStore"));
    file->addAction(tr("&Open Store…"), QKeySequence::Open, this, &MainWindow::chooseStore);
    QAction *openReadOnly = file->addAction(tr("Open Read-On&ly…"), this, &MainWindow::chooseStoreReadOnly);
    openReadOnly->setObjectName(QStringLiteral("openReadOnly"));
    openReadOnly->setToolTip(tr("Look at a store without any way to change it: no upgrade, no worker, no redrive"));
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
            openStore(m_session->storeUrl(), QString(), StoreReader::IfMissing::Refuse,
                      m_session->readOnlyRequested() ? Database::Access::ReadOnly : Database::Access::AsPermitted);
    });
    m_useStoreQueueAction->setObjectName(QStringLiteral("useStoreQueue"));
    m_useStoreQueueAction->setEnabled(false);
    file->addSeparator();
    file->addAction(tr("&Settings…"), QKeySequence::Preferences, this, &MainWindow::showSettings);
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    file->setToolTipsVisible(true);

    QMenu *view = menuBar()->addMenu(tr("&View"));
    view->addAction(tr("&Refresh"), QKeySequence::Refresh, this, &MainWindow::refreshCurrent);
    view->addAction(tr("&Find"), QKeySequence::Find, this, [this] {
        auto *events = page<EventsPage>();
        showPage(events);
        events->focusSearch();
    });
    QAction *utc = view->addAction(tr("Times in &UTC"));
    utc->setObjectName(QStringLiteral("timesInUtc"));
    utc->setCheckable(true);
    utc->setChecked(DisplayTime::instance().utc());
    utc->setToolTip(tr("Show every time in UTC, as send keys write them, rather than in this computer's zone"));
    connect(utc, &QAction::toggled, this, [this](bool on) {
        Settings().setTimesInUtc(on);
        DisplayTime::instance().setUtc(on);
        // Tables other than the events' format their times as they paint.
        for (QAbstractItemView *table : findChildren<QAbstractItemView *>())
            table->viewport()->update();
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

void MainWindow::setReadOnly(bool readOnly)
{
    m_readOnly = readOnly;
    enableUnlessReadOnly(m_newStoreAction, true, readOnly ? tr("the console was started with --read-only") : QString());
}

void MainWindow::openStore(const QString &url, const QString &queueUrl, StoreReader::IfMissing ifMissing,
                           Database::Access access)
{
    if (m_readOnly)
        access = Database::Access::ReadOnly;
    // The pages let go of the old session before it goes.
    for (Page *page : std::as_const(m_pages))
        page->setSession(nullptr);
    m_health->setSession(nullptr);
    m_session = std::make_unique<StoreSession>(url, queueUrl, ifMissing, access);
    showAccess();
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
        if (!ok && m_session->storeMissing() && !m_session->readOnlyRequested()) {
            m_storeLabel->setText(tr("No store at %1").arg(shown));
            askToCreateStore(url, queueUrl);
            return;
        }
        showAccess();
        if (!ok && m_session->storeMissing()) {
            // Only looking creates nothing: there is nothing here to look at.
            m_storeLabel->setText(tr("No store at %1").arg(shown));
            showOpenError(url, queueUrl, false,
                          tr("There is no store at %1. A store opened read-only is never created.").arg(shown));
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
    updateTitle();
}

void MainWindow::updateTitle()
{
    if (!m_session)
        return;
    QString store = storeShortName(m_session->storeUrl());
    if (m_session->isReadOnly())
        store = tr("%1 [read-only]").arg(store);
    if (m_session->hasBrokerQueue()) {
        const QString name = queueName(m_session->queueUrl());
        setWindowTitle(tr("%1 · %2 at %3 — once console")
                           .arg(store, name.isEmpty() ? m_session->queueDisplayName() : name, m_session->brokerName()));
    } else {
        setWindowTitle(tr("%1 — once console").arg(store));
    }
}

void MainWindow::showAccess()
{
    const bool readOnly = m_session && m_session->isReadOnly();
    m_readOnlyLabel->setVisible(readOnly);
    m_readOnlyLabel->setToolTip(readOnly ? readOnlyToolTip(m_session->readOnlyReason()) : QString());
    updateTitle();
}

void MainWindow::openQueue(const QString &queueUrl)
{
    // Another queue for the same store: a store opened read-only stays so.
    openStore(m_session ? m_session->storeUrl() : defaultStoreUrl(), queueUrl, StoreReader::IfMissing::Refuse,
              m_session && m_session->readOnlyRequested() ? Database::Access::ReadOnly : Database::Access::AsPermitted);
}

void MainWindow::openSavedStore(const QString &savedUrl, const QString &queueUrl)
{
    if (!isPostgresUrl(savedUrl) || !m_passwords->isRemembered(savedUrl)) {
        openStore(savedUrl, queueUrl);
        return;
    }
    m_passwords->find(savedUrl, this, [this, savedUrl, queueUrl](const std::optional<QString> &password,
                                                                 const QString &whyNot) {
        if (password) {
            openStore(storeUrlWithPassword(savedUrl, *password), queueUrl);
            return;
        }
        choosePostgresStore(savedUrl, tr("The password of this store was remembered, but %1: type it.").arg(whyNot));
    });
}

void MainWindow::openSavedQueue(const QString &savedUrl)
{
    if (!m_passwords->isRemembered(savedUrl)) {
        openQueue(queueUrlForReopening(savedUrl));
        return;
    }
    m_passwords->find(savedUrl, this, [this, savedUrl](const std::optional<QString> &password, const QString &whyNot) {
        if (password) {
            openQueue(queueUrlWithPassword(savedUrl, *password));
            return;
        }
        chooseBrokerQueue(savedUrl, tr("The password of this queue was remembered, but %1: type it.").arg(whyNot));
    });
}

void MainWindow::keepPasswordOnceOpen(const QString &savedUrl, const QString &password, bool remember)
{
    if (!remember) {
        if (m_passwords->isRemembered(savedUrl))
            m_passwords->forget(savedUrl);
        return;
    }
    if (password.isEmpty() || !m_session)
        return;
    // Only a password that opened the connection is worth remembering.
    connect(m_session.get(), &StoreSession::opened, this, [this, savedUrl, password](bool ok) {
        if (ok)
            m_passwords->remember(savedUrl, password);
    });
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
    if (m_readOnly)
        return;
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

void MainWindow::chooseStoreReadOnly()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open Store Read-Only"), QString(),
                                                      tr("once stores (*.sqlite *.db);;All files (*)"));
    if (!path.isEmpty())
        openStore(QStringLiteral("sqlite:") + path, QString(), StoreReader::IfMissing::Refuse, Database::Access::ReadOnly);
}

void MainWindow::choosePostgresStore(const QString &prefill, const QString &message)
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
    const auto showKeychain = [this, &dialog, message] {
        dialog.setKeychain(m_passwords->keychain(), m_passwords->unavailableReason(),
                           m_passwords->isRemembered(storeUrlWithoutPassword(dialog.url())), message);
    };
    showKeychain();
    connect(m_passwords, &SavedPasswords::keychainChecked, &dialog, showKeychain);
    if (dialog.exec() != QDialog::Accepted)
        return;
    const QString url = dialog.url();
    openStoreFromMenu(url);
    keepPasswordOnceOpen(storeUrlWithoutPassword(url), storePassword(url), dialog.rememberPassword());
}

void MainWindow::chooseBrokerQueue(const QString &prefill, const QString &message)
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
    const auto showKeychain = [this, &dialog, message] {
        dialog.setKeychain(m_passwords->keychain(), m_passwords->unavailableReason(),
                           m_passwords->isRemembered(queueUrlWithoutPassword(dialog.url())), message);
    };
    showKeychain();
    connect(m_passwords, &SavedPasswords::keychainChecked, &dialog, showKeychain);
    if (dialog.exec() != QDialog::Accepted)
        return;
    const QString url = dialog.url();
    openQueue(url);
    keepPasswordOnceOpen(queueUrlWithoutPassword(url), queuePassword(url), dialog.rememberPassword());
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = Settings().recentStores();
    for (const QString &url : recent) {
        QString text = storeDisplayName(url);
        QAction *action = m_recentMenu->addAction(text.replace(QLatin1Char('&'), QLatin1String("&&")), this,
                                                  [this, url] {
                                                      const bool sameStore = m_session && storeUrlWithoutPassword(m_session->storeUrl()) == url;
                                                      openSavedStore(url, sameStore ? m_session->queueUrl() : QString());
                                                  });
        if (isPostgresUrl(url))
            action->setToolTip(m_passwords->isRemembered(url)
                                   ? tr("Reconnects with the password remembered in the system keychain")
                                   : tr("Reconnects with the password from PGPASSWORD or ~/.pgpass"));
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
                                                        [this, url] { openSavedQueue(url); });
        action->setToolTip(m_passwords->isRemembered(url)
                               ? tr("Opens this queue with the open store, with the password remembered in the "
                                    "system keychain")
                               : tr("Opens this queue with the open store; the password comes from $ONCE_QUEUE when "
                                    "that names the same queue"));
    }
    m_recentQueuesMenu->setToolTipsVisible(true);
    m_recentQueuesMenu->setEnabled(!recent.isEmpty());
}

void MainWindow::openBullMq(const QString &redisUrl, const QString &scriptsFolder)
{
    auto *bullmq = page<BullMqPage>();
    showPage(bullmq);
    bullmq->connectTo(redisUrl, scriptsFolder);
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
        text = m_health->readAtMs() == 0 && tally.total() == 0 ? tr("Workers: loading…") : workersSummary(tally);
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
                                               ? severityTextColor(workersSeverity(m_health->tally()), this->palette())
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
    SettingsDialog dialog(m_session.get(), m_health->thresholds(), this);
    if (dialog.exec() == QDialog::Accepted) {
        m_tray->applySettings();
        m_health->refresh();
    }
}

// Waiting for the engine's thread here would freeze the window for as long as its sends
// take to finish (up to the partner's timeout): the engine is asked to stop, the window
// says so and stays responsive, and closes when the engine reports it stopped.
void MainWindow::closeEvent(QCloseEvent *event)
{
    if (m_engine->state() != EngineController::State::Stopped && !m_closeWithoutWaiting) {
        event->ignore();
        stopEngineThenClose();
        return;
    }
    if (m_stoppingNote)
        m_stoppingNote->hide();
    Settings settings;
    settings.setWindowGeometry(saveGeometry());
    settings.setWindowState(saveState());
    event->accept();
}

void MainWindow::stopEngineThenClose()
{
    if (m_closeWhenStopped)
        return;
    m_closeWhenStopped = true;
    m_engine->stop();
    auto *note = new QProgressDialog(this);
    note->setObjectName(QStringLiteral("stoppingNote"));
    note->setWindowTitle(tr("Closing"));
    note->setRange(0, 0);
    note->setMinimumDuration(0);
    note->setAutoClose(false);
    note->setAutoReset(false);
    // Quitting without waiting leaves the engine's end to the process's exit (the old way,
    // a frozen quarter-minute at worst); the operator may choose it, knowingly. Escape only
    // hides the note: the window still closes when the engine has stopped.
    auto *quitNow = new QPushButton(tr("Quit Without Waiting"));
    quitNow->setObjectName(QStringLiteral("quitWithoutWaiting"));
    note->setCancelButton(quitNow);
    connect(quitNow, &QPushButton::clicked, this, [this] {
        m_closeWithoutWaiting = true;
        close();
    });
    m_stoppingNote = note;
    updateStoppingNote();
    note->open();
    statusBar()->showMessage(tr("Stopping the worker before closing…"));
}

void MainWindow::updateStoppingNote()
{
    if (!m_stoppingNote)
        return;
    const int inFlight = m_engine->counters().inFlight;
    m_stoppingNote->setLabelText(
        inFlight == 0 ? tr("Stopping the worker before closing…")
        : inFlight == 1
            ? tr("Stopping the worker before closing: 1 send in flight finishes and is recorded first.")
            : tr("Stopping the worker before closing: %1 sends in flight finish and are recorded first.").arg(inFlight));
}

} // namespace once::ui
