#pragma once

#include "models/rowtablemodel.h"

#include "operator/inspector.h"

namespace once::ui {

// Events held in doubt (the partner may or may not have acted on them) as a table.
// Values are kept raw (RawRole) for sorting; only data() formats them for people.
class InDoubtModel final : public RowTableModel<once::EventRow>
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(InDoubtModel)

public:
    enum Column
    {
        SendKey,
        EventId,
        User,
        Reminder,
        Destination,
        Since,
        Sends,
        Reconciliation, // what the partner said when asked for the key, if it was
        Known, // what is known of the last send: who claimed it when, whether it went out
        Count
    };
    Q_ENUM(Column)
    enum Role
    {
        RawRole = Qt::UserRole + 1
    };

    explicit InDoubtModel(QObject *parent = nullptr);

    int columnCount(const QModelIndex &parent = {}) const override { return parent.isValid() ? 0 : Count; }
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Keeps rows that are still there in place (by send key), so selections survive a reload.
    void setEvents(const QList<once::EventRow> &events);
    const once::EventRow &event(int row) const { return m_rows.at(row); }
};

} // namespace once::ui
