#include "alerting/incidentreport.h"

#include "alerting/alerttext.h"
#include "store/database.h"
#include "text/jsonvalues.h"
#include "text/quantities.h"

#include <QDateTime>
#include <QJsonArray>
#include <QSqlQuery>
#include <QTimeZone>
#include <QVariant>

#include <algorithm>
#include <tuple>

namespace once {

namespace {

// The audit log's actions on incidents, as Operations::actOnIncident writes them.
const QLatin1String IncidentActionPrefix("incident-");

// A report is read by people outside the team, in other zones: UTC, to the second.
QString readableTime(qint64 ms)
{
    if (ms <= 0)
        return QStringLiteral("-");
    return QDateTime::fromMSecsSinceEpoch(ms, QTimeZone::utc())
        .toString(QStringLiteral("yyyy-MM-dd HH:mm:ss 'UTC'"));
}

// A table cell: text from an operator or a partner must not break the table.
QString cell(QString text)
{
    text.replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    text.replace(QLatin1Char('|'), QLatin1String("\\|"));
    text.replace(QLatin1Char('\r'), QLatin1Char(' '));
    text.replace(QLatin1Char('\n'), QLatin1Char(' '));
    return text.isEmpty() ? QStringLiteral(" ") : text;
}

// A line of prose: one line, whatever was typed.
QString line(QString text)
{
    text.replace(QLatin1Char('\r'), QLatin1Char(' '));
    text.replace(QLatin1Char('\n'), QLatin1Char(' '));
    return text;
}

QString valueText(AlertRule rule, qint64 value)
{
    return alertRuleInfo(rule).isDuration ? formatDuration(value) : formatCount(value);
}

QString redriveResult(const AuditEntry &entry)
{
    if (!entry.outcome)
        return {};
    const qint64 waiting =
        std::max<qint64>(0, entry.count - entry.outcome->delivered - entry.outcome->diedAgain);
    return QStringLiteral("%1 delivered since, %2 died again, %3 not settled yet")
        .arg(formatCount(entry.outcome->delivered), formatCount(entry.outcome->diedAgain),
             formatCount(waiting));
}

QString actionText(const AuditEntry &entry)
{
    QString text = entry.detail;
    if (entry.count > 0 || entry.action == QLatin1String("redrive") ||
        entry.action == QLatin1String("discard"))
        text += QStringLiteral(" (%1)").arg(
            formatQuantity(entry.count, QStringLiteral("message"), QStringLiteral("messages")));
    if (entry.ratePerSecond > 0)
        text += QStringLiteral(" at %1/s").arg(entry.ratePerSecond);
    if (const QString result = redriveResult(entry); !result.isEmpty())
        text += QStringLiteral(": ") + result;
    if (!entry.reason.isEmpty())
        text += QStringLiteral(": \u201c%1\u201d").arg(entry.reason);
    return text;
}

QString statusName(const Incident &incident)
{
    return !incident.isOpen()   ? QStringLiteral("resolved")
           : incident.ackedAtMs ? QStringLiteral("acknowledged")
                                : QStringLiteral("open");
}

} // namespace

std::optional<IncidentReport> buildIncidentReport(Database &db, Inspector &inspector, qint64 id, qint64 nowMs,
                                                  QString *error)
{
    Incidents incidents(db);
    IncidentReport report;
    report.generatedAtMs = nowMs;
    const auto incident = incidents.get(id, error);
    if (!incident)
        return std::nullopt;
    report.incident = *incident;
    const auto impact = incidents.impact(*incident, nowMs, error);
    if (!impact)
        return std::nullopt;
    report.impact = *impact;
    report.windowUntilMs = incident->resolvedAtMs ? incident->resolvedAtMs : nowMs;
    report.actionsUntilMs = std::min(nowMs, report.windowUntilMs + IncidentFollowUpMs);
    if (!incident->isOpen())
        report.actionsUntilMs = std::max(report.actionsUntilMs, report.windowUntilMs);

    // The same window and partner as Incidents::impact, so the two add up.
    QString sql = QStringLiteral("SELECT step, outcome, COUNT(*) FROM attempts WHERE at >= ? AND at <= ?");
    QVariantList values{incident->startedAtMs, report.windowUntilMs};
    if (!incident->partner.isEmpty() && incident->rule == AlertRule::PartnerDown) {
        sql += QStringLiteral(" AND (partner = ? OR partner IS NULL)");
        values.append(incident->partner);
    }
    sql += QStringLiteral(" GROUP BY step, outcome");
    QSqlQuery query(db.connection());
    query.prepare(sql);
    for (const QVariant &value : std::as_const(values))
        query.addBindValue(value);
    if (!db.exec(query, error))
        return std::nullopt;
    while (query.next())
        report.outcomes.append(
            {query.value(0).toString(), query.value(1).toString(), query.value(2).toLongLong()});
    query.finish();
    std::sort(report.outcomes.begin(), report.outcomes.end(), [](const auto &a, const auto &b) {
        return a.count != b.count ? a.count > b.count
                                  : std::tie(a.step, a.outcome) < std::tie(b.step, b.outcome);
    });

    // An audit log is a few rows an hour; an incident's window holds few of them.
    const auto entries =
        inspector.auditLogBetween(incident->startedAtMs, report.actionsUntilMs, 10000, error);
    if (!entries)
        return std::nullopt;
    const QString own = QStringLiteral("incident %1").arg(id);
    for (const AuditEntry &entry : *entries) {
        if (entry.action.startsWith(IncidentActionPrefix) && entry.detail != own)
            continue;
        report.actions.append(entry);
    }
    return report;
}

QString IncidentReport::title() const
{
    Alert alert;
    alert.rule = incident.rule;
    alert.severity = incident.severity;
    alert.partner = incident.partner;
    alert.refusesEveryone = incident.details.value(QStringLiteral("refuses_everyone")).toBool();
    return QStringLiteral("Incident %1: %2").arg(incident.id).arg(alertTitle(alert));
}

QList<IncidentReport::TimelineEntry> IncidentReport::timeline() const
{
    QList<TimelineEntry> entries;
    entries.append({incident.startedAtMs,
                    QStringLiteral("started"),
                    {},
                    QStringLiteral("%1 (%2)").arg(alertRuleName(incident.rule),
                                                  QString::fromUtf8(alertRuleInfo(incident.rule).meaning))});
    if (incident.notifiedFiringAtMs)
        entries.append({incident.notifiedFiringAtMs,
                        QStringLiteral("notified"),
                        {},
                        QStringLiteral("people were notified")});
    if (incident.remindedAtMs)
        entries.append(
            {incident.remindedAtMs,
             QStringLiteral("reminded"),
             {},
             QStringLiteral("still open and unacknowledged: notified again (the latest reminder)")});
    // Operators' acknowledge / note / resolve come from its notes, which hold the note
    // itself; the audit log's rows of the same acts are not repeated.
    for (const IncidentNote &note : incident.notes) {
        const QString event = note.action == QLatin1String("acknowledge") ? QStringLiteral("acknowledged")
                              : note.action == QLatin1String("resolve")   ? QStringLiteral("resolved")
                                                                          : note.action;
        entries.append({note.atMs, event, note.actor, note.note});
    }
    for (const AuditEntry &entry : actions) {
        if (entry.action.startsWith(IncidentActionPrefix))
            continue;
        entries.append({entry.atMs, entry.action, entry.actor, actionText(entry)});
    }
    if (!incident.isOpen() && incident.resolvedBy.isEmpty())
        entries.append({incident.resolvedAtMs,
                        QStringLiteral("resolved"),
                        {},
                        QStringLiteral("resolved by itself: the condition cleared")});
    if (incident.notifiedResolvedAtMs)
        entries.append({incident.notifiedResolvedAtMs,
                        QStringLiteral("notified"),
                        {},
                        QStringLiteral("people were told it is resolved")});
    std::stable_sort(entries.begin(), entries.end(),
                     [](const TimelineEntry &a, const TimelineEntry &b) { return a.atMs < b.atMs; });
    return entries;
}

QJsonObject IncidentReport::toJson() const
{
    QJsonArray outcomeArray;
    for (const OutcomeCount &each : outcomes)
        outcomeArray.append(QJsonObject{{QStringLiteral("step"), each.step},
                                        {QStringLiteral("outcome"), each.outcome},
                                        {QStringLiteral("count"), each.count}});
    QJsonArray timelineArray;
    for (const TimelineEntry &entry : timeline())
        timelineArray.append(QJsonObject{{QStringLiteral("at"), formatTime(entry.atMs)},
                                         {QStringLiteral("event"), entry.event},
                                         {QStringLiteral("actor"), textOrNull(entry.actor)},
                                         {QStringLiteral("text"), textOrNull(entry.text)}});
    QJsonArray actionArray;
    for (const AuditEntry &entry : actions)
        actionArray.append(entry.toJson());
    return QJsonObject{
        {QStringLiteral("title"), title()},
        {QStringLiteral("incident"), incident.toJson()},
        {QStringLiteral("window"),
         QJsonObject{{QStringLiteral("since"), formatTime(incident.startedAtMs)},
                     {QStringLiteral("until"), formatTime(windowUntilMs)},
                     {QStringLiteral("open"), incident.isOpen()},
                     {QStringLiteral("actions_until"), formatTime(actionsUntilMs)}}},
        {QStringLiteral("duration_ms"), windowUntilMs - incident.startedAtMs},
        {QStringLiteral("impact"), impact.toJson()},
        {QStringLiteral("outcomes"), outcomeArray},
        {QStringLiteral("timeline"), timelineArray},
        {QStringLiteral("operator_actions"), actionArray},
        {QStringLiteral("generated_at"), formatTime(generatedAtMs)},
    };
}

QString IncidentReport::toMarkdown() const
{
    QStringList out;
    out << QStringLiteral("# %1").arg(line(title())) << QString();
    if (!incident.summary.isEmpty())
        out << line(incident.summary) << QString();
    const QString resolved =
        incident.isOpen() ? QStringLiteral("not yet (open)")
        : incident.resolvedBy.isEmpty()
            ? QStringLiteral("%1, by itself (the condition cleared)").arg(readableTime(incident.resolvedAtMs))
            : QStringLiteral("%1, by %2").arg(readableTime(incident.resolvedAtMs), incident.resolvedBy);
    // A list, not a two-column table: Markdown tables need a header row, which a list of
    // facts has none of.
    const auto fact = [&out](const QString &name, const QString &value) {
        out << QStringLiteral("- **%1**: %2").arg(name, line(value));
    };
    fact(QStringLiteral("Status"), statusName(incident));
    fact(QStringLiteral("Rule"),
         QStringLiteral("%1 (%2)").arg(alertRuleName(incident.rule),
                                       QString::fromUtf8(alertRuleInfo(incident.rule).meaning)));
    fact(QStringLiteral("Partner"), incident.partner.isEmpty() ? QStringLiteral("-") : incident.partner);
    fact(QStringLiteral("Severity"),
         QStringLiteral("%1 (the worst it reached)").arg(alertSeverityName(incident.severity)));
    fact(QStringLiteral("Started"), readableTime(incident.startedAtMs));
    fact(QStringLiteral("Resolved"), resolved);
    fact(QStringLiteral("Duration"), formatDuration(windowUntilMs - incident.startedAtMs) +
                                         (incident.isOpen() ? QStringLiteral(" so far") : QString()));
    fact(QStringLiteral("Acknowledged"),
         incident.ackedAtMs
             ? QStringLiteral("%1, by %2").arg(readableTime(incident.ackedAtMs), incident.ackedBy)
             : QStringLiteral("no"));
    fact(QStringLiteral("Peak"), QStringLiteral("%1 (threshold %2)")
                                     .arg(valueText(incident.rule, incident.peakValue),
                                          valueText(incident.rule, incident.threshold)));
    out << QString();

    out << QStringLiteral("## What it touched") << QString()
        << QStringLiteral("Between %1 and %2%3:")
               .arg(readableTime(incident.startedAtMs), readableTime(windowUntilMs),
                    incident.partner.isEmpty() || incident.rule != AlertRule::PartnerDown
                        ? QString()
                        : QStringLiteral(", sends to %1").arg(incident.partner))
        << QString()
        << QStringLiteral("| Failed sends | Dead-lettered | Held in doubt | Accepted meanwhile |")
        << QStringLiteral("|---:|---:|---:|---:|")
        << QStringLiteral("| %1 | %2 | %3 | %4 |")
               .arg(formatCount(impact.failedSends), formatCount(impact.deadLettered),
                    formatCount(impact.heldInDoubt), formatCount(impact.applied))
        << QString();
    if (!outcomes.isEmpty()) {
        out << QStringLiteral("By outcome, from the history:") << QString()
            << QStringLiteral("| Step | Outcome | Count |") << QStringLiteral("|---|---|---:|");
        for (const OutcomeCount &each : outcomes)
            out << QStringLiteral("| %1 | %2 | %3 |")
                       .arg(cell(each.step), cell(each.outcome), formatCount(each.count));
        out << QString();
    }

    out << QStringLiteral("## Timeline") << QString();
    for (const TimelineEntry &entry : timeline()) {
        QString text = QStringLiteral("- %1: **%2**").arg(readableTime(entry.atMs), entry.event);
        if (!entry.actor.isEmpty())
            text += QStringLiteral(" by %1").arg(line(entry.actor));
        if (!entry.text.isEmpty())
            text += QStringLiteral(": ") + line(entry.text);
        out << text;
    }
    out << QString();

    out << QStringLiteral("## Operator actions") << QString();
    if (actions.isEmpty()) {
        out << QStringLiteral("None between %1 and %2.")
                   .arg(readableTime(incident.startedAtMs), readableTime(actionsUntilMs));
    } else {
        out << QStringLiteral("From the audit log, %1 to %2:")
                   .arg(readableTime(incident.startedAtMs), readableTime(actionsUntilMs))
            << QString() << QStringLiteral("| Time | Who | Action | What | Count | Result | Reason |")
            << QStringLiteral("|---|---|---|---|---:|---|---|");
        for (const AuditEntry &entry : actions)
            out << QStringLiteral("| %1 | %2 | %3 | %4 | %5 | %6 | %7 |")
                       .arg(readableTime(entry.atMs), cell(entry.actor), cell(entry.action),
                            cell(entry.detail), formatCount(entry.count), cell(redriveResult(entry)),
                            cell(entry.reason));
    }
    out << QString() << QStringLiteral("_Report generated %1 by once._").arg(readableTime(generatedAtMs))
        << QString();
    return out.join(QLatin1Char('\n'));
}

} // namespace once
