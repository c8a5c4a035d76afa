#pragma once

#include "models/rowtablemodel.h"

#include "alerting/incidents.h"

namespace once::ui {

// The store's incidents as a table, in the store's order: open ones first (newest first),
// then the latest resolved. Open ones are coloured by their severity; resolved ones read
// as history. Values are kept raw (RawRole) for sorting; only data() formats them.
class IncidentsModel final : public RowTableModel<once::Incident>
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(IncidentsModel)

public:
    enum Column
    {
        Id,
        Status, // open | acknowledged | resolved
        Severity,
        Rule,
        Partner,
        Started,
        Ended, // resolved at (and how long it lasted), or how long it has been open
        Summary,
        Count
    };
    Q_ENUM(Column)
    enum Role
    {
        RawRole = Qt::UserRole + 1,
        IdRole, // the incident's id, whatever the column
    };

    explicit IncidentsModel(QObject *parent = nullptr);

    int columnCount(const QModelIndex &parent = {}) const override { return parent.isValid() ? 0 : Count; }
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // Keeps rows that are still there in place (by id), so selections survive a reload.
    void setIncidents(const QList<once::Incident> &incidents, qint64 nowMs);
    // The row of an incident, or -1.
    int rowOf(qint64 id) const;
    static QString statusText(const once::Incident &incident);

private:
    qint64 m_nowMs = 0;
};

} // namespace once::ui
