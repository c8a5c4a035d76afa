#include "store/database.h"

#include "store/migrations.h"
#include "store/walcheckpointer.h"

#include <QAtomicInteger>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QSqlDriver>
#include <QSqlError>
#include <QSqlResult>
#include <QThread>
#include <QUrl>

#include <sqlite3.h>
#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <mutex>
#include <thread>

Q_LOGGING_CATEGORY(lcDatabase, "once.core.database")

namespace once {

namespace {

const int LatestVersion = latestSchemaVersion();

// Any number will do, as long as it is the same in every once process: it serialises
// schema upgrades when several workers start against a new PostgreSQL store at once.
constexpr qint64 SchemaLockId = 0x6f6e6365; // "once"

} // namespace

namespace {

// SQLite's own busy timeout sleeps 1, 2, 5, 10, ... up to 100 ms between tries, which
// puts a producer's enqueue or a second worker's turn behind a whole sleep each time
// the write lock is taken. Trying again every quarter millisecond keeps the wait close
// to the other writer's commit, for up to thirty seconds.
int retryWhileBusy(void *, int tries)
{
    constexpr int MaxTries = 30 * 4000;
    if (tries >= MaxTries)
        return 0;
    std::this_thread::sleep_for(std::chrono::microseconds(250));
    return 1;
}

// In WAL mode a connection drops its whole page cache when it finds that another
// process committed since its last transaction, and reads the pages back: with a worker
// and `once serve` (or two workers) on one store, that is every transaction. glibc
// returns the freed top of a thread's heap to the kernel above 128 KiB, so each drop
// cost an madvise and each refill a page fault per page: half the CPU of once serve's
// store thread. Keeping up to the page cache's own bound (cache_size below) resident
// ends that; the memory is the cache's, used again at the next transaction.
void keepFreedPageCacheResident()
{
    static std::once_flag once;
    std::call_once(once, [] { mallopt(M_TRIM_THRESHOLD, 64 * 1024 * 1024); });
}

// Whether the kernel lets this process write there (effective ids and capabilities, an
// immutable file, a read-only mount).
bool mayWrite(const QString &path)
{
    return ::faccessat(AT_FDCWD, QFile::encodeName(path).constData(), W_OK, AT_EACCESS) == 0;
}

// Whether the file's header says write-ahead log (its read and write versions, bytes 18
// and 19, are 2 in WAL mode and 1 with a rollback journal).
bool isWalModeFile(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return false;
    const QByteArray header = file.read(20);
    return header.size() == 20 && header.startsWith("SQLite format 3") && header.at(18) == 2 && header.at(19) == 2;
}

// A store in WAL mode is read through its index, the -shm file beside it, which SQLite
// creates at the first read when it is not there, even on a read-only connection. Where
// the reader may not create it (a backup on a read-only mount, another user's store in a
// folder of theirs), the first read fails with "attempt to write a readonly database".
// With neither the index nor the log there, nobody has the store open for writing (a
// writer keeps both while it runs, and its last close checkpoints the log into the file),
// so the file alone is the whole store: it is read as it is (SQLite's immutable=1), with
// no index, no log and no locks. A writer that starts later is not seen until the store is
// opened again; where a writer runs, its -wal and -shm are there and are read as usual.
bool mustReadAsItIs(const QFileInfo &file)
{
    const QString path = file.absoluteFilePath();
    return !mayWrite(file.absolutePath()) && !QFile::exists(path + QStringLiteral("-wal"))
           && !QFile::exists(path + QStringLiteral("-shm")) && isWalModeFile(path);
}

} // namespace

Database::~Database()
{
    m_unconnected.reset();
    m_statements.clear();
    m_db.close();
    m_db = QSqlDatabase();
    QSqlDatabase::removeDatabase(m_connectionName);
}

std::unique_ptr<Database> Database::open(const StoreLocation &location, QString *error, Access access)
{
    static QAtomicInteger<quint64> counter;
    std::unique_ptr<Database> db(new Database);
    db->m_location = location;
    db->m_access = access;
    if (access == Access::ReadOnly)
        db->m_readOnlyReason = QStringLiteral("it was opened read-only");
    db->m_connectionName = QStringLiteral("once-%1").arg(counter.fetchAndAddRelaxed(1));
    if (location.kind == StoreLocation::Kind::Postgres) {
        if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QPSQL"))) {
            *error = QStringLiteral("Qt's PostgreSQL driver is not installed (Debian package libqt6sql6-psql)");
            return nullptr;
        }
        db->m_db = QSqlDatabase::addDatabase(QStringLiteral("QPSQL"), db->m_connectionName);
        db->m_db.setHostName(location.libpqHosts());
        db->m_db.setPort(location.qpsqlPort());
        db->m_db.setUserName(location.user);
        db->m_db.setPassword(location.password);
        db->m_db.setDatabaseName(location.database);
        db->m_db.setConnectOptions(location.libpqOptions());
    } else {
        const QFileInfo file(location.path);
        if (access == Access::AsPermitted)
            db->settleSqliteAccess();
        // SQLite would open the file read-only by itself and fail at the first read with
        // "attempt to write a readonly database (in: PRAGMA cache_size=-65536)": say why.
        if (access == Access::ReadWrite) {
            if (const QString reason = db->sqliteWriteRefusal(); !reason.isEmpty()) {
                db->m_lastFailure = StoreFailure::Permanent;
                *error = QStringLiteral("cannot write the store %1: %2; commands that only look, such as once stats, "
                                        "open it read-only")
                             .arg(location.displayName(), reason);
                return nullptr;
            }
        }
        if (db->isReadOnly()) {
            // Looking never creates: a mistyped path is an error, not a new empty store.
            if (!file.exists()) {
                *error = QStringLiteral("no store at %1 (once init creates one)").arg(location.displayName());
                return nullptr;
            }
        } else if (!QDir().mkpath(file.absolutePath())) {
            *error = QStringLiteral("cannot create the folder %1").arg(file.absolutePath());
            return nullptr;
        }
        db->m_db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), db->m_connectionName);
        if (db->isReadOnly() && mustReadAsItIs(file)) {
            // A URI, so that a path with '?', '#' or '%' in it stays the path.
            QUrl uri = QUrl::fromLocalFile(file.absoluteFilePath());
            uri.setQuery(QStringLiteral("immutable=1"));
            db->m_db.setDatabaseName(uri.toString(QUrl::FullyEncoded));
            db->m_db.setConnectOptions(QStringLiteral("QSQLITE_OPEN_READONLY;QSQLITE_OPEN_URI"));
            qCDebug(lcDatabase).noquote() << location.displayName() << "is read as it is on disk";
        } else {
            db->m_db.setDatabaseName(location.path);
            if (db->isReadOnly())
                db->m_db.setConnectOptions(QStringLiteral("QSQLITE_OPEN_READONLY"));
        }
    }
    if (!db->connect(error))
        return nullptr;
    if (db->m_access == Access::AsPermitted && !db->settlePostgresAccess(error))
        return nullptr;
    if (!db->migrate(error))
        return nullptr;
    return db;
}

