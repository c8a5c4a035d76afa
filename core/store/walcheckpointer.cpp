#include "store/walcheckpointer.h"

#include <QFile>
#include <QFileInfo>
#include <QLoggingCategory>

#include <pthread.h>
#include <sqlite3.h>

#include <map>

Q_LOGGING_CATEGORY(lcCheckpoint, "once.core.checkpoint")

namespace once {

std::shared_ptr<WalCheckpointer> WalCheckpointer::forFile(const QString &path)
{
    static std::mutex registryMutex;
    static std::map<QString, std::weak_ptr<WalCheckpointer>> registry;
    const QString file = QFileInfo(path).absoluteFilePath();
    const std::lock_guard lock(registryMutex);
    std::erase_if(registry, [](const auto &entry) { return entry.second.expired(); });
    std::weak_ptr<WalCheckpointer> &entry = registry[file];
    std::shared_ptr<WalCheckpointer> checkpointer = entry.lock();
    if (!checkpointer) {
        checkpointer.reset(new WalCheckpointer(file));
        entry = checkpointer;
    }
    return checkpointer;
}

WalCheckpointer::WalCheckpointer(const QString &path) : m_path(path) {}

WalCheckpointer::~WalCheckpointer()
{
    {
        const std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_one();
    if (m_thread.joinable())
        m_thread.join();
}

void WalCheckpointer::attach(sqlite3 *connection)
{
    // Replaces SQLite's automatic checkpoint, which is itself a commit hook.
    sqlite3_wal_hook(connection, &WalCheckpointer::onCommit, this);
}

quint64 WalCheckpointer::checkpointsRun() const
{
    const std::lock_guard lock(m_mutex);
    return m_checkpointsRun;
}

int WalCheckpointer::onCommit(void *checkpointer, sqlite3 *connection, const char *database, int pages)
{
    if (pages < CheckpointPages)
        return SQLITE_OK;
    if (pages >= InlineCheckpointPages) {
        // A writer starts the log over only if it begins while nothing is left to copy,
        // which a checkpoint on another thread rarely lets it see while turns follow each
        // other: the log grew without end. So this commit copies what is left (little:
        // the thread has copied the rest), as SQLite's own checkpoint did, and its
        // connection's next transaction starts the log over.
        sqlite3_wal_checkpoint_v2(connection, database, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
        return SQLITE_OK;
    }
    auto *self = static_cast<WalCheckpointer *>(checkpointer);
    int counted = self->m_logPagesCounted.load(std::memory_order_relaxed);
    // Shorter than when last counted: the log started over, and its pages are all new.
    // (Another process's commits may take it past the old length before this one sees it:
    // that process's checkpointer copies meanwhile, and the inline bound holds anyway.)
    const int added = pages >= counted ? pages - counted : pages;
    // Nearer the inline bound, more often: the commit that reaches it finds little left.
    const int every =
        pages >= InlineCheckpointPages - CheckpointPages ? CheckpointPages / 4 : CheckpointPages;
    // Counted from here as soon as the checkpoint is asked for, so that the commits made
    // while it runs do not ask for another one straight after it.
    if (added < every ||
        !self->m_logPagesCounted.compare_exchange_strong(counted, pages, std::memory_order_relaxed))
        return SQLITE_OK;
    {
        const std::lock_guard lock(self->m_mutex);
        self->m_wanted = true;
        // Started at the first checkpoint wanted: a command that writes a few rows and
        // exits never needs the thread.
        if (!self->m_thread.joinable() && !self->m_stopping) {
            self->m_thread = std::thread(&WalCheckpointer::run, self);
            pthread_setname_np(self->m_thread.native_handle(), "once-checkpoint");
        }
    }
    self->m_wake.notify_one();
    return SQLITE_OK;
}

void WalCheckpointer::run()
{
    sqlite3 *connection = nullptr;
    for (;;) {
        std::unique_lock lock(m_mutex);
        m_wake.wait(lock, [this] { return m_wanted || m_stopping; });
        if (m_stopping)
            break;
        m_wanted = false;
        lock.unlock();
        const bool ran = checkpoint(&connection);
        lock.lock();
        m_checkpointsRun += ran ? 1 : 0;
    }
    // The last connection to the file to close copies what is left and removes the log.
    sqlite3_close_v2(connection);
}

bool WalCheckpointer::checkpoint(sqlite3 **connection)
{
    const auto fail = [this, connection](const char *step) {
        const QString said = QStringLiteral("%1: %2").arg(QString::fromLatin1(step),
                                                          QString::fromUtf8(sqlite3_errmsg(*connection)));
        // Said once per kind of failure, not at every commit while a disk stays full.
        if (said != m_lastFailure)
            qCWarning(lcCheckpoint).noquote() << "cannot checkpoint" << m_path << "-" << said
                                              << "(the log grows until a checkpoint succeeds)";
        m_lastFailure = said;
        // Opened again next time: the file may have been replaced or the disk remounted.
        sqlite3_close_v2(*connection);
        *connection = nullptr;
        return false;
    };
    if (!*connection) {
        if (sqlite3_open_v2(QFile::encodeName(m_path).constData(), connection, SQLITE_OPEN_READWRITE,
                            nullptr) != SQLITE_OK)
            return fail("open");
        // The checkpoint syncs the log before it copies it and the file after, as the
        // writers' automatic checkpoint did. Reading the journal mode enters WAL mode:
        // a connection that has read nothing cannot checkpoint.
        if (sqlite3_exec(*connection, "PRAGMA synchronous=FULL; PRAGMA journal_mode", nullptr, nullptr,
                         nullptr) != SQLITE_OK)
            return fail("open");
    }
    int logPages = 0;
    int copiedPages = 0;
    const int rc =
        sqlite3_wal_checkpoint_v2(*connection, nullptr, SQLITE_CHECKPOINT_PASSIVE, &logPages, &copiedPages);
    if (rc == SQLITE_BUSY)
        return false; // another connection (another process's checkpointer) is at it
    if (rc != SQLITE_OK)
        return fail("checkpoint");
    qCDebug(lcCheckpoint) << "checkpoint of" << m_path << "copied" << copiedPages << "of" << logPages
                          << "pages";
    return true;
}

} // namespace once
