#pragma once

#include "operator/inspector.h"
#include "store/workerregistry.h"

#include <QString>

namespace once::ui {

// Whether letters redriven now would be sent, as far as the store can tell: which
// workers run on it and whether their circuit breakers hold them back (their heartbeats),
// and what the partner answered over the last minute (the history's sends: at least one
// accepted in the window is "answering").
struct RedriveReadiness
{
    enum class Partner
    {
        Answering,
        Failing,
        Quiet
    };
    enum class Severity
    {
        None,
        Caution,
        Warning
    };

    int runningWorkers = 0;
    int pausedWorkers = 0;
    int holdingBackWorkers = 0; // running, with an open (or half-open) breaker
    qint64 failingSinceMs = 0;  // the earliest failed spell among those
    Partner partner = Partner::Quiet;
    QString workersText; // "2 running on this store"
    QString partnerText; // "answering: last minute 40 sends, 2 failed; last accepted 12:01:02"
    Severity severity = Severity::None;
    QString warning; // empty when there is nothing to warn of
};

RedriveReadiness assessRedriveReadiness(const QList<once::WorkerRecord> &workers,
                                        const once::PartnerActivity &partner, qint64 nowMs);

} // namespace once::ui
