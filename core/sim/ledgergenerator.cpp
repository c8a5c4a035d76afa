#include "sim/ledgergenerator.h"

#include "model/clock.h"
#include "model/reminder.h"
#include "sim/generatedrows.h"
#include "store/database.h"

#include <QLocale>
#include <QSqlError>
#include <QSqlQuery>
#include <QVariant>

#include <algorithm>

namespace once {

namespace {

constexpr qint64 DayMs = 24LL * 3600 * 1000;
// Events a step: each is staged, then made into rows, in one transaction.
constexpr qint64 ChunkEvents = 500'000;

const QString PartnerUrl = QStringLiteral("https://partner.example.com/v1/reminders");

// The tables the generator fills, whose secondary indexes it builds after the rows.
const QStringList FilledTables = {QStringLiteral("ledger"), QStringLiteral("attempts"), QStringLiteral("dead_letters"),
                                  QStringLiteral("queue"), QStringLiteral("queue_samples")};

} // namespace

QString LedgerShape::problem() const
{
    if (dead < 0 || inDoubt < 0 || retrying < 0 || claimed < 0 || queued < 0 || users < 0)
        return QStringLiteral("counts cannot be negative");
    // Ids and hashes multiply the event's number by constants below 2^31 (generatedrows.cpp).
    if (events < 1 || events + queued > 1'000'000'000)
        return QStringLiteral("the number of events must be between 1 and 1,000,000,000");
    if (retrying + claimed > events || dead + inDoubt > events - retrying - claimed)
        return QStringLiteral("dead, in doubt, retrying and claimed events add up to more than the events");
    // users * x^2 must fit in 64 bits (generatedrows.cpp, UserDrawBits).
    if (users > (1LL << 23) || (users == 0 && events / 20 > (1LL << 23)))
        return QStringLiteral("at most 8,388,608 users");
    if (days < 1)
        return QStringLiteral("the events must span at least a day");
    return {};
}

LedgerGenerator::LedgerGenerator(Database &db, const LedgerShape &shape) : m_db(db), m_shape(shape)
{
    if (m_shape.users == 0)
        m_shape.users = std::max<qint64>(1, m_shape.events / 20);
    if (m_shape.endMs == 0)
        m_shape.endMs = nowMs();
}

bool LedgerGenerator::fill(QString *error, const Progress &progress)
{
    if (const QString problem = m_shape.problem(); !problem.isEmpty()) {
        *error = problem;
        return false;
    }
    const auto step = [&progress](const QString &what) {
        if (progress)
            progress(what);
    };
    if (!isEmpty(error))
        return false;
    step(QStringLiteral("preparing the store for a bulk load"));
    if (!prepareForLoad(error) || !dropIndexes(error))
        return false;
    const GeneratedRows rows(m_db.isPostgres(), m_shape);
    const QLocale locale = QLocale::c();
    for (qint64 first = 0; first < m_shape.events; first += ChunkEvents) {
        const qint64 last = std::min(first + ChunkEvents, m_shape.events) - 1;
        step(QStringLiteral("events %1 to %2 of %3, their history, dead letters and messages")
                 .arg(locale.toString(first), locale.toString(last), locale.toString(m_shape.events)));
        if (!inTransaction({rows.stage(first, last), rows.ledgerRows(), rows.sendRows(), rows.retryRows(),
                            rows.duplicateRows(), rows.closingRows(), rows.deadLetters(), rows.messagesInFlight(),
                            rows.dropStaged()},
                           error))
            return false;
    }
    step(QStringLiteral("messages not claimed yet, workers, queue samples"));
    if (m_shape.queued > 0
        && !inTransaction({rows.stage(m_shape.events, m_shape.events + m_shape.queued - 1), rows.messagesWaiting(),
                           rows.dropStaged()},
                          error))
        return false;
    // PostgreSQL's identity does not follow the ids given to it: it starts after them.
    if (m_db.isPostgres()
        && !exec(QStringLiteral("SELECT setval(pg_get_serial_sequence('queue', 'id'), "
                                "(SELECT COALESCE(MAX(id), 0) + 1 FROM queue), false)"),
                 error))
        return false;
    if (!insertWorkers(error) || !inTransaction({rows.queueSamples()}, error) || !rebuildIndexes(error, progress))
        return false;
    step(m_db.isPostgres() ? QStringLiteral("VACUUM ANALYZE, as autovacuum would have by now")
                           : QStringLiteral("back to WAL"));
    if (!finishLoad(error))
        return false;
    step(QStringLiteral("checking send keys against makeSendKey"));
    return checkSendKeys(error);
}

bool LedgerGenerator::inTransaction(const QStringList &statements, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return false;
    for (const QString &statement : statements) {
        if (!exec(statement, error))
            return false;
    }
    return transaction.commit(error);
}

bool LedgerGenerator::exec(const QString &sql, QString *error)
{
    QSqlQuery query(m_db.connection());
    if (query.exec(sql))
        return true;
    *error = QStringLiteral("%1 (in: %2)").arg(query.lastError().text(), sql.simplified().left(200));
    return false;
}

bool LedgerGenerator::isEmpty(QString *error)
{
    QSqlQuery query(m_db.connection());
    if (!query.exec(QStringLiteral("SELECT (SELECT COUNT(*) FROM ledger) + (SELECT COUNT(*) FROM queue) + "
                                   "(SELECT COUNT(*) FROM attempts) + (SELECT COUNT(*) FROM dead_letters)"))
        || !query.next()) {
        *error = query.lastError().text();
        return false;
    }
    if (query.value(0).toLongLong() == 0)
        return true;
    *error = QStringLiteral("the store %1 already holds events or messages: the generator fills only a new store")
                 .arg(m_db.location().displayName());
    return false;
}

// Nothing here has to survive a crash: a store half generated is thrown away. So no
// journal of the load's pages (SQLite journals only pages that existed before, and a new
// store has none), no fsync, and a page cache that holds the send key index, whose keys
// arrive in random order.
bool LedgerGenerator::prepareForLoad(QString *error)
{
    if (m_db.isPostgres())
        return exec(QStringLiteral("SET synchronous_commit = off"), error)
               && exec(QStringLiteral("SET maintenance_work_mem = '512MB'"), error)
               && exec(QStringLiteral("SET work_mem = '64MB'"), error)
               && exec(QStringLiteral("SET temp_buffers = '256MB'"), error);
    return exec(QStringLiteral("PRAGMA journal_mode = DELETE"), error) && exec(QStringLiteral("PRAGMA synchronous = OFF"), error)
           && exec(QStringLiteral("PRAGMA cache_size = -1048576"), error) && exec(QStringLiteral("PRAGMA temp_store = MEMORY"), error)
           && exec(QStringLiteral("PRAGMA threads = 2"), error);
}

// The secondary indexes as the migrations made them, kept to be built again by
// rebuildIndexes(). On PostgreSQL the ledger's primary key goes too (its keys arrive in
// random order); SQLite cannot drop one.
bool LedgerGenerator::dropIndexes(QString *error)
{
    QSqlQuery query(m_db.connection());
    QStringList names;
    const QString tables = QStringLiteral("'") + FilledTables.join(QLatin1String("', '")) + QStringLiteral("'");
    const QString sql =
        m_db.isPostgres()
            ? QStringLiteral("SELECT indexname, indexdef FROM pg_indexes i WHERE schemaname = current_schema() AND "
                             "tablename IN (%1) AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = "
                             "format('%I.%I', i.schemaname, i.indexname)::regclass) ORDER BY indexname")
                  .arg(tables)
            : QStringLiteral("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND "
                             "tbl_name IN (%1) ORDER BY name")
                  .arg(tables);
    if (!query.exec(sql)) {
        *error = query.lastError().text();
        return false;
    }
    while (query.next()) {
        names << query.value(0).toString();
        m_indexes << query.value(1).toString();
    }
    query.finish();
    if (m_db.isPostgres()) {
        if (!query.exec(QStringLiteral("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE "
                                       "conrelid = 'ledger'::regclass AND contype = 'p'"))) {
            *error = query.lastError().text();
            return false;
        }
        while (query.next()) {
            const QString name = query.value(0).toString();
            m_constraints << QStringLiteral("ALTER TABLE ledger ADD CONSTRAINT %1 %2").arg(name, query.value(1).toString());
            if (!exec(QStringLiteral("ALTER TABLE ledger DROP CONSTRAINT %1").arg(name), error))
                return false;
        }
    }
    for (const QString &name : std::as_const(names)) {
        if (!exec(QStringLiteral("DROP INDEX %1").arg(name), error))
            return false;
    }
    return true;
}

bool LedgerGenerator::rebuildIndexes(QString *error, const Progress &progress)
{
    for (const QString &statement : m_constraints + m_indexes) {
        if (progress)
            progress(statement.simplified().left(100));
        if (!exec(statement, error))
            return false;
    }
    return true;
}

bool LedgerGenerator::finishLoad(QString *error)
{
    if (m_db.isPostgres()) {
        for (const QString &table : FilledTables) {
            if (!exec(QStringLiteral("VACUUM (ANALYZE) %1").arg(table), error))
                return false;
        }
        return true;
    }
    // The store's own settings, as Database::connect() makes them.
    return exec(QStringLiteral("PRAGMA cache_size = -65536"), error) && exec(QStringLiteral("PRAGMA journal_mode = WAL"), error)
           && exec(QStringLiteral("PRAGMA synchronous = FULL"), error);
}

// The workers that did all this (stopped now) and the partner they sent to.
bool LedgerGenerator::insertWorkers(QString *error)
{
    QSqlQuery worker(m_db.connection());
    worker.prepare(QStringLiteral(
        "INSERT INTO workers (id, host, pid, version, partner, concurrency, state, started_at, heartbeat_at, "
        "stopped_at, applied, duplicates, retries, dead_lettered, held) VALUES (?, ?, ?, ?, ?, 16, 'stopped', ?, ?, ?, "
        "?, ?, ?, ?, ?)"));
    const QStringList ids = GeneratedRows::workers();
    const qint64 workers = ids.size();
    const qint64 startedAt = m_shape.endMs - m_shape.days * DayMs - 60000;
    for (const QString &id : ids) {
        for (const QVariant &value :
             {QVariant(id), QVariant(id.section(QLatin1Char(':'), 0, 0)), QVariant(id.section(QLatin1Char(':'), 1).toLongLong()),
              QVariant(QStringLiteral(ONCE_VERSION)), QVariant(PartnerUrl), QVariant(startedAt), QVariant(m_shape.endMs),
              QVariant(m_shape.endMs), QVariant(m_shape.events / workers), QVariant(m_shape.events / 20 / workers),
              QVariant(m_shape.events / 50 / workers), QVariant(m_shape.dead / workers), QVariant(m_shape.inDoubt / workers)})
            worker.addBindValue(value);
        if (!worker.exec()) {
            *error = worker.lastError().text();
            return false;
        }
    }
    QSqlQuery partner(m_db.connection());
    partner.prepare(QStringLiteral("INSERT INTO partners (url, honours_key, set_by, set_at) VALUES (?, 'yes', ?, ?)"));
    partner.addBindValue(PartnerUrl);
    partner.addBindValue(QStringLiteral("ops@example.com"));
    partner.addBindValue(startedAt);
    if (!partner.exec()) {
        *error = partner.lastError().text();
        return false;
    }
    return true;
}

// A sample of events, spread over the ledger: each payload, read as a worker reads it,
// must give the send key and event id its row has.
bool LedgerGenerator::checkSendKeys(QString *error)
{
    constexpr qint64 Samples = 64;
    QStringList ordinals;
    for (qint64 i = 0; i < Samples; ++i)
        ordinals << QString::number(1 + i * m_shape.events / Samples);
    ordinals.removeDuplicates();
    QSqlQuery query(m_db.connection());
    if (!query.exec(QStringLiteral("SELECT send_key, event_id, payload FROM ledger WHERE %1 IN (%2)")
                        .arg(m_db.isPostgres() ? QStringLiteral("seq") : QStringLiteral("rowid"),
                             ordinals.join(QLatin1String(", "))))) {
        *error = query.lastError().text();
        return false;
    }
    qint64 checked = 0;
    while (query.next()) {
        const QByteArray key = query.value(0).toString().toLatin1();
        const auto parsed = parseReminder(query.value(2).toByteArray());
        if (!parsed.reminder) {
            *error = QStringLiteral("the generated payload of %1 does not parse: %2").arg(QString::fromLatin1(key), parsed.error);
            return false;
        }
        if (parsed.reminder->sendKey != key || parsed.reminder->eventId != query.value(1).toString()) {
            *error = QStringLiteral("the generated send key %1 is not the product's %2")
                         .arg(QString::fromLatin1(key), QString::fromLatin1(parsed.reminder->sendKey));
            return false;
        }
        ++checked;
    }
    if (checked != ordinals.size()) {
        *error = QStringLiteral("found %1 of the %2 sampled events").arg(checked).arg(ordinals.size());
        return false;
    }
    return true;
}

} // namespace once
