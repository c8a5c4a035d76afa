#pragma once

#include <QtGlobal>

namespace once {

// Stops a partner outage from burning every message's attempts: after a run of
// consecutive failures consumption pauses; after a cooldown one probe goes through;
// success closes the breaker, failure doubles the cooldown (up to a cap).
class CircuitBreaker final
{
public:
    enum class State { Closed, Open, HalfOpen };

    explicit CircuitBreaker(int failureThreshold = 5, qint64 initialCooldownMs = 1000, qint64 maxCooldownMs = 30000)
        : m_threshold(failureThreshold), m_initialCooldownMs(initialCooldownMs), m_maxCooldownMs(maxCooldownMs),
          m_cooldownMs(initialCooldownMs)
    {
    }

    State state(qint64 nowMs) const
    {
        if (m_state == State::Open && nowMs >= m_openUntilMs)
            return State::HalfOpen;
        return m_state;
    }
    // How many new sends may start now, given those already in flight.
    int allowance(qint64 nowMs, int capacity, int inFlight) const
    {
        switch (state(nowMs)) {
        case State::Closed:
            return capacity - inFlight;
        case State::HalfOpen:
            return inFlight == 0 ? 1 : 0; // a single probe
        case State::Open:
            break;
        }
        return 0;
    }
    qint64 reopensInMs(qint64 nowMs) const { return m_state == State::Open ? std::max<qint64>(0, m_openUntilMs - nowMs) : 0; }

    void recordSuccess()
    {
        m_consecutiveFailures = 0;
        m_state = State::Closed;
        m_cooldownMs = m_initialCooldownMs;
    }
    void recordFailure(qint64 nowMs)
    {
        ++m_consecutiveFailures;
        const bool probeFailed = state(nowMs) == State::HalfOpen;
        if (probeFailed || (m_state == State::Closed && m_consecutiveFailures >= m_threshold)) {
            if (probeFailed)
                m_cooldownMs = std::min(m_cooldownMs * 2, m_maxCooldownMs);
            m_state = State::Open;
            m_openUntilMs = nowMs + m_cooldownMs;
        }
    }

    // Opens it now, as a run of failures would (or a failed probe, when half open): for
    // answers that count only as a whole run (a partner that throttles everything).
    void trip(qint64 nowMs)
    {
        m_consecutiveFailures = std::max(m_consecutiveFailures, m_threshold - 1);
        recordFailure(nowMs);
    }

private:
    int m_threshold = 5;
    qint64 m_initialCooldownMs = 1000;
    qint64 m_maxCooldownMs = 30000;
    qint64 m_cooldownMs = 1000;
    int m_consecutiveFailures = 0;
    State m_state = State::Closed;
    qint64 m_openUntilMs = 0;
};

} // namespace once
