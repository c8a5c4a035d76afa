#include "alerting/notifiers/notification.h"

#include "alerting/alerttext.h"
#include "alerting/incidents.h"
#include "text/jsonvalues.h"
#include "text/quantities.h"

#include <QDateTime>
#include <QTimeZone>

namespace once {

Notification Notification::of(const Incident &incident, Kind kind)
{
    Notification notification;
    notification.kind = kind;
    notification.incidentId = incident.id;
    notification.rule = incident.rule;
    notification.severity = incident.severity;
    notification.partner = incident.partner;
    // The title from the facts the incident kept at its peak.
    Alert alert;
    alert.rule = incident.rule;
    alert.severity = incident.severity;
    alert.partner = incident.partner;
    alert.refusesEveryone = incident.details.value(QLatin1String("refuses_everyone")).toBool();
    notification.title = alertTitle(alert);
    notification.summary = incident.summary;
    notification.sinceMs = incident.startedAtMs;
    notification.resolvedAtMs = incident.resolvedAtMs;
    notification.resolvedBy = incident.resolvedBy;
    notification.details = incident.details;
    return notification;
}

QString Notification::key() const
{
    const QString kindName = kind == Kind::Firing     ? QStringLiteral("firing")
                             : kind == Kind::Resolved ? QStringLiteral("resolved")
                                                      : QStringLiteral("reminder");
    return kindName + QLatin1Char('/') + (incidentId ? QString::number(incidentId) : alertRuleName(rule));
}

QString Notification::statusName() const
{
    return kind == Kind::Resolved ? QStringLiteral("resolved") : QStringLiteral("firing");
}

QJsonObject Notification::toJson() const
{
    return QJsonObject{
        {QStringLiteral("status"), statusName()},
        {QStringLiteral("reminder"), kind == Kind::Reminder},
        {QStringLiteral("alert"), alertRuleName(rule)},
        {QStringLiteral("title"), title},
        {QStringLiteral("severity"), alertSeverityName(severity)},
        {QStringLiteral("summary"), summary},
        {QStringLiteral("partner"), textOrNull(partner)},
        {QStringLiteral("since"), timeOrNull(sinceMs)},
        {QStringLiteral("resolved_at"), timeOrNull(resolvedAtMs)},
        {QStringLiteral("resolved_by"), textOrNull(resolvedBy)},
        {QStringLiteral("incident"), incidentId ? QJsonValue(incidentId) : QJsonValue()},
        {QStringLiteral("details"), details},
    };
}

QString Notification::subject() const
{
    switch (kind) {
    case Kind::Firing:
        return QStringLiteral("[once] FIRING: ") + title;
    case Kind::Reminder:
        return QStringLiteral("[once] STILL FIRING: ") + title;
    case Kind::Resolved:
        return QStringLiteral("[once] RESOLVED: ") + title;
    }
    return title;
}

QString Notification::text(qint64 nowMs) const
{
    const QString since = QDateTime::fromMSecsSinceEpoch(sinceMs, QTimeZone::utc())
                              .toString(QStringLiteral("yyyy-MM-dd HH:mm 'UTC'"));
    const QString incident = incidentId ? QStringLiteral("incident %1").arg(incidentId)
                                        : QStringLiteral("not recorded: the store does not answer");
    switch (kind) {
    case Kind::Firing:
        return QStringLiteral("%1\n%2\nSince %3 (%4).").arg(subject(), summary, since, incident);
    case Kind::Reminder:
        return QStringLiteral(
                   "%1 for %2, not acknowledged\n%3\nSince %4 (%5). Acknowledge it in the console or "
                   "with once incidents to stop these reminders.")
            .arg(subject(), formatDuration(nowMs - sinceMs), summary, since, incident);
    case Kind::Resolved:
        return QStringLiteral("%1 after %2%3\nIt was: %4\nSince %5 (%6).")
            .arg(subject(), formatDuration((resolvedAtMs ? resolvedAtMs : nowMs) - sinceMs),
                 resolvedBy.isEmpty() ? QString() : QStringLiteral(", resolved by ") + resolvedBy, summary,
                 since, incident);
    }
    return summary;
}

} // namespace once
