#pragma once

#include "display/statuscolors.h"

#include "operator/inspector.h"
#include "store/workerregistry.h"

#include <QCoreApplication>
#include <QList>
#include <QString>

#include <optional>

namespace once::ui {

// Every worker on a store, counted by what it does now.
struct WorkerTally
{
    int running = 0;
    int paused = 0;
    int gone = 0;
    int stopped = 0;
    int holdingBack = 0; // of the running and paused: their breaker keeps them from sending

    static WorkerTally of(const QList<once::WorkerRecord> &workers, qint64 nowMs);
    int total() const { return running + paused + gone + stopped; }
    int live() const { return running + paused; }
    // "3 workers: 2 running (1 holding back), 1 gone"; "No worker on this store".
    QString summary() const;
    Severity severity() const;
};

// What the console's alerts compare against (Settings, read once per evaluation).
struct HealthThresholds
{
    // A partner that failed every send for this long is down, not having a blip.
    qint64 partnerDownAfterMs = 60000;
    qint64 oldestAgeLimitMs = 300000;
    // Failed sends in five minutes, none applied, when no worker reports (history).
    int partnerFailingSends = 3;

    static HealthThresholds fromSettings();
};

// One thing that needs attention now. The kind names the topic, so that a change of
// wording (the outage's length) is not a new alert, and notifications can follow the
// topic's start and end.
struct HealthAlert
{
    enum class Kind
    {
        PartnerDown,
        PartnerFailing,
        NoWorker,
        OldestWaiting,
        InDoubt
    };

    Kind kind = Kind::PartnerDown;
    Severity severity = Severity::Warning;
    QString text;
};

// The alerts for a store's numbers (when read) and its workers at nowMs, most severe
// first. Pure: the banner, the tray and the tests share it.
QList<HealthAlert> healthAlerts(const std::optional<once::DeliveryStats> &stats,
                                const QList<once::WorkerRecord> &workers, qint64 nowMs,
                                const HealthThresholds &thresholds);

} // namespace once::ui
