#include "alerting/workertally.h"

namespace once {

WorkerTally WorkerTally::of(const QList<WorkerRecord> &workers, qint64 nowMs)
{
    WorkerTally tally;
    for (const WorkerRecord &worker : workers) {
        const QString status = worker.status(nowMs);
        if (status == QLatin1String("running"))
            ++tally.running;
        else if (status == QLatin1String("paused"))
            ++tally.paused;
        else if (status == QLatin1String("gone"))
            ++tally.gone;
        else
            ++tally.stopped;
        if (worker.isHoldingBack(nowMs)) {
            ++tally.holdingBack;
            if (status == QLatin1String("running")) {
                ++tally.runningHoldingBack;
                if (worker.failingSinceMs > 0 &&
                    (tally.holdingBackSinceMs == 0 || worker.failingSinceMs < tally.holdingBackSinceMs))
                    tally.holdingBackSinceMs = worker.failingSinceMs;
            }
        }
        if (worker.heartbeatAtMs > tally.lastHeartbeatAtMs) {
            tally.lastHeartbeatAtMs = worker.heartbeatAtMs;
            tally.lastWorkerId = worker.id;
        }
    }
    return tally;
}

} // namespace once
