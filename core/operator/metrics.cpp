#include "operator/metrics.h"

#include "store/database.h"

#include <QVariant>

namespace once {

bool Metrics::recordSample(const QueueCounts &counts, qint64 atMs, QString *error)
{
    auto &insert = m_db.prepared(QStringLiteral(
        "INSERT INTO queue_samples (at, ready, in_flight, delayed, dead, oldest_ready_age_ms) VALUES (?, ?, ?, ?, ?, ?)"));
    insert.addBindValue(atMs);
    insert.addBindValue(counts.ready);
    insert.addBindValue(counts.inFlight);
    insert.addBindValue(counts.delayed);
    insert.addBindValue(counts.dead);
    insert.addBindValue(counts.oldestReadyAgeMs ? QVariant(*counts.oldestReadyAgeMs) : QVariant());
    return m_db.exec(insert, error);
}

std::optional<MetricSeries> Metrics::series(qint64 fromMs, qint64 toMs, qint64 bucketMs, QString *error)
{
    MetricSeries series;
    const qint64 width = std::max<qint64>(1000, bucketMs);
    series.bucketMs = width;
    const qint64 from = fromMs - fromMs % width;
    const auto middle = [width](qint64 bucket) { return double(bucket * width + width / 2); };
    // Several workers may sample the same moment: a bucket shows the largest value.
    auto &samples = m_db.prepared(QStringLiteral(
        "SELECT at / ? AS bucket, MAX(ready), MAX(COALESCE(oldest_ready_age_ms, 0)) FROM queue_samples "
        "WHERE at >= ? AND at < ? GROUP BY bucket ORDER BY bucket"));
    samples.addBindValue(width);
    samples.addBindValue(from);
    samples.addBindValue(toMs);
    if (!m_db.exec(samples, error))
        return std::nullopt;
    while (samples.next()) {
        const double x = middle(samples.value(0).toLongLong());
        series.ready.append({x, samples.value(1).toDouble()});
        series.oldestReadyAgeS.append({x, samples.value(2).toDouble() / 1000.0});
    }
    samples.finish();

    auto &sends = m_db.prepared(sendsPerBucketSql());
    sends.addBindValue(width);
    sends.addBindValue(from);
    sends.addBindValue(toMs);
    if (!m_db.exec(sends, error))
        return std::nullopt;
    while (sends.next()) {
        const double x = middle(sends.value(0).toLongLong());
        series.appliedPerBucket.append({x, sends.value(1).toDouble()});
        series.failedPerBucket.append({x, sends.value(2).toDouble()});
    }
    sends.finish();
    return series;
}

QString Metrics::sendsPerBucketSql()
{
    return QStringLiteral("SELECT at / ? AS bucket, SUM(CASE WHEN outcome = 'applied' THEN 1 ELSE 0 END), "
                          "SUM(CASE WHEN outcome <> 'applied' THEN 1 ELSE 0 END) FROM attempts "
                          "WHERE at >= ? AND at < ? AND step = 'send' GROUP BY bucket ORDER BY bucket");
}

bool Metrics::purgeBefore(qint64 beforeMs, QString *error)
{
    auto &remove = m_db.prepared(QStringLiteral("DELETE FROM queue_samples WHERE at < ?"));
    remove.addBindValue(beforeMs);
    return m_db.exec(remove, error);
}

} // namespace once
