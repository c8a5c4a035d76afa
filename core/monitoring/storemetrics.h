#pragma once

#include "alerting/alertrules.h"
#include "operator/inspector.h"
#include "monitoring/sendstatistics.h"
#include "store/workerregistry.h"

#include <QByteArray>

#include <optional>

namespace once {

class Store;

// The store-wide numbers behind `once serve`'s /metrics: the same ones `once stats` and
// the console's overview show (Inspector::stats, WorkerRegistry::list), plus every send
// in the history by outcome and duration (one pass over the history's sends: a scrape
// every 15 s or more, not every second, on a large store). Read on the thread that owns
// the store. once_reminders_applied_total counts the ledger's applied keys, so retention
// lowers it now and then, which Prometheus reads as a counter reset.
struct StoreMetrics
{
    DeliveryStats stats;          // with a broker's queue, stats.queue holds the broker's counts
    QList<WorkerRecord> workers;
    SendStatistics sends;         // over the history the store keeps (its retention)
    AlertThresholds thresholds;   // the store's, which once_alerts_firing is judged by
    qint64 atMs = 0;

    // queueCounts: a broker's counts to use instead of the store's own queue (as
    // `once stats --queue` does); nullopt for the store's queue.
    static std::optional<StoreMetrics> read(Store &store, const std::optional<QueueCounts> &queueCounts,
                                            QString *error);
};

QByteArray storeExposition(const StoreMetrics &metrics);

// For /readyz: empty when the store answers, its schema is the one this program knows
// and it takes writes (storeUnwritability); else why not, in one line without secrets.
QString storeUnreadiness(Store &store);
// Empty when the store can take a write as far as can be told without writing: on
// PostgreSQL a primary not in read-only mode, on SQLite a writable file on a disk that
// is neither read-only nor full; else why not.
QString storeUnwritability(Store &store);
// Below this much free space a SQLite store's disk counts as full: a commit needs room
// for its WAL frames.
inline constexpr quint64 MinFreeDiskBytes = 1024 * 1024;

} // namespace once
