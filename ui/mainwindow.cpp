#include "mainwindow.h"

#include "auditpage.h"
#include "deadletterspage.h"
#include "enginecontroller.h"
#include "eventspage.h"
#include "indoubtpage.h"
#include "overviewpage.h"
#include "settings.h"
#include "settingsdialog.h"
#include "storesession.h"
#include "workerpage.h"

#include <QApplication>
#include <QCloseEvent>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>

namespace once::ui {

MainWindow::MainWindow(QWidget *parent) : QMainWindow(parent), m_engine(new EngineController(this))
{
    setWindowTitle(tr("once console"));
    setWindowIcon(QIcon(QStringLiteral(":/once.svg")));
    m_tabs = new QTabWidget(this);
    m_tabs->setDocumentMode(true);
    m_pages = {new OverviewPage(m_engine), new EventsPage, new DeadLettersPage, new InDoubtPage,
               new WorkerPage(m_engine), new AuditPage};
    for (Page *page : std::as_const(m_pages))
        m_tabs->addTab(page, page->title());
    setCentralWidget(m_tabs);
    connect(m_tabs, &QTabWidget::currentChanged, this, &MainWindow::refreshCurrent);

    m_storeLabel = new QLabel(tr("No store open"));
    m_workerLabel = new QLabel;
    statusBar()->addWidget(m_storeLabel, 1);
    statusBar()->addPermanentWidget(m_workerLabel);
    connect(m_engine, &EngineController::stateChanged, this, &MainWindow::updateStatus);
    connect(m_engine, &EngineController::countersChanged, this, &MainWindow::updateStatus);
    connect(m_engine, &EngineController::errorOccurred, this,
            [this](const QString &message) { statusBar()->showMessage(message, 10000); });

    buildMenus();
    updateStatus();
    Settings settings;
    if (!restoreGeometry(settings.windowGeometry()))
        resize(1280, 820);
    restoreState(settings.windowState());
    m_refreshTimer.setInterval(2000);
    connect(&m_refreshTimer, &QTimer::timeout, this, &MainWindow::refreshCurrent);
    m_refreshTimer.start();
}

MainWindow::~MainWindow() = default;

void MainWindow::buildMenus()
{
    QMenu *file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open Store…"), QKeySequence::Open, this, &MainWindow::chooseStore);
    m_recentMenu = file->addMenu(tr("Open &Recent"));
    rebuildRecentMenu();
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

void MainWindow::openStore(const QString &url)
{
    m_session = std::make_unique<StoreSession>(url);
    connect(m_session.get(), &StoreSession::opened, this, [this, url](bool ok, const QString &error) {
        if (!ok) {
            m_storeLabel->setText(tr("Cannot open %1").arg(url));
            QMessageBox::warning(this, tr("Cannot open the store"), error);
            return;
        }
        Settings().addRecentStore(url);
        rebuildRecentMenu();
        m_storeLabel->setText(tr("Store: %1").arg(url));
        refreshCurrent();
    });
    connect(m_session.get(), &StoreSession::storeChanged, this, &MainWindow::refreshCurrent);
    for (Page *page : std::as_const(m_pages))
        page->setSession(m_session.get());
    setWindowTitle(tr("%1 — once console").arg(url.section(QLatin1Char('/'), -1)));
}

void MainWindow::chooseStore()
{
    const QString path = QFileDialog::getOpenFileName(this, tr("Open Store"), QString(),
                                                      tr("once stores (*.sqlite *.db);;All files (*)"));
    if (!path.isEmpty())
        openStore(QStringLiteral("sqlite:") + path);
}

void MainWindow::rebuildRecentMenu()
{
    m_recentMenu->clear();
    const QStringList recent = Settings().recentStores();
    for (const QString &url : recent)
        m_recentMenu->addAction(url, this, [this, url] { openStore(url); });
    m_recentMenu->setEnabled(!recent.isEmpty());
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

void MainWindow::refreshCurrent()
{
    if (auto *page = qobject_cast<Page *>(m_tabs->currentWidget()); page && m_session)
        page->refresh();
}

void MainWindow::updateStatus()
{
    const auto counters = m_engine->counters();
    QString text = tr("Worker: %1").arg(EngineController::describe(m_engine->state()));
    if (m_engine->state() != EngineController::State::Stopped)
        text += tr("  ·  applied %1  ·  duplicates %2  ·  in flight %3")
                    .arg(counters.applied)
                    .arg(counters.duplicates)
                    .arg(counters.inFlight);
    m_workerLabel->setText(text);
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
    dialog.exec();
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    Settings settings;
    settings.setWindowGeometry(saveGeometry());
    settings.setWindowState(saveState());
    event->accept();
}

} // namespace once::ui
