#pragma once

#include <QtGlobal>

namespace once {

// How a message says it is to be retried, where the queue keeps that with the message (a
// BullMQ job's own `attempts` and `backoff`): the engine then follows it instead of the
// worker's --max-attempts and its own backoff, so that a job fails after the attempts its
// producer asked for, as it would under a Node worker.
struct RetryRule
{
    enum class Backoff
    {
        None,
        Fixed,
        Exponential
    };

    int attempts = 1;     // sends in all, the first one included
    int attemptsMade = 0; // failed sends before this delivery
    Backoff backoff = Backoff::None;
    qint64 delayMs = 0;
    double jitter = 0; // 0..1: how much of the delay may be taken off at random

    // Whether a send that failed as attempt `attempt` (1 for the first) may be tried again.
    bool allowsAnotherAfter(int attempt) const { return attempt < attempts; }
    // The wait after attempt `attempt` failed, as BullMQ's built-in strategies reckon it:
    // fixed is the delay, exponential 2^(attempt-1) times it; with jitter, a random wait
    // between (1 - jitter) times that and that.
    qint64 delayAfter(int attempt) const;
};

} // namespace once
