#include "session/redrivereadiness.h"

#include "display/humanunits.h"

#include "alerting/workertally.h"

#include <QCoreApplication>

namespace once::ui {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("once::ui::RedriveReadiness", text);
}

QString sendsText(qint64 n)
{
    return n == 1 ? tr("1 send") : tr("%1 sends").arg(formatCount(n));
}

} // namespace

RedriveReadiness assessRedriveReadiness(const QList<WorkerRecord> &workers, const PartnerActivity &partner,
                                        qint64 nowMs)
{
    RedriveReadiness readiness;
    const WorkerTally tally = WorkerTally::of(workers, nowMs);
    readiness.runningWorkers = tally.running;
    readiness.pausedWorkers = tally.paused;
    readiness.holdingBackWorkers = tally.runningHoldingBack;
    readiness.failingSinceMs = tally.holdingBackSinceMs;
    if (readiness.runningWorkers > 0) {
        readiness.workersText = readiness.runningWorkers == 1
                                    ? tr("1 running on this store")
                                    : tr("%1 running on this store").arg(readiness.runningWorkers);
        if (readiness.holdingBackWorkers > 0)
            readiness.workersText +=
                readiness.holdingBackWorkers == readiness.runningWorkers
                    ? tr(", all holding back (circuit breaker open)")
                    : tr(", %1 holding back (circuit breaker open)").arg(readiness.holdingBackWorkers);
    } else if (readiness.pausedWorkers > 0) {
        readiness.workersText = tr("none running on this store (%1 paused)").arg(readiness.pausedWorkers);
    } else {
        readiness.workersText = tr("none running on this store");
    }

    const qint64 windowSeconds = std::max<qint64>(1, (nowMs - partner.sinceMs + 500) / 1000);
    const QString window = windowSeconds == 60 ? tr("last minute") : tr("last %1 s").arg(windowSeconds);
    const QString lastAccepted = partner.lastAcceptedAtMs > 0
                                     ? tr("last accepted %1").arg(formatDisplayTime(partner.lastAcceptedAtMs))
                                     : tr("none accepted in the last day");
    const qint64 accepted = partner.sends - partner.failed;
    if (partner.sends == 0) {
        readiness.partner = RedriveReadiness::Partner::Quiet;
        readiness.partnerText = tr("not known: no sends in the %1; %2").arg(window, lastAccepted);
    } else if (accepted > 0) {
        readiness.partner = RedriveReadiness::Partner::Answering;
        readiness.partnerText =
            tr("answering: %1 %2, %3 failed; %4")
                .arg(window, sendsText(partner.sends), formatCount(partner.failed), lastAccepted);
    } else {
        readiness.partner = RedriveReadiness::Partner::Failing;
        readiness.partnerText =
            tr("not answering: %1 %2, all failed; %3").arg(window, sendsText(partner.sends), lastAccepted);
    }

    const bool worker = readiness.runningWorkers > 0;
    using Partner = RedriveReadiness::Partner;
    using Severity = RedriveReadiness::Severity;
    if (!worker && readiness.partner != Partner::Answering) {
        readiness.severity = Severity::Warning;
        readiness.warning =
            readiness.partner == Partner::Failing
                ? tr("<b>Nothing will deliver these now.</b> No worker runs on this store, and every send to "
                     "the "
                     "partner in the %1 failed. They wait on the queue; when a worker starts, they die again "
                     "if the "
                     "partner still fails.")
                      .arg(window)
                : tr("<b>Nothing will deliver these now.</b> No worker runs on this store, and no send in "
                     "the %1 "
                     "shows that the partner answers. They wait on the queue until a worker starts "
                     "(Worker page, or once worker).")
                      .arg(window);
    } else if (!worker) {
        readiness.severity = Severity::Caution;
        readiness.warning = tr("No worker runs on this store: they wait on the queue until one starts "
                               "(Worker page, or once worker).");
    } else if (readiness.holdingBackWorkers == readiness.runningWorkers) {
        // Their breakers say more than the last minute's sends: they stopped sending.
        readiness.severity = Severity::Warning;
        const QString since = readiness.failingSinceMs > 0
                                  ? tr(" since %1").arg(formatDisplayTime(readiness.failingSinceMs))
                                  : QString();
        readiness.warning =
            tr("<b>The workers are holding back:</b> their circuit breakers opened after failed "
               "sends%1. Redriven now, these wait until the partner answers a probe, then go out "
               "at once. Wait until it answers, or redrive a few at a low rate.")
                .arg(since);
    } else if (readiness.partner == Partner::Failing) {
        readiness.severity = Severity::Warning;
        readiness.warning =
            tr("<b>The partner is not answering:</b> every send in the %1 failed. Redriven now, "
               "these use up their attempts and die again. Wait until it answers, or redrive a few "
               "at a low rate to try it.")
                .arg(window);
    }
    return readiness;
}

} // namespace once::ui
