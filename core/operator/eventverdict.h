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
        Uncertain,  // the partner received several calls with the key and whether it honours the key is not
                    // recorded, or a claim ran out without an outcome: whether the partner acted is not known
        Duplicated, // the partner received several calls with the key and does not honour it: it may have
                    // acted on each
    };
    Kind kind = Kind::Pending;
    QString text;
};

// "12 ms", "1.2 s", "3 min 5 s".
QString preciseDuration(qint64 ms);

// event.partner and event.partnerHonoursKey (as Inspector::event fills them) decide how
// several calls with the same key are read.
Verdict eventVerdict(const EventRow &event, const QList<Attempt> &attempts);

} // namespace once
