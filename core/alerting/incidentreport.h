#pragma once

#include "alerting/incidents.h"
#include "operator/inspector.h"

#include <QJsonObject>
#include <QList>
#include <QString>

#include <optional>

namespace once {

class Database;

// How long after an incident's end what operators did still belongs to it: the clean-up
// after an outage (redriving what died during it) comes once the partner is back.
inline constexpr qint64 IncidentFollowUpMs = 60 * 60 * 1000;

// One incident as a founder sends it to a partner or pastes it into a postmortem: what
// happened when, what it touched, and what operators did, read from the store in one go.
// One builder (buildIncidentReport), two writers (toMarkdown, toJson).
struct IncidentReport
{
    Incident incident; // with its notes
    IncidentImpact impact;
    // The history's rows in the incident's window by step and outcome ("send", "applied"),
    // for its partner's sends when it is a partner's incident, most first.
    struct OutcomeCount
    {
        QString step;
        QString outcome;
        qint64 count = 0;
    };
    QList<OutcomeCount> outcomes;
    // The audit log from its start to IncidentFollowUpMs after its end (now at most),
    // oldest first: this incident's own acknowledge / note / resolve rows and every other
    // operator action (redrive, discard, resolve-*, partner-pause, ...), but not what was
    // done to other incidents. Each redrive with what became of its keys so far.
    QList<AuditEntry> actions;
    qint64 windowUntilMs = 0;  // its end, or now while open
    qint64 actionsUntilMs = 0; // the end of the actions' window
    qint64 generatedAtMs = 0;

    struct TimelineEntry
    {
        qint64 atMs = 0;
        QString event; // started | notified | reminded | acknowledged | note | redrive | ... | resolved
        QString actor; // empty: once itself
        QString text;
    };
    // Started, notifications, operators' notes and actions, resolved (by whom or by itself),
    // in time order. The peak's severity has no time of its own: the store keeps the worst
    // reached, not when.
    QList<TimelineEntry> timeline() const;
    QString title() const; // "Incident 12: Partner acme down"

    QJsonObject toJson() const; // times in UTC RFC 3339
    QString toMarkdown() const; // times as "2026-12-06 17:58:30 UTC"
};

// nullopt with an empty error when the store has no incident id.
std::optional<IncidentReport> buildIncidentReport(Database &db, Inspector &inspector, qint64 id, qint64 nowMs,
                                                  QString *error);

} // namespace once
