#include "engine.h"

#include "failpoint.h"
#include "partnersender.h"
#include "store.h"

#include <QLoggingCategory>

Q_LOGGING_CATEGORY(lcEngine, "once.core.engine")

namespace once {

namespace {
constexpr int MaxLeaseBatch = 256;
}

Engine::Engine(const EngineConfig &config, QObject *parent)
    : QObject(parent), m_config(config), m_breaker(config.breakerThreshold)
{
    qRegisterMetaType<once::EngineCounters>();
    m_pumpTimer.setSingleShot(true);
    connect(&m_pumpTimer, &QTimer::timeout, this, &Engine::pump);
    m_countersTimer.setInterval(250);
    connect(&m_countersTimer, &QTimer::timeout, this, &Engine::publishCounters);
    m_retentionTimer.setInterval(60 * 1000);
    connect(&m_retentionTimer, &QTimer::timeout, this, &Engine::purgeExpired);
}

Engine::~Engine() = default;

EngineCounters Engine::counters() const
{
    EngineCounters counters = m_counters;
    counters.inFlight = m_inFlight;
    counters.breaker = m_breaker.state(nowMs());
    counters.paused = m_paused;
    counters.running = m_running;
    return counters;
}

void Engine::start()
{
    if (m_running)
        return;
    QString error;
    m_store = Store::open(m_config.storeUrl, &error);
    if (!m_store) {
        fail(error);
        return;
    }
    m_queue = &m_store->queue();
    m_ledger = &m_store->ledger();
    m_sender = new PartnerSender(m_config.partnerUrl, m_config.concurrency, m_config.requestTimeoutMs,
                                 m_config.partnerToken, this);
    m_running = true;
    m_countersTimer.start();
    m_retentionTimer.start();
    qCInfo(lcEngine).noquote() << "worker" << m_config.workerId << "delivering to" << m_sender->displayUrl()
                               << "from" << m_store->database().location().displayName();
    emit started();
    purgeExpired();
    schedulePump(0);
}

void Engine::pause()
{
    m_paused = true;
    publishCounters();
}

void Engine::resume()
{
    m_paused = false;
    publishCounters();
    schedulePump(0);
}

void Engine::stop()
{
    if (!m_running)
        return;
    m_stopping = true;
    m_pumpTimer.stop();
    if (m_inFlight == 0 && !m_flushScheduled)
        finish(0);
}

void Engine::schedulePump(qint64 delayMs)
{
    if (!m_running || m_stopping)
        return;
    const int delay = int(std::clamp<qint64>(delayMs, 0, 60000));
    if (m_pumpTimer.isActive() && m_pumpTimer.remainingTime() <= delay)
        return;
    m_pumpTimer.start(delay);
}

void Engine::pump()
{
    if (!m_running || m_stopping || m_paused)
        return;
    const qint64 now = nowMs();
    const int room = m_breaker.allowance(now, m_config.concurrency, m_inFlight);
    if (room <= 0) {
        if (m_breaker.state(now) == CircuitBreaker::State::Open)
            schedulePump(m_breaker.reopensInMs(now) + 1);
        return; // a finishing send pumps again
    }
    consume(std::min(room, MaxLeaseBatch));
}

void Engine::consume(int room)
{
    QString error;
    const QList<QueueMessage> leased = m_queue->lease(room, m_config.leaseMs, m_config.workerId, &error);
    if (!error.isEmpty()) {
        qCWarning(lcEngine).noquote() << "lease failed:" << error;
        schedulePump(1000);
        return;
    }
    if (leased.isEmpty()) {
        if (m_inFlight == 0 && m_config.untilIdle)
            checkIdle();
        schedulePump(m_config.idlePollMs);
        return;
    }
    failpoint("after-consume");
    m_counters.leased += leased.size();
    m_inFlight += int(leased.size());

    QList<ClaimRequest> claims;
    QList<const QueueMessage *> claimedMessages;
    claims.reserve(leased.size());
    claimedMessages.reserve(leased.size());
    for (const auto &message : leased) {
        auto parsed = parseReminder(message.payload);
        if (!parsed.reminder) {
            ++m_counters.invalid;
            deadLetter(Delivery{message, {}, 0, 0}, QStringLiteral("invalid-message"), parsed.error, 0);
            continue;
        }
        claims.append(ClaimRequest{std::move(*parsed.reminder), message.id, message.delivery, message.leaseUntilMs});
        claimedMessages.append(&message);
    }
    const QList<ClaimResult> results =
        claims.isEmpty() ? QList<ClaimResult>() : m_ledger->claim(claims, m_config.workerId, m_config.inDoubtPolicy, &error);
    if (results.size() != claims.size()) {
        // Nothing was claimed; the leases run out and the messages come back.
        qCWarning(lcEngine).noquote() << "claim failed:" << error;
        m_inFlight -= int(claims.size());
        scheduleFlush();
        schedulePump(1000);
        return;
    }
    failpoint("after-claim");

    for (qsizetype i = 0; i < claims.size(); ++i) {
        const ClaimResult &result = results.at(i);
        const Delivery delivery{*claimedMessages.at(i), claims.at(i).reminder, result.sendsThisRound,
                                result.firstSentAtMs};
        switch (result.outcome) {
        case ClaimResult::Outcome::Resend:
            ++m_counters.resent;
            [[fallthrough]];
        case ClaimResult::Outcome::Claimed:
            sendNow(delivery);
            break;
        case ClaimResult::Outcome::Duplicate:
        case ClaimResult::Outcome::Held:
            // Recognised as already handled (or handed to an operator): ack without sending.
            if (result.outcome == ClaimResult::Outcome::Duplicate)
                ++m_counters.duplicates;
            else
                ++m_counters.held;
            acknowledge(delivery);
            break;
        case ClaimResult::Outcome::Busy:
            m_pendingSettlements.append(
                {Settlement::Kind::Retry, delivery.message.id, delivery.message.delivery, result.busyForMs + 100, {}});
            scheduleFlush();
            break;
        }
    }
    if (leased.size() == room)
        schedulePump(0);
}

void Engine::sendNow(const Delivery &delivery)
{
    const qint64 sentAt = nowMs();
    m_sender->send(delivery.reminder.sendKey, delivery.reminder.payload, this,
                   [this, delivery, sentAt](const SendOutcome &outcome) { onSent(delivery, outcome, sentAt); });
}

void Engine::onSent(const Delivery &delivery, const SendOutcome &outcome, qint64 sentAtMs)
{
    const qint64 now = nowMs();
    const Reminder &reminder = delivery.reminder;
    const int sends = delivery.sendsThisRound + 1;
    Attempt attempt{reminder.sendKey, reminder.eventId, delivery.message.id, delivery.message.delivery,
                    m_config.workerId, sentAtMs, QStringLiteral("send"), QString(), outcome.httpStatus,
                    outcome.latencyMs, outcome.errorClass, outcome.error, outcome.providerRequestId};
    LedgerUpdate update{reminder.sendKey, LedgerState::Applied, true, sentAtMs, outcome.httpStatus,
                        outcome.errorClass, outcome.error, outcome.providerRequestId};

    if (outcome.kind == SendOutcome::Kind::Applied) {
        failpoint("after-send");
        m_breaker.recordSuccess();
        ++m_counters.applied;
        attempt.outcome = QStringLiteral("applied");
        m_pendingAttempts.append(attempt);
        m_pendingUpdates.append(update);
        acknowledge(delivery);
        if (m_config.recordLatencies)
            m_pendingAckedEnqueueTimes.push_back(delivery.message.enqueuedAtMs);
        return;
    }

    ++m_counters.failures;
    const bool partnerUnhealthy =
        outcome.kind == SendOutcome::Kind::Transient || outcome.kind == SendOutcome::Kind::InDoubt;
    if (partnerUnhealthy)
        m_breaker.recordFailure(now);

    if (outcome.kind == SendOutcome::Kind::InDoubt && m_config.inDoubtPolicy == InDoubtPolicy::Hold) {
        // No idempotency to lean on: a resend could be a second effect. The message leaves
        // the queue; the event waits in the ledger for an operator.
        ++m_counters.held;
        attempt.outcome = QStringLiteral("held");
        update.state = LedgerState::InDoubt;
        m_pendingAttempts.append(attempt);
        m_pendingUpdates.append(update);
        acknowledge(delivery);
        return;
    }

    const bool retryable = partnerUnhealthy;
    if (retryable && sends < m_config.maxAttempts) {
        ++m_counters.retries;
        const qint64 delay = retryDelayMs(sends, m_config.backoffBaseMs, m_config.backoffCapMs, outcome.retryAfterMs);
        attempt.outcome = outcome.kind == SendOutcome::Kind::InDoubt ? QStringLiteral("in-doubt")
                                                                     : QStringLiteral("transient");
        update.state = LedgerState::Retrying;
        m_pendingAttempts.append(attempt);
        m_pendingAttempts.append(Attempt{reminder.sendKey, reminder.eventId, delivery.message.id,
                                         delivery.message.delivery, m_config.workerId, now, QStringLiteral("retry"),
                                         QStringLiteral("scheduled"), 0, delay, {},
                                         QStringLiteral("next try in %1 ms (try %2 of %3)")
                                             .arg(delay)
                                             .arg(sends + 1)
                                             .arg(m_config.maxAttempts),
                                         {}});
        m_pendingUpdates.append(update);
        m_pendingSettlements.append({Settlement::Kind::Retry, delivery.message.id, delivery.message.delivery, delay, {}});
        scheduleFlush();
        return;
    }

    attempt.outcome = retryable ? QStringLiteral("transient") : QStringLiteral("permanent");
    m_pendingAttempts.append(attempt);
    update.state = LedgerState::Dead;
    m_pendingUpdates.append(update);
    Delivery sent = delivery;
    if (!sent.firstSentAtMs)
        sent.firstSentAtMs = sentAtMs;
    const QString reason = retryable ? QStringLiteral("gave up after %1 attempts: %2").arg(sends).arg(outcome.error)
                                     : outcome.error;
    deadLetter(sent, outcome.errorClass, reason, sends);
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
    m_pendingAttempts.append(Attempt{reminder.sendKey, reminder.eventId, delivery.message.id,
                                     delivery.message.delivery, m_config.workerId, now,
                                     QStringLiteral("dead-letter"), errorClass, 0, -1, errorClass, error, {}});
    scheduleFlush();
}

void Engine::acknowledge(const Delivery &delivery)
{
    m_pendingSettlements.append({Settlement::Kind::Ack, delivery.message.id, delivery.message.delivery, 0, {}});
    m_pendingAckRows.append(Attempt{delivery.reminder.sendKey, delivery.reminder.eventId, delivery.message.id,
                                    delivery.message.delivery, m_config.workerId, 0, QStringLiteral("ack"),
                                    QStringLiteral("acked"), 0, -1, {}, {}, {}});
    scheduleFlush();
}

void Engine::scheduleFlush()
{
    if (m_flushScheduled)
        return;
    m_flushScheduled = true;
    QMetaObject::invokeMethod(this, &Engine::flush, Qt::QueuedConnection);
}

// Group commit: every outcome gathered since the last flush is recorded in one
// transaction, and only then are the messages settled on the queue.
void Engine::flush()
{
    m_flushScheduled = false;
    QString error;
    if (!m_pendingUpdates.isEmpty() || !m_pendingAttempts.isEmpty()) {
        if (!m_ledger->record(m_pendingUpdates, m_pendingAttempts, &error)) {
            // Not recorded means not acked: the leases expire and the claims are found in doubt.
            qCWarning(lcEngine).noquote() << "recording outcomes failed:" << error;
            emit errorOccurred(QStringLiteral("recording outcomes failed: ") + error);
            m_inFlight -= int(m_pendingSettlements.size());
            m_pendingUpdates.clear();
            m_pendingAttempts.clear();
            m_pendingSettlements.clear();
            m_pendingAckedEnqueueTimes.clear();
            m_pendingAckRows.clear();
            schedulePump(1000);
            return;
        }
        failpoint("after-record");
    }
    const int settled = int(m_pendingSettlements.size());
    if (!m_queue->settle(m_pendingSettlements, &error)) {
        qCWarning(lcEngine).noquote() << "settling messages failed:" << error;
        emit errorOccurred(QStringLiteral("settling messages failed: ") + error);
    } else {
        const qint64 now = nowMs();
        for (const qint64 enqueuedAt : m_pendingAckedEnqueueTimes)
            m_latenciesMs.push_back(now - enqueuedAt);
        // The history learns of an ack only once it has happened.
        for (auto &row : m_pendingAckRows)
            row.atMs = now;
        if (!m_pendingAckRows.isEmpty() && !m_ledger->record({}, m_pendingAckRows, &error))
            qCWarning(lcEngine).noquote() << "recording acks in the history failed:" << error;
    }
    m_inFlight -= settled;
    m_pendingUpdates.clear();
    m_pendingAttempts.clear();
    m_pendingSettlements.clear();
    m_pendingAckedEnqueueTimes.clear();
    m_pendingAckRows.clear();
    if (m_stopping) {
        if (m_inFlight == 0)
            finish(0);
        return;
    }
    schedulePump(0);
}

void Engine::checkIdle()
{
    QString error;
    const auto counts = m_queue->counts(&error);
    if (!counts)
        return;
    // Leases of crashed workers count as in flight until they expire, so a survivor
    // waits for them rather than declaring the queue done.
    const bool retryDueSoon = counts->nextVisibleInMs && *counts->nextVisibleInMs <= m_config.untilIdleHorizonMs;
    if (counts->ready == 0 && counts->inFlight == 0 && !retryDueSoon) {
        qCInfo(lcEngine) << "idle: nothing ready, in flight or due soon";
        stop();
    }
}

void Engine::purgeExpired()
{
    if (m_config.retentionMs <= 0 || !m_ledger)
        return;
    QString error;
    if (!m_ledger->purgeFinished(nowMs() - m_config.retentionMs, &error))
        qCWarning(lcEngine).noquote() << "retention clean-up failed:" << error;
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
    m_pumpTimer.stop();
    m_countersTimer.stop();
    m_retentionTimer.stop();
    publishCounters();
    emit finished(exitCode);
}

void Engine::publishCounters()
{
    emit countersChanged(counters());
}

} // namespace once
