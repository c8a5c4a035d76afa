#include "monitoring/sendstatistics.h"

namespace once {

QList<double> SendStatistics::durationBoundsSeconds()
{
    return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

void SendStatistics::record(const QString &outcome, const QString &errorClass, qint64 latencyMs)
{
    ++sends[{outcome, errorClass}];
    duration.observe(double(std::max<qint64>(0, latencyMs)) / 1000.0);
}

} // namespace once
