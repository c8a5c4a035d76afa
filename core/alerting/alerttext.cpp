#include "alerting/alerttext.h"

#include "text/quantities.h"

#include <QCoreApplication>

namespace once {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("once::Alerts", text);
}

QString workersText(int count)
{
    return count == 1 ? tr("the worker") : tr("%1 workers").arg(formatCount(count));
}

QString waitingText(qint64 waiting)
{
    return waiting == 1 ? tr("1 message waits") : tr("%1 messages wait").arg(formatCount(waiting));
}

// The name a partners file gives; a worker started with --partner URL is named by its URL,
// which says nothing a person needs and may carry a token in its path: not shown.
QString shownPartner(const Alert &alert)
{
    return alert.partner.contains(QLatin1String("://")) ? QString() : alert.partner;
}

QString partnerText(const Alert &alert, bool capital)
{
    if (!shownPartner(alert).isEmpty())
        return tr("Partner %1").arg(shownPartner(alert));
    return capital ? tr("The partner") : tr("the partner");
}

QString partnerDownText(const Alert &alert, qint64 nowMs)
{
    const QString forText = formatDuration(alert.value);
    if (alert.refusesEveryone) {
        const QString status = alert.lastHttpStatus ? tr("HTTP %1").arg(alert.lastHttpStatus) : tr("a refusal");
        return alert.lastErrorClass == QLatin1String("credentials-refused")
                   ? tr("%1 refuses our credentials (%2) for %3: reminders wait and none is dead-lettered. Fix the "
                        "partner token; they resume by themselves.")
                         .arg(partnerText(alert, true), status, forText)
                   : tr("%1 refuses every reminder (%2) for %3: reminders wait and none is dead-lettered. Check what "
                        "changed at the partner or in our requests; they resume once it accepts one.")
                         .arg(partnerText(alert, true), status, forText);
    }
    QString facts = alert.failedInARow == 1 ? tr("1 failed send")
                                            : tr("%1 failed sends in a row").arg(formatCount(alert.failedInARow));
    if (!alert.lastErrorClass.isEmpty())
        facts += tr(", last %1").arg(alert.lastErrorClass);
    // The last failure long ago: nothing has been sent since (all dead-lettered, say).
    if (alert.lastFailureAtMs > 0 && nowMs - alert.lastFailureAtMs >= 60000)
        facts += tr(" %1 ago").arg(formatDuration(nowMs - alert.lastFailureAtMs));
    const int count = alert.failingWorkers;
    QString doing;
    if (alert.holdingWorkers == count)
        doing = count == 1 ? tr("the worker is holding back and retries by itself")
                           : tr("%1 are holding back and retry by themselves").arg(workersText(count));
    else
        doing = count == 1 ? tr("the worker keeps retrying by itself")
                           : tr("%1 keep retrying by themselves").arg(workersText(count));
    const QString partner = shownPartner(alert).isEmpty() ? tr("Partner") : tr("Partner %1").arg(shownPartner(alert));
    if (alert.severity == AlertSeverity::Critical) {
        if (count < alert.liveWorkers)
            return tr("%1 failing for %2 of %3 workers for %4 (%5): %6; do not redrive yet.")
                .arg(partner)
                .arg(count)
                .arg(alert.liveWorkers)
                .arg(forText, facts, doing);
        return tr("%1 down for %2 (%3): %4; do not redrive yet.").arg(partner, forText, facts, doing);
    }
    // Not long enough to call it an outage: a warning, which turns into the alert.
    if (alert.holdingWorkers > 0)
        return tr("%1 failing for %2 (%3): the circuit breaker is open, %4. An outage alert follows after %5.")
            .arg(partner, forText, facts, doing, formatDuration(alert.threshold));
    return tr("%1 failing for %2 (%3): %4. An outage alert follows after %5.")
        .arg(partner, forText, facts, doing, formatDuration(alert.threshold));
}

} // namespace

