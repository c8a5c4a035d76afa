#pragma once

#include "queues/messagequeue.h"

#include <QList>
#include <QPointF>

#include <optional>

namespace once {

class Database;

// Time series for the console's charts. x is milliseconds since the epoch, the middle of
// a bucket; buckets are bucketMs wide and start at multiples of bucketMs since the epoch,
// so a bucket holds the same sends from one reading to the next. Buckets without data
// are left out.
struct MetricSeries
{
    qint64 bucketMs = 60000;
    QList<QPointF> ready;            // messages ready, the largest sample in the bucket
    QList<QPointF> oldestReadyAgeS;  // seconds, the largest sample in the bucket
    QList<QPointF> appliedPerBucket; // sends applied in the bucket, from the history
    QList<QPointF> failedPerBucket;  // sends failed in the bucket, from the history
};

// Samples of the queue written by workers, and series read from them and from the
// history. Workers sample every few seconds; samples older than the retention window
// are removed with the rest.
class Metrics final
{
public:
    explicit Metrics(Database &db) : m_db(db) {}

    bool recordSample(const QueueCounts &counts, qint64 atMs, QString *error);
    // Every bucket that overlaps [fromMs, toMs).
    std::optional<MetricSeries> series(qint64 fromMs, qint64 toMs, qint64 bucketMs, QString *error);
    bool purgeBefore(qint64 beforeMs, QString *error);

    // The sends of each bucket, as series() reads them; its values: bucket width, from, to.
    static QString sendsPerBucketSql();

private:
    Database &m_db;
};

} // namespace once
