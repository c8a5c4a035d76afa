#pragma once

#include "monitoring/exposition.h"
#include "monitoring/sendstatistics.h"

namespace once {

// The metrics that a worker's /metrics and the store-wide one (once serve) share: the
// same name and meaning, one counted by a process, the other read from the store.
namespace MetricNames {
inline const QString RemindersApplied = QStringLiteral("once_reminders_applied_total");
inline const QString DuplicatesSuppressed = QStringLiteral("once_duplicates_suppressed_total");
inline const QString RemindersExpired = QStringLiteral("once_reminders_expired_total");
inline const QString Sends = QStringLiteral("once_sends_total");
inline const QString SendDuration = QStringLiteral("once_send_duration_seconds");
inline const QString BreakerOpen = QStringLiteral("once_breaker_open");
} // namespace MetricNames

// once_sends_total{outcome,error_class} and the once_send_duration_seconds histogram.
void addSends(Exposition &out, const SendStatistics &sends);

} // namespace once
