#pragma once

#include "messagequeue.h"

#include <QList>
#include <QPointF>

#include <optional>

namespace once {

class Database;

// Time series for the console's charts. x is milliseconds since the epoch.
struct MetricSeries
{
    QList<QPointF> ready;           // messages ready, sampled
    QList<QPointF> oldestReadyAgeS; // seconds, sampled
    QList<QPointF> appliedPerMin;   // sends applied per minute, from the history
    QList<QPointF> failedPerMin;    // sends failed per minute, from the history
};

// Samples of the queue written by workers, and series read from them and from the
// history. Workers sample every few seconds; samples older than the retention window
// are removed with the rest.
class Metrics final
{
public:
    explicit Metrics(Database &db) : m_db(db) {}

    bool recordSample(const QueueCounts &counts, qint64 atMs, QString *error);
    std::optional<MetricSeries> series(qint64 fromMs, qint64 toMs, int buckets, QString *error);
    bool purgeBefore(qint64 beforeMs, QString *error);

private:
    Database &m_db;
};

} // namespace once
