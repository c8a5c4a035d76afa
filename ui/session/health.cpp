#include "session/health.h"

#include "display/humanunits.h"

#include "alerting/alerttext.h"

namespace once::ui {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("once::ui::Health", text);
}

HealthAlert::Kind kindOf(const Alert &alert)
{
    switch (alert.rule) {
    case AlertRule::PartnerDown:
        return alert.severity == AlertSeverity::Critical ? HealthAlert::Kind::PartnerDown
                                                         : HealthAlert::Kind::PartnerFailing;
    case AlertRule::PartnerFailingSends:
        return HealthAlert::Kind::PartnerDown;
    case AlertRule::NoWorker:
        return HealthAlert::Kind::NoWorker;
    case AlertRule::OldestReady:
        return HealthAlert::Kind::OldestWaiting;
    case AlertRule::InDoubt:
        return HealthAlert::Kind::InDoubt;
    default:
        return HealthAlert::Kind::Other;
    }
}

} // namespace

QString workersSummary(const WorkerTally &tally)
{
    if (tally.total() == 0)
        return tr("No worker on this store");
    QStringList parts;
    if (tally.running)
        parts << (tally.holdingBack && !tally.paused
                      ? tr("%1 running (%2 holding back)").arg(tally.running).arg(tally.holdingBack)
                      : tr("%1 running").arg(tally.running));
    if (tally.paused)
        parts << tr("%1 paused").arg(tally.paused);
    if (tally.gone)
        parts << tr("%1 gone").arg(tally.gone);
    if (tally.stopped)
        parts << tr("%1 stopped").arg(tally.stopped);
    return formatQuantity(tally.total(), tr("worker"), tr("workers")) + QStringLiteral(": ") +
           parts.join(QStringLiteral(", "));
}

Severity workersSeverity(const WorkerTally &tally)
{
    if (tally.live() == 0)
        return tally.total() > 0 && tally.gone > 0 ? Severity::Alert : Severity::Warning;
    if (tally.holdingBack > 0)
        return Severity::Alert;
    if (tally.gone > 0 || tally.paused > 0)
        return Severity::Warning;
    return Severity::Good;
}

QList<HealthAlert> healthAlerts(const std::optional<DeliveryStats> &stats, const QList<WorkerRecord> &workers,
                                qint64 nowMs, const AlertThresholds &thresholds)
{
    AlertInputs inputs;
    inputs.stats = stats;
    inputs.workers = workers;
    QList<HealthAlert> alerts;
    for (const Alert &alert : evaluateAlerts(inputs, thresholds, nowMs))
        alerts.append(HealthAlert{kindOf(alert),
                                  alert.severity == AlertSeverity::Critical ? Severity::Alert : Severity::Warning,
                                  alertText(alert, nowMs), alert});
    return alerts;
}

} // namespace once::ui
