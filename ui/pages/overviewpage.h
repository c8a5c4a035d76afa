#pragma once

#include "operator/inspector.h"
#include "operator/metrics.h"
#include "pages/page.h"

#include <QElapsedTimer>
#include <QTimer>

#include <optional>

class QComboBox;
class QLabel;
class QStackedWidget;

namespace once::ui {

class AlertBanner;
class EngineController;
class HealthMonitor;
class MetricChart;
class Tile;

// "Is anything wrong?" at a glance: the queue and the ledger in tiles, their history in
// charts, and a banner naming what needs attention now. A line names where the queue
// lives (in the store, or at a broker); what a broker cannot report (RabbitMQ without its
// management API) reads "not available", with the reason, rather than a made-up zero.
class OverviewPage final : public Page
{
    Q_OBJECT

public:
    // health: the window's watch over the store, whose alerts the banner shows; without
    // one the page keeps its own.
    explicit OverviewPage(EngineController *engine, HealthMonitor *health = nullptr,
                          QWidget *parent = nullptr);
    ~OverviewPage() override;

    QString title() const override { return tr("Overview"); }
    void setSession(StoreSession *session) override;
    void refresh() override;
    // The oldest message's age and the charts move with the clock alone: with live
    // updates, still poll every five seconds.
    int refreshIntervalMs(bool liveUpdates) const override { return liveUpdates ? 5000 : PollIntervalMs; }

private:
    void load();
    void onOverviewLoaded(quint64 token, const once::DeliveryStats &stats, const once::MetricSeries &series);
    void onFailed(quint64 token, const QString &error);
    void showStats(const once::DeliveryStats &stats);
    void showSeries(const once::MetricSeries &series, qint64 windowMs);
    void clearStats();
    void showQueuePlace();
    void updateAlerts();
    void showDelayedCaption();
    qint64 selectedWindowMs() const;

    StoreSession *m_session = nullptr;
    EngineController *m_engine = nullptr;
    HealthMonitor *m_health = nullptr;
    bool m_ownsHealth = false;
    QTimer m_clock;
    qint64 m_statsReadAtMs = 0;
    QList<QMetaObject::Connection> m_sessionConnections;
    quint64 m_pendingToken = 0;
    qint64 m_pendingWindowMs = 0;
    QElapsedTimer m_pendingSince;
    std::optional<once::DeliveryStats> m_stats;

    AlertBanner *m_banner = nullptr;
    QStackedWidget *m_stack = nullptr;
    QLabel *m_queuePlace = nullptr;       // "queueLabel"
    QLabel *m_queueUnavailable = nullptr; // "queueUnavailable"
    QLabel *m_partitionLags = nullptr; // a partitioned queue's (Kafka's) lag, partition by partition
    QLabel *m_pausedPartners = nullptr;   // "pausedPartners": what waits for each paused partner
    QLabel *m_updated = nullptr;
    QLabel *m_error = nullptr;
    QComboBox *m_window = nullptr;
    Tile *m_ready = nullptr;
    Tile *m_inFlight = nullptr;
    Tile *m_delayed = nullptr;
    Tile *m_dead = nullptr;
    Tile *m_inDoubt = nullptr;
    Tile *m_oldest = nullptr;
    Tile *m_applied = nullptr;
    Tile *m_duplicates = nullptr;
    Tile *m_errorRate = nullptr;
    Tile *m_lateness = nullptr;
    MetricChart *m_depthChart = nullptr;
    MetricChart *m_ageChart = nullptr;
    MetricChart *m_throughputChart = nullptr;
    MetricChart *m_failuresChart = nullptr;
};

} // namespace once::ui
