#include "models/indoubtmodel.h"

#include <QLocale>

namespace once::ui {

namespace {

bool sameEvent(const EventRow &a, const EventRow &b)
{
    return a.eventId == b.eventId && a.userId == b.userId && a.reminderId == b.reminderId &&
           a.destination == b.destination && a.updatedAtMs == b.updatedAtMs &&
           a.firstSentAtMs == b.firstSentAtMs && a.sends == b.sends && a.state == b.state &&
           a.claimedBy == b.claimedBy && a.claimedAtMs == b.claimedAtMs &&
           a.claimExpiresAtMs == b.claimExpiresAtMs && a.reconciliation == b.reconciliation;
}

} // namespace

InDoubtModel::InDoubtModel(QObject *parent) : RowTableModel(parent) {}

void InDoubtModel::setEvents(const QList<EventRow> &events)
{
    replaceRows(
        events, [](const EventRow &event) { return event.sendKey; }, sameEvent);
}

QVariant InDoubtModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const EventRow &event = m_rows.at(index.row());
    const auto column = Column(index.column());
    if (role == RawRole) {
        switch (column) {
        case SendKey:
            return event.sendKey;
        case EventId:
            return event.eventId;
        case User:
            return event.userId;
        case Reminder:
            return event.reminderId;
        case Destination:
            return event.destination;
        case Since:
            return event.updatedAtMs;
        case Sends:
            return event.sends;
        case Reconciliation:
            return event.reconciliation;
        case Known:
            return event.whatIsKnown();
        case Count:
            break;
        }
        return {};
    }
    if (role == Qt::DisplayRole) {
        switch (column) {
        case SendKey:
            return QString::fromLatin1(event.sendKey);
        case EventId:
            return event.eventId;
        case User:
            return event.userId;
        case Reminder:
            return event.reminderId;
        case Destination:
            return event.destination;
        case Since:
            return formatDisplayTime(event.updatedAtMs);
        case Sends:
            return QLocale().toString(event.sends);
        case Reconciliation:
            return event.reconciliation;
        case Known:
            return event.whatIsKnown();
        case Count:
            break;
        }
        return {};
    }
    if (role == Qt::ToolTipRole) {
        switch (column) {
        case SendKey:
            return QString::fromLatin1(event.sendKey);
        case Since:
            return event.updatedAtMs > 0 ? formatTime(event.updatedAtMs) : QString();
        case Sends:
            return tr("Requests that reached, or may have reached, the partner");
        case Reconciliation:
            return event.reconciliation;
        case Known:
            return event.whatIsKnown();
        default:
            return {};
        }
    }
    if (role == Qt::TextAlignmentRole && column == Sends)
        return int(Qt::AlignRight | Qt::AlignVCenter); // Qt 6.4's delegate reads an int
    return {};
}

QVariant InDoubtModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= Count)
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::DisplayRole) {
        switch (Column(section)) {
        case SendKey:
            return tr("Send key");
        case EventId:
            return tr("Event id");
        case User:
            return tr("User");
        case Reminder:
            return tr("Reminder");
        case Destination:
            return tr("Destination");
        case Since:
            return tr("In doubt since");
        case Sends:
            return tr("Sends");
        case Reconciliation:
            return tr("The partner says");
        case Known:
            return tr("What is known");
        case Count:
            break;
        }
    }
    if (role == Qt::ToolTipRole && section == Since)
        return tr("When the worker gave up waiting for the partner's answer (local time)");
    if (role == Qt::ToolTipRole && section == Reconciliation)
        return tr("What the partner answered when asked whether it has the message (its lookup): workers ask on "
                  "their own once a grace period has passed, and Check at partner asks now");
    return {};
}

} // namespace once::ui
