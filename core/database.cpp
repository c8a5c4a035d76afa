#include "database.h"

#include <QAtomicInteger>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QLoggingCategory>
#include <QSqlDriver>
#include <QSqlError>
#include <QStandardPaths>
#include <QThread>

#include <sqlite3.h>

#include <chrono>
#include <thread>

Q_LOGGING_CATEGORY(lcDatabase, "once.core.database")

namespace once {

namespace {

// Each entry upgrades the schema by one version. Never edit a shipped entry: add one.
const char *const SqliteMigrations[] = {
    // 1: queue, ledger, history, dead letters, audit log. The ledger's indexes are single
    // columns on purpose: every entry also holds the rowid, which is the event list's
    // newest-first order, so "WHERE user_id = ? ORDER BY rowid DESC" needs no sort, and
    // each claim pays for as few and as narrow B-trees as the console's searches allow.
    R"sql(
CREATE TABLE queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    payload BLOB NOT NULL,
    send_key TEXT,
    event_id TEXT,
    enqueued_at INTEGER NOT NULL,
    visible_at INTEGER NOT NULL,
    lease_owner TEXT,
    receive_count INTEGER NOT NULL DEFAULT 0,
    redrive_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX queue_visible ON queue(visible_at);
CREATE TABLE ledger (
    send_key TEXT PRIMARY KEY,
    event_id TEXT,
    user_id TEXT NOT NULL,
    reminder_id TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    destination TEXT NOT NULL,
    channel TEXT,
    payload BLOB NOT NULL,
    state TEXT NOT NULL,
    owner_message TEXT,
    owner_delivery INTEGER,
    owner_worker TEXT,
    claim_expires_at INTEGER,
    sends INTEGER NOT NULL DEFAULT 0,
    round_sends INTEGER NOT NULL DEFAULT 0,
    duplicates INTEGER NOT NULL DEFAULT 0,
    redrives INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    first_sent_at INTEGER,
    applied_at INTEGER,
    last_http_status INTEGER,
    last_error_class TEXT,
    last_error TEXT,
    provider_request_id TEXT
);
CREATE INDEX ledger_user ON ledger(user_id);
CREATE INDEX ledger_state ON ledger(state);
CREATE INDEX ledger_event ON ledger(event_id);
CREATE INDEX ledger_destination ON ledger(destination);
CREATE INDEX ledger_reminder ON ledger(reminder_id);
CREATE TABLE attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    send_key TEXT,
    event_id TEXT,
    message_id TEXT,
    delivery INTEGER,
    worker_id TEXT,
    at INTEGER NOT NULL,
    step TEXT NOT NULL,
    outcome TEXT NOT NULL,
    http_status INTEGER,
    latency_ms INTEGER,
    error_class TEXT,
    error TEXT,
    provider_request_id TEXT
);
CREATE INDEX attempts_key ON attempts(send_key, id);
CREATE INDEX attempts_at ON attempts(at);
CREATE TABLE dead_letters (
    id TEXT PRIMARY KEY,
    payload BLOB NOT NULL,
    send_key TEXT,
    event_id TEXT,
    error_class TEXT NOT NULL,
    last_error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    first_attempt_at INTEGER,
    last_attempt_at INTEGER,
    dead_at INTEGER NOT NULL,
    enqueued_at INTEGER,
    receive_count INTEGER NOT NULL DEFAULT 0,
    redrive_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX dead_letters_class ON dead_letters(error_class, dead_at);
CREATE INDEX dead_letters_dead_at ON dead_letters(dead_at);
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT,
    count INTEGER NOT NULL DEFAULT 0
);
)sql",
    // 2: queue samples for the console's charts, written by every worker
    R"sql(
CREATE TABLE queue_samples (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    at INTEGER NOT NULL,
    ready INTEGER NOT NULL,
    in_flight INTEGER NOT NULL,
    delayed INTEGER NOT NULL,
    dead INTEGER NOT NULL,
    oldest_ready_age_ms INTEGER
);
CREATE INDEX queue_samples_at ON queue_samples(at);
)sql",
};

constexpr int LatestVersion = int(std::size(SqliteMigrations));

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

} // namespace

qint64 nowMs()
{
    return QDateTime::currentMSecsSinceEpoch();
}

std::optional<StoreLocation> StoreLocation::parse(const QString &text, QString *error)
{
    StoreLocation location;
    if (text.startsWith(QLatin1String("postgres://")) || text.startsWith(QLatin1String("postgresql://"))) {
        *error = QStringLiteral("PostgreSQL stores are not supported by this build yet; use a SQLite file");
        return std::nullopt;
    }
    QString path = text;
    if (path.startsWith(QLatin1String("sqlite:")))
        path = path.mid(int(qstrlen("sqlite:")));
    if (path.isEmpty()) {
        *error = QStringLiteral("the store path is empty");
        return std::nullopt;
    }
    if (path.contains(QLatin1String("://"))) {
        *error = QStringLiteral("unknown store URL scheme in \"%1\" (use sqlite:PATH)").arg(text.section(QLatin1Char(':'), 0, 0));
        return std::nullopt;
    }
    location.path = QFileInfo(path).absoluteFilePath();
    return location;
}

