#include "store/rowbatch.h"

#include "store/database.h"

namespace once {

namespace {

// One element of a PostgreSQL array literal: NULL, or the text in double quotes with
// backslashes and quotes escaped. Bytes go in as bytea's hex form.
void appendElement(QString *literal, const QVariant &value)
{
    if (value.isNull()) {
        literal->append(QLatin1String("NULL"));
        return;
    }
    const QString text = value.typeId() == QMetaType::QByteArray
                             ? QStringLiteral("\\x") + QString::fromLatin1(value.toByteArray().toHex())
                             : value.toString();
    literal->append(QLatin1Char('"'));
    for (const QChar c : text) {
        if (c == QLatin1Char('"') || c == QLatin1Char('\\'))
            literal->append(QLatin1Char('\\'));
        literal->append(c);
    }
    literal->append(QLatin1Char('"'));
}

} // namespace

RowBatch::RowBatch(const Database &db, QStringList columnTypes) : m_db(db), m_types(std::move(columnTypes)) {}

qsizetype RowBatch::rowsFrom(qsizetype start, qsizetype total) const
{
    // PostgreSQL: one statement for any number of rows; SQLite: chunks.
    constexpr qsizetype SqliteRows = 16;
    return std::min(m_db.isPostgres() ? total - start : SqliteRows, total - start);
}

void RowBatch::clear()
{
    m_values.clear();
}

void RowBatch::add(const QVariant &value)
{
    m_values.append(value);
}

QString RowBatch::source() const
{
    const qsizetype columns = m_types.size();
    QStringList parts;
    if (m_db.isPostgres()) {
        QStringList names;
        for (qsizetype c = 0; c < columns; ++c) {
            parts << QStringLiteral("CAST(? AS %1[])").arg(m_types.at(c));
            names << QStringLiteral("column%1").arg(c + 1);
        }
        return QStringLiteral("unnest(%1) AS v(%2)").arg(parts.join(QLatin1String(", ")), names.join(QLatin1String(", ")));
    }
    // SQLite stores what it is given; the values need no casts.
    for (qsizetype c = 0; c < columns; ++c)
        parts << QStringLiteral("?");
    const qsizetype rows = columns ? m_values.size() / columns : 0;
    return QStringLiteral("(VALUES %1) AS v")
        .arg(Database::repeatRows(QLatin1Char('(') + parts.join(QLatin1String(", ")) + QLatin1Char(')'), rows));
}

QVariantList RowBatch::parameters() const
{
    if (!m_db.isPostgres())
        return m_values;
    const qsizetype columns = m_types.size();
    QVariantList parameters;
    parameters.reserve(columns);
    for (qsizetype c = 0; c < columns; ++c) {
        QString literal = QStringLiteral("{");
        for (qsizetype i = c; i < m_values.size(); i += columns) {
            if (i > c)
                literal.append(QLatin1Char(','));
            appendElement(&literal, m_values.at(i));
        }
        literal.append(QLatin1Char('}'));
        parameters.append(literal);
    }
    return parameters;
}

} // namespace once
