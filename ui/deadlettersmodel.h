#pragma once

#include "rowtablemodel.h"

#include "operator/inspector.h"

#include <QMap>

namespace once::ui {

// The dead letters of a store as a table. Values are kept raw (RawRole) for sorting and
// filtering; only data() formats them for people.
class DeadLettersModel final : public RowTableModel<once::DeadLetter>
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(DeadLettersModel)

public:
    enum Column
    {
        ErrorClass,
        LastError,
        Attempts,
        Redrives,
        FirstAttempt,
        LastAttempt,
        DeadAt,
        SendKey,
        EventId,
        MessageId,
        Count
    };
    Q_ENUM(Column)
    enum Role
    {
        RawRole = Qt::UserRole + 1
    };

    explicit DeadLettersModel(QObject *parent = nullptr);

    int columnCount(const QModelIndex &parent = {}) const override { return parent.isValid() ? 0 : Count; }
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Keeps rows that are still there in place (by message id), so selections survive a reload.
    void setLetters(const QList<once::DeadLetter> &letters);
    const once::DeadLetter &letter(int row) const { return m_rows.at(row); }
    // How many letters of each error class are loaded, by class.
    QMap<QString, int> errorClassCounts() const;
};

} // namespace once::ui
