#include "operator/eventverdict.h"

#include "store/database.h"
#include "text/quantities.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QLocale>
#include <QTimeZone>

#include <algorithm>

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
    int diedUnrecorded = 0; // a holder died between claim and record: it may have called too
    QList<qint64> effectTimes; // when each call that may have acted was made, in order
    qint64 lastAcceptedAtMs = 0;
    qint64 lastUnansweredAtMs = 0;
    qint64 lastSendAtMs = 0;
    bool markedDelivered = false;
    QString discardedBy; // the last operator decision, when it was to discard
    // What the provider's delivery events said afterwards (once serve's events endpoint).
    qint64 providerDeliveredAtMs = 0;
    QString providerRefused; // the last bounce or failure, as its history row tells it

    int failed() const { return received - accepted - unanswered; }
    int total() const { return received + diedUnrecorded; }
    // A 429, a 5xx, a 401 or a rejection is an answer that nothing was done; only an
    // accepted call, or one whose answer never came, may have acted.
    int possibleEffects() const { return accepted + unanswered + diedUnrecorded; }

    // "1 failed, 1 accepted"
    QString breakdown() const
    {
        QStringList parts;
        if (failed() > 0)
            parts << tr("%1 failed").arg(failed());
        if (unanswered > 0)
            parts << tr("%1 unanswered").arg(unanswered);
        if (diedUnrecorded > 0)
            parts << counted(diedUnrecorded, "1 by a worker that died before recording it",
                             "%1 by workers that died before recording them");
        if (accepted > 0)
            parts << tr("%1 accepted").arg(accepted);
        return parts.join(QStringLiteral(", "));
    }
};

Calls callsOf(const QList<Attempt> &attempts)
{
    Calls calls;
    qint64 lastClaimAtMs = 0;
    for (const Attempt &a : attempts) {
        if (a.step == QLatin1String("operator"))
            calls.discardedBy = a.outcome == QLatin1String("discarded")
                                    ? (a.workerId.isEmpty() ? tr("an operator") : a.workerId)
                                    : QString();
        if (a.step == QLatin1String("send")) {
            if (a.errorClass == QLatin1String("connect-failed"))
                continue;
            ++calls.received;
            calls.lastSendAtMs = a.atMs;
            if (a.outcome == QLatin1String("applied")) {
                ++calls.accepted;
                calls.lastAcceptedAtMs = a.atMs;
                calls.effectTimes << a.atMs;
            } else if (a.outcome == QLatin1String("in-doubt") || a.outcome == QLatin1String("held")
                       || a.errorClass == QLatin1String("in-doubt")) {
                // The last try of an in-doubt send is recorded "transient" with its class.
                ++calls.unanswered;
                calls.lastUnansweredAtMs = a.atMs;
                calls.effectTimes << a.atMs;
            }
        } else if (a.step == QLatin1String("claim")) {
            if (a.outcome == QLatin1String("resend") || a.outcome == QLatin1String("held")) {
                // The dead holder's call, if it made one, left about when it claimed the key.
                ++calls.diedUnrecorded;
                calls.effectTimes << (lastClaimAtMs > 0 ? lastClaimAtMs : a.atMs);
            }
            if (a.outcome == QLatin1String("claimed") || a.outcome == QLatin1String("resend"))
                lastClaimAtMs = a.atMs;
        } else if (a.step == QLatin1String("operator") && a.outcome == QLatin1String("marked-delivered")) {
            calls.markedDelivered = true;
        } else if (a.step == QLatin1String("partner-event")) {
            if (a.outcome == QLatin1String("delivered"))
                calls.providerDeliveredAtMs = a.atMs;
            else if (a.outcome == QLatin1String("bounced") || a.outcome == QLatin1String("failed"))
                calls.providerRefused = a.error;
        }
    }
    std::sort(calls.effectTimes.begin(), calls.effectTimes.end());
    return calls;
}

// The two ways a verdict words a time: in full beside the facts, and as a person says it.
class Clock
{
public:
    explicit Clock(VerdictClock zone) : m_utc(zone == VerdictClock::Utc) {}