void Database::becomeReadOnly(const QString &reason)
{
    m_access = Access::ReadOnly;
    m_readOnlyReason = reason;
    qCInfo(lcDatabase).noquote() << m_location.displayName() << "is open read-only:" << reason;
}

// Whether this process may write, as the kernel will judge it (effective ids and
// capabilities, an immutable file, a read-only mount). A store the user may not write
// opens read-only rather than failing at its first write ("attempt to write a readonly
// database"); a file that is not there yet is created as before.
void Database::settleSqliteAccess()
{
    m_access = Access::ReadWrite;
    if (const QString reason = sqliteWriteRefusal(); !reason.isEmpty())
        becomeReadOnly(reason);
}

// Why this process may not write the store's file, in words for a person; empty when it
// may, or when there is no file yet.
QString Database::sqliteWriteRefusal() const
{
    const QFileInfo file(m_location.path);
    if (!file.exists())
        return {};
    if (!mayWrite(file.absoluteFilePath()))
        return QStringLiteral("you may not write the file %1 (%2)")
            .arg(file.absoluteFilePath(), QString::fromLocal8Bit(std::strerror(errno)));
    // SQLite writes its journal (the -wal and -shm files) beside the store.
    if (!mayWrite(file.absolutePath()))
        return QStringLiteral("you may not write the folder %1, where the store keeps its journal (%2)")
            .arg(file.absolutePath(), QString::fromLocal8Bit(std::strerror(errno)));
    return {};
}

