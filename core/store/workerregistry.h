#pragma once

#include "delivery/circuitbreaker.h"

#include <QJsonArray>
#include <QJsonObject>
#include <QList>
#include <QString>

#include <optional>

namespace once {

class Database;
struct EngineCounters;

// One worker as it describes itself on the store: who and where it is, and what it
// has done so far. The console lists every worker on a store from these rows, also
// headless ones on other machines that it never talked to.
struct WorkerRecord
{
    QString id;
    QString host;
    qint64 pid = 0;
    QString version;
    QString partner; // shown without credentials
    int concurrency = 0;
    QString state; // running | paused | stopped
    qint64 startedAtMs = 0;
    qint64 heartbeatAtMs = 0;
    qint64 stoppedAtMs = 0;
    qint64 applied = 0;
    qint64 duplicates = 0;
    qint64 retries = 0;
    qint64 deadLettered = 0;
    qint64 held = 0;
    int inFlight = 0;
    // The partner as this worker saw it at its last heartbeat (schema version 6): its
    // circuit breaker, and the spell of failed sends since its last accepted one.
    QString breaker = QStringLiteral("closed"); // closed | open | half-open
    qint64 failures = 0;
    int consecutiveFailures = 0;
    qint64 failingSinceMs = 0; // 0: its last send was accepted (or it sent nothing yet)
    qint64 lastFailureAtMs = 0;
    QString lastErrorClass;
    int lastHttpStatus = 0; // the partner's answer to that failure (schema version 18), 0: none
    // What it does with a send left in doubt (schema version 18): "resend" or "hold", and
    // what it was started with; they differ where the store records that its partner
    // does not honour Idempotency-Key. Empty for a worker of an older version.
    QString inDoubtPolicy;
    QString configuredInDoubtPolicy;
    // Its last spell without the store (schema version 17): when it lost the connection,
    // and when it had it back (0 while the spell lasts, though the worker cannot write
    // then: its heartbeat ages, and the next one says when the store came back).
    qint64 storeLostAtMs = 0;
    qint64 storeBackAtMs = 0;
    // Schema 19: the partner whose spell the fields above tell (the one failing longest),
    // and every partner it sends to, as PartnerCounters::toJson writes them.
    QString failingPartner;
    QJsonArray partners;

    // A worker that says it runs but has not written a heartbeat for a while crashed,
    // was killed or lost its store: it is gone, and its leases will expire.
    bool isGone(qint64 nowMs) const;
    // running, paused, stopped or gone
    QString status(qint64 nowMs) const;
    // Running or paused, with a recent heartbeat.
    bool isLive(qint64 nowMs) const;
    // Live, and its breaker keeps it from sending (it probes the partner now and then).
    bool isHoldingBack(qint64 nowMs) const;
    // Its partner refuses every reminder alike (a refused credential, or the same
    // permanent answer to each): reminders wait for a fix rather than retry themselves well.
    bool partnerRefusesEveryone() const;
    // Holds sends left in doubt though it was started to resend them: the store records
    // that its partner does not honour Idempotency-Key.
    bool holdsAgainstItsStart() const;
    QJsonObject toJson(qint64 nowMs) const;
};

// The workers table (schema version 3; the partner's health since version 6).
class WorkerRegistry final
{
public:
    static constexpr qint64 HeartbeatIntervalMs = 2000;
    // Several missed heartbeats, so that a worker busy with one long store write is
    // not called gone.
    static constexpr qint64 GoneAfterMs = 15000;

    static QString breakerName(CircuitBreaker::State state);

    explicit WorkerRegistry(Database &db) : m_db(db) {}

    // Registers (or re-registers, after a restart with the same id) a running worker.
    bool announce(const WorkerRecord &worker, QString *error);
    bool heartbeat(const QString &id, const QString &state, const EngineCounters &counters, QString *error);
    bool retire(const QString &id, const EngineCounters &counters, QString *error);
    // Every worker, running ones first, then by most recent heartbeat.
    std::optional<QList<WorkerRecord>> list(QString *error);
    // Forgets workers that stopped or vanished before beforeMs.
    bool purgeBefore(qint64 beforeMs, QString *error);

private:
    bool writeProgress(const QString &id, const QString &state, const EngineCounters &counters, bool stopping,
                       QString *error);

    Database &m_db;
};

} // namespace once
