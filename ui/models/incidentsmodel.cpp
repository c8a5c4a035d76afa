#include "models/incidentsmodel.h"

#include "display/statuscolors.h"

#include <QFont>
#include <QGuiApplication>
#include <QPalette>

#include <algorithm>
#include <limits>

namespace once::ui {

namespace {

bool sameIncident(const Incident &a, const Incident &b)
{
    return a.severity == b.severity && a.resolvedAtMs == b.resolvedAtMs && a.resolvedBy == b.resolvedBy &&
           a.ackedAtMs == b.ackedAtMs && a.lastSeenAtMs == b.lastSeenAtMs && a.peakValue == b.peakValue &&
           a.summary == b.summary;
}

} // namespace

IncidentsModel::IncidentsModel(QObject *parent) : RowTableModel(parent) {}

void IncidentsModel::setIncidents(const QList<Incident> &incidents, qint64 nowMs)
{
    const bool clockMoved = nowMs != m_nowMs;
    m_nowMs = nowMs;
    replaceRows(
        incidents, [](const Incident &incident) { return incident.id; }, sameIncident);
    // An open incident's duration grows with the clock alone.
    if (clockMoved && !m_rows.isEmpty())
        emit dataChanged(index(0, Ended), index(int(m_rows.size()) - 1, Ended), {Qt::DisplayRole});
}

int IncidentsModel::rowOf(qint64 id) const
{
    for (int row = 0; row < m_rows.size(); ++row)
        if (m_rows.at(row).id == id)
            return row;
    return -1;
}

QString IncidentsModel::statusText(const Incident &incident)
{
    if (!incident.isOpen())
        return tr("Resolved");
    return incident.ackedAtMs ? tr("Acknowledged") : tr("Open");
}

QVariant IncidentsModel::data(const QModelIndex &index, int role) const
{
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
        return {};
    const Incident &incident = m_rows.at(index.row());
    const auto column = Column(index.column());
    switch (role) {
    case IdRole:
        return incident.id;
    case RawRole:
        switch (column) {
        case Id:
            return incident.id;
        case Status:
            return incident.isOpen() ? (incident.ackedAtMs ? 1 : 0) : 2;
        case Severity:
            return incident.severity == AlertSeverity::Critical ? 0 : 1;
        case Rule:
            return alertRuleName(incident.rule);
        case Partner:
            return incident.partner;
        case Started:
            return incident.startedAtMs;
        case Ended:
            return incident.isOpen() ? std::numeric_limits<qint64>::max() : incident.resolvedAtMs;
        case Summary:
            return incident.summary;
        case Count:
            break;
        }
        return {};
    case Qt::DisplayRole:
        switch (column) {
        case Id:
            return QString::number(incident.id);
        case Status:
            return statusText(incident);
        case Severity:
            return incident.severity == AlertSeverity::Critical ? tr("Critical") : tr("Warning");
        case Rule:
            return alertRuleName(incident.rule);
        case Partner:
            return incident.partner;
        case Started:
            return formatDisplayTime(incident.startedAtMs);
        case Ended:
            if (incident.isOpen())
                return tr("open for %1")
                    .arg(formatDuration(std::max<qint64>(0, m_nowMs - incident.startedAtMs)));
            return tr("%1 (%2)%3")
                .arg(formatDisplayTime(incident.resolvedAtMs),
                     formatDuration(incident.resolvedAtMs - incident.startedAtMs),
                     incident.resolvedBy.isEmpty() ? QString() : tr(" by %1").arg(incident.resolvedBy));
        case Summary:
            return incident.summary;
        case Count:
            break;
        }
        return {};
    case Qt::ToolTipRole:
        if (column == Summary || column == Ended)
            return incident.summary;
        return {};
    case Qt::ForegroundRole: {
        const QPalette palette = QGuiApplication::palette();
        if (!incident.isOpen())
            return palette.color(QPalette::Disabled, QPalette::Text);
        // An acknowledged one is in someone's hands: its colour stays on its severity
        // column; an unacknowledged one's whole row asks for attention.
        const auto level =
            incident.severity == AlertSeverity::Critical ? ui::Severity::Alert : ui::Severity::Warning;
        if (incident.ackedAtMs && column != Severity && column != Status)
            return {};
        return severityTextColor(level, palette);
    }
    case Qt::FontRole:
        if (incident.isOpen() && !incident.ackedAtMs && (column == Status || column == Severity)) {
            QFont font;
            font.setBold(true);
            return font;
        }
        return {};
    default:
        return {};
    }
}

QVariant IncidentsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole)
        return {};
    switch (Column(section)) {
    case Id:
        return tr("#");
    case Status:
        return tr("Status");
    case Severity:
        return tr("Severity");
    case Rule:
        return tr("Rule");
    case Partner:
        return tr("Partner");
    case Started:
        return tr("Started");
    case Ended:
        return tr("Resolved / duration");
    case Summary:
        return tr("Summary");
    case Count:
        break;
    }
    return {};
}

} // namespace once::ui
