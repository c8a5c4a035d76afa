#include "operator/eventverdict.h"

#include "store/database.h"

#include <QCoreApplication>
#include <QLocale>

namespace once {

namespace {

QString tr(const char *text)
{
    return QCoreApplication::translate("once::EventVerdict", text);
}

// English plurals by hand: without a loaded translation, tr()'s %n leaves "(s)" in the text.
QString counted(qint64 n, const char *one, const char *many)
{
    return n == 1 ? tr(one) : tr(many).arg(QLocale(QLocale::English).toString(n));
}

QString suppressedText(qint64 duplicates)
{
    if (duplicates == 0)
        return tr("no duplicate deliveries");
    return counted(duplicates, "1 duplicate delivery suppressed", "%1 duplicate deliveries suppressed");
}

// What the history says of the calls made to the partner for one key.
struct Calls
{
    int received = 0;     // requests the partner got (a refused connection never reached it)
    int accepted = 0;     // of them, answered 2xx
    int unanswered = 0;   // of them, written without an answer (in doubt)
    int resentAfterDeath = 0; // a holder died between claim and record: it may have called too
    bool markedDelivered = false;
    QString discardedBy; // the last operator decision, when it was to discard

    int failed() const { return received - accepted - unanswered; }
    int total() const { return received + resentAfterDeath; }

