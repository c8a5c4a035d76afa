#include "monitoring/workermetrics.h"

#include "delivery/engine.h"
#include "monitoring/metricnames.h"

namespace once {

QByteArray workerExposition(const EngineCounters &counters)
{
    Exposition out;
    out.counter(MetricNames::RemindersApplied, QStringLiteral("Reminders the partner accepted from this worker."),
                double(counters.applied));
    out.counter(MetricNames::DuplicatesSuppressed,
                QStringLiteral("Deliveries of an already handled send key that this worker acknowledged without sending."),
                double(counters.duplicates));
    out.counter(MetricNames::RemindersExpired,
                QStringLiteral("Reminders this worker found past their expiry before their send: settled expired, not sent."),
                double(counters.expired));
    addSends(out, counters.sends);
    out.gauge(MetricNames::BreakerOpen,
              QStringLiteral("1 while this worker's circuit breaker keeps it from sending (open or probing), else 0."),
              counters.breaker == CircuitBreaker::State::Closed ? 0 : 1);
    // Per partner (--partners): which one holds back, and how each fares.
    out.family(QStringLiteral("once_partner_breaker_open"), Exposition::Type::Gauge,
               QStringLiteral("1 while this worker's circuit breaker for the partner keeps it from sending, else 0."));
    for (const PartnerCounters &partner : counters.partners)
        out.sample(QStringLiteral("once_partner_breaker_open"), {{QStringLiteral("partner"), partner.name}},
                   partner.breaker == CircuitBreaker::State::Closed ? 0 : 1);
    out.family(QStringLiteral("once_partner_sends_applied_total"), Exposition::Type::Counter,
               QStringLiteral("Sends the partner accepted from this worker."));
    for (const PartnerCounters &partner : counters.partners)
        out.sample(QStringLiteral("once_partner_sends_applied_total"),
                   {{QStringLiteral("partner"), partner.name}, {QStringLiteral("profile"), partner.profile}},
                   double(partner.applied));
    out.family(QStringLiteral("once_partner_send_failures_total"), Exposition::Type::Counter,
               QStringLiteral("Sends to the partner that did not succeed (failed, refused or left in doubt)."));
    for (const PartnerCounters &partner : counters.partners)
        out.sample(QStringLiteral("once_partner_send_failures_total"),
                   {{QStringLiteral("partner"), partner.name}, {QStringLiteral("profile"), partner.profile}},
                   double(partner.failures));
    out.family(QStringLiteral("once_reconciliations_total"), Exposition::Type::Counter,
               QStringLiteral("Keys left in doubt this worker asked the partner for, by its answer: found (settled "
                              "applied), not-found, failed (no answer)."));
    for (const PartnerCounters &partner : counters.partners) {
        const std::pair<const char *, qint64> answers[] = {
            {"found", partner.lookupsFound}, {"not-found", partner.lookupsNotFound}, {"failed", partner.lookupsFailed}};
        for (const auto &[result, count] : answers)
            out.sample(QStringLiteral("once_reconciliations_total"),
                       {{QStringLiteral("partner"), partner.name}, {QStringLiteral("result"), QLatin1String(result)}},
                       double(count));
    }
    out.counter(QStringLiteral("once_retries_scheduled_total"),
                QStringLiteral("Failed sends this worker put back for a later try with the same key."),
                double(counters.retries));
    out.counter(QStringLiteral("once_dead_lettered_total"),
                QStringLiteral("Messages this worker dead-lettered (failed for good or out of attempts)."),
                double(counters.deadLettered));
    out.counter(QStringLiteral("once_held_in_doubt_total"),
                QStringLiteral("Sends this worker held for an operator because their outcome is unknown."),
                double(counters.held));
    out.gauge(QStringLiteral("once_deliveries_in_flight"),
              QStringLiteral("Deliveries this worker has leased and not yet settled."), counters.inFlight);
    out.gauge(QStringLiteral("once_worker_paused"), QStringLiteral("1 while this worker is paused, else 0."),
              counters.paused ? 1 : 0);
    // Scraped from the worker, so it shows while the store cannot (the heartbeat there
    // stops for as long as the spell lasts).
    out.gauge(QStringLiteral("once_worker_store_lost"),
              QStringLiteral("1 while this worker has lost its connection to the store and is reconnecting, else 0."),
              counters.storeLost() ? 1 : 0);
    out.gauge(QStringLiteral("once_worker_store_lost_at_seconds"),
              QStringLiteral("When this worker last lost its connection to the store (Unix time), or 0."),
              double(counters.storeLostAtMs) / 1000);
    return out.text();
}

} // namespace once
