#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QVariant>

namespace once {

class Database;

// The rows of one multi-row statement, written the way the store's dialect takes them
// best, as a table "v" with columns column1, column2, ...:
//
// - SQLite: "(VALUES (?, ?), (?, ?)) AS v", a parameter per value, a few rows per
//   statement (see Database::repeatRows);
// - PostgreSQL: "unnest(CAST(? AS TEXT[]), CAST(? AS BIGINT[])) AS v(column1, column2)",
//   one array parameter per column and the whole batch in one statement. Qt's driver
//   sends parameters as an EXECUTE of literals, and the server plans every one of them
//   as an expression: with a parameter per value that was a third of its time per turn.
class RowBatch final
{
public:
    // The SQL type of each column, e.g. {"TEXT", "BIGINT", "BYTEA"}.
    RowBatch(const Database &db, QStringList columnTypes);

    // Rows the next statement carries, from start, at most the rest of total.
    qsizetype rowsFrom(qsizetype start, qsizetype total) const;
    void clear();
    // One value of the current row, column by column; a null QVariant is NULL.
    void add(const QVariant &value);

    // The statement's source of rows, for a FROM clause, and the values it takes
    // (Database::execWith binds them).
    QString source() const;
    QVariantList parameters() const;

private:
    const Database &m_db;
    QStringList m_types;
    QVariantList m_values; // row-major
};

} // namespace once
