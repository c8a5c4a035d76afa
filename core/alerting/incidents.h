#pragma once

#include "alerting/alertrules.h"

#include <QJsonObject>
#include <QList>
#include <QString>

#include <optional>

namespace once {

class Database;

// What an operator wrote on an incident, or did to it.
struct IncidentNote
{
    qint64 atMs = 0;
    QString actor;
    QString action; // acknowledge | note | resolve
    QString note;   // may be empty

    QJsonObject toJson() const;
};

// One alert's life in the store: from the evaluation that first saw it to the one that no
// longer did (or an operator's resolve), with the worst it got, and what operators did.
struct Incident
{
    qint64 id = 0;
    AlertRule rule = AlertRule::PartnerDown;
    QString partner;
    AlertSeverity severity = AlertSeverity::Warning; // the worst it reached
    qint64 startedAtMs = 0;
    qint64 resolvedAtMs = 0; // 0: open
    QString resolvedBy;      // an operator; empty when it cleared by itself
    qint64 lastSeenAtMs = 0; // the last evaluation that found it
    qint64 peakValue = 0;
    qint64 threshold = 0;
    QString summary;     // the alert's words at its peak (alertText)
    QJsonObject details; // the alert's facts at its peak (Alert::toJson)
    qint64 ackedAtMs = 0;
    QString ackedBy;
    qint64 notifiedFiringAtMs = 0;
    qint64 notifiedResolvedAtMs = 0;
    qint64 remindedAtMs = 0;
    QList<IncidentNote> notes; // filled by Incidents::get only

    bool isOpen() const { return resolvedAtMs == 0; }
    QString key() const; // as Alert::key()
    QJsonObject toJson() const;
};

// What an incident's window touched, from the history: sends that failed, reminders
// dead-lettered and keys left in doubt between its start and its end (now while open),
// for its partner when it has one, and the sends accepted meanwhile.
struct IncidentImpact
{
    qint64 failedSends = 0;
    qint64 deadLettered = 0;
    qint64 heldInDoubt = 0;
    qint64 applied = 0;

    QJsonObject toJson() const;
};

// The incidents table (schema 22). The watcher holding the store's lease records what the
// rules find (record); operators acknowledge, note and resolve through Operations, which
// audits each.
class Incidents final
{
public:
    explicit Incidents(Database &db) : m_db(db) {}

    struct Changes
    {
        QList<Incident> opened;   // new this evaluation
        QList<Incident> resolved; // cleared this evaluation
        QList<Incident> open;     // every incident open after it, the new ones included
    };
    // One evaluation's alerts: opens an incident for each alert without an open one,
    // raises an open one's peak, and resolves those whose alert has been gone for
    // clearAfterMs (a flapping condition stays one incident). summaries[i] words alerts[i].
    // One transaction.
    std::optional<Changes> record(const QList<Alert> &alerts, const QStringList &summaries, qint64 nowMs,
                                  qint64 clearAfterMs, QString *error);

    enum class Notified
    {
        Firing,
        Resolved,
        Reminder
    };
    bool markNotified(qint64 id, Notified what, qint64 atMs, QString *error);

    // Open ones first (newest first), then the resolved, newest first; at most limit.
    std::optional<QList<Incident>> list(int limit, QString *error);
    // One incident with its notes; nullopt with an empty error when there is none.
    std::optional<Incident> get(qint64 id, QString *error);
    std::optional<IncidentImpact> impact(const Incident &incident, qint64 nowMs, QString *error);

    enum class Action
    {
        Acknowledge,
        Note,
        Resolve
    };
    static QString actionName(Action action);
    // Within the caller's transaction (Operations::actOnIncident audits it): false with a
    // one-line error for an unknown incident, a resolved one, or an empty note.
    bool act(qint64 id, Action action, const QString &actor, const QString &note, qint64 nowMs, QString *error);

private:
    Database &m_db;
};

// A lease on the store by name, held by one process at a time until it expires: the
// watchers of a store take "watch", so that one of them records incidents and notifies.
class StoreLease final
{
public:
    StoreLease(Database &db, const QString &name) : m_db(db), m_name(name) {}
    // Takes or extends the lease for holder until nowMs + ttlMs; false when another holds
    // it unexpired (*error stays empty) or the store failed (*error says why).
    bool hold(const QString &holder, qint64 ttlMs, qint64 nowMs, QString *error);
    bool release(const QString &holder, QString *error);
    // Who holds it now; empty when nobody or it expired.
    std::optional<QString> holder(qint64 nowMs, QString *error);

private:
    Database &m_db;
    QString m_name;
};

} // namespace once
