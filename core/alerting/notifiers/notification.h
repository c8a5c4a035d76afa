#pragma once

#include "alerting/alertrules.h"

#include <QJsonObject>
#include <QString>

namespace once {

struct Incident;

// What `once watch` tells a founder about one incident: that it started, that it is still
// open and nobody acknowledged it, or that it resolved. The words are the banner's
// (alerttext.h): what happens and what to do.
struct Notification
{
    enum class Kind
    {
        Firing,
        Reminder,
        Resolved
    };
    Kind kind = Kind::Firing;
    qint64 incidentId = 0; // 0: not recorded (the store did not answer: told from memory)
    AlertRule rule = AlertRule::PartnerDown;
    AlertSeverity severity = AlertSeverity::Warning;
    QString partner;
    QString title;   // "Partner acme down"
    QString summary; // the alert's words at its peak
    qint64 sinceMs = 0;
    qint64 resolvedAtMs = 0;
    QString resolvedBy; // an operator; empty when it cleared by itself
    QJsonObject details;

    static Notification of(const Incident &incident, Kind kind);

    // "firing/12", "resolved/12", "reminder/12"; "firing/store-failing" for one told from memory.
    QString key() const;
    QString statusName() const; // firing | resolved (a reminder is firing still)
    // The generic webhook's body: {"status", "reminder", "alert", "title", "severity",
    // "summary", "partner", "since", "resolved_at", "resolved_by", "incident", "details"}.
    QJsonObject toJson() const;
    // One line for a mail's subject: "[once] FIRING: Partner acme down".
    QString subject() const;
    // For people (chat, mail): the subject's words, what happens and what to do, since when.
    QString text(qint64 nowMs) const;
};

} // namespace once