    // "1 failed, 1 accepted"
    QString breakdown() const
    {
        QStringList parts;
        if (failed() > 0)
            parts << tr("%1 failed").arg(failed());
        if (unanswered > 0)
            parts << tr("%1 unanswered").arg(unanswered);
        if (resentAfterDeath > 0)
            parts << counted(resentAfterDeath, "1 by a worker that died before recording it",
                             "%1 by workers that died before recording them");
        if (accepted > 0)
            parts << tr("%1 accepted").arg(accepted);
        return parts.join(QStringLiteral(", "));
    }
};

Calls callsOf(const QList<Attempt> &attempts)
{
    Calls calls;
    for (const Attempt &a : attempts) {
        if (a.step == QLatin1String("operator"))
            calls.discardedBy = a.outcome == QLatin1String("discarded")
                                    ? (a.workerId.isEmpty() ? tr("an operator") : a.workerId)
                                    : QString();
        if (a.step == QLatin1String("send")) {
            if (a.errorClass == QLatin1String("connect-failed"))
                continue;
            ++calls.received;
            if (a.outcome == QLatin1String("applied"))
                ++calls.accepted;
            else if (a.outcome == QLatin1String("in-doubt") || a.outcome == QLatin1String("held"))
                ++calls.unanswered;
        } else if (a.step == QLatin1String("claim") && a.outcome == QLatin1String("resend")) {
            ++calls.resentAfterDeath;
        } else if (a.step == QLatin1String("operator") && a.outcome == QLatin1String("marked-delivered")) {
            calls.markedDelivered = true;
        }
    }
    return calls;
}

QString partnerOf(const EventRow &event)
{
    return event.partner.isEmpty() ? tr("its partner (no worker on record names it)") : event.partner;
}

// Applied, after more than one call with the same key: how many effects depends on the
// partner alone, so the verdict says what the operator recorded about it.
Verdict severalCallsVerdict(const EventRow &event, const Calls &calls, const QString &duplicates)
{
    const QString received = tr("the partner received %1 calls with the same key (%2)")
                                 .arg(calls.total())
                                 .arg(calls.breakdown());
    Verdict verdict;
    switch (event.partnerHonoursKey) {
    case KeyHonouring::Honoured:
        verdict.kind = Verdict::Kind::Delivered;
        verdict.text = tr("Delivered once: %1, and %2 honours Idempotency-Key, so it acted once; %3")
                           .arg(received, partnerOf(event), duplicates);
        break;
    case KeyHonouring::Ignored:
        verdict.kind = Verdict::Kind::Duplicated;
        verdict.text = tr("May have been delivered %1 times: %2, and %3 does not honour Idempotency-Key; %4")
                           .arg(calls.total())
                           .arg(received, partnerOf(event), duplicates);
        break;
    case KeyHonouring::Unknown:
        verdict.kind = Verdict::Kind::Uncertain;
        verdict.text = tr("Accepted, but %1; one effect only if it honours Idempotency-Key, which nobody has "
                          "recorded for %2; %3")
                           .arg(received, partnerOf(event), duplicates);
        break;
    }
    return verdict;
}

} // namespace

QString preciseDuration(qint64 ms)
{
    if (ms < 1000)
        return tr("%1 ms").arg(ms);
    if (ms < 60 * 1000) {
        const double seconds = double(ms) / 1000.0;
        // "12 s" rather than "12.0 s"; one decimal below ten seconds, where it matters.
        return seconds < 10 ? tr("%1 s").arg(seconds, 0, 'f', 1) : tr("%1 s").arg(qRound(seconds));
    }
    const qint64 totalSeconds = ms / 1000;
    if (totalSeconds < 3600)
        return tr("%1 min %2 s").arg(totalSeconds / 60).arg(totalSeconds % 60);
    return tr("%1 h %2 min").arg(totalSeconds / 3600).arg((totalSeconds % 3600) / 60);
}

Verdict eventVerdict(const EventRow &event, const QList<Attempt> &attempts)
{
    const Calls calls = callsOf(attempts);
    // The ledger's counter, not the history: it is what the claim itself counted.
    const QString suppressed = suppressedText(event.duplicates);
    const int inDoubtCalls = calls.unanswered + calls.resentAfterDeath;
    const QString inDoubtNote =
        inDoubtCalls ? counted(inDoubtCalls, "1 earlier call in doubt, resent with the same key",
                               "%1 earlier calls in doubt, resent with the same key")
                     : QString();

    Verdict verdict;
    if (event.state == LedgerState::Applied) {
        if (calls.accepted == 0 && calls.markedDelivered) {
            verdict.kind = Verdict::Kind::Delivered;
            verdict.text = tr("Delivered once, on an operator's word (marked delivered; %1)").arg(suppressed);
        } else if (calls.total() > 1) {
            // Beside "the partner received 2 calls", "no duplicate deliveries" would read
            // as a contradiction: say which duplicates these are.
            const QString fromQueue = event.duplicates == 0
                                          ? tr("the queue delivered it once")
                                          : counted(event.duplicates, "1 duplicate delivery from the queue suppressed",
                                                    "%1 duplicate deliveries from the queue suppressed");
            verdict = severalCallsVerdict(event, calls, fromQueue);
        } else {
            verdict.kind = Verdict::Kind::Delivered;
            const QString call = calls.accepted == 1 ? tr("1 partner call accepted") : tr("recorded as applied");
            verdict.text = tr("Delivered once (%1; %2)").arg(call, suppressed);
        }
    } else if (event.state == EventState::Queued) {
        verdict.kind = Verdict::Kind::Pending;
        const qint64 now = nowMs();
        verdict.text = tr("Queued, not picked up by a worker yet: enqueued %1 ago").arg(preciseDuration(std::max<qint64>(0, now - event.createdAtMs)));
        if (event.dueAtMs > now)
            verdict.text += tr("; delayed, due at %1 (in %2)").arg(formatTime(event.dueAtMs), preciseDuration(event.dueAtMs - now));
    } else if (event.state == LedgerState::InDoubt) {
        verdict.kind = Verdict::Kind::InDoubt;
        verdict.text = tr("In doubt: an operator must decide (the partner may or may not have it)");
    } else if (event.state == LedgerState::Dead) {
        verdict.kind = Verdict::Kind::Dead;
        QStringList why;
        if (!event.lastErrorClass.isEmpty())
            why << event.lastErrorClass;
        if (calls.received > 1)
            why << tr("the partner received %1 calls with its key, none accepted").arg(calls.received);
        if (inDoubtCalls)
            why << counted(inDoubtCalls, "1 call was in doubt, so the partner may have it",
                           "%1 calls were in doubt, so the partner may have it");
        verdict.text = why.isEmpty() ? tr("Dead-lettered: not delivered")
                                     : tr("Dead-lettered: not delivered (%1)").arg(why.join(QStringLiteral("; ")));
        if (!calls.discardedBy.isEmpty())
            verdict.text += tr("; discarded by %1, so nothing will send it").arg(calls.discardedBy);
    } else if (event.state == LedgerState::Retrying) {
        verdict.kind = Verdict::Kind::Pending;
        verdict.text = tr("Not delivered yet: %1")
                           .arg(counted(std::max(calls.failed() + inDoubtCalls, event.sends),
                                        "1 failed send, retrying", "%1 failed sends, retrying"));
    } else {
        QString detail;
        if (event.claimExpiresAtMs > 0 && event.claimExpiresAtMs <= nowMs()) {
            // Its holder was killed, paused or cut off from the store after claiming it:
            // nobody is sending it, and it may have been sent. "A worker is sending it now"
            // said so for as long as no worker ran to take it over.
            verdict.kind = Verdict::Kind::Uncertain;
            detail =
                event.whatIsKnown() +
                tr("; the next worker to lease it resends it with the same key, or holds it for an operator");
        } else {
            verdict.kind = Verdict::Kind::Pending;
            const QString holder = event.claimedBy.isEmpty() ? tr("a worker") : event.claimedBy;
            detail = event.claimExpiresAtMs > 0 ? tr("%1 claimed it to send it; the claim runs until %2")
                                                      .arg(holder, formatTime(event.claimExpiresAtMs))
                                                : tr("%1 is sending it").arg(holder);
        }
        if (inDoubtCalls)
            detail += QStringLiteral("; ") + inDoubtNote;
        verdict.text = tr("Not delivered yet: %1").arg(detail);
    }
    return verdict;
}

} // namespace once
