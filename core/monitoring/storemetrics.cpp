#include "monitoring/storemetrics.h"

#include "alerting/alertsettings.h"
#include "alerting/workertally.h"
#include "monitoring/metricnames.h"
#include "store/migrations.h"
#include "store/store.h"

#include <QFile>
#include <QFileInfo>
#include <QVariant>

#include <cerrno>
#include <cstring>

#include <sys/statvfs.h>
#include <unistd.h>

namespace once {

namespace {

// Every send in the history by outcome and error class, with the duration histogram's
// buckets counted in the same pass over the attempts.
bool readSends(Database &db, SendStatistics *sends, QString *error)
{
    const QList<double> bounds = SendStatistics::durationBoundsSeconds();
    QString sql = QStringLiteral("SELECT outcome, COALESCE(error_class, ''), COUNT(*), "
                                 "COALESCE(SUM(CASE WHEN latency_ms > 0 THEN latency_ms ELSE 0 END), 0)");
    for (const double bound : bounds)
        sql += QStringLiteral(", SUM(CASE WHEN COALESCE(latency_ms, 0) <= %1 THEN 1 ELSE 0 END)")
                   .arg(qint64(bound * 1000));
    sql += QStringLiteral(" FROM attempts WHERE step = 'send' GROUP BY outcome, COALESCE(error_class, '')");
    auto &query = db.prepared(sql);
    if (!db.exec(query, error))
        return false;
    *sends = SendStatistics();
    while (query.next()) {
        const qint64 count = query.value(2).toLongLong();
        sends->sends[{query.value(0).toString(), query.value(1).toString()}] = count;
        sends->duration.sum += query.value(3).toDouble() / 1000.0;
        qint64 below = 0; // sends at or under the previous bound
        for (qsizetype i = 0; i < bounds.size(); ++i) {
            const qint64 atOrUnder = query.value(int(4 + i)).toLongLong();
            sends->duration.counts[i] += atOrUnder - below;
            below = atOrUnder;
        }
        sends->duration.counts.last() += count - below;
    }
    query.finish();
    return true;
}

} // namespace

std::optional<StoreMetrics> StoreMetrics::read(Store &store, const std::optional<QueueCounts> &queueCounts,
                                               QString *error)
{
    StoreMetrics metrics;
    metrics.atMs = nowMs();
    auto stats = store.inspector().stats(error);
    if (!stats)
        return std::nullopt;
    metrics.stats = *stats;
    if (queueCounts)
        metrics.stats.queue = *queueCounts;
    auto workers = store.workers().list(error);
    if (!workers)
        return std::nullopt;
    metrics.workers = *workers;
    if (!readSends(store.database(), &metrics.sends, error))
        return std::nullopt;
    auto thresholds = readAlertThresholds(store.database(), error);
    if (!thresholds)
        return std::nullopt;
    metrics.thresholds = *thresholds;
    return metrics;
}

QByteArray storeExposition(const StoreMetrics &metrics)
{
    const DeliveryStats &stats = metrics.stats;
    Exposition out;
    out.counter(MetricNames::RemindersApplied,
                QStringLiteral("Send keys the partner accepted, in the ledger (retention removes old ones)."),
                double(stats.acked));
    out.counter(MetricNames::DuplicatesSuppressed,
                QStringLiteral("Deliveries of an already handled send key acknowledged without a send, in the ledger."),
                double(stats.duplicateDeliveries));
    out.counter(MetricNames::RemindersExpired,
                QStringLiteral("Send keys whose reminder expired before it could be sent (not sent), in the ledger."),
                double(stats.expired));
    addSends(out, metrics.sends);

    // A broker that could not count (its management API is down) reports no queue
    // numbers rather than zeros that would read as an empty queue.
    if (stats.queue.unavailable.isEmpty()) {
        out.family(QStringLiteral("once_queue_messages"), Exposition::Type::Gauge,
                   QStringLiteral("Messages on the queue by state: ready, in_flight (leased), delayed (retries, delays)."));
        const QString name = QStringLiteral("once_queue_messages");
        out.sample(name, {{QStringLiteral("state"), QStringLiteral("ready")}}, double(stats.queue.ready));
        out.sample(name, {{QStringLiteral("state"), QStringLiteral("in_flight")}}, double(stats.queue.inFlight));
        out.sample(name, {{QStringLiteral("state"), QStringLiteral("delayed")}}, double(stats.queue.delayed));
        out.gauge(QStringLiteral("once_queue_oldest_ready_age_seconds"),
                  QStringLiteral("How long the oldest ready message has waited (0: none ready)."),
                  double(stats.queue.oldestReadyAgeMs.value_or(0)) / 1000.0);
        out.gauge(QStringLiteral("once_dead_letters"), QStringLiteral("Messages in the dead-letter queue."),
                  double(stats.queue.dead));
    }
    out.gauge(QStringLiteral("once_in_doubt"),
              QStringLiteral("Send keys held for an operator: sent, outcome unknown."), double(stats.inDoubt));
    // As `once stats` reads it (lateness_p50_s, lateness_p95_s). Left out when the last
    // hour applied nothing: no number, rather than a 0 that reads as nothing late.
    if (stats.latenessP50Ms)
        out.gauge(QStringLiteral("once_lateness_p50_seconds"),
                  QStringLiteral("Median time from a reminder's scheduled_at to the partner accepting it, over the "
                                 "last hour's latest accepted sends."),
                  double(*stats.latenessP50Ms) / 1000.0);
    if (stats.latenessP95Ms)
        out.gauge(QStringLiteral("once_lateness_p95_seconds"),
                  QStringLiteral("95th percentile of the time from a reminder's scheduled_at to the partner accepting "
                                 "it, over the last hour's latest accepted sends."),
                  double(*stats.latenessP95Ms) / 1000.0);

    // Every status, also those no worker has, so that a status that empties reads 0.
    const WorkerTally tally = WorkerTally::of(metrics.workers, metrics.atMs);
    const QMap<QString, qint64> byStatus{{QStringLiteral("running"), tally.running},
                                         {QStringLiteral("paused"), tally.paused},
                                         {QStringLiteral("stopped"), tally.stopped},
                                         {QStringLiteral("gone"), tally.gone}};
    out.family(QStringLiteral("once_workers"), Exposition::Type::Gauge,
               QStringLiteral("Workers registered on the store by status (gone: no heartbeat for 15 s)."));
    for (auto it = byStatus.cbegin(); it != byStatus.cend(); ++it)
        out.sample(QStringLiteral("once_workers"), {{QStringLiteral("status"), it.key()}}, double(it.value()));
    out.gauge(MetricNames::BreakerOpen,
              QStringLiteral("Live workers whose circuit breaker keeps them from sending (open or probing)."),
              double(tally.holdingBack));

    // The alerts the console's banner and once watch raise now, by the store's thresholds.
    AlertInputs inputs;
    inputs.stats = stats;
    inputs.workers = metrics.workers;
    out.family(QStringLiteral("once_alerts_firing"), Exposition::Type::Gauge,
               QStringLiteral("1 for each alert firing now by the store's thresholds (once alerts), by rule, "
                              "partner and severity."));
    for (const Alert &alert : evaluateAlerts(inputs, metrics.thresholds, metrics.atMs))
        out.sample(QStringLiteral("once_alerts_firing"),
                   {{QStringLiteral("rule"), alertRuleName(alert.rule)},
                    {QStringLiteral("partner"), alert.partner},
                    {QStringLiteral("severity"), alertSeverityName(alert.severity)}},
                   1.0);
    return out.text();
}

QString storeUnreadiness(Store &store)
{
    Database &db = store.database();
    QString error;
    auto &query = db.prepared(QStringLiteral("SELECT version FROM schema_version"));
    if (!db.exec(query, &error) || !query.next()) {
        query.finish();
        return error.isEmpty() ? QStringLiteral("the store has no schema version") : error;
    }
    const int version = query.value(0).toInt();
    query.finish();
    if (version != latestSchemaVersion())
        return QStringLiteral("the store's schema is version %1, this program's %2")
            .arg(version)
            .arg(latestSchemaVersion());
    return storeUnwritability(store);
}

// A store that reads but cannot take a write answers reads and fails every publish: a
// load balancer should send its clients elsewhere. Asked without writing, so a probe
// every few seconds costs the disk nothing.
QString storeUnwritability(Store &store)
{
    Database &db = store.database();
    // Opened to read only (support staff's console, a reporting job): it writes nothing.
    if (db.isReadOnly())
        return {};
    if (db.isPostgres()) {
        QString error;
        auto &query = db.prepared(QStringLiteral("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')"));
        if (!db.exec(query, &error) || !query.next()) {
            query.finish();
            return error.isEmpty() ? QStringLiteral("the store did not say whether it takes writes") : error;
        }
        const bool standby = query.value(0).toBool();
        const bool readOnly = query.value(1).toString() == QLatin1String("on");
        query.finish();
        if (standby)
            return QStringLiteral("the store's server is a standby: it takes no writes");
        if (readOnly)
            return QStringLiteral("the store's server takes no writes (transaction_read_only is on)");
        return {};
    }
    const QString path = db.location().path;
    struct statvfs disk = {};
    if (::statvfs(QFile::encodeName(QFileInfo(path).absolutePath()).constData(), &disk) != 0)
        return QStringLiteral("the store's folder cannot be looked at: %1").arg(QString::fromLocal8Bit(std::strerror(errno)));
    if (disk.f_flag & ST_RDONLY)
        return QStringLiteral("the store's disk is mounted read-only");
    if (quint64(disk.f_bavail) * disk.f_frsize < MinFreeDiskBytes)
        return QStringLiteral("the store's disk is full (%1 KiB free)").arg(quint64(disk.f_bavail) * disk.f_frsize / 1024);
    if (::access(QFile::encodeName(path).constData(), W_OK) != 0)
        return QStringLiteral("the store's file is not writable by this process");
    return {};
}

} // namespace once