    QDateTime at(qint64 ms) const
    {
        const QDateTime utc = QDateTime::fromMSecsSinceEpoch(ms, QTimeZone::utc());
        return m_utc ? utc : utc.toLocalTime();
    }
    // "2026-12-06 15:45:05 CET", as the console shows a time.
    QString full(qint64 ms) const
    {
        if (ms <= 0)
            return {};
        const QDateTime time = at(ms);
        return time.toString(QStringLiteral("yyyy-MM-dd HH:mm:ss ")) + (m_utc ? QStringLiteral("UTC") : time.timeZoneAbbreviation());
    }
    // "15:30" today, "15:30 on 5 December" another day, with seconds when two of the
    // times would otherwise read the same.
    QString spoken(qint64 ms, bool seconds = false) const
    {
        const QDateTime time = at(ms);
        const QDateTime now = at(nowMs());
        const QLocale english(QLocale::English);
        QString text = english.toString(time, seconds ? QStringLiteral("HH:mm:ss") : QStringLiteral("HH:mm"));
        if (time.date() != now.date())
            text += tr(" on %1").arg(english.toString(time.date(), time.date().year() == now.date().year()
                                                                       ? QStringLiteral("d MMMM")
                                                                       : QStringLiteral("d MMMM yyyy")));
        return text;
    }
    // "15:30 and 15:31", "15:30, 15:31 and 15:32"
    QString spokenList(const QList<qint64> &times) const
    {
        bool seconds = false;
        for (qsizetype i = 1; i < times.size(); ++i)
            seconds = seconds || times.at(i) / 60000 == times.at(i - 1) / 60000;
        QStringList words;
        for (const qint64 ms : times)
            words << spoken(ms, seconds);
        if (words.size() < 2)
            return words.join(QString());
        const QString last = words.takeLast();
        return tr("%1 and %2").arg(words.join(QStringLiteral(", ")), last);
    }

private:
    bool m_utc = false;
};

// "twice", "3 times"
QString times(int n)
{
    return n == 2 ? tr("twice") : n == 1 ? tr("once") : tr("%1 times").arg(n);
}

QString partnerOf(const EventRow &event)
{
    return event.partner.isEmpty() ? tr("its partner (no worker on record names it)") : event.partner;
}