// A role that may write none of the store's tables (support staff, a reporting job; see
// `once grant-readonly`), a database or role set to read-only transactions, a standby:
// the session turns read-only, so nothing it does can write, and the console says why.
// A database without a store yet stays writable: creating one is what was asked for.
bool Database::settlePostgresAccess(QString *error)
{
    m_access = Access::ReadWrite;
    if (!isPostgres())
        return true;
    QSqlQuery query(m_db);
    const bool asked = query.exec(QStringLiteral(
        "SELECT to_regclass('schema_version') IS NOT NULL, pg_is_in_recovery(), "
        "current_setting('transaction_read_only') = 'on', "
        "EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace "
        "AND c.relkind IN ('r', 'p') AND c.relname <> 'schema_version' AND (has_table_privilege(c.oid, 'INSERT') "
        "OR has_table_privilege(c.oid, 'UPDATE') OR has_table_privilege(c.oid, 'DELETE')))"));
    if (!asked || !query.next()) {
        noteFailure(query.lastError());
        *error = QStringLiteral("cannot read the store %1: %2").arg(m_location.displayName(), query.lastError().text());
        return false;
    }
    const bool storeExists = query.value(0).toBool();
    const bool standby = query.value(1).toBool();
    const bool readOnlySessions = query.value(2).toBool();
    const bool mayWriteSomething = query.value(3).toBool();
    query.finish();
    if (standby)
        becomeReadOnly(QStringLiteral("the server is a standby, which only reads"));
    else if (readOnlySessions)
        becomeReadOnly(QStringLiteral("the server starts the role %1's sessions read-only "
                                      "(default_transaction_read_only)")
                           .arg(m_location.user));
    else if (storeExists && !mayWriteSomething)
        becomeReadOnly(QStringLiteral("the role %1 may read the store's tables but not write them").arg(m_location.user));
    if (!isReadOnly())
        return true;
    return exec(QStringLiteral("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"), error);
}

bool Database::isStillAtPath(QString *error)
{
    if (isPostgres() || !m_fileInode)
        return true;
    struct stat now = {};
    const QByteArray path = QFile::encodeName(m_location.path);
    const bool exists = ::stat(path.constData(), &now) == 0;
    if (exists && quint64(now.st_dev) == m_fileDevice && quint64(now.st_ino) == m_fileInode)
        return true;
    m_lastFailure = StoreFailure::Permanent;
    *error = exists ? QStringLiteral("the store file %1 was replaced by another file while in use; stopping so that "
                                     "nothing is written to the old one")
                          .arg(m_location.path)
                    : QStringLiteral("the store file %1 was deleted while in use; stopping so that nothing is written "
                                     "to a file nobody can see")
                          .arg(m_location.path);
    return false;
}

bool Database::checkIntegrity(QString *error)
{
    if (isPostgres())
        return true;
    QSqlQuery query(m_db);
    if (!query.exec(QStringLiteral("PRAGMA quick_check(5)"))) {
        noteFailure(query.lastError());
        *error = QStringLiteral("the store %1 cannot be checked: %2").arg(m_location.displayName(), query.lastError().text());
        return false;
    }
    QStringList problems;
    while (query.next()) {
        for (const auto &line : query.value(0).toString().split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
            if (!line.startsWith(QLatin1String("***"))) // "*** in database main ***"
                problems << line.simplified();
        }
    }
    if (problems == QStringList{QStringLiteral("ok")})
        return true;
    m_lastFailure = StoreFailure::Permanent;
    *error = QStringLiteral("the store %1 is corrupt: %2").arg(m_location.displayName(), problems.join(QLatin1String("; ")));
    return false;
}

