#include "monitoring/metricnames.h"

namespace once {

void addSends(Exposition &out, const SendStatistics &sends)
{
    out.family(MetricNames::Sends, Exposition::Type::Counter,
               QStringLiteral("Partner calls by outcome (applied, transient, in-doubt, held, permanent) and error class."));
    for (auto it = sends.sends.cbegin(); it != sends.sends.cend(); ++it)
        out.sample(MetricNames::Sends,
                   {{QStringLiteral("outcome"), it.key().first}, {QStringLiteral("error_class"), it.key().second}},
                   double(it.value()));
    out.histogram(MetricNames::SendDuration, QStringLiteral("How long a partner call took, answered or not."),
                  sends.duration);
}

} // namespace once
