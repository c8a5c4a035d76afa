#pragma once

#include "monitoring/exposition.h"

#include <QMap>
#include <QString>

#include <utility>

namespace once {

// Partner calls by how they ended and how long they took: once_sends_total and
// once_send_duration_seconds. A worker keeps its own (in EngineCounters, on the engine's
// thread, copied out with the other counters); the store-wide ones are read from the
// history (StoreMetrics). Outcomes are the history's words for a send: applied,
// transient, in-doubt, held, permanent; error classes are the stable ones of SendOutcome.
struct SendStatistics
{
    // Seconds: the partner usually answers in milliseconds; a timeout is up to 900 s.
    static QList<double> durationBoundsSeconds();

    QMap<std::pair<QString, QString>, qint64> sends; // (outcome, error class) -> sends
    Histogram duration = Histogram::withBounds(durationBoundsSeconds());

    void record(const QString &outcome, const QString &errorClass, qint64 latencyMs);
};

} // namespace once