QString alertText(const Alert &alert, qint64 nowMs)
{
    switch (alert.rule) {
    case AlertRule::PartnerDown:
        return partnerDownText(alert, nowMs);
    case AlertRule::PartnerFailingSends:
        return tr("The partner keeps failing: %1 failed sends and nothing applied in the last 5 minutes")
                   .arg(formatCount(alert.value)) +
               (alert.liveWorkers == 0 ? tr("; no worker is running, so nothing retries until one starts.")
                                       : tr("."));
    case AlertRule::NoWorker:
        if (alert.lastWorkerId.isEmpty())
            return tr("No worker is running: %1, and none has run on this store. Start one (once worker, or "
                      "the console's Worker page).")
                .arg(waitingText(alert.waiting));
        return tr("No worker is running: %1. The last one (%2) stopped sending heartbeats %3 ago. Start one "
                  "(once worker, or the console's Worker page).")
            .arg(waitingText(alert.waiting), alert.lastWorkerId,
                 formatDuration(nowMs - alert.lastHeartbeatAtMs));
    case AlertRule::OldestReady: {
        const QString why = alert.cause == Alert::Cause::NoWorker      ? tr("no worker is running.")
                            : alert.cause == Alert::Cause::HoldingBack ? tr("the workers are holding back from a "
                                                                            "failing partner.")
                                                                       : tr("the workers are not keeping up.");
        return tr("The oldest ready message has waited %1 (alert above %2): %3")
            .arg(formatDuration(alert.value), formatDuration(alert.threshold), why);
    }
    case AlertRule::LatenessP95:
        return tr("Reminders are late: 95 % of the last hour's were accepted up to %1 after their scheduled time "
                  "(alert above %2). Look at the workers' pace and the partner's rate.")
            .arg(formatDuration(alert.value), formatDuration(alert.threshold));
    case AlertRule::InDoubt:
        return (alert.waiting == 1 ? tr("1 event in doubt needs an operator")
                                   : tr("%1 events in doubt need an operator").arg(formatCount(alert.waiting))) +
               tr(": the oldest has waited %1. Check them at the partner and resolve them (once in-doubt, or the "
                  "console's In doubt page).")
                   .arg(formatDuration(alert.value));
    case AlertRule::DeadLetters:
        return tr("%1 in the last 15 minutes (alert at %2): look at their reasons before redriving (once dlq, or "
                  "the console's Dead letters page).")
            .arg(formatQuantity(alert.value, tr("reminder dead-lettered"), tr("reminders dead-lettered")))
            .arg(alert.threshold);
    case AlertRule::StoreFailing:
        return tr("The store has not answered for %1: %2. Workers cannot claim or record; nothing is sent until it "
                  "answers.")
            .arg(formatDuration(alert.value), alert.storeError);
    case AlertRule::RemindEvery:
        break;
    }
    return {};
}

QString alertTitle(const Alert &alert)
{
    const QString partner = shownPartner(alert).isEmpty() ? tr("Partner") : tr("Partner %1").arg(shownPartner(alert));
    switch (alert.rule) {
    case AlertRule::PartnerDown:
        if (alert.refusesEveryone)
            return tr("%1 refusing every reminder").arg(partner);
        return alert.severity == AlertSeverity::Critical ? tr("%1 down").arg(partner) : tr("%1 failing").arg(partner);
    case AlertRule::PartnerFailingSends:
        return tr("Partner failing every send");
    case AlertRule::NoWorker:
        return tr("No worker running");
    case AlertRule::OldestReady:
        return tr("Messages waiting too long");
    case AlertRule::LatenessP95:
        return tr("Reminders late");
    case AlertRule::InDoubt:
        return tr("Events in doubt");
    case AlertRule::DeadLetters:
        return tr("Reminders dead-lettered");
    case AlertRule::StoreFailing:
        return tr("Store not answering");
    case AlertRule::RemindEvery:
        break;
    }
    return {};
}

} // namespace once
