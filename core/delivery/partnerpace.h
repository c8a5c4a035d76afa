#pragma once

#include <QtGlobal>

#include <array>

namespace once {

// How fast one partner is sent to: sending at the partner's pace (AIMD, as TCP does with
// its congestion window, in requests a second).
//
// - The configured rate ("rate" in the partners file, --rate) is a ceiling, not a target.
// - A throttling answer (a 429, or a 503 with Retry-After) halves the pace, once per
//   change: an answer to a request sent before the pace last changed says nothing new (a
//   burst of 429s already in flight would otherwise halve it to nothing), nor does one
//   within MinCutIntervalMs of the last cut. The pace never drops below FloorPerSecond.
// - Each whole second without a throttling answer in which the pace held a request back
//   raises it by a step, max(1, a twentieth of the ceiling), never above the ceiling. (A
//   second in which the lane was idle, or busy only up to its send slots, says nothing
//   about a faster pace, as TCP grows only a window it uses: so an idle lane does not
//   come back to a burst at a pace never tried.)
// - Without a ceiling the pace starts unlimited. At the first throttling answer it takes
//   the rate the partner accepted over the last second (what it showed it can take, at
//   least the floor) and goes on from there by AIMD, with steps of a twentieth of the
//   pace it was last cut to; after a long spell without throttling (ten times that pace
//   reached: minutes) it is unlimited again.
// - Slow start (restartSlow(), when the partner's breaker closes after being open): the
//   pace restarts at max(1, a tenth of the ceiling), or SlowStartPerSecond without one,
//   and doubles each second (that it held a request back) until it reaches the ceiling
//   (then AIMD), or the first throttling answer (which halves it, then AIMD), or without
//   a ceiling SlowStartEndsPerSecond (then unlimited). Meanwhile no more requests are in
//   flight at once than the pace allows in a second. A backlog built up during an outage
//   so goes out at a rate the partner has shown it takes, not all at once.
//
// Requests are let through by a token bucket holding a tenth of a second's worth (at
// least one), so a pace is spread over its second rather than sent in one burst.
// Pure: the caller passes the time, so that tests can step through it.
class PartnerPace final
{
public:
    static constexpr double FloorPerSecond = 1;
    static constexpr qint64 MinCutIntervalMs = 250;
    static constexpr double SlowStartPerSecond = 2;
    static constexpr double SlowStartEndsPerSecond = 1024;

    explicit PartnerPace(double ceilingPerSecond = 0);

    double ceilingPerSecond() const { return m_ceiling; }
    // The pace now, in requests a second; 0: no limit now.
    double perSecond(qint64 nowMs) const;
    bool slowStart(qint64 nowMs) const;
    qint64 throttledAtMs() const { return m_throttledAtMs; }

    // Takes the right to send one request now; false: wait waitMs().
    bool take(qint64 nowMs);
    qint64 waitMs(qint64 nowMs) const;
    // Of a lane's send slots, how many may be in use now.
    int concurrency(qint64 nowMs, int capacity) const;

    void noteAccepted(qint64 nowMs);
    // A throttling answer to a request sent at sentAtMs; true when it cut the pace.
    bool noteThrottled(qint64 nowMs, qint64 sentAtMs);
    void restartSlow(qint64 nowMs);

private:
    void advance(qint64 nowMs); // the seconds without throttling since the last step
    double burst() const;
    int acceptedLastSecond(qint64 nowMs) const;
    void setRate(double perSecond);

    double m_ceiling = 0;
    double m_rate = 0; // 0: unlimited
    double m_step = 1;
    double m_unlimitedAbove = 0; // without a ceiling: back to unlimited past this
    bool m_slowStart = false;
    double m_tokens = 1;
    qint64 m_tokensAtMs = 0;
    qint64 m_stepAtMs = 0;    // when the pace last grew, or changed otherwise
    qint64 m_changedAtMs = 0; // when it was last cut or restarted
    qint64 m_throttledAtMs = 0;
    bool m_heldBack = false; // take() refused a request since the last step
    // Accepted requests in the last second, in tenths of a second.
    std::array<int, 10> m_acceptedTenths{};
    qint64 m_acceptedTenth = 0; // the tenth of a second the last slot counts
};

} // namespace once
