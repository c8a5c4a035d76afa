#pragma once

#include "store/ledger.h"

#include <QAbstractTableModel>

namespace once::ui {

// One event's history, one row per row of the attempts table, oldest first, each with a
// sentence saying what happened.
class AttemptsModel final : public QAbstractTableModel
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(AttemptsModel)

public:
    enum Column
    {
        Time,
        Summary,
        Step,
        Outcome,
        MessageId,
        EventId, // each delivery's own: a duplicate's differs from the event's first
        Delivery,
        Worker,
        HttpStatus,
        Latency,
        ProviderRequestId,
        Error,
        Count
    };
    Q_ENUM(Column)
    enum Role
    {
        RawRole = Qt::UserRole + 1, // the unformatted value, for sorting and filtering
    };

    explicit AttemptsModel(QObject *parent = nullptr);
    ~AttemptsModel() override;

    // History only grows, so a reload that extends what is shown appends rows (keeping the
    // view's selection and scroll position); anything else starts over.
    void setAttempts(const QList<once::Attempt> &attempts);
    void clear();
    const QList<once::Attempt> &attempts() const { return m_attempts; }

    int rowCount(const QModelIndex &parent = QModelIndex()) const override;
    int columnCount(const QModelIndex &parent = QModelIndex()) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    QList<once::Attempt> m_attempts;
};

} // namespace once::ui
