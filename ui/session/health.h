#pragma once

#include "display/statuscolors.h"

#include "alerting/alertrules.h"
#include "alerting/workertally.h"

#include <QCoreApplication>
#include <QList>
#include <QString>

#include <optional>

namespace once::ui {

// The workers on a store in the console's words: "3 workers: 2 running (1 holding back),
// 1 gone"; "No worker on this store". And how that reads at a glance.
QString workersSummary(const once::WorkerTally &tally);
Severity workersSeverity(const once::WorkerTally &tally);

// One thing that needs attention now: the core's alert (its facts and words) as the
// banner and the tray show it. The kind names the topic, so that a change of wording (the
// outage's length) is not a new alert, and notifications can follow the topic's start and
// end.
struct HealthAlert
{
    enum class Kind
    {
        PartnerDown,
        PartnerFailing,
        NoWorker,
        OldestWaiting,
        InDoubt,
        Other, // lateness, dead letters, the store: the banner shows them, the tray does not
    };

    Kind kind = Kind::PartnerDown;
    Severity severity = Severity::Warning;
    QString text;
    once::Alert alert;
};

// The alerts for a store's numbers (when read) and its workers at nowMs, by the store's
// thresholds, most severe first (once::evaluateAlerts, worded by once::alertText).
QList<HealthAlert> healthAlerts(const std::optional<once::DeliveryStats> &stats,
                                const QList<once::WorkerRecord> &workers, qint64 nowMs,
                                const once::AlertThresholds &thresholds);

} // namespace once::ui
