#pragma once

#include "operator/storereader.h"

#include <QMainWindow>
#include <QPointer>
#include <QTimer>

#include <functional>
#include <memory>

class QLabel;
class QMenu;
class QProgressDialog;
class QTabWidget;

namespace once::ui {

class EngineController;
class HealthMonitor;
class Page;
class SavedPasswords;
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
    // ifMissing says to create it. access: ReadOnly to only look (File > Open Read-Only);
    // AsPermitted opens read-only by itself where the user may not write.
    void openStore(const QString &url, const QString &queueUrl = QString(),
                   StoreReader::IfMissing ifMissing = StoreReader::IfMissing::Refuse,
                   Database::Access access = Database::Access::AsPermitted);
    // once-console --read-only: every store this window opens, it opens read-only, and it
    // creates none. Call before the first openStore().
    void setReadOnly(bool readOnly);
    bool isReadOnly() const { return m_readOnly; }
    // The open store (or the default one) with this broker's queue.
    void openQueue(const QString &queueUrl);
    // A saved store (Open Recent, the last one at start), without its password: with the
    // one remembered in the keychain if the user asked for that, else as it is (libpq
    // then looks in PGPASSWORD and ~/.pgpass). A remembered password the keychain cannot
    // give is asked for.
    void openSavedStore(const QString &savedUrl, const QString &queueUrl = QString());
    // A saved queue (Open Recent Queue) the same way.
    void openSavedQueue(const QString &savedUrl);
    SavedPasswords *savedPasswords() const { return m_passwords; }
    StoreSession *session() const { return m_session.get(); }
    // The window was asked to close and waits for the engine to stop first.
    bool isClosingAfterEngine() const { return m_closeWhenStopped; }
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
    // Opens the BullMQ page on a Redis server (once-console --bullmq URL).
    void openBullMq(const QString &redisUrl, const QString &scriptsFolder);
    // Shows each page in turn, lets it load, and saves the window as <folder>/<page>.png.
    void saveScreenshots(const QString &folder, std::function<void()> done);

protected:
    void closeEvent(QCloseEvent *event) override;

private:
    void buildMenus();
    void chooseStore();
    void chooseStoreReadOnly();
    // message: why the dialog asks (a remembered password the keychain cannot give).
    void choosePostgresStore(const QString &prefill = QString(), const QString &message = QString());
    void chooseBrokerQueue(const QString &prefill = QString(), const QString &message = QString());
    // Once the connection the dialog's password opened is open: into the keychain, or out
    // of it when Remember was unticked.
    void keepPasswordOnceOpen(const QString &savedUrl, const QString &password, bool remember);
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
    // The "Read-only" mark in the status bar and the title, once the session knows.
    void showAccess();
    void updateTitle();
    // Closing while the engine runs: it stops first (its sends finish and are recorded),
    // with a note saying so, and the window closes when it reports stopped.
    void stopEngineThenClose();
    void updateStoppingNote();

    EngineController *m_engine = nullptr;
    SavedPasswords *m_passwords = nullptr;
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
    QLabel *m_readOnlyLabel = nullptr; // "readOnlyLabel": shown while the store is read-only
    QAction *m_newStoreAction = nullptr;
    bool m_readOnly = false;
    QTimer m_refreshTimer;
    bool m_closeWhenStopped = false;
    bool m_closeWithoutWaiting = false;
    QProgressDialog *m_stoppingNote = nullptr; // "stoppingNote"
};

} // namespace once::ui
