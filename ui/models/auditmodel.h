#pragma once

#include "operator/inspector.h"

#include <QAbstractTableModel>

namespace once::ui {

// The audit log, newest first: who did what to the store, when, to how many (the keys
// or the filter), at what rate and why. The number is the one each touched event's
// history names ("audit #17").
// Raw values under Qt::UserRole (for sorting and tests), formatting only in data().
class AuditModel final : public QAbstractTableModel
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(AuditModel)

public:
    enum Column
    {
        Number,
        When,
        Who,
        What,
        Detail,
        HowMany,
        Rate,
        Outcome, // a redrive's: delivered since, died again
        Reason,
        Count
    };
    Q_ENUM(Column)

    explicit AuditModel(QObject *parent = nullptr);

    // Keeps rows that are still there, so a periodic reload leaves selection and scroll alone.
    void setEntries(const QList<once::AuditEntry> &entries);
    const QList<once::AuditEntry> &entries() const { return m_entries; }
    const once::AuditEntry &entry(int row) const { return m_entries.at(row); }
    // The words an operator reads for an action name of the audit log.
    static QString describeAction(const QString &action);

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QList<once::AuditEntry> m_entries;
};

} // namespace once::ui