// Changing the journal mode needs the file to itself, and SQLite answers "database is
// locked" at once rather than call the busy handler (which could deadlock there): two
// processes opening a new store together (two `once init`, or init and enqueue) meet here.
bool Database::execWhileBusy(const QString &sql, QString *error)
{
    constexpr int MaxWaitMs = 30000;
    for (int waited = 0;; waited += 2) {
        QSqlQuery query(m_db);
        if (query.exec(sql))
            return true;
        noteFailure(query.lastError());
        if (m_lastFailure != StoreFailure::Contention || waited >= MaxWaitMs) {
            *error = QStringLiteral("%1 (in: %2)").arg(query.lastError().text(), sql);
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

bool Database::connect(QString *error)
{
    if (!m_db.open()) {
        noteFailure(m_db.lastError());
        if (isPostgres() && m_lastFailure == StoreFailure::Permanent)
            m_lastFailure = StoreFailure::ConnectionLost; // a server that cannot be reached yet
        QString reason = m_db.lastError().text().simplified();
        // libpq's own words for a missing password do not say what to do about it.
        if (reason.contains(QLatin1String("no password supplied")))
            reason = QStringLiteral("authentication needs a password: give it in the URL, PGPASSWORD or ~/.pgpass");
        *error = QStringLiteral("cannot open the store %1: %2").arg(m_location.displayName(), reason);
        return false;
    }
    if (isPostgres()) {
        // Notices such as "relation already exists, skipping" would reach stderr through
        // libpq on every start; warnings and errors still do.
        if (!exec(QStringLiteral("SET client_min_messages = warning"), error))
            return false;
        // Statements are prepared once per connection, and after a few runs the server
        // would keep a generic plan made for the tables as they were then: a worker
        // started on a new store joined each turn's rows to the whole ledger by a scan
        // for as long as it ran. Each execution is planned for the tables as they are.
        if (!exec(QStringLiteral("SET plan_cache_mode = force_custom_plan"), error))
            return false;
        if (isReadOnly()
            && !exec(QStringLiteral("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"), error))
            return false;
        for (const auto &channel : std::as_const(m_channels))
            m_db.driver()->subscribeToNotification(channel);
        return true;
    }
    keepFreedPageCacheResident();
    const QVariant handle = m_db.driver()->handle();
    if (handle.isValid() && qstrcmp(handle.typeName(), "sqlite3*") == 0) {
        if (auto *connection = *static_cast<sqlite3 *const *>(handle.constData())) {
            sqlite3_busy_handler(connection, retryWhileBusy, nullptr);
            // A worker's turn must not copy the log back into the file before its sends
            // can start (see WalCheckpointer).
            if (!isReadOnly()) {
                if (!m_checkpointer)
                    m_checkpointer = WalCheckpointer::forFile(m_location.path);
                m_checkpointer->attach(connection);
            }
        }
    }
    struct stat opened = {};
    if (::stat(QFile::encodeName(m_location.path).constData(), &opened) == 0) {
        m_fileDevice = quint64(opened.st_dev);
        m_fileInode = quint64(opened.st_ino);
    }
    // A larger page cache keeps a busy worker from reading the pages it touches again.
    // No memory-mapped reads: a connection unmaps the whole file whenever another
    // process committed since its last transaction (a worker beside once serve, two
    // workers, every transaction), and the unmap, its TLB shootdown and a page fault per
    // page read back cost more than the reads they spare.
    //
    // Statement journals and sorts in memory: in a file, every multi-row statement of a
    // turn created, wrote and unlinked a file in /var/tmp (two turns in three, found in a
    // profile of the worker's store thread), a file system round trip per turn.
    for (const auto pragma : {"PRAGMA foreign_keys=OFF", "PRAGMA cache_size=-65536", "PRAGMA temp_store=MEMORY"}) {
        QSqlQuery query(m_db);
        if (query.exec(QString::fromLatin1(pragma)))
            continue;
        noteFailure(query.lastError());
        // The first read of the file: one that is not SQLite at all fails here, and
        // SQLite's own words ("file is not a database") would name neither file nor cause.
        const int code = query.lastError().nativeErrorCode().toInt() & 0xff;
        if (code == SQLITE_NOTADB)
            *error = QStringLiteral("%1 is not a once store: the file is not an SQLite database (a store is created "
                                    "by once init or the console)")
                         .arg(m_location.displayName());
        else if ((code == SQLITE_CANTOPEN || code == SQLITE_READONLY) && isReadOnly()
                 && QFile::exists(m_location.path + QStringLiteral("-wal"))
                 && !QFile::exists(m_location.path + QStringLiteral("-shm")))
            // A log left without its index (see mustReadAsItIs): SQLite would make the index.
            *error = QStringLiteral("cannot read the store %1: its write-ahead log (-wal) is there without its index "
                                    "(-shm), which SQLite must create to read it, and this user may not write the "
                                    "folder %2 (open it once where the folder may be written, or copy the files "
                                    "to a folder that may be)")
                         .arg(m_location.displayName(), QFileInfo(m_location.path).absolutePath());
        else
            *error = QStringLiteral("%1 (in: %2)").arg(query.lastError().text(), QString::fromLatin1(pragma));
        return false;
    }
    if (isReadOnly())
        return true; // the file keeps the journal mode its writers gave it
    // WAL lets readers (the console, `once stats`) run beside a writing worker;
    // synchronous=FULL makes every commit, and so every claim, durable before the
    // partner is called.
    return execWhileBusy(QStringLiteral("PRAGMA journal_mode=WAL"), error)
           && exec(QStringLiteral("PRAGMA synchronous=FULL"), error);
}

namespace {

// Set on a thread while it drops the statements of a session that is gone.
thread_local bool droppingDeadStatements = false;
QtMessageHandler handlerBeforeOurs = nullptr;

// Qt's PostgreSQL driver tries to DEALLOCATE each prepared statement of a session that
// is gone, and warns for every one: a dozen lines for one lost connection, which the
// engine has already reported once. Only those warnings, and only then, are dropped.
void quietDeadStatements(QtMsgType type, const QMessageLogContext &context, const QString &message)
{
    if (droppingDeadStatements && type == QtWarningMsg && message.startsWith(QLatin1String("Unable to free statement")))
        return;
    if (handlerBeforeOurs)
        handlerBeforeOurs(type, context, message);
    else
        qt_message_output(type, context, message); // unreachable: Qt's default is a handler too
}

} // namespace

void Database::dropStatements()
{
    static std::once_flag installed;
    std::call_once(installed, [] { handlerBeforeOurs = qInstallMessageHandler(quietDeadStatements); });
    droppingDeadStatements = true;
    m_statements.clear();
    droppingDeadStatements = false;
}

bool Database::ensureConnected(QString *error)
{
    if (!m_connectionSuspect)
        return true;
    if (m_db.isOpen() && exec(QStringLiteral("SELECT 1"), nullptr)) {
        m_connectionSuspect = false;
        return true;
    }
    // The server went away (a restart or a failover to a replica): start a new session.
    // Nothing is lost by it: an open transaction died with the old session, so its
    // leases and claims never happened.
    dropStatements();
    m_db.close();
    if (!connect(error))
        return false;
    m_connectionSuspect = false;
    qCInfo(lcDatabase).noquote() << "reconnected to" << m_location.displayName();
    return true;
}

void Database::noteFailure(const QSqlError &failure)
{
    m_lastFailure = classifyStoreFailure(isPostgres(), failure.nativeErrorCode());
    if (isPostgres())
        m_connectionSuspect = true;
}

bool Database::readSchemaVersion(int *version, QString *error)
{
    QSqlQuery query(m_db);
    const QString exists = isPostgres()
                               ? QStringLiteral("SELECT to_regclass('schema_version') IS NOT NULL")
                               : QStringLiteral("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    const bool known = query.exec(exists) && query.next();
    const bool present = known && query.value(0).toBool();
    if (known && present)
        query.exec(QStringLiteral("SELECT version FROM schema_version"));
    if (!known || (present && !query.isActive())) {
        noteFailure(query.lastError());
        *error = QStringLiteral("cannot read the store %1: %2").arg(m_location.displayName(), query.lastError().text());
        return false;
    }
    *version = present && query.next() ? query.value(0).toInt() : 0;
    return true;
}

// Writes only to upgrade: opening a store that is up to date writes nothing, so two
// processes opening it together never wait for each other here, and a store on a
// read-only disk opens at all.
bool Database::migrate(QString *error)
{
    int version = 0;
    if (!readSchemaVersion(&version, error))
        return false;
    const auto newer = [&] {
        *error = QStringLiteral("the store %1 has schema version %2, newer than this program knows (%3): "
                                "upgrade once before using this store")
                     .arg(m_location.displayName(), QString::number(version), QString::number(LatestVersion));
        return false;
    };
    if (version > LatestVersion)
        return newer();
    if (version == LatestVersion) {
        m_schemaVersion = version;
        return true;
    }
    if (isReadOnly()) {
        m_lastFailure = StoreFailure::Permanent;
        // Upgrading is writing: say so rather than migrate behind the back of a read-only open.
        *error = version == 0 ? QStringLiteral("%1 is not a once store (once init creates one)").arg(m_location.displayName())
                              : QStringLiteral("the store %1 has schema version %2, older than this program's (%3), and "
                                               "cannot be upgraded while open read-only (%4): once init upgrades it")
                                    .arg(m_location.displayName(), QString::number(version),
                                         QString::number(LatestVersion), m_readOnlyReason);
        return false;
    }
    Transaction transaction(*this);
    if (!transaction.begin(error))
        return false;
    if (isPostgres() && !exec(QStringLiteral("SELECT pg_advisory_xact_lock(%1)").arg(SchemaLockId), error))
        return false;
    if (!exec(QStringLiteral("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"), error))
        return false;
    // Another process may have upgraded it while this one waited for the lock.
    if (!readSchemaVersion(&version, error))
        return false;
    if (version > LatestVersion)
        return newer();
    const bool upgrading = version < LatestVersion;
    for (; version < LatestVersion; ++version) {
        for (const QString &statement : migrationStatements(version, isPostgres())) {
            if (!exec(statement, error))
                return false;
        }
        qCDebug(lcDatabase) << "store upgraded to schema version" << version + 1;
    }
    if (upgrading
        && (!exec(QStringLiteral("DELETE FROM schema_version"), error)
            || !exec(QStringLiteral("INSERT INTO schema_version (version) VALUES (%1)").arg(LatestVersion), error)))
        return false;
    m_schemaVersion = LatestVersion;
    return transaction.commit(error);
}

bool Database::notify(const QString &channel, QString *error)
{
    if (!isPostgres())
        return true;
    auto &query = prepared(QStringLiteral("SELECT pg_notify(?, '')"));
    query.addBindValue(channel);
    const bool ok = exec(query, error);
    query.finish();
    return ok;
}

bool Database::listen(const QString &channel)
{
    if (!isPostgres())
        return false;
    if (!m_channels.contains(channel))
        m_channels.append(channel);
    return m_db.driver()->subscribeToNotification(channel);
}

QSqlQuery &Database::prepared(const QString &sql)
{
    // No session (a reconnect failed; the next transaction tries again): a statement that
    // exec() fails at once, rather than one Qt warns about and this cache keeps unprepared.
    if (isPostgres() && !m_db.isOpen()) {
        m_unconnected = std::make_unique<QSqlQuery>(m_db);
        return *m_unconnected;
    }
    auto &slot = m_statements[sql];
    if (!slot) {
        slot = std::make_unique<QSqlQuery>(m_db);
        slot->setForwardOnly(true);
        if (!slot->prepare(sql)) {
            noteFailure(slot->lastError());
            // A lost connection is said once by whoever runs the statement (the engine:
            // "lost the store"), not here for every statement of the dead session.
            if (m_lastFailure != StoreFailure::ConnectionLost)
                qCWarning(lcDatabase).noquote() << "cannot prepare" << sql.simplified().left(120)
                                                << slot->lastError().text();
        }
    }
    return *slot;
}

QString Database::repeatRows(const QString &row, qsizetype rows)
{
    return QStringList(rows, row).join(QStringLiteral(", "));
}

bool Database::exec(QSqlQuery &query, QString *error)
{
    if (isPostgres() && !m_db.isOpen()) {
        m_lastFailure = StoreFailure::ConnectionLost;
        m_connectionSuspect = true;
        if (error)
            *error = QStringLiteral("no connection to the store");
        return false;
    }
    if (query.exec())
        return true;
    noteFailure(query.lastError());
    if (error)
        *error = query.lastError().text();
    return false;
}

namespace {

// Qt's SQLite driver binds a null string or byte array as NULL (QSqlResultPrivate::
// isVariantNull); so does this.
bool isNullValue(const QVariant &value)
{
    if (value.isNull())
        return true;
    switch (value.typeId()) {
    case QMetaType::QString:
        return static_cast<const QString *>(value.constData())->isNull();
    case QMetaType::QByteArray:
        return static_cast<const QByteArray *>(value.constData())->isNull();
    default:
        return false;
    }
}

// The values as Qt's SQLite driver binds them (text as UTF-16, bytes as a blob), so that
// what is stored is the same byte for byte. The values outlive the statement's step.
int bindValues(sqlite3_stmt *statement, const QVariantList &values)
{
    for (int i = 0; i < values.size(); ++i) {
        const QVariant &value = values.at(i);
        const int position = i + 1;
        int rc = SQLITE_OK;
        if (isNullValue(value)) {
            rc = sqlite3_bind_null(statement, position);
        } else {
            switch (value.typeId()) {
            case QMetaType::QString: {
                const auto *text = static_cast<const QString *>(value.constData());
                rc = sqlite3_bind_text16(statement, position, text->utf16(), int(text->size() * sizeof(QChar)),
                                         SQLITE_STATIC);
                break;
            }
            case QMetaType::QByteArray: {
                const auto *bytes = static_cast<const QByteArray *>(value.constData());
                rc = sqlite3_bind_blob(statement, position, bytes->constData(), int(bytes->size()), SQLITE_STATIC);
                break;
            }
            case QMetaType::Bool:
            case QMetaType::Int:
                rc = sqlite3_bind_int(statement, position, value.toInt());
                break;
            case QMetaType::UInt:
            case QMetaType::Long:
            case QMetaType::ULong:
            case QMetaType::LongLong:
            case QMetaType::ULongLong:
                rc = sqlite3_bind_int64(statement, position, value.toLongLong());
                break;
            case QMetaType::Double:
                rc = sqlite3_bind_double(statement, position, value.toDouble());
                break;
            default: {
                const QString text = value.toString();
                rc = sqlite3_bind_text16(statement, position, text.utf16(), int(text.size() * sizeof(QChar)),
                                         SQLITE_TRANSIENT);
                break;
            }
            }
        }
        if (rc != SQLITE_OK)
            return rc;
    }
    return SQLITE_OK;
}

} // namespace

bool Database::execWith(QSqlQuery &query, const QVariantList &values, QString *error, QStringList *firstColumn)
{
    sqlite3_stmt *statement = nullptr;
    if (!isPostgres() && query.result()) {
        const QVariant handle = query.result()->handle();
        if (handle.isValid() && qstrcmp(handle.typeName(), "sqlite3_stmt*") == 0)
            statement = *static_cast<sqlite3_stmt *const *>(handle.constData());
    }
    if (!statement || sqlite3_bind_parameter_count(statement) != values.size()) {
        // PostgreSQL, or a statement that did not prepare: Qt's way, and its error.
        for (const auto &value : values)
            query.addBindValue(value);
        if (!exec(query, error))
            return false;
        while (firstColumn && query.next())
            firstColumn->append(query.value(0).toString());
        query.finish();
        return true;
    }
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
    int rc = bindValues(statement, values);
    if (rc == SQLITE_OK) {
        while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
            if (firstColumn)
                firstColumn->append(QString(static_cast<const QChar *>(sqlite3_column_text16(statement, 0)),
                                            sqlite3_column_bytes16(statement, 0) / int(sizeof(QChar))));
        }
    }
    // The same error as Qt's driver gives for a failed step, read before the reset.
    const QSqlError failure = rc == SQLITE_DONE
                                  ? QSqlError()
                                  : QSqlError(QStringLiteral("Unable to fetch row"),
                                              QString::fromUtf8(sqlite3_errmsg(sqlite3_db_handle(statement))),
                                              QSqlError::ConnectionError, QString::number(rc));
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement); // the values bound in place go away with the caller's list
    if (rc == SQLITE_DONE)
        return true;
    noteFailure(failure);
    if (error)
        *error = failure.text();
    return false;
}

bool Database::exec(const QString &sql, QString *error)
{
    if (isPostgres() && !m_db.isOpen()) {
        QSqlQuery none(m_db);
        return exec(none, error); // says why, without Qt's warning
    }
    QSqlQuery query(m_db);
    if (query.exec(sql))
        return true;
    noteFailure(query.lastError());
    if (error)
        *error = QStringLiteral("%1 (in: %2)").arg(query.lastError().text(), sql.simplified().left(80));
    return false;
}

bool Database::begin(QString *error, CommitWait wait)
{
    if (m_transactionDepth > 0) {
        ++m_transactionDepth;
        return true;
    }
    if (!ensureConnected(error))
        return false;
    // SQLite: take the write lock at BEGIN. PostgreSQL: READ COMMITTED, where row locks
    // (SKIP LOCKED leases, FOR UPDATE on a taken key) and the unique send key do the work.
    // The setting goes with the BEGIN: a round trip of its own cost the server 55 us, on
    // every turn of a worker.
    QString sql = isPostgres() ? QStringLiteral("BEGIN") : QStringLiteral("BEGIN IMMEDIATE");
    if (isPostgres() && wait == CommitWait::Unflushed)
        sql += QStringLiteral("; SET LOCAL synchronous_commit = off");
    if (!exec(sql, error))
        return false;
    m_transactionDepth = 1;
    m_rollbackOnly = false;
    return true;
}

bool Database::commit(QString *error)
{
    if (m_transactionDepth > 1) {
        --m_transactionDepth;
        return true;
    }
    m_transactionDepth = 0;
    if (m_rollbackOnly) {
        exec(QStringLiteral("ROLLBACK"), nullptr);
        if (error)
            *error = QStringLiteral("an inner step failed; the whole transaction was rolled back");
        return false;
    }
    if (exec(QStringLiteral("COMMIT"), error))
        return true;
    exec(QStringLiteral("ROLLBACK"), nullptr);
    return false;
}

bool Database::commitAndBegin(QString *error)
{
    // SQLite runs the first statement of a string only.
    if (m_transactionDepth != 1 || m_rollbackOnly || !isPostgres())
        return commit(error) && begin(error);
    // A COMMIT that fails ends the string there, its transaction rolled back.
    if (exec(QStringLiteral("COMMIT; BEGIN"), error))
        return true;
    m_transactionDepth = 0;
    exec(QStringLiteral("ROLLBACK"), nullptr);
    return false;
}

void Database::rollback()
{
    if (m_transactionDepth > 1) {
        --m_transactionDepth;
        m_rollbackOnly = true;
        return;
    }
    m_transactionDepth = 0;
    exec(QStringLiteral("ROLLBACK"), nullptr);
}

} // namespace once