// Applied, after more than one call with the same key that may have acted: how many
// effects depends on the partner alone, so the verdict says what the operator recorded
// about it.
Verdict severalEffectsVerdict(const EventRow &event, const Calls &calls, const QString &duplicates, const Clock &clock)
{
    const int effects = calls.possibleEffects();
    const QString received = calls.total() == effects
                                 ? tr("the partner received %1 calls with the same key (%2)")
                                       .arg(calls.total())
                                       .arg(calls.breakdown())
                                 : tr("the partner received %1 calls with the same key (%2), %3 of which may have "
                                      "taken effect")
                                       .arg(calls.total())
                                       .arg(calls.breakdown())
                                       .arg(effects);
    const QString when = clock.spokenList(calls.effectTimes);
    Verdict verdict;
    switch (event.partnerHonoursKey) {
    case KeyHonouring::Honoured:
        verdict.kind = Verdict::Kind::Delivered;
        verdict.text = tr("Delivered once: %1, and %2 honours Idempotency-Key, so it acted once; %3")
                           .arg(received, partnerOf(event), duplicates);
        verdict.customerText = tr("We sent this %1 (at %2), and our partner recognised the repeat: you should "
                                  "have received it once.")
                                   .arg(times(effects), when);
        break;
    case KeyHonouring::Ignored:
        verdict.kind = Verdict::Kind::Duplicated;
        verdict.text = tr("May have been delivered %1 times: %2, and %3 does not honour Idempotency-Key; %4")
                           .arg(effects)
                           .arg(received, partnerOf(event), duplicates);
        verdict.customerText = tr("Our partner may have sent this %1, at %2.").arg(times(effects), when);
        break;
    case KeyHonouring::Unknown:
        verdict.kind = Verdict::Kind::Uncertain;
        verdict.text = tr("Accepted, but %1; one effect only if it honours Idempotency-Key, which nobody has "
                          "recorded for %2; %3")
                           .arg(received, partnerOf(event), duplicates);
        verdict.customerText = tr("You received this at least once. Our partner may have sent it %1, at %2; we "
                                  "are checking whether it sent the repeat.")
                                   .arg(times(effects), when);
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

QString verdictKindName(Verdict::Kind kind)
{
    switch (kind) {
    case Verdict::Kind::Delivered:
        return QStringLiteral("delivered");
    case Verdict::Kind::Pending:
        return QStringLiteral("pending");
    case Verdict::Kind::InDoubt:
        return QStringLiteral("in_doubt");
    case Verdict::Kind::Dead:
        return QStringLiteral("dead");
    case Verdict::Kind::Uncertain:
        return QStringLiteral("uncertain");
    case Verdict::Kind::Duplicated:
        return QStringLiteral("duplicated");
    case Verdict::Kind::Expired:
        return QStringLiteral("expired");
    }
    return {};
}

Verdict eventVerdict(const EventRow &event, const QList<Attempt> &attempts, VerdictClock zone)
{
    const Clock clock(zone);
    const auto fullTime = [&clock](qint64 ms) { return clock.full(ms); };
    const Calls calls = callsOf(attempts);
    // The ledger's counter, not the history: it is what the claim itself counted.
    const QString suppressed = suppressedText(event.duplicates);
    const int inDoubtCalls = calls.unanswered + calls.diedUnrecorded;
    const QString inDoubtNote =
        inDoubtCalls ? counted(inDoubtCalls, "1 earlier call in doubt, resent with the same key",
                               "%1 earlier calls in doubt, resent with the same key")
                     : QString();
    const qint64 appliedAtMs = event.appliedAtMs > 0 ? event.appliedAtMs : calls.lastAcceptedAtMs;
    const QString confirmed = appliedAtMs > 0 ? tr("We sent this once; our partner confirmed it at %1.")
                                                    .arg(clock.spoken(appliedAtMs))
                                              : tr("We sent this once; our partner confirmed it.");

    Verdict verdict;
    if (event.state == LedgerState::Applied) {
        // Beside "the partner received 2 calls", "no duplicate deliveries" would read as a
        // contradiction: say which duplicates these are.
        const QString fromQueue = event.duplicates == 0
                                      ? tr("the queue delivered it once")
                                      : counted(event.duplicates, "1 duplicate delivery from the queue suppressed",
                                                "%1 duplicate deliveries from the queue suppressed");
        if (calls.accepted == 0 && calls.markedDelivered) {
            verdict.kind = Verdict::Kind::Delivered;
            verdict.text = tr("Delivered once, on an operator's word (marked delivered; %1)").arg(suppressed);
            verdict.customerText = tr("Our team confirmed with our partner that this was delivered once.");
        } else if (calls.accepted == 0 && calls.providerDeliveredAtMs > 0 && calls.possibleEffects() <= 1) {
            verdict.kind = Verdict::Kind::Delivered;
            verdict.text = tr("Delivered once, on the provider's word: its delivery event at %1 settled the send that "
                              "had no answer (%2)")
                               .arg(clock.full(calls.providerDeliveredAtMs), suppressed);
            verdict.customerText = tr("We sent this once; our partner reported it delivered at %1.")
                                       .arg(clock.spoken(calls.providerDeliveredAtMs));
        } else if (calls.possibleEffects() > 1) {
            verdict = severalEffectsVerdict(event, calls, fromQueue, clock);
        } else if (calls.total() > 1) {
            // Refused, throttled, failed or rejected calls before the accepted one: answers
            // that nothing was done, so the accepted call is the one effect whatever the
            // partner does with a repeated key.
            verdict.kind = Verdict::Kind::Delivered;
            verdict.text = tr("Delivered once: the partner received %1 calls with the same key (%2), and only the "
                              "accepted one took effect; %3")
                               .arg(calls.total())
                               .arg(calls.breakdown(), fromQueue);
            verdict.customerText = confirmed;
        } else {
            verdict.kind = Verdict::Kind::Delivered;
            const QString call = calls.accepted == 1 ? tr("1 partner call accepted") : tr("recorded as applied");
            verdict.text = tr("Delivered once (%1; %2)").arg(call, suppressed);
            verdict.customerText = confirmed;
        }
        // Accepted is not arrived: what the provider reported afterwards is told, and
        // changes nothing of the once.
        if (!calls.providerRefused.isEmpty()) {
            verdict.text += tr("; afterwards the provider reported: %1").arg(calls.providerRefused);
            verdict.customerText += tr(" It then reported that it could not be delivered.");
        }
    } else if (event.state == EventState::Queued) {
        verdict.kind = Verdict::Kind::Pending;
        const qint64 now = nowMs();
        verdict.text = tr("Queued, not picked up by a worker yet: enqueued %1 ago").arg(preciseDuration(std::max<qint64>(0, now - event.createdAtMs)));
        verdict.customerText = tr("This has not been sent yet; it is waiting its turn.");
        if (event.dueAtMs > now) {
            verdict.text += tr("; delayed, due at %1 (in %2)").arg(clock.full(event.dueAtMs), preciseDuration(event.dueAtMs - now));
            verdict.customerText = tr("This has not been sent yet; it is due to go out at %1.").arg(clock.spoken(event.dueAtMs));
        }
    } else if (event.state == LedgerState::InDoubt) {
        verdict.kind = Verdict::Kind::InDoubt;
        verdict.text = tr("In doubt: an operator must decide (the partner may or may not have it)");
        const qint64 sentAt = calls.lastUnansweredAtMs > 0 ? calls.lastUnansweredAtMs : event.claimedAtMs;
        verdict.customerText = sentAt > 0 ? tr("We sent this at %1 but our partner did not answer; we are checking "
                                               "whether it arrived.")
                                                .arg(clock.spoken(sentAt))
                                          : tr("We may have sent this, but our partner did not answer; we are "
                                               "checking whether it arrived.");
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
        verdict.customerText =
            inDoubtCalls ? tr("We could not confirm this was delivered: our partner did not answer our request at "
                              "%1, and we stopped trying.")
                               .arg(clock.spokenList(calls.effectTimes))
                         : tr("This was not delivered: our partner did not accept it, and we stopped trying.");
    } else if (event.state == LedgerState::Expired) {
        // Its key settled when the expiry was found passed: that is how late a send would
        // have been.
        verdict.kind = Verdict::Kind::Expired;
        const qint64 late = std::max<qint64>(0, event.updatedAtMs - event.scheduledAtMs);
        const QString at = event.expiresAtMs > 0 ? clock.full(event.expiresAtMs) : clock.full(event.updatedAtMs);
        if (calls.possibleEffects() > 0) {
            // An earlier call was left without an answer (or its worker died): it was not
            // sent again, but the partner may have acted on that one.
            verdict.text = tr("Not sent again: expired at %1, %2 late; %3 before, so the partner may have it")
                               .arg(at, formatDuration(late),
                                    counted(calls.possibleEffects(), "1 call that may have acted was made",
                                            "%1 calls that may have acted were made"));
            verdict.customerText = tr("We may have sent this before it became too late to be useful, but have no "
                                      "confirmation; we did not send it again.");
        } else {
            verdict.text = tr("Not sent: expired at %1, %2 late").arg(at, formatDuration(late));
            if (calls.total() > 0)
                verdict.text += tr(" (%1 refused or failed before it expired)")
                                    .arg(counted(calls.total(), "1 partner call", "%1 partner calls"));
            verdict.customerText = tr("This was not sent: by the time we could send it, it was too late to be "
                                      "useful (it was meant for %1).")
                                       .arg(clock.spoken(event.scheduledAtMs));
        }
    } else if (event.state == LedgerState::Retrying) {
        verdict.kind = Verdict::Kind::Pending;
        verdict.text = tr("Not delivered yet: %1")
                           .arg(counted(std::max(calls.failed() + inDoubtCalls, event.sends),
                                        "1 failed send, retrying", "%1 failed sends, retrying"));
        verdict.customerText = inDoubtCalls ? tr("This is not confirmed yet: our partner did not answer us at %1, "
                                                 "and we are checking with it again.")
                                                  .arg(clock.spokenList(calls.effectTimes))
                                            : tr("This has not been delivered yet; our partner was not ready, and we "
                                                 "are trying again.");
    } else {
        QString detail;
        if (event.claimExpiresAtMs > 0 && event.claimExpiresAtMs <= nowMs()) {
            // Its holder was killed, paused or cut off from the store after claiming it:
            // nobody is sending it, and it may have been sent. "A worker is sending it now"
            // said so for as long as no worker ran to take it over.
            verdict.kind = Verdict::Kind::Uncertain;
            detail =
                event.whatIsKnown(fullTime) +
                tr("; the next worker to lease it resends it with the same key, or holds it for an operator");
            verdict.customerText = event.claimedAtMs > 0
                                       ? tr("We may have sent this at %1, but have no confirmation yet; we are "
                                            "checking.")
                                             .arg(clock.spoken(event.claimedAtMs))
                                       : tr("We may have sent this, but have no confirmation yet; we are checking.");
        } else {
            verdict.kind = Verdict::Kind::Pending;
            const QString holder = event.claimedBy.isEmpty() ? tr("a worker") : event.claimedBy;
            detail = event.claimExpiresAtMs > 0 ? tr("%1 claimed it to send it; the claim runs until %2")
                                                      .arg(holder, clock.full(event.claimExpiresAtMs))
                                                : tr("%1 is sending it").arg(holder);
            verdict.customerText = tr("This is being sent right now.");
        }
        if (inDoubtCalls)
            detail += QStringLiteral("; ") + inDoubtNote;
        verdict.text = tr("Not delivered yet: %1").arg(detail);
    }
    verdict.possibleEffects = calls.possibleEffects();
    return verdict;
}

} // namespace once
