#pragma once

#include "storereader.h"

#include <QMainWindow>
#include <QPointer>
#include <QTimer>

#include <functional>
#include <memory>

class QLabel;
class QMenu;
class QTabWidget;

namespace once::ui {

class EngineController;
class HealthMonitor;
class Page;
class StoreSession;
class TrayNotifier;

// The console's window: a tab per page over one open store, a menu bar, a status bar,
// and the engine running in the background. The current page refreshes on F5, when the
// store announces a change, and otherwise every few seconds (Page::refreshIntervalMs).
//
// The URL a store was opened with may hold a password; the window shows, titles and
// remembers stores only by their display name or password-free URL (storeurl.h). The
// same goes for a broker's queue (queueurl.h), which the window reads instead of the
// store's own queue when one is open (--queue, File > Open Broker Queue).
class MainWindow final : public QMainWindow
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(MainWindow)

public:
    explicit MainWindow(QWidget *parent = nullptr);
    ~MainWindow() override;

    // queueUrl: a broker's queue to read instead of the store's own, or empty.
    // A SQLite store that is not there is asked about (askToCreateStore), unless
    // ifMissing says to create it.
    void openStore(const QString &url, const QString &queueUrl = QString(),
                   StoreReader::IfMissing ifMissing = StoreReader::IfMissing::Refuse);
    // The open store (or the default one) with this broker's queue.
    void openQueue(const QString &queueUrl);
    StoreSession *session() const { return m_session.get(); }
    EngineController *engine() const { return m_engine; }
    HealthMonitor *health() const { return m_health; }
    TrayNotifier *tray() const { return m_tray; }
    QTabWidget *tabs() const { return m_tabs; }
    template<typename T> T *page() const
    {
        for (Page *page : m_pages) {
            if (auto *typed = qobject_cast<T *>(page))
                return typed;
        }
        return nullptr;
    }
    // Shows the page and makes it current (the tests and the screenshots use it).
    void showPage(Page *page);
    // Shows each page in turn, lets it load, and saves the window as <folder>/<page>.png.
    void saveScreenshots(const QString &folder, std::function<void()> done);

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    void buildMenus();
    void chooseStore();
    void choosePostgresStore(const QString &prefill = QString());
    void chooseBrokerQueue(const QString &prefill = QString());
    // A store chosen in the menus: the broker's queue stays when the store is the same one
    // again (a reconnect), and goes with a different store, whose queue it is not.
    void openStoreFromMenu(const QString &url);
    void showOpenError(const QString &url, const QString &queueUrl, bool queueFailed, const QString &error);
    void askToCreateStore(const QString &url, const QString &queueUrl);
    void chooseNewStore();
    void rebuildRecentMenu();
    void rebuildRecentQueuesMenu();
    void refreshCurrent();
    void showAbout();
    void showSettings();
    void updateStatus();

    EngineController *m_engine = nullptr;
    HealthMonitor *m_health = nullptr;
    TrayNotifier *m_tray = nullptr;
    std::unique_ptr<StoreSession> m_session;
    QTabWidget *m_tabs = nullptr;
    QList<Page *> m_pages;
    QMenu *m_recentMenu = nullptr;
    QMenu *m_recentQueuesMenu = nullptr;
    QAction *m_useStoreQueueAction = nullptr;
    QLabel *m_storeLabel = nullptr; // "storeLabel"
    QLabel *m_queueLabel = nullptr; // "queueLabel": the broker's queue, hidden without one
    QLabel *m_workerLabel = nullptr;
    QTimer m_refreshTimer;
};

} // namespace once::ui
