#include "alerting/incidents.h"

#include "store/database.h"
#include "text/jsonvalues.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QSqlQuery>
#include <QVariant>

namespace once {

namespace {

const QString IncidentColumns = QStringLiteral(
    "id, rule, partner, severity, started_at, resolved_at, resolved_by, last_seen_at, peak_value, threshold, "
    "summary, details, acked_at, acked_by, notified_firing_at, notified_resolved_at, reminded_at");

Incident incidentFrom(const QSqlQuery &query)
{
    Incident incident;
    incident.id = query.value(0).toLongLong();
    incident.rule = alertRuleNamed(query.value(1).toString()).value_or(AlertRule::PartnerDown);
    incident.partner = query.value(2).toString();
    incident.severity = query.value(3).toString() == QLatin1String("critical") ? AlertSeverity::Critical
                                                                               : AlertSeverity::Warning;
    incident.startedAtMs = query.value(4).toLongLong();
    incident.resolvedAtMs = query.value(5).toLongLong();
    incident.resolvedBy = query.value(6).toString();
    incident.lastSeenAtMs = query.value(7).toLongLong();
    incident.peakValue = query.value(8).toLongLong();
    incident.threshold = query.value(9).toLongLong();
    incident.summary = query.value(10).toString();
    incident.details = QJsonDocument::fromJson(query.value(11).toByteArray()).object();
    incident.ackedAtMs = query.value(12).toLongLong();
    incident.ackedBy = query.value(13).toString();
    incident.notifiedFiringAtMs = query.value(14).toLongLong();
    incident.notifiedResolvedAtMs = query.value(15).toLongLong();
    incident.remindedAtMs = query.value(16).toLongLong();
    return incident;
}

// Binds values in order and runs, leaving the rows (and the count of rows changed) to read:
// Database::execWith finishes its statement.
bool run(Database &db, QSqlQuery &query, const QVariantList &values, QString *error)
{
    for (const QVariant &value : values)
        query.addBindValue(value);
    return db.exec(query, error);
}


QVariant textOrNullVariant(const QString &text)
{
    return text.trimmed().isEmpty() ? QVariant() : QVariant(text.trimmed());
}

} // namespace

QJsonObject IncidentNote::toJson() const
{
    return QJsonObject{{QStringLiteral("at"), formatTime(atMs)},
                       {QStringLiteral("actor"), actor},
                       {QStringLiteral("action"), action},
                       {QStringLiteral("note"), textOrNull(note)}};
}

QString Incident::key() const
{
    return alertKey(rule, partner);
}

QJsonObject Incident::toJson() const
{
    QJsonArray noteArray;
    for (const IncidentNote &note : notes)
        noteArray.append(note.toJson());
    return QJsonObject{
        {QStringLiteral("id"), id},
        {QStringLiteral("rule"), alertRuleName(rule)},
        {QStringLiteral("partner"), textOrNull(partner)},
        {QStringLiteral("severity"), alertSeverityName(severity)},
        {QStringLiteral("status"), isOpen() ? (ackedAtMs ? QStringLiteral("acknowledged") : QStringLiteral("open"))
                                            : QStringLiteral("resolved")},
        {QStringLiteral("started_at"), formatTime(startedAtMs)},
        {QStringLiteral("resolved_at"), timeOrNull(resolvedAtMs)},
        {QStringLiteral("resolved_by"), textOrNull(resolvedBy)},
        {QStringLiteral("last_seen_at"), timeOrNull(lastSeenAtMs)},
        {QStringLiteral("peak_value"), peakValue},
        {QStringLiteral("threshold"), threshold},
        {QStringLiteral("unit"), alertRuleInfo(rule).isDuration ? QStringLiteral("ms") : QStringLiteral("count")},
        {QStringLiteral("summary"), summary},
        {QStringLiteral("details"), details},
        {QStringLiteral("acknowledged_at"), timeOrNull(ackedAtMs)},
        {QStringLiteral("acknowledged_by"), textOrNull(ackedBy)},
        {QStringLiteral("notified_firing_at"), timeOrNull(notifiedFiringAtMs)},
        {QStringLiteral("notified_resolved_at"), timeOrNull(notifiedResolvedAtMs)},
        {QStringLiteral("reminded_at"), timeOrNull(remindedAtMs)},
        {QStringLiteral("notes"), noteArray},
    };
}

QJsonObject IncidentImpact::toJson() const
{
    return QJsonObject{{QStringLiteral("failed_sends"), failedSends},
                       {QStringLiteral("dead_lettered"), deadLettered},
                       {QStringLiteral("held_in_doubt"), heldInDoubt},
                       {QStringLiteral("applied"), applied}};
}

std::optional<Incidents::Changes> Incidents::record(const QList<Alert> &alerts, const QStringList &summaries,
                                                    qint64 nowMs, qint64 clearAfterMs, QString *error)
{
    Transaction transaction(m_db);
    if (!transaction.begin(error))
        return std::nullopt;
    Changes changes;
    QSet<QString> seen;
    for (qsizetype i = 0; i < alerts.size(); ++i) {
        const Alert &alert = alerts.at(i);
        seen.insert(alert.key());
        const QString details = QString::fromUtf8(QJsonDocument(alert.toJson()).toJson(QJsonDocument::Compact));
        const QString severity = alertSeverityName(alert.severity);
        // The open one's peak rises with the alert; its words follow the worst it got.
        auto &update = m_db.prepared(QStringLiteral(
            "UPDATE incidents SET last_seen_at = ?, "
            "summary = CASE WHEN ? >= peak_value OR (? = 'critical' AND severity = 'warning') THEN ? ELSE summary END, "
            "details = CASE WHEN ? >= peak_value OR (? = 'critical' AND severity = 'warning') THEN ? ELSE details END, "
            "peak_value = CASE WHEN ? > peak_value THEN ? ELSE peak_value END, "
            "severity = CASE WHEN ? = 'critical' THEN 'critical' ELSE severity END, threshold = ? "
            "WHERE rule = ? AND partner = COALESCE(?, '') AND resolved_at IS NULL"));
        const QVariantList values{nowMs,    alert.value, severity,   summaries.value(i), alert.value,
                                  severity, details,     alert.value, alert.value,       severity,
                                  alert.threshold,       alertRuleName(alert.rule),      alert.partner};
        if (!run(m_db, update, values, error))
            return std::nullopt;
        const bool raised = update.numRowsAffected() > 0;
        update.finish();
        if (raised)
            continue;
        // Opened once: the unique index of open incidents turns a second watcher's insert away.
        // COALESCE: an alert about no partner has a null QString, which binds as NULL; the
        // column holds '' for it (as the UPDATE above looks for).
        auto &insert = m_db.prepared(QStringLiteral(
            "INSERT INTO incidents (rule, partner, severity, started_at, last_seen_at, peak_value, threshold, summary, "
            "details) VALUES (?, COALESCE(?, ''), ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING ") + IncidentColumns);
        const QVariantList row{alertRuleName(alert.rule), alert.partner, severity, std::min(alert.sinceMs, nowMs),
                               nowMs, alert.value, alert.threshold, summaries.value(i), details};
        if (!run(m_db, insert, row, error))
            return std::nullopt;
        if (insert.next())
            changes.opened.append(incidentFrom(insert));
        insert.finish();
    }

    auto &open = m_db.prepared(QStringLiteral("SELECT ") + IncidentColumns +
                               QStringLiteral(" FROM incidents WHERE resolved_at IS NULL ORDER BY started_at DESC, id DESC"));
    if (!m_db.exec(open, error))
        return std::nullopt;
    QList<Incident> stillOpen;
    while (open.next())
        stillOpen.append(incidentFrom(open));
    open.finish();
    for (Incident &incident : stillOpen) {
        if (seen.contains(incident.key()) || nowMs - incident.lastSeenAtMs < clearAfterMs) {
            changes.open.append(incident);
            continue;
        }
        auto &resolve = m_db.prepared(
            QStringLiteral("UPDATE incidents SET resolved_at = ? WHERE id = ? AND resolved_at IS NULL"));
        if (!m_db.execWith(resolve, {nowMs, incident.id}, error))
            return std::nullopt;
        incident.resolvedAtMs = nowMs;
        changes.resolved.append(incident);
    }
    if (!transaction.commit(error))
        return std::nullopt;
    return changes;
}

bool Incidents::markNotified(qint64 id, Notified what, qint64 atMs, QString *error)
{
    const QString column = what == Notified::Firing     ? QStringLiteral("notified_firing_at")
                           : what == Notified::Resolved ? QStringLiteral("notified_resolved_at")
                                                        : QStringLiteral("reminded_at");
    auto &update = m_db.prepared(QStringLiteral("UPDATE incidents SET %1 = ? WHERE id = ?").arg(column));
    return m_db.execWith(update, {atMs, id}, error);
}

std::optional<QList<Incident>> Incidents::list(int limit, QString *error)
{
    auto &query = m_db.prepared(QStringLiteral("SELECT ") + IncidentColumns +
                                QStringLiteral(" FROM incidents ORDER BY CASE WHEN resolved_at IS NULL THEN 0 ELSE 1 END, "
                                               "started_at DESC, id DESC LIMIT ?"));
    if (!run(m_db, query, {limit}, error))
        return std::nullopt;
    QList<Incident> incidents;
    while (query.next())
        incidents.append(incidentFrom(query));
    query.finish();
    return incidents;
}

std::optional<Incident> Incidents::get(qint64 id, QString *error)
{
    auto &query = m_db.prepared(QStringLiteral("SELECT ") + IncidentColumns + QStringLiteral(" FROM incidents WHERE id = ?"));
    if (!run(m_db, query, {id}, error))
        return std::nullopt;
    if (!query.next()) {
        query.finish();
        error->clear();
        return std::nullopt;
    }
    Incident incident = incidentFrom(query);
    query.finish();
    auto &notes = m_db.prepared(
        QStringLiteral("SELECT at, actor, action, note FROM incident_notes WHERE incident_id = ? ORDER BY id"));
    if (!run(m_db, notes, {id}, error))
        return std::nullopt;
    while (notes.next())
        incident.notes.append(IncidentNote{notes.value(0).toLongLong(), notes.value(1).toString(),
                                           notes.value(2).toString(), notes.value(3).toString()});
    notes.finish();
    return incident;
}

std::optional<IncidentImpact> Incidents::impact(const Incident &incident, qint64 nowMs, QString *error)
{
    const qint64 until = incident.resolvedAtMs ? incident.resolvedAtMs : nowMs;
    // Through the index of the history's times; a partner's incident counts its sends alone.
    QString sql = QStringLiteral(
        "SELECT COALESCE(SUM(CASE WHEN step = 'send' AND outcome <> 'applied' THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN step = 'dead-letter' THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN outcome = 'in_doubt' OR outcome = 'held' THEN 1 ELSE 0 END), 0),"
        " COALESCE(SUM(CASE WHEN step = 'send' AND outcome = 'applied' THEN 1 ELSE 0 END), 0)"
        " FROM attempts WHERE at >= ? AND at <= ?");
    QVariantList values{incident.startedAtMs, until};
    if (!incident.partner.isEmpty() && incident.rule == AlertRule::PartnerDown) {
        sql += QStringLiteral(" AND (partner = ? OR partner IS NULL)");
        values.append(incident.partner);
    }
    auto &query = m_db.prepared(sql);
    if (!run(m_db, query, values, error) || !query.next())
        return std::nullopt;
    IncidentImpact impact{query.value(0).toLongLong(), query.value(1).toLongLong(), query.value(2).toLongLong(),
                          query.value(3).toLongLong()};
    query.finish();
    return impact;
}

QString Incidents::actionName(Action action)
{
    switch (action) {
    case Action::Acknowledge:
        return QStringLiteral("acknowledge");
    case Action::Note:
        return QStringLiteral("note");
    case Action::Resolve:
        return QStringLiteral("resolve");
    }
    return {};
}

bool Incidents::act(qint64 id, Action action, const QString &actor, const QString &note, qint64 nowMs, QString *error)
{
    if (action == Action::Note && note.trimmed().isEmpty()) {
        *error = QStringLiteral("a note needs text (--note TEXT)");
        return false;
    }
    auto &state = m_db.prepared(QStringLiteral("SELECT resolved_at FROM incidents WHERE id = ?"));
    if (!run(m_db, state, {id}, error))
        return false;
    if (!state.next()) {
        state.finish();
        *error = QStringLiteral("no incident %1 on this store").arg(id);
        return false;
    }
    const bool resolved = !state.value(0).isNull();
    state.finish();
    if (resolved && action != Action::Note) {
        *error = QStringLiteral("incident %1 is resolved already").arg(id);
        return false;
    }
    if (action == Action::Acknowledge) {
        auto &ack = m_db.prepared(QStringLiteral(
            "UPDATE incidents SET acked_at = ?, acked_by = ? WHERE id = ? AND acked_at IS NULL"));
        if (!m_db.execWith(ack, {nowMs, actor, id}, error))
            return false;
    } else if (action == Action::Resolve) {
        auto &resolve = m_db.prepared(QStringLiteral(
            "UPDATE incidents SET resolved_at = ?, resolved_by = ? WHERE id = ? AND resolved_at IS NULL"));
        if (!m_db.execWith(resolve, {nowMs, actor, id}, error))
            return false;
    }
    auto &insert = m_db.prepared(
        QStringLiteral("INSERT INTO incident_notes (incident_id, at, actor, action, note) VALUES (?, ?, ?, ?, ?)"));
    return m_db.execWith(insert, {id, nowMs, actor, actionName(action), textOrNullVariant(note)}, error);
}

bool StoreLease::hold(const QString &holder, qint64 ttlMs, qint64 nowMs, QString *error)
{
    // One statement: taken when free or expired, extended when ours, left alone otherwise.
    auto &upsert = m_db.prepared(QStringLiteral(
        "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
        "holder = excluded.holder, expires_at = excluded.expires_at "
        "WHERE leases.holder = excluded.holder OR leases.expires_at < ?"));
    if (!run(m_db, upsert, {m_name, holder, nowMs + ttlMs, nowMs}, error))
        return false;
    const bool held = upsert.numRowsAffected() > 0;
    upsert.finish();
    error->clear();
    return held;
}

bool StoreLease::release(const QString &holder, QString *error)
{
    auto &remove = m_db.prepared(QStringLiteral("DELETE FROM leases WHERE name = ? AND holder = ?"));
    return m_db.execWith(remove, {m_name, holder}, error);
}

std::optional<QString> StoreLease::holder(qint64 nowMs, QString *error)
{
    auto &query = m_db.prepared(QStringLiteral("SELECT holder FROM leases WHERE name = ? AND expires_at >= ?"));
    if (!run(m_db, query, {m_name, nowMs}, error))
        return std::nullopt;
    const QString holder = query.next() ? query.value(0).toString() : QString();
    query.finish();
    return holder;
}

} // namespace once
