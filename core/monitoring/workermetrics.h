#pragma once

#include <QByteArray>

namespace once {

struct EngineCounters;

// One worker's /metrics: what its engine counted since it started (its sends, their
// durations, its circuit breaker), and nothing read from the store, so that a scrape
// costs the delivery path nothing but a copy of the counters.
QByteArray workerExposition(const EngineCounters &counters);

} // namespace once
