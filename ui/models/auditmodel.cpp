#include "models/auditmodel.h"

#include "display/humanunits.h"

#include <QDateTime>

#include <algorithm>

namespace once::ui {

namespace {

bool sameIds(const QList<AuditEntry> &a, qsizetype aFrom, const QList<AuditEntry> &b, qsizetype bFrom,
             qsizetype n)
{
    for (qsizetype i = 0; i < n; ++i) {
        if (a.at(aFrom + i).id != b.at(bFrom + i).id)
            return false;
    }
    return true;
}

} // namespace

AuditModel::AuditModel(QObject *parent) : QAbstractTableModel(parent) {}

void AuditModel::setEntries(const QList<AuditEntry> &entries)
{
    // The log only grows at the top and is cut at the bottom by the load limit, so an
    // update is usually "k new rows on top, some old ones off the end". Anything else resets.
    if (!m_entries.isEmpty() && !entries.isEmpty()) {
        const qint64 newestKnown = m_entries.constFirst().id;
        const auto found =
            std::find_if(entries.cbegin(), entries.cend(),
                         [newestKnown](const AuditEntry &entry) { return entry.id == newestKnown; });
        if (found != entries.cend()) {
            const qsizetype added = found - entries.cbegin();
            const qsizetype kept = std::min(m_entries.size(), entries.size() - added);
            if (sameIds(entries, added, m_entries, 0, kept) && added + kept == entries.size()) {
                if (kept < m_entries.size()) {
                    beginRemoveRows({}, int(kept), int(m_entries.size() - 1));
                    m_entries.resize(kept);
                    endRemoveRows();
                }
                if (added > 0) {
                    beginInsertRows({}, 0, int(added - 1));
                    m_entries = entries.mid(0, added) + m_entries;
                    endInsertRows();
                }
                // A redrive's outcome grows as its letters are delivered or die again.
                for (qsizetype row = added; row < entries.size(); ++row) {
                    const auto &now = entries.at(row).outcome;
                    auto &shown = m_entries[row].outcome;
                    if (now.has_value() == shown.has_value()
                        && (!now || (now->delivered == shown->delivered && now->diedAgain == shown->diedAgain)))
                        continue;
                    shown = now;
                    emit dataChanged(index(int(row), Outcome), index(int(row), Outcome));
                }
                return;
            }
        }
    }
    beginResetModel();
    m_entries = entries;
    endResetModel();
}

int AuditModel::rowCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : int(m_entries.size());
}

int AuditModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : Count;
}

QString AuditModel::describeAction(const QString &action)
{
    if (action == QLatin1String("redrive"))
        return tr("Redrive dead letters");
    if (action == QLatin1String("discard"))
        return tr("Discard dead letters");
    if (action == QLatin1String("resolve-resend"))
        return tr("Resend an in-doubt event");
    if (action == QLatin1String("resolve-mark-delivered"))
        return tr("Mark an in-doubt event delivered");
    // The console's BullMQ actions: "bullmq-retry-all-failed" reads "BullMQ: retry all failed".
    if (action.startsWith(QLatin1String("bullmq-")))
        return tr("BullMQ: %1").arg(action.mid(7).replace(u'-', u' '));
    return action;
}

namespace {

// "586 delivered, 14 died again, 0 on their way"
QString outcomeText(const AuditEntry &entry)
{
    if (!entry.outcome)
        return {};
    const qint64 waiting = std::max<qint64>(0, entry.count - entry.outcome->delivered - entry.outcome->diedAgain);
    QStringList parts;
    // "4 died again" rather than "0 delivered, 4 died again": the first words are read.
    if (entry.outcome->delivered > 0 || (entry.outcome->diedAgain == 0 && waiting == 0))
        parts << AuditModel::tr("%1 delivered").arg(formatCount(entry.outcome->delivered));
    if (entry.outcome->diedAgain > 0)
        parts << AuditModel::tr("%1 died again").arg(formatCount(entry.outcome->diedAgain));
    if (waiting > 0)
        parts << AuditModel::tr("%1 not settled yet").arg(formatCount(waiting));
    return parts.join(QStringLiteral(", "));
}

} // namespace

QVariant AuditModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const AuditEntry &entry = m_entries.at(index.row());
    const auto column = Column(index.column());
    switch (role) {
    case Qt::DisplayRole:
        switch (column) {
        case Number:
            return QStringLiteral("#%1").arg(entry.id);
        case When:
            return QDateTime::fromMSecsSinceEpoch(entry.atMs)
                .toLocalTime()
                .toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
        case Who:
            return entry.actor;
        case What:
            return describeAction(entry.action);
        case Detail:
            return entry.detail;
        case HowMany:
            return formatCount(entry.count);
        case Rate:
            return entry.ratePerSecond > 0 ? tr("%1/s").arg(formatCount(entry.ratePerSecond)) : QString();
        case Outcome:
            return outcomeText(entry);
        case Reason:
            return entry.reason;
        case Count:
            break;
        }
        break;
    case Qt::ToolTipRole:
        switch (column) {
        case When:
            return formatTime(entry.atMs);
        case What:
            return entry.action;
        case Detail:
            return entry.detail;
        case Reason:
            return entry.reason;
        case HowMany:
            return tr("Double-click to see the events it touched");
        case Outcome:
            return entry.outcome ? tr("What came of the letters this redrive put back, as their events stand now")
                                 : QVariant();
        default:
            break;
        }
        break;
    case Qt::TextAlignmentRole:
        if (column == HowMany || column == Rate || column == Number)
            return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
        break;
    case Qt::UserRole:
        switch (column) {
        case Number:
            return entry.id;
        case When:
            return entry.atMs;
        case Who:
            return entry.actor;
        case What:
            return entry.action;
        case Detail:
            return entry.detail;
        case HowMany:
            return entry.count;
        case Rate:
            return entry.ratePerSecond;
        case Outcome:
            return entry.outcome ? entry.outcome->delivered : -1;
        case Reason:
            return entry.reason;
        case Count:
            break;
        }
        break;
    default:
        break;
    }
    return {};
}

QVariant AuditModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation == Qt::Horizontal && role == Qt::TextAlignmentRole &&
        (section == HowMany || section == Rate || section == Number))
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return QAbstractTableModel::headerData(section, orientation, role);
    switch (Column(section)) {
    case Number:
        return tr("No.");
    case When:
        return tr("When");
    case Who:
        return tr("Who");
    case What:
        return tr("What");
    case Detail:
        return tr("Detail");
    case HowMany:
        return tr("How many");
    case Rate:
        return tr("Rate");
    case Outcome:
        return tr("Outcome");
    case Reason:
        return tr("Reason");
    case Count:
        break;
    }
    return {};
}

} // namespace once::ui
