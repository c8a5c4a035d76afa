#include "session/healthmonitor.h"

#include "session/enginecontroller.h"
#include "session/storesession.h"

#include "store/database.h"

#include <algorithm>

namespace once::ui {

namespace {
// An answer that has not come back by then is given up on, so one lost answer does not
// stop the watch.
constexpr qint64 PendingTimeoutMs = 15000;
} // namespace

HealthMonitor::HealthMonitor(EngineController *engine, QObject *parent) : QObject(parent), m_engine(engine)
{
    m_pollTimer.setInterval(PollIntervalMs);
    connect(&m_pollTimer, &QTimer::timeout, this, [this] {
        refresh();
        evaluate(); // durations and gone workers move with the clock alone
    });
    m_pollTimer.start();
    if (m_engine) {
        connect(m_engine, &EngineController::stateChanged, this, &HealthMonitor::evaluate);
        connect(m_engine, &EngineController::countersChanged, this, &HealthMonitor::evaluate);
    }
}

void HealthMonitor::setSession(StoreSession *session)
{
    // The previous session may already be gone, so its connections are dropped by handle.
    for (const auto &connection : std::as_const(m_sessionConnections))
        disconnect(connection);
    m_sessionConnections.clear();
    m_session = session;
    m_pendingToken = 0;
    m_stats.reset();
    m_storeWorkers.clear();
    m_thresholds = {};
    m_readAtMs = 0;
    if (m_session) {
        m_sessionConnections << connect(m_session, &StoreSession::healthLoaded, this,
                                        &HealthMonitor::onHealthLoaded)
                             << connect(m_session, &StoreSession::failed, this,
                                        [this](quint64 token) {
                                            if (token == m_pendingToken)
                                                m_pendingToken = 0; // the last numbers stay
                                        })
                             << connect(m_session, &StoreSession::storeChanged, this, &HealthMonitor::refresh)
                             << connect(m_session, &StoreSession::opened, this, &HealthMonitor::refresh);
        refresh();
    }
    evaluate();
}

void HealthMonitor::refresh()
{
    if (!m_session)
        return;
    if (m_pendingToken != 0 && m_pendingSince.elapsed() < PendingTimeoutMs)
        return;
    m_pendingToken = m_session->loadHealth();
    m_pendingSince.start();
}

void HealthMonitor::onHealthLoaded(quint64 token, const DeliveryStats &stats,
                                   const QList<WorkerRecord> &workers, const AlertThresholds &thresholds)
{
    if (token != m_pendingToken)
        return;
    m_pendingToken = 0;
    m_stats = stats;
    m_storeWorkers = workers;
    m_thresholds = thresholds;
    m_readAtMs = nowMs();
    evaluate();
}

// The console's own engine as its row would read now: its breaker is known here at
// once, a heartbeat later on the store.
QList<WorkerRecord> HealthMonitor::workers() const
{
    QList<WorkerRecord> workers = m_storeWorkers;
    if (!m_engine || m_engine->state() == EngineController::State::Stopped)
        return workers;
    const EngineConfig config = m_engine->config();
    const EngineCounters counters = m_engine->counters();
    auto own = std::find_if(workers.begin(), workers.end(),
                            [&config](const WorkerRecord &worker) { return worker.id == config.workerId; });
    if (own == workers.end()) {
        WorkerRecord record;
        record.id = config.workerId;
        record.startedAtMs = nowMs();
        workers.prepend(record);
        own = workers.begin();
    }
    own->state = counters.paused ? QStringLiteral("paused") : QStringLiteral("running");
    own->heartbeatAtMs = nowMs();
    own->stoppedAtMs = 0;
    own->breaker = WorkerRegistry::breakerName(counters.breaker);
    own->failures = counters.failures;
    own->consecutiveFailures = counters.consecutiveFailures;
    own->failingSinceMs = counters.failingSinceMs;
    own->lastFailureAtMs = counters.lastFailureAtMs;
    own->lastErrorClass = counters.lastErrorClass;
    return workers;
}

void HealthMonitor::evaluate()
{
    const qint64 now = nowMs();
    const QList<WorkerRecord> all = workers();
    m_tally = WorkerTally::of(all, now);
    m_alerts = healthAlerts(m_stats, all, now, m_thresholds);
    emit changed();
}

} // namespace once::ui
