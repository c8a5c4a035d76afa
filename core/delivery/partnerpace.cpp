#include "delivery/partnerpace.h"

#include <algorithm>
#include <cmath>

namespace once {

PartnerPace::PartnerPace(double ceilingPerSecond)
    : m_ceiling(std::max(0.0, ceilingPerSecond)), m_rate(m_ceiling)
{
    m_step = std::max(1.0, m_ceiling / 20);
    m_tokens = burst();
}

double PartnerPace::burst() const
{
    return std::max(1.0, m_rate / 10);
}

void PartnerPace::setRate(double perSecond)
{
    m_rate = perSecond;
    if (m_rate > 0)
        m_tokens = std::min(m_tokens, burst());
}

void PartnerPace::advance(qint64 nowMs)
{
    if (m_rate <= 0 || !m_stepAtMs) {
        m_stepAtMs = nowMs;
        return;
    }
    while (nowMs - m_stepAtMs >= 1000) {
        m_stepAtMs += 1000;
        // A pace grows only by seconds it held a request back: a lane that was idle, or
        // limited by its send slots, has shown nothing about a faster pace.
        const bool used = m_heldBack;
        m_heldBack = false;
        if (!used)
            continue;
        const double grown = m_slowStart ? m_rate * 2 : m_rate + m_step;
        if (m_ceiling > 0 && grown >= m_ceiling) {
            setRate(m_ceiling);
            m_slowStart = false;
            m_stepAtMs = nowMs; // at the ceiling: nothing more to grow
            return;
        }
        const double unlimitedAbove = m_slowStart ? SlowStartEndsPerSecond : m_unlimitedAbove;
        if (m_ceiling <= 0 && unlimitedAbove > 0 && grown >= unlimitedAbove) {
            setRate(0);
            m_slowStart = false;
            m_stepAtMs = nowMs;
            return;
        }
        setRate(grown);
    }
}

double PartnerPace::perSecond(qint64 nowMs) const
{
    PartnerPace later = *this;
    later.advance(nowMs);
    return later.m_rate;
}

bool PartnerPace::slowStart(qint64 nowMs) const
{
    PartnerPace later = *this;
    later.advance(nowMs);
    return later.m_slowStart;
}

bool PartnerPace::take(qint64 nowMs)
{
    advance(nowMs);
    if (m_rate <= 0)
        return true;
    if (m_tokensAtMs)
        m_tokens = std::min(burst(), m_tokens + double(nowMs - m_tokensAtMs) * m_rate / 1000);
    m_tokensAtMs = nowMs;
    if (m_tokens < 1) {
        m_heldBack = true;
        return false;
    }
    m_tokens -= 1;
    return true;
}

qint64 PartnerPace::waitMs(qint64) const
{
    if (m_rate <= 0)
        return 1;
    return std::max<qint64>(1, qint64(std::ceil((1 - m_tokens) * 1000 / m_rate)));
}

int PartnerPace::concurrency(qint64 nowMs, int capacity) const
{
    if (!slowStart(nowMs))
        return capacity;
    return std::clamp(int(std::ceil(perSecond(nowMs))), 1, std::max(1, capacity));
}

int PartnerPace::acceptedLastSecond(qint64 nowMs) const
{
    const qint64 tenth = nowMs / 100;
    int sum = 0;
    for (qint64 t = std::max(m_acceptedTenth - 9, tenth - 9); t <= m_acceptedTenth; ++t)
        sum += m_acceptedTenths[size_t(t % 10)];
    return sum;
}

void PartnerPace::noteAccepted(qint64 nowMs)
{
    const qint64 tenth = nowMs / 100;
    if (tenth > m_acceptedTenth) {
        // Empty the slots of the tenths that passed without an acceptance.
        for (qint64 t = std::max(m_acceptedTenth + 1, tenth - 9); t <= tenth; ++t)
            m_acceptedTenths[size_t(t % 10)] = 0;
        m_acceptedTenth = tenth;
    }
    if (tenth > m_acceptedTenth - 10)
        ++m_acceptedTenths[size_t(tenth % 10)];
}

bool PartnerPace::noteThrottled(qint64 nowMs, qint64 sentAtMs)
{
    m_throttledAtMs = nowMs;
    if (m_changedAtMs && (sentAtMs < m_changedAtMs || nowMs - m_changedAtMs < MinCutIntervalMs))
        return false;
    advance(nowMs);
    double cut = 0;
    if (m_rate > 0) {
        cut = m_rate / 2;
    } else {
        // No limit until now: what the partner took over the last second is what it can.
        cut = double(acceptedLastSecond(nowMs));
    }
    setRate(std::max(FloorPerSecond, cut));
    if (m_ceiling <= 0) {
        m_step = std::max(1.0, m_rate / 20);
        m_unlimitedAbove = m_rate * 10;
    }
    m_slowStart = false;
    m_changedAtMs = nowMs;
    m_stepAtMs = nowMs;
    m_heldBack = false;
    return true;
}

void PartnerPace::restartSlow(qint64 nowMs)
{
    const double start = m_ceiling > 0 ? std::max(1.0, m_ceiling / 10) : SlowStartPerSecond;
    m_slowStart = m_ceiling <= 0 || start < m_ceiling;
    m_tokens = 0; // the request that closed the breaker was this second's first
    m_tokensAtMs = nowMs;
    setRate(m_ceiling > 0 ? std::min(start, m_ceiling) : start);
    m_changedAtMs = nowMs;
    m_stepAtMs = nowMs;
    m_heldBack = false;
}

} // namespace once
