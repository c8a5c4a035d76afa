#pragma once

#include "model/clock.h"
#include "store/storefailure.h"
#include "store/storelocation.h"

#include <QSqlDatabase>
#include <QSqlQuery>
#include <QString>
#include <QStringList>

#include <memory>
#include <unordered_map>
#include <optional>

namespace once {

class WalCheckpointer;

// PostgreSQL notification channels. A worker listens to the queue's; the console
// listens to both and refreshes when either fires.
namespace Channel {
inline const QString Queue = QStringLiteral("once_queue");       // messages were enqueued
inline const QString Activity = QStringLiteral("once_activity"); // a worker reported progress
} // namespace Channel

// One SQL connection, opened in the thread that uses it and closed there (Qt's rule for
// QSqlDatabase). Owns the schema: open() creates or upgrades it.
class Database final
{
    Q_DISABLE_COPY_MOVE(Database)

public:
    ~Database();

    // ReadOnly: for the commands that only look (stats, events, history, ...): nothing is
    // written, not even the schema version, so they work on a backup, a read-only disk
    // or a store they may only read. A store whose schema needs an upgrade is refused.
    // AsPermitted: read-write where this user may write, else read-only by itself (the
    // console, so support staff with a file they may not write, or a PostgreSQL role
    // without write grants, can still look); readOnlyReason() says which it became.
    enum class Access { ReadWrite, ReadOnly, AsPermitted };
    static std::unique_ptr<Database> open(const StoreLocation &location, QString *error,
                                          Access access = Access::ReadWrite);

    QSqlDatabase &connection() { return m_db; }
    const StoreLocation &location() const { return m_location; }
    bool isPostgres() const { return m_location.kind == StoreLocation::Kind::Postgres; }
    int schemaVersion() const { return m_schemaVersion; }
    bool isReadOnly() const { return m_access == Access::ReadOnly; }
    // Why the store is open read-only, in words for a person ("you may not write the file
    // …"); empty while it is writable.
    QString readOnlyReason() const { return m_readOnlyReason; }

    // What the last failed call met (see StoreFailure): whether to try again.
    StoreFailure lastFailure() const { return m_lastFailure; }
    // SQLite: whether the file at the store's path is still the one this connection has
    // open. A store deleted or replaced under a running worker would otherwise take its
    // writes into an unlinked file while producers enqueue into the new one, unseen.
    // Always true on PostgreSQL.
    bool isStillAtPath(QString *error);
    // SQLite: PRAGMA quick_check, for `once init` (an open alone can miss a corrupt page).
    bool checkIntegrity(QString *error);

    // PostgreSQL only (a no-op on SQLite, where every reader polls one file): wakes the
    // listeners of a channel when the current transaction commits, at once if none is open.
    bool notify(const QString &channel, QString *error);
    // Subscribes this connection to a channel; the driver's notification() signal fires.
    // Subscriptions survive a reconnect. Returns false on SQLite.
    bool listen(const QString &channel);

    // PostgreSQL: starts a new session when a call found the last one gone (a failover, a
    // restart); true when there is a session. Free while nothing failed. begin() does it
    // itself; a caller that reads without a transaction calls it first.
    bool ensureConnected(QString *error);

    // Prepares (and caches) a statement on this connection.
    QSqlQuery &prepared(const QString &sql);
    // A multi-row VALUES list: row "(?, ?)" three times is "(?, ?), (?, ?), (?, ?)".
    // Rows go to SQLite a few at a time: per-row statements were most of the cost of a
    // turn of the engine. Through Qt's binding, whose cost per parameter grew with the
    // statement's parameter count, chunks of 16 rows beat chunks of 100 by half; bound
    // by execWith(), chunks of 64 measured the same as 16 (`once bench`), so 16 it stays.
    static QString repeatRows(const QString &row, qsizetype rows);
    bool exec(QSqlQuery &query, QString *error);
    bool exec(const QString &sql, QString *error);
    // Runs a prepared statement with these values bound in order; firstColumn, if given,
    // gets the first column of every row it returns. On SQLite the values are bound with
    // SQLite's own calls: Qt's addBindValue() makes a name for every parameter and looks
    // it up in a hash, which was 18% of a worker's store thread at 10,000 reminders/s.
    bool execWith(QSqlQuery &query, const QVariantList &values, QString *error, QStringList *firstColumn = nullptr);

    // A write transaction. SQLite takes the write lock at BEGIN, so two processes never
    // deadlock upgrading a read lock. Transactions nest: an inner one joins the outer,
    // and only the outermost commit reaches the disk (how the engine groups a whole
    // turn's writes into one commit). An inner rollback dooms the outer transaction.
    // How a transaction's commit waits, on PostgreSQL: Unflushed returns before the
    // server's log reaches its disk (synchronous_commit off for that transaction alone).
    // An inner transaction commits as the outer one does.
    enum class CommitWait
    {
        Flushed,
        Unflushed
    };
    bool begin(QString *error, CommitWait wait = CommitWait::Flushed);
    bool commit(QString *error);
    // Commits the outermost transaction and begins the next, on PostgreSQL in one round
    // trip. False if either failed; then no transaction is open.
    bool commitAndBegin(QString *error);
    void rollback();

private:
    Database() = default;
    bool connect(QString *error);
    // Access::AsPermitted: what this user may not write turns the connection read-only.
    void settleSqliteAccess();
    QString sqliteWriteRefusal() const;
    bool settlePostgresAccess(QString *error);
    void becomeReadOnly(const QString &reason);
    bool readSchemaVersion(int *version, QString *error);
    bool migrate(QString *error);
    void dropStatements();
    void noteFailure(const QSqlError &failure);
    bool execWhileBusy(const QString &sql, QString *error);

    QSqlDatabase m_db;
    QString m_connectionName;
    StoreLocation m_location;
    int m_schemaVersion = 0;
    Access m_access = Access::ReadWrite;
    QString m_readOnlyReason;
    StoreFailure m_lastFailure = StoreFailure::None;
    // SQLite: the file this connection opened (device and inode).
    quint64 m_fileDevice = 0;
    quint64 m_fileInode = 0;
    int m_transactionDepth = 0;
    bool m_rollbackOnly = false;
    // A statement failed outside SQLite: the server may have gone (failover, restart,
    // idle timeout). The next transaction checks before it starts and reconnects.
    bool m_connectionSuspect = false;
    QStringList m_channels;
    std::unordered_map<QString, std::unique_ptr<QSqlQuery>> m_statements;
    std::unique_ptr<QSqlQuery> m_unconnected; // prepared()'s answer while there is no session
    // SQLite, read-write: checkpoints this connection's log on a thread of its own. Must
    // outlive the connection, which the destructor closes first.
    std::shared_ptr<WalCheckpointer> m_checkpointer;
};

// Rolls back unless committed: early returns on error leave no open transaction.
class Transaction final
{
    Q_DISABLE_COPY_MOVE(Transaction)

public:
    explicit Transaction(Database &db) : m_db(db) {}
    ~Transaction()
    {
        if (m_open)
            m_db.rollback();
    }
    bool begin(QString *error, Database::CommitWait wait = Database::CommitWait::Flushed)
    {
        return m_open = m_db.begin(error, wait);
    }
    bool commit(QString *error)
    {
        m_open = false;
        return m_db.commit(error);
    }
    bool commitAndBegin(QString *error) { return m_open = m_db.commitAndBegin(error); }

private:
    Database &m_db;
    bool m_open = false;
};


} // namespace once
