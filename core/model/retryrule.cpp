#include "model/retryrule.h"

#include <QRandomGenerator>

#include <algorithm>
#include <cmath>

namespace once {

qint64 RetryRule::delayAfter(int attempt) const
{
    double full = 0;
    switch (backoff) {
    case Backoff::None:
        return 0;
    case Backoff::Fixed:
        full = double(delayMs);
        break;
    case Backoff::Exponential:
        full = std::round(std::pow(2.0, std::clamp(attempt - 1, 0, 40)) * double(delayMs));
        break;
    }
    // A day at most: a producer's "delay": 1e300 must not overflow into the past.
    full = std::min(full, 24.0 * 3600 * 1000);
    const double spread = std::clamp(jitter, 0.0, 1.0);
    if (spread <= 0)
        return qint64(full);
    return qint64(
        std::floor(QRandomGenerator::global()->generateDouble() * full * spread + full * (1 - spread)));
}

} // namespace once
