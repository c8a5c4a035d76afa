#pragma once

#include "store/workerregistry.h"

#include <QList>

namespace once {

// Every worker on a store, counted by what it does now. The console's health, its redrive
// readiness, the store's metrics and the alert rules count from this one tally.
struct WorkerTally
{
    int running = 0;
    int paused = 0;
    int gone = 0;
    int stopped = 0;
    int holdingBack = 0;        // of the running and paused: their breaker keeps them from sending
    int runningHoldingBack = 0; // of the running alone
    qint64 holdingBackSinceMs = 0; // the earliest failed spell among the running that hold back; 0: none
    qint64 lastHeartbeatAtMs = 0;  // the latest heartbeat of any worker; 0: none ever
    QString lastWorkerId;          // whose heartbeat that was

    static WorkerTally of(const QList<WorkerRecord> &workers, qint64 nowMs);
    int total() const { return running + paused + gone + stopped; }
    int live() const { return running + paused; }
};

} // namespace once
