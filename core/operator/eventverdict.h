#pragma once

#include "operator/inspector.h"

#include <QString>

namespace once {

// The answer to "did this user get two reminders?", in words a support agent can read to
// a customer. The console's story, its export and `once history` all word it here.
struct Verdict
{
    enum class Kind
    {
        Delivered,  // one effect at the partner
        Pending,    // not delivered yet
        InDoubt,    // an operator must decide
        Dead,       // dead-lettered
        Uncertain,  // the partner received several calls with the key that may each have taken effect and
                    // whether it honours the key is not recorded, or a claim ran out without an outcome:
                    // whether the partner acted is not known
        Duplicated, // several calls with the key may each have taken effect, at a partner that does not
                    // honour it
        Expired,    // not sent: its reminder expired first (an outcome, not a failure)
    };
    Kind kind = Kind::Pending;
    QString text;
    // The same answer in plain words for the customer on the phone, with local times and
    // no jargon ("We sent this once; our partner confirmed it at 15:30.").
    QString customerText;
    // Calls that may have acted at the partner: accepted ones, ones written and left
    // without an answer, and ones whose worker died before recording them. A refused
    // connection, a 429, a 5xx or a rejection did not act and is not counted.
    int possibleEffects = 0;
};

// "delivered", "pending", "in_doubt", "dead", "uncertain", "duplicated", "expired": for JSON.
QString verdictKindName(Verdict::Kind kind);

// Which zone a verdict's times are in: this computer's (what every other time on the
// console and in `once history` is in), or UTC when the console is told to show UTC.
enum class VerdictClock
{
    Local,
    Utc
};

// "12 ms", "1.2 s", "3 min 5 s".
QString preciseDuration(qint64 ms);

// event.partner and event.partnerHonoursKey (as Inspector::event fills them) decide how
// several calls with the same key are read.
Verdict eventVerdict(const EventRow &event, const QList<Attempt> &attempts, VerdictClock clock = VerdictClock::Local);

} // namespace once
