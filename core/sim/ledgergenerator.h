#pragma once

#include <QString>
#include <QStringList>

#include <functional>

namespace once {

class Database;

// What a generated store holds. The defaults are a busy production store after a month:
// ten million events, a hundred thousand of them dead-lettered, ten thousand in doubt.
struct LedgerShape
{
    qint64 events = 10'000'000; // ledger rows
    qint64 dead = 100'000;      // of them dead-lettered, each with its dead letter
    qint64 inDoubt = 10'000;    // held for an operator
    qint64 retrying = 1'000;    // waiting in the queue for their next try (among the newest)
    qint64 claimed = 100;       // being sent right now (the newest)
    qint64 queued = 1'000;      // messages in the queue that no worker has claimed yet
    qint64 users = 0;           // 0: one for every twenty events
    int days = 30;              // how far back the events go
    qint64 endMs = 0;           // when the newest event was claimed; 0: now
    quint64 seed = 1;

    // Why these counts cannot be generated, or empty.
    QString problem() const;
};

// Fills a new store (SQLite or PostgreSQL, schema made by the migrations) with a ledger
// of the given shape, for the console's benchmark and its tests.
//
// The rows look like the engine's own: send keys as makeSendKey() makes them (the
// generator checks a sample with parseReminder()), payloads as producers send them, the
// history rows the engine writes for each outcome (sends, retries, duplicates suppressed,
// dead letters, holds and acks), dead letters with their errors, messages still in the
// queue, the workers and their queue samples. Users are scattered through the whole
// ledger, some much more often than others; events are spread over the last `days` days
// in claim order. The same shape and seed give the same store (GeneratedRows has the
// details).
//
// Every row is made inside the database (INSERT ... SELECT over a series of numbers), a
// chunk of events per transaction: bound value by value through Qt's driver, a row cost
// ten times as much. The secondary indexes are dropped first and built again at the end,
// which sorts once instead of inserting millions of keys in random order.
class LedgerGenerator final
{
public:
    // Called as each step starts, with what it does ("ledger: events 500,000 to 999,999").
    using Progress = std::function<void(const QString &step)>;

    LedgerGenerator(Database &db, const LedgerShape &shape);

    bool fill(QString *error, const Progress &progress = {});

private:
    bool isEmpty(QString *error);
    bool prepareForLoad(QString *error);
    bool dropIndexes(QString *error);
    bool inTransaction(const QStringList &statements, QString *error);
    bool insertWorkers(QString *error);
    bool rebuildIndexes(QString *error, const Progress &progress);
    bool finishLoad(QString *error);
    bool checkSendKeys(QString *error);
    bool exec(const QString &sql, QString *error);

    Database &m_db;
    LedgerShape m_shape;
    QStringList m_indexes;     // CREATE INDEX statements of the indexes dropped for the load
    QStringList m_constraints; // PostgreSQL: ALTER TABLE ... ADD CONSTRAINT for the keys dropped
};

} // namespace once
