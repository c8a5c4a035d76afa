#pragma once

#include <QString>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

struct sqlite3;

namespace once {

// Copies an SQLite store's write-ahead log back into its file on a thread of its own.
//
// SQLite's automatic checkpoint runs inside the commit that takes the log past 1,000
// pages, on the committing thread: one turn in five of a busy worker copied the log into
// the file and synced it before the turn's sends could start (13% of the store thread's
// time at 10,000 reminders/s). A write connection hands that to this thread instead
// (attach()); a passive checkpoint runs beside the writers and never waits for them.
// Only past InlineCheckpointPages does a commit copy the little that is left itself.
//
// One per store file in a process, shared by its write connections, and stopped when the
// last of them closes.
class WalCheckpointer final
{
public:
    // What SQLite's automatic checkpoint waits for, kept: the log is copied back each time
    // this many pages were added to it since the last copy. (Not whenever it holds this
    // many: it starts over only when a transaction begins with everything copied, which
    // busy writers rarely let happen, so past this size every commit wanted a checkpoint,
    // and each one syncs the log and the file.) Each quarter of that in the last stretch
    // before InlineCheckpointPages.
    static constexpr int CheckpointPages = 1000;
    // Past this the committing connection checkpoints itself after all, so that the log
    // starts over (see onCommit): it grows to about 16 MB instead of 4 MB.
    static constexpr int InlineCheckpointPages = 4 * CheckpointPages;

    // The process's checkpointer for this file, made if it has none (its thread starts
    // at the first checkpoint wanted).
    static std::shared_ptr<WalCheckpointer> forFile(const QString &path);
    // Makes this connection's commits wake the checkpointer instead of checkpointing
    // themselves. The checkpointer must outlive the connection.
    void attach(sqlite3 *connection);

    ~WalCheckpointer();
    WalCheckpointer(const WalCheckpointer &) = delete;
    WalCheckpointer &operator=(const WalCheckpointer &) = delete;

    // Checkpoints that ran to the end since the start (they may have left frames that a
    // reader still needed: those go at the next one).
    quint64 checkpointsRun() const;

private:
    explicit WalCheckpointer(const QString &path);
    static int onCommit(void *checkpointer, sqlite3 *connection, const char *database, int pages);
    void run();
    bool checkpoint(sqlite3 **connection);

    const QString m_path;
    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_wanted = false;
    bool m_stopping = false;
    quint64 m_checkpointsRun = 0;
    // The log's length in pages when this process last asked for a checkpoint: the
    // commits that follow count the pages they add from there.
    std::atomic<int> m_logPagesCounted = 0;
    QString m_lastFailure; // the checkpointer thread's own
    std::thread m_thread;
};

} // namespace once
