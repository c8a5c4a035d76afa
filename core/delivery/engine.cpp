#include "delivery/engine.h"

#include "delivery/failpoint.h"
#include "delivery/enginestore.h"
#include "delivery/partnersender.h"
#include "operator/eventverdict.h"
#include "partners/partnerprofile.h"
#include "store/store.h"
#include "text/jsonvalues.h"
#include "text/quantities.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QSqlDriver>
#include <QTimeZone>
#include <QSysInfo>
#include <QThread>

#include <QLoggingCategory>

Q_LOGGING_CATEGORY(lcEngine, "once.core.engine")

namespace once {

namespace {

// How an expired reminder is told in its history: "expired at 2026-12-06T21:00:00.000Z;
// 3 h late", lateMs being how long after its scheduled time it would have been sent. (Not
// in model/reminder: the parser stays free of the text helpers, as its fuzzer links it.)
QString expiryText(qint64 expiresAtMs, qint64 lateMs)
{
    return QStringLiteral("expired at %1; %2 late").arg(formatTime(expiresAtMs), formatDuration(std::max<qint64>(0, lateMs)));
}

constexpr int MaxLeaseBatch = 256;
// After a failed store write (a lost connection, a deadlock victim): soon, not at once.
constexpr int StoreRetryMs = 250;
// How long an outcome may wait for a turn while claimed deliveries keep the sends busy.
constexpr qint64 MaxWriteWaitMs = 25;
// The most a worker claims ahead of its sends, in send slots' worth (see leaseAhead()).
constexpr int MaxClaimAheadRounds = 3;
// Smaller turns run on one connection: splitting them saves the server less time than
// the second thread and backend cost when workers share the CPU with the database.
constexpr int MinSplitTurnHalf = 32;
// How long a permanent store failure may last before the engine gives up (see
// noteStoreFailure): long enough for a brief I/O error or a failover's read-only moment.
constexpr qint64 PermanentStoreFailureMs = 10000;
// How long a starting worker keeps trying to register while its store's connection is
// being lost (a failover): as long as a running one keeps trying before giving up.
constexpr qint64 RegisterRetryMs = PermanentStoreFailureMs;
// What a queue that cannot count waits beyond a lease before it is called idle: the
// poll that would find a delivery offered again as the lease ends.
constexpr qint64 UnknownBacklogQuietMarginMs = 1500;
// How long after its due time a retry this worker scheduled may take to be offered again:
// a broker's move from a delay queue to the queue (RabbitMQ's dead-lettering) counts the
// message in neither for that moment.
constexpr qint64 RetryArrivalMarginMs = 1500;
// The same permanent answer to this many different reminders in a row is the partner
// refusing everyone (an API or account change), not ten bad reminders: they wait.
constexpr int RefusalsInARowForEveryone = 10;
// Reconciliation: the keys in doubt read per look (oldest first), the questions to the
// partners open at once, and the bounds of the wait between two questions about one key.
constexpr int ReconcileScanRows = 200;
constexpr int MaxLookupsInFlight = 16;
constexpr qint64 MinReconcileIntervalMs = 1000;
constexpr qint64 MaxLookupIntervalMs = 6LL * 3600 * 1000;
// How often a worker reads the partners an operator paused (a few rows): often enough
// that a pause holds within a second, whatever store and without a notification.
constexpr int PauseReadMs = 500;
// A paused partner's reminder comes back after 1, 2, 4... s, at most this: few history
// rows over a long pause, and a resumed partner's reminders back within this long.
constexpr qint64 MaxPausedWaitMs = 30000;
} // namespace

Engine::Engine(const EngineConfig &config, QObject *parent)
    : QObject(parent), m_config(config)
{
    qRegisterMetaType<once::EngineCounters>();
    m_cycleTimer.setSingleShot(true);
    connect(&m_cycleTimer, &QTimer::timeout, this, &Engine::cycle);
    m_countersTimer.setInterval(250);
    connect(&m_countersTimer, &QTimer::timeout, this, &Engine::publishCounters);
    m_retentionTimer.setInterval(60 * 1000);
    connect(&m_retentionTimer, &QTimer::timeout, this, &Engine::purgeExpired);
    m_sampleTimer.setInterval(5 * 1000);
    connect(&m_sampleTimer, &QTimer::timeout, this, &Engine::sampleQueue);
    m_heartbeatTimer.setInterval(int(WorkerRegistry::HeartbeatIntervalMs));
    connect(&m_heartbeatTimer, &QTimer::timeout, this, &Engine::heartbeat);
    connect(&m_reconcileTimer, &QTimer::timeout, this, &Engine::reconcileInDoubt);
    m_pauseTimer.setInterval(PauseReadMs);
    connect(&m_pauseTimer, &QTimer::timeout, this, &Engine::readPauses);
}

Engine::~Engine()
{
    closeStore();
}

template<typename Function>
auto Engine::onStore(Function function)
{
    std::invoke_result_t<Function, Store &> result{};
    QMetaObject::invokeMethod(m_storeSide, [this, &function] { return function(m_storeSide->store()); },
                              Qt::BlockingQueuedConnection, &result);
    return result;
}

template<typename Function>
void Engine::onStoreLater(Function function)
{
    EngineStore *side = m_storeSide;
    QMetaObject::invokeMethod(side, [side, function] { function(side->store()); }, Qt::QueuedConnection);
}

QJsonObject PartnerCounters::toJson(qint64) const
{
    const auto timeOrNull = [](qint64 ms) { return ms ? QJsonValue(formatTime(ms)) : QJsonValue(QJsonValue::Null); };
    return QJsonObject{
        {QStringLiteral("name"), name},
        {QStringLiteral("profile"), profile},
        {QStringLiteral("breaker"), WorkerRegistry::breakerName(breaker)},
        {QStringLiteral("consecutive_failures"), consecutiveFailures},
        {QStringLiteral("failing_since"), timeOrNull(failingSinceMs)},
        {QStringLiteral("last_failure_at"), timeOrNull(lastFailureAtMs)},
        {QStringLiteral("last_error_class"), lastErrorClass.isEmpty() ? QJsonValue(QJsonValue::Null) : QJsonValue(lastErrorClass)},
        {QStringLiteral("last_http_status"), lastHttpStatus ? QJsonValue(lastHttpStatus) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("applied"), applied},
        {QStringLiteral("failures"), failures},
        {QStringLiteral("sending"), sending},
        {QStringLiteral("concurrency"), capacity},
        {QStringLiteral("rate_per_second"), ratePerSecond > 0 ? QJsonValue(ratePerSecond) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("in_doubt_policy"), inDoubtPolicyName(inDoubtPolicy)},
        {QStringLiteral("lookups"), QJsonObject{{QStringLiteral("found"), lookupsFound},
                                                {QStringLiteral("not_found"), lookupsNotFound},
                                                {QStringLiteral("failed"), lookupsFailed}}},
        {QStringLiteral("paused"), paused},
        {QStringLiteral("pace_per_second"), paceNowPerSecond > 0 ? QJsonValue(paceNowPerSecond) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("throttled_at"), timeOrNull(throttledAtMs)},
        {QStringLiteral("slow_start"), slowStart},
    };
}

PartnersConfig EngineConfig::partnersOrSingle() const
{
    if (!partners.partners.isEmpty())
        return partners;
    PartnerSettings partner;
    partner.profile = profileForUrl(partnerUrl);
    partner.url = partnerUrl;
    partner.token = partnerToken;
    partner.tls = partnerTls;
    // As the profile shows it: never a secret the URL carries (a Slack webhook's path).
    partner.name = partnerProfile(partner.profile)->displayUrl(partner);
    return PartnersConfig::single(partner);
}

EngineCounters Engine::counters() const
{
    EngineCounters counters = m_counters;
    const qint64 now = nowMs();
    counters.inFlight = m_inFlight;
    // The spell the console's banner tells of is that of the partner failing longest.
    const PartnerLane *failing = nullptr;
    for (const auto &lane : m_lanes) {
        PartnerCounters partner = lane->counters;
        partner.breaker = lane->breaker.state(now);
        partner.sending = lane->sending;
        partner.inDoubtPolicy = inDoubtPolicy(*lane);
        partner.paused = lane->pause.has_value();
        partner.paceNowPerSecond = lane->pace.perSecond(now);
        partner.throttledAtMs = lane->pace.throttledAtMs();
        partner.slowStart = lane->pace.slowStart(now);
        counters.partners.append(partner);
        if (partner.failingSinceMs && (!failing || partner.failingSinceMs < failing->counters.failingSinceMs))
            failing = lane.get();
    }
    if (failing) {
        counters.breaker = failing->breaker.state(now);
        counters.failingPartner = failing->settings.name;
        counters.consecutiveFailures = failing->counters.consecutiveFailures;
        counters.failingSinceMs = failing->counters.failingSinceMs;
        counters.lastFailureAtMs = failing->counters.lastFailureAtMs;
        counters.lastErrorClass = failing->counters.lastErrorClass;
        counters.lastHttpStatus = failing->counters.lastHttpStatus;
    } else {
        for (const auto &lane : m_lanes) {
            if (lane->breaker.state(now) != CircuitBreaker::State::Closed) {
                counters.breaker = lane->breaker.state(now);
                counters.failingPartner = lane->settings.name;
            }
        }
    }
    counters.paused = m_paused;
    counters.running = m_running;
    counters.inDoubtPolicy = inDoubtPolicy();
    counters.configuredInDoubtPolicy = m_config.inDoubtPolicy;
    return counters;
}

void Engine::start()
{
    if (m_running)
        return;
    m_lastLeasedAtMs = nowMs();
    // The partners first: how far ahead a broker may hand out deliveries (claimsAhead())
    // depends on what each does with a send left in doubt.
    const PartnersConfig partners = m_config.partnersOrSingle();
    m_routes = partners.routes;
    m_lanes.clear();
    QStringList partnerNames;
    for (const PartnerSettings &settings : partners.partners) {
        auto lane = std::make_unique<PartnerLane>();
        lane->settings = settings;
        lane->profile = partnerProfile(settings.profile);
        if (!lane->profile) {
            fail(QStringLiteral("partner %1: no profile \"%2\"").arg(settings.name, settings.profile));
            return;
        }
        lane->capacity = settings.concurrency > 0 ? std::min(settings.concurrency, m_config.concurrency)
                                                  : m_config.concurrency;
        lane->maxAttempts = settings.maxAttempts > 0 ? settings.maxAttempts : m_config.maxAttempts;
        lane->breaker = CircuitBreaker(m_config.breakerThreshold);
        lane->sender = lane->profile->createSender(settings, lane->capacity, m_config.requestTimeoutMs, this).release();
        lane->pace = PartnerPace(settings.ratePerSecond);
        lane->counters.name = settings.name;
        lane->counters.profile = settings.profile;
        lane->counters.capacity = lane->capacity;
        lane->counters.ratePerSecond = settings.ratePerSecond;
        if (lane->sender->canLookUp())
            lane->lookupGraceMs = settings.lookupGraceMs >= 0 ? settings.lookupGraceMs : lane->profile->lookupGraceMs();
        partnerNames.append(settings.name);
        m_lanes.push_back(std::move(lane));
    }
    QString error;
    if (!openSide(&m_storeSide, &m_storeThread, QStringLiteral("once-engine-store"), m_config.queueUrl,
                  m_config.concurrency + (claimsAhead() ? MaxClaimAheadRounds * m_config.concurrency : 0),
                  EngineStore::Notifications::Listen, &error)) {
        fail(error);
        return;
    }
    WorkerRecord self;
    self.id = m_config.workerId;
    self.host = QSysInfo::machineHostName();
    self.pid = QCoreApplication::applicationPid();
    self.version = QStringLiteral(ONCE_VERSION);
    self.partner = partnerNames.join(QStringLiteral(", "));
    self.concurrency = m_config.concurrency;
    // A worker that starts as its store fails over (its new session ended while it
    // registers) tries again for a while instead of exiting, as its turns would.
    QElapsedTimer registering;
    registering.start();
    while (!onStore([&](Store &store) {
        if (!store.database().ensureConnected(&error))
            return false;
        for (const auto &lane : m_lanes) {
            const auto honouring = store.inspector().recordedKeyHonouring(lane->settings.name, &error);
            if (!honouring)
                return false;
            lane->recorded = *honouring;
        }
        const auto paused = store.inspector().pausedPartners(&error);
        if (!paused)
            return false;
        for (const PartnerPause &pause : *paused) {
            if (const int index = laneIndex(pause.partner); index >= 0)
                m_lanes[index]->pause = pause;
        }
        const EngineCounters now = counters();
        self.inDoubtPolicy = inDoubtPolicyName(now.inDoubtPolicy);
        self.configuredInDoubtPolicy = inDoubtPolicyName(now.configuredInDoubtPolicy);
        return store.workers().announce(self, &error);
    })) {
        const StoreFailure failure = onStore([](Store &store) { return store.database().lastFailure(); });
        const bool passing = failure == StoreFailure::ConnectionLost || failure == StoreFailure::Contention;
        if (!passing || registering.elapsed() > RegisterRetryMs) {
            fail(QStringLiteral("cannot register the worker on the store: ") + error);
            return;
        }
        QThread::msleep(200);
    }
    m_listening = m_storeSide->listening();
    connect(m_storeSide, &EngineStore::notified, this, &Engine::onNotification);
    const bool postgres = onStore([](Store &store) { return store.database().isPostgres(); });
    if (postgres && m_config.queueUrl.isEmpty()
        && !openSide(&m_claimSide, &m_claimThread, QStringLiteral("once-engine-claims"), QString(), 0,
                     EngineStore::Notifications::Ignore, &error)) {
        fail(QStringLiteral("cannot open the claims' connection to the store: ") + error);
        return;
    }
    m_storeDisplayName = onStore([](Store &store) { return store.database().location().displayName(); });
    if (!m_config.queueUrl.isEmpty()) {
        EngineStore *side = m_storeSide;
        m_queueDisplayName = onStore([side](Store &) { return side->queueDisplayName(); });
        m_storeDisplayName += QStringLiteral(" with the queue at ") + m_queueDisplayName;
    }
    m_running = true;
    m_countersTimer.start();
    m_retentionTimer.start();
    m_sampleTimer.start();
    m_heartbeatTimer.start();
    m_pauseTimer.start();
    // Reconciliation looks a few times per grace period, and at least twice a minute.
    qint64 shortestGraceMs = -1;
    for (const auto &lane : m_lanes) {
        if (lane->lookupGraceMs >= 0)
            shortestGraceMs = shortestGraceMs < 0 ? lane->lookupGraceMs : std::min(shortestGraceMs, lane->lookupGraceMs);
    }
    if (shortestGraceMs >= 0) {
        m_reconcileTimer.setInterval(int(std::clamp<qint64>(shortestGraceMs / 2, MinReconcileIntervalMs, 30000)));
        m_reconcileTimer.start();
    }
    for (const auto &lane : m_lanes) {
        const QString where = lane->sender->displayUrl();
        qCInfo(lcEngine).noquote() << "worker" << m_config.workerId << "delivering to" << lane->settings.name
                                   << (where == lane->settings.name ? QString() : QStringLiteral("(%1, %2)").arg(lane->settings.profile, where))
                                   << "from" << m_storeDisplayName;
        qCInfo(lcEngine).noquote() << "sends to" << lane->settings.name << "left in doubt:" << inDoubtPolicyText(*lane);
        if (lane->pause)
            qCWarning(lcEngine).noquote() << lane->settings.name << "is" << lane->pause->describe()
                                          << "; nothing is sent to it until it is resumed";
    }
    emit started();
    purgeExpired();
    scheduleCycle(0);
}

void Engine::pause()
{
    m_paused = true;
    publishCounters();
    heartbeat();
}

void Engine::resume()
{
    m_paused = false;
    publishCounters();
    heartbeat();
    scheduleCycle(0);
}

void Engine::stop()
{
    if (!m_running)
        return;
    m_stopping = true;
    scheduleCycle(0);
}

void Engine::scheduleCycle(qint64 delayMs)
{
    if (!m_running)
        return;
    const int delay = int(std::clamp<qint64>(delayMs, 0, 60000));
    if (m_cycleTimer.isActive() && m_cycleTimer.remainingTime() <= delay)
        return;
    m_cycleTimer.start(delay);
}

bool Engine::hasPendingWrites() const
{
    return !m_pendingUpdates.isEmpty() || !m_pendingAttempts.isEmpty() || !m_pendingSettlements.isEmpty();
}

// One turn of the engine (group commit): record every outcome that arrived since the
// last turn, settle those messages on the queue, then lease and claim new work. The turn
// runs on the store's thread (EngineStore::runTurn); its result comes back to
// onTurnDone(), and sends start only then, after the commit, so every claim is on disk
// before its partner call, and no ack is committed without its outcome. One turn at a
// time: outcomes that arrive meanwhile wait for the next.
void Engine::cycle()
{
    if (!m_running)
        return;
    const qint64 now = nowMs();
    if (hasPendingWrites() && !m_writesWaitingSinceMs)
        m_writesWaitingSinceMs = now;
    if (m_turn) {
        m_cycleWanted = true; // the turn's end looks again
        return;
    }
    m_idle = false;
    const int settling = int(m_pendingSettlements.size());
    const bool consuming = !m_stopping && !m_paused;
    if (turnCanWait(now, consuming)) {
        scheduleCycle(m_writesWaitingSinceMs + MaxWriteWaitMs - now);
        return;
    }
    const int capacity = m_config.concurrency + leaseAhead();
    const int room = consuming ? std::min(MaxLeaseBatch, leaseRoom(now, capacity, m_inFlight - settling)) : 0;
    const bool partnersClosed = !anyLaneOpen(now);
    if (!hasPendingWrites() && room <= 0) {
        if (m_stopping && m_inFlight == 0)
            finish(0);
        else if (consuming && partnersClosed)
            scheduleCycle(soonestReopenMs(now) + 1);
        return; // a finishing send schedules the next turn
    }

    m_turn = std::make_unique<Turn>();
    Turn &turn = *m_turn;
    turn.request.updates.swap(m_pendingUpdates);
    turn.request.attempts.swap(m_pendingAttempts);
    turn.request.settlements.swap(m_pendingSettlements);
    m_writesWaitingSinceMs = 0;
    turn.request.room = room;
    turn.request.leaseMs = m_config.leaseMs;
    turn.request.workerId = m_config.workerId;
    turn.request.policy = InDoubtPolicy::Hold; // a channel without a route is never sent
    if (const int otherwise = laneIndex(m_routes.otherwise); otherwise >= 0)
        turn.request.policy = inDoubtPolicy(*m_lanes[otherwise]);
    turn.request.policyByChannel = policiesByChannel();
    noteClaimPartners(&turn.request);
    turn.settling = settling;
    turn.consuming = consuming;
    turn.partnersClosed = partnersClosed;
    turn.result.ok = true;
    if (!m_claimSide || settling < MinSplitTurnHalf || room < MinSplitTurnHalf) {
        runTurnPart(m_storeSide, turn.request, TurnPart::Whole);
        return;
    }
    // On PostgreSQL the outcomes and the new claims touch different rows, and with large
    // turns a worker waits on the server for most of its time: the two halves go to two
    // connections and run side by side, as two workers' turns would (the same lock order
    // keeps them apart; a key both touch waits for the other's commit).
    qCDebug(lcEngine) << "turn on two connections:" << settling << "settlements," << room << "to lease";
    TurnRequest writes = turn.request;
    writes.room = 0;
    TurnRequest claims = turn.request;
    claims.updates.clear();
    claims.attempts.clear();
    claims.settlements.clear();
    if (!writes.updates.isEmpty() || !writes.attempts.isEmpty() || !writes.settlements.isEmpty())
        runTurnPart(m_storeSide, writes, TurnPart::Writes);
    if (claims.room > 0)
        runTurnPart(m_claimSide, claims, TurnPart::Claims);
}

void Engine::runTurnPart(EngineStore *side, const TurnRequest &request, TurnPart part)
{
    ++m_turn->partsRunning;
    QMetaObject::invokeMethod(side, [this, side, request, part] {
        const TurnResult result = side->runTurn(request);
        QMetaObject::invokeMethod(this, [this, result, part] { onTurnPartDone(result, part); }, Qt::QueuedConnection);
    }, Qt::QueuedConnection);
}

void Engine::onTurnPartDone(const TurnResult &result, TurnPart part)
{
    if (!m_turn)
        return;
    TurnResult &merged = m_turn->result;
    merged.ok = merged.ok && result.ok;
    merged.failure = std::max(merged.failure, result.failure); // the graver of the two
    merged.queueFailed = merged.queueFailed || result.queueFailed;
    merged.queueLost = merged.queueLost || result.queueLost;
    if (!result.error.isEmpty())
        merged.error += (merged.error.isEmpty() ? QString() : QStringLiteral("; ")) + result.error;
    if (part != TurnPart::Claims)
        merged.writesCommitted = result.ok || result.writesCommitted;
    if (part != TurnPart::Writes) {
        merged.leased = result.leased;
        merged.claims = result.claims;
        merged.claimedMessages = result.claimedMessages;
        merged.results = result.results;
        merged.invalid = result.invalid;
    }
    if (--m_turn->partsRunning == 0)
        onTurnDone(std::move(merged));
}

// Leases come back only with their claims committed: they are worked on even when the
// turn's writes failed.
void Engine::onTurnDone(TurnResult result)
{
    const std::unique_ptr<Turn> turn = std::move(m_turn);
    if (!m_running || !turn)
        return;
    adjustClaimAhead(*turn, result.leased.size());
    const TurnRequest &request = turn->request;
    if (!result.leased.isEmpty())
        m_idleTurns = 0;
    // A turn that failed found nothing out: the quiet that makes a queue that cannot
    // count idle starts again.
    if (!result.leased.isEmpty() || !result.ok)
        m_lastLeasedAtMs = nowMs();
    if (result.ok || result.writesCommitted) {
        settled(*turn, nowMs());
    } else {
        // None of this turn's writes happened: keep the outcomes for the next one.
        m_pendingUpdates = request.updates + m_pendingUpdates;
        m_pendingAttempts = request.attempts + m_pendingAttempts;
        m_pendingSettlements = request.settlements + m_pendingSettlements;
    }
    if (!result.ok && !noteStoreFailure(result))
        return; // the engine stopped
    if (!result.claims.isEmpty())
        failpoint("after-claim");

    m_counters.leased += result.leased.size();
    m_inFlight += int(result.leased.size());
    for (const auto &[index, reason] : result.invalid) {
        ++m_counters.invalid;
        deadLetter(Delivery{result.leased.at(index), {}, 0, 0, 0}, QStringLiteral("invalid-message"), reason, 0);
    }
    for (qsizetype i = 0; i < result.claims.size(); ++i) {
        const ClaimResult &claim = result.results.at(i);
        const ClaimRequest &request = result.claims.at(i);
        Delivery delivery{result.leased.at(result.claimedMessages.at(i)), request.reminder,
                          claim.sendsThisRound, claim.firstSentAtMs, request.leaseUntilMs};
        delivery.expiresAtMs = request.expiresAtMs;
        switch (claim.outcome) {
        case ClaimResult::Outcome::Resend:
        case ClaimResult::Outcome::Claimed:
            if (!delivery.message.failUnsent.isEmpty()) {
                failUnsent(delivery, claim.outcome == ClaimResult::Outcome::Resend);
                break;
            }
            if (claim.outcome == ClaimResult::Outcome::Resend)
                ++m_counters.resent;
            route(delivery);
            break;
        case ClaimResult::Outcome::Duplicate:
            // Recognised as already handled: ack without sending.
            ++m_counters.duplicates;
            acknowledge(delivery, claim.notApplied);
            break;
        case ClaimResult::Outcome::Held:
            // Handed to an operator: the message leaves the queue without a send.
            ++m_counters.held;
            acknowledge(delivery, claim.notApplied);
            break;
        case ClaimResult::Outcome::Busy:
            m_pendingSettlements.append(
                {Settlement::Kind::Retry, delivery.message.id, delivery.message.delivery, claim.busyForMs + 100, {}});
            break;
        }
    }

    if (!result.ok) {
        m_cycleWanted = false;
        scheduleCycle(StoreRetryMs);
        return;
    }
    m_storeFailure = {};
    noteStoreBack();
    noteQueueBack();
    if (m_stopping && m_inFlight == 0 && !hasPendingWrites()) {
        finish(0);
        return;
    }
    const bool wanted = std::exchange(m_cycleWanted, false);
    const qint64 after = nowMs();
    const int room = request.room;
    qCDebug(lcEngine) << "turn done: room" << room << "leased" << result.leased.size() << "settled"
                      << request.settlements.size() << "in flight" << m_inFlight << "partner open" << anyLaneOpen(after);
    if (wanted || hasPendingWrites() || (room > 0 && result.leased.size() == room)) {
        scheduleCycle(0);
    } else if (turn->consuming && (turn->partnersClosed || !anyLaneOpen(after))) {
        // Begun with every breaker open, a turn can outlast the cooldown (a broker's
        // settle publishes and waits for the cluster): the partners are open again, nothing
        // is in flight to end in a send, and only this look finds the probe to make.
        if (m_inFlight == 0 && m_config.untilIdle)
            checkIdle(); // nothing may be left to probe with
        scheduleCycle(soonestReopenMs(after) + 1); // the probe
    } else if (room > 0) {
        // Fewer than there was room for. A broker that hands out what has arrived so far
        // (Kafka, partition by partition as its fetches come back) has more on the way:
        // its notification looks again, not the end of a send, which against a slow
        // partner comes seconds later; and one that came while the turn ran may have come
        // after its lease looked.
        if (result.leased.isEmpty()) {
            if (m_inFlight == 0 && m_config.untilIdle)
                checkIdle();
            ++m_idleTurns;
            scheduleCycle(idleWaitMs());
        }
        m_idle = true;
        if (turn->queueNotified)
            scheduleCycle(0);
    }
}

// Contention and a lost connection pass: the turn is tried again, for as long as it
// takes. A permanent failure (a corrupt, full, read-only, replaced or deleted store)
// does not: once it has lasted PermanentStoreFailureMs the engine stops with one line,
// and what is in flight is left as after a crash (in doubt, found by the next worker).
// Returns false when it stopped.
bool Engine::noteStoreFailure(const TurnResult &result)
{
    const qint64 now = nowMs();
    const bool permanent = result.failure == StoreFailure::Permanent;
    if (!permanent)
        m_storeFailure.permanentSinceMs = 0;
    else if (!m_storeFailure.permanentSinceMs)
        m_storeFailure.permanentSinceMs = now;
    if (permanent && now - m_storeFailure.permanentSinceMs >= PermanentStoreFailureMs) {
        fail(QStringLiteral("stopping: the store %1 cannot be used (%2): %3")
                 .arg(m_storeDisplayName, QString::fromLatin1(storeFailureName(result.failure)), result.error));
        return false;
    }
    // Every turn of a spell without the store fails, and so do the reconnects: said once
    // as it starts and once as it ends, not at every try.
    if (result.queueLost) {
        noteQueueLost(result.error);
        return true;
    }
    if (result.failure == StoreFailure::ConnectionLost && !result.queueFailed) {
        noteStoreLost(result.error);
        return true;
    }
    // A failing store fails every quarter second: say so when it changes, then every 10 s.
    if (result.error != m_storeFailure.lastError || now - m_storeFailure.lastWarnedMs >= 10000) {
        m_storeFailure.lastError = result.error;
        m_storeFailure.lastWarnedMs = now;
        // A broker's failure is the queue's, named by its URL (without secrets): an operator
        // told the store failed would look at the wrong server.
        if (result.queueFailed) {
            const QString what = QStringLiteral("the queue %1 failed").arg(m_queueDisplayName);
            qCWarning(lcEngine).noquote() << what + QStringLiteral(", retrying: ") + result.error;
            emit errorOccurred(what + QStringLiteral(": ") + result.error);
        } else {
            qCWarning(lcEngine).noquote() << QStringLiteral("store write failed (%1), retrying: %2")
                                                     .arg(QString::fromLatin1(storeFailureName(result.failure)), result.error);
            emit errorOccurred(QStringLiteral("store write failed: ") + result.error);
        }
    }
    return true;
}

void Engine::noteStoreLost(const QString &error)
{
    if (m_counters.storeLost())
        return;
    m_counters.storeLostAtMs = nowMs();
    m_counters.storeBackAtMs = 0;
    const QString message = QStringLiteral("lost the store %1 at %2, reconnecting: %3")
                                .arg(m_storeDisplayName, formatTime(m_counters.storeLostAtMs), error.simplified());
    qCWarning(lcEngine).noquote() << message;
    emit errorOccurred(message);
}

void Engine::noteStoreBack()
{
    if (!m_counters.storeLost())
        return;
    m_counters.storeBackAtMs = nowMs();
    qCInfo(lcEngine).noquote() << QStringLiteral("the store %1 is back at %2, after %3 s without it")
                                      .arg(m_storeDisplayName, formatTime(m_counters.storeBackAtMs),
                                           QString::number(double(m_counters.storeBackAtMs - m_counters.storeLostAtMs) / 1000, 'f', 1));
    // At once, rather than at the next beat: the console shows the spell from here.
    heartbeat();
}

void Engine::noteQueueLost(const QString &error)
{
    if (m_queueLostAtMs)
        return;
    m_queueLostAtMs = nowMs();
    const QString message = QStringLiteral("lost the queue %1 at %2, reconnecting: %3")
                                .arg(m_queueDisplayName, formatTime(m_queueLostAtMs), error.simplified());
    qCWarning(lcEngine).noquote() << message;
    emit errorOccurred(message);
}

void Engine::noteQueueBack()
{
    if (!m_queueLostAtMs)
        return;
    const qint64 backAtMs = nowMs();
    qCInfo(lcEngine).noquote() << QStringLiteral("the queue %1 is back at %2, after %3 s without it")
                                      .arg(m_queueDisplayName, formatTime(backAtMs),
                                           QString::number(double(backAtMs - m_queueLostAtMs) / 1000, 'f', 1));
    m_queueLostAtMs = 0;
}

void Engine::reportStoreCall(const QString &what, StoreFailure failure, const QString &error)
{
    QMetaObject::invokeMethod(
        this,
        [this, what, failure, error] {
            if (failure == StoreFailure::ConnectionLost)
                noteStoreLost(error);
            else
                qCWarning(lcEngine).noquote() << what << "failed:" << error;
        },
        Qt::QueuedConnection);
}

// The turn's settlements are on the queue: those messages are no longer in flight.
void Engine::settled(const Turn &turn, qint64 committedAtMs)
{
    m_inFlight -= turn.settling;
    noteRetriesDue(turn.request.settlements, committedAtMs);
}

// Polling finds what no notification announces: retries coming due and the leases of
// crashed workers expiring. With notifications for new messages it can be slow, except
// that this worker wakes for the retries it scheduled itself.
qint64 Engine::idleWaitMs() const
{
    constexpr qint64 NotifiedPollMs = 1000;
    // Without notifications, back off from a quick second look to the configured poll:
    // a steady trickle of messages is picked up within milliseconds, and an empty queue
    // is still asked only every idlePollMs.
    if (!m_listening)
        return std::min(m_config.idlePollMs, qint64(1) << std::min(m_idleTurns, 16));
    const qint64 wait = std::max(m_config.idlePollMs, NotifiedPollMs);
    const qint64 untilRetry = m_nextRetryDueMs - nowMs();
    return untilRetry >= 0 ? std::min(wait, untilRetry) : wait;
}

void Engine::noteRetriesDue(const QList<Settlement> &settlements, qint64 committedAtMs)
{
    if (m_nextRetryDueMs < committedAtMs)
        m_nextRetryDueMs = std::numeric_limits<qint64>::max();
    for (const auto &settlement : settlements) {
        if (settlement.kind != Settlement::Kind::Retry)
            continue;
        m_nextRetryDueMs = std::min(m_nextRetryDueMs, committedAtMs + settlement.delayMs);
        if (settlement.delayMs <= m_config.untilIdleHorizonMs)
            m_lastRetryDueMs = std::max(m_lastRetryDueMs, committedAtMs + settlement.delayMs);
    }
}

void Engine::onNotification(const QString &channel)
{
    if (channel != Channel::Queue)
        return;
    if (m_idle)
        scheduleCycle(0);
    else if (m_turn)
        m_turn->queueNotified = true;
}

// Claims beyond the send slots: a delivery that finishes hands its slot to the next
// claimed one at once, instead of waiting for a turn to lease it, and turns can wait to
// carry more (turnCanWait). Each of them widens the in-doubt window of a crash by one key:
// harmless when the partner dedupes by key and the policy resends, so only then. And only
// when the lease outlasts a wait for a slot (at most one request timeout) and the send
// itself: a claim that expired mid-send would be taken over and resent by another worker.
//
// One claim ahead per send slot is enough while a turn commits before the slots have
// sent what it claimed. With a fast partner it is not: at 50 slots, a turn carrying 50
// outcomes and 50 claims took longer than the slots needed to send the claimed ones, and
// they idled until it committed. So when a slot frees up during a turn with nothing
// claimed to take, the next turns claim up to twice what the sends got through during
// that one, at most MaxClaimAheadRounds slots' worth; while the slots never wait, the
// depth eases back. A partner that stalls leaves the extra claims waiting, and one that
// could no longer outlast its send is released unsent (claimOutlastsSend), never sent late.
bool Engine::claimsAhead() const
{
    const bool resending = inDoubtPolicy() == InDoubtPolicy::Resend && m_lanes.size() == 1;
    const bool leaseCoversWaitAndSend = m_config.leaseMs > 2 * qint64(m_config.requestTimeoutMs);
    return resending && leaseCoversWaitAndSend;
}

int Engine::leaseAhead() const
{
    return claimsAhead() ? std::max(m_config.concurrency, m_claimAhead) : 0;
}

// A partner that does not deduplicate may act on every call with the same key: resending
// what it may already have acted on would be the duplicate this product exists to avoid,
// whatever the worker was started with. The operator's record comes first (they may know
// better than the profile, both ways); without one, the profile's documented rule.
InDoubtPolicy Engine::inDoubtPolicy(const PartnerLane &lane) const
{
    const KeyHonouring honouring = lane.recorded != KeyHonouring::Unknown ? lane.recorded : lane.profile->honoursKey();
    return honouring == KeyHonouring::Ignored ? InDoubtPolicy::Hold : m_config.inDoubtPolicy;
}

InDoubtPolicy Engine::inDoubtPolicy() const
{
    for (const auto &lane : m_lanes) {
        if (inDoubtPolicy(*lane) == InDoubtPolicy::Hold)
            return InDoubtPolicy::Hold;
    }
    return m_lanes.empty() ? m_config.inDoubtPolicy : InDoubtPolicy::Resend;
}

QString Engine::inDoubtPolicyText(const PartnerLane &lane) const
{
    if (inDoubtPolicy(lane) == InDoubtPolicy::Resend)
        return QStringLiteral("resent with the same key");
    if (m_config.inDoubtPolicy == InDoubtPolicy::Hold)
        return QStringLiteral("held for an operator");
    if (lane.recorded == KeyHonouring::Ignored)
        return QStringLiteral("held for an operator, not resent: the store records that %1 does not honour "
                              "Idempotency-Key (once partners), so a resend could act twice")
            .arg(lane.settings.name);
    return QStringLiteral("held for an operator, not resent: %1 (%2) documents no idempotency, so a resend could "
                          "act twice (once partners %1 --honours-key yes if it does)")
        .arg(lane.settings.name, lane.profile->name());
}

QHash<QString, InDoubtPolicy> Engine::policiesByChannel() const
{
    QHash<QString, InDoubtPolicy> policies;
    for (auto it = m_routes.byChannel.cbegin(); it != m_routes.byChannel.cend(); ++it) {
        const int lane = laneIndex(it.value());
        policies.insert(it.key(), lane >= 0 ? inDoubtPolicy(*m_lanes[lane]) : InDoubtPolicy::Hold);
    }
    return policies;
}

void Engine::noteClaimPartners(TurnRequest *request) const
{
    const auto partnerOf = [this](const QString &name) {
        const int lane = laneIndex(name);
        if (lane < 0)
            return TurnRequest::ClaimPartner{};
        const PartnerLane &partner = *m_lanes[lane];
        return TurnRequest::ClaimPartner{partner.profile->keyWindowMs(), partner.settings.name, partner.settings.profile,
                                         partner.settings.expireAfterMs};
    };
    request->partner = partnerOf(m_routes.otherwise);
    if (m_routes.otherwiseExpireAfterMs)
        request->partner.expireAfterMs = m_routes.otherwiseExpireAfterMs;
    for (auto it = m_routes.byChannel.cbegin(); it != m_routes.byChannel.cend(); ++it) {
        TurnRequest::ClaimPartner partner = partnerOf(it.value());
        if (const qint64 route = m_routes.expireAfterFor(it.key()))
            partner.expireAfterMs = route;
        request->partnerByChannel.insert(it.key(), partner);
    }
}

int Engine::laneIndex(const QString &partner) const
{
    for (size_t i = 0; i < m_lanes.size(); ++i) {
        if (m_lanes[i]->settings.name == partner)
            return int(i);
    }
    return -1;
}

// While every partner's breaker is open nothing could be sent: leasing waits for the
// first probe, and leases one delivery per partner ready to probe. While one partner is
// down and another is not, leasing goes on, and the down one's deliveries are put back as
// they come (route()).
int Engine::leaseRoom(qint64 now, int capacity, int inFlight) const
{
    int probes = 0;
    for (const auto &lane : m_lanes) {
        if (lane->pause)
            continue; // as if its breaker were open, with no probe to make
        const CircuitBreaker::State state = lane->breaker.state(now);
        if (state == CircuitBreaker::State::Closed)
            return capacity - inFlight;
        if (state == CircuitBreaker::State::HalfOpen && lane->sending == 0 && lane->ready.empty())
            ++probes;
    }
    return std::min(probes, capacity - inFlight);
}

// A paused partner counts as one whose breaker is open: nothing can go to it.
bool Engine::anyLaneOpen(qint64 now) const
{
    for (const auto &lane : m_lanes) {
        if (!lane->pause && lane->breaker.state(now) != CircuitBreaker::State::Open)
            return true;
    }
    return m_lanes.empty();
}

qint64 Engine::soonestReopenMs(qint64 now) const
{
    qint64 soonest = std::numeric_limits<qint64>::max();
    for (const auto &lane : m_lanes) {
        if (!lane->pause)
            soonest = std::min(soonest, lane->breaker.reopensInMs(now));
    }
    // Every partner paused: a resume schedules the next turn itself (notePauses).
    if (soonest == std::numeric_limits<qint64>::max())
        return allLanesPaused() ? PauseReadMs : 0;
    return soonest;
}

bool Engine::allLanesPaused() const
{
    return !m_lanes.empty()
           && std::all_of(m_lanes.cbegin(), m_lanes.cend(), [](const auto &lane) { return lane->pause.has_value(); });
}

void Engine::readPauses()
{
    if (!m_running || m_pausesReading)
        return;
    m_pausesReading = true;
    onStoreLater([this](Store &store) {
        QString error;
        const auto paused = store.inspector().pausedPartners(&error);
        if (!paused)
            reportStoreCall(QStringLiteral("reading the paused partners"), store.database().lastFailure(), error);
        QMetaObject::invokeMethod(
            this,
            [this, paused] {
                m_pausesReading = false;
                if (paused)
                    notePauses(*paused);
            },
            Qt::QueuedConnection);
    });
}

void Engine::notePauses(const QList<PartnerPause> &paused)
{
    bool changed = false;
    for (size_t index = 0; index < m_lanes.size(); ++index) {
        PartnerLane &lane = *m_lanes[index];
        const auto found = std::find_if(paused.cbegin(), paused.cend(),
                                        [&](const PartnerPause &pause) { return pause.partner == lane.settings.name; });
        const bool nowPaused = found != paused.cend();
        if (nowPaused == lane.pause.has_value())
            continue;
        changed = true;
        if (nowPaused) {
            lane.pause = *found;
            qCWarning(lcEngine).noquote() << lane.settings.name << "is" << lane.pause->describe()
                                          << "; nothing more is sent to it until it is resumed";
            // What is being sent finishes; what was claimed and waits for a slot goes back.
            std::deque<Delivery> waiting;
            waiting.swap(lane.ready);
            for (Delivery &delivery : waiting)
                route(std::move(delivery));
        } else {
            lane.pause.reset();
            qCInfo(lcEngine).noquote() << lane.settings.name << "resumed: its reminders go at its own pace";
        }
    }
    if (!changed)
        return;
    publishCounters();
    heartbeat(); // `once workers` and the console show it now, not at the next beat
    scheduleCycle(0);
}

bool Engine::refusesEveryone(PartnerLane &lane, const SendOutcome &outcome, const QByteArray &sendKey)
{
    if (outcome.kind == SendOutcome::Kind::CredentialsRefused)
        return true;
    // A transient answer between two refusals neither adds to the run nor ends it.
    if (outcome.kind != SendOutcome::Kind::Permanent && outcome.kind != SendOutcome::Kind::PayloadChanged)
        return false;
    if (outcome.httpStatus != lane.refusalStatus) {
        lane.refusalStatus = outcome.httpStatus;
        lane.refusedKeys.clear();
    }
    if (lane.refusedKeys.size() < RefusalsInARowForEveryone)
        lane.refusedKeys.insert(sendKey);
    return lane.refusedKeys.size() >= RefusalsInARowForEveryone;
}

void Engine::notePartnerRecords(const QHash<QString, KeyHonouring> &records)
{
    bool changed = false;
    for (const auto &lane : m_lanes) {
        const KeyHonouring honoursKey = records.value(lane->settings.name, KeyHonouring::Unknown);
        if (honoursKey == lane->recorded)
            continue;
        const InDoubtPolicy before = inDoubtPolicy(*lane);
        lane->recorded = honoursKey;
        if (inDoubtPolicy(*lane) == before)
            continue;
        changed = true;
        qCWarning(lcEngine).noquote() << "the store's record of" << lane->settings.name
                                      << "changed: sends left in doubt are now" << inDoubtPolicyText(*lane);
    }
    if (changed)
        publishCounters();
}

void Engine::adjustClaimAhead(const Turn &turn, qsizetype leased)
{
    const int least = m_config.concurrency;
    // A slot that waited while the lease found less than it had room for waited on the
    // queue (empty, or a broker handing out what its fetches have brought so far), not on
    // the turn: claiming deeper would not have filled it.
    if (turn.slotWaited && leased >= turn.request.room)
        m_claimAhead = std::max(m_claimAhead, std::min(2 * turn.sendsFinished, MaxClaimAheadRounds * least));
    else if (m_claimAhead > least)
        m_claimAhead -= std::max(1, (m_claimAhead - least) / 8);
}

// A turn costs the store about the same for one outcome as for ten: while enough claimed
// deliveries wait for a send slot, outcomes gather for a few milliseconds more.
bool Engine::turnCanWait(qint64 now, bool consuming) const
{
    const auto lowWater = size_t(leaseAhead() / 2);
    return consuming && hasPendingWrites() && size_t(readyCount()) > lowWater
           && now - m_writesWaitingSinceMs < MaxWriteWaitMs;
}

int Engine::readyCount() const
{
    int ready = 0;
    for (const auto &lane : m_lanes)
        ready += int(lane->ready.size());
    return ready;
}

int Engine::sendingCount() const
{
    int sending = 0;
    for (const auto &lane : m_lanes)
        sending += lane->sending;
    return sending;
}

Engine::PartnerLane *Engine::laneOf(const Delivery &delivery)
{
    return delivery.lane >= 0 && size_t(delivery.lane) < m_lanes.size() ? m_lanes[delivery.lane].get() : nullptr;
}

QString Engine::routedChannels() const
{
    QStringList channels = m_routes.byChannel.keys();
    channels.sort();
    return channels.isEmpty() ? QStringLiteral("no channel") : channels.join(QStringLiteral(", "));
}

// A claimed delivery goes to the partner its channel is routed to, and only there: a
// reminder without a route is dead-lettered, never sent elsewhere. A partner that is down
// or at its pace does not hold a slot: the delivery is put back for later, and the other
// partners' deliveries go on.
void Engine::route(Delivery delivery)
{
    const QString partner = m_routes.partnerFor(delivery.reminder.channel);
    delivery.lane = laneIndex(partner);
    // Before any wait for the partner (paused, down, at its pace): a reminder whose time
    // has passed leaves now rather than at the end of an outage.
    if (hasExpired(delivery, nowMs())) {
        expire(delivery, nowMs());
        return;
    }
    if (delivery.lane < 0) {
        const QString channel = delivery.reminder.channel.isEmpty() ? QStringLiteral("(none)") : delivery.reminder.channel;
        deadLetterUnsent(delivery, QStringLiteral("no-route"),
                         QStringLiteral("no route for channel \"%1\": the partners file routes %2")
                             .arg(channel, routedChannels()));
        return;
    }
    PartnerLane &lane = *m_lanes[delivery.lane];
    if (lane.pause) {
        // Back later and later while the pause lasts, without using a try: a resumed
        // partner's reminders come back within MaxPausedWaitMs.
        const int shift = std::clamp(delivery.message.delivery - 1, 0, 15);
        const qint64 delay = std::min(MaxPausedWaitMs, std::max<qint64>(1000, m_config.backoffBaseMs) << shift);
        deferUnsent(delivery, delay, QStringLiteral("partner-paused"),
                    QStringLiteral("not sent: %1 is %2; next look in %3 ms, without using a try")
                        .arg(lane.settings.name, lane.pause->describe())
                        .arg(delay));
        return;
    }
    const qint64 now = nowMs();
    const CircuitBreaker::State breaker = lane.breaker.state(now);
    const bool probing = breaker == CircuitBreaker::State::HalfOpen && (lane.sending > 0 || !lane.ready.empty());
    if (breaker == CircuitBreaker::State::Open || probing) {
        // Due when the breaker next lets a probe through: one of them probes, the others
        // wait again, without using a try.
        const qint64 delay = std::max(lane.breaker.reopensInMs(now) + 1, m_config.backoffBaseMs);
        deferUnsent(delivery, delay, QStringLiteral("partner-down"),
                    QStringLiteral("not sent: %1 is failing (%2 since %3); next try in %4 ms, without using a try")
                        .arg(lane.settings.name, lane.counters.lastErrorClass,
                             formatTime(lane.counters.failingSinceMs))
                        .arg(delay));
        return;
    }
    if (const double pace = lane.pace.perSecond(now); pace > 0) {
        // A pace keeps a few seconds' worth waiting, and never more than the claims of
        // those waiting outlast.
        const auto waiting = qint64(lane.ready.size());
        const auto enough = std::max<qint64>(lane.capacity, qint64(std::ceil(pace * 5)));
        const qint64 turnMs = qint64(std::ceil(double(waiting) * 1000 / pace)) + paceWaitMs(lane, now);
        if (waiting >= enough || !claimOutlastsSend(delivery, now + turnMs)) {
            deferForPace(delivery, lane, now);
            return;
        }
    }
    const int index = delivery.lane;
    lane.ready.push_back(std::move(delivery));
    sendReady(index);
}

void Engine::deferForPace(const Delivery &delivery, const PartnerLane &lane, qint64 now)
{
    const double pace = lane.pace.perSecond(now);
    const auto waiting = qint64(lane.ready.size());
    auto delay = pace > 0 ? qint64(std::ceil(double(waiting) * 1000 / pace)) : qint64(1000);
    // In slow start the pace doubles each second: what waits now goes out sooner than
    // this pace says, and the lane must not run dry meanwhile.
    if (lane.pace.slowStart(now))
        delay = std::min<qint64>(delay, 1000);
    deferUnsent(delivery, delay, QStringLiteral("partner-pace"),
                QStringLiteral("not sent yet: %1 takes %2 requests a second now and %3 wait ahead; next try in %4 ms")
                    .arg(lane.settings.name)
                    .arg(pace)
                    .arg(waiting)
                    .arg(delay));
}

// A delivery waiting for its partner's pace or a free slot holds a claim that runs out.
// Looked at only when its turn came, it was released unsent (releaseUnsent) by then, but
// the queue may have offered it again meanwhile, and its next delivery found a claim that
// ended without an outcome: in doubt, and held where the partner does not deduplicate.
// So a wait that can no longer outlast a send goes back first, with its claim released;
// a timer looks again when the next one would.
void Engine::deferWaitsOutlastingClaims(int index, qint64 now)
{
    PartnerLane &lane = *m_lanes[index];
    qint64 nextLookMs = std::numeric_limits<qint64>::max();
    for (auto it = lane.ready.begin(); it != lane.ready.end();) {
        if (claimOutlastsSend(*it, now)) {
            nextLookMs = std::min(nextLookMs, it->claimExpiresAtMs - m_config.requestTimeoutMs);
            ++it;
            continue;
        }
        const Delivery delivery = std::move(*it);
        it = lane.ready.erase(it);
        // Without a pace it waited for a slot, or came with a claim already too short (a
        // worker stopped, a lease taken long before its claim): back at once, as ever.
        if (lane.pace.perSecond(now) > 0)
            deferForPace(delivery, lane, now);
        else
            releaseUnsent(delivery, now);
    }
    if (nextLookMs == std::numeric_limits<qint64>::max()
        || (lane.claimLookAtMs > now && lane.claimLookAtMs <= nextLookMs))
        return;
    lane.claimLookAtMs = nextLookMs;
    QTimer::singleShot(std::max<qint64>(0, nextLookMs - now), this, [this, index, nextLookMs] {
        if (m_lanes[index]->claimLookAtMs == nextLookMs)
            m_lanes[index]->claimLookAtMs = 0;
        sendReady(index);
    });
}

void Engine::sendReady()
{
    for (size_t i = 0; i < m_lanes.size(); ++i)
        sendReady(int(i));
}

bool Engine::takePaceToken(PartnerLane &lane, qint64 now)
{
    return lane.pace.take(now);
}

qint64 Engine::paceWaitMs(const PartnerLane &lane, qint64 now) const
{
    return lane.pace.waitMs(now);
}

void Engine::sendReady(int index)
{
    PartnerLane &lane = *m_lanes[index];
    if (lane.pause && !lane.ready.empty()) {
        std::deque<Delivery> waiting;
        waiting.swap(lane.ready);
        for (Delivery &delivery : waiting)
            route(std::move(delivery)); // put back: the partner was paused while they waited
    }
    deferWaitsOutlastingClaims(index, nowMs());
    while (!lane.ready.empty()) {
        const qint64 now = nowMs();
        // In slow start no more are in flight than the pace allows in a second.
        if (lane.breaker.allowance(now, lane.pace.concurrency(now, lane.capacity), lane.sending) <= 0) {
            if (lane.breaker.state(now) == CircuitBreaker::State::Closed)
                break; // every slot is busy: a finishing send calls again
            // The partner went down while these waited: they wait without holding a slot.
            std::deque<Delivery> waiting;
            waiting.swap(lane.ready);
            for (Delivery &delivery : waiting)
                route(std::move(delivery));
            break;
        }
        if (!takePaceToken(lane, now)) {
            if (!lane.paceTimerArmed) {
                lane.paceTimerArmed = true;
                QTimer::singleShot(paceWaitMs(lane, now), this, [this, index] {
                    m_lanes[index]->paceTimerArmed = false;
                    sendReady(index);
                });
            }
            break;
        }
        Delivery delivery = std::move(lane.ready.front());
        lane.ready.pop_front();
        if (!claimOutlastsSend(delivery, now)) {
            releaseUnsent(delivery, now);
            continue;
        }
        if (hasExpired(delivery, now)) {
            expire(delivery, now);
            continue;
        }
        ++lane.sending;
        lane.sender->send(delivery.reminder, this, [this, delivery, sentAt = now, index](const SendOutcome &outcome) {
            --m_lanes[index]->sending;
            if (m_turn)
                ++m_turn->sendsFinished;
            onSent(delivery, outcome, sentAt);
            sendReady(index);
        });
    }
    if (m_turn && lane.sending < lane.capacity && lane.ready.empty())
        m_turn->slotWaited = true;
}

// A lease is a promise that expires. A worker stopped (SIGSTOP, a VM pause, swapping)
// past its claim wakes up believing it still owns the deliveries it had claimed, while
// another worker may have taken them over and sent them. So a send starts only while the
// claim outlasts the send's own timeout: a request that went out later could reach the
// partner after the key's new holder, a second effect at a partner without idempotency.
bool Engine::claimOutlastsSend(const Delivery &delivery, qint64 now) const
{
    return now + m_config.requestTimeoutMs < delivery.claimExpiresAtMs;
}

// A claim that ran out before its send: nothing went to the partner. If nobody has taken
// the key over, it goes back to retrying (the message's next delivery claims it again,
// not as in doubt, since it was never sent); the history tells either way.
void Engine::releaseUnsent(const Delivery &delivery, qint64 now)
{
    ++m_counters.lapsed;
    const QString why = QStringLiteral("not sent: the claim ran out at %1, %2 ms ago (was this worker stopped or "
                                       "stalled?); the key is left to whoever holds it now")
                            .arg(QDateTime::fromMSecsSinceEpoch(delivery.claimExpiresAtMs, QTimeZone::utc())
                                     .toString(Qt::ISODateWithMs),
                                 QString::number(std::max<qint64>(0, now - delivery.claimExpiresAtMs)));
    qCWarning(lcEngine).noquote() << "claim of" << QString::fromLatin1(delivery.reminder.sendKey)
                                  << "ran out before its send;" << "not sent";
    putBackUnsent(delivery, 0, QStringLiteral("lapsed"), QStringLiteral("claim-lapsed"), why);
}

bool Engine::hasExpired(const Delivery &delivery, qint64 now)
{
    return delivery.expiresAtMs > 0 && now >= delivery.expiresAtMs;
}

// Expired is an outcome, not a failure: the partner was not asked, so neither its breaker
// nor its spell of failures nor its refusals hear of it. The key's state, the history row
// and the ack commit in one transaction, like an applied send's.
void Engine::expire(const Delivery &delivery, qint64 now)
{
    ++m_counters.expired;
    const Reminder &reminder = delivery.reminder;
    const QString why = expiryText(delivery.expiresAtMs, now - reminder.scheduledAt.toMSecsSinceEpoch());
    Attempt attempt{reminder.sendKey, reminder.eventId, delivery.message.id, delivery.message.delivery,
                    m_config.workerId, now, QStringLiteral("expire"), QStringLiteral("expired"), 0, -1,
                    QStringLiteral("expired"), why, {}};
    notePartner(&attempt, delivery);
    m_pendingAttempts.append(attempt);
    m_pendingUpdates.append(LedgerUpdate{reminder.sendKey, delivery.message.id, delivery.message.delivery,
                                         LedgerState::Expired, false, 0, 0, QStringLiteral("expired"), why, {}});
    qCDebug(lcEngine).noquote() << "not sent:" << QString::fromLatin1(reminder.sendKey) << why;
    acknowledge(delivery, QStringLiteral("not sent: ") + why);
}

void Engine::deferUnsent(const Delivery &delivery, qint64 delayMs, const QString &errorClass, const QString &why)
{
    putBackUnsent(delivery, delayMs, QStringLiteral("deferred"), errorClass, why);
}

void Engine::putBackUnsent(const Delivery &delivery, qint64 delayMs, const QString &outcome, const QString &errorClass,
                           const QString &why)
{
    const Reminder &reminder = delivery.reminder;
    Attempt attempt{reminder.sendKey, reminder.eventId, delivery.message.id, delivery.message.delivery,
                    m_config.workerId, nowMs(), QStringLiteral("claim"), outcome, 0, -1, errorClass, why, {}};
    notePartner(&attempt, delivery);
    m_pendingAttempts.append(attempt);
    LedgerUpdate update{reminder.sendKey, delivery.message.id, delivery.message.delivery,
                        LedgerState::Retrying, false, 0, 0, errorClass, why, {}};
    update.spendsBudget = false;
    m_pendingUpdates.append(update);
    m_pendingSettlements.append({Settlement::Kind::Retry, delivery.message.id, delivery.message.delivery, delayMs, {}});
    scheduleCycle(0);
}

void Engine::deadLetterUnsent(const Delivery &delivery, const QString &errorClass, const QString &why)
{
    m_pendingUpdates.append(LedgerUpdate{delivery.reminder.sendKey, delivery.message.id, delivery.message.delivery,
                                         LedgerState::Dead, false, 0, 0, errorClass, why, {}});
    deadLetter(delivery, errorClass, why, 0);
}

void Engine::notePartner(Attempt *attempt, const Delivery &delivery) const
{
    if (delivery.lane < 0 || size_t(delivery.lane) >= m_lanes.size())
        return;
    const PartnerLane &lane = *m_lanes[delivery.lane];
    attempt->partner = lane.settings.name;
    attempt->partnerProfile = lane.settings.profile;
}

void Engine::onSent(const Delivery &delivery, const SendOutcome &outcome, qint64 sentAtMs)
{
    const qint64 now = nowMs();
    const Reminder &reminder = delivery.reminder;
    // A job that carries its own attempts and backoff counts its attempts itself: those made
    // under other workers too, and none for a delivery after a crash.
    const std::optional<RetryRule> &rule = delivery.message.retryRule;
    PartnerLane &lane = *laneOf(delivery);
    PartnerCounters &spell = lane.counters;
    if (outcome.kind == SendOutcome::Kind::Unsendable) {
        // Nothing left: the profile found the reminder lacking before any request.
        deadLetterUnsent(delivery, outcome.errorClass, outcome.error);
        return;
    }
    const int sends = rule ? rule->attemptsMade + 1 : delivery.sendsThisRound + 1;
    const int maxAttempts = rule ? rule->attempts : lane.maxAttempts;
    Attempt attempt{reminder.sendKey, reminder.eventId, delivery.message.id, delivery.message.delivery,
                    m_config.workerId, sentAtMs, QStringLiteral("send"), QString(), outcome.httpStatus,
                    outcome.latencyMs, outcome.errorClass, outcome.error, outcome.providerRequestId};
    notePartner(&attempt, delivery);
    LedgerUpdate update{reminder.sendKey, delivery.message.id, delivery.message.delivery, LedgerState::Applied,
                        true, sentAtMs, outcome.httpStatus, outcome.errorClass, outcome.error,
                        outcome.providerRequestId};

    if (outcome.kind == SendOutcome::Kind::Applied) {
        failpoint("after-send");
        // The partner is back after an outage: what waited for it goes out in slow start,
        // not all at once.
        const bool reopened = lane.breaker.state(now) != CircuitBreaker::State::Closed;
        lane.breaker.recordSuccess();
        lane.throttledInARow = 0;
        lane.pace.noteAccepted(now);
        if (reopened)
            lane.pace.restartSlow(now);
        ++m_counters.applied;
        ++spell.applied;
        spell.consecutiveFailures = 0;
        spell.failingSinceMs = 0;
        spell.lastHttpStatus = 0;
        lane.refusedKeys.clear();
        // The ledger takes a 2xx even from a claim that ran out meanwhile (see
        // SqlLedger::record); the history says when that happened.
        if (now >= delivery.claimExpiresAtMs)
            attempt.error = QStringLiteral("answered after this worker's claim had run out (at %1)")
                                .arg(QDateTime::fromMSecsSinceEpoch(delivery.claimExpiresAtMs, QTimeZone::utc())
                                         .toString(Qt::ISODateWithMs));
        // The outcome, the ledger change and the ack commit in one transaction, so the
        // one "applied" row also stands for the ack.
        attempt.outcome = QStringLiteral("applied");
        m_counters.sends.record(attempt.outcome, attempt.errorClass, outcome.latencyMs);
        m_pendingAttempts.append(attempt);
        m_pendingUpdates.append(update);
        m_pendingSettlements.append({Settlement::Kind::Ack, delivery.message.id, delivery.message.delivery, 0, {}});
        scheduleCycle(0);
        return;
    }

    ++m_counters.failures;
    ++spell.failures;
    const bool everyoneRefused = refusesEveryone(lane, outcome, reminder.sendKey);
    if (everyoneRefused && outcome.kind != SendOutcome::Kind::CredentialsRefused) {
        attempt.errorClass = QStringLiteral("partner-refusing");
        update.errorClass = attempt.errorClass;
    }
    const bool partnerUnhealthy = everyoneRefused || outcome.kind == SendOutcome::Kind::Transient
                                  || outcome.kind == SendOutcome::Kind::InDoubt;
    // A throttling answer slows this partner's pace (partnerpace.h). A 429 says the
    // partner is alive and reading our requests, only too many of them: it does not count
    // towards the breaker as a failure does (the pace is what answers it), and answering
    // a probe it closes the breaker into slow start. Only a long run of 429s with nothing
    // accepted (a quota used up for the day) opens it: then the backlog waits without
    // spending its tries and one probe goes at a time, instead of a request a second at
    // the pace's floor. The run is longer than a burst of sends already in flight when
    // the first 429 came. A 503 with Retry-After slows the pace too and still counts
    // towards the breaker: it is also how a partner says it is down for maintenance.
    const bool transient = outcome.kind == SendOutcome::Kind::Transient;
    const bool rateLimited = transient && outcome.httpStatus == 429;
    const bool throttled = rateLimited || (transient && outcome.httpStatus == 503 && outcome.retryAfterMs >= 0);
    if (rateLimited) {
        const int run = std::max(4 * m_config.breakerThreshold, lane.capacity + m_config.breakerThreshold);
        if (++lane.throttledInARow >= run) {
            lane.breaker.trip(now);
        } else if (lane.breaker.state(now) != CircuitBreaker::State::Closed) {
            lane.breaker.recordSuccess();
            lane.pace.restartSlow(now);
        }
    }
    if (throttled) {
        const qint64 before = lane.pace.throttledAtMs();
        lane.pace.noteThrottled(now, sentAtMs);
        if (!before || now - before > WorkerRegistry::HeartbeatIntervalMs)
            heartbeatSoon();
    }
    if (partnerUnhealthy) {
        const bool wasOpen = lane.breaker.state(now) == CircuitBreaker::State::Open;
        if (!rateLimited)
            lane.breaker.recordFailure(now);
        if (!wasOpen && lane.breaker.state(now) == CircuitBreaker::State::Open)
            heartbeatSoon();
        ++spell.consecutiveFailures;
        if (!spell.failingSinceMs)
            spell.failingSinceMs = sentAtMs;
        spell.lastFailureAtMs = now;
        spell.lastErrorClass = attempt.errorClass;
        spell.lastHttpStatus = outcome.httpStatus;
    }

    if (outcome.kind == SendOutcome::Kind::InDoubt && inDoubtPolicy(lane) == InDoubtPolicy::Hold) {
        // No idempotency to lean on: a resend could be a second effect. The message leaves
        // the queue; the event waits in the ledger for an operator.
        ++m_counters.held;
        attempt.outcome = QStringLiteral("held");
        m_counters.sends.record(attempt.outcome, attempt.errorClass, outcome.latencyMs);
        update.state = LedgerState::InDoubt;
        m_pendingAttempts.append(attempt);
        m_pendingUpdates.append(update);
        acknowledge(delivery, heldForOperator(outcome.errorClass + QStringLiteral(": ") + outcome.error));
        return;
    }

    const bool retryable = partnerUnhealthy;
    // Refused with everyone else, a reminder waits for the partner without using its own
    // tries: an expired token must not dead-letter a whole backlog.
    if (retryable && (everyoneRefused || sends < maxAttempts)) {
        ++m_counters.retries;
        // Refused with everyone else, it is due when the breaker next probes: its own
        // backoff would keep it waiting minutes after the partner took requests again.
        const qint64 delay =
            everyoneRefused ? std::max({outcome.retryAfterMs, lane.breaker.reopensInMs(now), m_config.backoffBaseMs})
            : rule          ? std::max(rule->delayAfter(sends), outcome.retryAfterMs)
                            : retryDelayMs(sends, m_config.backoffBaseMs, m_config.backoffCapMs, outcome.retryAfterMs);
        attempt.outcome = outcome.kind == SendOutcome::Kind::InDoubt ? QStringLiteral("in-doubt")
                                                                     : QStringLiteral("transient");
        update.spendsBudget = !everyoneRefused;
        const QString next =
            everyoneRefused
                ? QStringLiteral("next try in %1 ms (the partner refuses every reminder: this one waits without "
                                 "using its %2 tries)")
                      .arg(delay)
                      .arg(maxAttempts)
                : QStringLiteral("next try in %1 ms (try %2 of %3)").arg(delay).arg(sends + 1).arg(maxAttempts);
        m_counters.sends.record(attempt.outcome, attempt.errorClass, outcome.latencyMs);
        update.state = LedgerState::Retrying;
        m_pendingAttempts.append(attempt);
        m_pendingAttempts.append(Attempt{
            reminder.sendKey,
            reminder.eventId,
            delivery.message.id,
            delivery.message.delivery,
            m_config.workerId,
            now,
            QStringLiteral("retry"),
            QStringLiteral("scheduled"),
            0,
            delay,
            {},
            next,
            {}});
        m_pendingUpdates.append(update);
        m_pendingSettlements.append({Settlement::Kind::Retry,
                                     delivery.message.id,
                                     delivery.message.delivery,
                                     delay,
                                     {},
                                     outcome.errorClass + QStringLiteral(": ") + outcome.error});
        scheduleCycle(0);
        return;
    }

    attempt.outcome = retryable ? QStringLiteral("transient") : QStringLiteral("permanent");
    m_counters.sends.record(attempt.outcome, attempt.errorClass, outcome.latencyMs);
    m_pendingAttempts.append(attempt);
    update.state = LedgerState::Dead;
    m_pendingUpdates.append(update);
    Delivery sent = delivery;
    if (!sent.firstSentAtMs)
        sent.firstSentAtMs = sentAtMs;
    const QString gaveUp = sends == 1 ? QStringLiteral("gave up after 1 attempt") : QStringLiteral("gave up after %1 attempts").arg(sends);
    const QString reason = retryable ? gaveUp + QStringLiteral(": ") + outcome.error : outcome.error;
    deadLetter(sent, outcome.errorClass, reason, sends);
}

// The queue says this delivery fails without a send (see QueueMessage::failUnsent). Its
// key was claimed all the same: where an earlier claim ended without an outcome, the
// partner may have acted, so the key is held in doubt for an operator; else it is dead,
// and a redrive sends it again.
void Engine::failUnsent(const Delivery &delivery, bool inDoubt)
{
    const QString &reason = delivery.message.failUnsent;
    LedgerUpdate update{delivery.reminder.sendKey,
                        delivery.message.id,
                        delivery.message.delivery,
                        inDoubt ? LedgerState::InDoubt : LedgerState::Dead,
                        false,
                        0,
                        0,
                        QStringLiteral("stalled"),
                        reason,
                        {}};
    m_pendingUpdates.append(update);
    if (!inDoubt) {
        deadLetter(delivery, update.errorClass, reason, 0);
        return;
    }
    ++m_counters.held;
    m_pendingAttempts.append(Attempt{delivery.reminder.sendKey,
                                     delivery.reminder.eventId,
                                     delivery.message.id,
                                     delivery.message.delivery,
                                     m_config.workerId,
                                     nowMs(),
                                     QStringLiteral("claim"),
                                     QStringLiteral("held"),
                                     0,
                                     -1,
                                     update.errorClass,
                                     reason,
                                     {}});
    acknowledge(delivery,
                QStringLiteral("%1; the partner may have acted on an earlier delivery: held in doubt "
                               "for an operator")
                    .arg(reason));
}

void Engine::deadLetter(const Delivery &delivery, const QString &errorClass, const QString &error, int attempts)
{
    ++m_counters.deadLettered;
    const qint64 now = nowMs();
    const Reminder &reminder = delivery.reminder;
    DeadLetterInfo info{errorClass, error, attempts, delivery.firstSentAtMs, attempts ? now : 0,
                        reminder.sendKey, reminder.eventId};
    m_pendingSettlements.append(
        {Settlement::Kind::DeadLetter, delivery.message.id, delivery.message.delivery, 0, info});
    Attempt attempt{reminder.sendKey, reminder.eventId, delivery.message.id, delivery.message.delivery,
                    m_config.workerId, now, QStringLiteral("dead-letter"), errorClass, 0, -1, errorClass, error, {}};
    notePartner(&attempt, delivery);
    m_pendingAttempts.append(attempt);
    scheduleCycle(0);
}

void Engine::acknowledge(const Delivery &delivery, const QString &notApplied)
{
    // The ack and its history row commit together, so the history never claims an ack
    // that did not happen.
    m_pendingSettlements.append(
        {Settlement::Kind::Ack, delivery.message.id, delivery.message.delivery, 0, {}, notApplied});
    m_pendingAttempts.append(Attempt{delivery.reminder.sendKey, delivery.reminder.eventId, delivery.message.id,
                                     delivery.message.delivery, m_config.workerId, nowMs(), QStringLiteral("ack"),
                                     QStringLiteral("acked"), 0, -1, {}, {}, {}});
    scheduleCycle(0);
}

void Engine::checkIdle()
{
    QString error;
    EngineStore *side = m_storeSide;
    const auto counts = onStore([side, &error](Store &) { return side->queue().counts(&error); });
    if (!counts)
        return;
    // Leases of crashed workers count as in flight until they expire, so a survivor
    // waits for them rather than declaring the queue done.
    // A broker may hold delayed messages without saying when they are due: wait for them.
    // And for the retries it scheduled itself until they have had time to be offered again,
    // whatever the counts say: tst_delivery_rabbitmq saw a worker look while its retry
    // moved from the delay queue to the queue, call the queue idle and exit with the
    // reminder still to send.
    const bool retryDueSoon =
        (counts->nextVisibleInMs ? *counts->nextVisibleInMs <= m_config.untilIdleHorizonMs
                                 : counts->delayed > 0) ||
        nowMs() < m_lastRetryDueMs + RetryArrivalMarginMs;
    if (counts->backlogUnknown) {
        // A queue that cannot count is idle when a whole lease (or the queue's own, if
        // longer) has passed with nothing to lease: by then the deliveries a crashed
        // worker held are offered again.
        const qint64 quietMs = nowMs() - m_lastLeasedAtMs;
        if (quietMs > std::max(m_config.leaseMs, counts->hiddenUpToMs) + UnknownBacklogQuietMarginMs && !retryDueSoon) {
            qCInfo(lcEngine) << "idle: nothing to lease for a whole lease, and no retry of ours due soon";
            stop();
        }
        return;
    }
    if (counts->ready == 0 && counts->inFlight == 0 && !retryDueSoon) {
        qCInfo(lcEngine) << "idle: nothing ready, in flight or due soon";
        stop();
    }
}

void Engine::purgeExpired()
{
    if (m_config.retentionMs <= 0 || !m_storeSide)
        return;
    const qint64 before = nowMs() - m_config.retentionMs;
    onStoreLater([this, before](Store &store) {
        QString error;
        if (!store.ledger().purgeFinished(before, &error) || !store.metrics().purgeBefore(before, &error)
            || !store.workers().purgeBefore(before, &error))
            reportStoreCall(QStringLiteral("retention clean-up"), store.database().lastFailure(), error);
    });
}

// The console charts queue depth and age over time from these samples, including
// those of headless workers it never talked to.
void Engine::sampleQueue()
{
    EngineStore *side = m_storeSide;
    onStoreLater([this, side](Store &store) {
        QString error;
        const auto counts = side->queue().counts(&error);
        // A queue that counts nothing (Pub/Sub) leaves the charts empty, not at zero.
        if (counts && counts->backlogUnknown)
            return;
        if (!counts && side->usesBroker() && side->brokerConnectionLost())
            QMetaObject::invokeMethod(this, [this, error] { noteQueueLost(error); }, Qt::QueuedConnection);
        else if (!counts && side->usesBroker())
            qCWarning(lcEngine).noquote() << "sampling the queue failed:" << error;
        else if (!counts || !store.metrics().recordSample(*counts, nowMs(), &error))
            reportStoreCall(QStringLiteral("sampling the queue"), store.database().lastFailure(), error);
    });
}

void Engine::heartbeatSoon()
{
    if (m_heartbeatSoon)
        return;
    m_heartbeatSoon = true;
    QTimer::singleShot(0, this, [this] {
        m_heartbeatSoon = false;
        heartbeat();
    });
}

void Engine::heartbeat()
{
    if (!m_running)
        return;
    const QString state = m_paused ? QStringLiteral("paused") : QStringLiteral("running");
    QStringList partners;
    for (const auto &lane : m_lanes)
        partners.append(lane->settings.name);
    onStoreLater([this, id = m_config.workerId, partners, state, counters = counters()](Store &store) {
        QString error;
        if (!store.workers().heartbeat(id, state, counters, &error)) {
            reportStoreCall(QStringLiteral("heartbeat"), store.database().lastFailure(), error);
            return;
        }
        QHash<QString, KeyHonouring> records;
        for (const QString &partner : partners) {
            const auto honouring = store.inspector().recordedKeyHonouring(partner, &error);
            if (!honouring) {
                reportStoreCall(QStringLiteral("reading the partner's record"), store.database().lastFailure(), error);
                return;
            }
            records.insert(partner, *honouring);
        }
        QMetaObject::invokeMethod(this, [this, records] { notePartnerRecords(records); }, Qt::QueuedConnection);
    });
}

void Engine::reconcileInDoubt()
{
    if (!m_running || m_reconcileReading)
        return;
    m_reconcileReading = true;
    onStoreLater([this](Store &store) {
        QString error;
        EventFilter filter;
        filter.state = LedgerState::InDoubt;
        filter.limit = ReconcileScanRows;
        filter.oldestFirst = true;
        std::optional<QList<KeyReconciliation>> states;
        if (const auto rows = store.inspector().events(filter, &error)) {
            QList<QByteArray> keys;
            for (const EventRow &row : *rows)
                keys.append(row.sendKey);
            states = store.inspector().reconciliation(keys, &error);
            // A worker killed while it sent left no send in the history: the key goes to
            // its channel's partner, and its claim is when it may have gone out.
            for (qsizetype i = 0; states && i < states->size(); ++i) {
                KeyReconciliation &state = (*states)[i];
                if (state.partner.isEmpty())
                    state.partner = m_routes.partnerFor(rows->at(i).channel);
                if (!state.lastSentAtMs)
                    state.lastSentAtMs = rows->at(i).claimedAtMs ? rows->at(i).claimedAtMs : rows->at(i).updatedAtMs;
            }
        }
        if (!states)
            reportStoreCall(QStringLiteral("listing the keys in doubt to reconcile"), store.database().lastFailure(), error);
        QMetaObject::invokeMethod(this, [this, states] {
            m_reconcileReading = false;
            if (!states || !m_running)
                return;
            const qint64 now = nowMs();
            for (const KeyReconciliation &state : *states) {
                const int lane = laneIndex(state.partner);
                if (lane >= 0 && lookupDue(*m_lanes[lane], state, now))
                    askPartner(lane, state.sendKey);
            }
        }, Qt::QueuedConnection);
    });
}

// First once the grace period has passed since the send, then after twice as long as the
// wait before, up to a few hours: a key the partner cannot find is asked about again (a
// search index may lag) without asking about it every few seconds for days.
bool Engine::lookupDue(const PartnerLane &lane, const KeyReconciliation &state, qint64 now) const
{
    if (lane.lookupGraceMs < 0 || m_lookingUp.contains(state.sendKey) || m_lookingUp.size() >= MaxLookupsInFlight)
        return false;
    if (now - state.lastSentAtMs < lane.lookupGraceMs)
        return false;
    if (state.lookups == 0)
        return true;
    const qint64 base = std::max<qint64>(lane.lookupGraceMs, MinReconcileIntervalMs);
    const qint64 wait = std::min<qint64>(base << std::min(state.lookups - 1, 20), MaxLookupIntervalMs);
    return now - state.lastLookupAtMs >= wait;
}

void Engine::askPartner(int lane, const QByteArray &sendKey)
{
    m_lookingUp.insert(sendKey);
    m_lanes[lane]->sender->lookUp(sendKey, this, [this, lane, sendKey](const LookupResult &answer) {
        onLookedUp(lane, sendKey, answer);
    });
}

void Engine::onLookedUp(int laneIndex, const QByteArray &sendKey, const LookupResult &answer)
{
    PartnerLane &lane = *m_lanes[laneIndex];
    switch (answer.kind) {
    case LookupResult::Kind::Found:
        ++lane.counters.lookupsFound;
        break;
    case LookupResult::Kind::NotFound:
        ++lane.counters.lookupsNotFound;
        break;
    case LookupResult::Kind::Failed:
        ++lane.counters.lookupsFailed;
        break;
    }
    if (!m_running || !m_storeSide) {
        m_lookingUp.remove(sendKey);
        return;
    }
    // The partner has no message with the key a grace period after the send: it did not
    // take effect, and under --in-doubt resend it goes out again with the same key.
    const bool resend = m_config.inDoubtPolicy == InDoubtPolicy::Resend;
    const QString reason = QStringLiteral("not found at %1 %2 after the send left in doubt: resent under --in-doubt resend")
                               .arg(lane.settings.name, preciseDuration(lane.lookupGraceMs));
    EngineStore *side = m_storeSide;
    onStoreLater([this, side, sendKey, partner = lane.settings.name, profile = lane.settings.profile, answer, resend,
                  reason](Store &store) {
        QString error;
        const auto resent = side->settleLookup(sendKey, partner, profile, answer, resend, reason, &error);
        if (!resent)
            reportStoreCall(QStringLiteral("reconciling %1").arg(QString::fromLatin1(sendKey)),
                            store.database().lastFailure(), error);
        else if (*resent)
            qCInfo(lcEngine).noquote() << QString::fromLatin1(sendKey) << "was" << reason;
        else if (answer.kind == LookupResult::Kind::Found)
            qCInfo(lcEngine).noquote() << QString::fromLatin1(sendKey) << "reconciled: found at" << partner
                                       << answer.providerMessageId;
        QMetaObject::invokeMethod(this, [this, sendKey] { m_lookingUp.remove(sendKey); }, Qt::QueuedConnection);
    });
}

// Puts a store side on its thread and opens its connection there; *side is set before
// the open, so that closeStore() cleans up after a failed one too.
bool Engine::openSide(EngineStore **side, QThread *thread, const QString &threadName, const QString &queueUrl,
                      int prefetch, EngineStore::Notifications notifications, QString *error)
{
    EngineStore *opening = new EngineStore(m_config.storeUrl, queueUrl, m_config.workerId, prefetch);
    *side = opening;
    opening->moveToThread(thread);
    thread->setObjectName(threadName);
    thread->start();
    bool opened = false;
    QMetaObject::invokeMethod(opening, [opening, notifications, error] { return opening->open(error, notifications); },
                              Qt::BlockingQueuedConnection, &opened);
    return opened;
}

void Engine::closeSide(EngineStore **side, QThread *thread)
{
    if (!*side)
        return;
    QMetaObject::invokeMethod(*side, &EngineStore::close, Qt::BlockingQueuedConnection);
    thread->quit();
    thread->wait();
    delete *side;
    *side = nullptr;
}

void Engine::closeStore()
{
    closeSide(&m_claimSide, &m_claimThread);
    closeSide(&m_storeSide, &m_storeThread);
}

void Engine::fail(const QString &message)
{
    qCCritical(lcEngine).noquote() << message;
    emit errorOccurred(message);
    finish(1);
}

void Engine::finish(int exitCode)
{
    m_running = false;
    m_stopping = false;
    m_cycleTimer.stop();
    m_countersTimer.stop();
    m_retentionTimer.stop();
    m_sampleTimer.stop();
    m_reconcileTimer.stop();
    m_pauseTimer.stop();
    if (m_heartbeatTimer.isActive()) {
        m_heartbeatTimer.stop();
        QString error;
        if (!onStore([&](Store &store) { return store.workers().retire(m_config.workerId, counters(), &error); }))
            qCWarning(lcEngine).noquote() << "cannot mark the worker stopped:" << error;
    }
    closeStore();
    publishCounters();
    emit finished(exitCode);
}

void Engine::publishCounters()
{
    emit countersChanged(counters());
}

} // namespace once
