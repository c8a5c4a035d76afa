#pragma once

#include "alerting/alertrules.h"

#include <QString>

namespace once {

// An alert in words for people, the same in the console's banner and tray, `once alerts`
// and the notifications `once watch` sends: what happens, and what to do about it
// ("Partner acme down for 3 min (12 failed sends in a row, last http-5xx): the workers are
// holding back and retry by themselves; do not redrive yet.").
QString alertText(const Alert &alert, qint64 nowMs);
// A short title for a notification's subject: "Partner acme down", "No worker running".
QString alertTitle(const Alert &alert);

} // namespace once