QString StoreLocation::displayName() const
{
    return QStringLiteral("sqlite:") + path;
}

QString defaultStoreUrl()
{
    const QString fromEnvironment = qEnvironmentVariable("ONCE_STORE");
    if (!fromEnvironment.isEmpty())
        return fromEnvironment;
    // Not AppDataLocation: that differs between `once` and `once-console`, and both must
    // find the same store.
    return QStandardPaths::writableLocation(QStandardPaths::GenericDataLocation) + QStringLiteral("/once/once.sqlite");
}

Database::~Database()
{
    m_statements.clear();
    m_db.close();
    m_db = QSqlDatabase();
    QSqlDatabase::removeDatabase(m_connectionName);
}

std::unique_ptr<Database> Database::open(const StoreLocation &location, QString *error)
{
    static QAtomicInteger<quint64> counter;
    std::unique_ptr<Database> db(new Database);
    db->m_location = location;
    db->m_connectionName = QStringLiteral("once-%1").arg(counter.fetchAndAddRelaxed(1));
    const QFileInfo file(location.path);
    if (!QDir().mkpath(file.absolutePath())) {
        *error = QStringLiteral("cannot create the folder %1").arg(file.absolutePath());
        return nullptr;
    }
    db->m_db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), db->m_connectionName);
    db->m_db.setDatabaseName(location.path);
    if (!db->m_db.open()) {
        *error = QStringLiteral("cannot open the store %1: %2").arg(location.displayName(), db->m_db.lastError().text());
        return nullptr;
    }
    const QVariant handle = db->m_db.driver()->handle();
    if (handle.isValid() && qstrcmp(handle.typeName(), "sqlite3*") == 0) {
        if (auto *connection = *static_cast<sqlite3 *const *>(handle.constData()))
            sqlite3_busy_handler(connection, retryWhileBusy, nullptr);
    }
    // WAL lets readers (the console, `once stats`) run beside a writing worker;
    // synchronous=FULL makes every commit, and so every claim, durable before the
    // partner is called.
    // A larger page cache and memory-mapped reads keep a busy worker from paying a
    // system call for every page it touches.
    for (const auto pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=OFF",
                              "PRAGMA cache_size=-65536", "PRAGMA mmap_size=1073741824"}) {
        if (!db->exec(QString::fromLatin1(pragma), error))
            return nullptr;
    }
    if (!db->migrate(error))
        return nullptr;
    return db;
}

bool Database::migrate(QString *error)
{
    if (!exec(QStringLiteral("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"), error))
        return false;
    Transaction transaction(*this);
    if (!transaction.begin(error))
        return false;
    QSqlQuery query(m_db);
    if (!query.exec(QStringLiteral("SELECT version FROM schema_version"))) {
        *error = query.lastError().text();
        return false;
    }
    int version = query.next() ? query.value(0).toInt() : 0;
    query.finish();
    if (version > LatestVersion) {
        *error = QStringLiteral("the store %1 has schema version %2, newer than this program knows (%3): "
                                "upgrade once before using this store")
                     .arg(m_location.displayName())
                     .arg(version)
                     .arg(LatestVersion);
        return false;
    }
    for (; version < LatestVersion; ++version) {
        const auto statements = QString::fromLatin1(SqliteMigrations[version]).split(QLatin1Char(';'), Qt::SkipEmptyParts);
        for (const auto &statement : statements) {
            if (statement.trimmed().isEmpty())
                continue;
            if (!exec(statement, error))
                return false;
        }
        qCDebug(lcDatabase) << "store upgraded to schema version" << version + 1;
    }
    if (!exec(QStringLiteral("DELETE FROM schema_version"), error)
        || !exec(QStringLiteral("INSERT INTO schema_version (version) VALUES (%1)").arg(LatestVersion), error))
        return false;
    m_schemaVersion = LatestVersion;
    return transaction.commit(error);
}

QSqlQuery &Database::prepared(const QString &sql)
{
    auto &slot = m_statements[sql];
    if (!slot) {
        slot = std::make_unique<QSqlQuery>(m_db);
        slot->setForwardOnly(true);
        if (!slot->prepare(sql))
            qCWarning(lcDatabase) << "cannot prepare" << sql << slot->lastError().text();
    }
    return *slot;
}

QString Database::repeatRows(const QString &row, qsizetype rows)
{
    return QStringList(rows, row).join(QStringLiteral(", "));
}

bool Database::exec(QSqlQuery &query, QString *error)
{
    if (query.exec())
        return true;
    if (error)
        *error = query.lastError().text();
    return false;
}

bool Database::exec(const QString &sql, QString *error)
{
    QSqlQuery query(m_db);
    if (query.exec(sql))
        return true;
    if (error)
        *error = QStringLiteral("%1 (in: %2)").arg(query.lastError().text(), sql.simplified().left(80));
    return false;
}

bool Database::begin(QString *error)
{
    if (m_transactionDepth > 0) {
        ++m_transactionDepth;
        return true;
    }
    if (!exec(QStringLiteral("BEGIN IMMEDIATE"), error))
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
