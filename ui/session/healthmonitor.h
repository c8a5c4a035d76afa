#pragma once

#include "session/health.h"

#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

#include <optional>

namespace once::ui {

class EngineController;
class StoreSession;

// Watches the open store whatever page is shown: its numbers and every worker on it
// (headless ones anywhere, and this console's own, whose breaker it hears of at once),
// every couple of seconds and whenever the store announces a change. The banner, the
// status bar and the tray read their alerts and worker counts here, so they agree.
class HealthMonitor final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(HealthMonitor)

public:
    static constexpr int PollIntervalMs = 2000;

    explicit HealthMonitor(EngineController *engine, QObject *parent = nullptr);

    void setSession(StoreSession *session);
    // Asks the store now, unless an answer is still on its way.
    void refresh();

    // The last answer, with this console's engine as it is now.
    std::optional<once::DeliveryStats> stats() const { return m_stats; }
    QList<once::WorkerRecord> workers() const;
    once::WorkerTally tally() const { return m_tally; }
    // The store's alert thresholds as last read (the defaults until then).
    once::AlertThresholds thresholds() const { return m_thresholds; }
    QList<HealthAlert> alerts() const { return m_alerts; }
    // When the store last answered (ms since the epoch); 0: not yet.
    qint64 readAtMs() const { return m_readAtMs; }

signals:
    // Alerts, worker counts or numbers changed (or may have: time passed).
    void changed();

private:
    void onHealthLoaded(quint64 token, const once::DeliveryStats &stats,
                        const QList<once::WorkerRecord> &workers, const once::AlertThresholds &thresholds);
    void evaluate();

    EngineController *m_engine = nullptr;
    StoreSession *m_session = nullptr;
    QList<QMetaObject::Connection> m_sessionConnections;
    quint64 m_pendingToken = 0;
    QElapsedTimer m_pendingSince;
    QTimer m_pollTimer;
    std::optional<once::DeliveryStats> m_stats;
    QList<once::WorkerRecord> m_storeWorkers;
    qint64 m_readAtMs = 0;
    once::AlertThresholds m_thresholds;
    once::WorkerTally m_tally;
    QList<HealthAlert> m_alerts;
};

} // namespace once::ui
