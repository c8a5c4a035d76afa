#include "session/health.h"

#include "display/humanunits.h"
#include "settings/settings.h"

#include "store/database.h"

#include <algorithm>
#include <iterator>

namespace once::ui {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("once::ui::Health", text);
}

// A live worker that has failed every send for a while: its breaker holds it back, or
// it has failed several times in a row (a worker may run with a high breaker threshold).
constexpr int FailuresInARowForASpell = 3;

bool isFailing(const WorkerRecord &worker, qint64 nowMs)
{
    return worker.isLive(nowMs) && worker.failingSinceMs > 0 &&
           (worker.breaker != QLatin1String("closed") ||
            worker.consecutiveFailures >= FailuresInARowForASpell);
}

QString workersText(int count)
{
    return count == 1 ? tr("the worker") : tr("%1 workers").arg(formatCount(count));
}

// "partner down for 3 min (12 failed sends in a row, last http-5xx): ..." for the
// workers that fail now.
// refusingAll: the history shows failed sends and nothing applied for five minutes, so
// a spell shorter than the threshold is no blip either.
HealthAlert partnerAlert(const QList<WorkerRecord> &failing, int live, qint64 nowMs,
                         const HealthThresholds &thresholds, bool refusingAll)
{
    qint64 since = nowMs;
    int inARow = 0;
    int holding = 0;
    qint64 lastFailureAt = 0;
    QString lastError;
    for (const WorkerRecord &worker : failing) {
        since = std::min(since, worker.failingSinceMs);
        inARow += worker.consecutiveFailures;
        if (worker.breaker != QLatin1String("closed"))
            ++holding;
        if (worker.lastFailureAtMs >= lastFailureAt) {
            lastFailureAt = worker.lastFailureAtMs;
            lastError = worker.lastErrorClass;
        }
    }
    const qint64 forMs = std::max<qint64>(0, nowMs - since);
    QString facts =
        inARow == 1 ? tr("1 failed send") : tr("%1 failed sends in a row").arg(formatCount(inARow));
    if (!lastError.isEmpty())
        facts += tr(", last %1").arg(lastError);
    // The last failure long ago: nothing has been sent since (all dead-lettered, say).
    if (lastFailureAt > 0 && nowMs - lastFailureAt >= 60000)
        facts += tr(" %1 ago").arg(formatDuration(nowMs - lastFailureAt));
    // A worker with several partners names the one failing: the others go on.
    QStringList partners;
    for (const WorkerRecord &worker : failing) {
        if (worker.partners.size() > 1 && !worker.failingPartner.isEmpty() && !partners.contains(worker.failingPartner))
            partners.append(worker.failingPartner);
    }
    const QString partner = partners.isEmpty() ? tr("Partner") : tr("Partner %1").arg(partners.join(QStringLiteral(", ")));
    const QString thePartner = partners.isEmpty() ? tr("The partner") : tr("Partner %1").arg(partners.join(QStringLiteral(", ")));
    const int count = int(failing.size());
    const QString who = count < live ? tr("for %1 of %2 workers").arg(count).arg(live) : QString();
    QString doing;
    if (holding == count)
        doing = count == 1 ? tr("the worker is holding back and retries by itself")
                           : tr("%1 are holding back and retry by themselves").arg(workersText(count));
    else
        doing = count == 1 ? tr("the worker keeps retrying by itself")
                           : tr("%1 keep retrying by themselves").arg(workersText(count));

    HealthAlert alert;
    alert.kind = HealthAlert::Kind::PartnerDown;
    // Refused alike whatever the reminder: no blip to wait out, and not the partner's
    // outage to sit through either. Someone must fix something, so say what at once.
    const auto refusing = std::find_if(failing.cbegin(), failing.cend(), [](const WorkerRecord &worker) {
        return worker.partnerRefusesEveryone();
    });
    if (refusing != failing.cend()) {
        alert.severity = Severity::Alert;
        const QString status = refusing->lastHttpStatus ? tr("HTTP %1").arg(refusing->lastHttpStatus) : tr("a refusal");
        const QString sinceText = formatDisplayTime(since);
        alert.text = refusing->lastErrorClass == QLatin1String("credentials-refused")
                         ? tr("%3 refuses our credentials (%1) since %2: reminders wait and none is "
                              "dead-lettered. Fix the partner token; they resume by themselves.")
                               .arg(status, sinceText, thePartner)
                         : tr("%3 refuses every reminder (%1) since %2: reminders wait and none is "
                              "dead-lettered. Check what changed at the partner or in our requests; they resume "
                              "once it accepts one.")
                               .arg(status, sinceText, thePartner);
        return alert;
    }
    if (forMs >= thresholds.partnerDownAfterMs || refusingAll) {
        alert.severity = Severity::Alert;
        alert.text = (who.isEmpty() ? tr("%4 down for %1 (%2): %3; do not redrive yet.")
                                          .arg(formatDuration(forMs), facts, doing, partner)
                                    : tr("%5 failing %1 for %2 (%3): %4; do not redrive yet.")
                                          .arg(who, formatDuration(forMs), facts, doing, partner));
    } else {
        // Not long enough to call it an outage: a warning, which turns into the alert.
        alert.kind = HealthAlert::Kind::PartnerFailing;
        alert.severity = Severity::Warning;
        alert.text =
            tr("%5 failing for %1 (%2): the circuit breaker is open, %3. An outage alert follows "
               "after %4.")
                .arg(formatDuration(forMs), facts, doing, formatDuration(thresholds.partnerDownAfterMs), partner);
        if (holding == 0)
            alert.text =
                tr("%5 failing for %1 (%2): %3. An outage alert follows after %4.")
                    .arg(formatDuration(forMs), facts, doing, formatDuration(thresholds.partnerDownAfterMs), partner);
    }
    return alert;
}

} // namespace

