#include "store/workerregistry.h"

#include "store/database.h"
#include "delivery/engine.h"
#include "text/jsonvalues.h"

#include <QJsonDocument>
#include <QVariant>

namespace once {

bool WorkerRecord::isGone(qint64 nowMs) const
{
    return state != QLatin1String("stopped") && nowMs - heartbeatAtMs > WorkerRegistry::GoneAfterMs;
}

QString WorkerRecord::status(qint64 nowMs) const
{
    return isGone(nowMs) ? QStringLiteral("gone") : state;
}

bool WorkerRecord::isLive(qint64 nowMs) const
{
    return state != QLatin1String("stopped") && !isGone(nowMs);
}

bool WorkerRecord::isHoldingBack(qint64 nowMs) const
{
    return isLive(nowMs) && breaker != QLatin1String("closed");
}

bool WorkerRecord::partnerRefusesEveryone() const
{
    return failingSinceMs > 0
           && (lastErrorClass == QLatin1String("credentials-refused") || lastErrorClass == QLatin1String("partner-refusing"));
}

bool WorkerRecord::holdsAgainstItsStart() const
{
    return inDoubtPolicy == QLatin1String("hold") && configuredInDoubtPolicy == QLatin1String("resend");
}

QString WorkerRegistry::breakerName(CircuitBreaker::State state)
{
    switch (state) {
    case CircuitBreaker::State::Closed:
        return QStringLiteral("closed");
    case CircuitBreaker::State::Open:
        return QStringLiteral("open");
    case CircuitBreaker::State::HalfOpen:
        return QStringLiteral("half-open");
    }
    return QStringLiteral("closed");
}

QJsonObject WorkerRecord::toJson(qint64 nowMs) const
{
    return QJsonObject{
        {QStringLiteral("id"), id},
        {QStringLiteral("host"), host},
        {QStringLiteral("pid"), pid},
        {QStringLiteral("version"), version},
        {QStringLiteral("partner"), partner},
        {QStringLiteral("concurrency"), concurrency},
        {QStringLiteral("status"), status(nowMs)},
        {QStringLiteral("started_at"), formatTime(startedAtMs)},
        {QStringLiteral("heartbeat_at"), formatTime(heartbeatAtMs)},
        {QStringLiteral("stopped_at"), stoppedAtMs ? QJsonValue(formatTime(stoppedAtMs)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("applied"), applied},
        {QStringLiteral("duplicates_suppressed"), duplicates},
        {QStringLiteral("retries"), retries},
        {QStringLiteral("dead_lettered"), deadLettered},
        {QStringLiteral("held"), held},
        {QStringLiteral("in_flight"), inFlight},
        {QStringLiteral("breaker"), breaker},
        {QStringLiteral("failures"), failures},
        {QStringLiteral("consecutive_failures"), consecutiveFailures},
        {QStringLiteral("failing_since"), failingSinceMs ? QJsonValue(formatTime(failingSinceMs)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("last_failure_at"), lastFailureAtMs ? QJsonValue(formatTime(lastFailureAtMs)) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("last_error_class"), lastErrorClass.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(lastErrorClass)},
        {QStringLiteral("last_http_status"), lastHttpStatus ? QJsonValue(lastHttpStatus) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("in_doubt_policy"), inDoubtPolicy.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(inDoubtPolicy)},
        {QStringLiteral("in_doubt_policy_configured"),
         configuredInDoubtPolicy.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(configuredInDoubtPolicy)},
        {QStringLiteral("store_lost_at"), timeOrNull(storeLostAtMs)},
        {QStringLiteral("store_back_at"), timeOrNull(storeBackAtMs)},
        {QStringLiteral("failing_partner"), failingPartner.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(failingPartner)},
        {QStringLiteral("partners"), partners},
    };
}

bool WorkerRegistry::announce(const WorkerRecord &worker, QString *error)
{
    auto &upsert = m_db.prepared(QStringLiteral(
        "INSERT INTO workers (id, host, pid, version, partner, concurrency, state, started_at, heartbeat_at, "
        "in_doubt_policy, in_doubt_configured) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, version = excluded.version, "
        "partner = excluded.partner, concurrency = excluded.concurrency, state = 'running', "
        "started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, stopped_at = NULL, applied = 0, "
        "duplicates = 0, retries = 0, dead_lettered = 0, held = 0, in_flight = 0, breaker = 'closed', failures = 0, "
        "consecutive_failures = 0, failing_since = NULL, last_failure_at = NULL, last_error_class = NULL, "
        "store_lost_at = NULL, store_back_at = NULL, last_http_status = NULL, "
        "in_doubt_policy = excluded.in_doubt_policy, in_doubt_configured = excluded.in_doubt_configured"));
    const qint64 now = nowMs();
    upsert.addBindValue(worker.id);
    upsert.addBindValue(worker.host);
    upsert.addBindValue(worker.pid);
    upsert.addBindValue(worker.version);
    upsert.addBindValue(worker.partner);
    upsert.addBindValue(worker.concurrency);
    upsert.addBindValue(now);
    upsert.addBindValue(now);
    upsert.addBindValue(worker.inDoubtPolicy);
    upsert.addBindValue(worker.configuredInDoubtPolicy);
    return m_db.exec(upsert, error) && m_db.notify(Channel::Activity, error);
}

bool WorkerRegistry::heartbeat(const QString &id, const QString &state, const EngineCounters &counters,
                               QString *error)
{
    return writeProgress(id, state, counters, false, error);
}

bool WorkerRegistry::retire(const QString &id, const EngineCounters &counters, QString *error)
{
    return writeProgress(id, QStringLiteral("stopped"), counters, true, error);
}

bool WorkerRegistry::writeProgress(const QString &id, const QString &state, const EngineCounters &counters,
                                   bool stopping, QString *error)
{
    auto &update = m_db.prepared(QStringLiteral(
        "UPDATE workers SET state = ?, heartbeat_at = ?, stopped_at = ?, applied = ?, duplicates = ?, retries = ?, "
        "dead_lettered = ?, held = ?, in_flight = ?, breaker = ?, failures = ?, consecutive_failures = ?, "
        "failing_since = ?, last_failure_at = ?, last_error_class = ?, store_lost_at = ?, store_back_at = ?, "
        "last_http_status = ?, in_doubt_policy = ?, failing_partner = ?, partners = ? WHERE id = ?"));
    const qint64 now = nowMs();
    update.addBindValue(state);
    update.addBindValue(now);
    update.addBindValue(stopping ? QVariant(now) : QVariant());
    update.addBindValue(counters.applied);
    update.addBindValue(counters.duplicates);
    update.addBindValue(counters.retries);
    update.addBindValue(counters.deadLettered);
    update.addBindValue(counters.held);
    update.addBindValue(counters.inFlight);
    // A stopped worker holds nothing back.
    update.addBindValue(breakerName(stopping ? CircuitBreaker::State::Closed : counters.breaker));
    update.addBindValue(counters.failures);
    update.addBindValue(counters.consecutiveFailures);
    update.addBindValue(counters.failingSinceMs ? QVariant(counters.failingSinceMs) : QVariant());
    update.addBindValue(counters.lastFailureAtMs ? QVariant(counters.lastFailureAtMs) : QVariant());
    update.addBindValue(counters.lastErrorClass.isEmpty() ? QVariant() : QVariant(counters.lastErrorClass));
    update.addBindValue(counters.storeLostAtMs ? QVariant(counters.storeLostAtMs) : QVariant());
    update.addBindValue(counters.storeBackAtMs ? QVariant(counters.storeBackAtMs) : QVariant());
    update.addBindValue(counters.lastHttpStatus ? QVariant(counters.lastHttpStatus) : QVariant());
    update.addBindValue(inDoubtPolicyName(counters.inDoubtPolicy));
    update.addBindValue(counters.failingPartner.isEmpty() ? QVariant() : QVariant(counters.failingPartner));
    QJsonArray partners;
    for (const PartnerCounters &partner : counters.partners) {
        QJsonObject object = partner.toJson(now);
        if (stopping)
            object.insert(QStringLiteral("breaker"), breakerName(CircuitBreaker::State::Closed));
        partners.append(object);
    }
    update.addBindValue(QString::fromUtf8(QJsonDocument(partners).toJson(QJsonDocument::Compact)));
    update.addBindValue(id);
    return m_db.exec(update, error) && m_db.notify(Channel::Activity, error);
}

std::optional<QList<WorkerRecord>> WorkerRegistry::list(QString *error)
{
    auto &query = m_db.prepared(QStringLiteral(
        "SELECT id, host, pid, version, partner, concurrency, state, started_at, heartbeat_at, stopped_at, applied, "
        "duplicates, retries, dead_lettered, held, in_flight, breaker, failures, consecutive_failures, failing_since, "
        "last_failure_at, last_error_class, store_lost_at, store_back_at, last_http_status, in_doubt_policy, "
        "in_doubt_configured, failing_partner, partners FROM workers "
        "ORDER BY CASE WHEN state = 'stopped' THEN 1 ELSE 0 END, heartbeat_at DESC, id"));
    if (!m_db.exec(query, error))
        return std::nullopt;
    QList<WorkerRecord> workers;
    while (query.next()) {
        WorkerRecord worker;
        worker.id = query.value(0).toString();
        worker.host = query.value(1).toString();
        worker.pid = query.value(2).toLongLong();
        worker.version = query.value(3).toString();
        worker.partner = query.value(4).toString();
        worker.concurrency = query.value(5).toInt();
        worker.state = query.value(6).toString();
        worker.startedAtMs = query.value(7).toLongLong();
        worker.heartbeatAtMs = query.value(8).toLongLong();
        worker.stoppedAtMs = query.value(9).toLongLong();
        worker.applied = query.value(10).toLongLong();
        worker.duplicates = query.value(11).toLongLong();
        worker.retries = query.value(12).toLongLong();
        worker.deadLettered = query.value(13).toLongLong();
        worker.held = query.value(14).toLongLong();
        worker.inFlight = query.value(15).toInt();
        worker.breaker = query.value(16).toString();
        worker.failures = query.value(17).toLongLong();
        worker.consecutiveFailures = query.value(18).toInt();
        worker.failingSinceMs = query.value(19).toLongLong();
        worker.lastFailureAtMs = query.value(20).toLongLong();
        worker.lastErrorClass = query.value(21).toString();
        worker.storeLostAtMs = query.value(22).toLongLong();
        worker.storeBackAtMs = query.value(23).toLongLong();
        worker.lastHttpStatus = query.value(24).toInt();
        worker.inDoubtPolicy = query.value(25).toString();
        worker.configuredInDoubtPolicy = query.value(26).toString();
        worker.failingPartner = query.value(27).toString();
        worker.partners = QJsonDocument::fromJson(query.value(28).toString().toUtf8()).array();
        workers.append(std::move(worker));
    }
    query.finish();
    return workers;
}

bool WorkerRegistry::purgeBefore(qint64 beforeMs, QString *error)
{
    auto &remove = m_db.prepared(QStringLiteral("DELETE FROM workers WHERE heartbeat_at < ?"));
    remove.addBindValue(beforeMs);
    return m_db.exec(remove, error);
}

} // namespace once
