#pragma once

#include "models/rowtablemodel.h"

#include "store/workerregistry.h"

namespace once::ui {

// Every worker registered on the store (WorkerRegistry), one per row, running ones
// first as the registry orders them. Each worker writes its own row: headless
// `once worker` processes anywhere, and this console's engine. Whether a worker is gone
// and how old its heartbeat is depend on the time of the reload, which setWorkers()
// takes with the rows, so data() stays a pure function of the model's state.
class WorkersModel final : public RowTableModel<once::WorkerRecord>
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(WorkersModel)

public:
    enum Column
    {
        Id,
        Host,
        Pid,
        Status,
        Started,
        Heartbeat,
        Applied,
        Duplicates,
        Retries,
        DeadLettered,
        InFlight,
        InDoubt, // what it does with a send left in doubt: resend or hold
        Partner,
        Count
    };
    Q_ENUM(Column)
    enum Role
    {
        RawRole = Qt::UserRole + 1, // the value as stored: status text, times in ms
        SortRole,                   // RawRole, except Status: live workers before stopped ones
    };

    explicit WorkersModel(QObject *parent = nullptr);

    int columnCount(const QModelIndex &parent = {}) const override { return parent.isValid() ? 0 : Count; }
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // The rows of one reload, read at nowMs. Rows still there stay in place (by worker
    // id), so selections and scroll positions survive the two-second reloads.
    void setWorkers(const QList<once::WorkerRecord> &workers, qint64 nowMs);
    // This console's own engine, whose id is shown in bold.
    void setOwnWorkerId(const QString &id);
    qint64 nowMs() const { return m_nowMs; }
    // running, paused, stopped or gone, at the time of the last reload.
    QString status(int row) const { return m_rows.at(row).status(m_nowMs); }

private:
    qint64 m_nowMs = 0;
    QString m_ownWorkerId;
};

} // namespace once::ui