WorkerTally WorkerTally::of(const QList<WorkerRecord> &workers, qint64 nowMs)
{
    WorkerTally tally;
    for (const WorkerRecord &worker : workers) {
        const QString status = worker.status(nowMs);
        if (status == QLatin1String("running"))
            ++tally.running;
        else if (status == QLatin1String("paused"))
            ++tally.paused;
        else if (status == QLatin1String("gone"))
            ++tally.gone;
        else
            ++tally.stopped;
        if (worker.isHoldingBack(nowMs))
            ++tally.holdingBack;
    }
    return tally;
}

QString WorkerTally::summary() const
{
    if (total() == 0)
        return tr("No worker on this store");
    QStringList parts;
    if (running)
        parts << (holdingBack && !paused ? tr("%1 running (%2 holding back)").arg(running).arg(holdingBack)
                                         : tr("%1 running").arg(running));
    if (paused)
        parts << tr("%1 paused").arg(paused);
    if (gone)
        parts << tr("%1 gone").arg(gone);
    if (stopped)
        parts << tr("%1 stopped").arg(stopped);
    return formatQuantity(total(), tr("worker"), tr("workers")) + QStringLiteral(": ") +
           parts.join(QStringLiteral(", "));
}

Severity WorkerTally::severity() const
{
    if (live() == 0)
        return total() > 0 && gone > 0 ? Severity::Alert : Severity::Warning;
    if (holdingBack > 0)
        return Severity::Alert;
    if (gone > 0 || paused > 0)
        return Severity::Warning;
    return Severity::Good;
}

HealthThresholds HealthThresholds::fromSettings()
{
    const Settings settings;
    HealthThresholds thresholds;
    thresholds.partnerDownAfterMs = qint64(settings.partnerDownAlertSeconds()) * 1000;
    thresholds.oldestAgeLimitMs = qint64(settings.oldestAgeAlertSeconds()) * 1000;
    thresholds.partnerFailingSends = settings.partnerFailingAlertSends();
    return thresholds;
}

QList<HealthAlert> healthAlerts(const std::optional<DeliveryStats> &stats, const QList<WorkerRecord> &workers,
                                qint64 nowMs, const HealthThresholds &thresholds)
{
    QList<HealthAlert> alerts;
    const WorkerTally tally = WorkerTally::of(workers, nowMs);
    QList<WorkerRecord> failing;
    std::copy_if(workers.cbegin(), workers.cend(), std::back_inserter(failing),
                 [nowMs](const WorkerRecord &worker) { return isFailing(worker, nowMs); });
    const bool refusingAll =
        stats && stats->failedSendsLast5Min >= thresholds.partnerFailingSends && stats->appliedLast5Min == 0;
    if (!failing.isEmpty())
        alerts << partnerAlert(failing, tally.live(), nowMs, thresholds, refusingAll);

    if (stats) {
        const qint64 waiting = stats->queue.ready + stats->queue.delayed + stats->queue.inFlight;
        // Workers that crashed or were killed, and none left: nothing delivers until one starts.
        if (tally.live() == 0 && tally.gone > 0 && waiting > 0) {
            const auto last =
                std::max_element(workers.cbegin(), workers.cend(), [](const auto &a, const auto &b) {
                    return a.heartbeatAtMs < b.heartbeatAtMs;
                });
            alerts << HealthAlert{
                HealthAlert::Kind::NoWorker, Severity::Alert,
                tr("No worker is running: %1 wait. The last one (%2) stopped sending heartbeats "
                   "%3 ago without saying it stopped. Start one on the Worker page or run once "
                   "worker.")
                    .arg(formatQuantity(waiting, tr("message"), tr("messages")), last->id,
                         formatDuration(nowMs - last->heartbeatAtMs))};
        }
        if (const auto age = stats->queue.oldestReadyAgeMs; age && *age > thresholds.oldestAgeLimitMs) {
            QString why;
            if (tally.live() == 0)
                why = tr("no worker is running.");
            else if (tally.holdingBack > 0 || !failing.isEmpty())
                why = tr("the workers are holding back from a failing partner.");
            else
                why = tr("the workers are not keeping up.");
            alerts << HealthAlert{
                HealthAlert::Kind::OldestWaiting, Severity::Alert,
                tr("The oldest ready message has waited %1 (alert above %2): %3")
                    .arg(formatDuration(*age), formatDuration(thresholds.oldestAgeLimitMs), why)};
        }
        // The history tells the same story when no worker reports one (workers that are
        // gone, or of a version before heartbeats carried it): the partner refuses everything.
        if (failing.isEmpty() && refusingAll)
            alerts << HealthAlert{
                HealthAlert::Kind::PartnerDown, Severity::Alert,
                tr("The partner keeps failing: %1 failed sends and nothing applied in the last "
                   "5 minutes")
                        .arg(formatCount(stats->failedSendsLast5Min)) +
                    (tally.live() == 0 ? tr("; no worker is running, so nothing retries until "
                                            "one starts.")
                                       : tr("."))};
        if (stats->inDoubt > 0)
            alerts << HealthAlert{HealthAlert::Kind::InDoubt, Severity::Warning,
                                  stats->inDoubt == 1
                                      ? tr("1 event in doubt needs an operator (see the In doubt page).")
                                      : tr("%1 events in doubt need an operator (see the In doubt page).")
                                            .arg(formatCount(stats->inDoubt))};
    }
    std::stable_sort(alerts.begin(), alerts.end(), [](const HealthAlert &a, const HealthAlert &b) {
        return int(a.severity) > int(b.severity);
    });
    return alerts;
}

} // namespace once::ui
