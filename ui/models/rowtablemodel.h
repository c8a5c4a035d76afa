#pragma once

#include "display/humanunits.h"

#include <QAbstractTableModel>
#include <QDateTime>
#include <QList>
#include <QSet>

#include <type_traits>

namespace once::ui {

// A table model over a list of rows that have an identity. Pages reload every two
// seconds; replacing the rows with a model reset would drop the operator's selection and
// scroll position each time, so replaceRows() removes, inserts and updates only what changed.
template <typename Row> class RowTableModel : public QAbstractTableModel
{
public:
    using QAbstractTableModel::QAbstractTableModel;

    int rowCount(const QModelIndex &parent = {}) const override
    {
        return parent.isValid() ? 0 : int(m_rows.size());
    }

    const QList<Row> &rows() const { return m_rows; }
    const Row &row(int index) const { return m_rows.at(index); }

protected:
    // keyOf(row) gives the row's identity; same(a, b) tells whether two rows of one identity
    // show the same values. The result is exactly `rows`, in its order.
    template <typename KeyOf, typename Same> void replaceRows(const QList<Row> &rows, KeyOf keyOf, Same same)
    {
        using Key = std::decay_t<decltype(keyOf(rows.value(0)))>;
        QSet<Key> incoming;
        incoming.reserve(rows.size());
        for (const Row &row : rows)
            incoming.insert(keyOf(row));
        QSet<Key> remaining;
        remaining.reserve(m_rows.size());
        for (const Row &row : std::as_const(m_rows))
            remaining.insert(keyOf(row));

        // Invariant: m_rows[0, i) == rows[0, j).
        int i = 0;
        int j = 0;
        while (j < rows.size()) {
            if (i == m_rows.size()) {
                beginInsertRows({}, i, int(rows.size()) - 1);
                m_rows.append(rows.mid(j));
                endInsertRows();
                return;
            }
            const Key current = keyOf(m_rows.at(i));
            const Key wanted = keyOf(rows.at(j));
            if (current == wanted) {
                if (!same(m_rows.at(i), rows.at(j))) {
                    m_rows[i] = rows.at(j);
                    emit dataChanged(index(i, 0), index(i, columnCount() - 1));
                }
                remaining.remove(current);
                ++i;
                ++j;
            } else if (!incoming.contains(current) || remaining.contains(wanted)) {
                // Gone, or out of order (it comes back further down): remove the run of
                // such rows in one step.
                int last = i;
                remaining.remove(current);
                while (last + 1 < m_rows.size()) {
                    const Key next = keyOf(m_rows.at(last + 1));
                    if (incoming.contains(next))
                        break;
                    remaining.remove(next);
                    ++last;
                }
                beginRemoveRows({}, i, last);
                m_rows.remove(i, last - i + 1);
                endRemoveRows();
            } else {
                beginInsertRows({}, i, i);
                m_rows.insert(i, rows.at(j));
                endInsertRows();
                ++i;
                ++j;
            }
        }
        if (i < m_rows.size()) {
            beginRemoveRows({}, i, int(m_rows.size()) - 1);
            m_rows.remove(i, m_rows.size() - i);
            endRemoveRows();
        }
    }

    QList<Row> m_rows;
};

} // namespace once::ui
